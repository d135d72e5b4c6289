"""One step of ``xorlib.one_step`` in a fresh process: its time, its peak memory, and the floor beside it.

Usage::

    python -m benchmarks.measure --d 100000000 --heads split [--seed 0] [--device cpu] [--old-floor]
        [--without-loops] [--json]

The process imports torch and xorlib, takes a tiny step (so that lazy
initialisation is not counted), notes its resident memory, takes the step at
``d`` and reports the seconds and the peak resident set of the whole process
(Linux ``VmHWM``: the high-water mark since the process started its program;
``getrusage``'s ``ru_maxrss`` would inherit the parent's peak across ``fork``).
Then, in the same process and on one thread like the step, it times the honest
floor (:func:`benchmarks.workloads.code_bits`: drawing the step's :math:`dm` code bits with
the codes' own generator) and reports the step as a multiple of it; with
``--old-floor`` also the issue-14 floor (:func:`benchmarks.workloads.floor`: draw,
unpack to float64, one matrix-vector product; about a minute at :math:`d = 10^8`). ``--without-loops`` takes the
step with the tensor calls instead of the compiled loops of :mod:`xorlib._kernels` (the same numbers, slower).
:func:`measure_in_subprocess` runs this module as a child and reads its answer.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

import xorlib
from xorlib import _kernels as kernels

from .workloads import code_bits, floor

__all__ = ["Measurement", "measure", "measure_in_subprocess"]

_ROOT = Path(__file__).resolve().parents[1]
_MARK = "BENCHMARK-MEASUREMENT "


@dataclass(frozen=True)
class Measurement:
    """Time and memory of one step at ``d``, and what the step found."""

    d: int
    m: int
    heads: str
    seed: int
    device: str
    seconds: float
    start_bytes: int  # resident memory after the imports and a tiny step
    peak_bytes: int  # peak resident memory of the whole process
    success: bool  # certified worst-case loss <= the target
    split: bool  # the heads attend most to the two different hidden bits
    worst_case: float  # the certified upper bound on the worst-case loss over all 2^d inputs
    parameters: int  # trainable numbers, 2m
    floor_s: float  # the honest floor, timed after the step in the same process: drawing the d m code bits
    old_floor_s: float | None = None  # with old_floor=True: draw, unpack to float64, one matrix-vector product
    loops: bool = True  # whether the compiled loops ran (xorlib._kernels), else the tensor calls (the same numbers)

    @property
    def over_floor(self) -> float:
        """The step as a multiple of the honest floor."""
        return self.seconds / self.floor_s

    @property
    def over_old_floor(self) -> float | None:
        """The step as a multiple of the issue-14 floor (``None`` unless it was timed)."""
        return None if self.old_floor_s is None else self.seconds / self.old_floor_s

    @property
    def peak_gb(self) -> float:
        return self.peak_bytes / 1e9

    @property
    def above_start_gb(self) -> float:
        """Peak memory above the resident memory at the start: what the step itself needed."""
        return max(0, self.peak_bytes - self.start_bytes) / 1e9

    @property
    def command(self) -> str:
        """The command line that reproduces this measurement."""
        device = f" --device {self.device}" if self.device != "cpu" else ""
        without = "" if self.loops else " --without-loops"
        return f"python -m benchmarks.measure --d {self.d} --heads {self.heads} --seed {self.seed}{device}{without}"


def _status_bytes(field: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _peak_bytes() -> int:
    peak = _status_bytes("VmHWM")
    if peak is not None:
        return peak
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)


def measure(
    d: int, heads: str, *, seed: int = 0, device: str = "cpu", old_floor: bool = False, loops: bool = True
) -> Measurement:
    """Take the step in this process and measure it (the peak is this process's; see the module docstring).

    ``loops=False``: without the compiled loops, for the rest of this process (the tensor calls, the same numbers).
    """
    if not loops:
        kernels.AVAILABLE = False
    xorlib.one_step(4096, heads, seed=seed, device=device)
    start = _status_bytes("VmRSS") or _peak_bytes()
    begin = time.perf_counter()
    result = xorlib.one_step(d, heads, seed=seed, device=device)
    seconds = time.perf_counter() - begin
    peak = _peak_bytes()
    codes = result.config.model.codes
    previous = torch.get_num_threads()
    torch.set_num_threads(1)  # the step runs on one thread: so do the floors
    try:
        begin = time.perf_counter()
        code_bits(codes)
        floor_s = time.perf_counter() - begin
        old_floor_s = None
        if old_floor:
            query = torch.randn(codes.m, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
            begin = time.perf_counter()
            floor(d, codes.m, query, seed=seed, device=device)
            old_floor_s = time.perf_counter() - begin
    finally:
        torch.set_num_threads(previous)
    return Measurement(
        d=d, m=result.config.model.m, heads=heads, seed=seed, device=device, seconds=seconds, start_bytes=start,
        peak_bytes=peak, success=result.success, split=result.split,
        worst_case=float(result.worst_case.upper), parameters=result.parameters, floor_s=floor_s,
        old_floor_s=old_floor_s, loops=kernels.AVAILABLE and device == "cpu",
    )  # fmt: skip


def measure_in_subprocess(
    d: int,
    heads: str,
    *,
    seed: int = 0,
    device: str = "cpu",
    timeout_s: float = 900.0,
    old_floor: bool = False,
    loops: bool = True,
) -> Measurement:
    """Run :func:`measure` in a fresh Python process (``python -m benchmarks.measure``) and return its answer."""
    command = [sys.executable, "-m", "benchmarks.measure", "--d", str(d), "--heads", heads, "--seed", str(seed)]
    command += ["--device", device, "--json"] + (["--old-floor"] if old_floor else [])
    command += [] if loops else ["--without-loops"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(_ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=env, cwd=_ROOT, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith(_MARK)]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{' '.join(command[1:])} failed:\n{done.stderr[-3000:]}")
    return Measurement(**json.loads(lines[-1][len(_MARK) :]))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.measure", description=__doc__.strip().splitlines()[0])
    parser.add_argument("--d", type=int, required=True, help="number of positions, 4 to 10^9")
    parser.add_argument("--heads", choices=("tied", "split"), default="split")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", action="store_true", help="print one machine-readable line")
    parser.add_argument(
        "--old-floor", action="store_true", help="also time the issue-14 floor (draw, unpack, multiply; slow)"
    )
    parser.add_argument(
        "--without-loops", action="store_true", help="the tensor calls instead of the compiled loops (same numbers)"
    )
    args = parser.parse_args(argv)
    try:  # xorlib checks every argument before any work: its message is the usage error
        result = measure(
            args.d, args.heads, seed=args.seed, device=args.device, old_floor=args.old_floor,
            loops=not args.without_loops,
        )  # fmt: skip
    except (TypeError, ValueError) as err:
        parser.error(str(err))
    if args.json:
        print(_MARK + json.dumps(dataclasses.asdict(result)), flush=True)
    else:
        print(
            f"d = {result.d:,}, {result.heads} heads, {result.parameters} trainable numbers: {result.seconds:.2f} s, "
            f"peak memory {result.peak_gb:.2f} GB ({result.above_start_gb:.2f} GB above the start), "
            f"success {result.success}, split {result.split}, certified worst case {result.worst_case:.3g}"
            + ("" if result.loops else " (without the compiled loops)")
        )
        old = (
            ""
            if result.old_floor_s is None
            else f"; the issue-14 floor (draw, unpack, multiply) {result.old_floor_s:.2f} s, "
            f"{result.over_old_floor:.2f}x"
        )
        print(
            f"floor (drawing the {result.d * result.m:.3g} code bits, same process, one thread) "
            f"{result.floor_s:.2f} s: the step is {result.over_floor:.1f}x the floor{old}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
