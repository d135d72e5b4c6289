r"""The empirical gradient streamed over samples, from their packed bits: memory :math:`O(\text{chunk}\cdot d/8)`, whole learning curves in one pass.

The samples of one stream come in chunks of :func:`chunk_rows` rows; chunk
:math:`c` is drawn from its own generator (``seed``, ``d``, :math:`c`) as packed bits
(bit :math:`i` of byte :math:`j` of a row is position :math:`8j+i`; bit 1 is
:math:`x_k = -1`), so the first :math:`n` samples are the same whatever the stream's
length. The samples are never unpacked. With :math:`B_{s,j}` the :math:`j`-th byte of
sample :math:`s` and :math:`\sigma_i(c) = \pm1` the :math:`i`-th sign of byte value
:math:`c`:

* the forward pass looks each byte up in a table of the head weights,
  :math:`z_{h,s} = \sum_j T_{h,j}[B_{s,j}]` with
  :math:`T_{h,j}[c] = \sum_{i<8}\alpha_{h,8j+i}\,\sigma_i(c)` (float32 tables: one
  gather of both heads per byte, ``torch.nn.functional.embedding_bag``);
* the backward pass adds each sample's pulls :math:`p_{1,s} = r_s z_{2,s}`,
  :math:`p_{2,s} = r_s z_{1,s}` (residual :math:`r_s = f(x_s) - y_s`) into a histogram
  per byte position, :math:`H_{h,j}[c] \mathrel{+}= p_{h,s}` where :math:`B_{s,j} = c`
  (float64, both heads as one complex number, an accumulating ``index_put_``), and only at a
  snapshot turns it into the gradient,

.. math:: \sum_{s\le n} p_{h,s}\, x_{s,8j+i} = \sum_{c<256} H_{h,j}[c]\,\sigma_i(c),
   \qquad \frac{\partial\hat L}{\partial\alpha_1} = -\frac{c_1}{n}\sum_{s\le n} r_s\, z_{2,s}\, x_s .

The histogram adds the samples one at a time, in stream order, so the gradient of the
first :math:`n` samples is bitwise the same whether it is computed alone or as one
snapshot of a learning curve, whatever the blocks a chunk is cut into, and for any
thread count (on one machine; across CPUs, equal to rounding). It differs from the
float64 product of :mod:`xorlib.empirical` on the same samples by the float32 forward
pass: about :math:`10^{-7}` relative, measured (``tests/core/test_samples.py`` bounds it),
far below the sampling noise :math:`n^{-1/2}`.
This module trusts its callers.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ._random import BYTE_SIGNS, bytes_to_signs, generator, random_bytes

#: Row ``c`` holds the eight signs of the byte value ``c`` (float64, numpy).
_SIGNS = BYTE_SIGNS.to(torch.float64).numpy()


#: Packed bytes of samples per pass of the forward and backward products (a chunk is cut into such blocks).
BLOCK_BYTES = 2**19


def chunk_rows(d: int) -> int:
    """Rows per chunk of samples: about 2^19 packed bytes (2^22 bits), at least 1024 rows."""
    return max(1024, 2**22 // d)


def packed_chunks(d: int, seed: int, total: int) -> Iterator[np.ndarray]:
    """The first ``total`` samples of the stream of ``seed``, chunk by chunk, as packed bits ``(rows, ceil(d/8))`` uint8."""
    rows, per_row = chunk_rows(d), (d + 7) // 8
    for chunk, start in enumerate(range(0, total, rows)):
        count = min(rows, total - start)
        gen = generator(seed, "data-stream", d, chunk)
        yield random_bytes(gen, rows * per_row).view(rows, per_row)[:count].numpy()


def stream_samples(d: int, pair: tuple[int, int], seed: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``n`` samples of the stream as dense float64 signs ``x`` ``(n, d)`` and labels ``y`` ``(n,)`` (for tests)."""
    x = torch.cat([bytes_to_signs(torch.from_numpy(b), d, torch.float64) for b in packed_chunks(d, seed, n)])
    return x, -x[:, pair[0]] * x[:, pair[1]]


def _sign_at(packed: np.ndarray, k: int) -> np.ndarray:
    """The signs :math:`x_{s,k}` of one position, ``(rows,)`` float64."""
    return 1.0 - 2.0 * ((packed[:, k // 8] >> (k % 8)) & 1)


def score_gradients(
    scores: torch.Tensor,
    pair: tuple[int, int],
    readout: tuple[float, float],
    normaliser,
    sample_sizes: Sequence[int],
    seed: int,
) -> list[torch.Tensor]:
    r"""The empirical score gradient :math:`\partial\hat L/\partial s` ``(..., 2, d)`` for each ``n`` of ``sample_sizes`` (increasing).

    One pass over the packed bits of the first ``max(sample_sizes)`` samples of the stream of ``seed``.
    ``scores`` is ``(2, d)`` for one model, or ``(models, 2, d)`` for several models (several starts) on the
    same samples.
    """
    c0, c1 = readout
    d = scores.shape[-1]
    per_row = (d + 7) // 8
    weights = normaliser.weights(scores)
    flat = weights.detach().reshape(-1, d).cpu().to(torch.float64).numpy()  # (2 * models, d), head-major per model
    models = flat.shape[0] // 2
    padded = np.zeros((flat.shape[0], 8 * per_row))
    padded[:, :d] = flat
    tables = np.einsum("ci,hji->jch", _SIGNS, padded.reshape(-1, per_row, 8))  # T_{h,j}[c], (per_row, 256, 2M)
    tables = torch.from_numpy(tables.reshape(per_row * 256, -1).astype(np.float32))
    offsets = np.arange(per_row, dtype=np.intp) * 256
    histogram = torch.zeros((models, per_row * 256), dtype=torch.complex128)  # H_1 + i H_2 per model
    seen, out, targets = 0, [], list(sample_sizes)
    block = max(1, BLOCK_BYTES // per_row)  # rows per pass: the table index stays within 9 x BLOCK_BYTES bytes
    for chunk in packed_chunks(d, seed, targets[-1]):
        for first in range(0, chunk.shape[0], block):
            packed = chunk[first : first + block]
            index, pulls = _forward(packed, offsets, tables, pair, c0, c1)
            start = 0
            while start < packed.shape[0]:
                stop = min(packed.shape[0], start + targets[len(out)] - seen)  # never run past the next snapshot
                where = index[start:stop]
                for k in range(models):  # sample by sample, in stream order, into bin (j, B_sj)
                    histogram[k].index_put_((where,), pulls[start:stop, k, None].expand(where.shape), accumulate=True)
                seen += stop - start
                start = stop
                while len(out) < len(targets) and seen == targets[len(out)]:
                    out.append(_snapshot(histogram, _SIGNS, d, seen, c1, scores, weights, normaliser))
    return out


def _forward(
    packed: np.ndarray, offsets: np.ndarray, tables: torch.Tensor, pair: tuple[int, int], c0: float, c1: float
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The table index ``(rows, per_row)`` of a block of packed samples and its pulls :math:`p_1 + i p_2` ``(rows, models)``."""
    index = torch.from_numpy(np.add(packed, offsets, dtype=np.intp))  # byte j of a row looks in table j
    z = F.embedding_bag(index, tables, mode="sum").to(torch.float64)  # (rows, 2 * models): z_{h,s}
    z = z.reshape(z.shape[0], -1, 2)  # (rows, models, heads)
    y = torch.from_numpy(-_sign_at(packed, pair[0]) * _sign_at(packed, pair[1]))
    residual = c0 - c1 * z[..., 0] * z[..., 1] - y[:, None]  # (rows, models)
    pulls = residual[..., None] * z.flip(-1)  # (rows, models, 2): head 1 is pulled by z_2, head 2 by z_1
    return index, torch.view_as_complex(pulls)


def _snapshot(
    histogram: torch.Tensor,
    signs: np.ndarray,
    d: int,
    n: int,
    c1: float,
    scores: torch.Tensor,
    weights: torch.Tensor,
    normaliser,
) -> torch.Tensor:
    r"""The score gradient of the first ``n`` samples from the histograms: :math:`\sum_c H_{h,j}[c]\,\sigma_i(c)`, pulled back."""
    per_row = histogram.shape[1] // 256
    both = torch.stack([histogram.real, histogram.imag], dim=1).numpy().reshape(-1, per_row, 256)  # (2M, per_row, 256)
    sums = (both @ signs).reshape(-1, 2, per_row * 8)[..., :d]  # sum_s p_{h,s} x_s, (models, 2, d)
    grad_weights = torch.from_numpy((-c1 / n) * sums).to(dtype=scores.dtype, device=scores.device)
    return normaliser.pullback(scores, weights, grad_weights.reshape(scores.shape))
