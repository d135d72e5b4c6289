"""Closed-form population and empirical losses and gradients = autograd = enumeration of all 2^d inputs."""

from __future__ import annotations

import pytest
import torch
from _tolerance import assert_close

from xorlib.attention import attention_weights
from xorlib.codes import Codes
from xorlib.empirical import empirical
from xorlib.model import ModelConfig, TwoHeadModel
from xorlib.population import population
from xorlib.task import all_inputs, sample_xor, xor_labels

KINDS = ("softmax", "linear", "relu", "sigmoid", "componentwise")


def _enumerated(model: ModelConfig, queries: torch.Tensor, codes: torch.Tensor, pair) -> torch.Tensor:
    c0, c1 = (1.0, 2.0) if model.heads == "tied" else (0.0, 1.0)  # written out: the test does not trust readout
    x = all_inputs(codes.shape[0])
    z = x @ attention_weights(model, queries @ codes.T).T
    return (0.5 * (c0 - c1 * z[:, 0] * z[:, 1] - xor_labels(x, pair)) ** 2).mean()


def _scale(model: ModelConfig, queries: torch.Tensor, codes: torch.Tensor) -> float:
    """The size of the loss's terms: every term of f - y is at most 1 + c0 + c1 (sum |alpha|)^2 in magnitude."""
    total = attention_weights(model, queries.detach() @ codes.T).abs().sum(-1).max()
    return float((1 + model.readout[0] + model.readout[1] * total**2) ** 2)


@pytest.mark.parametrize("heads", ["tied", "split"])
@pytest.mark.parametrize("attention", KINDS)
@pytest.mark.parametrize("d", [5, 9, 14])
def test_closed_form_equals_autograd_equals_enumeration(heads: str, attention: str, d: int) -> None:
    m = {5: 5, 9: 7, 14: 6}[d]
    model = ModelConfig(d, heads, m=m, attention=attention, code_seed=d)
    codes = model.codes.dense()
    pair = (1, d - 2)
    q = (0.7 * torch.randn(2, m, dtype=torch.float64, generator=torch.Generator().manual_seed(d))).requires_grad_()
    enumerated = _enumerated(model, q, codes, pair)
    (autograd,) = torch.autograd.grad(enumerated, q)
    step = population(model, q.detach(), pair)
    # A mean over 2^d inputs of terms of size `scale`, each from sums over d positions and m coordinates.
    work, scale = 2**d + 4 * d * m, _scale(model, q, codes)
    assert_close(step.loss, enumerated.detach(), operations=work, scale=scale)
    assert_close(step.gradient, autograd, operations=work, scale=scale * float(codes.abs().sum(0).max()))


def test_the_split_model_at_an_antisymmetric_start_matches_autograd_through_the_module() -> None:
    config = ModelConfig(12, "split", m=7, sigma=1.5, init_seed=4)
    model = TwoHeadModel(config)
    assert torch.equal(model.queries[1], -model.queries[0])
    x = all_inputs(12)
    loss = (0.5 * (model(x) - xor_labels(x, (3, 8))) ** 2).mean()
    loss.backward()
    closed = population(config, model.queries.detach(), (3, 8)).gradient
    scale = float(model.codes.abs().sum(0).max())  # |f - y| <= 2, |z| <= 1, softmax pull-back of unit codes
    assert_close(closed, model.queries.grad, operations=2**12 + 4 * 12 * 7, scale=4 * scale)


def test_uniform_attention_gradient_has_the_closed_form_of_the_tied_theorem() -> None:
    d = 40
    model = ModelConfig(d, "tied")
    zero = torch.zeros(2, model.m, dtype=torch.float64)
    grad = population(model, zero, (4, 9)).score_gradient
    expected = -(2.0 / d**2) * (torch.isin(torch.arange(d), torch.tensor([4, 9])).double() - 2.0 / d)
    # The moments are sums over d weights 1/d; the gradient entries are of size c1^2 / d^2.
    assert_close(grad[0], expected, operations=4 * d, scale=4.0 / d**2)
    assert torch.equal(grad[0], grad[1])


def test_batched_queries() -> None:
    model = ModelConfig(10, m=7, code_seed=1)
    q = torch.randn(5, 2, 7, dtype=torch.float64)
    batched = population(model, q, (0, 3)).gradient
    single = torch.stack([population(model, qi, (0, 3)).gradient for qi in q])
    assert_close(batched, single, operations=4 * 10 * 7, scale=float(batched.abs().max()) + 1.0)


def test_explicit_codes_are_the_models_own_by_default() -> None:
    model = ModelConfig(10, "tied", m=7, code_seed=1)
    q = torch.randn(2, 7, dtype=torch.float64)
    own = population(model, q, (0, 3))
    given = population(model, q, (0, 3), codes=Codes(10, 7, seed=1).dense())
    assert torch.equal(own.gradient, given.gradient) and torch.equal(own.loss, given.loss)


@pytest.mark.parametrize("heads", ["tied", "split"])
@pytest.mark.parametrize("attention", ["softmax", "relu"])
def test_empirical_gradient_equals_autograd(heads: str, attention: str) -> None:
    d, n = 300, 4000
    model = ModelConfig(d, heads, attention=attention, code_seed=2)
    codes = model.codes.dense()
    pair = (10, 200)
    x, y = sample_xor(n, d, pair, seed=1)
    q = torch.randn(2, model.m, dtype=torch.float64).requires_grad_()
    c0, c1 = model.readout
    z = x @ attention_weights(model, q @ codes.T).T
    loss = (0.5 * (c0 - c1 * z[:, 0] * z[:, 1] - y) ** 2).mean()
    (autograd,) = torch.autograd.grad(loss, q)
    step = empirical(model, q.detach(), x, y)
    scale = _scale(model, q, codes)
    work = n + 2 * d + model.m  # a mean over n samples of products of sums over d positions
    assert_close(step.loss, loss.detach(), operations=work, scale=scale)
    assert_close(step.gradient, autograd, operations=work, scale=scale * float(codes.abs().sum(0).max()))
    assert torch.equal(step.score_gradient @ codes, step.gradient)


def test_mixed_and_bad_tensors_are_refused_clearly() -> None:
    model = ModelConfig(10, m=7)
    q = torch.zeros(2, 7, dtype=torch.float64)
    with pytest.raises(TypeError, match="codes must have dtype torch.float64"):
        population(model, q, (0, 1), codes=model.codes.dense().float())
    with pytest.raises(TypeError, match="queries must be a floating tensor"):
        population(model, q.long(), (0, 1))
    with pytest.raises(ValueError, match="queries must contain only finite"):
        population(model, q + float("nan"), (0, 1))
    with pytest.raises(ValueError, match="size 2 along axis -2"):
        population(model, torch.zeros(3, 7, dtype=torch.float64), (0, 1))
    with pytest.raises(ValueError, match="size 7 along axis -1"):
        population(model, torch.zeros(2, 6, dtype=torch.float64), (0, 1))
    with pytest.raises(ValueError, match="pair\\[1\\] must be"):
        population(model, q, (0, 10))
    x, y = sample_xor(20, 10, (0, 1))
    with pytest.raises(TypeError, match="x must be a floating tensor"):
        empirical(model, q, x.to(torch.int8), y)
    with pytest.raises(ValueError, match="y must have size 20"):
        empirical(model, q, x, y[:5])
    with pytest.raises(ValueError, match="meta"):
        population(model, torch.empty(2, 7, dtype=torch.float64, device="meta"), (0, 1))
