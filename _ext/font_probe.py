"""The font probe: notebook figures carry, as PNG text, the smallest font size drawn in them (a test instrument).

The book's browser checks (``tests/book/_page_checks.py``) read that size, the PNG's DPI and the displayed width,
and fail a page whose figure text is smaller than 9 CSS px. The probe lives in the build and the tests, never in a
reader's kernel: ``_ext/xorlib_book.py`` points the book build's kernels at an IPython profile whose startup file
calls :func:`install` (``IPYTHONDIR``), and the tests do the same. :func:`install` replaces IPython's PNG formatter
for Matplotlib figures by one that adds the size, and keeps it in place when the inline backend re-registers its own.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable
from pathlib import Path

import matplotlib as mpl
from matplotlib.figure import Figure

#: PNG text key under which a notebook figure records its smallest font size, in points.
FONT_KEY = "xorlib-min-font-pt"


def smallest_font(fig: Figure) -> float | None:
    """The smallest font size, in points, among the non-empty texts drawn in ``fig`` (None when it has no text).

    Only texts that are actually drawn count: hidden tick labels or switched-off axes do not.
    """
    if not isinstance(fig, Figure):
        raise TypeError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
    sizes: list[float] = []
    renderer = fig.canvas.get_renderer() if hasattr(fig.canvas, "get_renderer") else None
    if renderer is None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        renderer = FigureCanvasAgg(Figure(dpi=fig.dpi)).get_renderer()

    def record(gc: object, x: float, y: float, s: str, prop: object, *args: object, **kwargs: object) -> None:
        if str(s).strip():
            sizes.append(float(prop.get_size_in_points()))

    def skip(*args: object, **kwargs: object) -> None:
        return None

    drawing = (
        "draw_path",
        "draw_markers",
        "draw_path_collection",
        "draw_quad_mesh",
        "draw_gouraud_triangles",
        "draw_image",
    )
    saved = {name: renderer.__dict__.get(name) for name in (*drawing, "draw_text", "draw_tex")}
    try:
        for name in drawing:
            setattr(renderer, name, skip)
        renderer.draw_text = record
        renderer.draw_tex = record
        fig.draw(renderer)
    finally:
        for name, value in saved.items():
            if value is None:
                renderer.__dict__.pop(name, None)
            else:
                setattr(renderer, name, value)
    return min(sizes) if sizes else None


def _png_with_font_size(fig: Figure, **kwargs: object) -> str | None:
    """IPython's PNG formatter for figures, plus the smallest font size as PNG text (base64 PNG, like IPython's)."""
    from IPython.core.pylabtools import print_figure

    if not fig.axes and not fig.lines:
        return None
    metadata = dict(kwargs.pop("metadata", None) or {})
    size = smallest_font(fig)
    if size is not None:
        metadata[FONT_KEY] = f"{size:.2f}"
    return print_figure(fig, "png", base64=True, metadata=metadata, **kwargs)


_png_with_font_size.xorlib = True  # type: ignore[attr-defined]


def _wrap(formatter: object) -> Callable[[Figure], str | None] | None:
    """Our formatter with the keyword arguments of IPython's plain PNG one, or None to leave ``formatter`` alone."""
    from IPython.core.pylabtools import print_figure

    if getattr(formatter, "xorlib", False) or getattr(getattr(formatter, "func", None), "xorlib", False):
        return None
    if not (isinstance(formatter, functools.partial) and formatter.func is print_figure):
        return None  # retina, or somebody else's formatter: keep it
    keywords = dict(formatter.keywords)
    if keywords.pop("fmt", "png") != "png":
        return None
    keywords.pop("base64", None)
    return functools.partial(_png_with_font_size, **keywords)


def _register(shell: object) -> None:
    from matplotlib.figure import Figure as _Figure

    png = shell.display_formatter.formatters["image/png"]
    try:
        current = png.lookup_by_type(_Figure)
    except KeyError:
        return  # PNG output is switched off (SVG figures, say): nothing to tag
    ours = _wrap(current)
    if ours is not None:
        png.for_type(_Figure, ours)


def _on_pre_run_cell(*args: object) -> None:
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is not None:
        _register(shell)


def install() -> None:
    """Tag every figure this IPython shell displays as PNG with its smallest font size (no-op outside IPython)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None or not hasattr(shell, "display_formatter"):
        return
    try:
        backend = mpl.get_backend(auto_select=False)
    except TypeError:  # Matplotlib < 3.10
        backend = mpl.rcParams._get("backend")
    if backend in ("inline", "module://matplotlib_inline.backend_inline"):
        # Loading the inline backend registers IPython's figure formatters; do it now, so that ours replaces them
        # here rather than being replaced by them at the first figure.
        importlib.import_module("matplotlib_inline.backend_inline")
    _register(shell)
    callbacks = shell.events.callbacks.get("pre_run_cell", [])
    if _on_pre_run_cell not in callbacks:
        shell.events.register("pre_run_cell", _on_pre_run_cell)


STARTUP = """# Written by _ext/font_probe.py: the book's build and tests tag figures with their smallest font size.
import sys
sys.path.insert(0, {folder!r})
import font_probe
font_probe.install()
"""


def profile(ipython_dir: Path) -> Path:
    """An IPython folder (for ``IPYTHONDIR``) whose default profile installs the probe at startup; returns it."""
    startup = ipython_dir / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    (startup / "00-xorlib-font-probe.py").write_text(STARTUP.format(folder=str(Path(__file__).resolve().parent)))
    return ipython_dir
