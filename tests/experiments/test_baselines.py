"""The feed-forward chapter's and the authors' experiments on tiny cases: one criterion for every learner."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys

import numpy as np
import pytest
from _tolerance import gamma

from xorlib import one_step
from xorlib.experiments import plan, run
from xorlib.experiments._criteria import EPSILON, LEARNERS
from xorlib.learners._mlp import MLPConfig, min_margin, mlp_snapshots
from xorlib.task import all_inputs, random_pair


@pytest.fixture(scope="module")
def same():
    return run("same_criterion", dataclasses.replace(plan("same_criterion"), ds=(8,), trials=3, n_max=256))


def test_same_criterion_rows_cover_every_learner_and_criterion(same) -> None:
    assert {(r.learner, r.criterion) for r in same.rows} == {(a, c) for a in LEARNERS for c in ("loss", "sign")}
    for learner in LEARNERS:
        loss, sign = same.row(8, learner, "loss"), same.row(8, learner, "sign")
        assert loss.n == sign.n and loss.test == "all inputs (exact)"
        # (a) implies (b): a loss below 0.01 on every input means every sign is right
        assert all(a <= b for a, b in zip(loss.fraction, sign.fraction, strict=True))
        hits = [n for n, f in zip(sign.n, sign.fraction, strict=True) if f >= 0.5]
        assert (math.isnan(sign.n50) and not hits) or sign.n50 == hits[0]


def test_same_criterion_transformer_entries_are_the_one_step_on_all_inputs(same) -> None:
    row = same.row(8, "Transformer, split", "sign")
    x = all_inputs(8)
    for j, n in enumerate(row.n):
        right = 0
        for t in range(3):
            result = one_step(8, "split", seed=t, n=n, epsilon=EPSILON)
            pair = random_pair(8, seed=t)
            z = x @ result.weights_after.T
            right += bool(((x[:, pair[0]] * x[:, pair[1]]) * (z[:, 0] * z[:, 1]) > 0).all())  # y f = x_u x_v z1 z2
        assert row.fraction[j] == pytest.approx(right / 3)


def test_same_criterion_mlp_entries_are_the_snapshots_margins(same) -> None:
    row = same.row(8, "MLP", "loss")
    pairs = [random_pair(8, seed=t) for t in range(3)]
    steps = [n // 32 for n in row.n]
    snaps = mlp_snapshots(MLPConfig(8, lr=1.0, max_steps=steps[-1]), pairs, steps, seed=0)
    for j, params in enumerate(snaps.params):
        assert row.fraction[j] == pytest.approx(float((min_margin(params, pairs) > 0.99).double().mean()))


def test_lr_grid_picks_the_best_rate_and_records_divergence() -> None:
    small = dataclasses.replace(plan("lr_grid"), ds=(8,), lrs=(0.01, 1.0, 1e4), trials=2, max_steps=300)
    grid = run("lr_grid", small)
    rows = {row.lr: row for row in grid.rows}
    assert rows[1e4].diverged and rows[1e4].successes == 0 and not rows[1e4].solved
    assert rows[1.0].successes == 2 and rows[1.0].solved
    assert grid.best[0].lr == 1.0
    assert rows[1.0].median_samples == 32 * rows[1.0].median_steps


def test_frozen_random_features_fit_every_input_for_several_pairs() -> None:
    result = run("frozen_features")
    assert result.trained == 201 and len({fit.pair for fit in result.fits}) == 3
    assert all(fit.accuracy == 1.0 for fit in result.fits)  # the counterexample of chapter 7
    assert result.all_pairs_fitted == math.comb(10, 2)


def test_finding_9_the_least_squares_give_the_same_bits_in_every_process() -> None:
    """Issue 19, finding 9: torch.linalg.lstsq (gelsy) gave l2_error values differing in the last digits."""
    script = (
        "import torch; torch.set_num_threads(1)\n"
        "from xorlib.experiments import plan\n"
        "from xorlib.experiments._registry import REGISTRY\n"
        "result = REGISTRY['frozen_features'].compute.uncached(plan('frozen_features'))\n"
        "print([fit.l2_error.hex() for fit in result.fits])"
    )
    children = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = {child.communicate()[0] for child in children}
    assert len(outputs) == 1, outputs


def test_linear_models_obey_the_proved_bound() -> None:
    result = run("linear_bound", dataclasses.replace(plan("linear_bound"), d=8, widths=(2, 8, 24, 64)))
    slack = 2 * gamma(2**8 * 64)  # each mean error is one minus a sum over 2^d rows of projections on <= 64 columns
    assert all(m >= f - slack for m, f in zip(result.mean_error, result.floor, strict=True))
    assert result.floor[0] > 0.8 and result.dims[0] == 3
    assert len(result.transformer_errors) == math.comb(8, 2)
    assert result.linear_floor_for_fitted == pytest.approx(0.99 * result.transformer_fitted)


def test_multistep_and_authors_experiments_on_a_tiny_case() -> None:
    sweep = run("multistep", dataclasses.replace(plan("multistep"), ds=(8,), runs=2, steps=30))
    split = sweep.row(8, "split")
    assert split.worst_median.shape == (31,) and split.success == 1.0
    assert np.all(split.worst_low <= split.worst_high)
    tiny = dataclasses.replace(plan("authors"), ds=(8,), epochs=(50,), runs=(2,), adam_steps=30)
    result = run("authors", tiny)
    learners = [row.learner for row in result.rows]
    assert learners[0] == "authors' model (v1)" and "Adam, split" in learners and len(learners) == 5
    assert result.row(8, "authors' model (v1)").parameters == 4 == plan("authors").protocol(8).parameters
    assert result.runs_at(8).attention.shape == (2, 2, 8) and result.runs_at(8).radius_needed > 1


def test_figure_draws_the_numbers_of_the_result(same) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from xorlib.plots.ffnn import plot_same_criterion

    fig = plot_same_criterion(same)
    drawn = [tuple(line.get_ydata()) for line in fig.axes[0].get_lines() if len(line.get_ydata()) > 1]
    for learner in LEARNERS:
        for criterion in ("loss", "sign"):
            assert tuple(same.row(8, learner, criterion).fraction) in drawn
