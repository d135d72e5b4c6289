r"""Attention normalisers: how a head turns its scores :math:`s \in \mathbb{R}^d` into weights.

A head scores position :math:`k` by :math:`s_k = \langle q, p_k\rangle` and uses
the weights :math:`\alpha = \mathrm{norm}(s)`. The standard forms of the
literature:

* ``"softmax"``: :math:`\alpha_k = e^{s_k}/\sum_l e^{s_l}`, exact softmax attention;
* ``"linear"``: :math:`\alpha_k = s_k / d`, linear (unnormalised bilinear) attention;
* ``"relu"``: :math:`\alpha_k = \max(s_k, 0)/d`, ReLU attention (Wortsman et al., 2023);
* ``"sigmoid"``: :math:`\alpha_k = \sigma(s_k - \ln d)`, sigmoid attention (Ramapuram et al., 2024);
* ``"componentwise"``: :math:`\alpha_k = e^{s_k}/d`, the exponential of each score, no normaliser.

Only softmax couples the positions: raising the hidden scores lowers every
other weight, whatever their scale. The element-wise forms must make each of
the :math:`d - 2` other weights small on its own. At :math:`s = 0` softmax,
sigmoid and componentwise attention are (close to) uniform, while linear and
ReLU attention give every position weight zero.
"""

from __future__ import annotations

import math

import torch

from ._checks import check_choice, check_tensor

__all__ = ["ATTENTION_KINDS", "attention_weights"]

ATTENTION_KINDS = ("softmax", "linear", "relu", "sigmoid", "componentwise")


def attention_weights(scores: torch.Tensor, kind: str = "softmax") -> torch.Tensor:
    r"""Weights :math:`\alpha = \mathrm{norm}(s)` along the last axis of ``scores`` (shape ``(..., d)``).

    Raises
    ------
    ValueError
        For componentwise attention, if :math:`e^{s}` overflows the dtype,
        instead of returning infinite weights.
    """
    kind = check_choice("kind", kind, ATTENTION_KINDS)
    scores = check_tensor("scores", scores, ndim=(1, 2, 3))
    return _weights(scores, kind)


def _weights(scores: torch.Tensor, kind: str) -> torch.Tensor:
    d = scores.shape[-1]
    if kind == "softmax":
        return torch.softmax(scores, dim=-1)
    if kind == "linear":
        return scores / d
    if kind == "relu":
        return torch.relu(scores) / d
    if kind == "sigmoid":
        return torch.sigmoid(scores - math.log(d))
    limit = math.log(torch.finfo(scores.dtype).max / d)
    if scores.numel() and float(scores.detach().max()) > limit:
        raise ValueError(
            f"scores must stay below {limit:.1f} for componentwise attention in {scores.dtype} "
            f"(e^s overflows), got a maximum score of {float(scores.max()):.4g}"
        )
    return torch.exp(scores) / d


def _scores_vjp(scores: torch.Tensor, weights: torch.Tensor, grad: torch.Tensor, kind: str) -> torch.Tensor:
    r"""Pull a gradient back from the weights to the scores, :math:`(\partial\alpha/\partial s)^\top g`, in :math:`O(d)`.

    softmax :math:`\alpha\odot(g - \langle\alpha, g\rangle)`; linear :math:`g/d`;
    ReLU :math:`\mathbb 1[s > 0]\, g/d`; sigmoid :math:`\alpha(1-\alpha)\, g`;
    componentwise :math:`\alpha\odot g`.
    """
    if kind == "softmax":
        return weights * (grad - (weights * grad).sum(-1, keepdim=True))
    if kind == "linear":
        return grad / scores.shape[-1]
    if kind == "relu":
        return (scores > 0).to(grad.dtype) * grad / scores.shape[-1]
    if kind == "sigmoid":
        return weights * (1.0 - weights) * grad
    return weights * grad
