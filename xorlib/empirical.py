r"""The loss and its gradient on a finite sample, in closed form: two passes over the data.

With head outputs :math:`z_{h,s} = \langle \alpha_h, x_s\rangle` and residuals
:math:`r_s = f(x_s) - y_s`, the gradient of the mean loss in the weights of head 1 is

.. math:: \frac{\partial \hat L}{\partial \alpha_1} = -\frac{c_1}{n}\sum_{s=1}^n r_s\, z_{2,s}\, x_s

(swap the heads for head 2), then the normaliser's pull-back and :math:`P^\top`.
The forward pass is a ``(2, d) @ (d, n)`` product and the backward pass a
``(2, n) @ (n, d)`` product: the :math:`n \times d \times m` tensor of
per-sample gradients is never formed.
"""

from __future__ import annotations

import torch

from ._checks import check_choice, check_signs, check_tensor
from .attention import ATTENTION_KINDS, _scores_vjp, _weights
from .model import HEADS, readout_constants

__all__ = ["empirical_gradient", "empirical_loss", "empirical_score_gradient"]


def _check(queries, codes, x, y, heads, attention):
    queries = check_tensor("queries", queries, ndim=2, shape={0: 2})
    codes = check_tensor(
        "codes", codes, ndim=2, shape={1: queries.shape[1]}, dtype=queries.dtype, device=queries.device
    )
    x = check_signs(
        "x", check_tensor("x", x, ndim=2, shape={1: codes.shape[0]}, dtype=codes.dtype, device=codes.device)
    )
    y = check_signs("y", check_tensor("y", y, ndim=1, shape={0: x.shape[0]}, dtype=codes.dtype, device=codes.device))
    return (
        queries,
        codes,
        x,
        y,
        check_choice("heads", heads, HEADS),
        check_choice("attention", attention, ATTENTION_KINDS),
    )


def _score_gradient(scores: torch.Tensor, x: torch.Tensor, y: torch.Tensor, heads: str, attention: str) -> torch.Tensor:
    """``d(mean loss)/ds``, shape ``(2, d)``, for validated scores ``(2, d)`` and samples."""
    c0, c1 = readout_constants(heads)
    weights = _weights(scores, attention)
    z = weights @ x.T  # (2, n): the forward pass
    residual = c0 - c1 * z[0] * z[1] - y
    pull = (-c1 / x.shape[0]) * residual * z.flip(0)  # head 1 is pulled by z_2, head 2 by z_1
    return _scores_vjp(scores, weights, pull @ x, attention)  # the backward pass


def empirical_loss(
    queries: torch.Tensor,
    codes: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    heads: str = "split",
    attention: str = "softmax",
) -> torch.Tensor:
    r"""The mean loss :math:`\frac1n\sum_s \tfrac12 (f(x_s) - y_s)^2` at queries ``(2, m)`` on samples ``x`` ``(n, d)``, ``y`` ``(n,)``."""
    queries, codes, x, y, heads, attention = _check(queries, codes, x, y, heads, attention)
    c0, c1 = readout_constants(heads)
    z = _weights(queries @ codes.T, attention) @ x.T
    return 0.5 * ((c0 - c1 * z[0] * z[1] - y) ** 2).mean()


def empirical_score_gradient(
    queries: torch.Tensor,
    codes: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    heads: str = "split",
    attention: str = "softmax",
) -> torch.Tensor:
    r"""The gradient of the mean loss in the scores, :math:`\partial \hat L/\partial s_{h,k}`, shape ``(2, d)``."""
    queries, codes, x, y, heads, attention = _check(queries, codes, x, y, heads, attention)
    return _score_gradient(queries @ codes.T, x, y, heads, attention)


def empirical_gradient(
    queries: torch.Tensor,
    codes: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    heads: str = "split",
    attention: str = "softmax",
) -> torch.Tensor:
    r"""The gradient of the mean loss in the queries, :math:`P^\top\,\partial\hat L/\partial s`, shape ``(2, m)``, cost :math:`O(nd + dm)`."""
    queries, codes, x, y, heads, attention = _check(queries, codes, x, y, heads, attention)
    return _score_gradient(queries @ codes.T, x, y, heads, attention) @ codes
