"""Run the book's experiments: ``python -m xorlib.experiments [--full] [--only NAME ...]``.

Without ``--full`` each experiment runs the small grid the book and CI use; with
it, the full grid (tens of minutes in all). Results go to the disk cache
(:mod:`xorlib.cache`), so a later book build reuses whatever grid the chapters ask for.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Sequence

EXPERIMENTS = ("one_step", "attention_variants", "finite_samples", "ffnn", "multistep", "authors")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the experiments named by ``--only`` (default: all), each through its own command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="the full grids instead of the book's")
    parser.add_argument("--only", nargs="+", choices=EXPERIMENTS, default=list(EXPERIMENTS), metavar="NAME")
    args = parser.parse_args(argv)
    for name in args.only:
        module = importlib.import_module(f"xorlib.experiments.{name}")
        print(f"\n=== {name} ({'full' if args.full else 'book'} grid) ===", flush=True)
        start = time.perf_counter()
        module.main(["--full"] if args.full else [])
        print(f"--- {name}: {time.perf_counter() - start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
