r"""Attention normalisers: how a head turns its scores :math:`s \in \mathbb{R}^d` into weights.

A head scores position :math:`k` by :math:`s_k = \langle q, p_k\rangle` and uses
the weights :math:`\alpha = \mathrm{norm}(s)`. The standard forms of the
literature (``ModelConfig(attention=...)``):

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

from typing import Annotated

import torch

from ._checks import check_tensor
from ._contract import Array, public
from .model import ModelConfig

__all__ = ["attention_weights"]


@public
def attention_weights(model: ModelConfig, scores: Annotated[torch.Tensor, Array(ndim=(1, 2, 3))]) -> torch.Tensor:
    r"""The weights :math:`\alpha = \mathrm{norm}(s)` of the model's normaliser along the last axis of ``scores`` ``(..., d)``.

    Raises
    ------
    ValueError
        For componentwise attention, if :math:`e^{s}` overflows the dtype,
        instead of returning infinite weights.

    Examples
    --------
    >>> attention_weights(ModelConfig(4, attention="relu"), torch.tensor([2.0, -1.0, 0.0, 4.0]))
    tensor([0.5000, 0.0000, 0.0000, 1.0000])
    """
    scores = check_tensor("scores", scores, ndim=(1, 2, 3), shape={-1: model.d})
    return model.normaliser.weights(scores)
