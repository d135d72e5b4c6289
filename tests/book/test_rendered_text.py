"""Numbers and words as the reader reads them in the built pages (issue 22), outside code and typeset maths.

* no machine formats: e-notation (``6.1e+04``, ``1.8416061290e-02``) and carets (``2^(10⁸)``, ``10^6``) in prose,
  tables, captions and glued values;
* no LaTeX left as text (``\\emph``, a bibliography's "emph Attention..."), no raw ``{eval}`` or ``{glue:text}``.

Offenders that today's chapters still have are judged against ``tests/book/allowlist.yml``.
"""

from __future__ import annotations

import html.parser
import re
from pathlib import Path

import _allowlist
import _chromium
import pytest
from conftest import HTML_DIR
from test_browser import PAGES

E_NOTATION = re.compile(r"(?<![\w.#])\d+(?:\.\d+)?[eE][-+]?\d+(?![\w.])")
CARET = re.compile(r"\^\(|(?<=\d)\^(?=\d)")  # 2^(10⁸), 10^6
LATEX = re.compile(r"\\(?:emph|textit|textbf|cite|ref)\b|(?<![\w-])emph [A-Z]|\{eval\}|\{glue:?\w*\}")


class _Prose(html.parser.HTMLParser):
    """The text of a page's article outside code, scripts, typeset maths and the page's navigation."""

    SKIP_TAGS = frozenset({"pre", "code", "script", "style", "kbd", "samp", "nav", "textarea"})
    VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[bool] = []
        self.inside = 0
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.VOID:
            return
        classes = (dict(attrs).get("class") or "").split()
        skip = (
            tag in self.SKIP_TAGS
            or "math" in classes
            or "sig" in classes  # an API signature is code
            or any("highlight" in c for c in classes)
        )
        article = tag == "article" and "bd-article" in classes
        self.stack.append(skip)
        self.inside += article
        if article:
            self.stack[-1] = False

    def handle_endtag(self, tag: str) -> None:
        if tag not in self.VOID and self.stack:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        if not any(self.stack):
            self.parts.append(data)


def prose(page_html: str) -> str:
    """The article's readable text (everything, when the page has no ``article.bd-article``)."""
    start = page_html.find('<article class="bd-article')
    end = page_html.find("</article>", start)
    parser = _Prose()
    parser.feed(page_html[start:end] if start >= 0 and end > start else page_html)
    return " ".join("".join(parser.parts).split())


def offenders(text: str) -> list[str]:
    return (
        [f"e-notation {m.group(0)}" for m in E_NOTATION.finditer(text)]
        + [f"caret in {text[max(m.start() - 6, 0) : m.end() + 6]!r}" for m in CARET.finditer(text)]
        + [f"LaTeX as text {m.group(0)!r}" for m in LATEX.finditer(text)]
    )


def test_the_check_finds_machine_formats_but_not_code_or_maths() -> None:
    page = (
        '<article class="bd-article"><p>The loss is 6.1e+04 and 2^(10⁸); \\emph{x}; emph Attention; 10^6.</p>'
        '<pre>x = 1e-3</pre><span class="math notranslate">\\(2^{(k)}\\)</span><code>1e5</code>'
        '<div class="highlight"><pre>2^(3)</pre></div><p>Version 2.0, e.g. 5e, cell e3.</p></article>'
    )
    assert offenders(prose(page)) == [
        "e-notation 6.1e+04",
        "caret in ' and 2^(10⁸); '",
        "caret in 'on; 10^6.Vers'",
        "LaTeX as text '\\\\emph'",
        "LaTeX as text 'emph A'",
    ]


@pytest.mark.book
@pytest.mark.parametrize("page", PAGES or ["(no build)"])
def test_numbers_and_words_read_as_prose(page: str) -> None:
    path = HTML_DIR / f"{page}.html"
    if not path.is_file():
        _chromium.unavailable(f"no built page {path}: run `make book` first")
    _allowlist.judge(page, "machine formats", offenders(prose(path.read_text())))


def test_pages_list_is_the_browser_tests() -> None:
    assert isinstance(PAGES, list) and all(isinstance(p, str) for p in PAGES)
    assert Path(__file__).with_name("test_browser.py").is_file()
