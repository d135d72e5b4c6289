"""Closed-form population and empirical losses and gradients = autograd = enumeration of all 2^d inputs."""

from __future__ import annotations

import pytest
import torch

from xorlib.attention import ATTENTION_KINDS, attention_weights
from xorlib.codes import Codes
from xorlib.empirical import empirical_gradient, empirical_loss, empirical_score_gradient
from xorlib.model import ModelConfig, TwoHeadModel
from xorlib.population import population_gradient, population_loss, population_score_gradient
from xorlib.task import all_inputs, sample_xor, xor_labels


def _enumerated(queries: torch.Tensor, codes: torch.Tensor, pair, heads: str, attention: str) -> torch.Tensor:
    c0, c1 = (1.0, 2.0) if heads == "tied" else (0.0, 1.0)
    x = all_inputs(codes.shape[0])
    z = x @ attention_weights(queries @ codes.T, attention).T
    return (0.5 * (c0 - c1 * z[:, 0] * z[:, 1] - xor_labels(x, pair)) ** 2).mean()


@pytest.mark.parametrize("heads", ["tied", "split"])
@pytest.mark.parametrize("attention", ATTENTION_KINDS)
@pytest.mark.parametrize("d", [5, 9, 14])
def test_closed_form_equals_autograd_equals_enumeration(heads: str, attention: str, d: int) -> None:
    codes = Codes(d, {5: 5, 9: 7, 14: 6}[d], seed=d).dense()
    pair = (1, d - 2)
    q = (
        0.7 * torch.randn(2, codes.shape[1], dtype=torch.float64, generator=torch.Generator().manual_seed(d))
    ).requires_grad_()
    enumerated = _enumerated(q, codes, pair, heads, attention)
    (autograd,) = torch.autograd.grad(enumerated, q)
    closed = population_loss(q.detach(), codes, pair, heads=heads, attention=attention)
    gradient = population_gradient(q.detach(), codes, pair, heads=heads, attention=attention)
    assert abs(float(closed - enumerated.detach())) < 1e-13
    assert torch.allclose(gradient, autograd, rtol=1e-10, atol=1e-14)


def test_the_split_model_at_an_antisymmetric_start_matches_autograd_through_the_module() -> None:
    config = ModelConfig(12, "split", m=7, sigma=1.5, init_seed=4)
    model = TwoHeadModel(config)
    assert torch.equal(model.queries[1], -model.queries[0])
    x = all_inputs(12)
    loss = (0.5 * (model(x) - xor_labels(x, (3, 8))) ** 2).mean()
    loss.backward()
    closed = population_gradient(model.queries.detach(), model.codes, (3, 8), heads="split")
    assert torch.allclose(closed, model.queries.grad, rtol=1e-10, atol=1e-15)


def test_uniform_attention_gradient_has_the_closed_form_of_the_tied_theorem() -> None:
    d = 40
    codes = Codes(d, seed=0).dense()
    zero = torch.zeros(2, codes.shape[1], dtype=torch.float64)
    grad = population_score_gradient(zero, codes, (4, 9), heads="tied")
    expected = -(2.0 / d**2) * (torch.isin(torch.arange(d), torch.tensor([4, 9])).double() - 2.0 / d)
    assert torch.allclose(grad[0], expected, atol=1e-17) and torch.equal(grad[0], grad[1])


def test_batched_queries() -> None:
    codes = Codes(10, 7, seed=1).dense()
    q = torch.randn(5, 2, 7, dtype=torch.float64)
    batched = population_gradient(q, codes, (0, 3))
    single = torch.stack([population_gradient(qi, codes, (0, 3)) for qi in q])
    assert torch.allclose(batched, single, atol=1e-15)


@pytest.mark.parametrize("heads", ["tied", "split"])
@pytest.mark.parametrize("attention", ["softmax", "relu"])
def test_empirical_gradient_equals_autograd(heads: str, attention: str) -> None:
    d, n = 300, 4000
    codes = Codes(d, seed=2).dense()
    pair = (10, 200)
    x, y = sample_xor(n, d, pair, seed=1)
    q = torch.randn(2, codes.shape[1], dtype=torch.float64).requires_grad_()
    c0, c1 = (1.0, 2.0) if heads == "tied" else (0.0, 1.0)
    z = x @ attention_weights(q @ codes.T, attention).T
    loss = (0.5 * (c0 - c1 * z[:, 0] * z[:, 1] - y) ** 2).mean()
    (autograd,) = torch.autograd.grad(loss, q)
    assert abs(float(empirical_loss(q.detach(), codes, x, y, heads=heads, attention=attention) - loss)) < 1e-13
    got = empirical_gradient(q.detach(), codes, x, y, heads=heads, attention=attention)
    assert torch.allclose(got, autograd, rtol=1e-9, atol=1e-15)
    scores = empirical_score_gradient(q.detach(), codes, x, y, heads=heads, attention=attention)
    assert torch.allclose(scores @ codes, got, atol=1e-15)


def test_mixed_and_bad_tensors_are_refused_clearly() -> None:
    codes = Codes(10, 7).dense()
    q = torch.zeros(2, 7, dtype=torch.float64)
    with pytest.raises(TypeError, match="codes must have dtype torch.float64"):
        population_loss(q, codes.float(), (0, 1))
    with pytest.raises(TypeError, match="queries must be a floating tensor"):
        population_loss(q.long(), codes, (0, 1))
    with pytest.raises(ValueError, match="queries must contain only finite"):
        population_loss(q + float("nan"), codes, (0, 1))
    with pytest.raises(ValueError, match="heads must be one of"):
        population_loss(q, codes, (0, 1), heads="three")
    with pytest.raises(ValueError, match="attention must be one of"):
        population_loss(q, codes, (0, 1), attention="foo")
    with pytest.raises(ValueError, match="size 2 along axis -2"):
        population_loss(torch.zeros(3, 7, dtype=torch.float64), codes, (0, 1))
    x, y = sample_xor(20, 10, (0, 1))
    with pytest.raises(TypeError, match="x must be a floating tensor"):
        empirical_gradient(q, codes, x.to(torch.int8), y)
    with pytest.raises(ValueError, match="y must have size 20"):
        empirical_gradient(q, codes, x, y[:5])
