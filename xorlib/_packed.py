r"""Packed sign codes: balancing a block by pairing rows, and the products :math:`Pq`, :math:`P^\top w` from packed bits.

Internal to :mod:`xorlib.codes`, :mod:`xorlib._source` and the passes (:mod:`xorlib._gradient`,
:mod:`xorlib._stream`, :mod:`xorlib._candidates`), which document the construction and the passes; these functions
trust their callers.

*Scores.* For each group of eight coordinates a 256-entry table holds the partial sums of a query over
every bit pattern (:func:`lookup_tables`), so a score is :math:`\lceil M/8\rceil` look-ups and additions;
:class:`Lookup` builds the tables once per pass and reads every block off them, looking up once for
equal queries (tied heads) and negating for opposite ones (the antisymmetric start), both exactly; a
score can be summed over the first groups and completed later (:meth:`Lookup.finish`) with the same additions.
Bytes given as uint8 go to the compiled loops of :mod:`xorlib._kernels` instead (the same additions, one call per
block); int32 and int64 look-up indices to the tensor calls.
*Pull-backs.* :class:`Pull` histograms the weights by byte value, group by group, accumulating over all
the blocks of a pass, and reads each coordinate's sum off the 256 bins once at the end.
*Generation.* :func:`paired_columns` turns the random bytes of a block into byte columns
``(groups, rows)`` (uint8), pairing the rows in place, in buffers reused from block to block; half of
each paired column determines the rest (:func:`half_columns`, :func:`whole_columns`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from . import _kernels as kernels
from ._random import BYTE_BITS, BYTE_SIGNS


@dataclass(frozen=True)
class BlockView:
    r"""One block of rows of :math:`P`, rows ``[start, stop)``: packed sign bits, or a dense float block.

    Packed bits come as ``packed`` ``(rows, groups)`` uint8 (public views) or as the look-up indices
    ``index`` ``(groups, rows)`` (the streamed passes, whose buffers the next block overwrites): int32, int64
    for a pull-back's scatter, or the bytes themselves, uint8, for the compiled loops (:mod:`xorlib._kernels`).
    :meth:`scores` and :meth:`pull` never form a float matrix (see the module docstring).
    """

    start: int
    stop: int
    m: int
    main: int
    scale: float
    packed: torch.Tensor | None = None
    rows: torch.Tensor | None = None
    index: torch.Tensor | None = None
    columns: torch.Tensor | None = None  # with ``index``, possibly: the same bytes as uint8 ``(groups, rows)``

    def byte_index(self) -> torch.Tensor:
        """The bytes as int32 look-up indices ``(groups, rows)``, one contiguous row per group."""
        return self.index if self.index is not None else _byte_index(self.packed)

    def scores(self, queries: torch.Tensor) -> torch.Tensor:
        """Scores ``(heads, rows)`` of queries ``(heads, m)`` on this block."""
        return Lookup(queries)(self)

    def pull(self, weights: torch.Tensor) -> torch.Tensor:
        r""":math:`\sum_k w_k p_k` over this block, ``(heads, m)``, for weights ``(heads, rows)``."""
        total = Pull(weights.shape[0], self.m, weights)
        total.add(self, weights)
        return total.result()


#: Rows looked up together: the running sums and the looked-up values stay in cache across the groups.
LOOKUP_ROWS = 2**16


class Lookup:
    r"""The scores of fixed queries ``(heads, m)`` on any block of one code matrix: tables built once, per pass.

    A query equal to an earlier one is looked up once; one equal to an earlier one negated is read off
    it negated (the tables, totals and sums of :math:`-q` are exactly those of :math:`q` negated); a zero
    query scores exactly zero without a look-up. The float arithmetic of each score is fixed: the tables
    (:func:`lookup_tables`), then ``totals - 2 * (T_0[b_0] + T_1[b_1] + ...)`` summed in group order.
    """

    def __init__(self, queries: torch.Tensor) -> None:
        self.queries = queries
        self.plan: list[tuple[int, float]] = []  # per row: (slot of its distinct query, sign); slot -1: zero
        distinct: list[int] = []
        for head in range(queries.shape[0]):
            row = queries[head]
            if not bool(row.any()):
                self.plan.append((-1, 0.0))
                continue
            for slot, first in enumerate(distinct):
                if torch.equal(queries[first], row):
                    self.plan.append((slot, 1.0))
                    break
                if torch.equal(queries[first], -row):
                    self.plan.append((slot, -1.0))
                    break
            else:
                distinct.append(head)
                self.plan.append((len(distinct) - 1, 1.0))
        self.distinct = distinct
        self._tables: dict[tuple[int, float], tuple[torch.Tensor, torch.Tensor]] = {}
        self._rows: dict[tuple[int, float], list[tuple[torch.Tensor, ...]]] = {}

    @property
    def identity(self) -> bool:
        """Whether every row is its own distinct query (no copies, negations or zeros)."""
        return self.plan == [(slot, 1.0) for slot in range(len(self.plan))]

    def tables(self, main: int, scale: float) -> torch.Tensor:
        r"""The score tables ``(slots, groups, 256)``: :math:`S_j = -2T_j`, and the total :math:`\sum_r q_r/\sqrt N` added to :math:`S_0`.

        A score is then :math:`S_0[b_0] + S_1[b_1] + \dots` (:func:`lookup_tables`).
        """
        key = (main, scale)
        if key not in self._tables:
            tables, totals = lookup_tables(self.queries[self.distinct, :main], scale)
            tables = tables.mul_(-2)
            tables[:, 0] += totals.unsqueeze(1)
            self._tables[key] = tables.contiguous()
        return self._tables[key]

    def distinct_scores(
        self, view: BlockView, groups: int | None = None, out: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Scores ``(distinct, rows)`` of the distinct nonzero queries on a packed block (into ``out``, if given).

        With ``groups``, the partial sums over the first ``groups`` groups only (:meth:`finish` continues them).
        """
        index = view.byte_index()  # (groups, rows)
        rows, groups = index.shape[1], index.shape[0] if groups is None else groups
        like = {"dtype": self.queries.dtype, "device": self.queries.device}
        found = out if out is not None else torch.empty(len(self.distinct), rows, **like)
        if index.dtype == torch.uint8:  # bytes: the compiled loop, the same additions (xorlib._kernels)
            kernels.lookup_sums(self.tables(view.main, view.scale), index[:groups], found, 0, True)
            return found
        tables = self._table_rows(view.main, view.scale)
        looked_up = torch.empty(min(rows, LOOKUP_ROWS), dtype=found.dtype, device=found.device)
        for start in range(0, rows, LOOKUP_ROWS):  # parts that stay in cache while the groups are added
            stop = min(rows, start + LOOKUP_ROWS)
            part = looked_up[: stop - start]
            bytes_ = index[:groups, start:stop].unbind(0)  # one call for all the groups' rows (fewer tensor calls)
            for sums, table in zip(found[:, start:stop].unbind(0), tables, strict=True):
                torch.index_select(table[0], 0, bytes_[0], out=sums)
                for group in range(1, groups):
                    sums += torch.index_select(table[group], 0, bytes_[group], out=part)
        return found

    def _table_rows(self, main: int, scale: float) -> list[tuple[torch.Tensor, ...]]:
        """:meth:`tables` as one tuple of ``groups`` rows ``(256,)`` per slot (made once: the look-ups index them often)."""
        key = (main, scale)
        if key not in self._rows:
            self._rows[key] = [slot.unbind(0) for slot in self.tables(main, scale)]
        return self._rows[key]

    def finish(
        self,
        partial: torch.Tensor,
        view: BlockView,
        columns: torch.Tensor,
        groups: int,
        index: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Continue the partial sums ``(distinct, n)`` over the first ``groups`` groups of the block's rows ``columns``.

        The same additions in the same order as :meth:`distinct_scores`: exactly the scores of those rows.
        ``index``: the look-up indices ``(remaining groups, n)`` of those rows, if the view holds only the first groups.
        """
        if index is None:
            index = view.byte_index()[groups:].index_select(1, columns)  # (remaining groups, n)
        if index.dtype == torch.uint8:
            kernels.lookup_sums(self.tables(view.main, view.scale), index, partial, groups, False)
            return partial
        tables = self._table_rows(view.main, view.scale)
        part = torch.empty_like(partial[0])
        bytes_ = index.unbind(0)
        for out, table in zip(partial.unbind(0), tables, strict=True):
            for group, column in enumerate(bytes_, start=groups):
                out += torch.index_select(table[group], 0, column, out=part)
        return partial

    def remaining_range(self, main: int, scale: float) -> tuple[torch.Tensor, torch.Tensor, float]:
        r"""Bounds on what the groups from ``g`` on add to a score: ``(high, low)`` ``(distinct, groups + 1)``, and a slack.

        ``high[:, g]`` is the sum of the tables' largest entries from group ``g`` on, ``low`` of their smallest.
        A computed score is within the slack of its computed partial sum over the first ``g`` groups plus the
        exact sum of the remaining entries (each addition rounds by at most :math:`u` times a partial sum, and
        every partial sum is at most :math:`B = \sum_j \max_v |S_j[v]|`), and so are ``high`` and ``low`` of the
        exact sums of the extremes: a slack of :math:`4G\varepsilon B` covers both and the comparison's rounding.
        """
        tables = self.tables(main, scale)
        groups = tables.shape[1]
        zero = tables.new_zeros(tables.shape[0], 1)
        high = torch.cat([tables.amax(-1).flip(1).cumsum(1).flip(1), zero], dim=1)
        low = torch.cat([tables.amin(-1).flip(1).cumsum(1).flip(1), zero], dim=1)
        biggest = float(tables.abs().amax(-1).sum(1).max())
        return high, low, 4 * groups * torch.finfo(tables.dtype).eps * biggest

    def __call__(self, view: BlockView, out: torch.Tensor | None = None) -> torch.Tensor:
        """Scores ``(heads, rows)`` on ``view``: a fresh tensor, or ``out`` (rows contiguous) written."""
        if view.rows is not None:
            return self.queries @ view.rows.T if out is None else torch.matmul(self.queries, view.rows.T, out=out)
        if not self.distinct:
            return self.queries.new_zeros(len(self.plan), view.stop - view.start) if out is None else out.zero_()
        if self.identity:
            return self.distinct_scores(view, out=out)
        return self.assemble(self.distinct_scores(view), out)

    def assemble(self, found: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """All rows ``(heads, rows)`` from the distinct ones' scores ``(distinct, rows)`` (into ``out``, if given)."""
        out = found.new_empty(len(self.plan), found.shape[1]) if out is None else out
        for head, (slot, sign) in enumerate(self.plan):
            if slot < 0:
                out[head].zero_()
            elif sign > 0:
                out[head].copy_(found[slot])
            else:
                torch.neg(found[slot], out=out[head])
        return out


_MIXED_PULL = "a Pull takes packed blocks either as bytes through add_squares or through add, not both"


class Pull:
    r"""Accumulates :math:`P^\top w = \sum_k w_k p_k`, ``(columns, m)``, over blocks of weights ``(columns, rows)``.

    Packed blocks add, per group of eight coordinates, the histogram of the weights by byte value;
    :meth:`result` reads each coordinate's sum off the 256 bins of its group once:
    :math:`\text{scale}\cdot\sum_b (-1)^{\text{bit}(b)}\,\text{bin}_b`. Weight vectors are histogrammed
    two at a time, as the real and imaginary parts of complex weights, all pairs and groups in one ``scatter_add_``
    per block (each bin adds its weights one by one in the order of the rows, as ``index_add_`` does, at about half
    its cost); a last odd one by ``torch.bincount``. :meth:`add_squares` adds two columns and their squares (four
    columns), on bytes in one compiled call. Dense blocks add ``w @ rows``. :meth:`scale_` multiplies what has been
    accumulated (a running shift); :meth:`totals` reads the columns' sums over the packed blocks off the bins.
    """

    def __init__(self, columns: int, m: int, like: torch.Tensor) -> None:
        self.columns, self.m = columns, m
        self.dense = like.new_zeros(columns, m)
        self.dense_totals = like.new_zeros(columns)  # the columns' sums over the dense blocks
        self.pairs: torch.Tensor | None = None  # (columns // 2, groups, 256) complex
        self.single: torch.Tensor | None = None  # (groups, 256) real, for an odd last column
        self.quads: torch.Tensor | None = None  # (groups, 256, 4): add_squares' bins from bytes (compiled)
        self.main, self.scale = m, 1.0
        self._bins: torch.Tensor | None = None
        self._both: torch.Tensor | None = None
        self._squares: torch.Tensor | None = None

    def add(self, view: BlockView, weights: torch.Tensor | list[torch.Tensor]) -> None:
        """Add a block's weights: ``(columns, rows)``, or a list of ``columns`` rows."""
        if view.rows is not None:
            block = weights if isinstance(weights, torch.Tensor) else torch.stack(weights)
            self.dense += block @ view.rows
            self.dense_totals += block.sum(-1)
            return
        if self.quads is not None:
            raise ValueError(_MIXED_PULL)
        index = view.byte_index()
        groups, paired = index.shape[0], self.columns // 2 if weights[0].dtype == torch.float64 else 0
        if self.pairs is None and self.single is None:
            self.main, self.scale = view.main, view.scale
            self.pairs = torch.zeros(paired, groups, 256, dtype=torch.complex128, device=weights[0].device)
            self.single = weights[0].new_zeros(self.columns - 2 * paired, groups, 256)
        if index.dtype == torch.uint8:  # bytes: the compiled loop, the same additions (xorlib._kernels)
            self._add_compiled(index, weights if isinstance(weights, torch.Tensor) else torch.stack(weights), paired)
        else:
            self._add_tensors(view, index, weights, paired)

    def add_squares(self, view: BlockView, base: torch.Tensor) -> None:
        """Add a block's four columns :math:`(a, a^2, b, b^2)` from ``base`` ``(2, rows)`` float64 (a Pull of four).

        On bytes, one compiled call squares and histograms them (:func:`xorlib._kernels.histogram_squares`);
        otherwise the squares are taken as tensors and added by :meth:`add`. The same additions either way.
        """
        if self.columns != 4:
            raise ValueError(f"add_squares adds four columns (a, a^2, b, b^2) to a Pull of four, not {self.columns}")
        index = None if view.rows is not None else view.byte_index()
        if index is not None and index.dtype == torch.uint8 and base.dtype == torch.float64:
            if self.pairs is not None:
                raise ValueError(_MIXED_PULL)
            if self.quads is None:
                self.main, self.scale = view.main, view.scale
                self.quads = base.new_zeros(index.shape[0], 256, 4)
            kernels.histogram_squares(self.quads, index, base)
            return
        rows = base.shape[1]
        if self._squares is None or self._squares.shape[1] < rows:  # reused from block to block
            self._squares = base.new_empty(4, rows)
        weights = self._squares[:, :rows]
        weights[0::2] = base
        torch.mul(base, base, out=weights[1::2])
        self.add(view, weights)

    def _add_tensors(
        self, view: BlockView, index: torch.Tensor, weights: torch.Tensor | list[torch.Tensor], paired: int
    ) -> None:
        """:meth:`add` of a block given as int32 or int64 indices: the pairs by ``scatter_add_``, an odd last column
        by ``torch.bincount``."""
        groups = index.shape[0]
        if paired:  # all pairs at once: (pairs, rows) complex, scattered along the rows
            if isinstance(weights, torch.Tensor):  # the rows of a tensor are read in place, into a reused buffer
                rows = weights.shape[1]
                if self._both is None or self._both.shape[1] < rows:
                    self._both = torch.empty(paired, rows, dtype=torch.complex128, device=weights.device)
                both = torch.complex(weights[0 : 2 * paired : 2], weights[1 : 2 * paired : 2], out=self._both[:, :rows])
            else:
                both = torch.complex(
                    torch.stack([weights[2 * slot] for slot in range(paired)]),
                    torch.stack([weights[2 * slot + 1] for slot in range(paired)]),
                )
            rows = both.shape[1]
            # scatter_add_ takes int64 indices: these as they are, else copied into one reused buffer
            if index.dtype == torch.int64 and index.device == both.device:
                bins = index
            else:  # from the bytes where at hand (faster)
                if self._bins is None or self._bins.shape[1] < rows:
                    self._bins = torch.empty(groups, rows, dtype=torch.int64, device=both.device)
                source = view.columns if view.columns is not None and view.columns.device == both.device else index
                bins = self._bins[:, :rows].copy_(source)
            # all groups in one call (faster than one per group): each bin still adds its weights in row order
            self.pairs.scatter_add_(2, bins.expand(paired, -1, -1), both.unsqueeze(1).expand(-1, groups, -1))
        for slot in range(self.single.shape[0]):
            column = weights[2 * paired + slot]
            for group in range(groups):
                self.single[slot, group] += torch.bincount(index[group], weights=column, minlength=256)

    def _add_compiled(self, index: torch.Tensor, weights: torch.Tensor, paired: int) -> None:
        """:meth:`add` of a block given as bytes: the pairs straight into their bins, as ``scatter_add_`` adds them;
        an odd last column into a histogram of its own, then added, as ``torch.bincount`` does."""
        if paired:
            kernels.histogram(torch.view_as_real(self.pairs), index, weights[: 2 * paired])
        for slot in range(self.single.shape[0]):
            own = torch.zeros_like(self.single[slot]).unsqueeze(-1)
            kernels.histogram(own.unsqueeze(0), index, weights[2 * paired + slot].unsqueeze(0))
            self.single[slot] += own.squeeze(-1)

    def scale_(self, factors: torch.Tensor) -> None:
        """Multiply every column's accumulated sums by its factor ``(columns,)``."""
        self.dense *= factors.unsqueeze(1)
        self.dense_totals *= factors
        if self.pairs is not None:
            parts = torch.view_as_real(self.pairs)  # (pairs, groups, 256, 2)
            parts *= factors[: 2 * self.pairs.shape[0]].view(-1, 1, 1, 2)
            self.single *= factors[2 * self.pairs.shape[0] :].view(-1, 1, 1)
        if self.quads is not None:
            self.quads *= factors.view(1, 1, 4)

    def _histograms(self) -> torch.Tensor | None:
        """Every column's bins ``(columns, groups, 256)`` (``None`` before a packed block)."""
        if self.quads is not None:  # the layout of the others, so the same reductions follow
            return self.quads.permute(2, 0, 1).contiguous()
        if self.pairs is None:
            return None
        groups = self.pairs.shape[1]
        pairs = torch.view_as_real(self.pairs).permute(0, 3, 1, 2).reshape(-1, groups, 256)
        return torch.cat([pairs, self.single])

    def totals(self) -> torch.Tensor:
        """The columns' sums of weights ``(columns,)``: the dense blocks' sums, and the packed blocks' read off the bins
        (every row falls in one bin of group 0)."""
        hist = self._histograms()
        return self.dense_totals.clone() if hist is None else self.dense_totals + hist[:, 0].sum(-1)

    def result(self) -> torch.Tensor:
        out = self.dense.clone()
        hist = self._histograms()
        if hist is not None:
            # (256, 8): +1 for a clear bit, -1 for a set one, so each coordinate is its signed sum of the bins
            signs = BYTE_SIGNS.to(device=hist.device, dtype=hist.dtype)
            coordinates = (hist @ signs).reshape(self.columns, -1)[:, : self.main]
            out[:, : self.main] += self.scale * coordinates
        return out


#: Blocks with fewer rows than this pair rows per coordinate; larger ones per group of eight coordinates.
PER_COORDINATE_BELOW = 2**14


def pair_rows(raw: torch.Tensor, rows: int, main: int, gen: torch.Generator) -> torch.Tensor:
    r"""Make every column of a block of packed signs sum to zero by pairing rows with opposite signs.

    The pairing is a fixed-point-free involution :math:`k \leftrightarrow (\mu - k) \bmod c` with
    :math:`\mu` odd and :math:`c` (the number of rows) even. Small blocks draw one
    :math:`\mu` per coordinate, so coordinates stay independent and a given pair of
    rows is forced opposite on about :math:`m/(c-1)` coordinates. Large blocks
    (:data:`PER_COORDINATE_BELOW` rows or more) draw one :math:`\mu` per group of
    eight coordinates and work on whole bytes, at the speed of drawing the bits;
    a given pair of rows is then forced opposite on a whole group with probability
    at most :math:`\lceil m/8\rceil/(c-1) < 10^{-3}`.
    """
    if rows >= PER_COORDINATE_BELOW:
        mu = 2 * torch.randint(0, rows // 2, (raw.shape[1],), generator=gen) + 1
        return _pair_columns(columns(raw), mu).t()
    bits = BYTE_BITS[raw.long()].reshape(rows, -1)[:, :main].to(torch.uint8)  # (rows, main) of 0/1
    mu = 2 * torch.randint(0, rows // 2, (main,), generator=gen) + 1
    index = torch.arange(rows).unsqueeze(1)
    partner = (mu.unsqueeze(0) - index) % rows  # small blocks: one gather is faster than a loop over coordinates
    paired = torch.gather(bits, 0, torch.minimum(index, partner)) ^ (index > partner).to(torch.uint8)
    padded = torch.zeros(rows, raw.shape[1] * 8, dtype=torch.uint8)
    padded[:, :main] = paired
    return columns((padded.view(rows, -1, 8) << torch.arange(8, dtype=torch.uint8)).sum(-1, dtype=torch.uint8)).t()


def _run_halves(mu: int, rows: int) -> tuple[int, int]:
    r"""The involution :math:`k \leftrightarrow (\mu - k) \bmod c` reverses the runs :math:`[0, \mu]` and
    :math:`[\mu + 1, c)`: the lengths of their first halves, which determine the rest."""
    return (mu + 1) // 2, (rows - mu - 1) // 2


def used_bits(main: int) -> int:
    """The mask of the bits of the last group that hold coordinates (255 if ``main`` is a multiple of 8)."""
    return (1 << (main % 8)) - 1 if main % 8 else 255


def _pair_columns(columns: torch.Tensor, mu: torch.Tensor) -> torch.Tensor:
    r"""Pair the bytes of each row of ``columns`` ``(groups, c)`` in place, by the involution of :func:`pair_rows`.

    Row :math:`k` becomes its partner's bits, flipped (``^ 255``), when
    :math:`k > (\mu - k) \bmod c`. The involution reverses :math:`[0, \mu]` and
    :math:`[\mu + 1, c)`, so each run keeps its first half and receives the flipped
    mirror image of it in its second half: two slice copies per row, no index tensor.
    Works on any integer dtype (uint8 bytes, or int32 look-up indices), on the CPU, through NumPy views (a
    reversed slice is a view there, and a call costs far less than a torch call: these are many small ones).
    """
    if kernels.takes_bytes(columns):
        kernels.pair_columns(columns, mu)
        return columns
    rows = columns.shape[1]
    for column, m in zip(columns.numpy(), mu.tolist(), strict=True):
        first, second = _run_halves(m, rows)
        _reversed_xor(column[:first], 255, column[first : m + 1])
        _reversed_xor(column[m + 1 : m + 1 + second], 255, column[m + 1 + second :])
    return columns


def _reversed_xor(source: np.ndarray, flip: int, out: np.ndarray) -> np.ndarray:
    """``out[j] = source[n - 1 - j] ^ flip`` for 1-D integer arrays of ``n`` entries (``out`` apart from ``source``).

    Bytes go eight at a time: the words of ``source``'s last multiple of eight bytes in reverse order, each
    byte-swapped (the xor of a repeated byte commutes with the swap); the few left over one by one.
    """
    n = source.shape[0]
    whole = n - n % 8 if source.dtype == np.uint8 else 0
    if whole:
        words = out[:whole].view(np.uint64)
        np.bitwise_xor(source[n - whole :].view(np.uint64)[::-1], np.uint64(flip * 0x0101010101010101), out=words)
        words.byteswap(inplace=True)
    np.bitwise_xor(source[n - whole - 1 :: -1] if n > whole else source[:0], flip, out=out[whole:])
    return out


def paired_columns(
    raw: torch.Tensor,
    main: int,
    gen: torch.Generator,
    balanced: bool,
    out: torch.Tensor,
    mu_out: torch.Tensor | None = None,
    groups: int | None = None,
) -> torch.Tensor:
    r"""The packed bytes of a block drawn as ``raw`` ``(rows, groups)``, as columns ``(groups, rows)`` written to ``out``.

    The same bits as :func:`pair_rows` (then the unused bits of the last group cleared), transposed group by
    group into ``out`` (uint8) and paired there. ``mu_out`` ``(groups,)``, if given, receives the pairing's
    :math:`\mu` of each group where the block pairs whole groups (:func:`half_columns`). With ``groups`` (blocks
    that pair whole groups, or unbalanced ones), only the first ``groups`` columns are written (the same draws:
    :func:`raw_column_bytes` reads any other byte off ``raw``).
    """
    rows = raw.shape[0]
    if balanced and rows < PER_COORDINATE_BELOW:
        out.copy_(pair_rows(raw, rows, main, gen).t())
    else:
        written = raw.shape[1] if groups is None else groups
        columns(raw, out, written)
        if balanced:
            mu = 2 * torch.randint(0, rows // 2, (raw.shape[1],), generator=gen) + 1
            _pair_columns(out[:written], mu[:written])
            if mu_out is not None:
                mu_out.copy_(mu)
        if written < raw.shape[1]:
            return out
    if main % 8:
        out[-1] &= used_bits(main)
    return out


def _mirrored(mu: torch.Tensor, columns: torch.Tensor, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """For groups paired by ``mu`` ``(g, 1)`` and rows ``columns`` ``(n,)``: the row whose byte each takes, and whether flipped."""
    partner = torch.remainder(mu - columns, rows)  # (g, n)
    flipped = columns > partner
    return torch.where(flipped, partner, columns), flipped


def _flips(groups: torch.Tensor, total: int, main: int) -> torch.Tensor:
    """The byte a mirrored byte is xor-ed with, per group of ``groups`` ``(g,)``: 255, or the last group's mask."""
    flips = torch.full(groups.shape, 255, dtype=torch.uint8)
    if main % 8:
        flips[groups == total - 1] = used_bits(main)
    return flips


def raw_column_bytes(
    raw: torch.Tensor, mu: torch.Tensor | None, main: int, columns: torch.Tensor, first: int
) -> torch.Tensor:
    """The bytes ``(groups - first, n)`` of :func:`paired_columns` at rows ``columns`` of the groups from ``first`` on.

    Read off the draws ``raw`` ``(rows, groups)`` (``mu``: the pairing of each group, ``None`` unbalanced): exactly
    the bytes that :func:`paired_columns` writes there.
    """
    rows, total = raw.shape
    groups = torch.arange(first, total)
    if mu is None:
        source, flipped = columns.expand(total - first, -1), None
    else:
        source, flipped = _mirrored(mu[first:].unsqueeze(1), columns, rows)
    found = raw[source, groups.unsqueeze(1)]
    if flipped is not None:
        found ^= flipped.to(torch.uint8) * 255
    if main % 8 and total - 1 >= first:
        found[-1] &= used_bits(main)
    return found


def half_columns(columns: torch.Tensor, mu: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    r"""The half of each paired column of ``columns`` ``(groups, c)`` that determines the rest, into ``out`` ``(groups, c/2)``.

    :func:`_pair_columns` fills the second half of each of the runs :math:`[0, \mu]` and :math:`[\mu + 1, c)`
    with the flipped mirror image of its first half, so the first halves (:math:`c/2` bytes) determine the column
    (:func:`whole_columns`). A balanced block of paired groups thus keeps in half the memory of its bytes.
    """
    if kernels.takes_bytes(columns, out):
        kernels.half_columns(columns, mu, out)
        return out
    rows = columns.shape[1]
    source, target = columns.numpy(), out.numpy()
    for group, m in enumerate(mu.tolist()):
        first, second = _run_halves(m, rows)
        target[group, :first] = source[group, :first]
        target[group, first:] = source[group, m + 1 : m + 1 + second]
    return out


def whole_columns(
    halves: torch.Tensor, mu: torch.Tensor, main: int, out: torch.Tensor, groups: int | None = None
) -> torch.Tensor:
    """The paired columns ``(groups, c)`` from their halves (:func:`half_columns`), into ``out``: exactly the bytes drawn.

    A mirrored byte is its partner's complement: ``^ 255``, and in the last group, whose unused bits are cleared,
    ``^`` the mask of its used bits. With ``groups``, only the first ``groups`` columns (:func:`half_column_bytes`
    reads any other byte off the halves).
    """
    if kernels.takes_bytes(halves, out):
        written = halves.shape[0] if groups is None else min(groups, halves.shape[0])
        kernels.whole_columns(halves, mu, written, used_bits(main), out)
        return out
    rows = out.shape[1]
    last = halves.shape[0] - 1
    source, target = halves.numpy(), out.numpy()  # on the CPU (see _pair_columns)
    for group, m in enumerate(mu.tolist()[:groups]):
        first, second = _run_halves(m, rows)
        flip = used_bits(main) if group == last else 255
        head, tail, column = source[group, :first], source[group, first:], target[group]
        column[:first] = head
        _reversed_xor(head, flip, column[first : m + 1])
        column[m + 1 : m + 1 + second] = tail
        _reversed_xor(tail, flip, column[m + 1 + second :])
    return out


def half_column_bytes(
    halves: torch.Tensor, mu: torch.Tensor, main: int, rows: int, columns: torch.Tensor, first: int
) -> torch.Tensor:
    """The bytes ``(groups - first, n)`` of :func:`whole_columns` at rows ``columns`` of the groups from ``first`` on."""
    if kernels.takes_bytes(halves):
        return kernels.half_column_bytes(halves, mu, first, used_bits(main), rows, columns)
    total = halves.shape[0]
    mu = mu[first:].unsqueeze(1)
    source, flipped = _mirrored(mu, columns, rows)
    # a run's first half is kept: rows [0, (mu + 1) / 2) at their place, rows [mu + 1, ...) after them
    position = torch.where(source <= mu, source, source - (mu + 1) // 2)
    found = torch.gather(halves[first:], 1, position)
    return found ^ (flipped.to(torch.uint8) * _flips(torch.arange(first, total), total, main).unsqueeze(1))


def columns(matrix: torch.Tensor, out: torch.Tensor | None = None, written: int | None = None) -> torch.Tensor:
    """The transpose of ``matrix`` ``(rows, cols)`` (on the CPU), contiguous, or its first ``written`` columns into ``out``.

    Bytes go through the compiled transpose (:func:`xorlib._kernels.transpose`) where it was built, anything
    else through NumPy's transposing copy (faster than torch's); the same values either way.
    """
    written = matrix.shape[1] if written is None else written
    out = matrix.new_empty(matrix.shape[1], matrix.shape[0]) if out is None else out
    if kernels.takes_bytes(matrix, out) and matrix.is_contiguous():
        kernels.transpose(matrix, written, out)
    else:
        np.copyto(out[:written].numpy(), matrix[:, :written].numpy().T)
    return out


def _byte_index(packed: torch.Tensor) -> torch.Tensor:
    """The bytes of a packed block ``(rows, groups)`` as int32 look-up indices, one contiguous row per group."""
    return packed.t().to(torch.int32, memory_format=torch.contiguous_format)


def lookup_tables(queries: torch.Tensor, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Per-group partial sums of the queries over all 256 bit patterns, and the totals.

    ``tables[h, j, v] = \sum_{b:\ \text{bit } b \text{ of } v} q_{h, 8j+b}``, so that
    :math:`\langle q_h, p_k\rangle = (\sum_r q_{h,r} - 2\sum_j T_{h,j}[\text{byte}_{kj}])/\sqrt N`
    (``scale`` is :math:`1/\sqrt N`).
    """
    heads, main = queries.shape
    groups = (main + 7) // 8
    padded = queries.new_zeros(heads, groups * 8)
    padded[:, :main] = queries
    bits = BYTE_BITS.to(device=queries.device, dtype=queries.dtype)  # (256, 8)
    tables = torch.einsum("vb,hjb->hjv", bits, padded.view(heads, groups, 8))
    return (tables * scale).contiguous(), queries.sum(-1) * scale
