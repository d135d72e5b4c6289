"""Every public callable of xorlib refuses bad input with a clear error: zero unclear, zero silent.

For each callable, ``tests/_api_examples.py`` gives one valid call and, per parameter, the kinds of bad value it
must refuse (``tests/_api_specs.py``): wrong Python types, NaN and infinities, values out of range, sizes too large
to allocate, tensors of the wrong dtype, rank, size or values, a float32/float64 mix, absent devices, bad config
fields. Each bad call must

* raise :class:`TypeError` or :class:`ValueError` (or a subclass), within :data:`LIMIT_S` seconds (a refusal, not a
  computation: sizes are estimated before anything is allocated);
* name the argument as the caller spelled it (for a field of a config argument: the field's name);
* state what is allowed, and no impossible range such as ``must be <= -1 (and >= 0)``.

Every category runs its canonical bad values; hypothesis then draws more (derandomized, no database, so runs are
reproducible and write nothing to disk). ``test_every_public_callable_has_an_entry`` keeps the registry complete
as the API grows.
"""

from __future__ import annotations

import contextlib
import math
import re
import signal
import time
from collections.abc import Iterator
from datetime import timedelta

import matplotlib

matplotlib.use("Agg")

import _api_examples
import matplotlib.pyplot as plt
import pytest
from _api_examples import (
    BY_KEY,
    ENTRIES,
    UNKNOWN,
    Entry,
    bad_call_strategy,
    cases,
    is_exception,
    public_callables,
    specs,
    valid_value,
)
from _api_specs import Bad
from hypothesis import HealthCheck, given, settings

#: A bad call must be refused within this many seconds (it is a check, not a computation).
LIMIT_S = 10.0
#: Hypothesis examples per callable, beyond the canonical bad values (which always run).
EXAMPLES = 50

_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
#: Contradictory ranges: ``in [a, b]`` with a > b, ``in (a, b]`` with a >= b, ``<= a (and >= b)`` with a < b, ...
_IMPOSSIBLE = (
    (re.compile(rf"\bin\s*\[\s*({_NUMBER})\s*,\s*({_NUMBER})\s*\]"), lambda a, b: a > b),
    (re.compile(rf"\bin\s*\(\s*({_NUMBER})\s*,\s*({_NUMBER})\s*\]"), lambda a, b: a >= b),
    (re.compile(rf"\bin\s*\[\s*({_NUMBER})\s*,\s*({_NUMBER})\s*\)"), lambda a, b: a >= b),
    (re.compile(rf"<=\s*({_NUMBER})\s*\(and\s*>=\s*({_NUMBER})\)"), lambda a, b: a < b),
    (re.compile(rf">=\s*({_NUMBER})\s*and\s*<=\s*({_NUMBER})"), lambda a, b: a > b),
    (re.compile(rf"between\s*({_NUMBER})\s*and\s*({_NUMBER})"), lambda a, b: a > b),
)
#: A clear message says what is allowed.
_STATES = re.compile(
    r"\b(must|should|expect(?:s|ed)?|needs?|requires?|only|at most|at least|one of|allowed|cannot|use|choose|"
    r"not available|unknown|no (?:row|column|such))\b",
    re.IGNORECASE,
)


class _TooSlow(Exception):
    pass


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Interrupt the block (at its next Python bytecode) after ``seconds``: a bad call that computes is a failure."""

    def expire(*_args: object) -> None:
        raise _TooSlow

    previous = signal.signal(signal.SIGALRM, expire)
    outer, interval = signal.setitimer(signal.ITIMER_REAL, seconds)  # pytest-timeout's alarm, if it set one
    start = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer > 0:  # give the outer alarm back what is left of it
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - start), 1e-3), interval)


def _names_it(message: str, names: tuple[str, ...]) -> bool:
    return any(re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", message) for name in names)


def _impossible(message: str) -> str | None:
    for pattern, contradicts in _IMPOSSIBLE:
        for match in pattern.finditer(message):
            a, b = float(match[1]), float(match[2])
            if math.isfinite(a) and math.isfinite(b) and contradicts(a, b):
                return match[0]
    return None


def problem(entry: Entry, bad: Bad) -> str | None:
    """What is wrong with how ``entry`` handles ``bad`` (``None``: a clear, quick error)."""
    kwargs = entry.example()
    start = time.perf_counter()
    try:
        with _time_limit(LIMIT_S):
            kwargs[bad.param] = bad.make(valid_value(entry, kwargs, bad.param))
            entry.target(**kwargs)
    except _TooSlow:
        return f"still computing after {LIMIT_S:g} s instead of refusing"
    except (TypeError, ValueError) as err:
        message = str(err)
        if not _names_it(message, bad.names):
            return f"unclear: {type(err).__name__}({message!r}) does not name {' or '.join(bad.names)}"
        if bad.category != "unknown keyword" and not _STATES.search(message):
            return f"unclear: {type(err).__name__}({message!r}) does not say what is allowed"
        if impossible := _impossible(message):
            return f"impossible range {impossible!r} in {type(err).__name__}({message!r})"
        return None
    except Exception as err:
        return f"unclear: {type(err).__name__}: {str(err)[:300]}"
    finally:
        plt.close("all")
    return f"silent: accepted ({time.perf_counter() - start:.2f} s)"


def _params(entries: list[Entry]) -> list:
    return [
        pytest.param(e, id=e.key, marks=[pytest.mark.xfail(reason=e.xfail, strict=True)] if e.xfail else [])
        for e in entries
    ]


@pytest.fixture(autouse=True)
def _quiet(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """No disk cache (an own, empty folder for ``clear_cache``), no progress bars, figures closed."""
    from xorlib import runtime

    monkeypatch.setenv("XORLIB_NO_CACHE", "1")
    monkeypatch.setenv("XORLIB_CACHE", str(tmp_path_factory.getbasetemp() / "fuzz-cache"))
    _api_examples._TMP.setdefault("dir", tmp_path_factory.mktemp("fuzz-files"))
    progress = dict(runtime._state)
    yield
    runtime._state.update(progress)
    plt.close("all")


def test_every_public_callable_has_an_entry() -> None:
    registered = {id(entry.target) for entry in ENTRIES}
    missing = [names[0] for obj, names in public_callables().values() if id(obj) not in registered]
    assert not missing, f"public callables without an entry in tests/_api_examples.py: {missing}"
    public = set(public_callables())
    stale = [entry.key for entry in ENTRIES if id(entry.target) not in public]
    assert not stale, f"entries for callables that are not public (remove them): {stale}"
    assert len(BY_KEY) == len(ENTRIES), "two entries for one key"


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.key for e in ENTRIES])
def test_every_parameter_has_a_spec(entry: Entry) -> None:
    specs(entry)  # raises naming the parameter without one
    example = entry.example()
    unknown = [name for name in example if name not in specs(entry)]
    assert not unknown, f"{entry.key}: the example passes {unknown}, which have no spec"


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.key for e in ENTRIES])
def test_the_valid_example_runs(entry: Entry) -> None:
    entry.target(**entry.example())


@pytest.mark.parametrize("entry", _params([e for e in ENTRIES if not is_exception(e)]))
def test_bad_calls_get_clear_errors(entry: Entry) -> None:
    canonical = [bad for case in cases(entry) for bad in case.canonical]
    found = [f"{entry.key}({bad}): {p}" for bad in canonical if (p := problem(entry, bad))]
    assert not found, f"{len(found)} of {len(canonical)} bad calls:\n" + "\n".join(found)

    @settings(
        max_examples=EXAMPLES,
        deadline=timedelta(seconds=LIMIT_S),
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(bad=bad_call_strategy(entry))
    def generated(bad: Bad) -> None:
        found = problem(entry, bad)
        assert found is None, f"{entry.key}({bad}): {found}"

    generated()


def test_an_unknown_keyword_is_part_of_every_entry() -> None:
    assert all(any(c.param == UNKNOWN for c in cases(e)) for e in ENTRIES if not is_exception(e))
