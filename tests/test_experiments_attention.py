"""Tests of experiment 2 (xorlib.experiments.attention_variants): softmax vs element-wise normalisers."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from xorlib.attention import ATTENTION_KINDS, attention_weights
from xorlib.codes import default_code_dim, positional_codes
from xorlib.data import random_pair
from xorlib.experiments import attention_variants
from xorlib.experiments.attention_variants import (
    BOOK_D_FIXED,
    BOOK_DS,
    BOOK_INSTANCES,
    EPSILON,
    FIXED_D_INSTANCES,
    attained_worst_loss,
    calibrated_rest_mass,
    certainly_fails,
    code_dim_sweep,
    code_dims,
    kappa_grid,
    min_code_dim,
    min_code_dim_across_d,
    multistep_variants,
    one_step_grid,
    one_step_unit_scores,
)
from xorlib.gradient import exhaustive_losses, lr_for_sharpness, one_step, worst_case_loss
from xorlib.model import head_weights

ELEMENTWISE = ("linear", "componentwise", "sigmoid")


@pytest.mark.slow
def test_softmax_needs_only_logarithmic_m_and_the_others_never_reach_epsilon() -> None:
    """The chapter's claim: m_min(softmax) <= ceil(4 log2 d) at every d; element-wise variants certainly fail."""
    table = min_code_dim_across_d(BOOK_DS, instances=BOOK_INSTANCES, epsilon=EPSILON)
    for k, d in enumerate(table["ds"]):
        m_soft = table["min_m"]["softmax"][k]
        assert m_soft is not None and m_soft <= default_code_dim(d)
        for attention in ELEMENTWISE:
            assert table["min_m"][attention][k] is None  # not even with one-hot codes, m = d
            assert table["fails"][attention][k]  # an attained input has loss > epsilon at every m and step


@pytest.mark.slow
def test_fixed_d_sweep_matches_the_tie_prediction_and_jensen_floor() -> None:
    sweep = code_dim_sweep(BOOK_D_FIXED, instances=FIXED_D_INSTANCES)
    d = sweep["d"]
    success = (sweep["softmax"]["best_worst_upper"] <= EPSILON).mean(axis=1)
    for m, measured in zip(sweep["ms"], success, strict=True):
        predicted = 1.0 if m == d else (1 - 0.75**m) ** (d - 2)
        assert abs(measured - predicted) <= 0.35, m
    assert min_code_dim(sweep, "softmax") is not None
    for attention in ELEMENTWISE:
        assert certainly_fails(sweep, attention)
        assert float(np.min(sweep[attention]["min_worst_lower"])) > 1.9
    balanced = [k for k, m in enumerate(sweep["ms"]) if m < d]
    floor = (1 - 2 / d) * math.exp(-2 * math.log(d / 2) / (d - 2))
    # At the mean-optimal step the component-wise pair is nearly calibrated, and the rest sits above the floor.
    calibrated = sweep["componentwise"]["mean_pair_mass"][balanced] >= 0.9
    assert calibrated.any()
    assert bool((sweep["componentwise"]["mean_rest_mass"][balanced][calibrated] >= floor * 0.9).all())


def test_jensen_floor_holds_for_any_query() -> None:
    d, m = 128, 24
    codes = positional_codes(d, m, seed=0)
    pair = random_pair(d, seed=0)
    generator = torch.Generator().manual_seed(0)
    scales = torch.logspace(-1, 1, 500, dtype=torch.float64)[:, None]
    queries = torch.randn(500, m, generator=generator, dtype=torch.float64) * scales
    alpha = torch.exp(queries @ codes.T) / d
    mu = alpha[:, list(pair)].sum(1)
    rest = alpha.sum(1) - mu
    floor = (1 - 2 / d) * (d * mu / 2) ** (-2 / (d - 2))
    assert bool((rest >= floor * (1 - 1e-12)).all())


def test_calibrated_rest_mass_against_its_predictions() -> None:
    for m in (16, 64):
        cw = calibrated_rest_mass(256, m, attention="componentwise")
        assert cw["rest_mass"] >= cw["jensen_floor"]
        lin = calibrated_rest_mass(256, m, attention="linear")
        assert 0.6 <= lin["rest_mass"] / lin["gaussian_estimate"] <= 1.2
        assert lin["rest_mass"] > 5
    with pytest.raises(ValueError, match="attention"):
        calibrated_rest_mass(256, 16, attention="softmax")
    with pytest.raises(ValueError, match="m must be <= 255"):
        calibrated_rest_mass(256, 256, attention="linear")


@pytest.mark.parametrize("attention", ATTENTION_KINDS)
def test_attained_worst_loss_is_a_real_input_below_the_true_maximum(attention: str) -> None:
    d = 12
    pair = random_pair(d, seed=3)
    for m in (4, 8, d):
        unit = one_step_unit_scores(d, m, pair, attention=attention, code_seed=1)
        for kappa in (0.1, 1.0, 5.0, 30.0):
            weights = attention_weights(kappa * unit, attention)
            truth = float(exhaustive_losses(weights, pair).max())
            bracket = worst_case_loss(weights, pair)
            attained = float(attained_worst_loss(weights, pair))
            assert attained <= truth * (1 + 1e-12) + 1e-15
            assert truth <= float(bracket.upper) * (1 + 1e-12) + 1e-15
            assert attained >= float(bracket.lower) * (1 - 1e-12) - 1e-15  # it contains the bracket's own inputs


def test_attained_worst_loss_finds_the_cancelling_input() -> None:
    # Uniform attention: the other bits can cancel the pair, z = 0, f = 1, loss 2 on a y = -1 input.
    weights = torch.full((2, 10), 0.1, dtype=torch.float64)
    assert float(attained_worst_loss(weights, (0, 1))) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="tied heads"):
        attained_worst_loss(torch.rand(2, 10, dtype=torch.float64), (0, 1))


@pytest.mark.parametrize("attention", ATTENTION_KINDS)
def test_unit_scores_are_the_real_one_step(attention: str) -> None:
    d = 20
    pair = random_pair(d, seed=2)
    lr = lr_for_sharpness(1.0, d, attention=attention)
    for m, codes in ((6, positional_codes(d, 6, seed=5)), (d, torch.eye(d, dtype=torch.float64))):
        queries = one_step(torch.zeros(2, codes.shape[1], dtype=torch.float64), codes, pair, lr, attention=attention)
        expected = queries @ codes.T
        unit = one_step_unit_scores(d, m, pair, attention=attention, code_seed=5)
        assert torch.allclose(unit, expected, rtol=1e-10, atol=1e-14)
        assert torch.allclose(attention_weights(unit, attention), head_weights(queries, codes, attention))


def test_grids_and_one_step_grid() -> None:
    assert max(kappa_grid(1000, "componentwise")) <= 300
    assert max(kappa_grid(1000, "linear")) >= 10 * 1000 * 0.99
    grid = kappa_grid(64, "softmax")
    assert all(b > a for a, b in itertools.pairwise(grid))
    assert code_dims(16)[-1] == 16 and all(m < 16 for m in code_dims(16)[:-1])
    out = one_step_grid(64, 24, attention="softmax", instance=0)
    assert np.all(np.diff(out["kappas"]) > 0)
    floor = out["worst_upper"].min()
    assert out["worst_upper"][out["best"]] <= floor + 1e-9 * max(floor, 1e-300)  # ties broken by the mean loss
    assert out["mean"][out["best_mean"]] == out["mean"].min()
    cw = one_step_grid(64, 24, attention="componentwise", instance=0)
    assert np.all(np.isfinite(cw["mean"]) | np.isinf(cw["mean"]))  # overflow reads as +inf, never NaN
    with pytest.raises(ValueError, match="refine"):
        one_step_grid(64, 24, refine=-1)
    with pytest.raises(ValueError, match="attention"):
        kappa_grid(64, "relu")


@pytest.mark.slow
def test_many_steps_need_theta_d_parameters_for_elementwise_attention() -> None:
    multi = multistep_variants(64)
    res = multi["results"]
    for kind in multi["code_kinds"]:
        assert all(res[("softmax", kind)]["recovered_at_end"])
    for attention in ELEMENTWISE:
        assert not any(res[(attention, "balanced")]["recovered_at_end"])
    assert all(res[("linear", "onehot")]["recovered_at_end"])  # with m = d it can learn
    assert not any(res[("sigmoid", "onehot")]["recovered_at_end"])  # the cap does not depend on the codes
    d = multi["d"]
    floor = (1 - 2 / d) * (d / 2) ** (-2 / (d - 2))  # the Jensen floor at pair mass <= 1
    assert min(res[("componentwise", "balanced")]["rest_mass"]) >= 0.9 * floor


def test_min_code_dim_validation() -> None:
    sweep = {"attentions": ("softmax",), "ms": (2, 4), "softmax": {"best_worst_upper": np.array([[1.0], [1e-3]])}}
    assert min_code_dim(sweep, "softmax") == 4
    with pytest.raises(ValueError, match="swept normalisers"):
        min_code_dim(sweep, "linear")
    with pytest.raises(ValueError, match="epsilon"):
        min_code_dim(sweep, "softmax", 0.0)


@pytest.mark.slow
def test_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert attention_variants.main([]) == 0
    out = capsys.readouterr().out
    assert "never" in out and "softmax" in out
