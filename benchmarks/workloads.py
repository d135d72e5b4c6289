r"""What the benchmarks time: the floor, and the codes of :class:`xorlib.codes.Codes` generated and used.

*The floor* (issue 14): the least work any code of :math:`d` rows and :math:`m`
random signs must do to give the scores of one query: draw the :math:`dm`
random bits, unpack them to float signs (one pass), and take one
matrix-vector product. :func:`floor` does exactly that, in blocks of
:data:`ROWS` rows (the codes' own block size, which is also faster than one
:math:`d \times m` matrix: the block stays in cache), in float64 like the
package. Our codes must do more (balance every column), and then never unpack:
:meth:`xorlib.codes.Codes.scores` reads the scores off look-up tables.

*The honest floor* (issue 23): the unpacking and the product cost far more than
drawing the bits (at :math:`d = 10^8`, about 80 times more), so the floor above
flatters anything that never unpacks. :func:`code_bits` only draws the
:math:`dm` code bits, block by block, with the generator and the seeds the codes
themselves use: any step must at least do that once.
"""

from __future__ import annotations

import torch

from xorlib._random import generator, random_bytes
from xorlib.codes import Codes

__all__ = ["ROWS", "code_bits", "floor", "generate_codes", "score_pass"]

#: Rows per block of the floor: the codes' block size.
ROWS = Codes.BLOCK
_SIGNS = torch.tensor([[-1.0 if (value >> bit) & 1 else 1.0 for bit in range(8)] for value in range(256)])


def floor(
    d: int, m: int, query: torch.Tensor, *, seed: int = 0, dtype: torch.dtype = torch.float64, device: str = "cpu"
) -> torch.Tensor:
    """The floor: ``d * m`` random bits drawn, unpacked to float signs, times ``query`` ``(m,)``; returns ``(d,)``."""
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    groups = (m + 7) // 8
    signs_of_byte = _SIGNS.to(device=device, dtype=dtype)
    query = query.to(device=device, dtype=dtype)
    out = torch.empty(d, dtype=dtype, device=device)
    for start in range(0, d, ROWS):
        rows = min(ROWS, d - start)
        words = torch.randint(-(2**63), 2**63 - 1, (-(-rows * groups // 8),), generator=gen, device=device)
        packed = words.view(torch.uint8)[: rows * groups].view(rows, groups)
        signs = signs_of_byte[packed.long()].view(rows, 8 * groups)[:, :m]
        out[start : start + rows] = signs @ query
    return out


def code_bits(codes: Codes) -> int:
    """The honest floor: draw the random bytes of every block of ``codes`` as the codes do (the same generators,
    seeds and draws), and nothing else; returns the number of bytes drawn."""
    groups, drawn = (codes.main + 7) // 8, 0
    for block in range(codes.num_blocks):
        start, stop = codes._block_range(block)
        gen = generator(codes.seed, "codes", codes.kind, codes.d, codes.m, block)
        drawn += random_bytes(gen, (stop - start) * groups).numel()
    return drawn


def generate_codes(codes: Codes, *, device: str = "cpu") -> int:
    """Generate every block of ``codes`` (packed bits, exactly balanced) and drop it; returns the number of rows."""
    return sum(view.stop - view.start for view in codes.views(device=device))


def score_pass(codes: Codes, query: torch.Tensor) -> torch.Tensor:
    r"""One streamed pass: the codes generated block by block and the scores :math:`Pq` of ``query`` ``(m,)``."""
    return codes.scores(query)
