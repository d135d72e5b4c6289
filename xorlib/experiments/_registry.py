"""The one registry of experiments, and the one decorator every experiment wears: :func:`experiment`.

*What this is:* the plumbing between an experiment and the side concerns. An experiment is a
function of one frozen **plan** (a :func:`xorlib._contract.config` dataclass whose fields declare
every size and count with its maximum, so a plan too large is refused before any work) that
returns a frozen **result** with named fields. ``@experiment(name, book=..., full=...)`` adds,
from the outside in,

1. the disk cache (``xorlib._cache.cached``): the key is the experiment's qualified name, its
   plan, the package source as it is at the call and the library versions; the declared result
   type is the one type an entry may decode to;
2. one torch CPU thread (``xorlib._runtime.threads``) around the computation, so that a result
   is bit-identical whatever thread count the caller uses;

and registers the experiment under ``name`` with its two plans: the book's (what the chapters and
CI run) and the full one (``python -m xorlib.experiments NAME --full``). Progress is the
computation's own progress calls (``xorlib._runtime.progress``) under the package's one switch, which no
key depends on. *What it is not:* a validator: the plan checked itself when it was made.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from .._cache import cached
from .._runtime import threads

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Experiment:
    """One registered experiment: its computation (cached, single-threaded) and its two plans."""

    name: str
    compute: Callable[[Any], Any]
    book: Any
    full: Any
    full_minutes: float  # about how long the full plan took on one core of the development machine

    @property
    def plan_type(self) -> type:
        """The class of the experiment's plans."""
        return type(self.book)

    @property
    def result_type(self) -> type:
        """The class of the experiment's results (its declared return type)."""
        return typing.get_type_hints(inspect.unwrap(self.compute))["return"]

    @property
    def summary(self) -> str:
        """The first line of the computation's docstring."""
        return (inspect.getdoc(self.compute) or "").splitlines()[0]


#: Every experiment, by name, in the order the modules register them.
REGISTRY: dict[str, Experiment] = {}


def experiment(name: str, *, book: Any, full: Any, full_minutes: float = 0.1) -> Callable[[F], F]:
    """Register ``function(plan) -> result`` as the experiment ``name``, cached and single-threaded.

    ``book`` and ``full`` are instances of the plan class ``function`` takes; ``full_minutes`` is about
    how long the full plan takes on one core (the command line starts the longest first).
    ``fn.uncached(plan)`` runs the computation, single-threaded, without the cache.
    """
    if type(full) is not type(book) or not dataclasses.is_dataclass(book):
        raise TypeError(f"experiment {name!r}: book and full must be plans of one dataclass type")

    def register(function: F) -> F:
        @functools.wraps(function)
        def single_threaded(plan: Any) -> Any:
            with threads(1):
                return function(plan)

        computation = cached(single_threaded)
        if name in REGISTRY:
            raise ValueError(f"an experiment named {name!r} is registered twice")
        REGISTRY[name] = Experiment(name, computation, book, full, full_minutes)
        return computation  # type: ignore[return-value]

    return register
