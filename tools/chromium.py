"""Headless Chromium, driven over the DevTools protocol through a pipe: for ``make pdf`` and the book's tests.

``--remote-debugging-pipe`` gives the browser file descriptors 3 (commands in) and 4 (replies out): no port, no
network and no Python package beyond the standard library. The browser is Debian's ``/usr/bin/chromium`` (or
``XORLIB_CHROMIUM``). Used by ``tools/print_pdf.py`` (the book as one PDF) and, through ``tests/book/_chromium.py``
(which skips or fails a test when there is no browser), by the browser, JupyterLab and PDF checks.
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
from contextlib import contextmanager
from pathlib import Path

FLAGS = [
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


def executable() -> str | None:
    """The Chromium binary: ``XORLIB_CHROMIUM``, else ``chromium`` or ``chromium-browser`` on the PATH."""
    if name := os.environ.get("XORLIB_CHROMIUM"):
        return shutil.which(name)
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("/usr/bin/chromium")


class Browser:
    """A minimal DevTools client: one browser process, any number of page targets (sessions)."""

    def __init__(self, binary: str, user_data_dir: str) -> None:
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def child_fds() -> None:  # in the child: the browser reads fd 3 and writes fd 4
            high_r = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
            high_w = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self.process = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={user_data_dir}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=child_fds,  # the test process does not start threads before this
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
        """Send one command and return its result; events that arrive meanwhile are kept in ``events``."""
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
            if "method" in reply:
                self.events.append(reply)

    def wait_for(self, method: str, session: str, timeout: float = 30.0) -> dict:
        """Wait for an event of ``session`` (already received, or one of the next)."""
        deadline = time.monotonic() + timeout
        while True:
            for k, event in enumerate(self.events):
                if event.get("method") == method and event.get("sessionId") == session:
                    return self.events.pop(k)
            reply = self._read_message(deadline)
            if "method" in reply:
                self.events.append(reply)

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

    @contextmanager
    def page(self, width: int, height: int = 900, mobile: bool = False) -> Iterator[Page]:
        """A new tab with the given viewport (CSS px, device scale 1), closed on exit."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        tab = Page(self, session)
        try:
            for domain in ("Page", "Runtime", "Log"):
                self.send(f"{domain}.enable", session=session)
            tab.viewport(width, height, mobile)
            yield tab
        finally:
            self.send("Target.closeTarget", {"targetId": target})
            self.events = [e for e in self.events if e.get("sessionId") != session]


class Page:
    """One tab: navigate, evaluate JavaScript, collect console errors, take screenshots."""

    def __init__(self, browser: Browser, session: str) -> None:
        self.browser = browser
        self.session = session
        self.width = 0
        self.mobile = False

    def send(self, method: str, params: dict | None = None, timeout: float = 30.0) -> dict:
        return self.browser.send(method, params, session=self.session, timeout=timeout)

    def viewport(self, width: int, height: int = 900, mobile: bool = False) -> None:
        self.width, self.mobile = width, mobile
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile},
        )

    def navigate(self, url: str, timeout: float = 60.0) -> None:
        """Load ``url`` and wait for its load event; console messages of earlier loads are dropped."""
        self.browser.events = [e for e in self.browser.events if e.get("sessionId") != self.session]
        self.send("Page.navigate", {"url": url})
        self.browser.wait_for("Page.loadEventFired", self.session, timeout=timeout)

    def evaluate(self, expression: str, timeout: float = 60.0) -> object:
        """Evaluate ``expression`` (awaiting a promise) and return its value as JSON."""
        result = self.send(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True},
            timeout=timeout,
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise RuntimeError(details.get("exception", {}).get("description") or details.get("text"))
        return result["result"].get("value")

    def wait_until(self, expression: str, timeout: float = 30.0, interval: float = 0.25) -> object:
        """Poll ``expression`` until it is truthy; return its value (``TimeoutError`` after ``timeout`` s)."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for {expression}")
            time.sleep(interval)

    def console_errors(self) -> list[str]:
        """Uncaught exceptions, ``console.error`` calls and browser log errors (failed loads) since the last load."""
        errors = []
        for event in self.browser.events:
            if event.get("sessionId") != self.session:
                continue
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                errors.append(details.get("exception", {}).get("description", "")[:300] or details.get("text", ""))
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                entry = params["entry"]
                errors.append(f"{entry.get('text', '')} {entry.get('url', '')}".strip())
        return errors

    def screenshot(self, path: Path, max_height: int = 8000) -> None:
        """Save a PNG of the whole page (up to ``max_height`` px tall) at the current width."""
        height = int(self.evaluate("Math.ceil(document.documentElement.scrollHeight)") or 900)
        height = max(300, min(height, max_height))
        shot = self.send(
            "Page.captureScreenshot",
            {
                "format": "png",
                "optimizeForSpeed": True,  # a faster, larger PNG: the screenshots are for looking at
                "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": self.width, "height": height, "scale": 1},
            },
            timeout=60.0,
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))


class NoBrowser(RuntimeError):
    """No Chromium is installed."""


@contextmanager
def launch() -> Iterator[Browser]:
    """A fresh headless Chromium with a throw-away profile (``NoBrowser`` when there is none)."""
    binary = executable()
    if binary is None:
        raise NoBrowser("Chromium is not installed (apt-get install -y chromium)")
    with tempfile.TemporaryDirectory(prefix="xorlib-chromium-") as profile:
        browser = Browser(binary, profile)
        try:
            browser.send("Browser.getVersion", timeout=60.0)
            yield browser
        finally:
            browser.close()
