r"""Finite samples: how many samples one step needs, for both models, under two success criteria.

For each model, dimension ``d``, code draw and trial (pair, start and samples),
one learning curve (:func:`xorlib.one_step.learning_curve`): one step from the
first :math:`n` samples of one stream for every :math:`n` of a grid, with the
pair-free certified rule aimed at :math:`\varepsilon`. Two criteria:
(A) the certified worst-case loss over all :math:`2^d` inputs is at most :math:`\varepsilon`;
(B) the certified sign of the prediction is right on every input. Reported seeds
start at ``first_seed`` (1000): no constant was chosen on them.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .._checks import check_choice, check_float, check_int, check_seed, check_sequence
from ..codes import Codes
from ..model import HEADS, ModelConfig
from ..one_step import OneStepConfig, learning_curve, run_one_step
from ..runtime import progress
from ..stats import bootstrap_exponent, logistic_threshold
from ..task import random_pair
from ..theory import information_floor, split_sample_bound, sq_frontier
from ._runner import experiment

__all__ = ["exponent", "run", "success_grid", "threshold_table"]

#: Success criteria: (A) the certified worst case at most epsilon, (B) every sign certified right.
CRITERIA = ("worst case", "signs")


def sample_grid(low: int, high: int, per_octave: int = 2) -> tuple[int, ...]:
    """Sample sizes from ``low`` to ``high``, ``per_octave`` per doubling, rounded to integers."""
    steps = round(per_octave * math.log2(high / low))
    return tuple(sorted({round(low * 2 ** (k / per_octave)) for k in range(steps + 1)}))


@dataclass(frozen=True)
class SuccessGrid:
    """Success of one step over code draws x trials x sample sizes, for one model and one ``d``."""

    heads: str
    d: int
    m: int
    sample_sizes: tuple[int, ...]
    epsilon: float
    sigma: float
    first_seed: int
    worst: tuple[tuple[tuple[float, ...], ...], ...]  # [code draw][trial][n]: certified worst case
    signs_correct: tuple[tuple[tuple[bool, ...], ...], ...]  # [code draw][trial][n]: certified sign on every input
    population_gaps: tuple[tuple[float, ...], ...]  # [code draw][trial]: min over heads of the gap, times d^2
    start_ranges: tuple[tuple[float, ...], ...]  # [code draw][trial]: r = max_k |s_k| at the start
    gram_norms: tuple[float, ...]  # [code draw]: the largest eigenvalue of P^T P

    def sample_bounds(self, delta: float = 0.1) -> np.ndarray:
        """Theorem F's sample size for every trial ``(code draws, trials)`` (``nan`` where a population gap is not positive)."""
        out = np.full((len(self.population_gaps), len(self.population_gaps[0])), np.nan)
        for c, (gaps, ranges) in enumerate(zip(self.population_gaps, self.start_ranges, strict=True)):
            for t, (gap, r) in enumerate(zip(gaps, ranges, strict=True)):
                if gap > 0:
                    out[c, t] = split_sample_bound(self.d, self.gram_norms[c], gap, delta, theta=math.expm1(2 * r))
        return out

    def successes(self, criterion: str = "worst case") -> np.ndarray:
        """Booleans ``(code draws, trials, sample sizes)``: criterion ``"worst case"`` (A) or ``"signs"`` (B)."""
        if check_choice("criterion", criterion, CRITERIA) == "signs":
            return np.asarray(self.signs_correct, dtype=bool)
        return np.asarray(self.worst, dtype=float) <= self.epsilon


def _check_grids(name: str, grids: object) -> list[SuccessGrid]:
    """A non-empty sequence of :class:`SuccessGrid`."""
    grids = list(check_sequence(name, grids))
    for k, grid in enumerate(grids):
        if not isinstance(grid, SuccessGrid):
            raise TypeError(f"{name}[{k}] must be a SuccessGrid (see success_grid), got {type(grid).__name__}")
    return grids


@experiment
def success_grid(
    heads: str,
    d: int,
    sample_sizes: tuple[int, ...],
    *,
    code_draws: int = 3,
    trials: int = 8,
    epsilon: float = 1e-2,
    sigma: float = 1.0,
    first_seed: int = 1000,
) -> SuccessGrid:
    """Learning curves of one model at one ``d``: code draw ``c`` uses code seed ``first_seed + c``."""
    heads = check_choice("heads", heads, HEADS)
    d = check_int("d", d, minimum=4)
    sizes = [
        check_int(f"sample_sizes[{k}]", n, minimum=1, maximum=10**10)
        for k, n in enumerate(check_sequence("sample_sizes", sample_sizes))
    ]
    if sizes != sorted(set(sizes)):
        raise ValueError(f"sample_sizes must be increasing, without repeats, got {tuple(sizes)}")
    first_seed = check_seed("first_seed", first_seed)
    code_draws = check_int("code_draws", code_draws, minimum=1)
    trials = check_int("trials", trials, minimum=1)
    epsilon = check_float("epsilon", epsilon, minimum=0.0, maximum=2.0, strict_minimum=True)
    worst, signs, gaps, ranges, grams = [], [], [], [], []
    for c in progress(range(code_draws), f"{heads}, d = {d}"):
        code_seed = first_seed + c
        codes = Codes(d, seed=code_seed).dense()
        grams.append(float(np.linalg.norm(codes.numpy(), 2) ** 2))
        rows_w, rows_s, rows_g, rows_r = [], [], [], []
        for t in range(trials):
            seed = 1_000_000 * (c + 1) + first_seed + t  # pair, start and samples of this trial
            model = ModelConfig(d, heads, code_seed=code_seed, sigma=sigma, init_seed=seed)
            config = OneStepConfig(model, random_pair(d, seed=seed), data_seed=seed, epsilon=epsilon)
            curve = learning_curve(config, list(sample_sizes))
            rows_w.append(tuple(float(r.worst_case.upper) for r in curve))
            rows_s.append(tuple(bool(r.worst_case.all_signs_correct) for r in curve))
            rows_g.append(min(run_one_step(config).direction_gaps))
            rows_r.append(float((codes @ model.initial_queries()[0]).abs().max()))
        worst.append(tuple(rows_w))
        signs.append(tuple(rows_s))
        gaps.append(tuple(rows_g))
        ranges.append(tuple(rows_r))
    return SuccessGrid(
        heads, d, Codes(d).m, tuple(sample_sizes), epsilon, sigma, first_seed,
        tuple(worst), tuple(signs), tuple(gaps), tuple(ranges), tuple(grams),
    )  # fmt: skip


def thresholds(grid: SuccessGrid, criterion: str = "worst case") -> float:
    """The 50 % sample size :math:`n^*` of a grid (logistic fit over all its code draws and trials)."""
    ok = grid.successes(criterion)
    counts = ok.sum(axis=(0, 1))
    return logistic_threshold(grid.sample_sizes, counts, np.full(len(grid.sample_sizes), ok.shape[0] * ok.shape[1]))


def exponent(grids: Sequence[SuccessGrid], criterion: str = "worst case", **bootstrap) -> tuple[float, float, float]:
    """The exponent of :math:`n^* \\propto d^\\alpha` over grids of one model, with its bootstrap interval."""
    grids = _check_grids("grids", grids)
    criterion = check_choice("criterion", criterion, CRITERIA)
    return bootstrap_exponent(
        [g.d for g in grids], [g.sample_sizes for g in grids], [g.successes(criterion) for g in grids], **bootstrap
    )


@dataclass(frozen=True)
class ThresholdRow:
    """The samples one model needs at one ``d``, beside Theorem F and the reference lines."""

    heads: str
    d: int
    draws: int
    n_star_worst_case: float  # criterion (A)
    n_star_signs: float  # criterion (B)
    theorem_f: float  # median over draws of Theorem F's N (split model; nan for tied)
    sq_frontier: float  # C(d, 2) / r, r = m (tied) or 2m (split)
    information_floor: float


def threshold_table(results: dict[str, list[SuccessGrid]], delta: float = 0.1) -> tuple[ThresholdRow, ...]:
    """One :class:`ThresholdRow` per model and ``d`` of ``results`` (the output of :func:`run`)."""
    if not isinstance(results, Mapping):
        raise TypeError(
            f"results must be a mapping {{heads: [SuccessGrid, ...]}} (see run), got {type(results).__name__}"
        )
    results = {
        check_choice("results' keys (heads)", heads, HEADS): _check_grids(f"results[{heads!r}]", grids)
        for heads, grids in results.items()
    }
    delta = check_float("delta", delta, minimum=0.0, maximum=1.0, strict_minimum=True)
    rows = []
    for heads, grids in results.items():
        for grid in grids:
            parameters = grid.m if heads == "tied" else 2 * grid.m  # the tied heads are one head: r = m
            bound = float(np.nanmedian(grid.sample_bounds(delta))) if heads == "split" else math.nan
            rows.append(
                ThresholdRow(
                    heads, grid.d, len(grid.worst) * len(grid.worst[0]), thresholds(grid, "worst case"),
                    thresholds(grid, "signs"), bound, sq_frontier(grid.d, parameters), information_floor(grid.d),
                )
            )  # fmt: skip
    return tuple(rows)


#: (dimensions, code draws, trials per code draw) of the book's grid and of the full one.
BOOK = {"split": ((16, 24, 32, 48, 64, 96), 3, 6), "tied": ((16, 24, 32), 2, 6)}
FULL = {"split": ((16, 24, 32, 48, 64, 96, 128, 192), 4, 10), "tied": ((16, 24, 32, 48, 64, 96), 4, 10)}


def grid_for(heads: str, d: int) -> tuple[int, ...]:
    """The sample sizes searched for one model at one ``d``: from d/2 (at least 8) to 32 d^2 (split) or 256 d^2 (tied).

    The full grid measured n* of 0.9 to 1.2 d^2 (split) and 19 to 47 d^2 (tied), so the
    grid reaches several times past the 50 % point.
    """
    top = (32 if heads == "split" else 256) * d * d
    return sample_grid(max(8, d // 2), top, per_octave=2)


def run(plan: dict, epsilon: float = 1e-2) -> dict[str, list[SuccessGrid]]:
    """Every grid of ``plan`` (``BOOK`` or ``FULL``): ``{heads: (dimensions, code draws, trials per code draw)}``."""
    if not isinstance(plan, Mapping) or not plan:
        raise TypeError(
            f"plan must be a non-empty mapping {{heads: (ds, code_draws, trials)}} such as BOOK, got {plan!r}"
        )
    checked = {}
    for heads, value in plan.items():
        where = f"plan[{heads!r}]"
        check_choice("plan's keys (heads)", heads, HEADS)
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or len(value) != 3:
            raise TypeError(f"{where} must be (ds, code_draws, trials), got {value!r}")
        ds = tuple(
            check_int(f"{where}[0][{k}] (d)", d, minimum=4)
            for k, d in enumerate(check_sequence(f"{where}[0]", value[0]))
        )
        checked[heads] = (
            ds,
            check_int(f"{where}[1] (code_draws)", value[1], minimum=1),
            check_int(f"{where}[2] (trials)", value[2], minimum=1),
        )
    epsilon = check_float("epsilon", epsilon, minimum=0.0, maximum=2.0, strict_minimum=True)
    out = {}
    for heads, (ds, code_draws, trials) in checked.items():
        out[heads] = [
            success_grid(heads, d, grid_for(heads, d), code_draws=code_draws, trials=trials, epsilon=epsilon)
            for d in ds
        ]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m xorlib.experiments.finite_samples [--full]``: n* per model and d, the fitted exponents."""
    parser = argparse.ArgumentParser(description="Samples one step needs, both models.")
    parser.add_argument("--full", action="store_true", help="the full grid (a few minutes) instead of the book's")
    args = parser.parse_args(argv)
    results = run(FULL if args.full else BOOK)
    for heads, grids in results.items():
        for criterion in ("worst case", "signs"):
            stars = ", ".join(f"d={g.d}: {thresholds(g, criterion):,.0f}" for g in grids)
            fit = exponent(grids, criterion, resamples=200)
            print(f"{heads:>5} [{criterion}] n* {stars}; exponent {fit[0]:.2f} ({fit[1]:.2f}-{fit[2]:.2f})")
    return 0


if __name__ == "__main__":  # run the package's module, so results carry the package's types
    from xorlib.experiments.finite_samples import main as package_main

    sys.exit(package_main())
