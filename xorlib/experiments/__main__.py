"""Run the book's experiments: ``python -m xorlib.experiments [NAME ...] [--full] [--jobs N] [--list]``.

Without names, every registered experiment; without ``--full``, the book's plans (what the
chapters and CI run); with it, the full plans (minutes to hours). Results go to the disk cache
(``xorlib._cache``), so a later book build reuses them.

The experiments are independent and each runs on one thread, so ``--jobs N`` (default: the
number of cores, at most the number of experiments) runs ``N`` of them at once, each in its own
process (this command with one name), longest first. Each one's summary is printed when it
finishes, with its time. Bad arguments get a usage message and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from . import run
from ._registry import REGISTRY


def _brief(result: object) -> str:
    """A few lines about a result: its scalar fields and how many rows it holds."""
    lines = []
    for field in dataclasses.fields(result):  # type: ignore[arg-type]
        value = getattr(result, field.name)
        if isinstance(value, (int, float, str, bool)):
            lines.append(f"  {field.name} = {value!r}")
        elif isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
            lines.append(f"  {field.name}: {len(value)} {type(value[0]).__name__} rows")
    return "\n".join(lines)


def _child(name: str, full: bool) -> int:
    """Run one experiment in this process and print its summary."""
    start = time.perf_counter()
    result = run(name, full=full)
    print(f"{name}: {REGISTRY[name].summary}\n{_brief(result)}\n  {time.perf_counter() - start:.1f} s", flush=True)
    return 0


def _in_process(name: str, full: bool) -> tuple[str, float, int, str]:
    """One experiment in its own process: its name, seconds, exit status and output."""
    command = [sys.executable, "-m", "xorlib.experiments", name, "--jobs", "1", *(["--full"] if full else [])]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    return name, time.perf_counter() - start, done.returncode, done.stdout + done.stderr


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m xorlib.experiments", description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help="experiments to run (default: all; see --list)")
    parser.add_argument("--full", action="store_true", help="the full plans instead of the book's")
    parser.add_argument("--jobs", type=int, default=None, help="experiments at once (default: the cores)")
    parser.add_argument("--list", action="store_true", help="list the experiments and exit")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the named experiments (default: all), ``--jobs`` at a time; exit status 1 if any failed, 2 for bad usage."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.list:
        for name, entry in REGISTRY.items():
            print(f"{name:24s} {entry.summary}")
        return 0
    unknown = [name for name in args.names if name not in REGISTRY]
    if unknown:
        parser.error(f"unknown experiment(s) {unknown}; choose from {list(REGISTRY)} (or see --list)")
    names = sorted(args.names or REGISTRY, key=lambda name: -REGISTRY[name].full_minutes)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    jobs = args.jobs if args.jobs is not None else min(len(names), cores)
    if not 1 <= jobs <= 64:
        parser.error(f"--jobs must be from 1 to 64, got {jobs}")
    if jobs == 1 and len(names) == 1:
        return _child(names[0], args.full)
    grid = "full" if args.full else "book"
    print(f"{len(names)} experiments ({grid} plans), {jobs} at a time", flush=True)
    start, failed = time.perf_counter(), []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for name, seconds, status, output in pool.map(lambda n: _in_process(n, args.full), names):
            print(f"\n=== {name} ({grid} plan): {seconds:.0f} s{'' if status == 0 else f', FAILED ({status})'} ===")
            print(output.rstrip(), flush=True)
            if status != 0:
                failed.append(name)
    print(f"\nall {len(names)} experiments: {time.perf_counter() - start:.0f} s wall clock with {jobs} at a time")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
