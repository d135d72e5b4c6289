"""Tests of xorlib.benchmarking and of the benchmarks' small grids.

Timings are noisy (and the CI machine is shared), so nothing here asserts a
speed: the tests check that the helpers measure what they claim, that every
compared implementation computes the same numbers, that peak memory grows like
the code matrix and no larger tensor is ever formed, and that each benchmark's
``--small`` grid runs to the end.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from xorlib.attention import ATTENTION_KINDS
from xorlib.benchmarking import (
    BenchmarkResult,
    Timing,
    autograd_gradient,
    bench_empirical_gradient,
    bench_recovery,
    bench_scale,
    naive_empirical_gradient,
    peak_memory,
    relative_error,
    time_interleaved,
)
from xorlib.codes import default_code_dim, positional_codes
from xorlib.data import random_pair, sample_xor
from xorlib.gradient import empirical_gradient
from xorlib.model import initial_queries

ROOT = Path(__file__).resolve().parents[1]
MIB = 2**20


# ------------------------------------------------------------------ helpers


def test_time_interleaved_counts_every_call_and_rotates() -> None:
    calls: list[str] = []
    timings = time_interleaved(
        {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")},
        repeats=4,
        warmup=2,
        min_sample_s=0.0,
    )
    assert set(timings) == {"a", "b"}
    assert all(isinstance(t, Timing) and len(t.samples_s) == 4 and t.calls == 1 for t in timings.values())
    # 2 warm-up + 1 calibration + 4 timed calls each; rounds alternate which goes first.
    assert calls.count("a") == calls.count("b") == 7
    assert calls[6:] == ["a", "b", "b", "a", "a", "b", "b", "a"]


def test_time_interleaved_batches_fast_calls() -> None:
    timings = time_interleaved({"noop": lambda: None}, repeats=3, min_sample_s=0.005)
    assert timings["noop"].calls > 1
    assert 0 < timings["noop"].min_s <= timings["noop"].median_s


def test_timing_median() -> None:
    assert Timing((3.0, 1.0, 2.0), 1).median_s == 2.0
    assert Timing((4.0, 1.0, 2.0, 3.0), 1).median_s == 2.5


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"functions": {}}, TypeError),
        ({"functions": {"a": 1}}, TypeError),
        ({"functions": {"a": print}, "repeats": 0}, ValueError),
        ({"functions": {"a": print}, "min_sample_s": -1.0}, ValueError),
    ],
)
def test_time_interleaved_validates(kwargs: dict, error: type[Exception]) -> None:
    with pytest.raises(error):
        time_interleaved(**kwargs)


def test_relative_error() -> None:
    reference = torch.tensor([3.0, 4.0])
    assert relative_error(reference, reference) == 0.0
    assert relative_error(torch.tensor([3.0, 4.5]), reference) == pytest.approx(0.1)
    assert relative_error(torch.zeros(2), torch.zeros(2)) == 0.0
    with pytest.raises(ValueError, match="same shape"):
        relative_error(torch.zeros(3), torch.zeros(2))


# ------------------------------------------------- same numbers, three ways


def _problem(d: int, n: int, init: str, dtype: torch.dtype = torch.float64):
    codes = positional_codes(d, seed=1)
    pair = random_pair(d, seed=2)
    x, y = sample_xor(n, d, pair, seed=3, dtype=dtype)
    queries = initial_queries(codes.shape[1], init=init, scale=1.0, seed=4, dtype=codes.dtype)
    return queries, codes, x, y


@pytest.mark.parametrize("attention", ATTENTION_KINDS)
@pytest.mark.parametrize("readout_kind", ["xor", "product"])
@pytest.mark.parametrize("init", ["zero", "random"])
def test_closed_form_naive_and_autograd_gradients_agree(attention: str, readout_kind: str, init: str) -> None:
    queries, codes, x, y = _problem(40, 300, init)
    kwargs = {"attention": attention, "readout_kind": readout_kind}
    reference = autograd_gradient(queries, codes, x, y, **kwargs)
    assert float(reference.norm()) > 0
    assert relative_error(empirical_gradient(queries, codes, x, y, **kwargs), reference) < 1e-10
    assert relative_error(naive_empirical_gradient(queries, codes, x, y, **kwargs), reference) < 1e-10


@pytest.mark.parametrize("init", ["zero", "random"])
def test_gradients_agree_on_float32_data(init: str) -> None:
    queries, codes, x, y = _problem(2_000, 256, init, dtype=torch.float32)
    reference = empirical_gradient(queries, codes, x, y)
    assert relative_error(naive_empirical_gradient(queries, codes, x, y), reference) < 1e-5
    assert relative_error(autograd_gradient(queries, codes, x, y), reference) < 1e-4


@pytest.mark.parametrize("gradient", [naive_empirical_gradient, autograd_gradient, empirical_gradient])
@pytest.mark.parametrize("init", ["zero", "random"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_every_compared_gradient_rejects_non_finite_data(gradient, init: str, bad: float) -> None:
    """The benchmarks compare like with like: each gradient rejects a NaN or an infinity in x, up front or lazily."""
    queries, codes, x, y = _problem(30, 20, init)
    x[3, 7] = bad
    with pytest.raises(ValueError, match="x must contain only finite"):
        gradient(queries, codes, x, y)


def test_naive_gradient_validates_shapes() -> None:
    queries, codes, x, y = _problem(30, 20, "zero")
    with pytest.raises(ValueError, match="y must have one label per row"):
        naive_empirical_gradient(queries, codes, x, y[:-1])
    with pytest.raises(ValueError, match="x must have last dimension 30"):
        naive_empirical_gradient(queries, codes, x[:, :-1], y)
    with pytest.raises(ValueError, match="queries must have shape"):
        naive_empirical_gradient(queries[:1], codes, x, y)
    with pytest.raises(ValueError, match="queries must have 2 dimensions"):
        naive_empirical_gradient(queries.expand(3, 2, -1), codes, x, y)


# -------------------------------------------------------------------- memory


def test_one_step_peak_memory_grows_like_the_code_matrix() -> None:
    """Peak RSS growth between d = 1e5 and 2e5 is at most 1.5 x the growth of 8 d m (the float64 codes).

    ``positional_codes`` builds the codes in one int8 matrix and converts them once (``d m + 8 d m`` bytes at
    the peak, 1.125 x); the stack-then-divide construction it replaced needed about 2.25 x, and would fail here.

    The parent holds 400 MB while the children run: a child's measurement must not see the parent's peak
    (``ru_maxrss`` would, on Linux), so each child must report at least its own code matrix.
    """
    ballast = torch.ones(50_000_000, dtype=torch.float64)
    small = peak_memory("one_step", d=100_000)
    large = peak_memory("one_step", d=200_000)
    del ballast
    assert small.result["recovered"] and large.result["recovered"]
    assert small.result["exact"] and large.result["exact"]
    code_bytes = {p.params["d"]: 8 * p.params["d"] * p.result["m"] for p in (small, large)}
    for report in (small, large):
        assert code_bytes[report.params["d"]] <= report.extra_bytes <= 1.5 * code_bytes[report.params["d"]] + 16 * MIB
    growth = large.extra_bytes - small.extra_bytes
    assert 0 < growth <= 1.5 * (code_bytes[200_000] - code_bytes[100_000])


def test_memory_cap_admits_the_closed_forms_and_stops_an_n_d_m_tensor() -> None:
    """Under a cap far below n*d*m*4 bytes (and d*d*8), the one-step experiment and the empirical gradient run;
    the naive per-sample formulation, which forms the n x d x m tensor, is stopped by the same cap."""
    d, n = 200_000, 64
    m = default_code_dim(d)
    # The float64 codes and their int8 signs, the batch with a few same-size temporaries, and slack for
    # allocator arenas: about 0.6 GB, a sixth of the n x d x m float32 tensor.
    cap = 9 * d * m + 16 * n * d + 256 * MIB
    assert cap < n * d * m * 4 / 6 and cap < d * d * 8 / 100
    one_step = peak_memory("one_step", memory_cap_bytes=cap, d=d)
    assert one_step.result["recovered"]
    gradient = peak_memory("empirical_gradient", memory_cap_bytes=cap, d=d, n=n)
    assert gradient.result["grad_norm"] > 0
    with pytest.raises(MemoryError, match="could not allocate"):
        peak_memory("naive_per_sample", memory_cap_bytes=cap, d=d, n=n)


def test_peak_memory_validates() -> None:
    with pytest.raises(ValueError, match="workload must be one of"):
        peak_memory("everything", d=10)
    with pytest.raises(TypeError, match="workload parameter d"):
        peak_memory("one_step", d=[10])


# ---------------------------------------------------------- the small grids


def _assert_table(result: BenchmarkResult) -> None:
    assert result.rows
    markdown = result.to_markdown()
    assert markdown.count("\n| ") == len(result.rows) + 1  # header + one line per row
    assert all(isinstance(value, float) for value in result.headline.values())


@pytest.mark.slow
def test_bench_empirical_gradient_small() -> None:
    result = bench_empirical_gradient(small=True, repeats=1)
    _assert_table(result)
    assert {row["init"] for row in result.rows} == {"zero", "random"}
    assert max(row["relative_error"] for row in result.rows) < 1e-5


@pytest.mark.slow
def test_bench_recovery_small() -> None:
    result = bench_recovery(small=True)
    _assert_table(result)
    one_step = [row for row in result.rows if row["learner"].startswith("one step")]
    assert len(one_step) == 2 and all(row["recovered"] == "True" for row in one_step)


@pytest.mark.slow
def test_bench_scale_small() -> None:
    result = bench_scale(small=True)
    _assert_table(result)
    assert result.headline["all_recovered"] == 1.0


@pytest.mark.slow
def test_run_all_writes_the_tables(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks.run_all", "--small", "--only", "one_step", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert "closed form vs autograd" in completed.stdout
    assert {p.name for p in tmp_path.iterdir()} == {"one_step.md", "one_step.json", "README.md", "summary.json"}
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["mode"] == "small"
    assert summary["benchmarks"]["one_step"]["headline"]["max_relative_error"] < 1e-4
