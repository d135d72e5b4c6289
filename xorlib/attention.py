r"""Attention normalisers: how a head turns scores into weights over positions.

A head scores position :math:`i` by :math:`s_i = \langle q, p_i \rangle` and
turns the score vector :math:`s \in \mathbb{R}^d` into weights
:math:`\alpha \in \mathbb{R}^d`. Every variant gives uniform weights
:math:`\alpha_i = 1/d` at :math:`s = 0`, so all start from the same model:

========================  =====================================================
``"softmax"``             :math:`\alpha_i = e^{s_i} / \sum_k e^{s_k}` (exact softmax)
``"linear"``              :math:`\alpha_i = (1 + s_i)/d` (softmax linearised at 0, no normaliser)
``"componentwise"``       :math:`\alpha_i = e^{s_i}/d` (each weight from its own score)
``"sigmoid"``             :math:`\alpha_i = 2\sigma(s_i)/d` (element-wise sigmoid attention)
========================  =====================================================

Only softmax couples the positions: raising the relevant scores lowers every
other weight, whatever the scale. The element-wise variants must make each
irrelevant weight small on its own, which is what costs them code dimension.
"""

from __future__ import annotations

import math

import torch

from ._validate import check_choice, check_tensor

__all__ = ["ATTENTION_KINDS", "attention_weights", "scores_vjp"]

ATTENTION_KINDS = ("softmax", "linear", "componentwise", "sigmoid")


def attention_weights(scores: torch.Tensor, kind: str = "softmax") -> torch.Tensor:
    r"""Weights :math:`\alpha = \mathrm{norm}(s)` along the last axis of ``scores``.

    Parameters
    ----------
    scores
        Tensor of shape ``(..., d)``.
    kind
        One of :data:`ATTENTION_KINDS`.

    Raises
    ------
    ValueError
        If an element-wise exponential overflows (scores above about 700 in
        float64), instead of returning infinite weights.
    """
    kind = check_choice("kind", kind, ATTENTION_KINDS)
    scores = check_tensor("scores", scores, ndim=(1, 2, 3))
    d = scores.shape[-1]
    if kind == "softmax":
        return torch.softmax(scores, dim=-1)
    if kind == "linear":
        return (1.0 + scores) / d
    if kind == "sigmoid":
        return 2.0 * torch.sigmoid(scores) / d
    weights = torch.exp(scores) / d
    if not bool(torch.isfinite(weights).all()):
        limit = math.log(torch.finfo(scores.dtype).max)
        raise ValueError(
            f"scores must stay below {limit:.1f} for componentwise attention in {scores.dtype}, "
            f"got a maximum score of {float(scores.max()):.4g}"
        )
    return weights


def scores_vjp(scores: torch.Tensor, weights: torch.Tensor, grad_weights: torch.Tensor, kind: str) -> torch.Tensor:
    r"""Pull a gradient back from the weights to the scores: :math:`(\partial\alpha/\partial s)^\top g`.

    * softmax: :math:`\alpha \odot (g - \langle \alpha, g\rangle)`;
    * linear: :math:`g/d`;
    * componentwise: :math:`\alpha \odot g`;
    * sigmoid: :math:`\alpha \odot (1 - \sigma(s)) \odot g`.

    All three tensors have shape ``(..., d)``; this costs :math:`O(d)` per
    head and never forms the :math:`d \times d` Jacobian.
    """
    kind = check_choice("kind", kind, ATTENTION_KINDS)
    if kind == "softmax":
        return weights * (grad_weights - (weights * grad_weights).sum(-1, keepdim=True))
    if kind == "linear":
        return grad_weights / scores.shape[-1]
    if kind == "sigmoid":
        return weights * (1.0 - torch.sigmoid(scores)) * grad_weights
    return weights * grad_weights
