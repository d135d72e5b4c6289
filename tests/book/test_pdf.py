"""The whole-book PDF (``make pdf``: ``_build/html/book.pdf``), read as a reader reads it (issue 21).

Its text (``pdftotext``) has every page of the table of contents, by its title, and no closed fold's "Click to
show"; its pages, rendered by ``pdftoppm``, have no ink past the right margin; its pictures (``pdfimages``) are
the figures, no printed shadow. The front page links it. A chapter whose printed pages still overflow is listed
in ``tests/book/allowlist.yml`` (by chapter, not by page number).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import _allowlist
import _chromium
import _pdf_checks
import pytest
from conftest import HTML_DIR
from test_browser import PAGES

PDF = HTML_DIR / "book.pdf"

pytestmark = [pytest.mark.book, pytest.mark.timeout(900)]


def _title(page: str) -> str:
    text = (HTML_DIR / f"{page}.html").read_text()
    text = text[text.find('<article class="bd-article') :]
    match = re.search(r"<h1[^>]*>(.*?)<a class=\"headerlink\"", text, flags=re.S) or re.search(
        r"<h1[^>]*>(.*?)</h1>", text, flags=re.S
    )
    return re.sub(r"<[^>]+>", "", match[1]).strip() if match else page


@functools.cache
def _report() -> _pdf_checks.Report:
    if not PDF.is_file():
        _chromium.unavailable(f"no {PDF}: run `make pdf` (make test does)")
    return _pdf_checks.inspect(PDF)


def test_the_pdf_has_every_page_of_the_book() -> None:
    report = _report()
    titles = [_title(page) for page in PAGES]
    assert report.missing(titles) == [], f"pages missing from the PDF ({report.pages} pages)"


def test_no_fold_is_printed_closed() -> None:
    assert _report().click_to_show == [], "pages that print 'Click to show'"


def test_nothing_runs_past_the_right_margin() -> None:
    report = _report()
    titles = [(page, _title(page)) for page in PAGES]
    pages = report.text.split("\f")

    def chapter_of(number: int) -> str:
        seen = "the front matter"
        for text in pages[:number]:
            flat = " ".join(text.split())
            for page, title in titles:
                if " ".join(title.split()) in flat:
                    seen = page
        return seen

    found = [f"a page of {chapter_of(int(item.split()[1].rstrip(':')))}" for item in report.past_margin]
    _allowlist.judge("book.pdf", "past the right margin", found)


def test_no_decoration_is_printed_as_a_picture() -> None:
    """Every picture in the PDF is a figure (in colour): a shadow or a blurred clip printed as a grey image makes
    the file larger and its printing slower (the print style of ``_static/xorlib.css`` turns them off)."""
    grey = _report().grey_images
    assert grey == [], f"{len(grey)} grey pictures in the PDF, the first {grey[:3]}"


def test_the_front_page_links_the_pdf() -> None:
    intro = (HTML_DIR / "intro.html").read_text()
    assert 'href="book.pdf"' in intro
    assert Path(PDF).stat().st_size > 100_000 if PDF.is_file() else True
