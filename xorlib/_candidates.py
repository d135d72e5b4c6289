r"""The tied model's last two passes as one, where its codes do not all fit in memory: the positions that matter.

After the tied model's step, attention sits on a few positions. One pass over the direction's scores
(:func:`direction_pass`) finds its top entries and keeps as candidates every position that can still weigh after
any admissible step, with a bound on the mass of the others; the summaries after the step then come from the
candidates alone (:func:`after_from_candidates`), with that mass in the rounding allowance.
This module trusts its callers (the public entry point is :func:`xorlib.one_step`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ._logsums import LogSums, exp_sums, log_weight_error, with_doubled_row
from ._moments import OffPair
from ._packed import Lookup
from ._source import Views
from ._stream import AfterStep, merge_top
from .codes import Codes

#: Candidate positions: a position is dropped when its bound term is below ``exp(-CANDIDATE_MARGIN)``.
CANDIDATE_MARGIN = 50.0
#: The summaries from candidates are used when the dropped positions' bound terms add up to at most this: the
#: sums off the pair then change by less than their own rounding unit.
NEGLECTED_AT_MOST = 2.0**-52
#: At most this many candidate positions are kept (24 or 40 bytes each); beyond, the summaries take a pass of their own.
CANDIDATE_CAP = 2**22


@dataclass(frozen=True)
class DirectionPass:
    r"""One pass over the direction's scores :math:`t`: its top entries, its minimum, and candidate positions.

    ``candidates`` holds every position above the thresholds that a step of at least ``floor`` needs (see
    :func:`direction_pass`): positions ``(n,)`` and their scores ``s`` and ``t`` ``(heads, n)`` (``s`` is
    ``None`` for zero queries); ``None`` if there were more than :data:`CANDIDATE_CAP`. ``neglected`` bounds,
    for every step of at least ``floor``, the sum over the other positions relative to the largest term off
    the pair, in each sum the summaries need.
    """

    values: torch.Tensor  # (heads, k) the k largest entries of each head's t
    index: torch.Tensor  # (heads, k) their positions
    low: torch.Tensor  # (heads,) the smallest entry of each head's t
    floor: float  # the smallest step for which the candidates suffice
    neglected: float
    candidates: tuple[torch.Tensor, torch.Tensor | None, torch.Tensor] | None


def direction_pass(
    views: Views,
    queries: torch.Tensor,
    direction: torch.Tensor,
    pair: tuple[int, int],
    kappa_floor: Callable[[torch.Tensor], float],
    d: int,
    k: int = 3,
) -> DirectionPass:
    r"""One pass: the top ``k`` of the direction's scores :math:`t = P\delta`, and the positions any admissible step needs.

    ``kappa_floor(values)`` gives a lower bound :math:`\kappa_0` on the step the rule will take, from lower
    bounds on the final top entries (the running ones, ``(heads, j)``). After a step :math:`\kappa \ge \kappa_0`
    the scores are :math:`x = s + \kappa t` with :math:`|s| \le R`; let :math:`t^-` be a lower bound on the
    largest :math:`t` off the pair (the running top entries off the pair). Every position with
    :math:`t < t^-` has :math:`e^{x - \max_{\text{off pair}} x} \le e^{2R + \kappa_0 (t - t^-)}` (the bound term), and
    the same holds for the sum of the two heads' scores (the off-pair moments) with :math:`4R`. A position is
    kept as a candidate while some bound term exceeds :math:`e^{-\text{margin}}`; the dropped positions' terms
    are added up (``neglected``), with the :math:`\kappa_0, t^-` of the moment they were dropped: both only rise,
    which only shrinks the terms. The summaries after the step then come from the candidates
    (:func:`after_from_candidates`), with the neglected mass in the rounding allowance.
    """
    equal = torch.equal(direction[0], direction[1]) and torch.equal(queries[0], queries[1])
    H = 1 if equal else 2
    like = {"dtype": queries.dtype, "device": queries.device}
    lookup_t, lookup_s = Lookup(direction[:H]), Lookup(queries[:H])
    zero = not lookup_s.distinct
    reach = views.scale * float(queries[:H].abs().sum(-1).max())  # every |s| is at most this
    offsets = torch.tensor([2 * reach] * H + [4 * reach] * (H == 2), **like)  # c in each bound term
    pair_index = torch.tensor(pair, device=queries.device)
    values = torch.full((H, 0), 0.0, **like)
    index = torch.zeros((H, 0), dtype=torch.long, device=queries.device)
    low = torch.full((H,), torch.inf, **like)
    cross_high = torch.tensor(-torch.inf, **like)  # the largest t_1 + t_2 off the pair so far
    floor, reference = 0.0, None
    tau = torch.full((H + (H == 2),), -torch.inf, **like)
    neglected = torch.zeros(H + (H == 2), **like)
    store = _Candidates(H, zero, like)

    def rows_of(t: torch.Tensor) -> torch.Tensor:
        return t if H == 1 else torch.cat([t, (t[0] + t[1]).unsqueeze(0)])

    def drop(rows: torch.Tensor, dropped: torch.Tensor) -> None:
        """Add the bound terms of the dropped positions (columns of ``rows``) to ``neglected``."""
        terms = torch.addcmul((offsets - floor * reference).unsqueeze(1), rows, torch.tensor(floor, **like))
        neglected.add_((terms.clamp_(min=-700.0).exp_() * dropped).sum(-1))

    def prune() -> None:
        t = store.view()[2]
        rows = rows_of(t)
        keep = (rows > tau.unsqueeze(1)).any(0)
        if reference is not None:
            drop(rows, ~keep)
        store.keep(keep)

    collecting, limit = True, 2**18
    for view in views():
        t = lookup_t(view)
        values, index = merge_top(values, index, t, view.start, k)
        low = torch.minimum(low, t.amin(-1))
        rows = rows_of(t)
        if H == 2:
            summed = rows[2]
            inside = [p - view.start for p in pair if view.start <= p < view.stop]
            if inside:
                summed = summed.clone()
                summed[inside] = -torch.inf
            cross_high = torch.maximum(cross_high, summed.amax())
        bound = kappa_floor(values)
        best_off = torch.where(torch.isin(index, pair_index), -torch.inf, values).amax(1)  # (H,)
        floor = max(floor, bound)
        if floor > 0 and bool(torch.isfinite(best_off).all()) and (H == 1 or bool(torch.isfinite(cross_high))):
            reference = torch.cat([best_off, cross_high.view(1)]) if H == 2 else best_off
            tau = torch.maximum(tau, reference - (offsets + CANDIDATE_MARGIN) / floor)
        if not collecting:
            continue
        keep = (rows > tau.unsqueeze(1)).any(0)
        if reference is not None:
            drop(rows, ~keep)
        chosen = keep.nonzero().squeeze(1)
        if chosen.numel():
            store.append(chosen + view.start, None if zero else lookup_s(view)[:, chosen], t[:, chosen])
        if store.count > limit:  # prune as the thresholds rise: memory stays within twice what survives
            prune()
            collecting, limit = store.count <= CANDIDATE_CAP, max(2**18, 2 * store.count)
    candidates = None
    if collecting:
        prune()
        positions, s, t = store.view()
        candidates = (positions.clone(), None if s is None else s.clone(), t.clone())
    return DirectionPass(
        values=values, index=index, low=low, floor=floor, neglected=float(neglected.max()), candidates=candidates
    )


class _Candidates:
    """Candidate positions and their scores in one growing buffer (doubled when full): no small long-lived tensors."""

    def __init__(self, heads: int, zero: bool, like: dict) -> None:
        self.count, self.zero, self.like = 0, zero, like
        self.positions = torch.empty(0, dtype=torch.long, device=like["device"])
        self.values = torch.empty(heads * (1 if zero else 2), 0, **like)  # rows: t, then s

    def append(self, positions: torch.Tensor, s: torch.Tensor | None, t: torch.Tensor) -> None:
        n = positions.numel()
        if self.count + n > self.positions.numel():
            size = max(2 * (self.count + n), 2**16)
            grown = torch.empty(size, dtype=torch.long, device=self.positions.device)
            grown[: self.count] = self.positions[: self.count]
            values = self.values.new_empty(self.values.shape[0], size)
            values[:, : self.count] = self.values[:, : self.count]
            self.positions, self.values = grown, values
        self.positions[self.count : self.count + n] = positions
        heads = t.shape[0]
        self.values[:heads, self.count : self.count + n] = t
        if s is not None:
            self.values[heads:, self.count : self.count + n] = s
        self.count += n

    def view(self) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """``(positions, s, t)`` of the candidates so far (views into the buffer)."""
        heads = self.values.shape[0] // (1 if self.zero else 2)
        values = self.values[:, : self.count]
        return self.positions[: self.count], None if self.zero else values[heads:], values[:heads]

    def keep(self, mask: torch.Tensor) -> None:
        """Keep the candidates where ``mask`` (over the current ones) is true, in place."""
        n = int(mask.sum())
        self.positions[:n] = self.positions[: self.count][mask]
        self.values[:, :n] = self.values[:, : self.count][:, mask]
        self.count = n


def after_from_candidates(
    found: DirectionPass,
    queries: torch.Tensor,
    direction: torch.Tensor,
    kappa: float,
    pair: tuple[int, int],
    pair_scores: torch.Tensor,
    pair_direction: torch.Tensor,
    d: int,
    scale: float,
) -> AfterStep:
    r""":func:`xorlib._stream.after_step`'s summaries (one step, ``off_pair=True``) from the candidates of :func:`direction_pass`.

    Needs ``kappa >= found.floor``. ``pair_scores`` and ``pair_direction`` ``(heads, 2)`` are :math:`s` and
    :math:`t` at :math:`(u, v)` with the pass's arithmetic; the scores after the step are :math:`s + \kappa t`,
    as in :func:`xorlib._stream.after_step` with ``direct=False``. The largest score magnitude is bounded by
    :math:`R + \kappa\max(|\min t|, \max t)` where the candidates do not reach.
    """
    u, v = pair
    positions, s, t = found.candidates
    H = t.shape[0]
    like = {"dtype": queries.dtype, "device": queries.device}
    k = torch.tensor(kappa, **like)
    rest = (positions != u) & (positions != v)
    after = torch.addcmul(torch.zeros_like(t) if s is None else s, k, t)  # (H, n)
    at_pair = torch.addcmul(pair_scores, k, pair_direction)  # (H, 2)
    where, order = torch.cat([positions[rest], torch.tensor([u, v], device=positions.device)]).sort()
    every = torch.cat([after[:, rest], at_pair], dim=1)[:, order]  # by position: equal scores go to the first
    best = torch.sort(every, dim=1, descending=True, stable=True)
    top_values, top_index = best.values[:, :2], where[best.indices[:, :2]]
    reach = scale * float(queries[:H].abs().sum(-1).max())
    outside = reach + kappa * float(torch.maximum(found.low.abs(), found.values[:, 0].abs()).max())
    biggest = torch.clamp(every.abs().amax(1), min=outside)  # (H,)
    powers = (1, 2, 4) if H == 1 else (1, 2)

    def highest(x: torch.Tensor) -> torch.Tensor:
        return x.amax(-1) if x.shape[-1] else x.new_full(x.shape[:-1], -torch.inf)

    parts, remaining = LogSums(), after[:, rest].unsqueeze(0)  # (1, H, n), summed in parts of a block's length
    longest = min(remaining.shape[-1], Codes.BLOCK)
    for start in range(0, max(remaining.shape[-1], 1), Codes.BLOCK):
        others = remaining[..., start : start + Codes.BLOCK]
        sums = exp_sums(others, highest(others), powers)  # (powers, 1, H)
        if H == 2:
            cross = others[:, 0] + others[:, 1]
            sums = torch.cat([sums, exp_sums(cross, highest(cross), powers).unsqueeze(-1)], dim=-1)
        else:
            sums = with_doubled_row(sums)
        parts.add(sums)
    sums, depth = parts.total()
    heads = torch.tensor([0, H - 1], device=queries.device)
    rest_lse = sums[0, :, :H].index_select(1, heads)  # (1, 2)
    pair_after = at_pair.index_select(0, heads).unsqueeze(0)  # (1, 2 heads, 2 positions)
    lse = torch.logsumexp(torch.cat([rest_lse.unsqueeze(-1), pair_after], dim=-1), dim=-1)
    big = biggest.index_select(0, heads).unsqueeze(0)
    sizes = scale * (queries[:H].abs().sum(-1) + kappa * direction[:H].abs().sum(-1))
    log_error = log_weight_error(
        big, sizes.index_select(0, heads).unsqueeze(0), d, queries.shape[1], max(longest, 1), depth
    )
    log_error = log_error + 4 * found.neglected  # the dropped positions: at most this much of any sum off the pair
    l1, l2 = lse[:, 0], lse[:, 1]
    logs = torch.stack(
        [sums[1, :, 0] - 2 * l1, sums[1, :, H - 1] - 2 * l2, sums[0, :, H] - l1 - l2, sums[1, :, H] - 2 * (l1 + l2)]
    )
    return AfterStep(
        lse=lse, log_weight_u=pair_after[..., 0] - lse, log_weight_v=pair_after[..., 1] - lse, log_rest=rest_lse - lse,
        log_error=log_error, top_values=top_values.index_select(0, heads).unsqueeze(0),
        top_index=top_index.index_select(0, heads).unsqueeze(0), biggest=big, off_pair=OffPair(*torch.exp(logs)),
    )  # fmt: skip
