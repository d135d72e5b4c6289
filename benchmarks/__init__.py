"""Benchmarks of xorlib against its peers, each script runnable alone with ``--small`` (CI) or in full.

The measuring code lives in :mod:`xorlib.benchmarking` (so the performance
chapter can run the same functions); the scripts here are its command lines.
``python -m benchmarks.run_all [--small]`` runs them all.
"""
