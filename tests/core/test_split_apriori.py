"""cor-split-apriori (chapter 3): the a-priori bound on thm-split's Gamma, line by line against the computed one."""

from __future__ import annotations

import math

import pytest
import torch

from xorlib import theory
from xorlib.codes import Codes
from xorlib.task import random_pair


def _draw(d: int, m: int, seed: int) -> tuple[torch.Tensor, tuple[int, int], dict]:
    codes, pair = Codes(d, m, seed=seed).dense(), random_pair(d, seed=seed)
    return codes, pair, theory._code_terms(codes, pair)


def _lines(codes: torch.Tensor, pair: tuple[int, int], terms: dict, sigma: float, delta: float):
    d, m = codes.shape
    bound = theory._split_bounds(codes, pair, sigma, delta, 1e-6, terms=terms)
    apriori = theory._split_apriori(d, m, sigma, delta, terms["lam"], terms["rho"], terms["gamma"])
    return bound, apriori


@pytest.mark.parametrize(("d", "m"), [(256, 32), (256, 64), (1024, 40), (1024, 80), (4096, 48)])
def test_each_a_priori_line_bounds_the_computed_line(d: int, m: int) -> None:
    """Each line of _split_apriori, fed the measured lambda, rho and gamma, bounds the same line of _split_bounds
    (slope and margin from below, the noises from above, the pair lines per unit |e|), so its gap bounds Gamma."""
    checked = 0
    for seed in range(9500, 9502 if d > 1024 else 9503):
        codes, pair, terms = _draw(d, m, seed)
        if terms["gamma"] <= 0:
            continue  # a tie: thm-split does not apply
        for sigma, delta in ((1.0, 0.1), (0.3, 0.5), (2.0, 0.1)):
            bound, apriori = _lines(codes, pair, terms, sigma, delta)
            e = terms["e_norm"]
            assert abs(e**2 - (2 - 2 * terms["rho"])) < 1e-12  # unit rows
            assert bound.r == apriori.r
            assert bound.slope >= apriori.slope
            assert bound.lean / e == pytest.approx(apriori.lean, rel=1e-12)
            assert bound.pair_noise / e <= apriori.pair_noise
            assert (bound.slope * bound.lean - bound.pair_noise) / e >= apriori.pair
            assert bound.margin >= apriori.margin
            assert bound.margin_noise <= apriori.margin_noise
            assert bound.gap >= apriori.gap
            checked += 1
    assert checked >= 6


def test_each_code_term_bound_of_the_proof() -> None:
    """The proof's code-term bounds (i)-(iv), on sign codes: c_par <= lam, |w_perp| <= lam |e| / 2, the Mehler
    variances <= e^k (e^k - 1 - k) lam^2 |e|^2, V_4 <= 96 lam d, spread <= 2 sqrt(lam), pull <= 2 lam."""
    for d, m, seed in ((256, 32, 1), (1024, 80, 2), (2048, 44, 3)):
        codes, pair = Codes(d, m, seed=seed).dense(), random_pair(d, seed=seed)
        c = theory._code_terms(codes, pair)
        lam, e = c["lam"], c["e_norm"]
        assert d / m <= lam * (1 + 1e-12) and c["c_par"] <= lam and c["w_perp"] <= lam * e / 2
        for kappa in (1e-3, 0.02, 0.3):
            bound = math.exp(kappa) * (math.expm1(kappa) - kappa) * lam**2 * e**2
            assert 0 <= theory._exp_form_variance(c["levels"], kappa) <= bound
        assert theory._fourth_power_variance(c["levels"]) <= 96 * lam * d
        assert c["spread"] <= 2 * math.sqrt(lam) and c["pull"] <= 2 * lam and c["nu"] == 0


def test_where_the_a_priori_conditions_hold_gamma_is_positive() -> None:
    """At d = 4096, sigma = 1, delta = 0.1 and m = m_0 (the threshold for lambda <= 2 d / m): on fresh draws where the
    corollary's code conditions hold (lambda <= 2 d / m, rho <= 1/2, gamma > 0), the computed Gamma is positive and
    at least the worst-case bound, which is positive."""
    d, sigma, delta = 4096, 1.0, 0.1
    m = theory._split_apriori_threshold(d, sigma, delta, 2.0)
    worst = theory._split_apriori(d, m, sigma, delta, 2 * d / m, 0.5, 4 / m)
    assert worst.gap > 0 >= theory._split_apriori(d, m - 1, sigma, delta, 2 * d / (m - 1), 0.5, 4 / (m - 1)).gap
    held = 0
    for seed in range(9510, 9513):
        codes, pair, terms = _draw(d, m, seed)
        bound, apriori = _lines(codes, pair, terms, sigma, delta)
        if terms["lam"] <= 2 * d / m and terms["rho"] <= 0.5 and terms["gamma"] > 0:
            held += 1
            assert bound.gap >= apriori.gap >= worst.gap > 0
    assert held >= 2


def test_the_closed_form_implies_the_line_by_line_bound() -> None:
    """m >= 16 a-bar^2 ln(8(3d-2)/delta) and m delta >= 8 a-bar give a positive worst-case bound (sigma <= 1,
    lambda = a d / m, rho = 1/2, gamma = 4/m), and the threshold is at most the closed form."""
    generator = torch.Generator().manual_seed(20)
    for _ in range(300):
        u = torch.rand(5, generator=generator, dtype=torch.float64).tolist()
        d = max(4, int(10 ** (0.7 + 11.3 * u[0])))
        delta, sigma, a = 10 ** (-3 * u[1]) * 0.999, 1 - 0.999 * u[2], 1 + 7 * u[3]
        top = theory._split_apriori_closed_form(d, delta, a)
        assert top >= 16 * max(a, 2) ** 2 * math.log(8 * (3 * d - 2) / delta) and top * delta >= 8 * max(a, 2)
        for m in (top, top + 1, int(top * (1 + 9 * u[4]))):
            assert theory._split_apriori(d, m, sigma, delta, a * d / m, 0.5, 4 / m).gap > 0
    for d in (10**3, 10**6, 10**9):
        least = theory._split_apriori_threshold(d)
        assert theory._split_apriori_threshold(d, margin=0.25) < least <= theory._split_apriori_closed_form(d, 0.1)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"d": 3}, "d"),
        ({"d": 4.5}, "d"),
        ({"sigma": 0.0}, "sigma"),
        ({"sigma": 1.5}, "sigma"),
        ({"delta": 1.0}, "delta"),
        ({"delta": 1e-4}, "delta"),
        ({"delta": math.nan}, "delta"),
        ({"lam_ratio": 0.5}, "lam_ratio"),
        ({"lam_ratio": 9.0}, "lam_ratio"),
        ({"margin": -0.1}, "margin"),
        ({"margin": 4.5}, "margin"),
    ],
)
def test_the_threshold_rejects_bad_input_by_name(kwargs: dict, name: str) -> None:
    arguments = {"d": 1000, "sigma": 1.0, "delta": 0.1, "lam_ratio": 2.0, "margin": 0.0} | kwargs
    error = TypeError if isinstance(arguments["d"], float) else ValueError
    with pytest.raises(error, match=rf"^{name}\b"):
        theory._split_apriori_threshold(**arguments)


@pytest.mark.parametrize(("d", "m", "seed"), [(4096, 16, 1), (4096, 64, 2), (65536, 32, 3), (65536, 96, 4)])
def test_the_codes_off_diagonal_gram_entries_and_spectrum_are_within_the_lemma(d: int, m: int, seed: int) -> None:
    """lem-code-spectrum: |(P^T P)_ij| <= t/m off the diagonal and lambda <= d/m + (m - 1) t/m, at delta_c = 0.01
    (a fixed draw: the lemma allows a failure on 1 % of draws; these draws are well inside)."""
    codes = Codes(d, m, seed=seed).dense()
    gram = codes.T @ codes
    t = 2 * math.sqrt(d * math.log(m * (m - 1) / 0.01))
    off = (gram - torch.diag(torch.diag(gram))).abs().max().item()
    assert torch.allclose(torch.diag(gram), torch.full((m,), d / m, dtype=gram.dtype))
    assert off <= t / m
    assert torch.linalg.eigvalsh(gram)[-1].item() <= theory._code_spectrum_bound(d, m, 0.01)


def test_the_spectrum_bound_gives_two_d_over_m_exactly_where_the_lemma_says() -> None:
    for d, m in [(10**7, 347), (10**8, 369), (10**6, 324), (4096, 8)]:
        need = 4 * m**2 * math.log(m * (m - 1) / 0.01)
        if d >= need:
            assert theory._code_spectrum_bound(d, m, 0.01) <= 2 * d / m
    assert theory._code_spectrum_bound(10**6, 324, 0.01) > 2 * 10**6 / 324  # the lemma is silent there


@pytest.mark.parametrize(
    ("args", "name"),
    [
        ((5, 8, 0.1), "d"),
        ((8, 1, 0.1), "m"),
        ((8, 4, 0.0), "delta_codes"),
        ((8, 4, 1.0), "delta_codes"),
        ((8, 4, float("nan")), "delta_codes"),
        ((8.0, 4, 0.1), "d"),
    ],
)
def test_the_spectrum_bound_rejects_bad_input_by_name(args: tuple, name: str) -> None:
    with pytest.raises((ValueError, TypeError), match=name):
        theory._code_spectrum_bound(*args)
