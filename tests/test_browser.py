"""Open every page of the built book in headless Chromium and check what a reader sees.

For each page of ``_toc.yml``: the page loads, every piece of maths is typeset
by MathJax (which the book serves itself, from ``_static/mathjax``: no CDN),
every image has loaded with a non-zero natural size, no cell output shows a
traceback, and no script throws. A screenshot of each page is saved under
``_build/screenshots/``.

Chromium is driven through the DevTools protocol over a pipe
(``--remote-debugging-pipe``: file descriptors 3 and 4), which needs no port,
no network and no Python package beyond the standard library.

Environment:

* ``XORLIB_HTML_DIR``: the built HTML (default ``_build/html``); screenshots go
  to ``<XORLIB_HTML_DIR>/../screenshots``.
* ``XORLIB_CHROMIUM``: the browser executable (default: ``chromium`` on the PATH).
* ``XORLIB_REQUIRE_BROWSER=1``: fail, instead of skipping, when Chromium or the
  built book is missing (CI sets it).
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
HTML_DIR = Path(os.environ.get("XORLIB_HTML_DIR", ROOT / "_build" / "html")).resolve()
SCREENSHOTS = HTML_DIR.parent / "screenshots"
REQUIRED = os.environ.get("XORLIB_REQUIRE_BROWSER") == "1"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--mute-audio",
    "--remote-debugging-pipe",
]
PAGE_TIMEOUT = 60.0
# Script errors of the toolchain itself, not of the book: sphinx-thebe 0.3.1 declares its config twice on pages
# built with sphinx-book-theme (harmless: the first declaration wins).
KNOWN_SCRIPT_ERRORS = ("Identifier 'THEBE_JS_URL' has already been declared",)

pytestmark = pytest.mark.book


def _toc_pages(html_dir: Path) -> list[str]:
    """Pages of the book (``root`` and every ``file`` of ``_toc.yml`` beside the build), without suffix."""
    toc = html_dir.parents[1] / "_toc.yml" if len(html_dir.parents) > 1 else None
    if toc is None or not toc.is_file():
        return sorted(p.relative_to(html_dir).with_suffix("").as_posix() for p in html_dir.rglob("*.html"))
    data = yaml.safe_load(toc.read_text())
    pages = [data["root"]]

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if "file" in node:
                pages.append(node["file"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk({k: v for k, v in data.items() if k != "root"})
    return [str(Path(p).with_suffix("")) if p.endswith((".md", ".ipynb")) else p for p in pages]


PAGES = _toc_pages(HTML_DIR) if HTML_DIR.is_dir() else []


def _unavailable(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"{reason} (XORLIB_REQUIRE_BROWSER=1)")
    pytest.skip(reason)


def _chromium() -> str | None:
    if name := os.environ.get("XORLIB_CHROMIUM"):
        return shutil.which(name)
    return shutil.which("chromium") or shutil.which("chromium-browser")


class DevTools:
    """A minimal Chrome DevTools Protocol client over ``--remote-debugging-pipe``."""

    def __init__(self, executable: str, user_data_dir: str) -> None:
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def child_fds() -> None:  # in the child: the browser reads fd 3 and writes fd 4
            high_r = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
            high_w = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self.process = subprocess.Popen(
            [executable, *CHROMIUM_FLAGS, f"--user-data-dir={user_data_dir}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=child_fds,  # the test process is single-threaded
            pass_fds=(3, 4),
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict] = []

    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise ConnectionError("Chromium closed the DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 30.0) -> dict:
        """Send one command and return its result (events that arrive meanwhile are kept in ``events``)."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, session: str, timeout: float = 30.0) -> dict:
        """Wait for an event (already received, or the next ones)."""
        deadline = time.monotonic() + timeout
        while True:
            for k, event in enumerate(self.events):
                if event.get("method") == method and event.get("sessionId") == session:
                    return self.events.pop(k)
            self.events.append(self._read_message(deadline))

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=5.0)
        except (OSError, TimeoutError, ConnectionError, RuntimeError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        os.close(self._to_browser)
        os.close(self._from_browser)


# Runs in the page once it has loaded: waits for MathJax (if the page loads it), then reports.
INSPECT = """
(async () => {
  const deadline = Date.now() + 30000;
  const maths = () => [...document.querySelectorAll('span.math, div.math')];
  const mathjaxScript = [...document.scripts].some(s => /mathjax/i.test(s.src));
  if (maths().length > 0 || mathjaxScript) {
    while (!(window.MathJax && MathJax.startup && MathJax.startup.promise) && Date.now() < deadline) {
      await new Promise(r => setTimeout(r, 100));
    }
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) { await MathJax.startup.promise; }
  }
  const images = [...document.images];
  await Promise.all(images.map(i => i.complete ? null : new Promise(r => { i.onload = i.onerror = r; })));
  return {
    title: document.title,
    heading: (document.querySelector('main h1, article h1, h1') || {}).textContent || '',
    mathjaxScripts: [...document.scripts].filter(s => /mathjax/i.test(s.src)).map(s => s.src),
    mathjaxVersion: (window.MathJax && MathJax.version) || null,
    maths: maths().length,
    unrendered: maths().filter(e => !e.querySelector('mjx-container')).map(e => e.textContent.slice(0, 80)),
    mathErrors: [...document.querySelectorAll('mjx-merror, mjx-container [data-mjx-error]')].map(
      e => (e.getAttribute('data-mjx-error') || e.textContent).slice(0, 80)),
    images: images.map(i => ({src: i.getAttribute('src'), ok: i.complete && i.naturalWidth > 0,
                               width: i.naturalWidth, height: i.naturalHeight,
                               output: !!i.closest('.cell_output')})),
    tracebacks: [...document.querySelectorAll('.output.traceback, .cell_output .traceback, .output .traceback')]
      .map(e => e.textContent.slice(0, 200)),
    tracebackText: [...document.querySelectorAll('.cell_output')].some(
      e => e.textContent.includes('Traceback (most recent call last)')),
    height: Math.ceil(document.documentElement.scrollHeight),
  };
})()
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[DevTools]:
    if not HTML_DIR.is_dir():
        _unavailable(f"no built book in {HTML_DIR}: run `make book` first")
    executable = _chromium()
    if executable is None:
        _unavailable("Chromium is not installed (apt-get install -y chromium)")
    with tempfile.TemporaryDirectory(prefix="xorlib-chromium-") as profile:
        tools = DevTools(executable, profile)
        try:
            tools.send("Browser.getVersion", timeout=60.0)
            yield tools
        finally:
            tools.close()


def inspect_page(tools: DevTools, page: Path, screenshot: Path) -> tuple[dict, list[str]]:
    """Load ``page``, run :data:`INSPECT`, save a screenshot; return the report and any script exceptions."""
    target = tools.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = tools.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    try:
        tools.send("Page.enable", session=session)
        tools.send("Runtime.enable", session=session)
        tools.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        tools.events.clear()
        tools.send("Page.navigate", {"url": page.as_uri()}, session=session)
        tools.wait_for("Page.loadEventFired", session, timeout=PAGE_TIMEOUT)
        result = tools.send(
            "Runtime.evaluate",
            {"expression": INSPECT, "awaitPromise": True, "returnByValue": True},
            session=session,
            timeout=PAGE_TIMEOUT,
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"inspection script failed: {result['exceptionDetails']}")
        report = result["result"]["value"]
        exceptions = [
            e["params"]["exceptionDetails"].get("exception", {}).get("description", "")[:300]
            or e["params"]["exceptionDetails"].get("text", "")
            for e in tools.events
            if e.get("method") == "Runtime.exceptionThrown" and e.get("sessionId") == session
        ]
        height = max(900, min(int(report["height"]), 8000))
        tools.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": 1280, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        shot = tools.send("Page.captureScreenshot", {"format": "png"}, session=session, timeout=PAGE_TIMEOUT)
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        screenshot.write_bytes(base64.b64decode(shot["data"]))
        return report, exceptions
    finally:
        tools.send("Target.closeTarget", {"targetId": target})


def test_the_book_has_pages() -> None:
    if not HTML_DIR.is_dir():
        _unavailable(f"no built book in {HTML_DIR}: run `make book` first")
    assert PAGES, f"no pages found for {HTML_DIR}"
    missing = [p for p in PAGES if not (HTML_DIR / f"{p}.html").is_file()]
    assert not missing, f"pages of the table of contents missing from the build: {missing}"


def test_mathjax_is_served_locally() -> None:
    if not HTML_DIR.is_dir():
        _unavailable(f"no built book in {HTML_DIR}: run `make book` first")
    assert (HTML_DIR / "_static" / "mathjax" / "tex-chtml.js").is_file(), "MathJax is not vendored into _static"
    for page in PAGES:
        path = HTML_DIR / f"{page}.html"
        if path.is_file():
            text = path.read_text()
            assert "cdn.jsdelivr.net/npm/mathjax" not in text, f"{page}.html loads MathJax from a CDN"


@pytest.mark.parametrize("page", PAGES or ["(no build)"])
def test_page_renders(browser: DevTools, page: str) -> None:
    path = HTML_DIR / f"{page}.html"
    if not path.is_file():
        pytest.fail(f"{path} is missing from the build")
    report, exceptions = inspect_page(browser, path, SCREENSHOTS / f"{page.replace('/', '__')}.png")
    assert report["title"] and report["heading"].strip(), f"{page}: no title or heading"
    if report["maths"]:
        assert report["mathjaxVersion"], f"{page}: MathJax did not load ({report['mathjaxScripts']})"
        assert all(src.startswith("file:") for src in report["mathjaxScripts"]), report["mathjaxScripts"]
    assert not report["unrendered"], f"{page}: maths not typeset by MathJax: {report['unrendered'][:3]}"
    assert not report["mathErrors"], f"{page}: MathJax errors: {report['mathErrors'][:3]}"
    broken = [i["src"] for i in report["images"] if not i["ok"]]
    assert not broken, f"{page}: images that did not load: {broken}"
    assert not report["tracebacks"] and not report["tracebackText"], f"{page}: a cell shows an error"
    exceptions = [e for e in exceptions if not any(known in e for known in KNOWN_SCRIPT_ERRORS)]
    assert not exceptions, f"{page}: scripts threw: {exceptions[:3]}"
    assert (SCREENSHOTS / f"{page.replace('/', '__')}.png").stat().st_size > 1000
