"""The book's experiments, one module per experiment.

Each experiment is a function of its parameters (or of one frozen config
dataclass) that computes a grid and returns a frozen result dataclass. One
decorator, :func:`xorlib.experiments._runner.experiment`, applies the disk cache
(:mod:`xorlib.cache`) and runs the computation on one torch thread; progress bars
follow the package's one switch (:func:`xorlib.runtime.set_progress`).
"""
