r"""The attention normalisers, one class each: the weights :math:`\alpha = \mathrm{norm}(s)` and their pull-back.

A new normaliser is a class here with ``weights`` and ``pullback``, and its name in :data:`NORMALISERS`;
:class:`xorlib.model.ModelConfig` resolves its ``attention`` string to one of these once, where the config
is made, and every formula of the core then calls ``config.normaliser``. Both methods trust their callers.
"""

from __future__ import annotations

import math
from typing import Literal

import torch


class Softmax:
    r"""Exact softmax attention :math:`\alpha_k = e^{s_k}/\sum_l e^{s_l}`; pull-back :math:`\alpha\odot(g - \langle\alpha, g\rangle)`."""

    name = "softmax"

    def weights(self, scores: torch.Tensor) -> torch.Tensor:
        return torch.softmax(scores, dim=-1)

    def pullback(self, scores: torch.Tensor, weights: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
        return weights * (grad - (weights * grad).sum(-1, keepdim=True))


class Linear:
    r"""Linear (unnormalised bilinear) attention :math:`\alpha_k = s_k / d`; pull-back :math:`g/d`."""

    name = "linear"

    def weights(self, scores: torch.Tensor) -> torch.Tensor:
        return scores / scores.shape[-1]

    def pullback(self, scores: torch.Tensor, weights: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
        return grad / scores.shape[-1]


class ReLU:
    r"""ReLU attention :math:`\alpha_k = \max(s_k, 0)/d` (Wortsman et al., 2023); pull-back :math:`\mathbb 1[s > 0]\, g/d`."""

    name = "relu"

    def weights(self, scores: torch.Tensor) -> torch.Tensor:
        return torch.relu(scores) / scores.shape[-1]

    def pullback(self, scores: torch.Tensor, weights: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
        return (scores > 0).to(grad.dtype) * grad / scores.shape[-1]


class Sigmoid:
    r"""Sigmoid attention :math:`\alpha_k = \sigma(s_k - \ln d)` (Ramapuram et al., 2024); pull-back :math:`\alpha(1-\alpha)\, g`."""

    name = "sigmoid"

    def weights(self, scores: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(scores - math.log(scores.shape[-1]))

    def pullback(self, scores: torch.Tensor, weights: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
        return weights * (1.0 - weights) * grad


class Componentwise:
    r"""The exponential of each score, no normaliser: :math:`\alpha_k = e^{s_k}/d`; pull-back :math:`\alpha\odot g`.

    Refuses (``ValueError``) scores whose :math:`e^s` would overflow the dtype, instead of infinite weights.
    """

    name = "componentwise"

    def weights(self, scores: torch.Tensor) -> torch.Tensor:
        d = scores.shape[-1]
        limit = math.log(torch.finfo(scores.dtype).max / d)
        if scores.numel() and float(scores.detach().max()) > limit:
            raise ValueError(
                f"scores must stay below {limit:.1f} for componentwise attention in {scores.dtype} "
                f"(e^s overflows), got a maximum score of {float(scores.max()):.4g}"
            )
        return torch.exp(scores) / d

    def pullback(self, scores: torch.Tensor, weights: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
        return weights * grad


#: The names of the normalisers, as :class:`xorlib.model.ModelConfig` takes them.
AttentionKind = Literal["softmax", "linear", "relu", "sigmoid", "componentwise"]
#: Every normaliser by name.
NORMALISERS = {kind.name: kind() for kind in (Softmax, Linear, ReLU, Sigmoid, Componentwise)}
assert tuple(NORMALISERS) == AttentionKind.__args__  # one list of names
