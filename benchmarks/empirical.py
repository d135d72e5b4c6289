r"""The empirical one step against its floor (issue 23): drawing the :math:`nd` sample bits, and one pass over them.

*The floor.* Any one step from :math:`n` samples must draw their :math:`nd` bits
(here with the book's generator: torch's Mersenne Twister, 64 bits a word, in
blocks of :data:`BLOCK_BYTES` bytes) and read each of them at least once to use
it. :func:`draw_samples` does the first; :func:`sample_floor` does both, the
pass being the least a use of the samples costs: one linear functional
:math:`\langle w, x_s\rangle` per sample, read off one 256-entry look-up table
per byte (the samples never unpacked), the fastest pass this torch offers.

*The step.* ``xorlib.one_step(d, heads, n=n)``: the sampled gradient (a forward
pass of both heads and a backward pass into per-byte histograms,
``xorlib._samples``), the step rule, the attention after the step and the
certified worst case over all :math:`2^d` inputs. Both are single-threaded;
the ratio is taken within each interleaved round (:mod:`benchmarks.timing`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

import xorlib

from .suite import BenchmarkResult
from .timing import time_interleaved

__all__ = ["FULL_SIZE", "SMALL_SIZE", "EmpiricalRow", "draw_samples", "empirical_benchmark", "sample_floor"]

#: ``make benchmarks``: the size of issue 23 (d, n).
FULL_SIZE = (1024, 10**6)
#: ``--small`` and the CI test.
SMALL_SIZE = (256, 2**17)
#: Bytes of sample bits drawn per block (2^22 bits, as the stream's chunks).
BLOCK_BYTES = 2**19


@dataclass(frozen=True)
class EmpiricalRow:
    d: int
    n: int
    heads: str
    draw_s: float  # draw the n d sample bits, nothing else
    floor_s: float  # draw them and one pass: <w, x_s> for every sample, off byte look-up tables
    step_s: float  # xorlib.one_step(d, heads, n=n): sampled gradient, step, certified worst case
    step_over_floor: float
    step_over_draw: float
    success: bool


def _blocks(d: int, n: int, seed: int) -> Iterator[torch.Tensor]:
    """The packed bits of ``n`` samples of ``d`` bits, ``(rows, ceil(d/8))`` uint8, block by block."""
    per_row = (d + 7) // 8
    rows = max(1, BLOCK_BYTES // per_row)
    gen = torch.Generator().manual_seed(seed)
    for start in range(0, n, rows):
        count = min(rows, n - start)
        words = torch.randint(-(2**63), 2**63 - 1, (-(-count * per_row // 8),), generator=gen)
        yield words.view(torch.uint8)[: count * per_row].view(count, per_row)


def draw_samples(d: int, n: int, *, seed: int = 0) -> int:
    """Draw the ``n * d`` sample bits and drop them; returns the number of samples drawn."""
    return sum(block.shape[0] for block in _blocks(d, n, seed))


def sample_floor(d: int, n: int, weights: torch.Tensor, *, seed: int = 0) -> torch.Tensor:
    r"""The floor: draw the ``n * d`` sample bits and give :math:`\langle w, x_s\rangle` ``(n,)`` for ``weights`` ``(d,)``.

    Bit :math:`i` of byte :math:`j` of a sample is :math:`x_{8j+i} = \pm 1` (bit 1 is :math:`-1`); the table of byte
    position :math:`j` holds :math:`\sum_i w_{8j+i}\sigma_i(c)` for every byte value :math:`c` (float32).
    """
    per_row = (d + 7) // 8
    signs = 1.0 - 2.0 * ((np.arange(256)[:, None] >> np.arange(8)) & 1)  # (256, 8)
    padded = np.zeros(8 * per_row)
    padded[:d] = weights.detach().cpu().numpy()
    table = torch.from_numpy((padded.reshape(per_row, 8) @ signs.T).reshape(-1, 1).astype(np.float32))
    offsets = np.arange(per_row, dtype=np.intp) * 256
    out = [
        F.embedding_bag(torch.from_numpy(np.add(block.numpy(), offsets, dtype=np.intp)), table, mode="sum")[:, 0]
        for block in _blocks(d, n, seed)
    ]
    return torch.cat(out)


def empirical_benchmark(
    size: tuple[int, int] = FULL_SIZE, *, repeats: int = 5, flag: str = "", seed: int = 0
) -> BenchmarkResult:
    """The empirical one step of both models at ``size = (d, n)`` against the draw and the floor, side by side."""
    d, n = size
    weights = torch.randn(d, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)) / d
    results = {}

    def step(heads: str) -> None:
        results[heads] = xorlib.one_step(d, heads, seed=seed, n=n, epsilon=1e-2)

    with _one_thread():
        timings = time_interleaved(
            {
                "draw": lambda: draw_samples(d, n, seed=seed),
                "floor": lambda: sample_floor(d, n, weights, seed=seed),
                "tied": lambda: step("tied"),
                "split": lambda: step("split"),
            },
            repeats=repeats,
        )
    rows = tuple(
        EmpiricalRow(
            d=d,
            n=n,
            heads=heads,
            draw_s=timings["draw"].median_s,
            floor_s=timings["floor"].median_s,
            step_s=timings[heads].median_s,
            step_over_floor=timings[heads].ratio_to(timings["floor"]),
            step_over_draw=timings[heads].ratio_to(timings["draw"]),
            success=results[heads].success,
        )
        for heads in ("tied", "split")
    )
    return BenchmarkResult(
        name="empirical",
        title=f"One empirical step at d = {d:,}, n = {n:,} against its floor",
        command=f"python -m benchmarks{flag} --only empirical",
        rows=rows,
        note=(
            f"step: xorlib.one_step(d, heads, seed={seed}, n={n}, epsilon=0.01): the gradient on the first n samples "
            "of the stream (forward and backward passes read off per-byte tables and histograms, never unpacked), the "
            "certified step rule, the attention after it and the certified worst case over all 2^d inputs. draw: "
            "the n·d sample bits drawn with the book's generator (torch's Mersenne Twister, 64-bit words, blocks of "
            "2^19 bytes). floor: draw, then one pass, <w, x_s> for every sample off 256-entry byte tables. Ratios: "
            f"the median over {repeats} interleaved rounds of step / floor (and step / draw) within a round."
        ),
    )


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """One torch thread: the floor is compared with the single-threaded step on equal terms."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
