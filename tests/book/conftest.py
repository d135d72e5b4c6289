"""Fixtures of the book's tests: the built book, and a small fixture book built with the book's own configuration.

The fixture book (``tests/book/fixtures/book/``, plus the converter's output ``fixtures/glue/after.md``) is built
once per session into a temporary folder, with the repository's ``_config.yml``, ``_ext/``, ``_static/`` and
``references.bib``: the mechanisms (``{eval}`` in order, the reader's export, the wheel, proofs folded once, the
replayed single-page build) are proved on it without waiting for the real chapters.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
HTML_DIR = Path(os.environ.get("XORLIB_HTML_DIR", ROOT / "_build" / "html")).resolve()
JUPYTER_BOOK = Path(sys.executable).parent / "jupyter-book"


def labels_of(source: str) -> set[str]:
    """The labels a chapter's MyST source defines: ``(label)=`` targets and the ``:label:`` of its directives."""
    import re

    return set(re.findall(r"^\(([\w.:-]+)\)=\s*$", source, re.M)) | set(
        re.findall(r"^:label: ([\w.:-]+)\s*$", source, re.M)
    )


def loopback_works() -> bool:
    """Whether a server on 127.0.0.1 can be reached (not in a bare ``unshare -n``, where lo is down)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        try:
            socket.create_connection(server.getsockname(), timeout=2).close()
        except OSError:
            return False
    return True


def build(source: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 600) -> None:
    """``jupyter-book build`` as ``make book`` runs it (warnings are errors); fail with the log's end."""
    result = subprocess.run(
        [str(JUPYTER_BOOK), "build", str(source), "--warningiserror", "--keep-going", *args],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(f"jupyter-book build {' '.join(args)} failed:\n{(result.stdout + result.stderr)[-4000:]}")


def make_fixture_book(target: Path) -> Path:
    """A copy of the fixture book with the repository's configuration, extensions and package, ready to build."""
    shutil.copytree(FIXTURES / "book", target)
    shutil.copy(FIXTURES / "glue" / "after.md", target / "chapters" / "fixture_glue.md")
    for name in ("_config.yml", "references.bib", "pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, target / name)
    for name in ("_ext", "_static"):
        shutil.copytree(ROOT / name, target / name, ignore=shutil.ignore_patterns("__pycache__"))
    (target / "xorlib").symlink_to(ROOT / "xorlib")
    return target


@pytest.fixture(scope="session")
def fixture_book(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture book, built to HTML (``<book>/_build/html``); returns the book's folder."""
    if not loopback_works():
        pytest.skip("127.0.0.1 is unreachable (the kernels need it): run `ip link set lo up` first")
    book = make_fixture_book(tmp_path_factory.mktemp("fixture") / "book")
    build(book, env={"XORLIB_CACHE": str(book / ".cache")})
    return book


class Site:
    """A built site served on 127.0.0.1 (a random free port) for as long as the fixture lives."""

    def __init__(self, folder: Path) -> None:
        handler = partial(_QuietHandler, directory=str(folder))
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def serve() -> Iterator[object]:
    """``serve(folder)`` starts a :class:`Site`; every site started is closed at the end of the test."""
    sites: list[Site] = []

    def start(folder: Path) -> Site:
        site = Site(folder)
        sites.append(site)
        return site

    yield start
    for site in sites:
        site.close()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """``XORLIB_ALLOWLIST_UPDATE=1``: write the allow-list from what the checks found (see ``_allowlist``)."""
    import _allowlist

    _allowlist.write()
