"""The certified worst case over all 2^d inputs: sound against exact brute force, exact where it says so."""

from __future__ import annotations

import itertools
import math

import mpmath
import pytest
import torch

from xorlib.certify import certify_scores, worst_case_loss
from xorlib.codes import Codes
from xorlib.model import ModelConfig
from xorlib.theory import tied_worst_case

mpmath.mp.dps = 60


def _brute_force(weights: list[list[mpmath.mpf]], pair: tuple[int, int], heads: str) -> mpmath.mpf:
    """The maximum loss over all inputs, in 60-digit arithmetic."""
    return _brute_force_both(weights, pair, heads)[0]


def _brute_force_both(weights, pair, heads):
    """The maximum loss and the minimum margin y f over all inputs, in 60-digit arithmetic."""
    d, (u, v) = len(weights[0]), pair
    c0, c1 = (1, 2) if heads == "tied" else (0, 1)
    best, margin = mpmath.mpf(0), mpmath.mpf(10)
    for bits in itertools.product((1, -1), repeat=d):
        z = [mpmath.fsum(w * b for w, b in zip(row, bits, strict=True)) for row in weights]
        y = -bits[u] * bits[v]
        f = c0 - c1 * z[0] * z[1]
        best = max(best, (f - y) ** 2 / 2)
        margin = min(margin, y * f)
    return best, margin


def _softmax(row: list[float]) -> list[mpmath.mpf]:
    top = max(row)
    e = [mpmath.exp(mpmath.mpf(x) - top) for x in row]
    total = mpmath.fsum(e)
    return [x / total for x in e]


def _cases(count: int, seed: int):
    """Random, tied, sharp, split, adversarially mis-split and near-degenerate head scores."""
    g = torch.Generator().manual_seed(seed)
    for trial in range(count):
        d = int(torch.randint(4, 9, (1,), generator=g))  # ModelConfig: d >= 4
        pair = tuple(sorted(torch.randperm(d, generator=g)[:2].tolist()))
        s = torch.randn(2, d, generator=g, dtype=torch.float64) * float(
            10 ** torch.empty(1).uniform_(-1, 2, generator=g)
        )
        kind = trial % 6
        if kind in (0, 3):
            s[1] = s[0]
        if kind in (1, 3):
            s[:, pair[0]] += 25 + 10 * (kind == 1)
            s[:, pair[1]] += 25
        if kind == 2:
            s[0, pair[0]] += 40
            s[1, pair[1]] += 40
        if kind == 4:
            s[0, pair[1]] += 45
            s[1, pair[0]] += 38
        if kind == 5:
            s[:, pair[0]] += 30  # both heads on the same bit: the collapse
        yield s, pair, ("tied", "split")[trial % 2]


def test_certificate_from_scores_is_sound_and_exact_where_flagged() -> None:
    checked = exact = 0
    for scores, pair, heads in _cases(240, seed=1):
        truth, margin = _brute_force_both([_softmax(row.tolist()) for row in scores], pair, heads)
        certificate = certify_scores(ModelConfig(scores.shape[-1], heads), scores, pair)
        assert mpmath.mpf(float(certificate.lower)) <= truth <= mpmath.mpf(float(certificate.upper))
        assert mpmath.mpf(float(certificate.margin)) <= margin  # the sign certificate is sound too
        if bool(certificate.exact) and heads == "tied":  # "exact" is the certificate's claim of nine digits
            assert abs(mpmath.mpf(float(certificate.margin)) - margin) < 1e-9
        if bool(certificate.exact):
            exact += 1
            assert abs(mpmath.mpf(float(certificate.upper)) - truth) <= 1e-8 * truth
        checked += 1
    assert exact > 40  # the tied cases with rest mass below 1/2 are exact


def test_certificate_from_arbitrary_weights_is_sound_even_for_adversarial_weights() -> None:
    g = torch.Generator().manual_seed(2)
    for trial, (scores, pair, heads) in enumerate(_cases(160, seed=3)):
        weights = (
            torch.softmax(scores, -1) if trial % 2 else torch.randn(scores.shape, generator=g, dtype=torch.float64)
        )
        if trial % 4 == 0:
            weights[1] = weights[0]
        exact_weights = [[mpmath.mpf(float(w)) for w in row] for row in weights]
        truth, margin = _brute_force_both(exact_weights, pair, heads)
        certificate = worst_case_loss(ModelConfig(weights.shape[-1], heads), weights, pair)
        assert mpmath.mpf(float(certificate.lower)) <= truth <= mpmath.mpf(float(certificate.upper))
        assert mpmath.mpf(float(certificate.margin)) <= margin


def test_float32_weights_are_never_flagged_exact_and_stay_sound() -> None:
    """Issue 10, item 1: at d >= 2e5 the two pair weights round to 1/2 in float32, hiding the rest mass."""
    rest = 2.178e-10
    d = 200_000
    weights = torch.full((2, d), rest / (d - 2), dtype=torch.float64)
    weights[:, [3, 7]] = (1 - rest) / 2
    truth = tied_worst_case(rest)
    assert abs(truth - 32 * rest**2 * (1 - rest) ** 2) < 1e-30 and abs(truth - 1.518e-18) < 1e-21
    single = worst_case_loss(ModelConfig(d, "tied"), weights.float(), (3, 7))
    assert not bool(single.exact)
    assert float(single.upper) >= truth
    # From the scores the certificate keeps every digit, whatever d.
    scores = torch.log(weights)
    from_scores = certify_scores(ModelConfig(d, "tied"), scores, (3, 7))
    assert bool(from_scores.exact)
    assert float(from_scores.upper) == pytest.approx(truth, rel=1e-9)
    assert float(from_scores.lower) <= truth <= float(from_scores.upper)


def test_tied_exact_value_matches_the_theorem() -> None:
    codes = Codes(30, seed=4).dense()
    q = 12.0 * (codes[2] + codes[11])
    scores = torch.stack([codes @ q, codes @ q])
    weights = torch.softmax(scores, -1)
    rest = float(weights[0].sum() - weights[0, 2] - weights[0, 11])
    gap = float((weights[0, 2] - weights[0, 11]).abs())
    certificate = certify_scores(ModelConfig(30, "tied"), scores, (2, 11))
    assert bool(certificate.exact)
    assert float(certificate.upper) == pytest.approx(tied_worst_case(rest, gap), rel=1e-9)


def test_bad_arguments() -> None:
    model = ModelConfig(5)
    with pytest.raises(ValueError, match="size 2 along axis -2"):
        certify_scores(model, torch.zeros(3, 5, dtype=torch.float64), (0, 1))
    with pytest.raises(ValueError, match="finite"):
        worst_case_loss(model, torch.full((2, 5), float("nan"), dtype=torch.float64), (0, 1))
    with pytest.raises(ValueError, match="pair\\[1\\]"):
        certify_scores(model, torch.zeros(2, 5, dtype=torch.float64), (0, 5))
    with pytest.raises(ValueError, match="model.attention must be 'softmax'"):
        certify_scores(ModelConfig(5, attention="relu"), torch.zeros(2, 5, dtype=torch.float64), (0, 1))


def test_weights_whose_loss_would_overflow_are_refused_not_nan() -> None:
    """Issue 19, finding 7: valid weights scaled by 1e300 gave NaN bounds; above 1e75 they are now refused."""
    model = ModelConfig(8)
    weights = torch.full((2, 8), 0.125, dtype=torch.float64)
    with pytest.raises(ValueError, match="weights must be at most 1e\\+75"):
        worst_case_loss(model, weights * 1e300, (1, 5))
    worst = worst_case_loss(model, weights * 1e70, (1, 5))
    assert not torch.isnan(worst.upper) and not torch.isnan(worst.lower) and not torch.isnan(worst.margin)


def _tied_exact(scores: list[float], pair: tuple[int, int]) -> mpmath.mpf:
    """The exact worst case of tied softmax heads with these scores (``thm-worst-case``), in 60-digit arithmetic."""
    weights = [mpmath.exp(mpmath.mpf(s)) for s in scores]
    total = mpmath.fsum(weights)
    a_u, a_v = weights[pair[0]] / total, weights[pair[1]] / total
    rest = 1 - a_u - a_v
    return max(32 * rest**2 * (1 - rest) ** 2, 2 * (abs(a_u - a_v) + rest) ** 4)


def test_an_underflowed_bound_is_the_smallest_normal_number_and_never_exact() -> None:
    """Issue 20: below 1e-308 the certificate returned 0 flagged exact. The true worst case here is about 1e-690."""
    d, pair = 100, (3, 7)
    scores = torch.full((2, d), -800.0, dtype=torch.float64)
    scores[:, list(pair)] = 0.0
    tiny = torch.finfo(torch.float64).tiny
    split = torch.full((2, d), -800.0, dtype=torch.float64)
    split[0, pair[0]] = split[1, pair[1]] = 0.0  # each head on its own bit: the loss is about 1e-340 at most
    worst = certify_scores(ModelConfig(d, "split"), split, pair)
    assert float(worst.upper) == tiny and not bool(worst.exact)
    assert float(worst.lower) >= 0 and bool(worst.all_signs_correct)
    # tied heads never underflow: the pair gap's rounding allowance keeps the bound above 1e-60
    tied = certify_scores(ModelConfig(d, "tied"), scores, pair)
    assert 1e-60 < float(tied.upper) and mpmath.mpf(float(tied.upper)) >= _tied_exact(scores[0].tolist(), pair)


def test_the_tied_pair_gap_gets_the_rounding_allowance_of_its_weights() -> None:
    """Issue 20: at large scores (d >= 10^4 after a big step) each log-weight is known only to ``log_error``; the gap
    between the pair's weights, a difference of two such weights, must carry that allowance. Every score vector whose
    log-weights lie within the allowance of the computed ones must be bounded by the certificate."""
    d, pair = 10_000, (3, 7)
    scores = torch.zeros(2, d, dtype=torch.float64)
    scores[:, list(pair)] = 100.0  # equal pair weights; rest mass about 2e-40
    worst = certify_scores(ModelConfig(d, "tied"), scores, pair)
    allowance = 16 * torch.finfo(torch.float64).eps * (100.0 + math.log(d) + 1)  # the certificate's log_error
    for shift in (0.0, 0.5, 1.0):  # the pair's log-weights moved apart by up to the allowance
        moved = scores[0].tolist()
        moved[pair[1]] += shift * allowance
        truth = _tied_exact(moved, pair)
        assert mpmath.mpf(float(worst.upper)) >= truth * (1 - mpmath.mpf(10) ** -12), shift
    # the lower bound stays below the truth of the scores as given, and the bracket is honest about its width
    assert mpmath.mpf(float(worst.lower)) <= _tied_exact(scores[0].tolist(), pair)
    assert not bool(worst.exact)
