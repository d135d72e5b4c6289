"""Tests of xorlib.cache: results are reused by argument value, and presentation flags are not part of the key."""

from __future__ import annotations

import itertools

from xorlib.cache import cached

CALLS = itertools.count()


@cached
def counted_square(value: int, *, progress: bool = False) -> tuple[int, int]:
    return value * value, next(CALLS)


def test_same_arguments_hit_the_cache_and_progress_is_ignored(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XORLIB_CACHE", str(tmp_path))
    first = counted_square(7)
    assert counted_square(7) == first
    assert counted_square(7, progress=True) == first  # a progress bar does not recompute
    assert counted_square(8)[1] != first[1]


def test_no_cache_environment_variable_recomputes(monkeypatch) -> None:
    monkeypatch.setenv("XORLIB_NO_CACHE", "1")
    assert counted_square(3)[1] != counted_square(3)[1]
