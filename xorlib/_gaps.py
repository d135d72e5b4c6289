r"""The gap functionals of the split model's empirical direction: exact means and variances, and the sample bound.

One step of the split model on :math:`n` samples moves head :math:`h`'s scores along
:math:`\hat t_h = -PP^\top\,\partial\hat L/\partial s_h`. With :math:`a = \alpha_1`, :math:`b = \alpha_2`
the heads' weights at the start (they do not depend on the samples), :math:`y = -x_ux_v`,
:math:`f = -z_1z_2` and :math:`c_1 = 1`, the gap of head 1 between a target :math:`\tau` and a
position :math:`k` is a mean of i.i.d. terms,

.. math::

    \hat t_{1,\tau} - \hat t_{1,k} = \frac1n\sum_{s=1}^n X_s, \qquad
    X = \zeta\,\langle\omega, x\rangle, \quad \zeta = (x_ux_v - z_1z_2)\,z_2,

with :math:`\psi_i = \langle p_i, p_\tau - p_k\rangle` and :math:`\omega = a\odot(\psi - \langle a, \psi\rangle\mathbb 1)`
(head 2: swap :math:`a` and :math:`b`). Its mean :math:`\mu = \mathbb E X` is the population gap and

.. math::

    \mathbb E X^2 = \mathbb E[z_2^2W^2] - 2\,\mathbb E[x_ux_v\,z_1z_2^3W^2] + \mathbb E[z_1^2z_2^4W^2],
    \qquad W = \langle\omega, x\rangle,

products of at most eight linear forms of the uniform signs :math:`x`. Such a moment is exact by the
moment-cumulant formula: :math:`\mathbb E\prod_{k=1}^K\langle c_k, x\rangle = \sum_\pi\prod_{B\in\pi}
\operatorname{cum}_{|B|}\sum_i\prod_{k\in B}c_{k,i}`, over the partitions :math:`\pi` of the :math:`K` factors into
blocks of even size, with the cumulants of one sign :math:`\operatorname{cum}_2 = 1`, :math:`\operatorname{cum}_4 = -2`,
:math:`\operatorname{cum}_6 = 16`, :math:`\operatorname{cum}_8 = -272` (the odd ones vanish). ``x_u`` and ``x_v`` are the linear
forms of the unit vectors :math:`e_u, e_v`. This module trusts its callers.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import torch

#: The cumulants of one uniform sign, by order (the odd ones are 0).
SIGN_CUMULANTS = {2: 1.0, 4: -2.0, 6: 16.0, 8: -272.0}


@functools.cache
def even_partitions(k: int) -> tuple[tuple[tuple[int, ...], ...], ...]:
    """The partitions of ``range(k)`` into blocks of even size (379 for ``k = 8``)."""
    if k == 0:
        return ((),)
    out = []
    rest = tuple(range(1, k))
    for size in range(1, k, 2):  # the block of 0 has 0 and an odd number of the others
        for mates in _subsets(rest, size):
            others = tuple(i for i in rest if i not in mates)
            relabel = dict(enumerate(others))
            for tail in even_partitions(len(others)):
                out.append(((0, *mates), *(tuple(relabel[i] for i in block) for block in tail)))
    return tuple(out)


def _subsets(items: tuple[int, ...], size: int) -> list[tuple[int, ...]]:
    if size == 0:
        return [()]
    return [(items[i], *tail) for i in range(len(items)) for tail in _subsets(items[i + 1 :], size - 1)]


def sign_moment(factors: dict[str, torch.Tensor], names: str) -> torch.Tensor:
    r""":math:`\mathbb E\prod_k\langle c_k, x\rangle` for uniform signs :math:`x`, exactly (moment-cumulant formula).

    ``factors`` maps a one-letter name to coefficients: ``(d,)``, or ``(G, d)`` for a batch of ``G`` linear
    forms; ``names`` lists the factors of the product, with repeats. Returns a 0-d tensor or ``(G,)``. A
    block's sum over positions is a matrix-vector product: the batched factors times the product of the others.
    """
    batched: dict[str, torch.Tensor] = {}
    blocks: dict[str, torch.Tensor] = {}

    def block(key: str) -> torch.Tensor:
        if key not in blocks:
            single = [factors[name] for name in key if factors[name].ndim == 1]
            many = "".join(name for name in key if factors[name].ndim > 1)
            product = functools.reduce(torch.mul, single) if single else None
            if many and many not in batched:
                batched[many] = functools.reduce(torch.mul, (factors[name] for name in many))
            if not many:
                total = product.sum(-1)
            else:
                total = batched[many] @ product if product is not None else batched[many].sum(-1)
            blocks[key] = SIGN_CUMULANTS[len(key)] * total
        return blocks[key]

    return sum(count * functools.reduce(torch.mul, map(block, kind)) for kind, count in _kinds(names).items())


@functools.cache
def _kinds(names: str) -> Counter:
    """The even partitions of the factors ``names``, grouped by the multisets of their blocks (each block sorted)."""
    return Counter(
        tuple(sorted("".join(sorted(names[i] for i in b)) for b in partition))
        for partition in even_partitions(len(names))
    )


@dataclass(frozen=True)
class GapMoments:
    r"""The :math:`2(d-1)` gap functionals of one draw (codes, start, pair): per gap :math:`i`, mean, variance and range.

    ``mean`` :math:`\mu_i = \mathbb E X_i` (the population gap), ``variance`` :math:`V_i = \operatorname{Var}X_i`
    and ``range`` :math:`R_i = 2\|\omega_i\|_1 + \mu_i \ge \mu_i - X_i`, in the units of
    :math:`t_h = -PP^\top\partial L/\partial s_h`; head 1's :math:`d - 1` gaps first.
    """

    mean: torch.Tensor
    variance: torch.Tensor
    range: torch.Tensor
    targets: tuple[int, int]  # the hidden bit each head's gaps are measured from

    @property
    def hypothesis(self) -> bool:
        """Whether every population gap is positive: both heads' population targets are these hidden bits."""
        return bool((self.mean > 0).all())


def gap_weights(codes: torch.Tensor, own: torch.Tensor, target: int) -> torch.Tensor:
    r"""The weights :math:`\omega_k = a\odot(\psi_k - \langle a, \psi_k\rangle)`, ``(d - 1, d)``, of one head's gaps against every :math:`k \ne \tau`."""
    gram = codes @ codes.T
    psi = gram[:, target].unsqueeze(0) - gram  # row k: psi_i = <p_i, p_target - p_k>
    psi = torch.cat([psi[:target], psi[target + 1 :]])
    return own * (psi - (psi * own).sum(-1, keepdim=True))


def gap_moments(codes: torch.Tensor, queries: torch.Tensor, pair: tuple[int, int]) -> GapMoments:
    r"""The exact mean, variance and range of every gap functional :math:`X_i` of the split model's direction.

    ``codes`` ``(d, m)``, ``queries`` ``(2, m)`` (the start), ``pair`` the hidden pair. Head 1's target
    :math:`\tau_1` is the hidden bit where its population direction is larger, head 2's the other
    (:attr:`GapMoments.targets`). With :math:`\zeta_1 = (x_ux_v - z_1z_2)z_2` and :math:`W = \langle\omega, x\rangle`:
    :math:`\mu = \mathbb E[x_ux_vz_2W] - \mathbb E[z_1z_2^2W]`,
    :math:`\mathbb E X^2 = \mathbb E[z_2^2W^2] - 2\mathbb E[x_ux_vz_1z_2^3W^2] + \mathbb E[z_1^2z_2^4W^2]`,
    :math:`V = \mathbb E X^2 - \mu^2` and :math:`|X| \le 2\|\omega\|_1` (:math:`|\zeta| \le 2`), all vectorised over the gaps.
    """
    d = codes.shape[0]
    u, v = pair
    a, b = torch.softmax(queries @ codes.T, dim=-1)
    unit = torch.eye(d, dtype=codes.dtype)

    def moments(own: torch.Tensor, other: torch.Tensor, target: int) -> tuple[torch.Tensor, ...]:
        w = gap_weights(codes, own, target)
        f = {"o": own, "p": other, "w": w, "u": unit[u], "v": unit[v]}  # p: the head that multiplies the gap
        mean = sign_moment(f, "uvpw") - sign_moment(f, "oppw")
        second = sign_moment(f, "ppww") - 2 * sign_moment(f, "uvopppww") + sign_moment(f, "ooppppww")
        return mean, second, w.abs().sum(-1)

    # head 1's population direction: the gap between u and v (one gap functional, target u)
    lean = moments(a, b, u)[0][v - 1 if v > u else v]
    targets = (u, v) if float(lean) >= 0 else (v, u)
    parts = [moments(a, b, targets[0]), moments(b, a, targets[1])]
    mean, second, l1 = (torch.cat(x) for x in zip(*parts, strict=True))
    return GapMoments(mean=mean, variance=second - mean**2, range=2 * l1 + mean, targets=targets)


def bernstein_rates(moments: GapMoments) -> torch.Tensor:
    r"""Per gap, the rate :math:`\Lambda_i = \mu_i^2/(2V_i + \tfrac23R_i\mu_i)` of Bernstein's bound :math:`P(\hat\mu_i \le 0) \le e^{-n\Lambda_i}`.

    0 where :math:`\mu_i \le 0` (the bound is then 1).
    """
    mean = moments.mean.clamp(min=0.0)
    return mean**2 / (2 * moments.variance + (2 / 3) * moments.range * mean)


def failure_bound(draws: Sequence[GapMoments], n: float) -> float:
    r"""The bound on the failure probability at :math:`n` samples, averaged over the draws: :math:`\frac1J\sum_j\min\bigl(1, \sum_i e^{-n\Lambda_{j,i}}\bigr)`.

    A draw outside the hypothesis (a population gap :math:`\le 0`) has bound 1: it counts as a failure.
    """
    return _failure(torch.stack([bernstein_rates(g) for g in draws]), n)


def _failure(rates: torch.Tensor, n: float) -> float:
    per_draw = torch.exp(-n * rates).sum(-1).clamp(max=1.0)  # (J,); a draw with a zero rate sums to >= 1
    return float(per_draw.mean())


def sample_bound(draws: Sequence[GapMoments], delta: float) -> float:
    r"""The smallest integer :math:`n` whose :func:`failure_bound` is at most :math:`\delta'` (``inf`` if none is).

    The bound falls as :math:`n` grows, so a doubling search brackets it and bisection finds it.
    """
    rates = torch.stack([bernstein_rates(g) for g in draws])  # (J draws, 2(d - 1) gaps)
    if float((rates == 0).any(-1).double().mean()) > delta:  # too many draws outside the hypothesis
        return math.inf
    low, high = 0, 1  # invariant: the bound at low is above delta, at high it is not
    while _failure(rates, high) > delta:
        low, high = high, 2 * high
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if _failure(rates, middle) <= delta else (middle, high)
    return float(high)


def gaussian_success(draws: Sequence[GapMoments], n: float) -> float:
    r"""**Heuristic**: the gaps as independent :math:`\mathcal N(\mu_i, V_i/n)`; the chance that all are positive, averaged over the draws.

    :math:`\frac1J\sum_j\prod_i\Phi\bigl(\mu_{j,i}\sqrt{n/V_{j,i}}\bigr)`.
    """
    return _gaussian(*_standardised(draws), n)


def _standardised(draws: Sequence[GapMoments]) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.stack([g.mean for g in draws]), torch.stack([g.variance for g in draws]).sqrt()


def _gaussian(mean: torch.Tensor, spread: torch.Tensor, n: float) -> float:
    return float(torch.special.log_ndtr(mean * math.sqrt(n) / spread).sum(-1).exp().mean())


def gaussian_threshold(draws: Sequence[GapMoments], level: float = 0.5) -> float:
    r"""**Heuristic**: the :math:`n` at which :func:`gaussian_success` reaches ``level`` (bisection in :math:`\ln n`)."""
    mean, spread = _standardised(draws)
    low, high = 0.5, 1.0
    while _gaussian(mean, spread, high) < level:
        low, high = high, 2 * high
    for _ in range(50):
        middle = math.sqrt(low * high)
        low, high = (low, middle) if _gaussian(mean, spread, middle) >= level else (middle, high)
    return math.sqrt(low * high)
