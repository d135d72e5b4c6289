r"""Fixed positional codes :math:`p_1, \dots, p_d \in \mathbb{R}^m`, dense or streamed.

*Reconstruction.* The paper's embedding is not available here. The book uses
what the one-step analysis needs, and proves that it is enough:

* **unit norm**, :math:`\|p_k\| = 1`, so that the two hidden positions receive
  exactly the same score after a step of the tied model;
* **balance**, :math:`\sum_k p_k = 0`, which removes the label-independent part
  of the population gradient exactly;
* **sign entries**, so that every margin is a multiple of a known lattice step
  (:math:`4/m` for even :math:`d`), which gives a step size that needs no
  knowledge of the hidden pair.

``"balanced"`` (the default) meets all three for **every** :math:`d \ge 4`:

* *even d*: entries :math:`\pm 1/\sqrt m`. Positions come in blocks of
  :data:`BLOCK` rows; inside a block, each group of eight coordinates pairs the
  rows by a random fixed-point-free involution :math:`k \leftrightarrow (\mu - k)
  \bmod c` (:math:`\mu` odd) and gives paired rows opposite signs on those
  coordinates. So every column sums to exactly zero, each block depends only on
  ``(seed, block)`` and can be regenerated on its own, and no two rows are
  forced to be opposite (a pairing covers eight coordinates, not all of them);
* *odd d*: a column of an odd number of signs cannot sum to zero, so the code
  uses :math:`M = m - 1` "main" coordinates (``m`` must be odd) and one extra
  coordinate, with every row holding exactly :math:`M` nonzero entries
  :math:`\pm 1/\sqrt M`. The last :math:`m` rows form a tail in which row
  :math:`1 + r` is zero on main coordinate :math:`r` and nonzero on the extra
  one; every column then holds an even number of nonzeros, half of each sign.

``"iid"`` codes have independent uniform signs :math:`\pm 1/\sqrt m` (not
balanced); ``"gaussian"`` codes are independent Gaussian rows normalised to unit
length; ``"onehot"`` codes are the standard basis (:math:`m = d`). The book uses
the last three to show what breaks without balance.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from typing import Annotated, ClassVar

import torch

from ._checks import check_int, check_size, check_tensor
from ._contract import MAX_D, MAX_M, Array, Between, CodeKind, Device, Items, Seed, config, public
from ._packed import BlockView, columns, pair_rows, paired_columns, used_bits
from ._random import bytes_to_signs, generator, random_bytes

__all__ = ["Codes"]

#: Rows per generated block: the codes never depend on how a caller iterates over them.
BLOCK = 2**16


def _default_code_dim(d: int) -> int:
    r"""The default code dimension: :math:`m = \max(8, \lceil 4\log_2 d\rceil)`, made odd (and at most ``d``) for odd ``d``."""
    m = max(8, math.ceil(4 * math.log2(d)))
    if d % 2:
        m = min(m + (m % 2 == 0), d)
    return m


@config
class Codes:
    r"""The code matrix :math:`P \in \mathbb{R}^{d \times m}` (row :math:`k` is :math:`p_k`), defined by its seed.

    Nothing is stored but the four fields: :meth:`dense` builds the matrix,
    :meth:`blocks` yields it block by block, and :meth:`scores` / :meth:`pull`
    compute :math:`Pq` and :math:`P^\top w` from packed bits without ever
    forming a float matrix, in memory :math:`O(\text{BLOCK}\cdot m)`.

    Parameters
    ----------
    d
        Number of positions, ``4 <= d <= 10^9``.
    m
        Code dimension, at most 4096; ``None``: the default
        :math:`m = \max(8, \lceil 4\log_2 d\rceil)`, made odd (and at most ``d``) for odd
        ``d``, so :math:`2m` trainable parameters, polylogarithmic in :math:`d`. For a given
        pair, balanced sign codes of this size separate the pair from every other position
        with probability at least :math:`1 - (d-2)(3/4)^m \approx 1 - d^{-0.66}`
        (:func:`xorlib.theory.tie_probability_bound`). Balanced codes with odd ``d``
        need an odd ``m`` with ``3 <= m <= d``; one-hot codes need ``m == d``.
    seed
        Seed of the draw: the same seed gives the same codes on every device.
    kind
        ``"balanced"``, ``"iid"``, ``"gaussian"`` or ``"onehot"``.

    Examples
    --------
    >>> codes = Codes(1000, seed=0)
    >>> codes.m, codes.margin_step
    (40, 0.1)
    >>> codes.dense().shape
    torch.Size([1000, 40])
    """

    d: Annotated[int, Between(4, MAX_D)]
    m: Annotated[int | None, Between(1, MAX_M)] = None
    seed: Seed = 0
    kind: CodeKind = "balanced"

    #: Rows per generated block: the codes never depend on how a caller iterates over them.
    BLOCK: ClassVar[int] = BLOCK

    def __post_init__(self) -> None:
        d, kind = self.d, self.kind
        if self.m is None:
            m = d if kind == "onehot" else _default_code_dim(d)
        elif kind == "onehot":
            m = check_int("m", self.m, minimum=d, maximum=d)
        elif kind == "balanced" and d % 2:
            m = check_int("m", self.m, minimum=3, maximum=d)
            if m % 2 == 0:
                raise ValueError(f"m must be odd for balanced codes with odd d = {d}, got {m}")
        else:
            m = self.m
        object.__setattr__(self, "m", m)

    # ----------------------------------------------------------------- layout
    @property
    def odd_balanced(self) -> bool:
        """Whether the odd-``d`` balanced layout (main coordinates, extra coordinate, tail) is used."""
        return self.kind == "balanced" and self.d % 2 == 1

    @property
    def main(self) -> int:
        """Number of main (packed-sign) coordinates: ``m - 1`` for odd balanced codes, else ``m``."""
        return self.m - 1 if self.odd_balanced else self.m

    @property
    def nonzeros(self) -> int:
        r"""Nonzero entries per row, :math:`N`; every nonzero entry of a sign code is :math:`\pm 1/\sqrt N`."""
        return self.main

    @property
    def margin_step(self) -> float:
        r"""The lattice step of the tied margin :math:`\langle p_u - p_k, p_u + p_v\rangle`: positive margins are at least this.

        :math:`4/m` for sign codes with full support (even ``d``, or ``"iid"``): the
        margin is :math:`\tfrac4m` times the number of coordinates where
        :math:`p_u` and :math:`p_v` agree and :math:`p_k` differs. :math:`1/N` for
        the odd-``d`` layout, whose zeros break the factor 4. ``nan`` for
        Gaussian and one-hot codes (no lattice, or no ties).
        """
        if self.kind in ("gaussian", "onehot"):
            return math.nan
        return 1.0 / self.nonzeros if self.odd_balanced else 4.0 / self.m

    @property
    def bulk(self) -> int:
        """Rows generated in blocks (all of them, except the ``m``-row tail of the odd-``d`` layout)."""
        return self.d - self.m if self.odd_balanced else self.d

    @property
    def packed(self) -> bool:
        """Whether the bulk rows are sign codes stored as packed bits."""
        return self.kind in ("balanced", "iid")

    @property
    def _unit(self) -> int:
        """Block sizes are multiples of this: 2 for balanced codes (rows are paired), else 1."""
        return 2 if self.kind == "balanced" else 1

    def _block_range(self, block: int) -> tuple[int, int]:
        """Rows ``[start, stop)`` of a block: ``num_blocks`` blocks of near-equal sizes (even, for balanced codes)."""
        unit = self._unit
        size, extra = divmod(self.bulk // unit, self.num_blocks)
        start = unit * (block * size + min(block, extra))
        return start, start + unit * (size + (block < extra))

    def _block_of(self, row: int) -> int:
        """The block holding bulk row ``row`` (inverse of :meth:`_block_range`)."""
        size, extra = divmod(self.bulk // self._unit, self.num_blocks)
        unit_index = row // self._unit
        if unit_index < extra * (size + 1):
            return unit_index // (size + 1)
        return extra + (unit_index - extra * (size + 1)) // size

    @property
    def num_blocks(self) -> int:
        """Number of blocks of bulk rows (each at most :data:`BLOCK` rows, at least half that unless there is one)."""
        return -(-self.bulk // BLOCK)

    # --------------------------------------------------------------- generation
    def _packed_block(self, block: int) -> torch.Tensor:
        """Packed sign bits of one block of bulk rows, ``(rows, ceil(main/8))`` uint8 on the CPU (bit 1 is -1).

        Stored group by group (column-major), so that each group's bytes are contiguous for the look-ups.
        """
        start, stop = self._block_range(block)
        rows, groups = stop - start, (self.main + 7) // 8
        gen = generator(self.seed, "codes", self.kind, self.d, self.m, block)
        raw = random_bytes(gen, rows * groups).view(rows, groups)
        if self.kind == "balanced":
            raw = pair_rows(raw, rows, self.main, gen)
        else:
            raw = columns(raw).t()
        if self.main % 8:
            raw[:, -1] &= used_bits(self.main)  # unused bits contribute nothing to the products
        return raw

    def _paired_columns(
        self,
        block: int,
        words: torch.Tensor,
        out: torch.Tensor,
        mu_out: torch.Tensor | None = None,
        groups: int | None = None,
    ) -> torch.Tensor:
        """The bytes of :meth:`_packed_block` as columns ``(groups, rows)`` uint8, drawn into reused buffers.

        ``words`` (int64) holds at least the block's random words and ``out`` is ``(groups, rows)``; the
        draws are those of :meth:`_packed_block`, in the same order, so the bits are the same. ``mu_out`` and
        ``groups``: see :func:`xorlib._packed.paired_columns` (the draws stay in ``words``).
        """
        start, stop = self._block_range(block)
        rows, groups = stop - start, (self.main + 7) // 8
        gen = generator(self.seed, "codes", self.kind, self.d, self.m, block)
        count = rows * groups
        words = words[: (count + 7) // 8]
        torch.randint(-(2**63), 2**63 - 1, words.shape, generator=gen, dtype=torch.int64, out=words)
        raw = words.view(torch.uint8)[:count].view(rows, groups)
        return paired_columns(raw, self.main, gen, self.kind == "balanced", out, mu_out, groups)

    def _tail_signs(self) -> torch.Tensor:
        """The ``m`` tail rows of the odd-``d`` layout as signs in {-1, 0, +1}, ``(m, m)`` float64."""
        m, main = self.m, self.main
        gen = generator(self.seed, "codes-tail", self.d, self.m)
        half = torch.cat([torch.ones(main // 2), -torch.ones(main // 2)]).double()
        tail = torch.zeros(m, m, dtype=torch.float64)
        others = torch.arange(m)
        for r in range(main):  # a loop over the m - 1 columns of an m-row tail, never over positions
            rows = others[others != 1 + r]
            tail[rows, r] = half[torch.randperm(main, generator=gen)]
        tail[1:, main] = half[torch.randperm(main, generator=gen)]
        return tail

    def _gaussian_block(self, block: int, dtype: torch.dtype) -> torch.Tensor:
        start, stop = self._block_range(block)
        gen = generator(self.seed, "codes", self.kind, self.d, self.m, block)
        rows = torch.randn(stop - start, self.m, generator=gen, dtype=torch.float64)
        return (rows / rows.norm(dim=1, keepdim=True)).to(dtype)

    def _dense_block(self, block: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """Rows of one block as a float matrix ``(rows, m)``."""
        if self.kind == "gaussian":
            return self._gaussian_block(block, dtype).to(device)
        if self.kind == "onehot":
            start, stop = self._block_range(block)
            eye = torch.zeros(stop - start, self.m, dtype=dtype, device=device)
            eye[torch.arange(stop - start), torch.arange(start, stop)] = 1.0
            return eye
        signs = bytes_to_signs(self._packed_block(block).contiguous().to(device), self.main, dtype)
        if self.odd_balanced:
            signs = torch.cat([signs, signs.new_zeros(signs.shape[0], 1)], dim=1)
        return signs.mul_(1.0 / math.sqrt(self.nonzeros))

    @public
    def blocks(
        self, *, dtype: torch.dtype = torch.float64, device: Device = "cpu"
    ) -> Iterator[tuple[int, torch.Tensor]]:
        """Yield ``(start, rows)``: consecutive row blocks of :math:`P`, each ``(rows, m)``, memory O(BLOCK m).

        Examples
        --------
        >>> [(start, rows.shape) for start, rows in Codes(9, 5).blocks()]
        [(0, torch.Size([4, 5])), (4, torch.Size([5, 5]))]
        """
        for block in range(self.num_blocks):
            yield self._block_range(block)[0], self._dense_block(block, dtype, device)
        if self.odd_balanced:
            yield self.bulk, (self._tail_signs() / math.sqrt(self.nonzeros)).to(device=device, dtype=dtype)

    @public
    def dense(self, *, dtype: torch.dtype = torch.float64, device: Device = "cpu") -> torch.Tensor:
        """The whole matrix :math:`P`, shape ``(d, m)`` (refused above the allocation limit).

        Small matrices (at most 2**19 entries) are built once per process and copied on
        each call, so a caller may modify its copy.

        Examples
        --------
        >>> Codes(8, 4).dense().sum(0)  # balanced: every column sums to zero
        tensor([0., 0., 0., 0.], dtype=torch.float64)
        """
        check_size(f"the dense codes (d={self.d}, m={self.m})", self.d * self.m, dtype.itemsize)
        if self.d * self.m <= _DENSE_MEMO_ENTRIES:
            return _dense_memo(self, dtype).to(device=device, copy=True)
        return torch.cat([rows for _, rows in self.blocks(dtype=dtype, device=device)])

    @public
    def rows(
        self, index: Annotated[tuple[int, ...], Items(1, 2**16)], *, dtype: torch.dtype = torch.float64
    ) -> torch.Tensor:
        """The rows ``P[index]``, shape ``(len(index), m)``, built from their blocks only.

        Examples
        --------
        >>> bool((Codes(100).rows([3, 7]) == Codes(100).dense()[[3, 7]]).all())
        True
        """
        index = [check_int(f"index[{slot}]", k, minimum=0, maximum=self.d - 1) for slot, k in enumerate(index)]
        out = torch.empty(len(index), self.m, dtype=dtype)
        tail = self._tail_signs() / math.sqrt(self.nonzeros) if self.odd_balanced else None
        for slot, k in enumerate(index):
            if k >= self.bulk:
                out[slot] = tail[k - self.bulk].to(dtype)
            else:
                block = self._block_of(k)
                out[slot] = self._block_row(block, k - self._block_range(block)[0], dtype)
        return out

    def _block_row(self, block: int, row: int, dtype: torch.dtype) -> torch.Tensor:
        """Row ``row`` of a block, as in :meth:`_dense_block`, unpacking only that row of a packed block."""
        if not self.packed:
            return self._dense_block(block, dtype, torch.device("cpu"))[row]
        signs = bytes_to_signs(self._packed_block(block)[row], self.main, dtype)
        if self.odd_balanced:
            signs = torch.cat([signs, signs.new_zeros(1)])
        return signs.mul_(1.0 / math.sqrt(self.nonzeros))

    # ---------------------------------------------------------------- products
    @public
    def views(self, *, dtype: torch.dtype = torch.float64, device: Device = "cpu") -> Iterator[BlockView]:
        """Yield one view per block of rows (the bulk blocks, then the odd-``d`` tail): packed bits or dense rows.

        A view has ``start``, ``stop``, ``scores(queries)`` and ``pull(weights)`` for its rows.

        Examples
        --------
        >>> [(view.start, view.stop) for view in Codes(9, 5).views()]
        [(0, 4), (4, 9)]
        """
        scale = 1.0 / math.sqrt(self.nonzeros) if self.kind in ("balanced", "iid") else 1.0
        for block in range(self.num_blocks):
            start, stop = self._block_range(block)
            if self.packed:
                yield BlockView(start, stop, self.m, self.main, scale, packed=self._packed_block(block).to(device))
            else:
                yield BlockView(start, stop, self.m, self.m, 1.0, rows=self._dense_block(block, dtype, device))
        if self.odd_balanced:
            tail = (self._tail_signs() * scale).to(device=device, dtype=dtype)
            yield BlockView(self.bulk, self.d, self.m, self.main, scale, rows=tail)

    @public
    def scores(self, queries: Annotated[torch.Tensor, Array(ndim=(1, 2, 3))]) -> torch.Tensor:
        r"""The scores :math:`s_{h,k} = \langle q_h, p_k\rangle` for queries ``(..., m)``: shape ``(..., d)``.

        Sign codes are never unpacked to floats: a score is :math:`m/8` look-ups of partial sums.

        Examples
        --------
        >>> codes = Codes(100)
        >>> q = torch.ones(codes.m, dtype=torch.float64)
        >>> bool(torch.allclose(codes.scores(q), codes.dense() @ q))
        True
        """
        queries = check_tensor("queries", queries, ndim=(1, 2, 3), shape={-1: self.m})
        check_size(f"the scores (d={self.d})", queries[..., 0].numel() * self.d, queries.dtype.itemsize)
        flat = queries.reshape(-1, self.m)
        parts = [view.scores(flat) for view in self.views(dtype=queries.dtype, device=queries.device)]
        return torch.cat(parts, dim=-1).reshape(*queries.shape[:-1], self.d)

    @public
    def pull(self, weights: Annotated[torch.Tensor, Array(ndim=(1, 2, 3))]) -> torch.Tensor:
        r"""The pull-back :math:`P^\top w = \sum_k w_k p_k` for ``weights`` of shape ``(..., d)``: shape ``(..., m)``.

        Examples
        --------
        >>> codes = Codes(100)
        >>> w = torch.full((100,), 0.01, dtype=torch.float64)
        >>> bool(torch.allclose(codes.pull(w), w @ codes.dense()))
        True
        """
        weights = check_tensor("weights", weights, ndim=(1, 2, 3), shape={-1: self.d})
        flat = weights.reshape(-1, self.d)
        total = flat.new_zeros(flat.shape[0], self.m)
        for view in self.views(dtype=weights.dtype, device=weights.device):
            total += view.pull(flat[:, view.start : view.stop])
        return total.reshape(*weights.shape[:-1], self.m)


#: Dense code matrices up to this many entries (4 MB in float64) are remembered by :meth:`Codes.dense`.
_DENSE_MEMO_ENTRIES = 2**19


@functools.lru_cache(maxsize=16)
def _dense_memo(codes: Codes, dtype: torch.dtype) -> torch.Tensor:
    """The dense matrix of small codes on the CPU (never handed out: :meth:`Codes.dense` copies it)."""
    return torch.cat([rows for _, rows in codes.blocks(dtype=dtype)])
