"""Tests of experiment 1 (xorlib.experiments.one_step): the paper's one-step claim, as measured."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from xorlib.codes import positional_codes
from xorlib.data import random_pair
from xorlib.experiments import one_step
from xorlib.experiments.one_step import (
    BOOK_DS,
    CHOSEN_KAPPA,
    KAPPAS,
    TARGET_WORST_LOSS,
    attention_snapshots,
    one_step_instance,
    one_step_sweep,
    summarise,
    tie_frequency,
)
from xorlib.gradient import lr_for_sharpness, one_step_from_uniform, worst_case_loss
from xorlib.model import head_weights


@pytest.fixture(scope="module")
def sweep() -> dict:
    return one_step_sweep(progress=False)  # the book grid, from the disk cache after the first run


@pytest.mark.slow
def test_one_step_suffices_on_every_separable_draw(sweep: dict) -> None:
    """The claim: worst-case loss < 1e-6 over all 2^d inputs after one step, d = 16 .. 1e5, exact certificate."""
    assert sweep["ds"] == BOOK_DS and max(BOOK_DS) >= 100_000
    k = sweep["kappas"].index(CHOSEN_KAPPA)
    separable = sweep["margin"] > 1e-12
    worst = sweep["worst"][..., k]
    assert separable.mean() > 0.9
    assert bool((worst[separable] < TARGET_WORST_LOSS).all())
    assert bool(sweep["exact"][..., k][separable].all())
    for row in summarise(sweep):
        assert row["draws"] == 9 and row["worst_max"] < TARGET_WORST_LOSS and row["all_exact"]
        assert row["kappa_eps_max"] <= CHOSEN_KAPPA  # the theorem predicts the success before it is measured
        assert row["mean_before"] > 0.8 and row["worst_before"] == pytest.approx(2.0)


@pytest.mark.slow
def test_ties_are_the_only_failures_and_cannot_be_fixed_by_the_step(sweep: dict) -> None:
    ties = sweep["margin"] <= 1e-12
    assert ties.sum() <= 2
    # A tie splits the attention over three or more positions at every step size.
    assert bool((sweep["worst"][ties] > 0.1).all())


@pytest.mark.slow
def test_margin_is_a_multiple_of_four_over_m(sweep: dict) -> None:
    for a, m in enumerate(sweep["m"]):
        scaled = sweep["margin"][a] * m / 4
        assert np.allclose(scaled, np.round(scaled), atol=1e-9)


@pytest.mark.slow
def test_worst_case_falls_with_the_step_size(sweep: dict) -> None:
    separable = sweep["margin"] > 1e-12
    worst = np.maximum(sweep["worst"][separable], 1e-30)  # below 1e-30 rounding sets the value
    assert bool((np.diff(np.log(worst), axis=-1) <= 1e-9).all())


def test_instance_agrees_with_the_closed_form_step() -> None:
    d = 48
    out = one_step_instance(d, code_seed=3, pair_seed=4, kappas=(5.0, 40.0))
    codes = positional_codes(d, seed=3)
    pair = random_pair(d, seed=4)
    for k, kappa in enumerate((5.0, 40.0)):
        weights = head_weights(one_step_from_uniform(codes, pair, lr_for_sharpness(kappa, d)), codes)
        worst = worst_case_loss(weights, pair)
        assert out["worst"][k] == pytest.approx(float(worst.upper), rel=1e-9, abs=1e-300)
        assert out["rest_mass"][k] == pytest.approx(1 - out["pair_mass"][k], abs=1e-12)
    assert out["pair"] == pair and out["m"] == codes.shape[1]


def test_tie_frequency_prediction_is_conservative() -> None:
    ties = tie_frequency((16, 64, 256), draws=300)
    for measured, predicted in zip(ties["measured"], ties["predicted"], strict=True):
        sigma = (predicted * (1 - predicted) / ties["draws"]) ** 0.5
        assert measured <= predicted + 3 * sigma
    assert ties["measured"][0] > 0  # ties do happen at small d


def test_snapshots_start_uniform_and_end_on_the_pair() -> None:
    snapshots, labels, pair = attention_snapshots(64, code_seeds=(0, 1), pair_seed=2)
    assert labels == ["before", "after, codes 0", "after, codes 1"]
    assert torch.allclose(snapshots[0], torch.full((2, 64), 1 / 64, dtype=torch.float64))
    for weights in snapshots[1:]:
        assert float(weights[:, list(pair)].sum(1).min()) > 0.999


def test_validation() -> None:
    with pytest.raises(ValueError, match="kappas"):
        one_step_instance(16, kappas=())
    with pytest.raises(ValueError, match=r"kappas\[0\] must be > 0"):
        one_step_instance(16, kappas=(0.0,))
    with pytest.raises(ValueError, match="d must be >= 3"):
        one_step_instance(2)
    with pytest.raises(ValueError, match="attention"):
        one_step_instance(16, attention="relu")
    with pytest.raises(ValueError, match="kappa must be one of"):
        summarise({"kappas": KAPPAS}, 7.0)
    with pytest.raises(ValueError, match="at least one"):
        one_step_sweep.uncached((16,), code_seeds=())


@pytest.mark.slow
def test_command_line_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert one_step.main([]) == 0
    out = capsys.readouterr().out
    assert "100,000" in out and "kappa = 300" in out
