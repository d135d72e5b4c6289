"""xorlib.plots.style: the palette, figures that fit the book's column, and nothing installed in a reader's kernel."""

from __future__ import annotations

import socket

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest

import xorlib.plots  # noqa: F401  (applies the style)
from xorlib.plots import style


@pytest.fixture(autouse=True)
def _close_figures() -> None:
    yield
    plt.close("all")


def test_the_smallest_text_is_9_px_on_a_phone_and_larger_on_a_desktop() -> None:
    """Issue 22: figure text at least 9 CSS px at 390 px, where a one-panel figure shrinks to the phone's column."""
    natural = style._WIDTH_IN * style._DPI
    smallest = min(matplotlib.rcParams[k] for k in ("xtick.labelsize", "ytick.labelsize", "legend.fontsize"))
    on_phone = smallest / 72 * style._DPI * min(1.0, style._PHONE_COLUMN_PX / natural)
    on_desktop = smallest / 72 * style._DPI * min(1.0, style._COLUMN_PX / natural)
    assert on_phone >= 9.0 and on_desktop >= 12.0, (on_phone, on_desktop)


def test_importing_the_package_applies_the_style() -> None:
    assert matplotlib.rcParams["axes.prop_cycle"].by_key()["color"][:3] == ["#0072B2", "#D55E00", "#009E73"]
    assert matplotlib.rcParams["figure.dpi"] == 100
    assert min(matplotlib.rcParams[k] for k in ("xtick.labelsize", "ytick.labelsize", "legend.fontsize")) >= 9


def test_the_palette_is_okabe_ito() -> None:
    assert len(style.PALETTE) == 8 and len(set(style.PALETTE.values())) == 8
    assert style.PALETTE["vermillion"] == "#D55E00" and style.PALETTE["sky blue"] == "#56B4E9"


@pytest.mark.parametrize(("panels", "per_row", "rows"), [(1, 2, 1), (2, 2, 1), (3, 2, 2), (4, 2, 2), (3, 1, 3)])
def test_subplots_fill_the_column_one_or_two_panels_per_row(panels: int, per_row: int, rows: int) -> None:
    fig, axes = style.subplots(panels, per_row=per_row)
    axes = np.atleast_1d(axes)
    assert len(axes) == panels and len(fig.axes) == panels
    width_px = fig.get_figwidth() * fig.dpi
    assert width_px <= style._COLUMN_PX  # shown at its natural size on a desktop
    lefts = sorted({round(ax.get_position().x0, 2) for ax in axes})
    assert len(lefts) == min(per_row, panels)
    assert fig.get_figheight() == pytest.approx(rows * style._ROW_HEIGHT_IN[min(per_row, panels)])


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"panels": 0}, ValueError),
        ({"per_row": 3}, ValueError),
        ({"figsize": (9, 3)}, TypeError),
        ({"height": "tall"}, TypeError),
    ],
)
def test_subplots_rejects_what_would_make_figures_illegible(kwargs: dict, error: type[Exception]) -> None:
    with pytest.raises(error):
        style.subplots(**kwargs)


@pytest.mark.slow
def test_importing_xorlib_leaves_a_readers_kernel_alone() -> None:
    """No formatter and no IPython hook of the book in a reader's kernel (issue 19): the font probe is the build's."""
    nbformat = pytest.importorskip("nbformat")
    from nbclient import NotebookClient

    with socket.socket() as server:  # the kernel talks over 127.0.0.1 (down in a bare `unshare -n`)
        server.bind(("127.0.0.1", 0))
        server.listen()
        try:
            socket.create_connection(server.getsockname(), timeout=2).close()
        except OSError:
            pytest.skip("127.0.0.1 is unreachable: run `ip link set lo up` first")
    first = "import xorlib, xorlib.plots, matplotlib.pyplot as plt\nfig, ax = plt.subplots(); ax.plot([1, 2])"
    probe = (
        "from matplotlib.figure import Figure\n"
        "shell = get_ipython()\n"
        "hooks = [f for fs in shell.events.callbacks.values() for f in fs if 'xorlib' in getattr(f, '__module__', '')]\n"
        "png = shell.display_formatter.formatters['image/png'].lookup_by_type(Figure)\n"
        "print(len(hooks), getattr(getattr(png, 'func', png), '__module__', '').startswith('xorlib'))"
    )
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(first), nbformat.v4.new_code_cell(probe)]
    NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    assert notebook.cells[1].outputs[0]["text"].strip() == "0 False"
