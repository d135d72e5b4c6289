"""The experiments' one shape: a frozen plan (book, full), a computation, a frozen result; one registry, one CLI.

Every plan refuses, when it is made, a size or count above its declared maximum: each field's bad values are
derived from its annotation, as the public API's are (``tests/core/_derived_contract.py``).
"""

from __future__ import annotations

import collections
import dataclasses
import inspect
import subprocess
import sys
import time
import typing
import warnings
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
import _derived_contract as contract

from xorlib import _cache, _runtime
from xorlib.experiments import __main__ as cli
from xorlib.experiments import plan, run
from xorlib.experiments._registry import REGISTRY, experiment

CALLS: collections.Counter = collections.Counter()


@dataclasses.dataclass(frozen=True)
class SumPlan:
    d: int
    seed: int = 0


@dataclasses.dataclass(frozen=True)
class SumResult:
    total: torch.Tensor
    grand: torch.Tensor
    threads: int


@experiment("_test_matmul_sum", book=SumPlan(64), full=SumPlan(128))
def matmul_sum(plan: SumPlan) -> SumResult:
    """A small reduction whose last bits depend on the thread count when it is not fixed."""
    CALLS["matmul_sum"] += 1
    if plan.d < 1:
        raise ValueError(f"d must be an integer >= 1, got {plan.d}")
    generator = torch.Generator().manual_seed(plan.seed)
    a = torch.randn(plan.d, 256, generator=generator, dtype=torch.float32)
    total = (a @ a.T).sum(dim=1)
    for _ in _runtime.progress(range(2), desc="rounds"):
        total = total + (a.exp() @ a[0]).sum()
    grand = torch.randn(2**20, generator=generator).sum()  # a parallel reduction sums in another order on 2 threads
    return SumResult(total=total, grand=grand, threads=torch.get_num_threads())


TEST_ENTRY = REGISTRY.pop("_test_matmul_sum")  # a test experiment: not one of the book's


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh cache folder and a small package to fingerprint (edits elsewhere cannot change a key)."""
    package = tmp_path / "package"
    package.mkdir()
    (package / "core.py").write_text("")
    monkeypatch.setattr(_cache, "_PACKAGE", package)
    monkeypatch.setattr(_cache, "_warned", set())
    monkeypatch.setenv("XORLIB_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("XORLIB_NO_CACHE", raising=False)
    CALLS.clear()
    previous = torch.get_num_threads()
    yield
    torch.set_num_threads(previous)
    _runtime.set_progress(False)


# --------------------------------------------------------------------------------------------- the decorator
def test_keeps_name_and_docstring_and_registers_both_plans(isolated) -> None:
    assert matmul_sum.__name__ == "matmul_sum" and matmul_sum.__doc__.startswith("A small reduction")
    assert TEST_ENTRY.book == SumPlan(64) and TEST_ENTRY.full == SumPlan(128) and TEST_ENTRY.result_type is SumResult
    assert TEST_ENTRY.summary.startswith("A small reduction")


def test_computes_on_one_thread_and_restores_the_callers_count(isolated) -> None:
    torch.set_num_threads(2)
    assert matmul_sum(SumPlan(64)).threads == 1 and matmul_sum.uncached(SumPlan(64)).threads == 1
    assert torch.get_num_threads() == 2


def test_results_are_identical_on_one_and_two_threads(isolated) -> None:
    results = []
    for count in (1, 2, 1, 2):
        torch.set_num_threads(count)
        result = matmul_sum.uncached(SumPlan(128, seed=3))
        results.append(torch.cat([result.total, result.grand.reshape(1)]))
    assert all(torch.equal(results[0], other) for other in results[1:])
    cached = matmul_sum(SumPlan(128, seed=3))
    assert torch.equal(torch.cat([cached.total, cached.grand.reshape(1)]), results[0])


def test_the_key_is_the_plan_not_the_thread_count_or_the_progress_switch(isolated) -> None:
    torch.set_num_threads(2)
    first = matmul_sum(SumPlan(32))
    torch.set_num_threads(1)
    _runtime.set_progress(True)
    second = matmul_sum(SumPlan(32))
    assert CALLS["matmul_sum"] == 1 and torch.equal(first.total, second.total)
    assert second.total.dtype == torch.float32 and isinstance(second, SumResult)
    matmul_sum(SumPlan(32, seed=1))
    assert CALLS["matmul_sum"] == 2 and len(list(_cache.cache_dir().glob("v1/*/*.json"))) == 2


def test_uncached_recomputes_and_stores_nothing_and_an_error_is_not_cached(isolated) -> None:
    matmul_sum.uncached(SumPlan(8)), matmul_sum.uncached(SumPlan(8))
    assert CALLS["matmul_sum"] == 2 and not _cache.cache_dir().exists()
    with pytest.raises(ValueError, match="d must be"):
        matmul_sum(SumPlan(0))
    assert not list(_cache.cache_dir().glob("v1/*/*.json"))


def test_a_fresh_process_rebuilds_the_declared_result_type(isolated, monkeypatch: pytest.MonkeyPatch) -> None:
    matmul_sum(SumPlan(16))
    monkeypatch.setattr(_cache, "_registry", {})  # nothing registered, as in a new kernel
    assert isinstance(matmul_sum(SumPlan(16)), SumResult) and CALLS["matmul_sum"] == 1


def test_a_process_running_older_code_than_the_disk_stores_nothing(isolated, tmp_path, monkeypatch) -> None:
    import types

    edited = tmp_path / "package" / "edited.py"
    edited.write_text("")  # changed after this process imported the cache (and this module)
    module = types.ModuleType("xorlib_edited_after_import")
    module.__file__ = str(edited)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        matmul_sum(SumPlan(8)), matmul_sum(SumPlan(8))
    assert CALLS["matmul_sum"] == 2 and not list(_cache.cache_dir().glob("v1/*/*.json"))
    (warning,) = caught  # one warning for the two calls
    assert issubclass(warning.category, _cache.CacheWarning) and str(warning.message).endswith("(restart)")


def test_refuses_plans_of_two_types() -> None:
    with pytest.raises(TypeError, match="book and full must be plans of one dataclass type"):
        experiment("_test_bad", book=SumPlan(1), full=(1,))


# --------------------------------------------------------------------------------------------- the registry
@pytest.mark.parametrize("name", list(REGISTRY))
def test_every_experiment_has_the_one_shape(name: str) -> None:
    entry = REGISTRY[name]
    assert getattr(entry.plan_type, "__xorlib_config__", False), "a plan is a checked config"
    assert type(entry.full) is entry.plan_type and entry.summary
    result = entry.result_type
    assert dataclasses.is_dataclass(result) and result.__dataclass_params__.frozen
    for hint in typing.get_type_hints(result).values():
        assert typing.get_origin(hint) is not dict, "results have named fields, not letter-keyed dicts"
    assert list(inspect.signature(inspect.unwrap(entry.compute)).parameters) == ["plan"]
    assert plan(name) is entry.book and plan(name, full=True) is entry.full


PLAN_FIELDS = [
    (name, field, hint)
    for name, entry in REGISTRY.items()
    for field, hint in typing.get_type_hints(entry.plan_type, include_extras=True).items()
    if field in {f.name for f in dataclasses.fields(entry.plan_type)}
]
PLAN_CASES = [
    (name, bad)
    for name, field, hint in PLAN_FIELDS
    for bad in contract.bad_values(field, hint)
    if not (bad.text == "None" and getattr(REGISTRY[name].book, field) is None)
]


@pytest.mark.parametrize(("name", "bad"), PLAN_CASES, ids=[f"{n}-{b!r}" for n, b in PLAN_CASES])
def test_a_plan_refuses_a_bad_field_before_any_work(name: str, bad: contract.Bad) -> None:
    """Issue 19, finding 3: counts accepted without bound ran until killed; now every count has a maximum."""
    book = REGISTRY[name].book
    start = time.perf_counter()
    with pytest.raises((TypeError, ValueError)) as caught:
        dataclasses.replace(book, **{bad.param: bad.make(getattr(book, bad.param))})
    assert time.perf_counter() - start < 1.0
    assert contract.names_it(str(caught.value), (bad.param,))


def test_every_count_of_every_plan_has_a_maximum() -> None:
    unbounded = []
    for name, field, hint in PLAN_FIELDS:
        base, meta = contract.split_hint(contract.optional_hint(hint)[0])
        if base is int and not field.endswith("seed"):
            bounds = contract.first_meta(meta, contract.Between)
            if bounds is None or bounds.high is None:
                unbounded.append(f"{name}.{field}")
    assert not unbounded


def test_run_and_plan_refuse_clearly() -> None:
    with pytest.raises(ValueError, match="name must be one of"):
        run("no_such_experiment")
    with pytest.raises(TypeError, match="plan must be a TiePlan"):
        run("tie_frequency", plan("across_d"))
    with pytest.raises(ValueError, match="full must be False when a plan is given"):
        run("tie_frequency", plan("tie_frequency"), full=True)
    with pytest.raises(ValueError, match="draws must be an integer in \\[1, 100000\\]"):
        dataclasses.replace(plan("tie_frequency"), draws=10**12)


def test_chapters_read_results_by_name() -> None:
    chapters = (Path(__file__).resolve().parents[2] / "chapters").glob("*.md")
    for path in chapters:
        text = path.read_text()
        assert "fits['split'][0]" not in text and "fs.BOOK[" not in text, path


# --------------------------------------------------------------------------------------------- the CLI
def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "xorlib.experiments", *args], capture_output=True, text=True)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["no_such"], "unknown experiment"),
        (["--jobs", "0"], "--jobs must be from 1 to 64"),
        (["--jobs", "many"], "invalid int value"),
        (["--fast"], "unrecognized arguments"),
    ],
)
def test_the_cli_gives_a_usage_error_never_a_traceback(args: list[str], says: str, capsys) -> None:
    with pytest.raises(SystemExit) as stopped:
        cli.main(args)
    error = capsys.readouterr().err
    assert stopped.value.code == 2 and "usage:" in error and says in error


def test_the_cli_process_exits_with_the_usage_error_and_no_traceback() -> None:
    done = _cli("--jobs", "0")
    assert done.returncode == 2 and "usage:" in done.stderr and "Traceback" not in done.stderr


def test_the_cli_lists_and_runs_one_experiment(capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["--list"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in REGISTRY)
    assert cli.main(["enumeration_check", "--jobs", "1"]) == 0
    assert "loss_error" in capsys.readouterr().out


def test_the_old_per_module_clis_are_gone() -> None:
    package = Path(__file__).resolve().parents[2] / "xorlib" / "experiments"
    for path in package.glob("_[!_]*.py"):  # the experiments' modules (the one CLI is __main__.py)
        text = path.read_text()
        assert "argparse" not in text and '__name__ == "__main__"' not in text, path
