r"""Where a pass's blocks come from: the codes kept in memory as far as a budget allows, the rest drawn again.

The passes (:mod:`xorlib._gradient`, :mod:`xorlib._stream`, :mod:`xorlib._candidates`) read the codes block by
block. A :class:`CodeSource` hands every pass the same blocks (they depend only on the seed): kept, packed, from the first pass for the others as far as
:data:`KEEP_CODES_BYTES` allows, regenerated from their seed otherwise. Balanced blocks that do not all fit are
kept as the half of their bytes that determines the rest (up to :data:`HALVES_FACTOR` times
:data:`KEEP_CODES_BYTES`: 86 % of them at :math:`d = 10^8`). On the CPU, where the package's C loops were built
(:mod:`xorlib._kernels`), a pass gets the blocks' bytes as they are: the look-up sums and the pull-back's
histograms are then one call per block, with the same additions in the same order as the tensor calls, so the
results are the same bit for bit.
This module trusts its callers (the public entry point is :func:`xorlib.one_step`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace

import torch

from . import _kernels as kernels
from ._packed import (
    PER_COORDINATE_BELOW,
    BlockView,
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
