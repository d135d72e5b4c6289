r"""What the start scale :math:`\sigma` does with samples: the split model's one empirical step at several :math:`\sigma`.

For each draw (one seed: codes, pair, the start's direction and the samples, as
``one_step(d, "split", seed=seed, n=n, sigma=sigma, epsilon=0.01)``), the start is scaled by
each :math:`\sigma` of the plan and every start takes one step, with the self-certified rule,
on the first :math:`n` samples of the same stream, for each :math:`n` of the plan (multiples of
:math:`d^2`). Recorded per draw: success under criterion (a) (``def-success-criteria``: the
certified worst-case loss at most :math:`10^{-2}`), the position each head attends to most
after the step, and, beside them, whether the population step splits the heads from the
same start. Seeds from ``first_seed`` (7000), a range no other experiment of the book uses.
Experiment ``sigma_samples``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import numpy as np

from .._contract import MAX_SAMPLE_ENTRIES, Between, Items, Seed, config
from .._runtime import progress
from ..learners._one_step import StepConfig, learning_curves, take_step
from ..model import ModelConfig
from ..task import random_pair
from ._criteria import EPSILON
from ._registry import experiment


@dataclass(frozen=True)
class SigmaRow:
    """One start scale: of ``draws`` draws, how many succeed, split, or put both heads on one hidden bit, per sample size."""

    sigma: float
    draws: int
    successes: tuple[int, ...]  # per sample size: criterion (a)
    splits: tuple[int, ...]  # per sample size: the heads on the two different hidden bits
    one_bit: tuple[int, ...]  # per sample size: both heads on the same hidden bit
    population_splits: int  # the population step from the same starts splits the heads


@dataclass(frozen=True)
class SigmaSamples:
    """The split model's one empirical step at each start scale and sample size, draw by draw, and its rows."""

    d: int
    sigmas: tuple[float, ...]
    multiples: tuple[int, ...]  # the sample sizes are these multiples of d^2
    sample_sizes: tuple[int, ...]
    draws: int
    first_seed: int
    epsilon: float
    pairs: tuple[tuple[int, int], ...]  # [draw]: the hidden pair
    success: tuple[tuple[tuple[bool, ...], ...], ...]  # [sigma][draw][n]: criterion (a)
    # [sigma][draw][n]: the position each head attends to most after the step
    peaks: tuple[tuple[tuple[tuple[int, int], ...], ...], ...]
    worst: tuple[tuple[tuple[float, ...], ...], ...]  # [sigma][draw][n]: the certified worst-case loss
    population_split: tuple[tuple[bool, ...], ...]  # [sigma][draw]: the population step splits the heads
    rows: tuple[SigmaRow, ...]  # one per sigma

    def table(self) -> list[dict[str, object]]:
        """The chapter's table, one mapping per start scale, its keys the headers (``3 + len(multiples)`` columns).

        Successes at every sample size, both heads on one hidden bit at the largest, and the population step's splits.
        """
        largest = f"{self.multiples[-1]}d^2"
        out = []
        for row in self.rows:  # short headers: the table fits the column; the caption says what each counts
            entry: dict[str, object] = {r"$\sigma$": row.sigma}
            for k, count in zip(self.multiples, row.successes, strict=True):
                entry[f"$n = {k}d^2$"] = count
            entry[f"one bit, ${largest}$"] = row.one_bit[-1]
            entry["population"] = row.population_splits
            out.append(entry)
        return out


@config
class SigmaSamplesPlan:
    """One ``d`` (dense codes, at most 256), start scales, sample sizes as increasing multiples of d^2, draws, the first seed."""

    d: Annotated[int, Between(4, 256)] = 64
    sigmas: Annotated[tuple[Annotated[float, Between(0.0, 100.0)], ...], Items(1, 16)] = (0.001, 0.01, 0.1, 1.0, 2.0)
    multiples: Annotated[tuple[Annotated[int, Between(1, 1024)], ...], Items(1, 4)] = (4, 16, 64)
    draws: Annotated[int, Between(1, 1000)] = 10
    first_seed: Seed = 7000

    def __post_init__(self) -> None:
        if list(self.multiples) != sorted(set(self.multiples)):
            raise ValueError(f"multiples must be increasing, got {self.multiples}")
        if self.multiples[-1] * self.d**3 > MAX_SAMPLE_ENTRIES:
            raise ValueError(
                f"multiples times d^3 must be at most {MAX_SAMPLE_ENTRIES:,} sample entries, got "
                f"{self.multiples[-1] * self.d**3:,}"
            )


def _draw(d: int, seed: int, sigmas: tuple[float, ...], sizes: tuple[int, ...]):
    """One draw: the curves of every start scale on one stream (``[sigma][n]``), and each scale's population step."""
    pair = random_pair(d, seed=seed)
    configs = tuple(
        StepConfig(
            ModelConfig(d, "split", code_seed=seed, sigma=sigma, init_seed=seed), pair, data_seed=seed, epsilon=EPSILON
        )
        for sigma in sigmas
    )
    return pair, learning_curves(configs, sizes), [take_step(c).split for c in configs]


@experiment(
    "sigma_samples",
    book=SigmaSamplesPlan(),
    full=SigmaSamplesPlan(draws=20),
    full_minutes=0.3,
)
def sigma_samples(plan: SigmaSamplesPlan) -> SigmaSamples:
    """The split model's one empirical step at each start scale and sample size: success, split, both heads on one hidden bit."""
    d, sigmas = plan.d, tuple(plan.sigmas)
    sizes = tuple(k * d * d for k in plan.multiples)
    seeds = range(plan.first_seed, plan.first_seed + plan.draws)
    pairs, success, peaks, worst, population = [], [], [], [], []
    for seed in progress(seeds, f"sigma and samples, d = {d}"):
        pair, curves, splits = _draw(d, seed, sigmas, sizes)
        pairs.append(pair)
        success.append([[float(r.worst_case.upper) <= EPSILON for r in curve] for curve in curves])
        peaks.append([[r.found for r in curve] for curve in curves])
        worst.append([[float(r.worst_case.upper) for r in curve] for curve in curves])
        population.append(splits)

    def by_sigma(values):  # [draw][sigma]... -> [sigma][draw]...
        return tuple(tuple(_frozen(values[k][s]) for k in range(plan.draws)) for s in range(len(sigmas)))

    result = dict(
        success=by_sigma(success), peaks=by_sigma(peaks), worst=by_sigma(worst), population_split=by_sigma(population)
    )
    ok = np.asarray(result["success"], dtype=bool)  # (sigma, draw, n)
    found = np.asarray(result["peaks"], dtype=np.int64)  # (sigma, draw, n, 2 heads)
    pair_array = np.asarray(pairs, dtype=np.int64)[None, :, None, :]  # (1, draw, 1, 2)
    same = found[..., 0] == found[..., 1]
    on_pair = (found[..., :1] == pair_array).any(-1)
    split = np.sort(found, axis=-1) == pair_array
    rows = tuple(
        SigmaRow(
            sigma=float(sigma),
            draws=plan.draws,
            successes=tuple(int(c) for c in ok[s].sum(0)),
            splits=tuple(int(c) for c in split[s].all(-1).sum(0)),
            one_bit=tuple(int(c) for c in (same & on_pair)[s].sum(0)),
            population_splits=int(sum(result["population_split"][s])),
        )
        for s, sigma in enumerate(sigmas)
    )
    return SigmaSamples(
        d, sigmas, tuple(plan.multiples), sizes, plan.draws, plan.first_seed, EPSILON, tuple(pairs), **result, rows=rows
    )


def _frozen(value):
    """Lists (of lists) as tuples, so the result is hashable and immutable."""
    return tuple(_frozen(v) for v in value) if isinstance(value, (list, tuple)) else value
