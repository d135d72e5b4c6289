"""The empirical gradient vs one pass over the data, X @ v (issue 6b).

Usage::

    python benchmarks/bench_empirical_gradient.py [--small] [--threads N] [--out DIR]

Prints a markdown table of ratios measured side by side in one process and
writes a copy (.md and .json) under ``_build/benchmarks/`` (see
:func:`xorlib.benchmarking.bench_empirical_gradient`).
"""

from __future__ import annotations

from xorlib.benchmarking import bench_empirical_gradient, run_cli

if __name__ == "__main__":
    raise SystemExit(run_cli(bench_empirical_gradient))
