"""What a reader sees on a page of the built book: measured in headless Chromium, judged in Python.

:func:`inspect` loads a page at one window width and returns a report (a dict); :func:`problems` turns a report into
a list of findings per check. ``tests/book/test_browser.py`` runs them on every page of the book, and on small synthetic
pages that hold the faults of issue 11 (a raw pipe table, an equation wider than the column, a figure with 6-px
text) to show that the checks catch them.

The checks:

* ``pipe_tables``: no paragraph, list item or text output that is a Markdown pipe table left unrendered;
* ``tables``: every table's cells are padded, so that neighbouring numbers never run together;
* ``overflow``: nothing in the article (at 1280 px) or on the page (at 390 px) reaches past the column or the
  window, except inside a box that scrolls sideways on its own (``overflow-x: auto``), which must itself fit;
* ``equation_width``: at 1280 px every equation fits the column without scrolling (break long displays);
* ``code_width``: at 1280 px no code cell scrolls sideways (about 88 columns fit);
* ``figure_text``: every Matplotlib figure's smallest text, as displayed, is at least :data:`MIN_TEXT_PX` CSS px:
  ``points / 72 * dpi * displayed width / natural width``, from the font size that the build's font probe
  (``_ext/font_probe.py``) writes into the PNG and the PNG's own resolution field;
* ``figure_style``: every Matplotlib figure carries that font-size tag (it was drawn by the book's build);
* ``maths``: MathJax (served from the book itself: the page's own origin) typeset every formula, without errors;
* ``console``: no script error, ``console.error`` or failed load;
* ``tracebacks``: no cell output shows an error.

The checks of issue 22 (each offender a short stable string, judged against ``tests/book/allowlist.yml``):

* ``table_width`` (1280 px): no table of the main text (outside folds) is wider than its column;
* ``figure_text`` (390 px too): a figure's smallest text as displayed on a phone;
* ``screen_width`` (390 px): no equation and no part of the header is wider than the screen (a display
  equation that scrolls inside its box still fails);
* ``exercises``: one "Exercises" heading at most, and never over nothing;
* ``proof_proof``: no "Proof. Proof.";
* ``figure_captions``: every figure of the main text has a numbered caption.
"""

from __future__ import annotations

import base64
import html.parser
import re
import struct
import zlib
from pathlib import Path
from urllib.parse import unquote, urlparse

from _chromium import Page

#: The smallest text a figure may show, in CSS px, at 1280 and at 390 px ("about 9 px"; 0.1 px for rounding).
MIN_TEXT_PX = 8.9
#: The PNG text key of the font probe (``_ext/font_probe.py``; kept in step with ``font_probe.FONT_KEY`` by a test).
FONT_KEY = "xorlib-min-font-pt"

# Runs in the page: waits for MathJax and the images, opens every folded block, then measures.
INSPECT = r"""
(async (mode) => {
  const deadline = Date.now() + 30000;
  const maths = () => [...document.querySelectorAll('span.math, div.math')];
  const mathjaxScripts = [...document.scripts].filter(s => /mathjax/i.test(s.src)).map(s => s.src);
  if (mathjaxScripts.length) {
    while (!(window.MathJax && MathJax.startup && MathJax.startup.promise) && Date.now() < deadline) {
      await new Promise(r => setTimeout(r, 50));
    }
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) { await MathJax.startup.promise; }
  }
  const images = [...document.images];
  await Promise.all(images.map(i => i.complete ? null : new Promise(r => { i.onload = i.onerror = r; })));
  if (mode.open) {
    document.querySelectorAll('details').forEach(d => { d.open = true; });
    document.querySelectorAll('.toggle-hidden').forEach(e => e.classList.remove('toggle-hidden'));
    await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  }
  const article = document.querySelector('article.bd-article') || document.querySelector('main article')
    || document.querySelector('article') || document.body;
  const root = mode.width >= 1000 ? article : document.body;
  const box = root.getBoundingClientRect();
  const limit = mode.width >= 1000 ? {left: box.left, right: box.right} : {left: 0, right: window.innerWidth};
  const describe = (el) => {
    const cls = (typeof el.className === 'string' && el.className.trim())
      ? '.' + el.className.trim().split(/\s+/).slice(0, 3).join('.') : '';
    const text = (el.textContent || '').replace(/\s+/g, ' ').trim().slice(0, 60);
    return `${el.tagName.toLowerCase()}${cls} "${text}"`;
  };
  const kind = (el) => {
    if (el.closest('mjx-container, div.math, .math')) return 'equation';
    if (el.closest('table, .xorlib-table-wrap')) return 'table';
    if (el.closest('div.cell_input')) return 'code cell';
    if (el.closest('.cell_output, .output')) return 'output';
    if (el.closest('pre, .highlight')) return 'code';
    if (el.tagName === 'IMG' || el.closest('figure')) return 'figure';
    return 'other';
  };
  const overflow = [];
  const scrolls = [];
  const special = (el) => el === document.body || el === document.documentElement;
  const range = document.createRange();
  const wide = '.margin, aside.sidebar, .full-width, .sidebar';  // sphinx-book-theme lets these use the margin
  // Reports the outermost elements (or runs of text) that reach past the limit, or past the right edge of a box
  // that hides its overflow (cut off); does not look inside boxes that scroll sideways, but checks that each such
  // box fits. MathJax is measured by the formula it draws (mjx-math), not by its hidden MathML copy.
  const walk = (el, clip, limitRight) => {
    if (el.tagName === 'MJX-ASSISTIVE-MML') return false;
    const style = getComputedStyle(el);
    if (style.display === 'none' || style.visibility === 'hidden' || style.position === 'fixed') return false;
    if (el !== root && el.matches(wide)) limitRight = Math.max(limitRight, window.innerWidth);
    const r = el.getBoundingClientRect();
    const maths = el.tagName === 'MJX-CONTAINER';
    const ox = style.overflowX;
    const scrollBox = (ox === 'auto' || ox === 'scroll') && !special(el);
    const drawn = maths && !scrollBox ? (el.querySelector('mjx-math') || el).getBoundingClientRect() : r;
    const check = (right, what, node) => {
      if (right > limitRight + 1.5) {
        overflow.push({kind: kind(node), what, right: Math.round(right), limit: Math.round(limitRight)});
        return true;
      }
      if (clip && right > clip.right + 1.5) {
        overflow.push({kind: kind(node), what: `${what} is cut off by ${describe(clip.el)}`, right: Math.round(right),
                       limit: Math.round(clip.right)});
        return true;
      }
      return false;
    };
    if (el !== root && r.width > 0 && r.height > 0 && check(drawn.right, describe(el), el)) return true;
    if (scrollBox) {
      // How wide the content is: for maths, the drawn formulas (MathJax's hidden MathML copy does not count).
      let wide = el.scrollWidth > el.clientWidth + 1 ? el.scrollWidth : 0;
      if (kind(el) === 'equation') {
        const formulas = [...(maths ? [el] : el.querySelectorAll('mjx-container'))]
          .map(m => (m.querySelector('mjx-math') || m).getBoundingClientRect().right);
        const right = formulas.length ? Math.max(...formulas) : r.right;
        wide = right > r.right + 1 ? Math.round(right - r.left) : 0;
      }
      if (wide) {
        const longest = Math.max(...(el.textContent || '').split('\n').map(line => line.length));
        scrolls.push({kind: kind(el), what: describe(el), columns: longest, scrollWidth: wide,
                      clientWidth: el.clientWidth});
      }
      return false;
    }
    if (maths) return false;
    if ((ox === 'hidden' || ox === 'clip') && !special(el) && style.display !== 'inline' && r.width > 0) {
      clip = {right: clip ? Math.min(clip.right, r.right) : r.right, el};
    }
    let reported = false;
    for (const node of el.childNodes) {
      if (node.nodeType === Node.TEXT_NODE && node.textContent.trim()) {
        range.selectNodeContents(node);
        const t = range.getBoundingClientRect();
        if (t.width > 0 && check(t.right, `text "${node.textContent.trim().slice(0, 60)}" in ${describe(el)}`, el)) {
          reported = true;
        }
      } else if (node.nodeType === Node.ELEMENT_NODE) {
        reported = walk(node, clip, limitRight) || reported;
      }
    }
    return reported;
  };
  walk(root, null, limit.right);
  const pipeLine = /^\s*\|.*\|.*\|\s*$/;
  const separator = /^\s*\|?\s*:?[-\u2013\u2014]{1,}:?\s*(\|\s*:?[-\u2013\u2014]{1,}:?\s*)+\|?\s*$/;
  const pipeTables = [...article.querySelectorAll('p, li, dd, blockquote, .cell_output pre, .output pre')]
    .filter(e => !e.closest('div.cell_input, .highlight-python, .highlight-ipython3, .highlight-default, code'))
    .filter(e => {
      const lines = (e.textContent || '').split('\n');
      return lines.some(l => separator.test(l)) || lines.filter(l => pipeLine.test(l)).length >= 2;
    })
    .map(e => (e.textContent || '').trim().slice(0, 100));
  const crowdedTables = [...article.querySelectorAll('table')]
    .filter(t => t.rows.length && t.rows[0].cells.length > 1 && t.getBoundingClientRect().width > 0)
    .filter(t => [...t.querySelectorAll('td, th')].slice(0, 40).some(c => {
      const s = getComputedStyle(c);
      return parseFloat(s.paddingLeft) + parseFloat(s.paddingRight) + parseFloat(getComputedStyle(t).borderSpacing) < 6;
    }))
    .map(t => (t.textContent || '').replace(/\s+/g, ' ').trim().slice(0, 80));
  // Issue 22's checks. A table or figure "of the main text" is one outside folded blocks.
  const folded = (el) => !!el.closest('details, .dropdown, .toggle, .tag_hide-input, .tag_hide-output, .tag_hide-cell');
  const headers = (t) => [...(t.tHead || t).querySelectorAll('th')].slice(0, 3)
    .map(c => (c.textContent || '').replace(/\s+/g, ' ').trim().slice(0, 30)).join(' | ')
    || (t.textContent || '').replace(/\s+/g, ' ').trim().slice(0, 60);
  const wideTables = [...article.querySelectorAll('table')]
    .filter(t => !folded(t) && t.getBoundingClientRect().width > 0)
    .map(t => ({what: headers(t), width: Math.round(t.scrollWidth),
                column: Math.round((t.closest('.xorlib-table-wrap, .pst-scrollable-table-container, .cell_output')
                                    || t.parentElement).clientWidth)}))
    .filter(t => t.width > t.column + 1);
  const wideEquations = [...document.querySelectorAll('mjx-container[display="true"]')]
    .map(m => ({m, r: (m.querySelector('mjx-math') || m).getBoundingClientRect()}))
    .filter(({r}) => r.width > mode.width)
    .map(({m, r}) => ({what: ((m.closest('div.math') || m).getAttribute('data-tex')
                               || (m.querySelector('mjx-assistive-mml') || m).textContent || '')
                               .replace(/\s+/g, ' ').trim().slice(0, 50), width: Math.round(r.width)}));
  const wideHeader = [...document.querySelectorAll('.bd-header *, .header-article *')]
    .filter(e => { const r = e.getBoundingClientRect(); const s = getComputedStyle(e);
                   return r.width > 0 && s.visibility !== 'hidden' && !e.closest('.bd-sidebar-primary, .bd-sidebar-secondary, dialog')
                     && r.right > mode.width + 1; })
    .map(e => describe(e).slice(0, 50));
  const exerciseHeadings = [...article.querySelectorAll('h1, h2, h3, h4')]
    .filter(h => /^Exercises#?$/.test((h.textContent || '').trim()))
    .map(h => { const section = h.closest('section');
                const rest = section ? [...section.children].filter(c => c !== h && !/^(SPAN)$/.test(c.tagName)) : [1];
                return {empty: rest.length === 0}; });
  const figures = [...article.querySelectorAll('img')]
    .filter(i => !folded(i) && i.getBoundingClientRect().width > 0 && !i.closest('.xorlib-icon, a.navbar-brand'))
    .map((i, k) => {
      const figure = i.closest('figure');
      const caption = figure && figure.querySelector('figcaption');
      let heading = i; let title = '';
      const section = i.closest('section');
      const h = section && section.querySelector('h1, h2, h3');
      title = h ? (h.textContent || '').replace('#', '').trim().slice(0, 40) : '';
      return {what: `figure ${k + 1} (under "${title}")`, caption: !!caption,
              numbered: !!(caption && caption.querySelector('.caption-number'))};
    });
  const download = document.querySelector('a.btn-download-ipynb-button');
  return {
    url: location.href,
    title: document.title,
    heading: (document.querySelector('main h1, article h1, h1') || {}).textContent || '',
    width: mode.width,  // as asked: a phone page wider than its window widens window.innerWidth
    pageWidth: document.documentElement.scrollWidth,
    mathjaxScripts,
    // Where the page itself comes from: its origin over HTTP, the file: scheme from disk.
    pageOrigin: location.protocol === 'file:' ? 'file:' : location.origin + '/',
    mathjaxVersion: (window.MathJax && MathJax.version) || null,
    maths: maths().length,
    unrendered: maths().filter(e => !e.querySelector('mjx-container')).map(e => e.textContent.slice(0, 80)),
    mathErrors: [...document.querySelectorAll('mjx-merror, mjx-container [data-mjx-error]')].map(
      e => (e.getAttribute('data-mjx-error') || e.textContent).slice(0, 80)),
    images: images.filter(i => i.getBoundingClientRect().width > 0).map(i => ({
      src: i.currentSrc || i.src, ok: i.complete && i.naturalWidth > 0,
      naturalWidth: i.naturalWidth, displayedWidth: i.getBoundingClientRect().width,
      output: !!i.closest('.cell_output, .output')})),
    tracebacks: [...document.querySelectorAll('.output.traceback, .cell_output .traceback, .output .traceback')]
      .map(e => e.textContent.slice(0, 200)),
    tracebackText: [...document.querySelectorAll('.cell_output')].some(
      e => e.textContent.includes('Traceback (most recent call last)')),
    overflow,
    scrolls,
    pipeTables,
    crowdedTables,
    wideTables,
    wideEquations,
    wideHeader,
    exerciseHeadings,
    proofProof: (article.innerText || '').includes('Proof. Proof.')
      || [...article.querySelectorAll('.admonition.dropdown')].some(a => {
           const t = a.querySelector('.admonition-title'); const p = a.querySelector('.admonition-title ~ * p, .admonition-title ~ p');
           return t && /^Proof/.test(t.textContent.trim()) && p && /^Proof\./.test(p.textContent.trim()); }),
    figures,
    download: download ? {href: download.href, hasDownload: download.hasAttribute('download'),
                          visible: download.getBoundingClientRect().width > 0} : null,
  };
})
"""


def inspect(page: Page, url: str, width: int, screenshot: Path | None = None) -> dict:
    """Load ``url`` at ``width`` px (390 px: as a phone), save a screenshot as the reader first sees it, measure."""
    mobile = width < 600
    page.viewport(width, 844 if mobile else 900, mobile=mobile)
    page.navigate(url)
    if screenshot is not None:
        page.evaluate(f"{INSPECT}({{width: {width}, open: false}})")  # wait for MathJax and images
        page.screenshot(screenshot)
    report = page.evaluate(f"{INSPECT}({{width: {width}, open: true}})")  # waits for them too, then opens the folds
    report["console"] = page.console_errors()
    return report


def _png_chunks(data: bytes) -> dict[str, object]:
    """The PNG's text chunks and its pixels per inch (from pHYs), without decoding the image."""
    info: dict[str, object] = {}
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return info
    at = 8
    while at + 8 <= len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind = data[at + 4 : at + 8].decode("latin-1")
        body = data[at + 8 : at + 8 + length]
        at += 12 + length
        if kind == "tEXt" and b"\0" in body:
            key, value = body.split(b"\0", 1)
            info[key.decode("latin-1")] = value.decode("latin-1")
        elif kind == "zTXt" and b"\0" in body:
            key, value = body.split(b"\0", 1)
            info[key.decode("latin-1")] = zlib.decompress(value[1:]).decode("latin-1")
        elif kind == "iTXt" and b"\0" in body:
            key, rest = body.split(b"\0", 1)
            compressed, rest = rest[0], rest[2:]
            _language, rest = rest.split(b"\0", 1)
            _translated, value = rest.split(b"\0", 1)
            info[key.decode("latin-1")] = (zlib.decompress(value) if compressed else value).decode("utf-8")
        elif kind == "pHYs" and length == 9:
            x_per_unit, _y, unit = struct.unpack(">IIB", body)
            if unit == 1:
                info["dpi"] = x_per_unit * 0.0254
        elif kind == "IEND":
            break
    return info


def image_bytes(src: str) -> bytes | None:
    """The bytes of an image by its ``src``: a ``data:`` URI or a ``file:`` URL (None for anything else)."""
    if src.startswith("data:image/png;base64,"):
        return base64.b64decode(src.split(",", 1)[1])
    parsed = urlparse(src)
    if parsed.scheme == "file":
        path = Path(unquote(parsed.path))
        return path.read_bytes() if path.is_file() else None
    return None


def figure_text(image: dict) -> dict | None:
    """For a Matplotlib PNG: its smallest font (pt, or None), DPI and smallest displayed text (px); else None."""
    data = image_bytes(image["src"])
    if data is None:
        return None
    info = _png_chunks(data)
    if not str(info.get("Software", "")).startswith("Matplotlib"):
        return None
    dpi = float(info.get("dpi") or 100.0)
    points = float(info[FONT_KEY]) if FONT_KEY in info else None
    scale = image["displayedWidth"] / image["naturalWidth"] if image["naturalWidth"] else 1.0
    shown = None if points is None else points / 72.0 * dpi * scale
    return {"points": points, "dpi": dpi, "scale": scale, "px": shown}


def problems(report: dict) -> dict[str, list[str]]:
    """Findings of each check for one report (an empty list: the check passes)."""
    width = report["width"]
    found: dict[str, list[str]] = {
        "pipe_tables": [f"raw pipe table: {text!r}" for text in report["pipeTables"]],
        "tables": [f"table cells without padding (numbers run together): {text!r}" for text in report["crowdedTables"]],
        "overflow": [
            f"{item['kind']} reaches {item['right']} px past {item['limit']} px: {item['what']}"
            for item in report["overflow"]
        ],
        "code_width": [
            f"a code cell scrolls sideways ({item['columns']} columns; about 88 fit): {item['what']}"
            for item in report["scrolls"]
            if item["kind"] == "code cell" and width >= 1000
        ],
        "equation_width": [
            f"an equation is {item['scrollWidth']} px wide in a {item['clientWidth']}-px column (break it): {item['what']}"
            for item in report["scrolls"]
            if item["kind"] == "equation" and width >= 1000
        ],
        "figure_text": [],
        "figure_style": [],
        "maths": [],
        "console": list(report["console"]),
        "tracebacks": list(report["tracebacks"])
        + (["a cell output shows a traceback"] if report["tracebackText"] else []),
        "table_width": [f"table {item['what']!r}" for item in report.get("wideTables", []) if width >= 1000],
        "screen_width": (
            [f"equation {item['what']!r}" for item in report.get("wideEquations", [])]
            + [f"header {item}" for item in report.get("wideHeader", [])][:1]
            if width < 1000
            else []
        ),
        "exercises": (
            (
                [f"{len(report.get('exerciseHeadings', []))} Exercises headings"]
                if len(report.get("exerciseHeadings", [])) > 1
                else []
            )
            + ["an empty Exercises heading" for item in report.get("exerciseHeadings", []) if item["empty"]][:1]
        ),
        "proof_proof": ["Proof. Proof."] if report.get("proofProof") else [],
        "figure_captions": [
            f"{item['what']} has no {'caption' if not item['caption'] else 'number'}"
            for item in report.get("figures", [])
            if not item["numbered"]
        ],
    }
    if width < 1000 and report["pageWidth"] > width + 1:
        found["overflow"].append(f"the page is {report['pageWidth']} px wide in a {width}-px window")
    if report["maths"]:
        if not report["mathjaxVersion"]:
            found["maths"].append(f"MathJax did not load ({report['mathjaxScripts']})")
        elif not all(src.startswith(report["pageOrigin"]) for src in report["mathjaxScripts"]):
            found["maths"].append(f"MathJax is not served by the book: {report['mathjaxScripts']}")
    found["maths"] += [f"not typeset: {text!r}" for text in report["unrendered"][:5]]
    found["maths"] += [f"MathJax error: {text!r}" for text in report["mathErrors"][:5]]
    for number, image in enumerate(report["images"], start=1):
        name = f"figure {number}"
        if not image["ok"]:
            found["figure_text"].append(f"{name}: did not load")
            continue
        measured = figure_text(image)
        if measured is None:
            continue
        if measured["points"] is None:
            found["figure_style"].append(f"{name}: a Matplotlib figure without the book's style (import xorlib.plots)")
            # Judge it anyway, at Matplotlib's default 10 pt (an upper bound on its smallest text).
            measured["px"] = 10.0 / 72.0 * measured["dpi"] * measured["scale"]
        if measured["px"] < MIN_TEXT_PX:
            found["figure_text"].append(
                f"{name}: smallest text {measured['px']:.1f} px "
                f"({measured['points'] or 10:.3g} pt at {measured['dpi']:.0f} dpi, shown at {measured['scale']:.0%})"
            )
    return found


def raw_pipe_paragraphs(html: str) -> int:
    """How many ``<p>`` elements of an HTML text start with a pipe: the static trace of an unrendered table."""
    return len(re.findall(r"<p>\s*\|", html))


class _RawMaths(html.parser.HTMLParser):
    """Collects ``$...$`` in text outside code, scripts and typeset maths: maths that reached the page untypeset."""

    SKIP = frozenset({"pre", "code", "script", "style", "textarea", "kbd", "samp"})
    VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.skipping: list[bool] = []
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in self.VOID:
            classes = (dict(attrs).get("class") or "").split()
            self.skipping.append(tag in self.SKIP or "math" in classes or any("highlight" in c for c in classes))

    def handle_endtag(self, tag: str) -> None:
        if tag not in self.VOID and self.skipping:
            self.skipping.pop()

    def handle_data(self, data: str) -> None:
        if not any(self.skipping):
            self.found += re.findall(r"\$[^\s$][^$\n]{0,80}(?<=\S)\$(?!\d)", data)  # pandoc's rule for $...$


def raw_dollar_maths(html_text: str) -> list[str]:
    """Every ``$...$`` left in the text of a page (tables, captions, prose, glued text): maths nobody typeset."""
    parser = _RawMaths()
    parser.feed(html_text)
    return parser.found
