"""The whole book as one PDF: Jupyter Book's single-page HTML, printed by headless Chromium (``make pdf``).

Jupyter Book 1's ``pdfhtml`` builder prints its single-page build with pyppeteer, which downloads a browser of its
own and pins ``urllib3<2``; this does the same with Debian's Chromium over the DevTools pipe (``tools/chromium.py``),
nothing downloaded. The single-page build replays the HTML build's executed notebooks (``_ext/xorlib_eval.py``), so
no chapter runs twice. Before printing, every fold is opened (proofs, solutions, hidden code), MathJax has typeset
every formula, and the print style of ``_static/xorlib.css`` keeps figures and tables within the page.

Usage: ``python tools/print_pdf.py _build/singlehtml/intro.html _build/pdf/book.pdf``
"""

from __future__ import annotations

import argparse
import base64
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from chromium import launch

# Opens every fold and waits for MathJax and the images; returns what it could not open.
PREPARE = """
(async () => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  document.querySelectorAll('.toggle-hidden').forEach(e => e.classList.remove('toggle-hidden'));
  document.querySelectorAll('.admonition.toggle').forEach(e => e.classList.add('toggle-shown'));
  document.querySelectorAll('.cell.tag_hide-input, .cell.tag_hide-output, .cell.tag_hide-cell')
    .forEach(c => c.querySelectorAll('details').forEach(d => { d.open = true; }));
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) { await MathJax.startup.promise; }
  await Promise.all([...document.images].map(i => i.complete ? null : new Promise(r => { i.onload = i.onerror = r; })));
  await document.fonts.ready;
  return [...document.querySelectorAll('details:not([open])')].length;
})()
"""


def print_pdf(page: Path, output: Path, timeout: float = 300.0) -> Path:
    """Print ``page`` (an HTML file) to ``output`` as an A4 PDF with the book's print style; return ``output``."""
    if not page.is_file():
        raise FileNotFoundError(f"{page} does not exist: build the single-page book first (make pdf does)")
    with launch() as browser, browser.page(1000, 1400) as tab:
        tab.send("Emulation.setEmulatedMedia", {"media": "print"})
        tab.navigate(page.resolve().as_uri(), timeout=timeout)
        closed = tab.evaluate(PREPARE, timeout=timeout)
        if closed:
            raise RuntimeError(f"{closed} folded blocks stayed closed in {page}")
        reply = tab.send(
            "Page.printToPDF",
            {
                "printBackground": True,
                "preferCSSPageSize": True,
                "paperWidth": 8.27,
                "paperHeight": 11.69,
                "marginTop": 0.6,
                "marginBottom": 0.6,
                "marginLeft": 0.6,
                "marginRight": 0.6,
                "displayHeaderFooter": True,
                "headerTemplate": "<span></span>",
                "footerTemplate": '<div style="font-size:8px;width:100%;text-align:center">'
                '<span class="pageNumber"></span> / <span class="totalPages"></span></div>',
            },
            timeout=timeout,
        )
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_bytes(base64.b64decode(reply["data"]))
    return output


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page", type=Path, help="the single-page HTML book (_build/singlehtml/intro.html)")
    parser.add_argument("output", type=Path, help="the PDF to write (_build/html/book.pdf)")
    args = parser.parse_args(argv)
    path = print_pdf(args.page, args.output)
    print(f"{path} ({path.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
