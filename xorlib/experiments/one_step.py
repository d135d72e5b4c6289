"""One step across d, for both models: success, worst case, step sizes, and the step-size curves.

Every draw is reported on seeds from ``first_seed`` on (1000 by default): held
out, in the sense that no constant of any step rule was ever chosen on them (the
rules have no tuned constants; the default start scale is the conventional
:math:`\\sigma = 1`). ``python -m xorlib.experiments.one_step --full`` runs the full grid.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from .._checks import check_float, check_int, check_numbers, check_seed, check_sequence
from ..codes import Codes
from ..model import HEADS, ModelConfig
from ..one_step import MAX_D, OneStepConfig, OneStepResult, one_step, worst_case_curve
from ..population import population_score_gradient
from ..runtime import progress
from ..task import random_pair
from ..theory import split_probability_first_order, tie_probability_bound, tied_margin
from ._runner import experiment

__all__ = ["independent_start_split_rates", "one_step_across_d", "sigma_sweep", "step_size_curves", "tie_frequency"]

BOOK_GRID = {16: 20, 64: 20, 256: 20, 1024: 20, 4096: 10, 16_384: 10, 100_000: 4, 1_000_000: 2}
FULL_GRID = {16: 100, 64: 100, 256: 100, 1024: 100, 4096: 50, 16_384: 50, 100_000: 20, 1_000_000: 10, 10_000_000: 2}


@dataclass(frozen=True)
class DrawSummary:
    """One model, one rule, one ``d``: what the draws did."""

    d: int
    heads: str
    rule: str
    m: int
    parameters: int
    draws: int
    successes: int  # certified worst case <= epsilon
    splits: int  # heads on different hidden bits (the split model's aim)
    worst_median: float
    worst_max: float
    kappa_median: float
    failures: tuple[tuple[int, str], ...] = ()  # (seed, why) of each draw that failed: see _why_it_failed


#: Above this d the tied margin of a failed draw is not computed (it needs the dense codes).
_MARGIN_MAX_D = 2**16


def _why_it_failed(result: OneStepResult) -> str:
    """Why one draw failed: a tie of the tied margin, both split heads on one bit, a head off the pair, or else."""
    d, pair = result.config.model.d, result.pair
    if d <= _MARGIN_MAX_D and tied_margin(result.config.model.codes.dense(), pair) <= 1e-12:
        return "tie"
    if result.config.model.heads == "split" and result.found[0] == result.found[1]:
        return "both heads on one hidden bit"
    if result.config.model.heads == "split" and not result.split:
        return "a head off the pair"
    return "not certified below epsilon"


@dataclass(frozen=True)
class AcrossD:
    """Rows of :class:`DrawSummary`, one per ``(d, model, rule)``."""

    rows: tuple[DrawSummary, ...]
    epsilon: float
    first_seed: int


def _summary(d: int, heads: str, rule: str, draws: int, first_seed: int, epsilon: float) -> DrawSummary:
    results = [one_step(d, heads, seed=first_seed + k, step=rule, epsilon=epsilon) for k in range(draws)]
    worst = [float(r.worst_case.upper) for r in results]
    return DrawSummary(
        d=d,
        heads=heads,
        rule=rule,
        m=results[0].config.model.m,
        parameters=results[0].parameters,
        draws=draws,
        successes=sum(r.success for r in results),
        splits=sum(r.split for r in results),
        worst_median=statistics.median(worst),
        worst_max=max(worst),
        kappa_median=statistics.median(r.kappa for r in results),
        failures=tuple((first_seed + k, _why_it_failed(r)) for k, r in enumerate(results) if not r.success),
    )


@experiment
def one_step_across_d(
    grid: tuple[tuple[int, int], ...] = tuple(BOOK_GRID.items()),
    *,
    epsilon: float = 1e-6,
    first_seed: int = 1000,
) -> AcrossD:
    r"""For each ``(d, draws)`` of ``grid``: the tied model with the lattice and the certified rule, the split model with its certified rule.

    Each draw is one seed (codes, pair, start): the population step, then the
    certified worst case over all :math:`2^d` inputs.
    """
    checked = []
    for k, item in enumerate(check_sequence("grid", grid)):
        if isinstance(item, (str, bytes)) or not isinstance(item, Sequence) or len(item) != 2:
            raise TypeError(f"grid[{k}] must be a pair (d, draws), got {item!r}")
        d = check_int(f"grid[{k}][0] (d)", item[0], minimum=4, maximum=MAX_D)
        checked.append((d, check_int(f"grid[{k}][1] (draws)", item[1], minimum=1)))
    epsilon = check_float("epsilon", epsilon, minimum=0.0, maximum=2.0, strict_minimum=True)
    first_seed = check_seed("first_seed", first_seed)
    cases = [
        (d, heads, rule)
        for d, _ in checked
        for heads, rule in (("tied", "lattice"), ("tied", "certified"), ("split", "certified"))
    ]
    draws = dict(checked)
    rows = tuple(
        _summary(d, heads, rule, draws[d], first_seed, epsilon)
        for d, heads, rule in progress(cases, "one step across d")
    )
    return AcrossD(rows=rows, epsilon=epsilon, first_seed=first_seed)


@dataclass(frozen=True)
class StepCurves:
    r"""Certified worst case against the sharpness :math:`\kappa`, per model and sample size, over draws."""

    d: int
    kappas: tuple[float, ...]
    labels: tuple[str, ...]  # "tied, population", "split, n = 10,000", ...
    worst: tuple[tuple[tuple[float, ...], ...], ...]  # [label][draw][kappa]
    first_seed: int

    def median(self, label: str) -> tuple[float, ...]:
        """The median worst case over the draws, per sharpness."""
        rows = self.worst[self.labels.index(label)]
        return tuple(statistics.median(column) for column in zip(*rows, strict=True))

    def success_fraction(self, label: str, epsilon: float) -> tuple[float, ...]:
        """The fraction of draws whose certified worst case is at most ``epsilon``, per sharpness."""
        rows = self.worst[self.labels.index(label)]
        return tuple(sum(w <= epsilon for w in column) / len(rows) for column in zip(*rows, strict=True))


@experiment
def step_size_curves(
    d: int = 32,
    sample_sizes: tuple[int, ...] = (0, 100_000),
    kappas: tuple[float, ...] = tuple(float(10 ** (k / 8)) for k in range(0, 49)),
    *,
    draws: int = 10,
    first_seed: int = 1000,
) -> StepCurves:
    r"""For both models and each sample size (0: the population gradient), the worst case after one step of each sharpness.

    One gradient per draw; all step sizes in one pass (:func:`xorlib.one_step.worst_case_curve`).
    """
    d = check_int("d", d, minimum=4, maximum=MAX_D)
    sizes = [
        check_int(f"sample_sizes[{k}]", n, minimum=0, maximum=10**10)
        for k, n in enumerate(check_sequence("sample_sizes", sample_sizes))
    ]
    check_numbers("kappas", kappas, minimum=0.0, maximum=1e12, strict_minimum=True)
    draws, first_seed = check_int("draws", draws, minimum=1), check_seed("first_seed", first_seed)
    labels, worst = [], []
    for heads in HEADS:
        for n in sizes:
            rows = []
            for seed in progress(range(first_seed, first_seed + draws), f"{heads}, n = {n}"):
                model = ModelConfig(d, heads, code_seed=seed, init_seed=seed)
                config = OneStepConfig(model, random_pair(d, seed=seed), n=n or None, data_seed=seed)
                rows.append(tuple(float(w) for w in worst_case_curve(config, list(kappas)).worst_case.upper))
            labels.append(f"{heads}, " + ("population" if n == 0 else f"n = {n:,}"))
            worst.append(tuple(rows))
    return StepCurves(d, tuple(kappas), tuple(labels), tuple(worst), first_seed)


@dataclass(frozen=True)
class TieFrequency:
    """How often balanced codes leave the hidden pair unseparated (a tied margin of exactly 0)."""

    d: int
    m: int
    draws: int
    ties: int
    bound: float  # xorlib.theory.tie_probability_bound


@experiment
def tie_frequency(d: int, draws: int = 200, *, first_seed: int = 0) -> TieFrequency:
    """The fraction of draws of codes and pair whose tied margin is zero, beside the bound of Lemma (ties are rare)."""
    d = check_int("d", d, minimum=4)
    draws, first_seed = check_int("draws", draws, minimum=1), check_seed("first_seed", first_seed)
    ties = 0
    for seed in range(first_seed, first_seed + draws):
        ties += tied_margin(Codes(d, seed=seed).dense(), random_pair(d, seed=seed)) <= 1e-12
    m = Codes(d).m
    return TieFrequency(d, m, draws, ties, tie_probability_bound(d, m))


@dataclass(frozen=True)
class SplitRates:
    """For independent starts: the measured split rate at two start scales and the first-order limit."""

    d: int
    starts: int
    first_order: float  # xorlib.theory.split_probability_first_order
    measured: tuple[tuple[float, float], ...]  # (sigma, fraction of starts whose one step splits the heads)


@experiment
def independent_start_split_rates(
    d: int, sigmas: tuple[float, ...] = (0.05, 1.0), *, starts: int = 300, seed: int = 11
) -> SplitRates:
    """How often one population step splits the heads from an independent random start (codes and pair of ``seed``)."""
    d, seed = check_int("d", d, minimum=4), check_seed("seed", seed)
    check_numbers("sigmas", sigmas, minimum=0.0, maximum=1e6)
    starts = check_int("starts", starts, minimum=1)
    codes = Codes(d, seed=seed).dense()
    pair = random_pair(d, seed=seed)
    measured = []
    for sigma in sigmas:
        splits = 0
        for start in range(starts):
            q = ModelConfig(d, "split", start="independent", sigma=sigma, init_seed=start).initial_queries()
            direction = -(population_score_gradient(q, codes, pair, heads="split") @ codes) @ codes.T
            splits += sorted(direction.argmax(1).tolist()) == list(pair)
        measured.append((float(sigma), splits / starts))
    return SplitRates(d, starts, split_probability_first_order(codes, pair, "independent"), tuple(measured))


@dataclass(frozen=True)
class SigmaSweep:
    """The split model at several start scales: draws that split and succeed, and the median certified sharpness."""

    d: int
    draws: int
    sigmas: tuple[float, ...]
    successes: tuple[int, ...]
    kappa_median: tuple[float, ...]


@experiment
def sigma_sweep(
    d: int = 1024,
    sigmas: tuple[float, ...] = (0.001, 0.01, 0.1, 1.0, 2.0, 4.0, 8.0),
    *,
    draws: int = 10,
    first_seed: int = 1000,
) -> SigmaSweep:
    """One population step of the split model at each start scale, on held-out draws."""
    d = check_int("d", d, minimum=4, maximum=MAX_D)
    check_numbers("sigmas", sigmas, minimum=0.0, maximum=1e6)
    draws, first_seed = check_int("draws", draws, minimum=1), check_seed("first_seed", first_seed)
    successes, kappas = [], []
    for sigma in progress(sigmas, "sigma sweep"):
        results = [one_step(d, "split", seed=first_seed + k, sigma=sigma) for k in range(draws)]
        successes.append(sum(r.split and r.success for r in results))
        kappas.append(statistics.median(r.kappa for r in results))
    return SigmaSweep(d, draws, tuple(sigmas), tuple(successes), tuple(kappas))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m xorlib.experiments.one_step [--full]``: print the table (the full grid into the cache)."""
    parser = argparse.ArgumentParser(description="One step across d, both models.")
    parser.add_argument("--full", action="store_true", help="the full grid (minutes) instead of the book's")
    args = parser.parse_args(argv)
    result = one_step_across_d(tuple((FULL_GRID if args.full else BOOK_GRID).items()))
    print(f"{'d':>10} {'model':>6} {'rule':>9} {'m':>4} {'success':>9} {'split':>7} {'median worst':>13} {'kappa':>8}")
    for row in result.rows:
        print(
            f"{row.d:>10,} {row.heads:>6} {row.rule:>9} {row.m:>4} {row.successes:>4}/{row.draws:<4} "
            f"{row.splits:>3}/{row.draws:<3} {row.worst_median:>13.2e} {row.kappa_median:>8.1f}"
        )
    return 0


if __name__ == "__main__":  # run the package's module, so results carry the package's types
    from xorlib.experiments.one_step import main as package_main

    sys.exit(package_main())
