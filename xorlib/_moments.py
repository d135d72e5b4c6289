r"""The closed-form pieces of the population loss and its gradient, on blocks of positions (trusting callers).

The formulas are documented in :mod:`xorlib.population`; here they are written on blocks of
positions plus a few global scalars (:class:`Moments`), so that :mod:`xorlib.population` applies
them to whole weight vectors and :mod:`xorlib._gradient` streams them over :math:`d = 10^8`
positions, with the same functions. :class:`Objective` is the named result both return.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch

from ._checks import check_tensor


def dense_codes(model, codes: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    """The dense codes ``(d, m)`` of ``model``, or the given ``codes`` checked against it, in the dtype and device of ``like``."""
    if codes is None:
        return model.codes.dense(dtype=like.dtype, device=like.device)
    return check_tensor("codes", codes, ndim=2, shape={0: model.d, 1: model.m}, dtype=like.dtype, device=like.device)


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


@dataclass(frozen=True)
class Objective:
    """The mean loss of two heads and its gradients: in the scores ``(..., 2, d)`` and in the queries ``(..., 2, m)``."""

    loss: torch.Tensor
    score_gradient: torch.Tensor
    gradient: torch.Tensor


def loss(mom: Moments, c0: float, c1: float) -> torch.Tensor:
    r"""The population loss from the moments: :math:`\tfrac12[c_0^2 + 1 - 2c_1(c_0\langle a,b\rangle + a_ub_v + a_vb_u) + c_1^2M_4]`."""
    m4 = mom.aa * mom.bb + 2 * mom.ab**2 - 2 * mom.a2b2
    cross = mom.a_u * mom.b_v + mom.a_v * mom.b_u
    return 0.5 * (c0**2 + 1 - 2 * c1 * (c0 * mom.ab + cross) + c1**2 * m4)


def loss_of_weights(weights: torch.Tensor, pair: tuple[int, int], readout: tuple[float, float]) -> torch.Tensor:
    r"""The population loss of given head weights ``(..., 2, d)`` (any normaliser, any real weights)."""
    return loss(Moments.of(weights[..., 0, :], weights[..., 1, :], pair), *readout)


def weight_gradient_dense(own: torch.Tensor, other: torch.Tensor, mom: Moments, c0: float, c1: float) -> torch.Tensor:
    r""":math:`\partial L/\partial a_j` without its two pair terms, for a block of positions (``mom`` of ``own``, ``other``)."""
    ab, other_sq = mom.ab.unsqueeze(-1), mom.bb.unsqueeze(-1)
    return c1**2 * (own * other_sq + 2 * ab * other - 2 * own * other**2) - c1 * c0 * other


def mean_weight_gradient(mom: Moments, c0: float, c1: float) -> torch.Tensor:
    r""":math:`\langle a, \partial L/\partial a\rangle`, the centring term of the softmax pull-back, from the moments alone."""
    m4 = mom.aa * mom.bb + 2 * mom.ab**2 - 2 * mom.a2b2
    return c1**2 * m4 - c1 * c0 * mom.ab - c1 * (mom.a_u * mom.b_v + mom.a_v * mom.b_u)


def pair_terms(mom: Moments, c1: float) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The label terms of :math:`\partial L/\partial a` at :math:`u` and :math:`v`: :math:`-c_1 b_v` and :math:`-c_1 b_u`."""
    return -c1 * mom.b_v, -c1 * mom.b_u


def population_objective(scores: torch.Tensor, pair: tuple[int, int], readout, normaliser) -> tuple:
    """The loss ``(...)`` and ``dL/ds`` ``(..., 2, d)`` at scores ``(..., 2, d)``, from one set of weights and moments."""
    c0, c1 = readout
    weights = normaliser.weights(scores)
    a, b = weights[..., 0, :], weights[..., 1, :]
    mom = Moments.of(a, b, pair)
    grads = []
    for own, other, m in ((a, b, mom), (b, a, mom.swapped())):
        g = weight_gradient_dense(own, other, m, c0, c1)
        at_u, at_v = pair_terms(m, c1)
        g[..., pair[0]] += at_u
        g[..., pair[1]] += at_v
        grads.append(g)
    return loss(mom, c0, c1), normaliser.pullback(scores, weights, torch.stack(grads, dim=-2))


def empirical_objective(scores: torch.Tensor, x: torch.Tensor, y: torch.Tensor, readout, normaliser) -> tuple:
    """The mean loss on the samples and its gradient in the scores ``(2, d)``: one forward and one backward product."""
    c0, c1 = readout
    weights = normaliser.weights(scores)
    z = weights @ x.T  # (2, n): the forward pass
    residual = c0 - c1 * z[0] * z[1] - y
    pull = (-c1 / x.shape[0]) * residual * z.flip(0)  # head 1 is pulled by z_2, head 2 by z_1
    return 0.5 * (residual**2).mean(), normaliser.pullback(scores, weights, pull @ x)  # the backward pass


def four_moment(inner, quad, c1: str, c2: str, c3: str, c4: str) -> torch.Tensor:
    r""":math:`\mathbb{E}[\ell_1\ell_2\ell_3\ell_4]` for linear forms :math:`\ell_i = \langle c_i, x\rangle` (the moment lemma)."""
    return (
        inner(c1, c2) * inner(c3, c4)
        + inner(c1, c3) * inner(c2, c4)
        + inner(c1, c4) * inner(c2, c3)
        - 2 * quad(c1, c2, c3, c4)
    )


@dataclass(frozen=True)
class Deviations:
    r"""Two heads as an exact configuration plus deviations, at :math:`(u, v)`: ``a_star``, ``b_star``, ``alpha``, ``beta``
    (each ``(..., 2)``), for :func:`deviation_loss`."""

    a_star: torch.Tensor
    b_star: torch.Tensor
    alpha: torch.Tensor
    beta: torch.Tensor


@dataclass(frozen=True)
class OffPair:
    r"""Sums over the positions off the pair: :math:`\sum\alpha_k^2`, :math:`\sum\beta_k^2`, :math:`\sum\alpha_k\beta_k`,
    :math:`\sum\alpha_k^2\beta_k^2` (:math:`a^*, b^*` vanish there)."""

    xx: torch.Tensor
    yy: torch.Tensor
    xy: torch.Tensor
    xxyy: torch.Tensor


def deviation_loss(parts: Deviations, off_pair: OffPair, c1: float) -> torch.Tensor:
    r"""The population loss from the deviations of the heads from an exact configuration, without cancellation.

    Write :math:`a = a^* + \alpha`, :math:`b = b^* + \beta` where :math:`(a^*, b^*)` is exact
    (:math:`f^* = y` on every input: both heads on :math:`\tfrac12(e_u + e_v)` for the tied
    model, :math:`e_u` and :math:`e_v` for the split one). With :math:`z^* = \langle a^*, x\rangle`
    and :math:`\delta_1 = \langle\alpha, x\rangle` (likewise for head 2),
    :math:`f - y = -c_1(z_1^*\delta_2 + z_2^*\delta_1 + \delta_1\delta_2)`, so
    :math:`L = \tfrac{c_1^2}{2}\mathbb{E}[(A + B + C)^2]`, a sum of fourth moments of linear
    forms in which every term carries at least two small factors.
    """
    at_pair = {"A": parts.a_star, "B": parts.b_star, "X": parts.alpha, "Y": parts.beta}
    sums = {"XX": off_pair.xx, "YY": off_pair.yy, "XY": off_pair.xy, "XXYY": off_pair.xxyy}

    def inner(p: str, q: str) -> torch.Tensor:
        key = "".join(sorted(p + q))
        return (at_pair[p] * at_pair[q]).sum(-1) + sums.get(key, 0.0)

    def quad(*names: str) -> torch.Tensor:
        value = at_pair[names[0]] * at_pair[names[1]] * at_pair[names[2]] * at_pair[names[3]]
        extra = sums["XXYY"] if sorted(names) == ["X", "X", "Y", "Y"] else 0.0
        return value.sum(-1) + extra

    terms = [
        four_moment(inner, quad, "A", "Y", "A", "Y"),
        four_moment(inner, quad, "B", "X", "B", "X"),
        four_moment(inner, quad, "X", "Y", "X", "Y"),
        2 * four_moment(inner, quad, "A", "Y", "B", "X"),
        2 * four_moment(inner, quad, "A", "Y", "X", "Y"),
        2 * four_moment(inner, quad, "B", "X", "X", "Y"),
    ]
    return 0.5 * c1**2 * sum(terms)
