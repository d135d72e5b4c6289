"""Time to recover the pair: one step vs multi-step Adam vs an SGD-trained MLP (issue 6c).

Usage::

    python benchmarks/bench_recovery.py [--small] [--threads N] [--out DIR]

Prints a markdown table of ratios measured side by side in one process and
writes a copy (.md and .json) under ``_build/benchmarks/`` (see
:func:`xorlib.benchmarking.bench_recovery`).
"""

from __future__ import annotations

from xorlib.benchmarking import bench_recovery, run_cli

if __name__ == "__main__":
    raise SystemExit(run_cli(bench_recovery))
