"""The font probe (``_ext/font_probe.py``): figures of the build's kernels carry their smallest font size."""

from __future__ import annotations

import base64
import io
import os
import socket
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
from PIL import Image

from xorlib.plots import style

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "_ext"))

import font_probe  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures() -> None:
    yield
    plt.close("all")


def test_smallest_font_counts_only_drawn_text() -> None:
    fig, ax = style.subplots()
    ax.plot([0, 1], [0, 1], label="a")
    ax.legend()
    assert font_probe.smallest_font(fig) == pytest.approx(style._SMALL_PT)
    ax.set_title("small", fontsize=6.5)
    assert font_probe.smallest_font(fig) == pytest.approx(6.5)
    ax.title.set_visible(False)
    assert font_probe.smallest_font(fig) == pytest.approx(style._SMALL_PT)
    fig2, ax2 = style.subplots()
    ax2.axis("off")
    assert font_probe.smallest_font(fig2) is None
    with pytest.raises(TypeError, match="fig"):
        font_probe.smallest_font(ax)


def test_the_png_carries_its_smallest_font_and_dpi() -> None:
    pytest.importorskip("IPython")
    fig, ax = style.subplots()
    ax.plot([0, 1])
    ax.set_xlabel("x", fontsize=7)
    data = base64.b64decode(font_probe._png_with_font_size(fig, bbox_inches="tight"))
    image = Image.open(io.BytesIO(data))
    assert float(image.info[font_probe.FONT_KEY]) == pytest.approx(7.0)
    assert image.info["dpi"][0] == pytest.approx(100, abs=0.1)
    assert image.size[0] <= style._COLUMN_PX


@pytest.mark.slow
def test_the_builds_kernels_tag_every_figure_from_the_first_one(tmp_path: Path) -> None:
    """In a kernel started with the build's IPython profile: figures made before and after a change of the inline
    backend's options are all tagged."""
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
    saved = os.environ.get("IPYTHONDIR")
    os.environ["IPYTHONDIR"] = str(font_probe.profile(tmp_path / "ipython"))
    try:
        NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    finally:
        if saved is None:
            os.environ.pop("IPYTHONDIR")
        else:
            os.environ["IPYTHONDIR"] = saved
    sizes = []
    for cell in notebook.cells:
        (output,) = [o for o in cell.outputs if "image/png" in o.get("data", {})]
        image = Image.open(io.BytesIO(base64.b64decode(output["data"]["image/png"])))
        sizes.append(float(image.info[font_probe.FONT_KEY]))
    assert sizes == [style._SMALL_PT, 7.0, style._SMALL_PT]
