"""On-disk cache for results that take more than a few seconds.

Results are memoised with :class:`joblib.Memory`, keyed by the function and
every argument. The cache folder also carries a fingerprint of the source of
the whole :mod:`xorlib` package, so that changing any code invalidates every
cached result: a stale number can never reach the book.

Location: ``$XORLIB_CACHE`` if set, else ``.cache/xorlib`` in the repository
holding this package (a source checkout), else ``~/.cache/xorlib``.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from joblib import Memory

__all__ = ["PRESENTATION_ARGUMENTS", "cache_dir", "cached", "clear_cache", "source_fingerprint"]

F = TypeVar("F", bound=Callable[..., object])
_PACKAGE = Path(__file__).resolve().parent


@functools.cache
def source_fingerprint() -> str:
    """A short hash of every ``.py`` file of :mod:`xorlib`."""
    digest = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*.py")):
        digest.update(path.relative_to(_PACKAGE).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def cache_dir() -> Path:
    """The root folder of the cache (see the module docstring)."""
    if env := os.environ.get("XORLIB_CACHE"):
        return Path(env).expanduser()
    checkout = _PACKAGE.parent
    if (checkout / "pyproject.toml").is_file() and os.access(checkout, os.W_OK):
        return checkout / ".cache" / "xorlib"
    return Path.home() / ".cache" / "xorlib"


@functools.cache
def _memory() -> Memory:
    return Memory(location=cache_dir() / source_fingerprint(), verbose=0)


#: Arguments that change only how a computation is shown, never its result: not part of the key.
PRESENTATION_ARGUMENTS = ("progress",)


def cached(function: F) -> F:
    """Decorate ``function`` so that its results are cached on disk by argument values.

    Arguments named in :data:`PRESENTATION_ARGUMENTS` (a ``progress`` flag) are
    left out of the key, so showing a progress bar reuses the book's result.
    ``XORLIB_NO_CACHE=1`` turns the cache off (every call recomputes).
    """
    memoised = None
    ignored = [name for name in PRESENTATION_ARGUMENTS if name in inspect.signature(function).parameters]

    @functools.wraps(function)
    def wrapper(*args: object, **kwargs: object) -> object:
        nonlocal memoised
        if os.environ.get("XORLIB_NO_CACHE") == "1":
            return function(*args, **kwargs)
        if memoised is None:
            memoised = _memory().cache(function, ignore=ignored)
        return memoised(*args, **kwargs)

    wrapper.uncached = function  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


def clear_cache() -> None:
    """Delete every cached result."""
    _memory().clear(warn=False)
