"""xorlib.plots.style: the palette, figures that fit the book's column, and the font size the browser check reads."""

from __future__ import annotations

import base64
import io
import socket

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
from PIL import Image

import xorlib.plots  # noqa: F401  (applies the style)
from xorlib.plots import style


@pytest.fixture(autouse=True)
def _close_figures() -> None:
    yield
    plt.close("all")


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
    assert style._COLUMN_PX - 40 <= width_px <= style._COLUMN_PX  # shown at (nearly) its natural size
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


def test_smallest_font_counts_only_drawn_text() -> None:
    fig, ax = style.subplots()
    ax.plot([0, 1], [0, 1], label="a")
    ax.legend()
    assert style.smallest_font(fig) == pytest.approx(9.0)
    ax.set_title("small", fontsize=6.5)
    assert style.smallest_font(fig) == pytest.approx(6.5)
    ax.title.set_visible(False)
    assert style.smallest_font(fig) == pytest.approx(9.0)
    fig2, ax2 = style.subplots()
    ax2.axis("off")
    assert style.smallest_font(fig2) is None
    with pytest.raises(TypeError, match="fig"):
        style.smallest_font(ax)


def test_the_png_carries_its_smallest_font_and_dpi() -> None:
    pytest.importorskip("IPython")
    fig, ax = style.subplots()
    ax.plot([0, 1])
    ax.set_xlabel("x", fontsize=7)
    data = base64.b64decode(style._png_with_font_size(fig, bbox_inches="tight"))
    image = Image.open(io.BytesIO(data))
    assert float(image.info[style._MIN_FONT_KEY]) == pytest.approx(7.0)
    assert image.info["dpi"][0] == pytest.approx(100, abs=0.1)
    assert image.size[0] <= style._COLUMN_PX


@pytest.mark.slow
def test_notebook_figures_carry_their_smallest_font_from_the_first_one() -> None:
    """In a real kernel: figures made before and after a change of the inline backend's options are all tagged."""
    nbformat = pytest.importorskip("nbformat")
    from nbclient import NotebookClient

    with socket.socket() as server:  # the kernel talks over 127.0.0.1 (down in a bare `unshare -n`)
        server.bind(("127.0.0.1", 0))
        server.listen()
        try:
            socket.create_connection(server.getsockname(), timeout=2).close()
        except OSError:
            pytest.skip("127.0.0.1 is unreachable: run `ip link set lo up` first")

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell(source)
        for source in (
            "import matplotlib.pyplot as plt\nimport xorlib.plots\nfig, ax = plt.subplots(); ax.plot([1, 2])",
            "fig, ax = xorlib.plots.style.subplots(2); ax[0].set_title('t', fontsize=7)",
            "%config InlineBackend.print_figure_kwargs = {'bbox_inches': 'tight'}\nfig, ax = plt.subplots(); ax.plot([1])",
        )
    ]
    NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    sizes = []
    for cell in notebook.cells:
        (output,) = [o for o in cell.outputs if "image/png" in o.get("data", {})]
        image = Image.open(io.BytesIO(base64.b64decode(output["data"]["image/png"])))
        sizes.append(float(image.info[style._MIN_FONT_KEY]))
    assert sizes == [9.0, 7.0, 9.0]
