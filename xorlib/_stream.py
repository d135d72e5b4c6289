r"""Streamed passes over the positions: the population step and its certificate in memory :math:`O(\text{block}\cdot m)`.

Every quantity the one-step learner needs is either a sum over positions or a
top-:math:`k` over positions, so it is accumulated block by block while the
codes are regenerated from their seed (:meth:`xorlib.codes.Codes.views`). Softmax
normalisers and moments are accumulated in the log domain: for head scores
:math:`s_1, s_2`,

.. math::

    \langle a, b\rangle = e^{\operatorname{lse}(s_1+s_2) - \operatorname{lse}(s_1) - \operatorname{lse}(s_2)},\quad
    \|a\|^2 = e^{\operatorname{lse}(2s_1) - 2\operatorname{lse}(s_1)},\quad
    \textstyle\sum_k a_k^2b_k^2 = e^{\operatorname{lse}(2s_1+2s_2) - 2\operatorname{lse}(s_1) - 2\operatorname{lse}(s_2)},

so one pass gives all of them. The formulas are those of :mod:`xorlib.population`.
This module trusts its callers (the public entry point is :func:`xorlib.one_step`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch

from .codes import BlockView
from .population import Moments, _loss, _mean_weight_gradient, _pair_terms, _weight_gradient_dense

Views = Callable[[], Iterable[BlockView]]


def _lse_update(running: torch.Tensor, block: torch.Tensor) -> torch.Tensor:
    """Fold a block's log-sum-exp along the last axis into the running value."""
    return torch.logaddexp(running, torch.logsumexp(block, dim=-1))


@dataclass(frozen=True)
class HeadStats:
    """Per-head log-normalisers and moments of softmax attention with scores ``P q`` (all ``(2,)`` or scalars)."""

    lse: torch.Tensor  # (2,)
    smax: torch.Tensor  # (2,)
    smin: torch.Tensor  # (2,)
    moments: Moments


def head_stats(views: Views, queries: torch.Tensor, pair: tuple[int, int], pair_scores: torch.Tensor) -> HeadStats:
    """One pass: log-normalisers, score range and moments of the two heads (``pair_scores``: ``(2, 2)`` scores at u, v)."""
    neg = torch.full((6,), -torch.inf, dtype=queries.dtype, device=queries.device)
    smax = torch.full((2,), -torch.inf, dtype=queries.dtype, device=queries.device)
    smin = -smax
    lse = neg
    for view in views():
        s = view.scores(queries)
        stacked = torch.stack([s[0], s[1], 2 * s[0], 2 * s[1], s[0] + s[1], 2 * (s[0] + s[1])])
        lse = _lse_update(lse, stacked)
        smax, smin = torch.maximum(smax, s.amax(-1)), torch.minimum(smin, s.amin(-1))
    l1, l2, l11, l22, l12, l1122 = lse
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
    centring = torch.stack([_mean_weight_gradient(m, c0, c1) for m in per_head])  # <a, dL/da> per head
    label_terms = [_pair_terms(m, c1) for m in per_head]
    grad = torch.zeros_like(queries)
    for view in views():
        s = view.scores(queries)
        w = torch.exp(s - stats.lse.unsqueeze(1))  # (2, rows): a and b on this block
        g = torch.stack(
            [
                _weight_gradient_dense(w[0], w[1], per_head[0], c0, c1),
                _weight_gradient_dense(w[1], w[0], per_head[1], c0, c1),
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
    return _loss(stats.moments, c0, c1)


def top_scores(views: Views, queries: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One pass: the ``k`` largest scores of each query row and their positions, ``(rows, k)`` each."""
    best_values = torch.full((queries.shape[0], 0), 0.0, dtype=queries.dtype, device=queries.device)
    best_index = torch.zeros((queries.shape[0], 0), dtype=torch.long, device=queries.device)
    for view in views():
        s = view.scores(queries)
        values = torch.cat([best_values, s], dim=1)
        index = torch.cat([best_index, torch.arange(view.start, view.stop, device=s.device).expand(s.shape[0], -1)], 1)
        top = torch.topk(values, min(k, values.shape[1]), dim=1)
        best_values, best_index = top.values, torch.gather(index, 1, top.indices)
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


def after_step(
    views: Views,
    queries: torch.Tensor,
    direction: torch.Tensor,
    kappas: torch.Tensor,
    pair: tuple[int, int],
    pair_scores: torch.Tensor,
    pair_direction: torch.Tensor,
    d: int,
) -> AfterStep:
    r"""One pass: for every step :math:`\kappa` of ``kappas`` ``(K,)``, the scores :math:`s + \kappa t` summarised for the certificate.

    ``queries`` and ``direction`` are ``(2, m)``; the scores after the step are
    those of the queries :math:`q + \kappa\,\delta`. ``pair_scores`` and
    ``pair_direction`` are the ``(2, 2)`` values of :math:`s` and :math:`t` at
    :math:`(u, v)`. Work and memory per block are :math:`O(K\cdot\text{rows})`.
    """
    u, v = pair
    K = kappas.shape[0]
    shape = (K, 2)
    lse = torch.full(shape, -torch.inf, dtype=queries.dtype, device=queries.device)
    rest = lse.clone()
    biggest = torch.zeros(shape, dtype=queries.dtype, device=queries.device)
    top_values = torch.full((K, 2, 0), 0.0, dtype=queries.dtype, device=queries.device)
    top_index = torch.zeros((K, 2, 0), dtype=torch.long, device=queries.device)
    k = kappas.view(K, 1, 1)
    for view in views():
        s, t = view.scores(queries), view.scores(direction)
        for part in range(0, s.shape[1], 8192):  # sub-blocks keep K x rows small
            after = s[:, part : part + 8192] + k * t[:, part : part + 8192]  # (K, 2, rows)
            start = view.start + part
            lse = _lse_update(lse, after)
            biggest = torch.maximum(biggest, after.abs().amax(-1))
            masked = after.clone()
            for position in (u, v):
                if start <= position < start + after.shape[-1]:
                    masked[..., position - start] = -torch.inf
            rest = _lse_update(rest, masked)
            positions = torch.arange(start, start + after.shape[-1], device=after.device).expand_as(after)
            values = torch.cat([top_values, after], dim=-1)
            index = torch.cat([top_index, positions], dim=-1)
            top = torch.topk(values, min(2, values.shape[-1]), dim=-1)
            top_values, top_index = top.values, torch.gather(index, -1, top.indices)
    at_pair = pair_scores.unsqueeze(0) + k * pair_direction.unsqueeze(0)  # (K, 2 heads, 2 positions)
    log_error = 16 * torch.finfo(queries.dtype).eps * (biggest + math.log(d) + 1)
    return AfterStep(
        lse=lse, log_weight_u=at_pair[..., 0] - lse, log_weight_v=at_pair[..., 1] - lse, log_rest=rest - lse,
        log_error=log_error, top_values=top_values, top_index=top_index,
    )  # fmt: skip


def off_pair_sums(
    views: Views, queries: torch.Tensor, pair: tuple[int, int], lse: torch.Tensor
) -> dict[str, torch.Tensor]:
    r"""One pass: :math:`\sum_{k\notin\{u,v\}}` of :math:`a_k^2, b_k^2, a_kb_k, a_k^2b_k^2` (keys ``XX, YY, XY, XXYY``), in the log domain."""
    u, v = pair
    running = torch.full((4,), -torch.inf, dtype=queries.dtype, device=queries.device)
    for view in views():
        s = view.scores(queries)
        for position in (u, v):
            if view.start <= position < view.stop:
                s[:, position - view.start] = -torch.inf
        running = _lse_update(running, torch.stack([2 * s[0], 2 * s[1], s[0] + s[1], 2 * (s[0] + s[1])]))
    l1, l2 = lse
    logs = running - torch.stack([2 * l1, 2 * l2, l1 + l2, 2 * (l1 + l2)])
    return dict(zip(("XX", "YY", "XY", "XXYY"), torch.exp(logs), strict=True))


def pair_deviations(
    log_u: torch.Tensor, log_v: torch.Tensor, log_rest: torch.Tensor, heads: str
) -> dict[str, torch.Tensor]:
    r"""The exact configuration nearest the heads and the deviations from it at :math:`(u, v)`, from log-weights ``(2,)``.

    Split: head 1 on whichever of :math:`u, v` the assignment favours, head 2 on
    the other; a head's deviation on its own bit is :math:`-(\alpha_o + S)`, never
    :math:`a - 1`. Tied: both heads on :math:`\tfrac12(e_u + e_v)`, deviations
    :math:`\pm\tfrac12(a_u - a_v) - \tfrac12 S`, the difference taken as :math:`a_v\,\mathrm{expm1}(\log a_u - \log a_v)`.
    """
    a_u, a_v, rest = log_u.exp(), log_v.exp(), log_rest.exp()
    if heads == "tied":
        diff = a_v * torch.expm1(log_u - log_v)
        alpha = torch.stack([0.5 * diff - 0.5 * rest, -0.5 * diff - 0.5 * rest], dim=-1)  # (2 heads, 2 positions)
        half = torch.full_like(alpha[0], 0.5)
        return {"A": half, "B": half, "X": alpha[0], "Y": alpha[1]}
    head1_on_u = bool(a_u[0] + a_v[1] >= a_v[0] + a_u[1])
    one = torch.ones_like(a_u[0])
    zero = torch.zeros_like(a_u[0])
    deviations = []
    for head, on_u in ((0, head1_on_u), (1, not head1_on_u)):
        own = -(a_v[head] + rest[head]) if on_u else -(a_u[head] + rest[head])
        deviations.append(torch.stack([own, a_v[head]]) if on_u else torch.stack([a_u[head], own]))
    a_star = torch.stack([one, zero]) if head1_on_u else torch.stack([zero, one])
    return {"A": a_star, "B": 1 - a_star, "X": deviations[0], "Y": deviations[1]}
