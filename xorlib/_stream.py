r"""Streamed passes over the positions: the population step and its certificate in memory :math:`O(\text{block}\cdot m)`.

Every quantity the one-step learner needs is either a sum over positions or a
top-:math:`k` over positions, so it is accumulated block by block while the
codes are regenerated from their seed (:class:`CodeSource`), or kept, packed,
for all the passes of a step as far as they fit in memory. Softmax
normalisers and moments are accumulated in the log domain: for head scores
:math:`s_1, s_2`,

.. math::

    \langle a, b\rangle = e^{\operatorname{lse}(s_1+s_2) - \operatorname{lse}(s_1) - \operatorname{lse}(s_2)},\quad
    \|a\|^2 = e^{\operatorname{lse}(2s_1) - 2\operatorname{lse}(s_1)},\quad
    \textstyle\sum_k a_k^2b_k^2 = e^{\operatorname{lse}(2s_1+2s_2) - 2\operatorname{lse}(s_1) - 2\operatorname{lse}(s_2)},

so one pass gives all of them, and one exponential per entry gives both
:math:`\operatorname{lse}(x)` and :math:`\operatorname{lse}(2x)` (:func:`_exp_sums`). The
formulas are those of :mod:`xorlib.population`.

*Passes.* A population step needs the start's normalisers (:func:`head_stats`), the gradient
(:func:`population_gradient`), the direction's top entries (:func:`top_scores`) and the summaries after the
step (:func:`after_step`). Opposite heads (the split model's start) get the first two in one pass
(:func:`start_and_gradient`); at zero queries (the tied model's start) they need no codes: every score is
zero, and for balanced codes the pull-back of a constant vanishes (every column sums to zero), so only the
two hidden rows remain. Where the tied model's codes do not all fit in memory, its last two passes are one
(:func:`direction_pass`, :func:`after_from_candidates`): the positions that can matter after the step are few.
So a split step reads the codes three times and a tied one once, at :math:`d = 10^8`. Equal heads are computed
once and opposite ones read off each other exactly (:class:`xorlib._packed.Lookup`); a single step size is
scored as the stepped queries :math:`q + \kappa\delta` themselves (one look-up per head, the scores of the
queries the step reports). The split step's second pass, for the direction's top entries, sums every
position's score over the first four sevenths of the groups only and completes the few whose partial sum can still
reach the top (:func:`top_scores`: the same additions, the same values). The split step's later passes read
the codes kept from its first (as the half of each balanced block's bytes that determines the rest, up to
:data:`HALVES_FACTOR` times :data:`KEEP_CODES_BYTES`: 86 % of them at :math:`d = 10^8`) and regenerate the
others. On the CPU, where the package's C loops were built (:mod:`xorlib._kernels`), every pass hands them
the blocks' bytes: the look-up sums and the pull-back's histograms are then one call per block, with the
same additions in the same order, so the results are the same bit for bit.

*Rounding.* :func:`after_step`'s ``log_error`` is a rigorous bound (:func:`_log_weight_error`) on the
rounding of each log-weight: the look-up scores, the exponentials, every sum in any order
(:math:`\gamma_n`, Higham Thm 4.4) and the pairwise combination of the blocks' log-sums (and, from candidates,
the mass of the positions left out).
This module trusts its callers (the public entry point is :func:`xorlib.one_step`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

import torch

from . import _kernels as kernels
from ._moments import Deviations, Moments, OffPair, loss, mean_weight_gradient, pair_terms
from ._packed import (
    PER_COORDINATE_BELOW,
    BlockView,
    Lookup,
    Pull,
    half_column_bytes,
    half_columns,
    raw_column_bytes,
    whole_columns,
)
from .codes import Codes

Views = Callable[[], Iterable[BlockView]]  # each pass calls it once; the items have start, stop, scores, pull
Rest = Callable[[torch.Tensor], torch.Tensor]  # a block's remaining look-up indices at some rows (CodeSource.screened)
#: Packed codes are kept in memory, for all the passes of a step, up to this many bytes (the rest is regenerated);
#: codes that do not all fit, up to :data:`HALVES_FACTOR` times as many bytes as halves (:class:`CodeSource`).
KEEP_CODES_BYTES = 2**28
#: Halves may take this multiple of :data:`KEEP_CODES_BYTES` (576 MiB: 86 % of the blocks at :math:`d = 10^8`, whose
#: split step then peaks at about 0.87 GB for the whole process, 0.93 GB where more of torch's files start resident).
HALVES_FACTOR = 2.25


class CodeSource:
    """The passes' source of blocks: kept in memory as far as :data:`KEEP_CODES_BYTES` allows, else regenerated.

    Either way every pass sees the same blocks (they depend only on the seed), so the results do not
    depend on the choice. Packed blocks come as look-up indices in buffers that the next block
    overwrites: a pass uses each block before asking for the next; the indices are the bytes themselves
    where the compiled loops read them (``compiled``: on the CPU, where :mod:`xorlib._kernels` was built),
    else int32. Codes that fit whole as int32 indices are kept as indices (unless ``compiled``), else codes
    that fit whole as bytes (4x smaller) as bytes; otherwise, unless ``partial``
    is false (a caller that reads the codes once where they do not all fit), the first blocks are kept, as
    many as fit: balanced blocks that pair whole groups as the half of their bytes that determines the rest
    (8x smaller than indices, :func:`xorlib._packed.half_columns`), in :data:`HALVES_FACTOR` times the budget,
    others as bytes.
    """

    def __init__(
        self, codes: Codes, device: torch.device, keep_bytes: int | None = None, *, partial: bool = True
    ) -> None:
        keep_bytes = KEEP_CODES_BYTES if keep_bytes is None else keep_bytes
        self.codes, self.device, self.d = codes, torch.device(device), codes.d
        self.balanced = codes.kind == "balanced"
        self.groups = (codes.main + 7) // 8
        self.scale = 1.0 / math.sqrt(codes.nonzeros) if codes.packed else 1.0
        blocks = codes.num_blocks
        largest = largest_rows(codes)
        self.halves = False
        # bytes go to the compiled loops as they are (no int32 copy, and kept 4x smaller) where those were built
        self.compiled = codes.packed and self.device.type == "cpu" and kernels.AVAILABLE
        if codes.packed:
            last = codes._block_range(blocks - 1) if blocks else (0, 0)
            smallest = last[1] - last[0]
            whole = codes.bulk * self.groups <= keep_bytes  # all the bytes fit: kept whole (as indices if they fit)
            self.halves = partial and not whole and self.balanced and smallest >= PER_COORDINATE_BELOW
            as_indices = codes.bulk * self.groups * 4 <= keep_bytes and not self.compiled
            self.kept_dtype = torch.int32 if as_indices else torch.uint8
            per_block = largest * self.groups * self.kept_dtype.itemsize // (2 if self.halves else 1)
            keep_bytes = int(keep_bytes * HALVES_FACTOR) if self.halves else keep_bytes
        else:
            self.kept_dtype, per_block = torch.float64, largest * codes.m * 8
        self.keep_blocks = blocks if per_block * blocks <= keep_bytes else keep_bytes // per_block if partial else 0
        self.kept: dict[int, torch.Tensor] = {}
        self._mu: torch.Tensor | None = None  # (keep_blocks, groups): the pairings of the kept halves
        self._words: torch.Tensor | None = None
        self._store: torch.Tensor | None = None
        self._bytes: torch.Tensor | None = None
        self._index: torch.Tensor | None = None
        self._wide: torch.Tensor | None = None  # int64 look-up indices of a block (wide passes)
        self._tail: torch.Tensor | None = None
        self._drawn_mu: torch.Tensor | None = None  # (groups,): the pairing of the block last drawn (not kept)
        self._last_columns: torch.Tensor | None = None  # the bytes of the block last indexed (uint8), if at hand

    @property
    def keeps_all(self) -> bool:
        """Whether every block is kept in memory (no pass regenerates codes)."""
        return self.keep_blocks >= self.codes.num_blocks

    def __call__(self, wide: bool = False) -> Iterator[BlockView]:
        """The blocks of a pass; ``wide``: packed ones with int64 look-up indices (a pull-back scatters with them)."""
        codes, m, main, scale = self.codes, self.codes.m, self.codes.main, self.scale
        for block in range(codes.num_blocks):
            start, stop = codes._block_range(block)
            if not codes.packed:
                rows = self.kept.get(block)
                if rows is None:
                    rows = codes._dense_block(block, torch.float64, self.device)
                    if block < self.keep_blocks:
                        self.kept[block] = rows
                yield BlockView(start, stop, m, m, 1.0, rows=rows)
                continue
            index = self._block_index(block, stop - start, wide)
            yield BlockView(start, stop, m, main, scale, index=index, columns=self._last_columns)
        if codes.odd_balanced:
            yield from self._tail_views()

    def screened(self, first: int) -> Iterator[tuple[BlockView, Rest | None]]:
        """The blocks of a pass, packed ones with the look-up indices of their first ``first`` groups only, each with
        ``rest(columns)``: the indices ``(groups - first, n)`` of the other groups at those rows (``None``: dense).

        The same bytes as :meth:`__call__`. Balanced blocks kept as halves, and those drawn again, build only the
        first groups' columns and read the few bytes asked for off the halves or the draws
        (:func:`xorlib._packed.half_column_bytes`, :func:`xorlib._packed.raw_column_bytes`).
        """
        codes, main = self.codes, self.codes.main
        if not (codes.packed and self.halves):
            for view in self():
                index = view.index
                if index is None:
                    yield view, None
                else:
                    yield replace(view, index=index[:first]), lambda columns, index=index: index[first:, columns]
            return
        for block in range(codes.num_blocks):
            start, stop = codes._block_range(block)
            rows = stop - start
            kept = self.kept.get(block)
            if kept is None and block < self.keep_blocks:  # not kept yet: drawn whole, and kept
                index = self._block_index(block, rows)
                yield self._view(block, index[:first]), lambda columns, index=index: index[first:, columns]
                continue
            self._buffers()
            out = self._bytes[:, :rows]
            if kept is not None:
                mu = self._mu[block]
                whole_columns(kept, mu, main, out, first)

                def rest(columns: torch.Tensor, kept=kept, mu=mu, rows=rows) -> torch.Tensor:
                    return self._as_index(half_column_bytes(kept, mu, main, rows, columns, first))

            else:
                codes._paired_columns(block, self._words, out, self._drawn_mu, first)
                raw = self._words.view(torch.uint8)[: rows * self.groups].view(rows, self.groups)

                def rest(columns: torch.Tensor, raw=raw) -> torch.Tensor:
                    return self._as_index(raw_column_bytes(raw, self._drawn_mu, main, columns, first))

            yield (
                self._view(block, out[:first] if self.compiled else self._index[:first, :rows].copy_(out[:first])),
                rest,
            )
        if codes.odd_balanced:
            yield next(iter(self._tail_views())), None

    def _as_index(self, columns: torch.Tensor) -> torch.Tensor:
        """Bytes ``(groups, n)`` as look-up indices: as they are for the compiled loops, else int32."""
        return columns if self.compiled else columns.to(torch.int32)

    def _view(self, block: int, index: torch.Tensor) -> BlockView:
        start, stop = self.codes._block_range(block)
        return BlockView(start, stop, self.codes.m, self.codes.main, self.scale, index=index)

    def _tail_views(self) -> Iterator[BlockView]:
        if self._tail is None:
            self._tail = (self.codes._tail_signs() * self.scale).to(device=self.device, dtype=torch.float64)
        yield BlockView(self.codes.bulk, self.codes.d, self.codes.m, self.codes.main, self.scale, rows=self._tail)

    def _buffers(self) -> None:
        """Allocate the reused buffers of drawn blocks (once)."""
        if self._index is None:
            largest = largest_rows(self.codes)
            self._words = torch.empty(-(-largest * self.groups // 8), dtype=torch.int64)
            self._bytes = torch.empty(self.groups, largest, dtype=torch.uint8)
            self._index = torch.empty(self.groups, largest, dtype=torch.int32, device=self.device)
            self._mu = torch.zeros(self.keep_blocks, self.groups, dtype=torch.long)
            self._drawn_mu = torch.zeros(self.groups, dtype=torch.long)

    def _block_index(self, block: int, rows: int, wide: bool = False) -> torch.Tensor:
        """The look-up indices ``(groups, rows)`` of a block: kept, or drawn into the reused buffers (int64 if ``wide``)."""
        kept = self.kept.get(block)
        self._last_columns = None
        if kept is not None and kept.dtype == torch.int32 and not wide:
            return kept
        self._buffers()
        if kept is not None and kept.dtype == torch.int32:
            columns = kept
        else:
            columns = self._last_columns = self._columns(block, rows, self._words, self._bytes[:, :rows])
        if self.compiled:  # bytes, never kept as int32 (see __init__)
            return columns
        if not wide:
            return self._index[:, :rows].copy_(columns)
        if self._wide is None:  # one copy of the bytes serves both the look-ups and the pull-back's scatter
            self._wide = torch.empty(self._index.shape, dtype=torch.int64, device=self.device)
        return self._wide[:, :rows].copy_(columns)

    def _columns(self, block: int, rows: int, words: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """The bytes ``(groups, rows)`` of a block: kept (whole, or rebuilt from its halves into ``out``), or drawn
        into ``out`` (``words``: the random words' buffer) and kept if it is among the first ``keep_blocks``."""
        kept = self.kept.get(block)
        if kept is not None and not self.halves:
            return kept
        if kept is not None:
            return whole_columns(kept, self._mu[block], self.codes.main, out)
        keep = block < self.keep_blocks and self._mu is not None
        mu = self._mu[block] if keep and self.halves else None
        columns = self.codes._paired_columns(block, words, out, mu)
        if keep:  # into one buffer for all kept blocks, allocated once
            if self._store is None:
                largest = largest_rows(self.codes)
                self._store = torch.empty(
                    self.keep_blocks,
                    self.groups,
                    largest // 2 if self.halves else largest,
                    dtype=self.kept_dtype,
                    device=torch.device("cpu") if self.halves else self.device,
                )
            if self.halves:
                self.kept[block] = half_columns(columns, mu, self._store[block, :, : rows // 2])
            else:
                self.kept[block] = self._store[block, :, :rows].copy_(columns)
        return columns

    def row_view(self, position: int) -> BlockView:
        """A one-row view of ``position``: the bits of its block, so a look-up gives exactly the pass's score there."""
        codes, m = self.codes, self.codes.m
        if position >= codes.bulk:  # the odd-d tail: dense rows
            tail = (codes._tail_signs() * self.scale).to(device=self.device, dtype=torch.float64)
            return BlockView(
                position,
                position + 1,
                m,
                codes.main,
                self.scale,
                rows=tail[position - codes.bulk : position - codes.bulk + 1],
            )
        block = codes._block_of(position)
        start, stop = codes._block_range(block)
        if not codes.packed:
            rows = codes._dense_block(block, torch.float64, self.device)
            return BlockView(position, position + 1, m, m, 1.0, rows=rows[position - start : position - start + 1])
        columns = self.kept.get(block)
        if columns is None or self.halves:
            words = torch.empty(-(-(stop - start) * self.groups // 8), dtype=torch.int64)
            out = torch.empty(self.groups, stop - start, dtype=torch.uint8)
            columns = self._columns(block, stop - start, words, out) if columns is not None else None
            if columns is None:
                columns = codes._paired_columns(block, words, out)
        index = columns[:, position - start : position - start + 1].to(device=self.device, dtype=torch.int32)
        return BlockView(position, position + 1, m, codes.main, self.scale, index=index.contiguous())


def largest_rows(codes: Codes) -> int:
    """Rows of the longest block (the first blocks are the longest)."""
    return codes._block_range(0)[1] - codes._block_range(0)[0] if codes.num_blocks else 0


def code_views(codes: Codes, device: torch.device, *, partial: bool = True) -> Views:
    """The passes' source of blocks for ``codes`` (:class:`CodeSource`)."""
    return CodeSource(codes, device, partial=partial)


def scores(views: Views, queries: torch.Tensor) -> torch.Tensor:
    """One pass: all the scores ``(heads, d)`` of queries ``(heads, m)`` (for moderate ``d``)."""
    lookup = Lookup(queries)
    return torch.cat([lookup(view) for view in views()], dim=-1)


def _exp_sums(x: torch.Tensor, top: torch.Tensor, powers: tuple[int, ...] = (1, 2)) -> torch.Tensor:
    r""":math:`\log\sum_k e^{p x_k}` along the last axis for each ``p`` of ``powers``, ``(len(powers), ...)``: one exponential.

    All are shifted by the same maximum :math:`M` (``top``): :math:`e^{2(x_k - M)}` is the square of
    :math:`e^{x_k - M}`, :math:`e^{4(x_k - M)}` the square of that. A row of :math:`-\infty` (masked) sums to
    :math:`-\infty`.
    """
    empty = top == -torch.inf
    top = torch.where(empty, torch.zeros_like(top), top)
    # Arguments below -680/p are raised to it: exp then never underflows (a slow path, and subnormal squares),
    # and a raised term adds at most e^{-680/p} to a sum of at least 1 (_log_weight_error counts it).
    e = torch.sub(x, top.unsqueeze(-1)).clamp_(min=UNDERFLOW / max(powers)).exp_()
    out = []
    for power in powers:
        if power == 1:
            out.append(e.sum(-1))
        elif power == 2:
            out.append(torch.linalg.vector_norm(e, dim=-1).square_())  # one pass, no temporary
        else:  # 4: the sum of the squares of the squares
            out.append(torch.linalg.vector_norm(e.square_(), dim=-1).square_())
    scaled = torch.tensor(powers, dtype=top.dtype, device=top.device).view(-1, *[1] * top.dim()) * top
    return torch.where(empty, -torch.inf, torch.stack(out).log_() + scaled)  # all powers at once (fewer calls)


#: The smallest exponent :func:`_exp_sums` evaluates, divided by the largest power it sums (see there).
UNDERFLOW = -680.0


class _LogSums:
    r"""Log-sums of parts, combined pairwise as they come (``logaddexp`` on a binary counter).

    At most :math:`\log_2` of the parts' count partial results are alive (no long-lived small tensors between
    the passes' large temporaries), and each part goes through at most ``depth`` combinations.
    """

    def __init__(self) -> None:
        self.levels: list[torch.Tensor | None] = []
        self.count = 0

    def add(self, part: torch.Tensor) -> None:
        self.count += 1
        for level in range(len(self.levels) + 1):
            if level == len(self.levels):
                self.levels.append(part)
                return
            if self.levels[level] is None:
                self.levels[level] = part
                return
            part, self.levels[level] = torch.logaddexp(self.levels[level], part), None

    def total(self) -> tuple[torch.Tensor, int]:
        """The combined log-sum and the depth of the combination tree."""
        present = [level for level in self.levels if level is not None]
        result = present[0]
        for level in present[1:]:
            result = torch.logaddexp(level, result)
        return result, len(self.levels) + len(present) - 1


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
        parts = _LogSums()
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
        one = _exp_sums(s[0], s[0].amax(), (1, 2, 4))
        return torch.stack([one[:2], one[:2], one[1:]], dim=1)
    if slot1 == slot2 and slot1 >= 0:  # opposite heads: s1 + s2 = 0 exactly
        both = _exp_sums(s, s.amax(-1))
        flat = zero + math.log(rows)
        return torch.cat([both, torch.stack([flat, flat]).unsqueeze(1)], dim=1)
    rows3 = torch.stack([s[0], s[1], s[0] + s[1]])
    return _exp_sums(rows3, rows3.amax(-1))


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
    grows), the same for :math:`B = e^{-s - M'}`, and the log-sums of both; :math:`\operatorname{lse}(s_1 + s_2)
    = \operatorname{lse}(2(s_1 + s_2)) = \ln d`.
    """
    queries = lookup.queries
    like = {"dtype": queries.dtype, "device": queries.device}
    top = torch.full((2,), -torch.inf, **like)  # running maximum of s and of -s
    sums = torch.zeros(2, 2, **like)  # [head, power]: sum of e^{power (x - top)}
    pull = Pull(4, queries.shape[1], queries)  # columns A, A^2, B, B^2
    buffer = None
    for view in _wide_views(views):
        s = (queries[:1] @ view.rows.T)[0] if view.rows is not None else lookup.distinct_scores(view)[0]
        high = torch.stack([s.amax(), -s.amin()])  # of s and of -s
        if bool((high > top).any()):
            grown = torch.maximum(top, high)
            factor = torch.exp(top - grown)
            factors = torch.stack([factor, factor * factor], dim=1)  # (head, power)
            sums *= factors
            pull.scale_(factors.reshape(-1))
            top = grown
        if buffer is None or buffer.shape[1] < s.shape[0]:
            buffer = s.new_empty(4, s.shape[0])  # A, A^2, B, B^2: the pull-back's columns, reused block to block
        weights = buffer[:, : s.shape[0]]
        a = torch.sub(s, top[0], out=weights[0]).exp_()  # e^{s - M}
        b = torch.sub(-top[1], s, out=weights[2]).exp_()  # e^{-s - M'}
        torch.mul(a, a, out=weights[1])  # A^2
        torch.mul(b, b, out=weights[3])  # B^2
        block = weights.sum(-1)  # A, A^2, B, B^2 (each row summed as alone)
        sums += block.view(2, 2)
        pull.add(view, weights, block)
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
    bounds = upper = hits = None
    for view, rest in blocks:
        if view.rows is not None or not screens or (rest is None and best_values.shape[-1] < k):
            best_values, best_index = _merge_top(best_values, best_index, lookup(view), view.start, k)
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
            if upper is None or upper.shape[0] < partial.shape[1]:  # reused from block to block
                upper = torch.empty(partial.shape[1], dtype=partial.dtype, device=partial.device)
                hits = torch.empty((2, partial.shape[1]), dtype=torch.bool, device=partial.device)
            bound, reach, hit = upper[: partial.shape[1]], hits[0, : partial.shape[1]], hits[1, : partial.shape[1]]
            thresholds = (best_values[:, -1] - slack).tolist()  # the same doubles as 0-d tensors, fewer calls
            for head, (slot, sign) in enumerate(lookup.plan):
                if sign > 0:
                    torch.add(partial[slot], float(high[slot, first]), out=bound)
                else:  # the negated query's score is minus the slot's, at most -(partial + low)
                    torch.sub(-float(low[slot, first]), partial[slot], out=bound)
                torch.ge(bound, thresholds[head], out=reach if head == 0 else hit)
                if head:
                    reach.logical_or_(hit)
            columns = reach.nonzero().squeeze(1)
        if columns.numel():
            index = None if rest is None else rest(columns)
            found = lookup.finish(partial[:, columns], view, columns, first, index)
            found = found if lookup.identity else lookup.assemble(found)
            best_values, best_index = _merge_top(best_values, best_index, found, view.start, k, columns)
    return best_values, best_index


def _merge_top(
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
    :math:`a_k^2, b_k^2, a_kb_k, a_k^2b_k^2` after each step (an :class:`OffPair` of ``(K,)`` tensors), in
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
    sizes = torch.zeros(K, H, **like)  # bound on the sum of |terms| of each score (see _log_weight_error)
    parts = _LogSums()  # per part: (2 or 3, K, H + off_pair) log-sums
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
    for view in views():
        terms = [_term_sizes(view, r) for r in reach]  # (H,) each
        if direct:
            whole = stepped(view).unsqueeze(0)  # (1, H, rows), a fresh tensor: masked in place below
            sizes = torch.maximum(sizes, terms[0].unsqueeze(0))
        else:
            s, t = lookup_s(view), lookup_t(view)
            sizes = torch.maximum(sizes, terms[0] + kappas.view(K, 1) * terms[1])
            if direction_top:
                found_values, found_index = _merge_top(found_values, found_index, t, view.start, direction_top)
        for part in range(0, view.stop - view.start, size):
            if direct:
                after = whole[:, :, part : part + size]
            else:
                after = torch.addcmul(s[:, part : part + size], k, t[:, part : part + size])  # (K, H, rows)
            start = view.start + part
            longest = max(longest, after.shape[-1])
            high = after.amax(-1)  # (separate amax and amin are several times faster than aminmax)
            biggest = torch.maximum(biggest, torch.maximum(high, -after.amin(-1)))
            if top:  # the part's best two, merged with the best so far
                top_values, top_index = _merge_top(top_values, top_index, after, start, 2, highest=high)
            if keep_scores:
                kept.append(after[0].clone())
            inside = [
                (slot, position - start)
                for slot, position in enumerate((u, v))
                if start <= position < start + after.shape[-1]
            ]
            if inside:
                after = after.clone() if keep_scores or not direct else after
                for slot, offset in inside:
                    at_pair[..., slot] = after[..., offset]
                after[..., [offset for _, offset in inside]] = -torch.inf
                high = after.amax(-1)
            sums = _exp_sums(after, high, powers)  # (powers, K, H)
            if off_pair and H == 2:  # a third row: the sum of the two heads' scores, shifted by its own maximum
                cross = after[:, 0] + after[:, 1]
                sums = torch.cat([sums, _exp_sums(cross, cross.amax(-1), powers).unsqueeze(-1)], dim=-1)
            elif off_pair:  # the cross row is twice the head's: its sums are those of 2x and 4x
                sums = torch.stack([torch.cat([sums[0], sums[1]], dim=-1), torch.cat([sums[1], sums[2]], dim=-1)])
            parts.add(sums)
    running, depth = parts.total()
    heads = torch.tensor([0, H - 1], device=queries.device)  # distinct head of each head
    rest = running[0, :, :H].index_select(1, heads)  # (K, 2): log of the unnormalised weight off {u, v}
    pair_scores = at_pair.index_select(1, heads)  # (K, 2 heads, 2 positions)
    lse = torch.logsumexp(torch.cat([rest.unsqueeze(-1), pair_scores], dim=-1), dim=-1)
    big = biggest.index_select(1, heads)
    log_error = _log_weight_error(big, sizes.index_select(1, heads), d, queries.shape[1], longest, depth)
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
        values, index = _merge_top(values, index, t, view.start, k)
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
    r""":func:`after_step`'s summaries (one step, ``off_pair=True``) from the candidates of :func:`direction_pass`.

    Needs ``kappa >= found.floor``. ``pair_scores`` and ``pair_direction`` ``(heads, 2)`` are :math:`s` and
    :math:`t` at :math:`(u, v)` with the pass's arithmetic; the scores after the step are :math:`s + \kappa t`,
    as in :func:`after_step` with ``direct=False``. The largest score magnitude is bounded by
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

    parts, remaining = _LogSums(), after[:, rest].unsqueeze(0)  # (1, H, n), summed in parts of a block's length
    longest = min(remaining.shape[-1], Codes.BLOCK)
    for start in range(0, max(remaining.shape[-1], 1), Codes.BLOCK):
        others = remaining[..., start : start + Codes.BLOCK]
        sums = _exp_sums(others, highest(others), powers)  # (powers, 1, H)
        if H == 2:
            cross = others[:, 0] + others[:, 1]
            sums = torch.cat([sums, _exp_sums(cross, highest(cross), powers).unsqueeze(-1)], dim=-1)
        else:
            sums = torch.stack([torch.cat([sums[0], sums[1]], dim=-1), torch.cat([sums[1], sums[2]], dim=-1)])
        parts.add(sums)
    sums, depth = parts.total()
    heads = torch.tensor([0, H - 1], device=queries.device)
    rest_lse = sums[0, :, :H].index_select(1, heads)  # (1, 2)
    pair_after = at_pair.index_select(0, heads).unsqueeze(0)  # (1, 2 heads, 2 positions)
    lse = torch.logsumexp(torch.cat([rest_lse.unsqueeze(-1), pair_after], dim=-1), dim=-1)
    big = biggest.index_select(0, heads).unsqueeze(0)
    sizes = scale * (queries[:H].abs().sum(-1) + kappa * direction[:H].abs().sum(-1))
    log_error = _log_weight_error(
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


def _term_sizes(view: BlockView, magnitudes: torch.Tensor) -> torch.Tensor:
    r"""For queries of absolute values ``magnitudes`` ``(H, m)``: a bound on :math:`\sum_r |q_r||P_{kr}|` over the block, ``(H,)``."""
    if view.rows is None:  # packed: every nonzero entry is +-scale on the main coordinates
        return view.scale * magnitudes[:, : view.main].sum(-1)
    return (magnitudes @ view.rows.abs().T).amax(-1)


def _gamma(n: float) -> float:
    r""":math:`\gamma_n = nu/(1 - nu)`, :math:`u = \varepsilon/2`: the relative error bound of ``n`` rounded operations."""
    unit = torch.finfo(torch.float64).eps / 2
    return n * unit / (1 - n * unit)


def _log_weight_error(
    biggest: torch.Tensor, sizes: torch.Tensor, d: int, m: int, longest: int, depth: int
) -> torch.Tensor:
    r"""A rigorous bound on the absolute rounding error of each log-weight after the step, ``biggest``'s shape.

    With :math:`B` the largest score magnitude (``biggest``), :math:`u = \varepsilon/2`, :math:`\gamma_n = nu/(1-nu)`,
    :math:`G = \lceil m/8\rceil`, and any order of summation (Higham, Thm 4.4):

    * **scores** (:class:`xorlib._packed.Lookup`): a table entry sums at most 8 entries of :math:`q` and is
      scaled (:math:`\gamma_8`), doubled and negated (exact); the first table also adds the scaled total of
      the :math:`m` entries (:math:`\gamma_m`, one more rounding); a score adds one entry of each of the
      :math:`G` tables (:math:`\gamma_{G-1}` of their absolute sum, at most :math:`3A`), and for several step sizes
      :math:`s + \kappa t` adds two roundings. So each score is within :math:`E = \gamma_{m + 3G + 20}\,A` of the
      exact score of the step's queries, where :math:`A` (``sizes``) bounds :math:`\sum_r |q_r||P_{kr}|`
      (:math:`|q + \kappa\delta|`, or :math:`|q| + \kappa|\delta|`); a dense block's :math:`m`-term product is within
      :math:`\gamma_m A`. Every log-weight :math:`s_k - \operatorname{lse}(s)` then moves by at most :math:`2E`.
    * **log-sums** of the computed scores (:func:`_exp_sums`): :math:`x - M` (:math:`u\cdot 2B`), the
      exponential (one ulp, :math:`2u`), an argument raised to the underflow floor (at most ``longest`` terms of
      :math:`e^{-170}`, against a sum of at least 1), the sum of at most ``longest`` positive terms
      (:math:`\gamma_n`), the logarithm and the shift back (:math:`2u\ln n + u(B + \ln d)`): at most
      :math:`u(5B + 4\ln d + 4) + \gamma_n + n e^{-170}`. Each of the ``depth`` levels of the pairwise combination
      adds :math:`u(2(B + \ln d) + 3)` (errors pass through ``logaddexp`` with weight at most one), and the
      three-term normaliser and the final difference as much again: per log-weight (the rest's and the whole
      normaliser's errors add), :math:`2[u(5B + 4\ln d + 4) + \gamma_n + n e^{-170} + (\text{depth} + 2)\,u(2(B + \ln d) + 3)]`.

    At moderate :math:`B` the sum's :math:`\gamma_n` (:math:`7\cdot10^{-12}` at :math:`n = 2^{16}`) and :math:`2E`
    dominate; both are far below what the certificate resolves (a relative change of the weights of that
    size). It replaces the allowance :math:`16\varepsilon(B + \ln d + 1)` of the earlier passes, which bounded
    the log-domain arithmetic for pairwise sums only and neither the look-ups nor sums in another order.
    """
    unit = torch.finfo(torch.float64).eps / 2
    log_d = math.log(d)
    groups = -(-m // 8)
    scores = 2 * _gamma(m + 3 * groups + 20) * sizes
    n = max(longest, 1)
    sums = unit * (5 * biggest + 4 * log_d + 4) + _gamma(n) + n * math.exp(UNDERFLOW / 4)
    combine = (depth + 2) * unit * (2 * (biggest + log_d) + 3)
    return scores + 2 * (sums + combine)


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
