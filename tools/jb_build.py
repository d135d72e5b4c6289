"""``jupyter-book build`` with Sphinx's parallel reading: ``python tools/jb_build.py [jupyter-book build args]``.

Jupyter Book 1's command line has no ``-j``, although its ``build_sphinx`` takes ``jobs`` and hands it to Sphinx.
This runs the same command line with ``jobs`` set from ``XORLIB_BOOK_JOBS`` (default 2): Sphinx then reads, and so
executes (``execute_notebooks: inline``), that many chapters at once, each in its own process and kernel.
"""

from __future__ import annotations

import functools
import os
import sys

import jupyter_book.sphinx
from jupyter_book.cli.main import main


def _jobs() -> int:
    value = os.environ.get("XORLIB_BOOK_JOBS", "2")
    if not value.isdigit() or not 1 <= int(value) <= 64:
        sys.exit(f"XORLIB_BOOK_JOBS must be a whole number from 1 to 64, got {value!r}")
    return int(value)


if __name__ == "__main__":
    jupyter_book.sphinx.build_sphinx = functools.partial(jupyter_book.sphinx.build_sphinx, jobs=_jobs())
    sys.exit(main(["build", *sys.argv[1:]]))
