"""The benchmark harness: xorlib's speed and memory against the floor, measured side by side (outside the package).

Command lines (``make benchmarks`` and ``make benchmarks-small`` run the first)::

    python -m benchmarks [--small] [--device D] [--only codes step stream chapters grids]   # the tables, with commands
    python -m benchmarks.measure --d 100000000 --heads split      # one streamed step: time and peak memory
    python -m benchmarks.chapter_times                            # every chapter in a fresh kernel on one core

The modules use each other only through these names, which are their interface:

* :mod:`benchmarks.timing`: :func:`~benchmarks.timing.time_interleaved`, :class:`~benchmarks.timing.Timing`;
* :mod:`benchmarks.workloads`: :func:`~benchmarks.workloads.floor`, :func:`~benchmarks.workloads.generate_codes`,
  :func:`~benchmarks.workloads.score_pass`;
* :mod:`benchmarks.measure`: :func:`~benchmarks.measure.measure_in_subprocess`,
  :class:`~benchmarks.measure.Measurement`;
* :mod:`benchmarks.suite`: the three speed benchmarks (:func:`~benchmarks.suite.codes_benchmark`,
  :func:`~benchmarks.suite.step_benchmark`, :func:`~benchmarks.suite.stream_benchmark`), their results, and
  :func:`~benchmarks.suite.as_text`;
* :mod:`benchmarks.book`: the two time budgets (:func:`~benchmarks.book.chapters_benchmark`, every chapter on one
  core; :func:`~benchmarks.book.grids_benchmark`, the full experiment grids).

From xorlib they use only the public API (``xorlib.one_step``, ``xorlib.codes.Codes``).
"""
