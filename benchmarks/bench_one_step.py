"""Closed-form one-step gradient vs autograd on the same batch, and the population step (issue 6a).

Usage::

    python benchmarks/bench_one_step.py [--small] [--threads N] [--out DIR]

Prints a markdown table of ratios measured side by side in one process and
writes a copy (.md and .json) under ``_build/benchmarks/`` (see
:func:`xorlib.benchmarking.bench_one_step`).
"""

from __future__ import annotations

from xorlib.benchmarking import bench_one_step, run_cli

if __name__ == "__main__":
    raise SystemExit(run_cli(bench_one_step))
