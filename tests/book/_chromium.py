"""Headless Chromium for the tests: ``tools/chromium.py``'s client, and a skip (or a failure) when there is none.

A test that needs the browser and cannot find it skips, or fails when ``XORLIB_REQUIRE_BROWSER=1`` (CI sets it).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

from chromium import Browser, Page, executable
from chromium import launch as _launch

__all__ = ["REQUIRED", "Browser", "Page", "executable", "launch", "unavailable"]

REQUIRED = os.environ.get("XORLIB_REQUIRE_BROWSER") == "1"


def unavailable(reason: str) -> None:
    """Skip the calling test, or fail it when ``XORLIB_REQUIRE_BROWSER=1``."""
    if REQUIRED:
        pytest.fail(f"{reason} (XORLIB_REQUIRE_BROWSER=1)")
    pytest.skip(reason)


@contextmanager
def launch() -> Iterator[Browser]:
    """A fresh headless Chromium with a throw-away profile (skips the test when there is none)."""
    if executable() is None:
        unavailable("Chromium is not installed (apt-get install -y chromium)")
    with _launch() as tools:
        yield tools
