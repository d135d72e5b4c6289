r"""Streamed passes over the positions: the population step and its certificate in memory :math:`O(\text{block}\cdot m)`.

Every quantity the one-step learner needs is either a sum over positions or a
top-:math:`k` over positions, so it is accumulated block by block while the
codes are regenerated from their seed (:meth:`xorlib.codes.Codes.views`), or kept
for all the passes of a step when they fit in memory (:func:`code_views`). Softmax
normalisers and moments are accumulated in the log domain: for head scores
:math:`s_1, s_2`,

.. math::

    \langle a, b\rangle = e^{\operatorname{lse}(s_1+s_2) - \operatorname{lse}(s_1) - \operatorname{lse}(s_2)},\quad
    \|a\|^2 = e^{\operatorname{lse}(2s_1) - 2\operatorname{lse}(s_1)},\quad
    \textstyle\sum_k a_k^2b_k^2 = e^{\operatorname{lse}(2s_1+2s_2) - 2\operatorname{lse}(s_1) - 2\operatorname{lse}(s_2)},

so one pass gives all of them, and one exponential per entry gives both
:math:`\operatorname{lse}(x)` and :math:`\operatorname{lse}(2x)` (:func:`_log_sums`). The
formulas are those of :mod:`xorlib.population`.
This module trusts its callers (the public entry point is :func:`xorlib.one_step`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch

from ._moments import Deviations, Moments, OffPair, loss, mean_weight_gradient, pair_terms, weight_gradient_dense
from ._packed import BlockView
from .codes import Codes

Views = Callable[[], Iterable[BlockView]]  # each pass calls it once; the items have start, stop, scores, pull
#: Codes whose blocks take at most this many bytes are generated once per step and kept for all its passes.
KEEP_CODES_BYTES = 2**28
#: Bytes per position that a kept block spends remembering its last two score rows of two heads.
_MEMO_BYTES_PER_ROW = 2 * 2 * 8


def code_views(codes: Codes, device: torch.device) -> Views:
    """The passes' source of blocks: kept in memory if they fit :data:`KEEP_CODES_BYTES`, else regenerated per pass.

    Either way every pass sees the same blocks (they depend only on the seed), so
    the results do not depend on the choice; keeping them saves one generation per
    pass, and where the budget also holds two rows of scores per head, a kept block
    remembers the scores of the last two queries it was asked for (:class:`_Remembered`).
    """
    per_row = (codes.main + 7) // 8 if codes.packed else 8 * codes.m
    if codes.d * per_row > KEEP_CODES_BYTES:
        return lambda: codes.views(device=device)
    kept = tuple(codes.views(device=device))
    if codes.d * (per_row + _MEMO_BYTES_PER_ROW) <= KEEP_CODES_BYTES:
        kept = tuple(_Remembered(view) for view in kept)
    return lambda: kept


class _Remembered:
    """A kept block that remembers its scores for the last two queries: the passes of a step ask for the same ones.

    The scores are those of :meth:`BlockView.scores`, returned as fresh copies, so
    a caller may change them in place.
    """

    __slots__ = ("_memo", "start", "stop", "view")

    def __init__(self, view: BlockView) -> None:
        self.view, self.start, self.stop = view, view.start, view.stop
        self._memo: list[tuple[torch.Tensor, torch.Tensor]] = []

    def scores(self, queries: torch.Tensor) -> torch.Tensor:
        for asked, answer in self._memo:
            if asked.dtype == queries.dtype and torch.equal(asked, queries):
                return answer.clone()
        answer = self.view.scores(queries)
        self._memo = [(queries.clone(), answer), *self._memo[:1]]
        return answer.clone()

    def pull(self, weights: torch.Tensor) -> torch.Tensor:
        return self.view.pull(weights)


def scores(views: Views, queries: torch.Tensor) -> torch.Tensor:
    """One pass: all the scores ``(heads, d)`` of queries ``(heads, m)`` (for moderate ``d``)."""
    return torch.cat([view.scores(queries) for view in views()], dim=-1)


def _log_sums(x: torch.Tensor, top: torch.Tensor | None = None) -> torch.Tensor:
    r""":math:`\log\sum_k e^{x_k}` and :math:`\log\sum_k e^{2x_k}` along the last axis, ``(2, ...)``: one exponential each.

    Both are shifted by the same maximum :math:`M` (``top``, if the caller has it):
    :math:`e^{2(x_k - M)}` is the square of :math:`e^{x_k - M}`. A row of
    :math:`-\infty` (masked) sums to :math:`-\infty`.
    """
    top = x.amax(-1) if top is None else top
    top = torch.where(top > -torch.inf, top, torch.zeros_like(top))
    e = torch.sub(x, top.unsqueeze(-1)).exp_()
    squares = torch.linalg.vector_norm(e, dim=-1).square_()  # one pass, no temporary
    return torch.stack([e.sum(-1).log() + top, squares.log_() + 2 * top])


@dataclass(frozen=True)
class HeadStats:
    """Per-head log-normalisers and moments of softmax attention with scores ``P q`` (all ``(2,)`` or scalars)."""

    lse: torch.Tensor  # (2,)
    smax: torch.Tensor  # (2,)
    smin: torch.Tensor  # (2,)
    moments: Moments


def head_stats(views: Views, queries: torch.Tensor, pair: tuple[int, int], pair_scores: torch.Tensor) -> HeadStats:
    """One pass: log-normalisers, score range and moments of the two heads (``pair_scores``: ``(2, 2)`` scores at u, v)."""
    lse = torch.full((6,), -torch.inf, dtype=queries.dtype, device=queries.device)
    smax = torch.full((2,), -torch.inf, dtype=queries.dtype, device=queries.device)
    smin = -smax
    for view in views():
        s = view.scores(queries)
        # lse of s1, s2, s1 + s2, then of twice each
        lse = torch.logaddexp(lse, _log_sums(torch.stack([s[0], s[1], s[0] + s[1]])).reshape(-1))
        smax, smin = torch.maximum(smax, s.amax(-1)), torch.minimum(smin, s.amin(-1))
    l1, l2, l12, l11, l22, l1122 = lse
    weights_on_pair = torch.exp(pair_scores - lse[:2].unsqueeze(1))  # (2 heads, 2 positions)
    moments = Moments(
        ab=torch.exp(l12 - l1 - l2), aa=torch.exp(l11 - 2 * l1), bb=torch.exp(l22 - 2 * l2),
        a2b2=torch.exp(l1122 - 2 * l1 - 2 * l2),
        a_u=weights_on_pair[0, 0], a_v=weights_on_pair[0, 1], b_u=weights_on_pair[1, 0], b_v=weights_on_pair[1, 1],
    )  # fmt: skip
    return HeadStats(lse=lse[:2], smax=smax, smin=smin, moments=moments)


def population_gradient(
    views: Views, queries: torch.Tensor, pair: tuple[int, int], stats: HeadStats, c0: float, c1: float
) -> torch.Tensor:
    r"""One pass: the exact population gradient :math:`\nabla_q L`, ``(2, m)``, for softmax heads."""
    u, v = pair
    mom = stats.moments
    per_head = (mom, mom.swapped())
    centring = torch.stack([mean_weight_gradient(m, c0, c1) for m in per_head])  # <a, dL/da> per head
    label_terms = [pair_terms(m, c1) for m in per_head]
    grad = torch.zeros_like(queries)
    for view in views():
        s = view.scores(queries)
        w = torch.exp(s - stats.lse.unsqueeze(1))  # (2, rows): a and b on this block
        g = torch.stack(
            [
                weight_gradient_dense(w[0], w[1], per_head[0], c0, c1),
                weight_gradient_dense(w[1], w[0], per_head[1], c0, c1),
            ]
        )
        for head, (at_u, at_v) in enumerate(label_terms):
            if view.start <= u < view.stop:
                g[head, u - view.start] += at_u
            if view.start <= v < view.stop:
                g[head, v - view.start] += at_v
        grad += view.pull(w * (g - centring.unsqueeze(1)))  # the softmax pull-back, then P^T
    return grad


def population_loss(stats: HeadStats, c0: float, c1: float) -> torch.Tensor:
    """The population loss from the moments (no pass)."""
    return loss(stats.moments, c0, c1)


def top_scores(views: Views, queries: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One pass: the ``k`` largest scores of each query row and their positions, ``(rows, k)`` each."""
    best_values = torch.full((queries.shape[0], 0), 0.0, dtype=queries.dtype, device=queries.device)
    best_index = torch.zeros((queries.shape[0], 0), dtype=torch.long, device=queries.device)
    for view in views():
        s = view.scores(queries)
        top = torch.topk(s, min(k, s.shape[1]), dim=1)  # the block's best, then merged with the best so far
        values = torch.cat([best_values, top.values], dim=1)
        index = torch.cat([best_index, top.indices + view.start], dim=1)
        best = torch.topk(values, min(k, values.shape[1]), dim=1)
        best_values, best_index = best.values, torch.gather(index, 1, best.indices)
    return best_values, best_index


@dataclass(frozen=True)
class AfterStep:
    """What the certificate and the report need after a step, per head (leading axis: step sizes, then heads)."""

    lse: torch.Tensor  # log-normaliser of each head
    log_weight_u: torch.Tensor
    log_weight_v: torch.Tensor
    log_rest: torch.Tensor  # log of the weight off {u, v}
    log_error: torch.Tensor  # bound on the absolute rounding error of each log-weight
    top_values: torch.Tensor  # (..., 2, 2) the two largest scores of each head
    top_index: torch.Tensor
    off_pair: OffPair | None = None  # with off_pair=True: see after_step
    scores: torch.Tensor | None = None  # with keep_scores=True: the scores (2, d) after the first step size


def after_step(
    views: Views,
    queries: torch.Tensor,
    direction: torch.Tensor,
    kappas: torch.Tensor,
    pair: tuple[int, int],
    pair_scores: torch.Tensor,
    pair_direction: torch.Tensor,
    d: int,
    *,
    top: bool = True,
    off_pair: bool = False,
    keep_scores: bool = False,
) -> AfterStep:
    r"""One pass: for every step :math:`\kappa` of ``kappas`` ``(K,)``, the scores :math:`s + \kappa t` summarised for the certificate.

    ``queries`` and ``direction`` are ``(2, m)``; the scores after the step are
    those of the queries :math:`q + \kappa\,\delta`. ``pair_scores`` and
    ``pair_direction`` are the ``(2, 2)`` values of :math:`s` and :math:`t` at
    :math:`(u, v)`. Work and memory per block are :math:`O(K\cdot\text{rows})`.
    Options: ``top``, the two largest scores of each head (else ``top_values``
    and ``top_index`` are empty); ``off_pair``, also :math:`\sum_{k\notin\{u,v\}}` of
    :math:`a_k^2, b_k^2, a_kb_k, a_k^2b_k^2` after each step (an :class:`OffPair` of ``(K,)`` tensors), in
    the log domain; ``keep_scores``, the whole scores after the
    first step size. Equal heads (the tied model) are computed once.
    """
    u, v = pair
    K = kappas.shape[0]
    H = 1 if torch.equal(queries[0], queries[1]) and torch.equal(direction[0], direction[1]) else 2
    like = {"dtype": queries.dtype, "device": queries.device}
    # lse and lse of twice: of each distinct head's scores off the pair, and (off_pair) of the two heads' sum
    running = torch.full((2, K, H + off_pair), -torch.inf, **like)
    biggest = torch.zeros((K, H), **like)
    top_values = torch.full((K, H, 0), 0.0, **like)
    top_index = torch.zeros((K, H, 0), dtype=torch.long, device=queries.device)
    kept = []
    k = kappas.view(K, 1, 1)
    size = max(1024, 2**17 // (K * H))  # sub-blocks of K x rows that stay in cache
    for view in views():
        s, t = view.scores(queries)[:H], view.scores(direction)[:H]  # (all heads: remembered scores are found)
        for part in range(0, s.shape[1], size):
            after = torch.addcmul(s[:, part : part + size], k, t[:, part : part + size])  # (K, H, rows)
            start = view.start + part
            high = after.amax(-1)  # (separate amax and amin are several times faster than aminmax)
            biggest = torch.maximum(biggest, torch.maximum(high, -after.amin(-1)))
            if top:  # the part's best two, merged with the best so far
                best = torch.topk(after, min(2, after.shape[-1]), dim=-1)
                values = torch.cat([top_values, best.values], dim=-1)
                index = torch.cat([top_index, best.indices + start], dim=-1)
                best = torch.topk(values, min(2, values.shape[-1]), dim=-1)
                top_values, top_index = best.values, torch.gather(index, -1, best.indices)
            if keep_scores:
                kept.append(after[0])
            inside = [position - start for position in (u, v) if start <= position < start + after.shape[-1]]
            if inside:
                after = after.clone()
                after[..., inside] = -torch.inf
                high = after.amax(-1)
            if off_pair:  # a third row: the sum of the two heads' scores, shifted by its own maximum
                cross = after[:, :1] + after[:, H - 1 :]
                after, high = torch.cat([after, cross], dim=1), torch.cat([high, cross.amax(-1)], dim=1)
            running = torch.logaddexp(running, _log_sums(after, high))
    heads = torch.tensor([0, H - 1], device=queries.device)  # distinct head of each head
    rest = running[0, :, :H].index_select(1, heads)  # (K, 2): log of the unnormalised weight off {u, v}
    at_pair = pair_scores.unsqueeze(0) + k * pair_direction.unsqueeze(0)  # (K, 2 heads, 2 positions)
    lse = torch.logsumexp(torch.cat([rest.unsqueeze(-1), at_pair], dim=-1), dim=-1)
    log_error = 16 * torch.finfo(queries.dtype).eps * (biggest.index_select(1, heads) + math.log(d) + 1)
    sums = None
    if off_pair:
        l1, l2 = lse[:, 0], lse[:, 1]
        logs = torch.stack(
            [running[1, :, 0] - 2 * l1, running[1, :, H - 1] - 2 * l2, running[0, :, H] - l1 - l2,
             running[1, :, H] - 2 * (l1 + l2)]
        )  # fmt: skip
        sums = OffPair(*torch.exp(logs))
    return AfterStep(
        lse=lse, log_weight_u=at_pair[..., 0] - lse, log_weight_v=at_pair[..., 1] - lse, log_rest=rest - lse,
        log_error=log_error, top_values=top_values.index_select(1, heads), top_index=top_index.index_select(1, heads),
        off_pair=sums, scores=torch.cat(kept, dim=-1).index_select(0, heads) if keep_scores else None,
    )  # fmt: skip


def pair_deviations(log_u: torch.Tensor, log_v: torch.Tensor, log_rest: torch.Tensor, tied: bool) -> Deviations:
    r"""The exact configuration nearest the heads and the deviations from it at :math:`(u, v)`, from log-weights ``(2,)``.

    Split: head 1 on whichever of :math:`u, v` the assignment favours, head 2 on
    the other; a head's deviation on its own bit is :math:`-(\alpha_o + S)`, never
    :math:`a - 1`. Tied: both heads on :math:`\tfrac12(e_u + e_v)`, deviations
    :math:`\pm\tfrac12(a_u - a_v) - \tfrac12 S`, the difference taken as :math:`-a_u\,\mathrm{expm1}(\log a_v - \log a_u)`
    (or its mirror image), whose exponent is never positive: exact even when one weight underflows to 0.
    """
    a_u, a_v, rest = log_u.exp(), log_v.exp(), log_rest.exp()
    if tied:
        diff = torch.where(log_u >= log_v, -a_u * torch.expm1(log_v - log_u), a_v * torch.expm1(log_u - log_v))
        alpha = torch.stack([0.5 * diff - 0.5 * rest, -0.5 * diff - 0.5 * rest], dim=-1)  # (2 heads, 2 positions)
        half = torch.full_like(alpha[0], 0.5)
        return Deviations(a_star=half, b_star=half, alpha=alpha[0], beta=alpha[1])
    head1_on_u = bool(a_u[0] + a_v[1] >= a_v[0] + a_u[1])
    one = torch.ones_like(a_u[0])
    zero = torch.zeros_like(a_u[0])
    deviations = []
    for head, on_u in ((0, head1_on_u), (1, not head1_on_u)):
        own = -(a_v[head] + rest[head]) if on_u else -(a_u[head] + rest[head])
        deviations.append(torch.stack([own, a_v[head]]) if on_u else torch.stack([a_u[head], own]))
    a_star = torch.stack([one, zero]) if head1_on_u else torch.stack([zero, one])
    return Deviations(a_star=a_star, b_star=1 - a_star, alpha=deviations[0], beta=deviations[1])
