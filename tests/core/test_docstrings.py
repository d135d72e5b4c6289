"""Every example in a public docstring runs and prints what it says (the examples are also the fuzzing's valid calls)."""

from __future__ import annotations

import doctest
import importlib

import _derived_contract as contract
import matplotlib
import pytest

matplotlib.use("Agg")

MODULES = sorted(
    {entry.target.__module__ for entry in contract.callables() if hasattr(entry.target, "__module__")}
    | {entry.owner.__module__ for entry in contract.callables() if entry.owner is not None}
)


@pytest.mark.parametrize("name", MODULES)
def test_the_examples_run(name: str) -> None:
    import matplotlib.pyplot as plt

    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(module, name, globs=vars(module).copy()):
        runner.run(test)
    plt.close("all")
    failed, attempted = runner.summarize(verbose=False)
    assert failed == 0, f"{failed} of {attempted} examples of {name} failed (run python -m doctest on it)"
