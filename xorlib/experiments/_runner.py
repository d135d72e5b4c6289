"""The one decorator every experiment wears: :func:`experiment`.

*What this is:* the plumbing between an experiment and the side concerns. An
experiment is a function of its parameters that computes a grid and returns a
frozen result dataclass; ``@experiment`` adds, from the outside in,

1. the disk cache (:func:`xorlib.cache.cached`): the key is the function's
   qualified name, its arguments, the package source as it is at the call and the
   library versions; the declared return type (and the result dataclasses its
   fields name) is registered, the only kind of object the cache rebuilds;
2. one torch CPU thread (:func:`xorlib.runtime.threads`) around the computation,
   so that a result is bit-identical whatever thread count the caller uses.

*What it is not:* a validator or a progress bar. The function (or its config
dataclass) checks its own arguments; the decorator refuses only an argument that
it cannot encode in a key (a :class:`TypeError` naming it). Progress is the
function's own :func:`xorlib.runtime.progress` calls under the package's one
switch, which no key depends on.

``fn.uncached(...)`` runs the computation, single-threaded, without the cache;
``functools.wraps`` keeps the name, signature and docstring.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from .. import runtime
from ..cache import cached

__all__ = ["experiment"]

F = TypeVar("F", bound=Callable[..., Any])


def experiment(function: F) -> F:
    """Make ``function`` an experiment: cached on disk and computed on one torch thread.

    Parameters
    ----------
    function
        Computes a grid from its arguments and returns a frozen result dataclass
        of :mod:`xorlib` (its return annotation), or a value built from ``None``,
        bools, ints, floats, strings, lists, tuples, dicts, arrays and tensors.

    Returns
    -------
    callable
        ``function`` with the same signature and docstring; ``.uncached`` skips
        the cache but keeps the single thread.

    Examples
    --------
    >>> @experiment
    ... def grid(d: int, seeds: int = 4) -> GridResult:  # doctest: +SKIP
    ...     return GridResult(...)
    """
    if not callable(function):
        raise TypeError(f"experiment expects a function, got {type(function).__name__} {function!r}")

    @functools.wraps(function)
    def single_threaded(*args: Any, **kwargs: Any) -> Any:
        with runtime.threads(1):
            return function(*args, **kwargs)

    return cached(single_threaded)  # type: ignore[return-value]
