r"""Streamed passes over the positions: the population step and its certificate in memory :math:`O(\text{block}\cdot m)`.

*Passes.* A population step needs the start's normalisers and the gradient (:mod:`xorlib._gradient`), the
direction's top entries (:func:`top_scores`) and the summaries after the step (:func:`after_step`), each a sum
or a top-:math:`k` over positions, accumulated block by block as a :class:`xorlib._source.CodeSource` hands the
blocks over. Where the tied model's codes do not all fit in memory, its last two passes are one
(:mod:`xorlib._candidates`). So a split step reads the codes three times and a tied one once, at
:math:`d = 10^8`. Equal heads are computed once and opposite ones read off each other exactly
(:class:`xorlib._packed.Lookup`); a single step size is scored as the stepped queries :math:`q + \kappa\delta`
themselves (one look-up per head, the scores of the queries the step reports). The split step's second pass, for
the direction's top entries, sums every position's score over the first four sevenths of the groups only and
completes the few whose partial sum can still reach the top (:func:`top_scores`: the same additions, the same
values).

*Rounding.* :func:`after_step`'s ``log_error`` is a rigorous bound
(:func:`xorlib._logsums.log_weight_error`) on the rounding of each log-weight; :func:`pair_deviations` reads the
certificate's deviations at the pair off the log-weights.
This module trusts its callers (the public entry point is :func:`xorlib.one_step`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from . import _kernels as kernels
from ._logsums import LogSums, clamp_changes_nothing, exp_sums, log_weight_error, with_doubled_row
from ._moments import Deviations, OffPair
from ._packed import BlockView, Lookup
from ._source import Views

#: :func:`top_scores` sums this fraction of a block's groups for every position, the rest only where the top may be
#: (8 of 14 groups at :math:`d = 10^8`: with half of them, about one position in seven still had to be completed there).
SCREEN_FRACTION = 4 / 7


def top_scores(views: Views, queries: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One pass: the ``k`` largest scores of each query row and their positions, ``(rows, k)`` each.

    Once every row has ``k`` entries, a packed block's scores are first summed over the first groups only
    (:data:`SCREEN_FRACTION` of them); the positions whose partial score plus the most the remaining groups can add
    (:meth:`xorlib._packed.Lookup.remaining_range`, with its rounding slack) reaches a row's ``k``-th best so
    far are completed with the same additions in the same order (:meth:`xorlib._packed.Lookup.finish`), and the
    others cannot enter the top: the result is that of the full pass.
    """
    lookup = Lookup(queries)
    best_values = torch.full((queries.shape[0], 0), 0.0, dtype=queries.dtype, device=queries.device)
    best_index = torch.zeros((queries.shape[0], 0), dtype=torch.long, device=queries.device)
    screens = bool(lookup.distinct) and all(slot >= 0 for slot, _ in lookup.plan)
    screened = getattr(views, "screened", None) if screens else None
    if screened is not None:  # a CodeSource: packed blocks come with their first groups only
        first = max(1, int(views.groups * SCREEN_FRACTION))
        blocks = screened(first)
    else:
        blocks = ((view, None) for view in views())
    bounds = scratch = None
    offsets: dict[int, list[float]] = {}  # per number of groups screened: each head's most the other groups add
    for view, rest in blocks:
        if view.rows is not None or not screens or (rest is None and best_values.shape[-1] < k):
            best_values, best_index = merge_top(best_values, best_index, lookup(view), view.start, k)
            continue
        if bounds is None:
            bounds = lookup.remaining_range(view.main, view.scale)
        high, low, slack = bounds
        if rest is None:
            first = max(1, int(view.byte_index().shape[0] * SCREEN_FRACTION))
        partial = lookup.distinct_scores(view, first)  # (distinct, rows)
        if best_values.shape[-1] < k:  # every row is completed
            columns = torch.arange(partial.shape[1], device=partial.device)
        else:
            if scratch is None or scratch.rows < partial.shape[1]:  # reused from block to block
                scratch = _Screen(partial.shape[1], partial.dtype, partial.device)
            # a head's score is at most its partial score plus the most the other groups add, offset_h; a negated
            # query's is minus the slot's, at most offset_h - partial with offset_h = -low (the same for every
            # block screened over as many groups)
            if first not in offsets:
                offsets[first] = [
                    float(high[s, first]) if sign > 0 else -float(low[s, first]) for s, sign in lookup.plan
                ]
            thresholds = (best_values[:, -1] - slack).tolist()  # the same doubles as 0-d tensors, fewer calls
            columns = scratch.reaching(partial, lookup.plan, offsets[first], thresholds)
        if columns.numel():
            index = None if rest is None else rest(columns)
            found = lookup.finish(partial[:, columns], view, columns, first, index)
            found = found if lookup.identity else lookup.assemble(found)
            best_values, best_index = merge_top(best_values, best_index, found, view.start, k, columns)
    return best_values, best_index


class _Screen:
    """:func:`top_scores`'s screen of a block's partial scores, in buffers reused from block to block."""

    def __init__(self, rows: int, dtype: torch.dtype, device: torch.device) -> None:
        self.rows = rows
        self.bound = torch.empty(rows, dtype=dtype, device=device)
        self.hits = torch.empty((2, rows), dtype=torch.bool, device=device)
        self.found = torch.empty(rows, dtype=torch.long, device=device)

    def reaching(
        self, partial: torch.Tensor, plan: list[tuple[int, int]], offsets: list[float], thresholds: list[float]
    ) -> torch.Tensor:
        """The rows where some head's bound, ``partial[slot] + offset`` (``offset - partial[slot]`` for a negated
        query), reaches its threshold: one compiled loop (:func:`xorlib._kernels.screen`) where the loops were
        built, else the same additions and comparisons as tensor calls."""
        slots, negate = [slot for slot, _ in plan], [sign < 0 for _, sign in plan]
        compiled = kernels.AVAILABLE and partial.device.type == "cpu" and partial.dtype == torch.float64
        if compiled and partial.stride(-1) == 1 and len(plan) <= 2:  # the loop takes one or two heads
            return kernels.screen(partial, slots, negate, offsets, thresholds, self.found)
        rows = partial.shape[1]
        bound, reach, hit = self.bound[:rows], self.hits[0, :rows], self.hits[1, :rows]
        for head, (slot, negated) in enumerate(zip(slots, negate, strict=True)):
            if negated:
                torch.sub(offsets[head], partial[slot], out=bound)
            else:
                torch.add(partial[slot], offsets[head], out=bound)
            torch.ge(bound, thresholds[head], out=reach if head == 0 else hit)
            if head:
                reach.logical_or_(hit)
        return reach.nonzero().squeeze(1)


def merge_top(
    values: torch.Tensor,
    index: torch.Tensor,
    x: torch.Tensor,
    start: int,
    k: int,
    columns: torch.Tensor | None = None,
    highest: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` largest of ``values`` ``(..., j)`` and of ``x`` ``(..., rows)`` (positions from ``start``), with their positions.

    ``columns``: the offsets from ``start`` of the columns of ``x`` (else ``0, 1, ...``). A block whose largest
    entry is below every row's ``k``-th best so far is skipped (one reduction, or none given ``highest``,
    ``x.amax(-1)``).
    """
    highest = x.amax(-1) if highest is None else highest
    if values.shape[-1] == k and bool((highest < values[..., -1]).all()):
        return values, index
    best = torch.topk(x, min(k, x.shape[-1]), dim=-1)  # the block's best, then merged with the best so far
    offsets = best.indices if columns is None else columns[best.indices]
    values, index = torch.cat([values, best.values], dim=-1), torch.cat([index, offsets + start], dim=-1)
    best = torch.topk(values, min(k, values.shape[-1]), dim=-1)
    return best.values, torch.gather(index, -1, best.indices)


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
    biggest: torch.Tensor  # (..., 2) the largest score magnitude of each head
    off_pair: OffPair | None = None  # with off_pair=True: see after_step
    scores: torch.Tensor | None = None  # with keep_scores=True: the scores (2, d) after the first step size
    direction_values: torch.Tensor | None = None  # with direction_top=k: the k largest entries of each head's t
    direction_index: torch.Tensor | None = None


def after_step(
    views: Views,
    queries: torch.Tensor,
    direction: torch.Tensor,
    kappas: torch.Tensor,
    pair: tuple[int, int],
    d: int,
    *,
    top: bool = True,
    off_pair: bool = False,
    keep_scores: bool = False,
    direct: bool | None = None,
    direction_top: int = 0,
) -> AfterStep:
    r"""One pass: for every step :math:`\kappa` of ``kappas`` ``(K,)``, the scores after the step summarised for the certificate.

    ``queries`` and ``direction`` are ``(2, m)``; the scores after the step are those of the queries
    :math:`q + \kappa\,\delta`: for one step size, the scores of the stepped queries (as rounded, the
    queries the step reports), looked up directly; for several, :math:`s + \kappa t` from the scores
    :math:`s` and :math:`t` of the queries and the direction. Work and memory per block are
    :math:`O(K\cdot\text{rows})`. The scores at the pair are read in the pass, like every other.
    Options: ``top``, the two largest scores of each head (else ``top_values``
    and ``top_index`` are empty); ``off_pair``, also :math:`\sum_{k\notin\{u,v\}}` of
    :math:`a_k^2, b_k^2, a_kb_k, a_k^2b_k^2` after each step (an :class:`xorlib._moments.OffPair` of ``(K,)`` tensors), in
    the log domain; ``keep_scores``, the whole scores after the
    first step size; ``direct=False``, the form :math:`s + \kappa t` for one step size too;
    ``direction_top=k`` (with that form), also the ``k`` largest entries of each head's :math:`t` and their
    positions (``direction_values``, ``direction_index``). Equal heads (the tied model) are computed once.
    """
    u, v = pair
    K = kappas.shape[0]
    H = 1 if torch.equal(queries[0], queries[1]) and torch.equal(direction[0], direction[1]) else 2
    like = {"dtype": queries.dtype, "device": queries.device}
    k = kappas.view(K, 1, 1)
    direct = K == 1 if direct is None else direct
    if direct:
        stepped = Lookup(queries[:H] + kappas[0] * direction[:H])
        reach = [stepped.queries.abs()]  # |q + kappa delta|: the size of the scores' terms
    else:
        lookup_s, lookup_t = Lookup(queries[:H]), Lookup(direction[:H])
        reach = [queries[:H].abs(), direction[:H].abs()]
    sizes = torch.zeros(K, H, **like)  # bound on the sum of |terms| of each score (see log_weight_error)
    parts = LogSums()  # per part: (2 or 3, K, H + off_pair) log-sums
    biggest = torch.zeros((K, H), **like)
    at_pair = torch.zeros((K, H, 2), **like)
    top_values = torch.full((K, H, 0), 0.0, **like)
    top_index = torch.zeros((K, H, 0), dtype=torch.long, device=queries.device)
    kept = []
    found_values = torch.full((H, 0), 0.0, **like)
    found_index = torch.zeros((H, 0), dtype=torch.long, device=queries.device)
    size = max(1024, 2**17 // (K * H))  # sub-blocks of K x rows that stay in cache
    longest = 0
    powers = (1, 2, 4) if off_pair and H == 1 else (1, 2) if off_pair else (1,)
    three = off_pair and H == 2  # the sum of the two heads' scores rides along as a third row of each part
    buffers: dict[tuple[int, int], torch.Tensor] = {}  # with three: (K, 3, n) by (K, n), reused part to part
    packed_terms: dict[tuple[int, float], list[torch.Tensor]] = {}
    for view in views():
        if view.rows is not None:
            terms = [_term_sizes(view, r) for r in reach]  # (H,) each
        else:  # packed: the same for every block of the pass
            key = (view.main, view.scale)
            if key not in packed_terms:
                packed_terms[key] = [_term_sizes(view, r) for r in reach]
            terms = packed_terms[key]
        rows = view.stop - view.start
        if direct:
            if three:
                whole = _buffer(buffers, 1, rows, like)
                stepped(view, out=whole[0, :H])
            else:
                whole = stepped(view).unsqueeze(0)  # (1, H, rows), a fresh tensor: masked in place below
            sizes = torch.maximum(sizes, terms[0].unsqueeze(0))
        else:
            s, t = lookup_s(view), lookup_t(view)
            sizes = torch.maximum(sizes, terms[0] + kappas.view(K, 1) * terms[1])
            if direction_top:
                found_values, found_index = merge_top(found_values, found_index, t, view.start, direction_top)
        for part in range(0, rows, size):
            if direct:
                rows_of = whole[:, :, part : part + size]  # (K, H or 3, n)
            else:
                n = min(size, rows - part)
                if three:
                    rows_of = _buffer(buffers, K, n, like)
                    torch.addcmul(s[:, part : part + n], k, t[:, part : part + n], out=rows_of[:, :H])
                else:
                    rows_of = torch.addcmul(s[:, part : part + n], k, t[:, part : part + n])  # (K, H, n)
            after = rows_of[:, :H]
            if three:  # a third row: the sum of the two heads' scores
                torch.add(after[:, 0], after[:, 1], out=rows_of[:, 2])
            start = view.start + part
            longest = max(longest, after.shape[-1])
            highs = rows_of.amax(-1)  # (separate amax and amin are several times faster than aminmax)
            high, low = highs[:, :H], after.amin(-1)
            biggest = torch.maximum(biggest, torch.maximum(high, -low))
            if top:  # the part's best two, merged with the best so far
                top_values, top_index = merge_top(top_values, top_index, after, start, 2, highest=high)
            if keep_scores:
                kept.append(after[0].clone())
            inside = [
                (slot, position - start)
                for slot, position in enumerate((u, v))
                if start <= position < start + after.shape[-1]
            ]
            if inside:  # the part is masked in place: a fresh tensor or a buffer (kept scores were cloned above)
                for slot, offset in inside:
                    at_pair[..., slot] = after[..., offset]
                rows_of[..., [offset for _, offset in inside]] = -torch.inf  # the third row too: the heads' sum
                highs = rows_of.amax(-1)
            # (powers, K, H or 3), the third row shifted by its own maximum; the part is not read again. Outside the
            # pair every entry is at least its head's least (the third row: the sum of the heads' least): the
            # floor of the exponentials' arguments is then usually not reached, and not applied
            lows = [entry for row in low.tolist() for entry in ([*row, row[0] + row[1]] if three else row)]
            raise_low = bool(inside) or not clamp_changes_nothing(lows, highs.view(-1).tolist(), powers)
            sums = exp_sums(rows_of, highs, powers, in_place=rows_of.is_contiguous(), raise_low=raise_low)
            if off_pair and H == 1:  # the cross row is twice the head's: its sums are those of 2x and 4x
                sums = with_doubled_row(sums)
            parts.add(sums)
    running, depth = parts.total()
    heads = torch.tensor([0, H - 1], device=queries.device)  # distinct head of each head
    rest = running[0, :, :H].index_select(1, heads)  # (K, 2): log of the unnormalised weight off {u, v}
    pair_scores = at_pair.index_select(1, heads)  # (K, 2 heads, 2 positions)
    lse = torch.logsumexp(torch.cat([rest.unsqueeze(-1), pair_scores], dim=-1), dim=-1)
    big = biggest.index_select(1, heads)
    log_error = log_weight_error(big, sizes.index_select(1, heads), d, queries.shape[1], longest, depth)
    sums = None
    if off_pair:
        l1, l2 = lse[:, 0], lse[:, 1]
        logs = torch.stack(
            [running[1, :, 0] - 2 * l1, running[1, :, H - 1] - 2 * l2, running[0, :, H] - l1 - l2,
             running[1, :, H] - 2 * (l1 + l2)]
        )  # fmt: skip
        sums = OffPair(*torch.exp(logs))
    return AfterStep(
        lse=lse, log_weight_u=pair_scores[..., 0] - lse, log_weight_v=pair_scores[..., 1] - lse,
        log_rest=rest - lse, log_error=log_error, top_values=top_values.index_select(1, heads),
        top_index=top_index.index_select(1, heads), biggest=big, off_pair=sums,
        scores=torch.cat(kept, dim=-1).index_select(0, heads) if keep_scores else None,
        direction_values=found_values.index_select(0, heads) if direction_top else None,
        direction_index=found_index.index_select(0, heads) if direction_top else None,
    )  # fmt: skip


def _buffer(buffers: dict[tuple[int, int], torch.Tensor], K: int, n: int, like: dict) -> torch.Tensor:
    """A ``(K, 3, n)`` buffer from ``buffers``, made the first time that shape is asked for."""
    if (K, n) not in buffers:
        buffers[K, n] = torch.empty(K, 3, n, **like)
    return buffers[K, n]


def _term_sizes(view: BlockView, magnitudes: torch.Tensor) -> torch.Tensor:
    r"""For queries of absolute values ``magnitudes`` ``(H, m)``: a bound on :math:`\sum_r |q_r||P_{kr}|` over the block, ``(H,)``."""
    if view.rows is None:  # packed: every nonzero entry is +-scale on the main coordinates
        return view.scale * magnitudes[:, : view.main].sum(-1)
    return (magnitudes @ view.rows.abs().T).amax(-1)


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
