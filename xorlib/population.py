r"""The population loss and its gradient, exactly, in closed form and :math:`O(dm)` time.

The head outputs :math:`z_h = \sum_k \alpha_{h,k} x_k` are linear in :math:`x` and
:math:`f = c_0 - c_1 z_1 z_2` is quadratic in them, so averages over uniform
:math:`x \in \{\pm1\}^d` reduce to the moments :math:`\mathbb{E}[x_k x_l] = \delta_{kl}` and

.. math::

    \mathbb{E}[x_k x_l x_r x_s] = \delta_{kl}\delta_{rs} + \delta_{kr}\delta_{ls}
        + \delta_{ks}\delta_{lr} - 2\,\delta_{klrs}.

With :math:`a = \alpha_1`, :math:`b = \alpha_2` and the hidden pair :math:`(u, v)`:
:math:`\mathbb{E}[z_1z_2] = \langle a, b\rangle`, :math:`\mathbb{E}[y z_1 z_2] = -(a_u b_v + a_v b_u)` and
:math:`M_4 = \mathbb{E}[z_1^2 z_2^2] = \|a\|^2\|b\|^2 + 2\langle a,b\rangle^2 - 2\sum_k a_k^2 b_k^2`, so

.. math::

    L = \tfrac12\bigl[c_0^2 + 1 - 2c_1\bigl(c_0\langle a,b\rangle + a_u b_v + a_v b_u\bigr) + c_1^2 M_4\bigr],

    \frac{\partial L}{\partial a_j} = -c_1\bigl(c_0 b_j + \delta_{ju} b_v + \delta_{jv} b_u\bigr)
        + c_1^2\bigl(a_j\|b\|^2 + 2\langle a,b\rangle b_j - 2 a_j b_j^2\bigr)

(swap :math:`a` and :math:`b` for head 2). The chain rule through the
normaliser and the codes (:math:`\partial s_{h,k}/\partial q_h = p_k`) gives the
gradient in the queries. The pieces are written on blocks of positions plus a
few global scalars, so that :mod:`xorlib.one_step` streams them over
:math:`d = 10^8` positions with the same formulas.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from ._checks import check_choice, check_pair, check_tensor
from .attention import ATTENTION_KINDS, _scores_vjp, _weights
from .model import HEADS, readout_constants

__all__ = ["loss_of_weights", "population_gradient", "population_loss", "population_score_gradient"]


class Moments(NamedTuple):
    r"""The global scalars of two heads' weights :math:`a, b`, and their weights on the pair :math:`(u, v)`."""

    ab: torch.Tensor  # <a, b>
    aa: torch.Tensor  # |a|^2
    bb: torch.Tensor  # |b|^2
    a2b2: torch.Tensor  # sum_k a_k^2 b_k^2
    a_u: torch.Tensor
    a_v: torch.Tensor
    b_u: torch.Tensor
    b_v: torch.Tensor

    @staticmethod
    def of(a: torch.Tensor, b: torch.Tensor, pair: tuple[int, int]) -> Moments:
        """The moments of whole weight vectors ``(..., d)``."""
        u, v = pair
        return Moments(
            (a * b).sum(-1), (a * a).sum(-1), (b * b).sum(-1), (a * a * b * b).sum(-1),
            a[..., u], a[..., v], b[..., u], b[..., v],
        )  # fmt: skip

    def swapped(self) -> Moments:
        """The same moments with the heads exchanged."""
        return Moments(self.ab, self.bb, self.aa, self.a2b2, self.b_u, self.b_v, self.a_u, self.a_v)


def _loss(mom: Moments, c0: float, c1: float) -> torch.Tensor:
    m4 = mom.aa * mom.bb + 2 * mom.ab**2 - 2 * mom.a2b2
    cross = mom.a_u * mom.b_v + mom.a_v * mom.b_u
    return 0.5 * (c0**2 + 1 - 2 * c1 * (c0 * mom.ab + cross) + c1**2 * m4)


def _weight_gradient_dense(own: torch.Tensor, other: torch.Tensor, mom: Moments, c0: float, c1: float) -> torch.Tensor:
    r""":math:`\partial L/\partial a_j` without its two pair terms, for a block of positions (``mom`` of ``own``, ``other``)."""
    ab, other_sq = mom.ab.unsqueeze(-1), mom.bb.unsqueeze(-1)
    return c1**2 * (own * other_sq + 2 * ab * other - 2 * own * other**2) - c1 * c0 * other


def _mean_weight_gradient(mom: Moments, c0: float, c1: float) -> torch.Tensor:
    r""":math:`\langle a, \partial L/\partial a\rangle`, the centring term of the softmax pull-back, from the moments alone."""
    m4 = mom.aa * mom.bb + 2 * mom.ab**2 - 2 * mom.a2b2
    return c1**2 * m4 - c1 * c0 * mom.ab - c1 * (mom.a_u * mom.b_v + mom.a_v * mom.b_u)


def _pair_terms(mom: Moments, c1: float) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The label terms of :math:`\partial L/\partial a` at :math:`u` and :math:`v`: :math:`-c_1 b_v` and :math:`-c_1 b_u`."""
    return -c1 * mom.b_v, -c1 * mom.b_u


def _check(queries: object, codes: object, pair: object, heads: object, attention: object):
    queries = check_tensor("queries", queries, ndim=(2, 3), shape={-2: 2})
    codes = check_tensor(
        "codes", codes, ndim=2, shape={1: queries.shape[-1]}, dtype=queries.dtype, device=queries.device
    )
    pair = check_pair("pair", pair, codes.shape[0])
    return (
        queries,
        codes,
        pair,
        check_choice("heads", heads, HEADS),
        check_choice("attention", attention, ATTENTION_KINDS),
    )


def _score_gradient(scores: torch.Tensor, pair: tuple[int, int], heads: str, attention: str) -> torch.Tensor:
    """``dL/ds`` for scores ``(..., 2, d)`` (validated)."""
    c0, c1 = readout_constants(heads)
    weights = _weights(scores, attention)
    a, b = weights[..., 0, :], weights[..., 1, :]
    mom = Moments.of(a, b, pair)
    grads = []
    for own, other, m in ((a, b, mom), (b, a, mom.swapped())):
        g = _weight_gradient_dense(own, other, m, c0, c1)
        at_u, at_v = _pair_terms(m, c1)
        g[..., pair[0]] += at_u
        g[..., pair[1]] += at_v
        grads.append(g)
    return _scores_vjp(scores, weights, torch.stack(grads, dim=-2), attention)


def population_loss(
    queries: torch.Tensor,
    codes: torch.Tensor,
    pair: tuple[int, int],
    *,
    heads: str = "split",
    attention: str = "softmax",
) -> torch.Tensor:
    r"""The population loss :math:`L = \mathbb{E}_x[\ell]` at queries ``(..., 2, m)``, exactly, in :math:`O(dm)`.

    ``codes`` is the dense code matrix ``(d, m)`` (:meth:`xorlib.codes.Codes.dense`).
    """
    queries, codes, pair, heads, attention = _check(queries, codes, pair, heads, attention)
    weights = _weights(queries @ codes.T, attention)
    return _loss(Moments.of(weights[..., 0, :], weights[..., 1, :], pair), *readout_constants(heads))


def loss_of_weights(weights: torch.Tensor, pair: tuple[int, int], *, heads: str = "split") -> torch.Tensor:
    r"""The population loss of given head weights ``(..., 2, d)`` (any normaliser, any real weights), from the moments."""
    weights = check_tensor("weights", weights, ndim=(2, 3), shape={-2: 2})
    pair = check_pair("pair", pair, weights.shape[-1])
    heads = check_choice("heads", heads, HEADS)
    return _loss(Moments.of(weights[..., 0, :], weights[..., 1, :], pair), *readout_constants(heads))


def population_score_gradient(
    queries: torch.Tensor,
    codes: torch.Tensor,
    pair: tuple[int, int],
    *,
    heads: str = "split",
    attention: str = "softmax",
) -> torch.Tensor:
    r"""The exact gradient in the scores, :math:`\partial L/\partial s_{h,k}`, shape ``(..., 2, d)``.

    At uniform softmax attention (zero queries) it is
    :math:`-\tfrac{c_1}{d^2}\bigl(\mathbb 1[k \in \{u, v\}] - \tfrac2d\bigr)` for both heads.
    """
    queries, codes, pair, heads, attention = _check(queries, codes, pair, heads, attention)
    return _score_gradient(queries @ codes.T, pair, heads, attention)


def population_gradient(
    queries: torch.Tensor,
    codes: torch.Tensor,
    pair: tuple[int, int],
    *,
    heads: str = "split",
    attention: str = "softmax",
) -> torch.Tensor:
    r"""The exact population gradient :math:`\nabla_q L = P^\top\, \partial L/\partial s`, shape ``(..., 2, m)``."""
    queries, codes, pair, heads, attention = _check(queries, codes, pair, heads, attention)
    return _score_gradient(queries @ codes.T, pair, heads, attention) @ codes


def _four_moment(inner, quad, c1: str, c2: str, c3: str, c4: str) -> torch.Tensor:
    r""":math:`\mathbb{E}[\ell_1\ell_2\ell_3\ell_4]` for linear forms :math:`\ell_i = \langle c_i, x\rangle` (the moment lemma)."""
    return (
        inner(c1, c2) * inner(c3, c4)
        + inner(c1, c3) * inner(c2, c4)
        + inner(c1, c4) * inner(c2, c3)
        - 2 * quad(c1, c2, c3, c4)
    )


def _deviation_loss(pair_parts: dict[str, torch.Tensor], off_pair: dict[str, torch.Tensor], c1: float) -> torch.Tensor:
    r"""The population loss from the deviations of the heads from an exact configuration, without cancellation.

    Write :math:`a = a^* + \alpha`, :math:`b = b^* + \beta` where :math:`(a^*, b^*)` is exact
    (:math:`f^* = y` on every input: both heads on :math:`\tfrac12(e_u + e_v)` for the tied
    model, :math:`e_u` and :math:`e_v` for the split one). With :math:`z^* = \langle a^*, x\rangle`
    and :math:`\delta_1 = \langle\alpha, x\rangle` (likewise for head 2),
    :math:`f - y = -c_1(z_1^*\delta_2 + z_2^*\delta_1 + \delta_1\delta_2)`, so
    :math:`L = \tfrac{c_1^2}{2}\mathbb{E}[(A + B + C)^2]`, a sum of fourth moments of linear
    forms in which every term carries at least two small factors.

    ``pair_parts`` maps ``"A", "B", "X", "Y"`` (for :math:`a^*, b^*, \alpha, \beta`) to their
    values at :math:`(u, v)`, shape ``(..., 2)``; ``off_pair`` holds the sums over the other
    positions ``"XX", "YY", "XY", "XXYY"`` (:math:`a^*, b^*` vanish there).
    """

    def inner(p: str, q: str) -> torch.Tensor:
        key = "".join(sorted(p + q))
        return (pair_parts[p] * pair_parts[q]).sum(-1) + off_pair.get(key, 0.0)

    def quad(*names: str) -> torch.Tensor:
        value = pair_parts[names[0]] * pair_parts[names[1]] * pair_parts[names[2]] * pair_parts[names[3]]
        extra = off_pair["XXYY"] if sorted(names) == ["X", "X", "Y", "Y"] else 0.0
        return value.sum(-1) + extra

    terms = [
        _four_moment(inner, quad, "A", "Y", "A", "Y"),
        _four_moment(inner, quad, "B", "X", "B", "X"),
        _four_moment(inner, quad, "X", "Y", "X", "Y"),
        2 * _four_moment(inner, quad, "A", "Y", "B", "X"),
        2 * _four_moment(inner, quad, "A", "Y", "X", "Y"),
        2 * _four_moment(inner, quad, "B", "X", "X", "Y"),
    ]
    return 0.5 * c1**2 * sum(terms)
