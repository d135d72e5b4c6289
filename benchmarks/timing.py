r"""Side-by-side timing on a noisy machine: interleaved rounds, medians, and ratios taken within a round.

Three rules, because this machine is shared:

1. **Same process, interleaved.** The functions compared run in the same
   process, one call each per round, in an order that rotates every round, so
   a burst of load from elsewhere hits all of them.
2. **Warm-up, then medians.** The first call pays for lazy initialisation; the
   median over rounds ignores the odd slow round.
3. **Ratios, not seconds.** A ratio is taken *within* each round (both calls
   saw the same load) and the median of those ratios is reported; seconds are
   printed only to show the scale.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch

__all__ = ["Timing", "time_interleaved"]


@dataclass(frozen=True)
class Timing:
    """Seconds of one function, one sample per round (``samples_s[i]`` is round ``i``)."""

    samples_s: tuple[float, ...]

    @property
    def median_s(self) -> float:
        """The median over rounds."""
        return statistics.median(self.samples_s)

    def ratio_to(self, baseline: Timing) -> float:
        """The median over rounds of this time divided by the baseline's time in the same round."""
        return statistics.median(a / b for a, b in zip(self.samples_s, baseline.samples_s, strict=True))


def time_interleaved(
    functions: Mapping[str, Callable[[], object]], *, repeats: int = 5, warmup: int = 1, device: str = "cpu"
) -> dict[str, Timing]:
    """Time zero-argument callables side by side: ``warmup`` untimed calls each, then ``repeats`` rotating rounds.

    Garbage collection is off while a call is timed; on CUDA each call is
    followed by a synchronisation, so that queued kernels are counted.
    """
    if not functions:
        raise ValueError("functions must name at least one callable")
    if repeats < 1 or warmup < 0:
        raise ValueError(f"repeats must be >= 1 and warmup >= 0, got {repeats} and {warmup}")
    sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)
    names = list(functions)
    for name in names:
        for _ in range(warmup):
            functions[name]()
    gc.collect()
    samples: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(repeats):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(_timed(functions[name], sync))
    return {name: Timing(tuple(samples[name])) for name in names}


def _timed(function: Callable[[], object], sync: Callable[[], None]) -> float:
    enabled = gc.isenabled()
    gc.disable()
    try:
        sync()
        start = time.perf_counter()
        function()
        sync()
        return time.perf_counter() - start
    finally:
        if enabled:
            gc.enable()
