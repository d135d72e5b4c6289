"""The one-step formulas of xorlib.theory against the generic closed form of xorlib.gradient."""

from __future__ import annotations

import math

import pytest
import torch

from xorlib.codes import default_code_dim, pair_margin, positional_codes
from xorlib.data import random_pair
from xorlib.theory import (
    code_dim_for_margin,
    one_step_curve,
    rest_mass,
    rest_mass_bound,
    rest_mass_for_loss,
    sufficient_sharpness,
    typical_rest_mass,
    worst_case_from_rest_mass,
)

KAPPAS = (2.0, 8.0, 20.0, 45.0)


@pytest.mark.parametrize("d", [8, 100, 2000])
def test_worst_case_formula_matches_the_generic_computation(d: int) -> None:
    codes = positional_codes(d, default_code_dim(d), seed=d)
    pair = random_pair(d, seed=d)
    curve = one_step_curve(codes, pair, KAPPAS)
    for kappa, worst, rest, exact in zip(curve["kappa"], curve["worst"], curve["rest"], curve["exact"], strict=True):
        assert rest == pytest.approx(rest_mass(codes, pair, kappa), rel=1e-9, abs=1e-300)
        if rest < 0.5:
            assert exact == 1.0
            # Absolute rounding floor: the loss is computed from 1 - t with t near 1.
            assert worst == pytest.approx(worst_case_from_rest_mass(rest), rel=1e-8, abs=1e-24)


@pytest.mark.parametrize("d", [16, 500, 5000])
def test_sufficient_sharpness_certifies_the_target_loss(d: int) -> None:
    codes = positional_codes(d, default_code_dim(d), seed=1)
    pair = random_pair(d, seed=2)
    margin = pair_margin(codes, pair)
    assert margin > 0
    for epsilon in (1e-2, 1e-6):
        kappa = sufficient_sharpness(d, margin, epsilon)
        curve = one_step_curve(codes, pair, [kappa])
        assert curve["worst"][0] <= epsilon
        assert rest_mass(codes, pair, kappa) <= rest_mass_bound(d, margin, kappa) * (1 + 1e-12)


def test_rest_mass_for_loss_inverts_the_worst_case_formula() -> None:
    for epsilon in (1.0, 1e-2, 1e-8):
        rest = rest_mass_for_loss(epsilon)
        assert worst_case_from_rest_mass(rest) == pytest.approx(epsilon, rel=1e-9)
    assert rest_mass_for_loss(1e-8) == pytest.approx(math.sqrt(1e-8 / 32), rel=1e-3)


def test_typical_rest_mass_tracks_the_exact_one_for_moderate_sharpness() -> None:
    d = 20_000
    m = default_code_dim(d)
    codes = positional_codes(d, m, seed=0)
    pair = random_pair(d, seed=0)
    rho = float(codes[pair[0]] @ codes[pair[1]])
    for kappa in (2.0, 5.0, 10.0):
        exact = rest_mass(codes, pair, kappa)
        assert typical_rest_mass(d, m, kappa, rho) == pytest.approx(exact, rel=0.25)


def test_code_dim_for_margin_is_logarithmic_and_delivers_the_margin() -> None:
    dims = [code_dim_for_margin(10**k) for k in (4, 6, 8)]
    # O(log d): equal increments for equal ratios of d, up to rounding.
    assert abs((dims[2] - dims[1]) - (dims[1] - dims[0])) <= 2
    d = 300
    m = code_dim_for_margin(d, delta=0.05, target=0.5)
    margins = []
    for seed in range(20):
        codes = positional_codes(d, m, seed=seed)
        margins.append(pair_margin(codes, random_pair(d, seed=seed)))
    assert min(margins) >= 0.5


def test_bad_input_raises_clear_errors() -> None:
    with pytest.raises(ValueError, match="rest must be <= 0.5"):
        worst_case_from_rest_mass(0.7)
    with pytest.raises(ValueError, match="margin must be > 0"):
        sufficient_sharpness(10, 0.0, 1e-3)
    with pytest.raises(ValueError, match="epsilon must be > 0"):
        rest_mass_for_loss(0.0)
    with pytest.raises(ValueError, match="target must be < 1"):
        code_dim_for_margin(10, target=1.0)
    with pytest.raises(ValueError, match="kappa must be > 0"):
        one_step_curve(torch.eye(4, dtype=torch.float64), (0, 1), [0.0])


def test_the_worked_numbers_of_the_chapter_3_exercise() -> None:
    # Chapter 3, exercise "kappa": d = 10^6, margin 0.25, epsilon = 1e-6.
    kappa = sufficient_sharpness(10**6, 0.25, 1e-6)
    assert kappa == pytest.approx(87.1, abs=0.05)
    assert kappa * 10**12 / 2 == pytest.approx(4.4e13, rel=0.02)
    assert rest_mass_for_loss(1e-6) == pytest.approx(1.77e-4, rel=0.01)
