"""The look of every figure: colour-blind-safe colours, legible fonts, and a width that fits the book's column.

Importing :mod:`xorlib.plots` applies this style (:func:`apply`). A figure made with :func:`subplots` is as wide as
the content column of the built book at a 1280-px window (688 CSS px), so the browser shows it at its natural size:
a 9-pt label is 12.5 px on screen, not the 6 px of a wide figure shrunk to fit. One or two panels per row; a third
panel goes on a new row.

In a notebook, figures are sent to the page as PNG images that carry, as PNG text, the smallest font size (in
points) among the texts drawn; the PNG's resolution field holds its DPI. The book's browser checks read both and
the displayed width to compute the smallest text a reader sees.
"""

from __future__ import annotations

import functools
import importlib
import math
import sys
from collections.abc import Callable

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from cycler import cycler
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from .._checks import check_float, check_int

__all__ = ["PALETTE", "subplots"]

#: Okabe & Ito's eight colours, distinguishable with every common colour-vision deficiency, in the order the
#: figures cycle through them (yellow, the weakest on white, comes last but one).
PALETTE: dict[str, str] = {
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "bluish green": "#009E73",
    "orange": "#E69F00",
    "reddish purple": "#CC79A7",
    "sky blue": "#56B4E9",
    "yellow": "#F0E442",
    "black": "#000000",
}

#: Pixels per inch of every figure: with the width below, one figure pixel is one CSS pixel in the book.
_DPI = 100
#: The content column of the book at a 1280-px window (sphinx-book-theme 1.3): 752 px less 2 x 32 px padding.
_COLUMN_PX = 688
#: Figure width in inches: the column, less a margin for the tight bounding box's padding.
_WIDTH_IN = 6.7
#: Height of one row of panels, in inches, for one and for two panels per row.
_ROW_HEIGHT_IN = {1: 3.2, 2: 2.8}
#: The smallest font of the style (tick labels, legends), in points: 12.5 px at the natural size.
_SMALL_PT = 9.0
#: PNG text key under which a notebook figure records its smallest font size, in points.
_MIN_FONT_KEY = "xorlib-min-font-pt"

_RC = {
    "figure.dpi": _DPI,
    "savefig.dpi": "figure",
    "figure.figsize": (_WIDTH_IN, _ROW_HEIGHT_IN[1]),
    "figure.constrained_layout.use": True,
    "figure.facecolor": "white",
    "savefig.facecolor": "white",
    "axes.prop_cycle": cycler(color=list(PALETTE.values())),
    "image.cmap": "viridis",
    "font.size": 10.0,
    "axes.titlesize": 10.5,
    "axes.labelsize": 10.0,
    "figure.titlesize": 11.0,
    "xtick.labelsize": _SMALL_PT,
    "ytick.labelsize": _SMALL_PT,
    "legend.fontsize": _SMALL_PT,
    "legend.title_fontsize": _SMALL_PT,
    "legend.frameon": False,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": False,
    "lines.linewidth": 1.6,
    "lines.markersize": 5.0,
}


def apply() -> None:
    """Set Matplotlib's defaults to the book's style; in IPython, also tag figures with their smallest font size.

    Called when :mod:`xorlib.plots` is imported; calling it again is harmless.
    """
    mpl.rcParams.update(_RC)
    _install_png_formatter()


def subplots(
    panels: int = 1, *, per_row: int = 2, height: float | None = None, **kwargs: object
) -> tuple[Figure, Axes | np.ndarray]:
    """A figure with ``panels`` axes, one or two per row, as wide as the book's content column.

    Parameters
    ----------
    panels
        Number of axes, at least 1.
    per_row
        Panels side by side, 1 or 2 (more would shrink every label below legibility).
    height
        Height of one row in inches (default 3.2 for one panel per row, 2.8 for two).
    **kwargs
        Passed to :func:`matplotlib.pyplot.subplots` (``sharex``, ``sharey``, ``subplot_kw``, ...).

    Returns
    -------
    fig, axes
        A single :class:`~matplotlib.axes.Axes` when ``panels == 1``, else a flat array of ``panels`` axes, row
        by row (an odd last panel leaves the right half of its row empty).
    """
    panels = check_int("panels", panels, minimum=1, maximum=12)
    per_row = check_int("per_row", per_row, minimum=1, maximum=2)
    columns = min(per_row, panels)
    rows = math.ceil(panels / columns)
    row_height = _ROW_HEIGHT_IN[columns] if height is None else check_float("height", height, minimum=1.0, maximum=8)
    for key in ("figsize", "nrows", "ncols", "layout", "squeeze"):
        if key in kwargs:
            raise TypeError(f"subplots() sets {key!r} itself; pass panels=, per_row= and height= instead")
    fig = plt.figure(figsize=(_WIDTH_IN, row_height * rows), layout="constrained")
    if panels == 1:
        return fig, fig.subplots(**kwargs)
    grid = np.asarray(fig.subplots(rows, columns, squeeze=False, **kwargs)).ravel()
    for spare in grid[panels:]:  # an odd last panel leaves one slot empty
        spare.remove()
    return fig, grid[:panels]


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
        metadata[_MIN_FONT_KEY] = f"{size:.2f}"
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


def _install_png_formatter() -> None:
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
