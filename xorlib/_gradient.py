r"""The step's start: the softmax normalisers and moments, and the exact population gradient (one pass, two, or none).

A population step needs the start's normalisers (:func:`head_stats`) and the gradient
(:func:`population_gradient`), two passes over the codes. Opposite heads (the split model's start) get both in
one (:func:`start_and_gradient`); at zero queries (the tied model's start) they need no codes: every score is
zero, and for balanced codes the pull-back of a constant vanishes (every column sums to zero), so only the two
hidden rows remain. (:func:`scores`: all the scores in one pass, for moderate :math:`d`; :func:`population_loss`:
the loss from the moments, no pass.) Sums are in the log domain (:mod:`xorlib._logsums`); the blocks come from a
:class:`xorlib._source.CodeSource`.
This module trusts its callers (the public entry point is :func:`xorlib.one_step`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch

from ._logsums import LogSums, exp_sums
from ._moments import Moments, loss, mean_weight_gradient, pair_terms
from ._packed import BlockView, Lookup, Pull
from ._source import CodeSource, Views


def scores(views: Views, queries: torch.Tensor) -> torch.Tensor:
    """One pass: all the scores ``(heads, d)`` of queries ``(heads, m)`` (for moderate ``d``)."""
    lookup = Lookup(queries)
    return torch.cat([lookup(view) for view in views()], dim=-1)


@dataclass(frozen=True)
class HeadStats:
    """Per-head log-normalisers and moments of softmax attention with scores ``P q`` (all ``(2,)`` or scalars)."""

    lse: torch.Tensor  # (2,)
    smax: torch.Tensor  # (2,)
    smin: torch.Tensor  # (2,)
    moments: Moments


def head_stats(views: Views, queries: torch.Tensor, pair: tuple[int, int], pair_scores: torch.Tensor) -> HeadStats:
    """One pass: log-normalisers, score range and moments of the two heads (``pair_scores``: ``(2, 2)`` scores at u, v).

    Zero queries (every score zero) need no pass when the source knows ``d``.
    """
    like = {"dtype": queries.dtype, "device": queries.device}
    lookup = Lookup(queries)
    d = getattr(views, "d", None)
    if not lookup.distinct and d is not None:
        lse = torch.full((6,), math.log(d), **like)
        smax = smin = torch.zeros(2, **like)
    else:
        parts = LogSums()
        smax = torch.full((2,), -torch.inf, **like)
        smin = -smax
        for view in views():
            s = lookup(view)
            smax, smin = torch.maximum(smax, s.amax(-1)), torch.minimum(smin, s.amin(-1))
            parts.add(_block_sums(lookup, s, smax.new_tensor(0.0), view.stop - view.start))
        lse = parts.total()[0].reshape(-1)
    return _stats(lse, smax, smin, pair_scores)


def _block_sums(lookup: Lookup, s: torch.Tensor, zero: torch.Tensor, rows: int) -> torch.Tensor:
    """A block's ``(2, 3)``: lse of :math:`s_1, s_2, s_1+s_2`, then of twice each (equal or opposite heads: fewer exponentials)."""
    (slot1, sign1), (slot2, sign2) = lookup.plan
    if slot1 == slot2 and slot1 >= 0 and sign1 == sign2:  # equal heads: s1 + s2 = 2 s1
        one = exp_sums(s[0], s[0].amax(), (1, 2, 4))
        return torch.stack([one[:2], one[:2], one[1:]], dim=1)
    if slot1 == slot2 and slot1 >= 0:  # opposite heads: s1 + s2 = 0 exactly
        both = exp_sums(s, s.amax(-1))
        flat = zero + math.log(rows)
        return torch.cat([both, torch.stack([flat, flat]).unsqueeze(1)], dim=1)
    rows3 = torch.stack([s[0], s[1], s[0] + s[1]])
    return exp_sums(rows3, rows3.amax(-1))


def population_gradient(
    views: Views, queries: torch.Tensor, pair: tuple[int, int], stats: HeadStats, c0: float, c1: float
) -> torch.Tensor:
    r"""One pass: the exact population gradient :math:`\nabla_q L`, ``(2, m)``, for softmax heads.

    At zero queries with balanced codes no pass is needed: the pulled-back vector is the same constant at
    every position but the two hidden ones, and a constant pulls back to zero (every column of the codes
    sums to zero), so only the two hidden rows contribute.
    """
    u, v = pair
    mom = stats.moments
    per_head = (mom, mom.swapped())
    centring = torch.stack([mean_weight_gradient(m, c0, c1) for m in per_head])  # <a, dL/da> per head
    label_terms = [pair_terms(m, c1) for m in per_head]
    lookup = Lookup(queries)
    heads = 1 if lookup.plan[0] == lookup.plan[1] else 2  # equal heads: one computation

    # dL/da_j = c1^2 (a_j |b|^2 + 2<a,b> b_j - 2 a_j b_j^2) - c1 c0 b_j (+ the label terms at u, v), so
    # w (g - centring) = w (alpha w + beta o + gamma w o^2 - centring) with o the other head's weights:
    # six operations per head on a block (xorlib._moments.weight_gradient_dense writes the same sum).
    coefficients = [
        (float(c1**2 * m.bb), float(2 * c1**2 * m.ab - c1 * c0), -2.0 * c1**2, float(c))
        for m, c in zip(per_head, centring, strict=True)
    ]

    def pulled(s: torch.Tensor, at_u: int | None, at_v: int | None) -> torch.Tensor:
        """``w * (g - centring)`` on a block with scores ``s`` ``(2, rows)``, holding u and v at these offsets."""
        w = torch.sub(s[:heads], stats.lse[:heads].unsqueeze(1)).exp_()  # (heads, rows): a (and b) on this block
        both = w[0] * w[-1]  # a b
        out = torch.empty_like(w)
        for head in range(heads):
            own, other = w[head], w[heads - 1 - head]
            alpha, beta, gamma, centre = coefficients[head]
            g = torch.mul(own, alpha, out=out[head]).add_(other, alpha=beta).add_(both * other, alpha=gamma)
            label_u, label_v = label_terms[head]
            if at_u is not None:
                g[at_u] += label_u
            if at_v is not None:
                g[at_v] += label_v
            g.sub_(centre).mul_(own)
        return out  # the softmax pull-back, before P^T

    if not lookup.distinct and getattr(views, "balanced", False):
        # Every score is zero: the vector is one constant r off {u, v}, and sum_k p_k = 0 leaves
        # (x_u - r) p_u + (x_v - r) p_v. Offsets 1 and 2 stand for u and v, offset 0 for every other position.
        x = pulled(queries.new_zeros(2, 3), 1, 2)
        rows = views.codes.rows(list(pair)).to(device=queries.device, dtype=queries.dtype)  # (2, m)
        grad = (x[:, 1:] - x[:, :1]) @ rows
    else:
        pull = Pull(heads, queries.shape[1], queries)
        for view in _wide_views(views):
            inside = [p - view.start if view.start <= p < view.stop else None for p in (u, v)]
            pull.add(view, pulled(lookup(view), *inside))
        grad = pull.result()
    return grad.expand(2, -1).clone() if heads == 1 else grad


def _wide_views(views: Views) -> Iterable[BlockView]:
    """A pass's blocks, with int64 look-up indices where the source offers them (a pull-back's scatter needs them)."""
    return views(wide=True) if isinstance(views, CodeSource) else views()


#: Opposite heads take one pass for the start and the gradient while every score is at most this in magnitude
#: (:math:`|s_k| \le \sum_r |q_r|/\sqrt N`). Beyond, attention concentrates on a few positions, the gradient is a
#: small difference of its terms, and the per-position centring of the two-pass form keeps its rounding the same.
FUSED_UP_TO = 64.0


def start_and_gradient(
    views: Views, queries: torch.Tensor, pair: tuple[int, int], pair_scores: torch.Tensor, c0: float, c1: float
) -> tuple[HeadStats, torch.Tensor]:
    """The start's statistics (:func:`head_stats`) and the population gradient (:func:`population_gradient`).

    Opposite heads (:math:`q_2 = -q_1`, the split model's start) over balanced codes take one pass
    (:func:`_opposite_heads`) up to scores of :data:`FUSED_UP_TO`; other starts take the two passes, or none
    where the queries are zero.
    """
    lookup = Lookup(queries)
    (slot1, sign1), (slot2, sign2) = lookup.plan
    opposite = slot1 == slot2 == 0 and sign1 == -sign2 and getattr(views, "balanced", False)
    if opposite and float(queries[0].abs().sum()) * views.scale <= FUSED_UP_TO:
        return _opposite_heads(views, lookup, pair, pair_scores, c0, c1)
    stats = head_stats(views, queries, pair, pair_scores)
    return stats, population_gradient(views, queries, pair, stats, c0, c1)


def _opposite_heads(
    views: Views, lookup: Lookup, pair: tuple[int, int], pair_scores: torch.Tensor, c0: float, c1: float
) -> tuple[HeadStats, torch.Tensor]:
    r"""One pass for opposite heads, :math:`s_2 = -s_1` exactly: the start's statistics and the gradient together.

    Then :math:`a_kb_k = e^{-\operatorname{lse}(s_1) - \operatorname{lse}(s_2)}` is the same at every position, so the
    pulled-back vector of head 1, :math:`a_k(\partial L/\partial a_k - \langle a, \partial L/\partial a\rangle)
    = c_1^2\|b\|^2 a_k^2 - C_a a_k + \text{const}` (plus the label terms at :math:`u, v`), needs only
    :math:`P^\top a^2` and :math:`P^\top a`: the constant pulls back to zero (every column of balanced
    codes sums to zero), and the normalisers enter as factors known at the end. The pass accumulates
    :math:`P^\top A, P^\top A^2` of :math:`A = e^{s - M}` under a running maximum :math:`M` (rescaled when it
    grows) and the same for :math:`B = e^{-s - M'}` (:meth:`xorlib._packed.Pull.add_squares`); the log-sums of
    both are read off the bins at the end (:meth:`xorlib._packed.Pull.totals`); :math:`\operatorname{lse}(s_1 + s_2)
    = \operatorname{lse}(2(s_1 + s_2)) = \ln d`.
    """
    queries = lookup.queries
    like = {"dtype": queries.dtype, "device": queries.device}
    top = torch.full((2,), -torch.inf, **like)  # running maximum of s and of -s
    pull = Pull(4, queries.shape[1], queries)  # columns A, A^2, B, B^2; their sums are its totals
    buffer = None
    for view in _wide_views(views):
        s = (queries[:1] @ view.rows.T)[0] if view.rows is not None else lookup.distinct_scores(view)[0]
        high = torch.stack([s.amax(), -s.amin()])  # of s and of -s
        if bool((high > top).any()):
            grown = torch.maximum(top, high)
            factor = torch.exp(top - grown)
            factors = torch.stack([factor, factor * factor], dim=1)  # (head, power)
            pull.scale_(factors.reshape(-1))
            top = grown
        if buffer is None or buffer.shape[1] < s.shape[0]:
            buffer = s.new_empty(2, s.shape[0])  # A and B, reused block to block
        weights = buffer[:, : s.shape[0]]
        torch.sub(s, top[0], out=weights[0]).exp_()  # A = e^{s - M}
        torch.sub(-top[1], s, out=weights[1]).exp_()  # B = e^{-s - M'}
        pull.add_squares(view, weights)
    sums = pull.totals().view(2, 2)  # [head, power]: sum of e^{power (x - top)}
    d = views.d
    lse_1, lse_2 = sums.log().add_(top.unsqueeze(1) * torch.tensor([1.0, 2.0], **like)).unbind(1)  # lse(x), lse(2x)
    flat = torch.tensor(math.log(d), **like)
    stats = _stats(torch.stack([lse_1[0], lse_1[1], flat, lse_2[0], lse_2[1], flat]), top, -top.flip(0), pair_scores)
    mom = stats.moments
    per_head = (mom, mom.swapped())
    pulled = pull.result().view(2, 2, -1)  # (head, power, m)
    rho = torch.exp(top - stats.lse)  # a = rho_1 A, b = rho_2 B
    rows = views.codes.rows(list(pair)).to(**like)  # (2, m)
    grad = []
    for head, m in enumerate(per_head):
        alpha = c1**2 * m.bb
        centre = mean_weight_gradient(m, c0, c1)
        label_u, label_v = pair_terms(m, c1)  # dL/da at u and v, times a_u and a_v below
        labels = torch.stack([label_u * m.a_u, label_v * m.a_v]) @ rows
        grad.append(alpha * rho[head] ** 2 * pulled[head, 1] - centre * rho[head] * pulled[head, 0] + labels)
    return stats, torch.stack(grad)


def _stats(lse: torch.Tensor, smax: torch.Tensor, smin: torch.Tensor, pair_scores: torch.Tensor) -> HeadStats:
    """:class:`HeadStats` from the six log-sums (of :math:`s_1, s_2, s_1 + s_2`, then of twice each)."""
    l1, l2, l12, l11, l22, l1122 = lse
    weights_on_pair = torch.exp(pair_scores - lse[:2].unsqueeze(1))  # (2 heads, 2 positions)
    moments = Moments(
        ab=torch.exp(l12 - l1 - l2), aa=torch.exp(l11 - 2 * l1), bb=torch.exp(l22 - 2 * l2),
        a2b2=torch.exp(l1122 - 2 * l1 - 2 * l2),
        a_u=weights_on_pair[0, 0], a_v=weights_on_pair[0, 1], b_u=weights_on_pair[1, 0], b_v=weights_on_pair[1, 1],
    )  # fmt: skip
    return HeadStats(lse=lse[:2], smax=smax, smin=smin, moments=moments)


def population_loss(stats: HeadStats, c0: float, c1: float) -> torch.Tensor:
    """The population loss from the moments (no pass)."""
    return loss(stats.moments, c0, c1)
