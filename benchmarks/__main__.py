"""Run the benchmarks and print their tables, each with the command that reproduces it.

Usage::

    python -m benchmarks [--small] [--only codes step stream]

``make benchmarks`` runs the sizes of issue 14 (d = 10^6 against the floor; streamed
steps at d = 10^7 and 10^8, several minutes); ``make benchmarks-small`` the CI sizes (seconds).
"""

from __future__ import annotations

import argparse
import platform
from collections.abc import Sequence

import torch

from .suite import FULL, SMALL, as_text, codes_benchmark, step_benchmark, stream_benchmark

BENCHMARKS = ("codes", "step", "stream")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--small", action="store_true", help="the CI sizes (seconds)")
    parser.add_argument("--only", nargs="+", choices=BENCHMARKS, default=BENCHMARKS, help="run only these")
    args = parser.parse_args(argv)
    sizes = SMALL if args.small else FULL
    print(f"# Benchmarks ({'small' if args.small else 'full'} sizes)\n")
    print(f"{platform.processor() or platform.machine()}, torch {torch.__version__}, one thread, CPU\n", flush=True)
    runs = {
        "codes": lambda: codes_benchmark(sizes.codes, repeats=sizes.repeats, flag=sizes.flag),
        "step": lambda: step_benchmark(sizes.step, repeats=sizes.repeats, flag=sizes.flag),
        "stream": lambda: stream_benchmark(sizes.stream, flag=sizes.flag),
    }
    for name in BENCHMARKS:
        if name in args.only:
            print(as_text(runs[name]()), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
