"""Run the benchmarks and print their tables, each with the command that reproduces it.

Usage::

    python -m benchmarks [--small] [--device cpu|cuda] [--only codes step stream empirical chapters grids]

``make benchmarks`` runs the sizes of issue 14: the codes and the one step at
d = 10^6 against the floor, streamed steps at d = 10^7 and 10^8, the empirical
step at d = 1024 from n = 10^6 samples against its floor (issue 23), every chapter
in a fresh kernel on one core, and the full experiment grids (about a quarter of an
hour in all). ``make benchmarks-small`` runs the CI sizes of the first four
(seconds); the chapter and grid times have no small version (CI builds the book).
"""

from __future__ import annotations

import argparse
import platform
from collections.abc import Sequence

import torch

from .book import chapters_benchmark, grids_benchmark
from .empirical import FULL_SIZE, SMALL_SIZE, empirical_benchmark
from .suite import FULL, SMALL, as_text, codes_benchmark, step_benchmark, stream_benchmark

BENCHMARKS = ("codes", "step", "stream", "empirical", "chapters", "grids")
#: What ``--small`` runs by default: the chapter and grid times exist only at full size.
SMALL_BENCHMARKS = ("codes", "step", "stream", "empirical")


def _device(text: str) -> str:
    """``--device``: ``cpu``, or a CUDA device that exists here."""
    try:
        device = torch.device(text)
    except RuntimeError as err:
        raise argparse.ArgumentTypeError(f"not a torch device: {text!r}") from err
    if device.type == "cuda" and (not torch.cuda.is_available() or (device.index or 0) >= torch.cuda.device_count()):
        raise argparse.ArgumentTypeError(f"{text!r}: CUDA is not available on this machine (use cpu)")
    if device.type not in ("cpu", "cuda"):
        raise argparse.ArgumentTypeError(f"{text!r}: the benchmarks run on cpu or cuda")
    return text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--small", action="store_true", help="the CI sizes (seconds)")
    parser.add_argument("--device", type=_device, default="cpu", help="where the codes and the step run")
    parser.add_argument("--only", nargs="+", choices=BENCHMARKS, help="run only these")
    args = parser.parse_args(argv)
    sizes = SMALL if args.small else FULL
    only = args.only or (SMALL_BENCHMARKS if args.small else BENCHMARKS)
    print(f"# Benchmarks ({'small' if args.small else 'full'} sizes)\n")
    where = "one thread, " + ("CPU" if args.device == "cpu" else f"{args.device} ({torch.cuda.get_device_name()})")
    print(f"{platform.processor() or platform.machine()}, torch {torch.__version__}, {where}\n", flush=True)
    device = args.device
    runs = {
        "codes": lambda: codes_benchmark(sizes.codes, repeats=sizes.repeats, flag=sizes.flag, device=device),
        "step": lambda: step_benchmark(sizes.step, repeats=sizes.repeats, flag=sizes.flag, device=device),
        "stream": lambda: stream_benchmark(sizes.stream, flag=sizes.flag, device=device, old_floor=True),
        "empirical": lambda: empirical_benchmark(
            SMALL_SIZE if args.small else FULL_SIZE, repeats=sizes.repeats, flag=sizes.flag
        ),
        "chapters": chapters_benchmark,
        "grids": grids_benchmark,
    }
    for name in BENCHMARKS:
        if name in only:
            print(as_text(runs[name]()), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
