"""Tests of xorlib.attention: every normaliser starts uniform; the VJP matches autograd."""

from __future__ import annotations

import pytest
import torch

from xorlib.attention import ATTENTION_KINDS, attention_weights, scores_vjp


@pytest.mark.parametrize("kind", ATTENTION_KINDS)
def test_zero_scores_give_uniform_weights(kind: str) -> None:
    weights = attention_weights(torch.zeros(2, 9, dtype=torch.float64), kind)
    assert torch.allclose(weights, torch.full((2, 9), 1 / 9, dtype=torch.float64))


def test_softmax_is_a_probability_vector_and_elementwise_kinds_are_not_normalised() -> None:
    scores = torch.randn(3, 2, 50, dtype=torch.float64) * 3
    soft = attention_weights(scores, "softmax")
    assert torch.allclose(soft.sum(-1), torch.ones(3, 2, dtype=torch.float64))
    assert (soft > 0).all()
    assert not torch.allclose(attention_weights(scores, "componentwise").sum(-1), torch.ones(3, 2, dtype=torch.float64))
    # Element-wise weights depend on their own score only.
    bumped = scores.clone()
    bumped[..., 0] += 1.0
    for kind in ("linear", "componentwise", "sigmoid"):
        assert torch.equal(attention_weights(bumped, kind)[..., 1:], attention_weights(scores, kind)[..., 1:])


def test_sigmoid_weights_are_bounded_by_two_over_d() -> None:
    weights = attention_weights(torch.full((2, 10), 50.0, dtype=torch.float64), "sigmoid")
    assert float(weights.max()) <= 2 / 10


@pytest.mark.parametrize("kind", ATTENTION_KINDS)
def test_scores_vjp_matches_autograd(kind: str) -> None:
    scores = (torch.randn(2, 17, dtype=torch.float64) * 2).requires_grad_()
    upstream = torch.randn(2, 17, dtype=torch.float64)
    weights = attention_weights(scores, kind)
    (grad,) = torch.autograd.grad(weights, scores, upstream)
    closed = scores_vjp(scores.detach(), weights.detach(), upstream, kind)
    assert torch.allclose(grad, closed, atol=1e-14)


def test_bad_input_raises_clear_errors() -> None:
    with pytest.raises(ValueError, match="kind must be one of"):
        attention_weights(torch.zeros(3), "hardmax")
    with pytest.raises(TypeError, match="scores must be a torch.Tensor"):
        attention_weights([0.0, 1.0])
    with pytest.raises(ValueError, match="finite"):
        attention_weights(torch.tensor([0.0, float("nan")]))
    with pytest.raises(ValueError, match=r"scores must stay below 709\.8"):
        attention_weights(torch.tensor([0.0, 800.0], dtype=torch.float64), "componentwise")
