"""Execute each chapter in a fresh kernel on one core, as a Binder reader would, and print the time of each.

Usage::

    python -m benchmarks.chapter_times [CHAPTER.md ...] [--warm-cache] [--limit 30]

Without make or this script, one chapter in one line (bash; jupytext runs it with nbconvert, in its folder)::

    time taskset -c 0 .venv/bin/jupytext --execute --to ipynb -o /dev/null chapters/02_tied_one_step.md

Each chapter (default: every chapter in ``_toc.yml`` order, ``chapters/*.md``) runs in
its own process pinned to CPU 0 (``taskset -c 0``; the kernel inherits the pin),
read with jupytext and executed with nbclient in the chapter's folder. The time
includes starting the kernel. By default the xorlib disk cache is a fresh empty
folder, as in a new Binder session; ``--warm-cache`` uses the normal one. Issue 14
asks for at most 30 s per chapter.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ChapterTime", "chapter_paths", "child_environment", "execute", "time_chapter"]

ROOT = Path(__file__).resolve().parents[1]
_MARK = "CHAPTER-TIME "


@dataclass(frozen=True)
class ChapterTime:
    """How long one chapter took to execute in a fresh kernel, and its first error (if any)."""

    chapter: str
    seconds: float
    cells: int
    error: str | None
    pinned: bool  # run under taskset -c 0

    def within(self, limit_s: float) -> bool:
        """Whether the chapter ran to the end without error within ``limit_s`` seconds."""
        return self.error is None and self.seconds <= limit_s


def chapter_paths() -> list[Path]:
    """The chapters, in the order of ``_toc.yml`` (the book's order)."""
    toc = (ROOT / "_toc.yml").read_text(encoding="utf-8")
    files = [line.split("file:", 1)[1].strip() for line in toc.splitlines() if "file:" in line]
    paths = [ROOT / f"{name}.md" for name in files]
    return [path for path in paths if path.is_file() and path.read_text(encoding="utf-8").startswith("---\njupytext")]


def execute(path: Path) -> ChapterTime:
    """Execute one chapter in a fresh kernel in this process (the caller sets the CPU pin and the cache)."""
    import jupytext
    from nbclient import NotebookClient

    notebook = jupytext.read(path)
    client = NotebookClient(
        notebook, timeout=1200, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    start = time.perf_counter()
    error = None
    try:
        client.execute()
    except Exception as err:  # a cell failed: report it with the time it took to get there
        error = f"{type(err).__name__}: {str(err).strip().splitlines()[-1] if str(err).strip() else ''}"[:300]
    seconds = time.perf_counter() - start
    cells = sum(cell.cell_type == "code" for cell in notebook.cells)
    name = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
    return ChapterTime(name, seconds, cells, error, _pinned())


def child_environment(cache: str | None) -> dict[str, str]:
    """The environment of a measured child process: this checkout first on ``PYTHONPATH``, and ``XORLIB_CACHE``
    set to ``cache`` (a fresh, empty folder: a cold cache), or left as it is when ``cache`` is None."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    if cache is not None:
        env["XORLIB_CACHE"] = cache
    return env


def time_chapter(path: Path, *, warm_cache: bool = False, timeout_s: float = 1800.0) -> ChapterTime:
    """Execute one chapter in a fresh process pinned to CPU 0 (``taskset -c 0``, where it exists)."""
    command = [sys.executable, "-m", "benchmarks.chapter_times", "--execute", str(path)]
    if shutil.which("taskset"):
        command = ["taskset", "-c", "0", *command]
    with tempfile.TemporaryDirectory(prefix="xorlib-cold-cache-") as cold:
        env = child_environment(None if warm_cache else cold)
        done = subprocess.run(
            command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout_s, check=False
        )
    lines = [line for line in done.stdout.splitlines() if line.startswith(_MARK)]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return ChapterTime(**json.loads(lines[-1][len(_MARK) :]))


def _pinned() -> bool:
    return hasattr(os, "sched_getaffinity") and len(os.sched_getaffinity(0)) == 1


def _seconds(text: str) -> float:
    """``--limit``: a number of seconds above 0 and at most an hour."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"must be above 0 and at most 3600 seconds, got {text}")
    return value


def _chapter(text: str) -> Path:
    """A chapter: an existing MyST-Markdown file."""
    path = Path(text)
    if path.suffix != ".md" or not path.is_file():
        raise argparse.ArgumentTypeError(f"must be an existing chapter file (.md), got {text!r}")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.chapter_times", description=__doc__.strip().splitlines()[0]
    )
    parser.add_argument("chapters", nargs="*", type=_chapter, help="chapter files (default: all, in book order)")
    parser.add_argument("--warm-cache", action="store_true", help="use the normal xorlib disk cache")
    parser.add_argument("--limit", type=_seconds, default=30.0, help="seconds allowed per chapter (default 30)")
    parser.add_argument("--execute", type=Path, help=argparse.SUPPRESS)  # the child: run one chapter here
    args = parser.parse_args(argv)
    if args.execute is not None:
        print(_MARK + json.dumps(execute(args.execute.resolve()).__dict__), flush=True)
        return 0
    paths = [path.resolve() for path in args.chapters] or chapter_paths()
    cache = "warm cache" if args.warm_cache else "cold cache (a fresh, empty XORLIB_CACHE)"
    print(f"Each chapter in a fresh kernel, one core (taskset -c 0), {cache}; limit {args.limit:g} s\n")
    print(f"| {'chapter':<40} | seconds | code cells | within {args.limit:g} s | error |")
    print(f"|{'-' * 42}|---------|------------|--------------|-------|")
    slow = 0
    for path in paths:
        result = time_chapter(path, warm_cache=args.warm_cache)
        within = result.within(args.limit)
        slow += not within
        print(
            f"| {result.chapter:<40} | {result.seconds:7.1f} | {result.cells:10d} | {'yes' if within else 'NO':>12} "
            f"| {result.error or ''} |",
            flush=True,
        )
    print(f"\n{len(paths) - slow} of {len(paths)} chapters within {args.limit:g} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
