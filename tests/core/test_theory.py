"""Each formula of xorlib.theory against the computation it summarises (autograd-checked closed forms, brute force)."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from _tolerance import assert_close, gamma

from xorlib import one_step, theory
from xorlib.certify import certify_scores
from xorlib.codes import Codes
from xorlib.model import ModelConfig
from xorlib.population import population
from xorlib.task import random_pair

REMAINDER_CONSTANT = 100.0  # the constant of lem-split-direction, as chapter 3 states it


def _exact_directions(codes: torch.Tensor, pair, queries: torch.Tensor) -> torch.Tensor:
    model = ModelConfig(codes.shape[0], "split", m=codes.shape[1], code_kind="gaussian")  # codes given below
    return -(population(model, queries, pair, codes=codes).score_gradient @ codes) @ codes.T


@pytest.mark.parametrize("d", [8, 33, 128, 1000])
def test_split_first_order_direction_and_its_remainder_bound(d: int) -> None:
    """lem-split-direction: |t_h - t_h^lin| <= 100 r^2 / d^2, checked over starts up to r = 1/4."""
    codes = Codes(d, seed=d).dense()
    pair = random_pair(d, seed=d)
    worst_ratio = 0.0
    for trial, sigma in enumerate((0.01, 0.05, 0.2, 0.5, 1.0)):
        q = (
            torch.randn(codes.shape[1], dtype=torch.float64, generator=torch.Generator().manual_seed(trial))
            * sigma
            / math.sqrt(codes.shape[1])
        )
        s = codes @ q
        r = float((s - s.mean()).abs().max())
        if r > 0.25:
            continue
        exact = _exact_directions(codes, pair, torch.stack([q, -q]))
        linear = theory.split_direction_first_order(codes, pair, q)
        worst_ratio = max(worst_ratio, float((exact - linear).abs().max()) * d**2 / r**2)
    assert worst_ratio <= REMAINDER_CONSTANT == theory.REMAINDER_CONSTANT
    assert worst_ratio > 0.01  # the remainder really is of second order: not vanishingly small next to r^2


def test_first_order_gap_is_the_linear_form_of_the_split_vector() -> None:
    d = 200
    codes = Codes(d, seed=1).dense()
    pair = (5, 150)
    q = torch.randn(codes.shape[1], dtype=torch.float64) * 0.01
    linear = theory.split_direction_first_order(codes, pair, q)
    c = theory.first_order_split_vector(codes, pair)
    # Both sides are O(d m) sums (P P^T applied to the scores) of terms of size d^2 |linear| and |q| |c|.
    m = codes.shape[1]
    scale = d**2 * float(linear.abs().max()) + float(q.abs() @ c.abs())
    assert_close(d**2 * (linear[0, 5] - linear[0, 150]), q @ c, operations=2 * d * m, scale=scale)
    assert_close(d**2 * (linear[1, 5] - linear[1, 150]), -(q @ c), operations=2 * d * m, scale=scale)


def test_independent_start_split_probability_matches_the_first_order_formula() -> None:
    """lim sigma->0 P(split) = arccos(r)/pi for independent starts; 1 for the antisymmetric one."""
    d, draws = 64, 600
    codes = Codes(d, seed=5).dense()
    pair = random_pair(d, seed=5)
    predicted = theory.split_probability_first_order(codes, pair, "independent")
    splits = 0
    for seed in range(draws):
        q = ModelConfig(d, "split", start="independent", sigma=0.02, init_seed=seed).initial_queries()
        top = _exact_directions(codes, pair, q).argmax(1).tolist()
        splits += sorted(top) == list(pair)
    standard_error = math.sqrt(predicted * (1 - predicted) / draws)
    assert abs(splits / draws - predicted) < 4 * standard_error + 0.01
    assert predicted < 0.99
    assert theory.split_probability_first_order(codes, pair, "antisymmetric") == 1.0


def test_rest_mass_targets_invert_the_worst_case_formulas() -> None:
    for epsilon in (1e-12, 1e-6, 1e-2, 0.5):
        rest = theory.tied_rest_target(epsilon)
        assert theory.tied_worst_case(rest) == pytest.approx(epsilon, rel=1e-9)
        e = theory.split_rest_target(epsilon)
        assert 2 * (2 * e + 2 * e * e) ** 2 == pytest.approx(epsilon, rel=1e-9)


def test_split_rest_target_certifies_through_the_certificate() -> None:
    """Two split heads, each with rest mass at the target, certify below epsilon."""
    d, epsilon = 50, 1e-6
    rest = theory.split_rest_target(epsilon)
    scores = torch.full((2, d), math.log(rest / (d - 1)), dtype=torch.float64)
    scores[0, 3] = scores[1, 9] = math.log(1 - rest)
    assert float(certify_scores(ModelConfig(d), scores, (3, 9)).upper) <= epsilon * (1 + 1e-9)


def test_tie_probability_bound_holds_on_draws() -> None:
    d, m, draws = 16, 8, 400
    ties = 0
    for seed in range(draws):
        codes = Codes(d, m, seed=seed)
        p = codes.dense()
        u, v = random_pair(d, seed=seed)
        margins = p[u] @ (p[u] + p[v]) - p @ (p[u] + p[v])
        margins[[u, v]] = float("inf")
        ties += bool(margins.min() <= codes.margin_step / 2)  # margins lie on the lattice: 0 or >= margin_step
    bound = theory.tie_probability_bound(d, m)
    assert ties / draws <= bound + 3 * math.sqrt(bound / draws)


@pytest.mark.parametrize("d", [17, 33, 65, 257])
def test_odd_d_margins_lie_on_the_lattice_and_are_at_least_minus_one_step(d: int) -> None:
    """Issue 20: lem-lattice at odd d. Every margin <p_u - p_k, p_u + p_v> (every k, not only the smallest) is an
    integer multiple of 1/(m-1) and at least -1/(m-1), so a positive one is at least 1/(m-1); negative margins occur.
    """
    draws = 1000 if d == 17 else 100
    negative = 0
    for seed in range(5000, 5000 + draws):  # seeds the chapter does not use
        codes = Codes(d, seed=seed)
        step = codes.margin_step
        assert step == 1 / (codes.m - 1)
        p = codes.dense()
        u, v = random_pair(d, seed=seed)
        margins = (p[u] - p) @ (p[u] + p[v])
        others = torch.ones(d, dtype=torch.bool)
        others[[u, v]] = False
        multiples = margins[others] / step
        assert torch.allclose(multiples, multiples.round(), atol=1e-9, rtol=0.0)
        assert int(multiples.round().min()) >= -1
        tied = theory.tied_margin(p, (u, v))
        assert math.isclose(tied, float(margins[others].min()), abs_tol=1e-12)
        negative += tied < -step / 2
    if d == 17:  # about 2 % of the draws (the chapter measures it on its own seeds)
        assert 5 <= negative <= 60, negative


def test_lattice_sharpness_certifies_every_separable_draw() -> None:
    """Issue 10, item 4: kappa = ln((d-2)/(2E))/(4/m) covers every draw with a positive margin."""
    epsilon = 1e-6
    for d in (16, 64, 257):
        codes = Codes(d, seed=d)
        kappa = theory.tied_sharpness(d, codes.margin_step, epsilon)  # the lattice rule
        p = codes.dense()
        for seed in range(30):
            u, v = random_pair(d, seed=seed + 1000)  # held-out draws: never used to choose anything
            g = p @ (p[u] + p[v])
            margin = float(g[u] - torch.cat([g[:u], g[u + 1 : v], g[v + 1 :]]).max())
            if margin <= codes.margin_step / 2:  # a tie (margins lie on the lattice)
                continue
            scores = torch.stack([kappa * g, kappa * g])
            assert float(certify_scores(ModelConfig(d, "tied"), scores, (u, v)).upper) <= epsilon


def test_published_lattice_values() -> None:
    """The issue quotes kappa = 42, 72, 108, 149, 195, 247, 326, 435 for d = 16 ... 10^6 (default m, even d)."""
    ds = (16, 64, 256, 1024, 4096, 16384, 10**5, 10**6)
    got = [round(theory.tied_sharpness(d, 4 / Codes(d).m, 1e-6)) for d in ds]
    assert got == [42, 72, 108, 149, 195, 247, 326, 435]


def test_sample_bound() -> None:
    assert theory.split_sample_bound(100, 100 / 24, 1.0, 0.1) > 0
    with pytest.raises(ValueError, match="gap must be"):
        theory.split_sample_bound(100, 1.0, 0.0, 0.1)


@pytest.mark.parametrize(
    ("call", "error", "name"),
    [
        (lambda: theory.tied_sharpness(10**400, 0.5, 1e-2), ValueError, "d"),
        (lambda: theory.split_sample_bound(8, 2.0, 1e-300, 0.1), ValueError, "gap"),
        (lambda: theory.tied_sharpness(10**12, 1e-300, 1e-2), ValueError, "margin"),
        (lambda: theory.typical_rest_mass(10**13, 8, 1.0), ValueError, "d"),
        (lambda: theory.rest_mass_bound(1000, 0.1, 1e300), ValueError, "kappa"),
        (lambda: theory.tied_rest_target(1e-400), ValueError, "epsilon"),
        (lambda: theory.tie_probability_bound(2**80, 8), ValueError, "d"),
        (lambda: theory.split_rest_target(float("inf")), ValueError, "epsilon"),
    ],
)
def test_finding_10_overflow_and_division_by_zero_are_refused_by_name(call, error, name) -> None:
    """Issue 19, finding 10: OverflowError and ZeroDivisionError from huge or tiny arguments (12 cases)."""
    with pytest.raises(error, match=rf"\b{name}\b"):
        call()


def test_every_formula_is_finite_at_the_ends_of_its_ranges() -> None:
    d = 10**12
    values = [
        theory.tied_sharpness(d, 1e-12, 1e-300),
        theory.tied_sharpness(4, 4.0, 2.0),
        theory.rest_mass_bound(d, -4.0, 1e12),
        theory.typical_rest_mass(d, 4096, 1e12, -1.0),
        theory.tie_probability_bound(d, 1),
        theory.split_sample_bound(d, 1e15, 1e15, 1e-300, 1e3),
        theory.tied_rest_target(1e-300),
        theory.split_rest_target(2.0),
    ]
    assert all(math.isfinite(v) for v in values), values


@pytest.mark.parametrize(("d", "m"), [(256, 16), (1024, 64), (4096, 16), (1024, 40)])
def test_split_direction_self_term_shrinks_the_scores_by_about_one_over_m_not_one_over_d(d: int, m: int) -> None:
    """Issue 20: the third term of lem-split-direction is about s/m (P^T P is about (d/m) I), not s/d."""
    factors = []
    for seed in range(5000, 5005):  # fresh seeds, never used by the book
        model = ModelConfig(d, "split", m=m, code_seed=seed, init_seed=seed)
        codes, q = model.codes.dense(), model.initial_queries()[0]
        pair = random_pair(d, seed=seed)
        t = theory.split_direction_first_order(codes, pair, q)
        s = codes @ q
        centred = s - s.mean()
        h = codes @ (codes[pair[0]] - codes[pair[1]])
        self_term = (s[pair[0]] - s[pair[1]]) * h - d**2 * (t[0] - t[1]) / 2  # (1 + 2/d)/d P P^T s~
        factors.append(float(self_term @ centred / (centred @ centred)))
    scaled = torch.tensor(factors) * m
    assert bool(((scaled > 0.5) & (scaled < 2.0)).all()), scaled
    assert 0.8 < float(scaled.mean()) < 1.3, scaled
    assert min(factors) * d > 4  # far from 1/d


@pytest.mark.parametrize("rows", [8, 10])
def test_tie_probability_per_coordinate_of_the_cyclic_pairing_is_at_most_three_quarters(
    rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 20: lem-ties for the pairing the code builds, k <-> (mu - k) mod C with mu odd, not a random matching.

    Exact: every odd mu (the code's own pair_rows, its draw of mu replaced by each value in turn) and every sign
    pattern of the block's rows on one coordinate. Position k is in the box of u, v unless p_u = p_v != p_k."""
    from xorlib import _packed
    from xorlib._random import bytes_to_signs

    coordinates = 2**rows  # coordinate c holds the bit pattern c of the rows: every pattern once
    bits = (torch.arange(coordinates).unsqueeze(0) >> torch.arange(rows).unsqueeze(1)) & 1  # (rows, coordinates)
    raw = (bits.view(rows, -1, 8) << torch.arange(8)).sum(-1).to(torch.uint8)  # bit b of byte g: coordinate 8g + b
    signs = []
    for half in range(rows // 2):  # mu = 2 * half + 1: every odd mu, equally likely
        monkeypatch.setattr(
            _packed.torch, "randint", lambda low, high, size, generator, half=half: torch.full(size, half)
        )
        paired = _packed.pair_rows(raw.clone(), rows, coordinates, torch.Generator())
        signs.append(bytes_to_signs(paired.contiguous(), coordinates, torch.float64))  # (rows, coordinates)
    monkeypatch.undo()
    signs = torch.stack(signs)  # (mu, rows, coordinates)
    assert bool((signs.sum(1) == 0).all())  # balanced: every column sums to zero
    largest = 0.0
    for u, v, k in itertools.permutations(range(rows), 3):
        if u > v:
            continue
        outside = (signs[:, u] == signs[:, v]) & (signs[:, k] != signs[:, u])
        inside = 1 - float(outside.double().mean())
        # u and v paired (u + v odd) and k paired with one of them cancel; k paired with u or v when u + v is even
        # and k has the other parity lowers it by 1/C
        expected = 0.75 - 1 / rows if (u + v) % 2 == 0 and (u + k) % 2 == 1 else 0.75
        assert inside == pytest.approx(expected, abs=1e-12), (u, v, k)
        largest = max(largest, inside)
    assert largest == pytest.approx(0.75, abs=1e-12)


# ----------------------------------------------------------------------------- thm-split at any start scale
def _enumerated_split_directions(codes: torch.Tensor, pair, query: torch.Tensor) -> torch.Tensor:
    """t_h = -P P^T dL/ds_h at the start (q, -q), by autograd through the loss averaged over all 2^d inputs."""
    d = codes.shape[0]
    x = torch.tensor(list(itertools.product((-1.0, 1.0), repeat=d)), dtype=torch.float64)
    y = -x[:, pair[0]] * x[:, pair[1]]
    scores = torch.stack([codes @ query, -(codes @ query)]).requires_grad_(True)
    z = x @ torch.softmax(scores, dim=-1).T
    (0.5 * ((-z[:, 0] * z[:, 1] - y) ** 2).mean()).backward()
    return -(scores.grad @ codes) @ codes.T


@pytest.mark.parametrize("d", [8, 12])
@pytest.mark.parametrize("sigma", [0.5, 1.0, 3.0])
def test_split_direction_exact_matches_enumeration(d: int, sigma: float) -> None:
    """lem-split-exact: the closed form, with no remainder, equals autograd over all 2^d inputs at any start scale."""
    model = ModelConfig(d, "split", sigma=sigma, code_seed=9300 + d, init_seed=9300 + d)
    codes, pair = model.codes.dense(), random_pair(d, seed=9300 + d)
    q = model.initial_queries()[0]
    enumerated = _enumerated_split_directions(codes, pair, q)
    closed = theory._split_direction_exact(codes, pair, q)
    assert_close(closed, enumerated, operations=2**d * d, scale=float(enumerated.abs().max()))
    # Not the first-order direction: at these scales the remainder of lem-split-direction is visible.
    linear = theory.split_direction_first_order(codes, pair, q)
    assert float((linear - enumerated).abs().max()) > 1e-6 * float(enumerated.abs().max())


def test_split_direction_exact_matches_the_population_gradient_at_d_1000() -> None:
    model = ModelConfig(1000, "split", code_seed=9320, init_seed=9320)
    codes, pair = model.codes.dense(), random_pair(1000, seed=9320)
    q = model.initial_queries()
    exact = _exact_directions(codes, pair, q)
    closed = theory._split_direction_exact(codes, pair, q[0])
    assert_close(closed, exact, operations=4 * 1000 * model.m, scale=float(exact.abs().max()))


@pytest.mark.parametrize("block", [64, 100, 1024])
def test_gram_levels_group_every_entry_of_the_gram_matrix(block: int) -> None:
    """Sign codes: every (j, l) of g = P P^T counted once at its value, with the sum of a_j a_l over those entries,
    whatever the row blocks (one block, equal ones, a ragged last one)."""
    codes = Codes(300, seed=9320).dense()
    d, m = codes.shape
    a = codes @ (codes[3] - codes[40])
    levels = theory._gram_levels(codes, a, block=block)
    hamming = ((m - (codes.sign() @ codes.sign().T)) / 2).round().long().flatten()
    assert torch.equal(levels.count, torch.bincount(hamming, minlength=m + 1).to(levels.count.dtype))
    expected = torch.bincount(hamming, weights=(a[:, None] * a[None, :]).flatten(), minlength=m + 1)
    allowance = 2 * gamma(d * d) * (a.abs().sum() ** 2)  # two orders of summing d^2 products
    assert float((levels.weight - expected).abs().max()) <= float(allowance)
    assert torch.equal(levels.value, 1 - 2 * torch.arange(m + 1, dtype=codes.dtype) / m)


@pytest.mark.parametrize("c", [1.0, 2.0])
def test_exp_form_variance_matches_monte_carlo(c: float) -> None:
    """The Chebyshev terms of thm-split: S = sum_j a_j (e^{c s_j} - e^{c^2 tau^2/2}(1 + c s_j)) has mean 0 and the stated variance."""
    codes = Codes(64, seed=9330).dense()
    d, m = codes.shape
    a = codes @ (codes[3] - codes[40])
    tau = 1.0 / math.sqrt(m)
    q = torch.randn(40_000, m, dtype=torch.float64, generator=torch.Generator().manual_seed(9330)) * tau
    s = q @ codes.T
    kappa = c**2 * tau**2
    samples = (torch.exp(c * s) - math.exp(kappa / 2) * (1 + c * s)) @ a
    levels = theory._gram_levels(codes, a)
    variance = theory._exp_form_variance(levels, kappa)
    assert abs(float(samples.mean())) < 4 * math.sqrt(variance / len(samples))
    assert abs(float(samples.var()) / variance - 1) < 0.1  # a few standard errors of a sample variance
    fourth = (s**4).sum(1) / tau**4
    assert abs(float(fourth.mean()) / (3 * d) - 1) < 0.02
    assert abs(float(fourth.var()) / theory._fourth_power_variance(levels) - 1) < 0.1


def test_for_sign_codes_the_lean_never_shrinks_the_other_margins() -> None:
    """<p_tau - p_k, p_tau - p_tau'> >= 0 for sign codes (even d), so nu = 0; not so for every unit code."""
    for seed in range(9340, 9345):
        codes = Codes(256, seed=seed).dense()
        assert theory._code_terms(codes, random_pair(256, seed=seed))["nu"] == 0.0
    angle = -math.pi / 6  # p_k closer to p_u than p_v is, and on the far side: <p_u - p_k, p_u - p_v> < 0
    plane = torch.tensor([[1.0, 0.0], [0.0, 1.0], [math.cos(angle), math.sin(angle)], [-1.0, 0.0]], dtype=torch.float64)
    assert theory._code_terms(plane, (0, 1))["nu"] < 0


@pytest.mark.parametrize("d", [64, 256, 1024])
def test_split_theorem_bounds_hold_on_fresh_draws(d: int) -> None:
    """thm-split: every inequality of the proof against the exact direction, on fresh draws at three start scales.

    The pair-gap line is nearly tight at small sigma (within a few per cent), so a wrong slope fails it.
    """
    tightest = math.inf
    for seed in range(9350, 9358):
        for sigma in (0.3, 1.0, 3.0):
            model = ModelConfig(d, "split", sigma=sigma, code_seed=seed, init_seed=seed)
            codes, pair = model.codes.dense(), random_pair(d, seed=seed)
            bound = theory._split_bounds(codes, pair, sigma, 0.1, 1e-6)
            seen = theory._split_measured(codes, pair, model.initial_queries()[0])
            assert seen.r <= bound.r and seen.mean_square <= bound.mean_square
            pair_line = bound.slope * seen.lean - bound.tilt * seen.tilt - bound.chaos
            assert seen.pair_gap >= pair_line
            assert seen.margin_gap >= bound.margin - bound.margin_noise
            assert seen.even <= bound.even
            tightest = min(tightest, (seen.pair_gap - pair_line) / seen.pair_gap)
    assert tightest < 0.1  # the lean line is sharp somewhere: the theorem's slope is not a loose constant


def test_split_theorem_covers_sigma_1_at_the_default_m_at_d_4096() -> None:
    """At the default sigma = 1 and m = 48, Gamma > 0 at delta = 0.1 on most fresh draws, and there the step kappa_delta
    splits the heads and certifies 1e-6; where Gamma <= 0 the margin against the other positions is what fails."""
    d, applies = 4096, 0
    for seed in range(9360, 9368):
        model = ModelConfig(d, "split", code_seed=seed, init_seed=seed)
        assert model.sigma == 1.0 and model.m == 48
        codes, pair = model.codes.dense(), random_pair(d, seed=seed)
        bound = theory._split_bounds(codes, pair, 1.0, 0.1, 1e-6)
        if bound.gap <= 0:
            assert bound.margin - bound.margin_noise <= 0 < bound.slope * bound.lean - bound.pair_noise
            continue
        applies += 1
        result = one_step(d, "split", seed=seed, step=bound.kappa)
        assert result.split and result.success and float(result.worst_case.upper) <= 1e-6
    assert applies >= 5  # of 8 (the chapter's table: the same count on its own draws)


def test_split_theorem_covers_sigma_1_with_twice_the_default_m_at_d_256() -> None:
    """At d = 256, where the default m = 32 leaves Gamma <= 0 on most draws, m = 64 (8 log2 d) gives Gamma > 0 at delta = 0.1."""
    applies = 0
    for seed in range(9370, 9378):
        pair = random_pair(256, seed=seed)
        applies += theory._split_bounds(Codes(256, 64, seed=seed).dense(), pair, 1.0, 0.1, 1e-6).gap > 0
    default = sum(
        theory._split_bounds(Codes(256, seed=s).dense(), random_pair(256, seed=s), 1.0, 0.1, 1e-6).gap > 0
        for s in range(9370, 9378)
    )
    assert applies >= 7 and default <= 2


def test_split_theorem_probability_over_the_start_at_sigma_1() -> None:
    """thm-split's probability: on the first fresh draw of codes and pair with Gamma > 0 at d = 1024, sigma = 1,
    delta = 0.1, at least a fraction 1 - delta of 200 fresh starts have both gaps >= Gamma / d^2 (up to 3 standard errors).
    """
    d, delta = 1024, 0.1
    seed = next(s for s in range(9380, 9400) if theory._split_bounds(*_draw(d, s), 1.0, delta, 1e-6).gap > 0)
    codes, pair = _draw(d, seed)
    gap = theory._split_bounds(codes, pair, 1.0, delta, 1e-6).gap
    starts = 200
    held = sum(
        theory._split_measured(codes, pair, ModelConfig(d, "split", init_seed=30_000 + i).initial_queries()[0]).gap
        >= gap
        for i in range(starts)
    )
    assert held / starts >= 1 - delta - 3 * math.sqrt(delta * (1 - delta) / starts)


def _draw(d: int, seed: int) -> tuple[torch.Tensor, tuple[int, int]]:
    return Codes(d, seed=seed).dense(), random_pair(d, seed=seed)
