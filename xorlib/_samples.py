r"""The empirical gradient streamed over samples: memory :math:`O(\text{chunk}\cdot d)`, and whole learning curves in one pass.

The samples of one stream come in chunks of :func:`chunk_rows` rows; chunk
:math:`c` is drawn from its own generator (``seed``, ``d``, :math:`c`), so the first
:math:`n` samples are the same whatever the stream's length. The gradient of the
mean loss is a sum over samples (:mod:`xorlib.empirical`),

.. math:: \frac{\partial\hat L}{\partial\alpha_1} = -\frac{c_1}{n}\sum_{s\le n} r_s\, z_{2,s}\, x_s ,

so one pass over the longest stream gives the gradient for every :math:`n` on the
way, by snapshotting the running sums. This module trusts its callers.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch

from ._random import bytes_to_signs, generator, random_bytes


def chunk_rows(d: int) -> int:
    """Rows per chunk of samples: about 2^22 entries (32 MB in float64), at least 1024 rows."""
    return max(1024, 2**22 // d)


def _chunks(
    d: int, pair: tuple[int, int], seed: int, total: int, dtype, device
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """The first ``total`` samples of the stream, chunk by chunk: ``x`` ``(rows, d)`` and ``y`` ``(rows,)``."""
    rows, per_row = chunk_rows(d), (d + 7) // 8
    u, v = pair
    for chunk, start in enumerate(range(0, total, rows)):
        count = min(rows, total - start)
        gen = generator(seed, "data-stream", d, chunk)
        packed = random_bytes(gen, rows * per_row).view(rows, per_row)[:count]
        x = bytes_to_signs(packed.to(device), d, dtype)
        yield x, -x[:, u] * x[:, v]


def score_gradients(
    scores: torch.Tensor,
    pair: tuple[int, int],
    readout: tuple[float, float],
    normaliser,
    sample_sizes: Sequence[int],
    seed: int,
) -> list[torch.Tensor]:
    r"""The empirical score gradient :math:`\partial\hat L/\partial s` ``(..., 2, d)`` for each ``n`` of ``sample_sizes`` (increasing).

    One pass over the first ``max(sample_sizes)`` samples of the stream of ``seed``. ``scores`` is ``(2, d)``
    for one model, or ``(models, 2, d)`` for several models (several starts) on the same samples.
    """
    c0, c1 = readout
    d = scores.shape[-1]
    weights = normaliser.weights(scores)
    running = torch.zeros_like(scores)
    seen, out = 0, []
    targets = list(sample_sizes)
    for x, y in _chunks(d, pair, seed, targets[-1], scores.dtype, scores.device):
        start = 0
        while start < x.shape[0]:
            stop = min(x.shape[0], start + targets[len(out)] - seen)  # never run past the next snapshot
            block_x, block_y = x[start:stop], y[start:stop]
            z = weights @ block_x.T  # (..., 2, rows)
            residual = c0 - c1 * z[..., 0, :] * z[..., 1, :] - block_y  # (..., rows)
            running += (residual.unsqueeze(-2) * z.flip(-2)) @ block_x
            seen += stop - start
            start = stop
            while len(out) < len(targets) and seen == targets[len(out)]:
                grad_weights = (-c1 / seen) * running
                out.append(normaliser.pullback(scores, weights, grad_weights))
    return out
