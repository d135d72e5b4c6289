"""Tests of xorlib.gradient against autograd and against enumeration of all 2^d inputs."""

from __future__ import annotations

import itertools

import pytest
import torch

from xorlib.attention import ATTENTION_KINDS, attention_weights
from xorlib.codes import positional_codes
from xorlib.data import all_inputs, random_pair, sample_xor, xor_labels
from xorlib.gradient import (
    empirical_gradient,
    empirical_loss,
    exhaustive_losses,
    lr_for_sharpness,
    one_step,
    one_step_from_uniform,
    population_grad_weights,
    population_gradient,
    population_loss,
    population_loss_weights,
    sharpness,
    worst_case_loss,
)
from xorlib.model import head_outputs, head_weights, readout, squared_loss

READOUTS = ("xor", "product")
CASES = list(itertools.product(ATTENTION_KINDS, READOUTS))


def enumerated_loss(
    queries: torch.Tensor, codes: torch.Tensor, pair, attention: str, readout_kind: str
) -> torch.Tensor:
    """Mean loss over all 2^d inputs, through the model's own forward pass (autograd-able)."""
    x = all_inputs(codes.shape[0])
    f = readout(head_outputs(head_weights(queries, codes, attention), x), readout_kind)
    return squared_loss(f, xor_labels(x, pair)).mean()


def random_queries(m: int, scale: float, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(2, m, generator=generator, dtype=torch.float64) * scale


@pytest.mark.parametrize(("attention", "readout_kind"), CASES)
@pytest.mark.parametrize("d", [4, 9, 14])
def test_population_loss_and_gradient_match_autograd_on_all_inputs(d: int, attention: str, readout_kind: str) -> None:
    codes = positional_codes(d, 6, seed=d)
    pair = random_pair(d, seed=d)
    queries = random_queries(6, 0.8, seed=d).requires_grad_()
    loss = enumerated_loss(queries, codes, pair, attention, readout_kind)
    (grad,) = torch.autograd.grad(loss, queries)
    closed_loss = population_loss(queries.detach(), codes, pair, attention=attention, readout_kind=readout_kind)
    closed_grad = population_gradient(queries.detach(), codes, pair, attention=attention, readout_kind=readout_kind)
    assert abs(float(loss.detach()) - float(closed_loss)) <= 1e-12
    assert torch.allclose(closed_grad, grad, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("readout_kind", READOUTS)
def test_weight_gradient_matches_autograd_of_the_closed_form_at_large_d(readout_kind: str) -> None:
    d = 5000
    weights = torch.softmax(torch.randn(2, d, dtype=torch.float64) * 3, -1).requires_grad_()
    loss = population_loss_weights(weights, (10, 4321), readout_kind)
    (grad,) = torch.autograd.grad(loss, weights)
    assert torch.allclose(
        population_grad_weights(weights.detach(), (10, 4321), readout_kind), grad, rtol=1e-10, atol=1e-16
    )


@pytest.mark.parametrize(("attention", "readout_kind"), CASES)
def test_empirical_gradient_matches_autograd_on_a_large_sample(attention: str, readout_kind: str) -> None:
    d, m, n = 400, 24, 20_000
    codes = positional_codes(d, m, seed=1)
    pair = random_pair(d, seed=1)
    x, y = sample_xor(n, d, pair, seed=2, dtype=torch.float64)
    queries = random_queries(m, 0.5, seed=3).requires_grad_()
    f = readout(head_outputs(head_weights(queries, codes, attention), x), readout_kind)
    loss = squared_loss(f, y).mean()
    (grad,) = torch.autograd.grad(loss, queries)
    loss = loss.detach()
    closed = empirical_gradient(queries.detach(), codes, x, y, attention=attention, readout_kind=readout_kind)
    assert torch.allclose(closed, grad, rtol=1e-10, atol=1e-15)
    assert float(empirical_loss(queries.detach(), codes, x, y, attention=attention, readout_kind=readout_kind)) == (
        pytest.approx(float(loss), rel=1e-12)
    )


def test_empirical_gradient_converges_to_the_population_gradient() -> None:
    d, m = 24, 10
    codes = positional_codes(d, m, seed=0)
    pair = (3, 17)
    queries = random_queries(m, 1.0, seed=5)
    population = population_gradient(queries, codes, pair)
    errors = []
    for n in (10_000, 160_000):
        x, y = sample_xor(n, d, pair, seed=n, dtype=torch.float64)
        errors.append(float((empirical_gradient(queries, codes, x, y) - population).norm()))
    # Monte Carlo error shrinks like n^{-1/2}: 16x the samples, about 1/4 of the error.
    assert errors[1] < 0.5 * errors[0]
    assert errors[1] < 0.05 * float(population.norm())


@pytest.mark.parametrize("attention", ATTENTION_KINDS)
@pytest.mark.parametrize(("d", "kind"), [(12, "balanced"), (13, "balanced"), (12, "iid")])
def test_closed_form_step_from_uniform_equals_the_generic_step(attention: str, d: int, kind: str) -> None:
    codes = positional_codes(d, 7, kind=kind, seed=4)
    zero = torch.zeros(2, 7, dtype=torch.float64)
    for readout_kind in READOUTS:
        generic = one_step(zero, codes, (0, 5), 3.7, attention=attention, readout_kind=readout_kind)
        closed = one_step_from_uniform(codes, (0, 5), 3.7, attention=attention, readout_kind=readout_kind)
        assert torch.allclose(generic, closed, rtol=1e-12, atol=1e-16)
        assert torch.equal(closed[0], closed[1])  # the heads stay tied


def test_one_step_scores_are_sharpness_times_the_pair_direction_for_balanced_codes() -> None:
    d = 64
    codes = positional_codes(d, 20, seed=0)
    pair = (5, 40)
    lr = lr_for_sharpness(12.5, d)
    assert sharpness(lr, d) == pytest.approx(12.5)
    assert lr == pytest.approx(12.5 * d**2 / 2)
    scores = one_step_from_uniform(codes, pair, lr)[0] @ codes.T
    assert torch.allclose(scores, 12.5 * codes @ (codes[5] + codes[40]), atol=1e-12)


def brute_force_worst(weights: torch.Tensor, pair, readout_kind: str) -> float:
    return float(exhaustive_losses(weights, pair, readout_kind).max())


@pytest.mark.parametrize(("attention", "readout_kind"), CASES)
def test_worst_case_bracket_contains_the_enumerated_maximum(attention: str, readout_kind: str) -> None:
    d, m = 12, 5
    codes = positional_codes(d, m, seed=2)
    pair = (1, 8)
    for seed in range(6):
        weights = head_weights(random_queries(m, 1.5, seed), codes, attention)
        bracket = worst_case_loss(weights, pair, readout_kind)
        truth = brute_force_worst(weights, pair, readout_kind)
        assert float(bracket.lower) <= truth * (1 + 1e-12) + 1e-15
        assert truth <= float(bracket.upper) * (1 + 1e-12) + 1e-15
        if bool(bracket.exact):
            assert float(bracket.value) == pytest.approx(truth, rel=1e-10, abs=1e-15)


@pytest.mark.parametrize("d", [6, 10, 14])
def test_worst_case_is_exact_after_one_step_when_the_pair_dominates(d: int) -> None:
    codes = positional_codes(d, 8, seed=d)
    pair = random_pair(d, seed=d)
    exact_seen = 0
    for kappa in (0.1, 1.0, 3.0, 10.0, 30.0):
        weights = head_weights(one_step_from_uniform(codes, pair, lr_for_sharpness(kappa, d)), codes)
        bracket = worst_case_loss(weights, pair)
        truth = brute_force_worst(weights, pair, "xor")
        mass = float(weights[0, list(pair)].sum())
        # Tied heads: exact exactly when the pair holds at least half the attention.
        assert bool(bracket.exact) == (mass >= 0.5)
        assert float(bracket.lower) <= truth + 1e-14 <= float(bracket.upper) + 2e-14
        if mass >= 0.5:
            exact_seen += 1
            assert float(bracket.value) == pytest.approx(truth, rel=1e-10, abs=1e-15)
    assert exact_seen >= 2


def test_worst_case_loss_after_one_step_falls_towards_zero_as_the_step_grows() -> None:
    d = 10_000
    codes = positional_codes(d, seed=0)
    pair = random_pair(d, seed=0)
    values = []
    for kappa in (10.0, 20.0, 40.0, 80.0):
        weights = head_weights(one_step_from_uniform(codes, pair, lr_for_sharpness(kappa, d)), codes)
        bracket = worst_case_loss(weights, pair)
        assert bool(bracket.exact) or kappa == 10.0
        values.append(float(bracket.value))
    assert values == sorted(values, reverse=True)
    assert values[-1] < 1e-12


def test_collapsed_heads_make_the_xor_readout_constant() -> None:
    d, pair = 10, (2, 7)
    weights = torch.zeros(2, d, dtype=torch.float64)
    weights[:, 2] = 1.0  # both heads on one relevant position
    f = readout(head_outputs(weights, all_inputs(d)), "xor")
    assert torch.equal(f, torch.full_like(f, -1.0))
    assert float(worst_case_loss(weights, pair).value) == pytest.approx(2.0)
    assert float(population_loss_weights(weights, pair)) == pytest.approx(1.0)


def test_worst_case_loss_is_batched() -> None:
    codes = positional_codes(40, 9, seed=1)
    pair = (3, 30)
    steps = torch.stack([one_step_from_uniform(codes, pair, lr_for_sharpness(k, 40)) for k in (1.0, 5.0, 25.0)])
    weights = attention_weights(steps @ codes.T, "softmax")
    batched = worst_case_loss(weights, pair)
    assert batched.upper.shape == (3,)
    for k in range(3):
        single = worst_case_loss(weights[k], pair)
        assert float(single.upper) == pytest.approx(float(batched.upper[k]), rel=1e-14)
        assert float(single.lower) == pytest.approx(float(batched.lower[k]), rel=1e-14)


@pytest.mark.parametrize(
    ("call", "error", "text"),
    [
        (lambda: population_loss_weights(torch.ones(3, 5), (0, 1)), ValueError, "shape"),
        (lambda: population_loss_weights(torch.ones(2, 5), (0, 0)), ValueError, "distinct"),
        (lambda: population_gradient(torch.zeros(2, 3), torch.zeros(5, 4), (0, 1)), ValueError, "last dimension 3"),
        (lambda: one_step(torch.zeros(2, 3), torch.zeros(5, 3), (0, 1), 0.0), ValueError, "lr must be > 0"),
        (lambda: one_step(torch.zeros(2, 3), torch.zeros(5, 3), (0, 1), float("inf")), ValueError, "lr must be finite"),
        (lambda: one_step_from_uniform(torch.zeros(5, 3), (0, 9), 1.0), ValueError, "pair"),
        (
            lambda: empirical_gradient(torch.zeros(2, 3), torch.zeros(5, 3), torch.ones(4, 5), torch.ones(3)),
            ValueError,
            "one label per row",
        ),
        (
            lambda: empirical_gradient(
                torch.zeros(2, 3), torch.ones(5, 3), torch.full((4, 5), float("nan")), torch.ones(4)
            ),
            ValueError,
            "x must contain only finite values",
        ),
        (
            lambda: empirical_gradient(
                torch.zeros(2, 3), torch.ones(5, 3), torch.ones(4, 5), torch.tensor([1.0, float("inf"), 1.0, 1.0])
            ),
            ValueError,
            "y must contain only finite values",
        ),
        (
            lambda: empirical_gradient(torch.zeros(3, 2, 4), torch.ones(5, 4), torch.ones(3, 5), torch.ones(3)),
            ValueError,
            "queries must have 2 dimensions",
        ),
        (lambda: exhaustive_losses(torch.ones(2, 30) / 30, (0, 1)), ValueError, "d must be <= 22"),
        (lambda: worst_case_loss(torch.ones(2, 5), (0, 1), "sum"), ValueError, "readout must be one of"),
        (lambda: lr_for_sharpness(-1.0, 10), ValueError, "kappa must be >= 0"),
        (lambda: sharpness(1.0, 10, attention="hard"), ValueError, "attention must be one of"),
    ],
)
def test_bad_input_raises_clear_errors(call, error, text) -> None:
    with pytest.raises(error, match=text):
        call()
