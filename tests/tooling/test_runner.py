"""Tests of the @experiment decorator: cache, one thread, no progress in the key, the function's own checks."""

import collections
import dataclasses
import inspect
import sys
import types
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from xorlib import cache, runtime
from xorlib.experiments._runner import experiment

CALLS: collections.Counter = collections.Counter()


@dataclasses.dataclass(frozen=True)
class SumResult:
    __module__ = "xorlib._runner_tests"  # result types must live in xorlib; this one pretends to
    total: torch.Tensor
    grand: torch.Tensor
    threads: int


@dataclasses.dataclass(frozen=True)
class GridConfig:
    d: int
    seed: int = 0

    def __post_init__(self) -> None:
        if self.d < 1:
            raise ValueError(f"d must be an integer >= 1, got {self.d}")


@experiment
def matmul_sum(d: int, *, seed: int = 0) -> SumResult:
    """A small reduction whose last bits depend on the thread count when it is not fixed."""
    CALLS["matmul_sum"] += 1
    if d < 1:
        raise ValueError(f"d must be an integer >= 1, got {d}")
    generator = torch.Generator().manual_seed(seed)
    a = torch.randn(d, 256, generator=generator, dtype=torch.float32)
    total = (a @ a.T).sum(dim=1)
    for _ in runtime.progress(range(2), desc="rounds"):
        total = total + (a.exp() @ a[0]).sum()
    grand = torch.randn(2**20, generator=generator).sum()  # a parallel reduction sums in another order on 2 threads
    return SumResult(total=total, grand=grand, threads=torch.get_num_threads())


@dataclasses.dataclass
class MutableConfig:
    d: int


@experiment
def echo(value: object, *rest: object, **options: object) -> tuple:
    CALLS["echo"] += 1
    return (CALLS["echo"],)


@experiment
def configured(config: GridConfig) -> SumResult:
    CALLS["configured"] += 1
    zeros = torch.zeros(config.d, dtype=torch.float64)
    return SumResult(total=zeros, grand=zeros.sum(), threads=torch.get_num_threads())


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh cache folder and a small package to fingerprint (edits elsewhere cannot change a key)."""
    package = tmp_path / "package"
    package.mkdir()
    (package / "core.py").write_text("")
    monkeypatch.setattr(cache, "_PACKAGE", package)
    monkeypatch.setattr(cache, "_warned", set())
    monkeypatch.setenv("XORLIB_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("XORLIB_NO_CACHE", raising=False)
    CALLS.clear()
    previous = torch.get_num_threads()
    yield
    torch.set_num_threads(previous)
    runtime.set_progress(False)


def test_keeps_name_signature_and_docstring() -> None:
    assert matmul_sum.__name__ == "matmul_sum" and matmul_sum.__doc__.startswith("A small reduction")
    assert str(inspect.signature(matmul_sum)) == "(d: int, *, seed: int = 0) -> xorlib._runner_tests.SumResult"


def test_computes_on_one_thread_and_restores_the_callers_count() -> None:
    torch.set_num_threads(2)
    assert matmul_sum(64).threads == 1 and matmul_sum.uncached(64).threads == 1
    assert torch.get_num_threads() == 2


def test_results_are_identical_on_one_and_two_threads() -> None:
    results = []
    for count in (1, 2, 1, 2):
        torch.set_num_threads(count)
        result = matmul_sum.uncached(128, seed=3)
        results.append(torch.cat([result.total, result.grand.reshape(1)]))
    assert all(torch.equal(results[0], other) for other in results[1:])
    cached = matmul_sum(128, seed=3)
    assert torch.equal(torch.cat([cached.total, cached.grand.reshape(1)]), results[0])


def test_the_key_does_not_depend_on_the_thread_count_or_the_progress_switch() -> None:
    torch.set_num_threads(2)
    first = matmul_sum(32)
    torch.set_num_threads(1)
    runtime.set_progress(True)
    second = matmul_sum(32)
    assert CALLS["matmul_sum"] == 1 and torch.equal(first.total, second.total)
    assert second.total.dtype == torch.float32 and isinstance(second, SumResult)
    assert len(list(cache.cache_dir().glob("v1/*/*.json"))) == 1


def test_uncached_recomputes_and_stores_nothing() -> None:
    matmul_sum.uncached(8), matmul_sum.uncached(8)
    assert CALLS["matmul_sum"] == 2 and not cache.cache_dir().exists()


def test_arguments_are_checked_by_the_function_not_the_decorator() -> None:
    with pytest.raises(ValueError, match="d must be an integer >= 1"):
        matmul_sum(0)
    with pytest.raises(ValueError, match="d must be an integer >= 1"):
        configured(GridConfig(d=0))
    assert CALLS["matmul_sum"] == 1 and not list(cache.cache_dir().glob("v1/*/*.json"))  # an error is not cached


def test_a_config_dataclass_keys_by_its_fields() -> None:
    configured(GridConfig(3)), configured(GridConfig(3, seed=0)), configured(GridConfig(3, seed=1))
    assert CALLS["configured"] == 2


def test_arguments_bind_to_the_signature_and_keep_their_types() -> None:
    assert echo(3) == echo(value=3) == echo(3)  # one entry: positional or by name
    assert CALLS["echo"] == 1
    distinct = [
        1,
        1.0,
        True,
        "1",
        (1,),
        [1],
        {"a": 1},
        {1: "a"},
        None,
        torch.float64,
        torch.device("cpu"),
        GridConfig(1),
    ]
    assert len({echo(value)[0] for value in distinct}) == len(distinct)  # 1, 1.0, True; tuple, list: never one entry
    assert echo(GridConfig(1)) == echo(GridConfig(1, seed=0)) != echo(GridConfig(1, seed=1))
    assert echo(1, 2, key=3) != echo(1, 2, key=4) != echo(1, 2, 4)
    matmul_sum(8), matmul_sum(8, seed=0), matmul_sum(d=8)
    assert CALLS["matmul_sum"] == 1  # defaults applied before the key is made


@pytest.mark.parametrize("bad", [{1, 2}, lambda: 0, torch.ones(1), np.ones(1), MutableConfig(1), object()])
def test_an_argument_a_key_cannot_hold_is_a_type_error(bad: object, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(TypeError, match="argument value"):
        echo(bad)
    monkeypatch.setenv("XORLIB_NO_CACHE", "1")  # the same with the cache off
    with pytest.raises(TypeError, match=r"argument value\[0\]"):
        echo([bad])
    assert CALLS["echo"] == 0


def test_refuses_only_arguments_it_cannot_encode() -> None:
    with pytest.raises(TypeError, match="argument d is a Tensor"):
        matmul_sum(torch.tensor(3))
    with pytest.raises(TypeError, match="d"):
        matmul_sum(d={3})
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        matmul_sum(3, seeds=2)
    assert CALLS["matmul_sum"] == 0


def test_a_fresh_process_rebuilds_the_declared_return_type(monkeypatch: pytest.MonkeyPatch) -> None:
    matmul_sum(16)
    monkeypatch.setattr(cache, "_registry", {})  # nothing registered, as in a new kernel
    assert isinstance(matmul_sum(16), SumResult) and CALLS["matmul_sum"] == 1


def test_refuses_what_is_not_a_function() -> None:
    with pytest.raises(TypeError, match="experiment expects a function"):
        experiment(3)  # type: ignore[arg-type]


def test_a_process_running_older_code_than_the_disk_stores_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    edited = tmp_path / "package" / "edited.py"
    edited.write_text("")  # changed after this process imported the cache (and this module)
    module = types.ModuleType("xorlib_edited_after_import")
    module.__file__ = str(edited)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        matmul_sum(8), matmul_sum(8)
    assert CALLS["matmul_sum"] == 2 and not list(cache.cache_dir().glob("v1/*/*.json"))
    (warning,) = caught  # one warning for the two calls
    assert issubclass(warning.category, cache.CacheWarning) and str(warning.message).endswith("(restart)")
