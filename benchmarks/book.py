"""The book's two time budgets of issue 14, as benchmark tables: every chapter on one core, and the full grids.

* :func:`chapters_benchmark`: each chapter executed in a fresh kernel pinned to one
  core with a cold cache (:func:`benchmarks.chapter_times.time_chapter`), against 30 s;
* :func:`grids_benchmark`: the full grids as ``make experiments`` runs them
  (``python -m xorlib.experiments --full``) with a cold cache, against 10 minutes.

Both are absolute times on this machine (there is no floor to divide by); they
are what a Binder reader and a researcher re-running the sweeps wait.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .chapter_times import ROOT, ChapterTime, chapter_paths, child_environment, time_chapter
from .suite import BenchmarkResult

__all__ = [
    "CHAPTER_BUDGET_S",
    "GRIDS_BUDGET_S",
    "ChapterRow",
    "GridRow",
    "chapters_benchmark",
    "chapters_table",
    "grid_command",
    "grids_benchmark",
]

#: Issue 14's budgets: one chapter on one core, and the full grids together.
CHAPTER_BUDGET_S, GRIDS_BUDGET_S = 30.0, 600.0


@dataclass(frozen=True)
class ChapterRow:
    chapter: str
    seconds: float
    code_cells: int
    within_budget: bool
    error: str


@dataclass(frozen=True)
class GridRow:
    experiment: str
    seconds: float
    share_of_budget: float  # seconds / GRIDS_BUDGET_S
    command: str


def chapters_benchmark(paths: Sequence[Path] | None = None, *, limit_s: float = CHAPTER_BUDGET_S) -> BenchmarkResult:
    """Every chapter (default: the book's, in order) in a fresh kernel on one core, cold cache."""
    return chapters_table([time_chapter(Path(path)) for path in paths or chapter_paths()], limit_s=limit_s)


def chapters_table(times: Sequence[ChapterTime], *, limit_s: float = CHAPTER_BUDGET_S) -> BenchmarkResult:
    """The table of :func:`chapters_benchmark` from measured chapter times, each judged against ``limit_s``."""
    rows = tuple(
        ChapterRow(
            chapter=found.chapter,
            seconds=found.seconds,
            code_cells=found.cells,
            within_budget=found.within(limit_s),
            error=found.error or "",
        )
        for found in times
    )
    return BenchmarkResult(
        name="chapters",
        title=f"Every chapter in a fresh kernel on one core (budget {limit_s:g} s each)",
        command="python -m benchmarks.chapter_times",
        rows=rows,
        note=(
            "Each chapter read with jupytext and executed with nbclient in a fresh process pinned to CPU 0 "
            "(taskset -c 0), with a fresh, empty XORLIB_CACHE, as a new Binder session runs it; the time includes "
            f"starting the kernel. {sum(r.within_budget for r in rows)} of {len(rows)} chapters within budget."
        ),
    )


def grid_command(jobs: int | None = None) -> list[str]:
    """The command line of the full grids (``make experiments``), ``jobs`` experiments at a time."""
    return [sys.executable, "-m", "xorlib.experiments", "--full", *([] if jobs is None else ["--jobs", str(jobs)])]


_DONE = re.compile(r"^=== (\w+) \(full plan\): (\d+) s")
_TOTAL = re.compile(r"^all \d+ experiments: (\d+) s wall clock with (\d+) at a time")


def grids_benchmark(
    *, jobs: int | None = None, timeout_s: float = 3600.0, command: Sequence[str] | None = None
) -> BenchmarkResult:
    """The full grids as ``make experiments`` runs them, with a fresh, empty cache: each experiment's time and the total.

    ``command`` replaces the command line (a test runs a tiny stand-in that prints the same lines).
    """
    command = list(command) if command is not None else grid_command(jobs)
    with tempfile.TemporaryDirectory(prefix="xorlib-grids-") as cold:
        env = child_environment(cold)
        done = subprocess.run(command, cwd=ROOT, env=env, check=True, timeout=timeout_s, capture_output=True, text=True)
    rows, total, used = [], None, None
    for line in done.stdout.splitlines():
        if found := _DONE.match(line):
            seconds = float(found[2])
            rows.append(
                GridRow(found[1], seconds, seconds / GRIDS_BUDGET_S, f"python -m xorlib.experiments {found[1]} --full")
            )
        elif found := _TOTAL.match(line):
            total, used = float(found[1]), int(found[2])
    if total is None:
        raise RuntimeError(f"{' '.join(command)} printed no total:\n{done.stdout[-2000:]}")
    rows.append(GridRow("all (wall clock)", total, total / GRIDS_BUDGET_S, "python -m xorlib.experiments --full"))
    return BenchmarkResult(
        name="grids",
        title=f"The full experiment grids, cold cache (budget {GRIDS_BUDGET_S / 60:g} minutes in all)",
        command="python -m benchmarks --only grids",
        rows=tuple(rows),
        note=(
            f"make experiments (python -m xorlib.experiments --full) with a fresh, empty XORLIB_CACHE, {used} "
            "experiments at a time, each in its own single-threaded process; a row's seconds are that experiment "
            f"alone. Wall clock {total:.0f} s against a budget of {GRIDS_BUDGET_S:.0f} s."
        ),
    )
