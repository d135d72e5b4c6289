"""Chapter 6's claims: learning curves, the fits, the sample bound (``thm-samples``), the two models compared, the window."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest
import torch

from xorlib._contract import MAX_SAMPLE_ENTRIES
from xorlib.experiments import plan, run
from xorlib.experiments._finite_samples import FiniteSamplesPlan, ModelGrid, grid_for, thresholds
from xorlib.experiments._fits import bootstrap_exponent, logistic_threshold, power_law
from xorlib.learners._one_step import StepConfig, learning_curve, take_step
from xorlib.model import ModelConfig
from xorlib.task import random_pair


def test_learning_curve_equals_separate_steps() -> None:
    model = ModelConfig(24, "split", code_seed=2, init_seed=2)
    config = StepConfig(model, random_pair(24, seed=2), data_seed=2, epsilon=1e-2)
    curve = learning_curve(config, (50, 300, 2000))
    for result in curve:
        alone = take_step(dataclasses.replace(config, n=result.config.n))
        # the histograms add the samples one at a time in stream order, whatever the snapshots: the same numbers
        assert alone.kappa == result.kappa
        assert torch.equal(alone.queries_after, result.queries_after)
        assert float(alone.worst_case.upper) == float(result.worst_case.upper)


def test_fits_recover_known_values() -> None:
    n = np.geomspace(10, 10_000, 13)
    p = 1 / (1 + np.exp(-3 * (np.log(n) - np.log(300.0))))
    assert logistic_threshold(n, p * 1000, np.full(13, 1000)) == pytest.approx(300.0, rel=0.02)
    assert math.isnan(logistic_threshold(n, np.zeros(13), np.full(13, 5)))
    assert power_law([2, 4, 8], [12, 48, 192]) == pytest.approx((2.0, 3.0))
    rng = np.random.default_rng(0)
    arrays = [
        rng.random((3, 6, 13)) < p * 0 + 1 / (1 + np.exp(-3 * (np.log(n) - np.log(30.0 * d**2)))) for d in (4, 8, 16)
    ]
    point, low, high = bootstrap_exponent([4, 8, 16], [n] * 3, arrays, resamples=50)
    assert low <= point <= high and 1.0 < point < 3.0


@pytest.fixture(scope="module")
def small():
    grid = plan("finite_samples").split.__class__(ds=(16,), code_draws=2, trials=4)
    return run("finite_samples", dataclasses.replace(plan("finite_samples"), split=grid, tied=grid, resamples=10))


def test_split_needs_fewer_samples_than_tied(small) -> None:
    assert thresholds(small.split.grids[0]) < thresholds(small.tied.grids[0])
    assert [row.heads for row in small.rows] == ["split", "tied"] and small.split.draws == 8


def test_theorem_f_bound_is_above_the_measured_samples(small) -> None:
    grid = small.split.grids[0]
    assert float(np.nanmedian(grid.sample_bounds())) > thresholds(grid)
    assert small.rows[0].theorem_f > small.rows[0].n_star_worst_case


def test_tied_window_and_split_no_upper_edge() -> None:
    curves = run("step_sizes", dataclasses.replace(plan("step_sizes"), d=24, sample_sizes=(100_000,), draws=4))
    tied = curves.median("tied, n = 100,000")
    best = int(np.argmin(tied))
    assert tied[-1] > 100 * tied[best]  # too large a step undoes the tied model
    split = curves.median("split, n = 100,000")
    after = split[int(np.argmax(np.asarray(split) < 1e-6)) :]
    assert all(b <= a * (1 + 1e-9) + 1e-300 for a, b in itertools.pairwise(after))


def test_the_full_grid_reaches_d_1024_within_the_sample_limit() -> None:
    """The plan only (nothing runs): the split model to d = 1024 over 1.5 decades or more, the same draws per d."""
    full, book = plan("finite_samples", full=True), plan("finite_samples")
    assert max(full.split.ds) == 1024 and math.log10(max(full.split.ds) / min(full.split.ds)) >= 1.5
    assert max(full.tied.ds) >= 2 * max(book.tied.ds)  # the tied model as far as the sample limit allows
    assert (
        full.split.code_draws >= 3
        and full.split.code_draws * full.split.trials == full.tied.code_draws * full.tied.trials
    )
    for heads in ("split", "tied"):
        grid = getattr(full, heads)
        for d in grid.ds:
            sizes = grid_for(heads, d, grid.top)
            assert sizes[-1] * d <= MAX_SAMPLE_ENTRIES
            assert (
                sizes[-1] >= (3.5 if heads == "split" else 100) * d * d
            )  # past the 50 % points measured (at most 55 d^2)
            assert sizes == tuple(sorted(set(sizes)))
    assert grid_for("split", 32) == grid_for("split", 32, 8.0)  # the book's grid keeps its default top
    with pytest.raises(ValueError, match=r"split\.top must keep n \* d"):
        FiniteSamplesPlan(split=ModelGrid((1024,), 1, 1, top=8.0), tied=ModelGrid((16,), 1, 1))
    with pytest.raises(ValueError, match="ds"):
        ModelGrid((2048,), 1, 1)
