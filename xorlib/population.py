r"""The population loss and its gradient, exactly, in closed form and :math:`O(dm)` time.

The head outputs :math:`z_h = \sum_k \alpha_{h,k} x_k` are linear in :math:`x` and
:math:`f = c_0 - c_1 z_1 z_2` is quadratic in them, so averages over uniform
:math:`x \in \{\pm1\}^d` reduce to the moments :math:`\mathbb{E}[x_k x_l] = \delta_{kl}` and

.. math::

    \mathbb{E}[x_k x_l x_r x_s] &= \delta_{kl}\delta_{rs} + \delta_{kr}\delta_{ls} \\
        &\quad + \delta_{ks}\delta_{lr} - 2\,\delta_{klrs}.

With :math:`a = \alpha_1`, :math:`b = \alpha_2` and the hidden pair :math:`(u, v)`:
:math:`\mathbb{E}[z_1z_2] = \langle a, b\rangle`, :math:`\mathbb{E}[y z_1 z_2] = -(a_u b_v + a_v b_u)` and
:math:`M_4 = \mathbb{E}[z_1^2 z_2^2] = \|a\|^2\|b\|^2 + 2\langle a,b\rangle^2 - 2\sum_k a_k^2 b_k^2`, so

.. math::

    L &= \tfrac12\bigl[c_0^2 + 1 + c_1^2 M_4 \\
      &\qquad - 2c_1\bigl(c_0\langle a,b\rangle + a_u b_v + a_v b_u\bigr)\bigr],

.. math::

    \frac{\partial L}{\partial a_j} &= -c_1\bigl(c_0 b_j + \delta_{ju} b_v + \delta_{jv} b_u\bigr) \\
        &\quad + c_1^2\bigl(a_j\|b\|^2 + 2\langle a,b\rangle b_j \\
        &\qquad - 2 a_j b_j^2\bigr)

(swap :math:`a` and :math:`b` for head 2). The chain rule through the
normaliser and the codes (:math:`\partial s_{h,k}/\partial q_h = p_k`) gives the
gradient in the queries. The pieces are written on blocks of positions plus a
few global scalars (:mod:`xorlib._moments`), so that the one step streams them
over :math:`d = 10^8` positions with the same formulas.
"""

from __future__ import annotations

from typing import Annotated

import torch

from ._checks import check_pair, check_tensor
from ._contract import Array, Pair, public
from ._moments import Objective, dense_codes, population_objective
from .model import ModelConfig

__all__ = ["population"]


@public
def population(
    model: ModelConfig,
    queries: Annotated[torch.Tensor, Array(ndim=(2, 3))],
    pair: Pair,
    *,
    codes: Annotated[torch.Tensor, Array(ndim=(2,))] | None = None,
) -> Objective:
    r"""The population loss :math:`L = \mathbb{E}_x[\ell]` at queries ``(..., 2, m)`` and its gradients, exactly, in :math:`O(dm)`.

    Parameters
    ----------
    model
        The model: its readout, its normaliser and (unless ``codes`` is given) its codes.
    queries
        Both heads' queries, shape ``(2, m)`` or a batch ``(B, 2, m)``.
    pair
        The hidden pair.
    codes
        Dense codes ``(d, m)`` to use instead of the model's own (e.g. hand-made ones).

    Returns
    -------
    Objective
        ``loss`` (shape ``(...)``), ``score_gradient`` :math:`\partial L/\partial s_{h,k}` (``(..., 2, d)``) and
        ``gradient`` :math:`\nabla_q L = P^\top\,\partial L/\partial s` (``(..., 2, m)``). The loss keeps
        autograd's graph when ``queries`` requires gradients. At uniform softmax attention (zero queries)
        the score gradient is :math:`-\tfrac{c_1}{d^2}\bigl(\mathbb 1[k \in \{u, v\}] - \tfrac2d\bigr)` for both heads.

    Examples
    --------
    >>> model = ModelConfig(40, "tied")
    >>> step = population(model, torch.zeros(2, model.m, dtype=torch.float64), (4, 9))
    >>> round(float(step.loss), 6), step.score_gradient.shape, step.gradient.shape
    (0.951187, torch.Size([2, 40]), torch.Size([2, 22]))
    """
    queries = check_tensor("queries", queries, ndim=(2, 3), shape={-2: 2, -1: model.m})
    pair = check_pair("pair", pair, model.d)
    dense = dense_codes(model, codes, queries)
    loss, score_gradient = population_objective(queries @ dense.T, pair, model.readout, model.normaliser)
    return Objective(loss=loss, score_gradient=score_gradient, gradient=score_gradient @ dense)
