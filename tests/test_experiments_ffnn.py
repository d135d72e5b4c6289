"""The feed-forward chapter's experiments on tiny cases: the same criterion for every learner, the lr grid, the bound."""

from __future__ import annotations

import math

import numpy as np
import pytest

from xorlib.experiments import authors, ffnn, linear_models, multistep
from xorlib.learners.mlp import min_margin, mlp_snapshots
from xorlib.one_step import one_step
from xorlib.task import all_inputs, random_pair


@pytest.fixture(scope="module")
def same() -> ffnn.SameCriterionResult:
    return ffnn.same_criterion.uncached((8,), trials=3, n_max=256, mlp_lr=1.0)


def test_same_criterion_rows_cover_every_learner_and_criterion(same: ffnn.SameCriterionResult) -> None:
    assert {(r.learner, r.criterion) for r in same.rows} == {(a, c) for a in ffnn.LEARNERS for c in ("loss", "sign")}
    for learner in ffnn.LEARNERS:
        loss, sign = same.row(8, learner, "loss"), same.row(8, learner, "sign")
        assert loss.n == sign.n and loss.test == "all inputs (exact)"
        # (a) implies (b): a loss below 0.01 on every input means every sign is right
        assert all(a <= b for a, b in zip(loss.fraction, sign.fraction, strict=True))
        hits = [n for n, f in zip(sign.n, sign.fraction, strict=True) if f >= 0.5]
        assert (math.isnan(sign.n50) and not hits) or sign.n50 == hits[0]


def test_same_criterion_transformer_entries_are_the_one_step_on_all_inputs(same: ffnn.SameCriterionResult) -> None:
    row = same.row(8, "Transformer, split", "sign")
    x = all_inputs(8)
    for j, n in enumerate(row.n):
        right = 0
        for t in range(3):
            try:
                result = one_step(8, "split", seed=t, n=n, epsilon=ffnn.EPSILON)
            except ValueError:
                continue
            pair = random_pair(8, seed=t)
            z = x @ result.weights_after.T
            right += bool(((x[:, pair[0]] * x[:, pair[1]]) * (z[:, 0] * z[:, 1]) > 0).all())  # y f = x_u x_v z1 z2
        assert row.fraction[j] == pytest.approx(right / 3)


def test_same_criterion_mlp_entries_are_the_snapshots_margins(same: ffnn.SameCriterionResult) -> None:
    row = same.row(8, "MLP", "loss")
    pairs = [random_pair(8, seed=t) for t in range(3)]
    steps = [n // 32 for n in row.n]
    snaps = mlp_snapshots(ffnn.MLPConfig(8, lr=1.0, max_steps=steps[-1]), pairs, steps, seed=0)
    for j, params in enumerate(snaps.params):
        assert row.fraction[j] == pytest.approx(float((min_margin(params, pairs) > 0.99).double().mean()))


def test_lr_grid_picks_the_best_rate_and_records_divergence() -> None:
    grid = ffnn.lr_grid.uncached((8,), lrs=(0.01, 1.0, 1e4), trials=2, max_steps=300)
    rows = {row.lr: row for row in grid.rows}
    assert rows[1e4].diverged and rows[1e4].successes == 0 and not rows[1e4].solved
    assert rows[1.0].successes == 2 and rows[1.0].solved
    assert grid.best[0].lr == 1.0
    assert rows[1.0].median_samples == 32 * rows[1.0].median_steps


def test_frozen_random_features_fit_every_input_for_several_pairs() -> None:
    result = linear_models.frozen_features.uncached(10, width=200, pairs=3)
    assert result.trained == 201 and len({fit.pair for fit in result.fits}) == 3
    assert all(fit.accuracy == 1.0 for fit in result.fits)  # the counterexample of chapter 7
    assert result.all_pairs_fitted == math.comb(10, 2)


def test_linear_models_obey_the_proved_bound() -> None:
    result = linear_models.linear_bound.uncached(8, widths=(2, 8, 24, 64))
    assert all(m >= f - 1e-12 for m, f in zip(result.mean_error, result.floor, strict=True))
    assert result.floor[0] > 0.8 and result.dims[0] == 3
    assert len(result.transformer_errors) == math.comb(8, 2)
    assert result.linear_floor_for_fitted == pytest.approx(0.99 * result.transformer_fitted)


def test_multistep_and_authors_experiments_on_a_tiny_case() -> None:
    sweep = multistep.multistep_sweep.uncached((8,), runs=2, steps=30)
    split = sweep.row(8, "split")
    assert split.worst_median.shape == (31,) and split.success == 1.0
    assert np.all(split.worst_low <= split.worst_high)
    result = authors.authors_comparison.uncached((8,), epochs=(50,), runs=(2,), adam_steps=30)
    learners = [row.learner for row in result.rows]
    assert learners[0] == "authors' model (v1)" and "Adam, split" in learners and len(learners) == 5
    assert result.row(8, "authors' model (v1)").parameters == 4
    assert result.runs_at(8).attention.shape == (2, 2, 8)


def test_bad_arguments_raise_clear_errors() -> None:
    with pytest.raises(TypeError, match="ds must be a non-empty sequence"):
        ffnn.same_criterion.uncached(())
    with pytest.raises(ValueError, match="trials must be"):
        ffnn.lr_grid.uncached((8,), trials=0)
    with pytest.raises(ValueError, match="lrs\\[0\\] must be"):
        ffnn.lr_grid.uncached((8,), lrs=(-1.0,))
    with pytest.raises(ValueError, match="one value per d"):
        authors.authors_comparison.uncached((8, 16), epochs=(10,), runs=(1, 1))


def test_figure_draws_the_numbers_of_the_result(same: ffnn.SameCriterionResult) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from xorlib.plots.ffnn import plot_same_criterion

    fig = plot_same_criterion(same)
    drawn = [tuple(line.get_ydata()) for line in fig.axes[0].get_lines() if len(line.get_ydata()) > 1]
    for learner in ffnn.LEARNERS:
        for criterion in ("loss", "sign"):
            assert tuple(same.row(8, learner, criterion).fraction) in drawn
