"""The book's experiments: one registry, each experiment a frozen plan, a computation and a frozen result.

A chapter runs an experiment by name and reads its result by named fields::

    from xorlib.experiments import plan, run

    table = run("across_d")          # the book's plan; run("across_d", full=True) for the full one
    table.rows[0].successes
    smaller = dataclasses.replace(plan("across_d"), grid=((16, 4),))
    run("across_d", smaller)

Every result is cached on disk, keyed by the plan, the package's source and the library versions
(``xorlib._cache``), and computed on one torch thread, so it is the same whatever the caller's
thread count. ``python -m xorlib.experiments [NAME ...] [--full] [--jobs N]`` runs them from the
command line (``--list`` lists them). A plan's fields declare every size and count with its maximum:
a plan too large is refused when it is made, before any work.

A new experiment is a module ``xorlib/experiments/_<topic>.py`` with a plan
(``@config`` dataclass), a result (frozen dataclass) and ``@experiment("name", book=..., full=...)``
on the function from one to the other, imported below; nothing else changes.
"""

from __future__ import annotations

from typing import Any, Literal

from .._checks import check_instance
from .._contract import public
from . import (  # noqa: F401  (each module registers its experiments)
    _attention_variants,
    _authors,
    _ffnn,
    _finite_samples,
    _linear_models,
    _multistep,
    _one_step,
    _sample_bound,
    _sigma_samples,
    _verify,
)
from ._registry import REGISTRY

__all__ = ["plan", "run"]

#: The names of the experiments, as :func:`run` takes them.
Name = Literal[tuple(REGISTRY)]  # type: ignore[valid-type]


@public
def plan(name: Name, *, full: bool = False) -> Any:
    """The book's plan of the experiment ``name`` (``full=True``: the full one), a frozen dataclass.

    Change a field with :func:`dataclasses.replace` (the plan checks it) and pass the plan to :func:`run`.

    Examples
    --------
    >>> plan("tie_frequency")
    TiePlan(ds=(16, 64, 256), draws=200, first_seed=0)
    """
    entry = REGISTRY[name]
    return entry.full if full else entry.book


@public
def run(name: Name, plan: Any = None, *, full: bool = False) -> Any:
    """Run (or read from the disk cache) the experiment ``name`` on ``plan``: the book's plan by default.

    Parameters
    ----------
    name
        One of the registered experiments (``python -m xorlib.experiments --list`` lists them).
    plan
        A plan of that experiment (``plan(name)``, changed with :func:`dataclasses.replace`); ``None``:
        the book's plan, or the full one if ``full``.
    full
        Run the full plan (minutes to hours) instead of the book's; only without ``plan``.

    Returns
    -------
    The experiment's frozen result, with named fields.

    Examples
    --------
    >>> frequency = run("tie_frequency", plan("tie_frequency").__class__(ds=(16,), draws=20))
    >>> frequency.rows[0].draws
    20
    """
    entry = REGISTRY[name]
    if plan is None:
        return entry.compute(entry.full if full else entry.book)
    check_instance("plan", plan, entry.plan_type, f"a {entry.plan_type.__name__} (plan({name!r}))")
    if full:
        raise ValueError("full must be False when a plan is given: the plan says what to run")
    return entry.compute(plan)
