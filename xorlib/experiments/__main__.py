"""Run the book's experiments: ``python -m xorlib.experiments [--full] [--only NAME ...] [--jobs N]``.

Without ``--full`` each experiment runs the small grid the book and CI use; with
it, the full grid (about five minutes on two cores, ten on one). Results go to
the disk cache (:mod:`xorlib.cache`), so a later book build reuses whatever grid
the chapters ask for.

The experiments are independent and each runs on one thread, so ``--jobs N``
(default: the number of cores, at most the number of experiments) runs ``N`` of
them at once, each in its own process (``python -m xorlib.experiments.NAME``),
longest first. Each one's output is printed when it finishes, with its time.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

#: The experiments, longest full grid first (on the development machine), so that parallel jobs end together.
EXPERIMENTS = ("authors", "finite_samples", "ffnn", "multistep", "one_step", "attention_variants")


def _run(name: str, full: bool) -> tuple[str, float, int, str]:
    """One experiment in its own process: its name, seconds, exit status and output."""
    command = [sys.executable, "-m", f"xorlib.experiments.{name}", *(["--full"] if full else [])]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    return name, time.perf_counter() - start, done.returncode, done.stdout + done.stderr


def main(argv: Sequence[str] | None = None) -> int:
    """Run the experiments named by ``--only`` (default: all), ``--jobs`` at a time; non-zero if any failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="the full grids instead of the book's")
    parser.add_argument("--only", nargs="+", choices=EXPERIMENTS, default=list(EXPERIMENTS), metavar="NAME")
    parser.add_argument("--jobs", type=int, default=None, help="experiments at once (default: the cores, at most 6)")
    args = parser.parse_args(argv)
    names = [name for name in EXPERIMENTS if name in args.only]
    jobs = args.jobs if args.jobs is not None else min(len(names), len(os.sched_getaffinity(0)))
    if not 1 <= jobs <= len(EXPERIMENTS):
        parser.error(f"--jobs must be from 1 to {len(EXPERIMENTS)}, got {jobs}")
    grid = "full" if args.full else "book"
    print(f"{len(names)} experiments ({grid} grids), {jobs} at a time", flush=True)
    start, failed = time.perf_counter(), []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for name, seconds, status, output in pool.map(lambda n: _run(n, args.full), names):
            print(f"\n=== {name} ({grid} grid): {seconds:.0f} s{'' if status == 0 else f', FAILED ({status})'} ===")
            print(output.rstrip(), flush=True)
            if status != 0:
                failed.append(name)
    print(f"\nall {len(names)} experiments: {time.perf_counter() - start:.0f} s wall clock with {jobs} at a time")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
