"""What a reader of the PDF sees: its text (``pdftotext``) and its pages as pictures (``pdftoppm``).

* every chapter is there (its title in the text);
* no fold was printed closed ("Click to show");
* nothing is drawn past the right margin: on each page rendered at 60 dpi (grey), the rightmost ink is within the
  page less its right margin (what overflows a page in print is cut there);
* no decoration is printed as a picture (``pdfimages``): Chromium prints a box's shadow or a blurred clip as a grey
  image, while the book's figures are in colour.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import _chromium

ROOT = Path(__file__).resolve().parents[2]
DPI = 60
MARGIN_IN = 0.6  # tools/print_pdf.py's margins
SLACK_PX = 3


def _tools() -> None:
    for tool in ("pdftotext", "pdftoppm", "pdfimages"):
        if shutil.which(tool) is None:
            _chromium.unavailable(f"{tool} is not installed (apt-get install -y poppler-utils)")


def print_book(page: Path, output: Path) -> Path:
    """``tools/print_pdf.py`` on ``page`` (skips, or fails in CI, without Chromium)."""
    if _chromium.executable() is None:
        _chromium.unavailable("Chromium is not installed (apt-get install -y chromium)")
    sys.path.insert(0, str(ROOT / "tools"))
    from print_pdf import print_pdf

    return print_pdf(page, output)


@dataclasses.dataclass
class Report:
    text: str
    pages: int
    click_to_show: list[int]  # pages that print a closed fold's hint
    past_margin: list[str]  # "page N: ink at X px, margin at Y px"
    grey_images: list[str]  # "page N: W x H" of each single-channel picture

    def missing(self, titles: list[str]) -> list[str]:
        flat = " ".join(self.text.split())
        return [title for title in titles if " ".join(title.split()) not in flat]


def inspect(pdf: Path) -> Report:
    """Text and page pictures of ``pdf``, judged."""
    from PIL import Image

    _tools()
    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    pages = text.split("\f")
    hints = [k + 1 for k, page in enumerate(pages) if "Click to show" in page]
    past: list[str] = []
    with tempfile.TemporaryDirectory(prefix="xorlib-pdf-") as tmp:
        # Plain 8-bit grey pictures (PGM): the same pixels as a PNG, without compressing 300 pages and
        # decompressing them again (15 of the 20 s the PNGs took).
        subprocess.run(["pdftoppm", "-r", str(DPI), "-gray", str(pdf), f"{tmp}/page"], check=True, timeout=600)
        shots = sorted(Path(tmp).glob("page-*.pgm"), key=lambda p: int(p.stem.split("-")[-1]))
        for number, shot in enumerate(shots, start=1):
            image = Image.open(shot).point(lambda v: 255 if v > 235 else 0)  # ink: anything not near white
            box = Image.eval(image, lambda v: 255 - v).getbbox()
            limit = image.width - MARGIN_IN * DPI + SLACK_PX
            if box is not None and box[2] > limit:
                past.append(f"page {number}: ink at {box[2]} px, margin at {limit:.0f} px")
    return Report(text=text, pages=len(shots), click_to_show=hints, past_margin=past, grey_images=_grey_images(pdf))


def _grey_images(pdf: Path) -> list[str]:
    """``page N: W x H`` of each grey picture drawn in ``pdf`` (``pdfimages -list``: page, number, type, width,
    height, colour, ...; an image's soft mask is listed as its own row of type ``smask`` and not counted)."""
    listing = subprocess.run(["pdfimages", "-list", str(pdf)], capture_output=True, text=True, check=True).stdout
    rows = [line.split() for line in listing.splitlines()[2:]]
    return [f"page {row[0]}: {row[3]} x {row[4]}" for row in rows if row[2] == "image" and row[5] == "gray"]
