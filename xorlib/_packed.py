r"""Packed sign codes: balancing a block by pairing rows, and the products :math:`Pq`, :math:`P^\top w` from packed bits.

Internal to :mod:`xorlib.codes`, which defines the codes and documents their
construction; these functions trust their callers.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ._random import BYTE_BITS


@dataclass(frozen=True)
class BlockView:
    r"""One block of rows of :math:`P`, rows ``[start, stop)``: packed sign bits, or a dense float block.

    For packed sign codes, :meth:`scores` uses, for each group of eight
    coordinates, a 256-entry table of the partial sums of :math:`q` over every
    bit pattern, so a score costs :math:`m/8` look-ups; :meth:`pull` histograms
    the weights by byte value (one pass) and reads each coordinate's sum off the
    256 bins. Neither forms a float matrix.
    """

    start: int
    stop: int
    m: int
    main: int
    scale: float
    packed: torch.Tensor | None = None
    rows: torch.Tensor | None = None

    def scores(self, queries: torch.Tensor) -> torch.Tensor:
        """Scores ``(heads, rows)`` of queries ``(heads, m)`` on this block."""
        if self.rows is not None:
            return queries @ self.rows.T
        firsts = _first_copies(queries)  # equal queries (tied heads) are looked up once
        distinct = sorted(set(firsts))
        tables, totals = _lookup_tables(queries[distinct, : self.main], self.scale)
        index = _byte_index(self.packed)  # (groups, rows)
        partial = torch.empty(len(distinct), self.stop - self.start, dtype=queries.dtype, device=queries.device)
        looked_up = torch.empty_like(partial[0])
        for slot in range(len(distinct)):
            torch.index_select(tables[slot, 0], 0, index[0], out=partial[slot])
            for group in range(1, index.shape[0]):
                partial[slot] += torch.index_select(tables[slot, group], 0, index[group], out=looked_up)
        scores = partial.mul_(-2).add_(totals.unsqueeze(1))  # totals - 2 partial
        return scores if len(distinct) == len(firsts) else scores[[distinct.index(first) for first in firsts]]

    def pull(self, weights: torch.Tensor) -> torch.Tensor:
        r""":math:`\sum_k w_k p_k` over this block, ``(heads, m)``, for weights ``(heads, rows)``."""
        if self.rows is not None:
            return weights @ self.rows
        heads, groups = weights.shape[0], self.packed.shape[1]
        index = _byte_index(self.packed)  # (groups, rows)
        hist = weights.new_empty(heads, groups, 256)
        for head, first in enumerate(_first_copies(weights)):
            if first < head:
                hist[head] = hist[first]
                continue
            for group in range(groups):
                hist[head, group] = torch.bincount(index[group], weights=weights[head], minlength=256)
        bits = BYTE_BITS.to(device=weights.device, dtype=weights.dtype)
        set_bits = (hist.view(heads, groups, 256) @ bits).reshape(heads, -1)[:, : self.main]
        main = self.scale * (weights.sum(-1, keepdim=True) - 2 * set_bits)
        return torch.cat([main, weights.new_zeros(heads, self.m - self.main)], dim=1)


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


def _pair_columns(columns: torch.Tensor, mu: torch.Tensor) -> torch.Tensor:
    r"""Pair the bytes of each row of ``columns`` ``(groups, c)`` in place, by the involution of :func:`pair_rows`.

    Row :math:`k` becomes its partner's bits, flipped (``^ 255``), when
    :math:`k > (\mu - k) \bmod c`. The involution reverses :math:`[0, \mu]` and
    :math:`[\mu + 1, c)`, so each run keeps its first half and receives the flipped
    mirror image of it in its second half: two slice copies per row, no index tensor.
    """
    rows = columns.shape[1]
    for column, m in zip(columns, mu.tolist(), strict=True):
        first, second = (m + 1) // 2, (rows - m - 1) // 2
        column[first : m + 1] = column[:first].flip(0) ^ 255
        column[m + 1 + second :] = column[m + 1 : m + 1 + second].flip(0) ^ 255
    return columns


def columns(matrix: torch.Tensor) -> torch.Tensor:
    """The transpose of ``matrix`` ``(rows, cols)``, contiguous, copied column by column (faster than strided)."""
    return torch.stack(matrix.unbind(1))


def _first_copies(rows: torch.Tensor) -> list[int]:
    """For each row of ``rows`` ``(heads, n)``, the index of the first row equal to it (itself if none before)."""
    firsts: list[int] = []
    for head in range(rows.shape[0]):
        firsts.append(next((j for j in range(head) if firsts[j] == j and torch.equal(rows[j], rows[head])), head))
    return firsts


def _byte_index(packed: torch.Tensor) -> torch.Tensor:
    """The bytes of a packed block ``(rows, groups)`` as int32 look-up indices, one contiguous row per group."""
    return packed.t().to(torch.int32, memory_format=torch.contiguous_format)


def _lookup_tables(queries: torch.Tensor, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
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
    return tables * scale, queries.sum(-1) * scale
