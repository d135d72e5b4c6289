"""Wall time and peak memory of the one-step experiment at d = 1e5 and 1e6, in fresh processes (issue 6, scale).

Usage::

    python benchmarks/bench_scale.py [--small] [--threads N] [--out DIR]

Prints a markdown table of ratios measured side by side in one process and
writes a copy (.md and .json) under ``_build/benchmarks/`` (see
:func:`xorlib.benchmarking.bench_scale`).
"""

from __future__ import annotations

from xorlib.benchmarking import bench_scale, run_cli

if __name__ == "__main__":
    raise SystemExit(run_cli(bench_scale))
