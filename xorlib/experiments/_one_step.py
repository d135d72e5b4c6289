"""One step across d, for both models: success, worst case, step sizes, and the step-size curves.

Every draw is reported on seeds from ``first_seed`` on (1000 by default): held
out, in the sense that no constant of any step rule was ever chosen on them (the
rules have no tuned constants; the default start scale is the conventional
:math:`\\sigma = 1`). Experiments ``across_d``, ``step_sizes``, ``tie_frequency``,
``independent_starts`` and ``sigma_sweep``.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Annotated

import torch

from .._certificate import certificate, log_weights, split_step
from .._contract import MAX_D, Between, Items, Seed, config, public
from .._moments import population_objective
from .._runtime import progress
from ..codes import Codes
from ..learners._one_step import StepConfig, StepResult, one_step, take_steps, worst_case_curve
from ..model import ModelConfig
from ..task import random_pair
from ..theory import split_probability_first_order, split_rest_target, tie_probability_bound, tied_margin
from ._registry import experiment

HEADS = ("tied", "split")
Dimension = Annotated[int, Between(4, MAX_D)]
Draws = Annotated[int, Between(1, 10_000)]
Epsilon = Annotated[float, Between(0.0, 2.0, open_low=True)]
Sigmas = Annotated[tuple[Annotated[float, Between(0.0, 1e6)], ...], Items(1, 64)]
#: Dimensions of the experiments that build dense codes (d x m floats).
DenseDimension = Annotated[int, Between(4, 2**16)]


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


@dataclass(frozen=True)
class AcrossD:
    """Rows of :class:`DrawSummary`, one per ``(d, model, rule)``."""

    rows: tuple[DrawSummary, ...]
    epsilon: float
    first_seed: int


@config
class AcrossDPlan:
    """``grid``: ``(d, draws)`` pairs (at most 64, ``d`` up to 10^9, at most 10,000 draws each); held-out seeds from ``first_seed``."""

    grid: Annotated[tuple[tuple[Dimension, Draws], ...], Items(1, 64)]
    epsilon: Epsilon = 1e-6
    first_seed: Seed = 1000


_BOOK_GRID = {16: 20, 64: 20, 256: 20, 1024: 20, 4096: 10, 16_384: 10, 100_000: 4, 1_000_000: 2}
_FULL_GRID = {16: 100, 64: 100, 256: 100, 1024: 100, 4096: 50, 16_384: 50, 100_000: 20, 1_000_000: 10, 10_000_000: 2}
#: Above this d the tied margin of a failed draw is not computed (it needs the dense codes).
_MARGIN_MAX_D = 2**16


def _why_it_failed(result: StepResult) -> str:
    """Why one draw failed: a tie of the tied margin, both split heads on one bit, a head off the pair, or else."""
    d, pair = result.config.model.d, result.pair
    if d <= _MARGIN_MAX_D and tied_margin(result.config.model.codes.dense(), pair) <= 1e-12:
        return "tie"
    if not result.config.model.tied and result.found[0] == result.found[1]:
        return "both heads on one hidden bit"
    if not result.config.model.tied and not result.split:
        return "a head off the pair"
    return "not certified below epsilon"


def _draws(
    d: int, heads: str, rules: tuple[str, ...], draws: int, first_seed: int, epsilon: float
) -> list[DrawSummary]:
    """One summary per rule; draw ``k`` is ``one_step(d, heads, seed=first_seed + k, step=rule)``, whose gradient
    every rule shares (:func:`~xorlib.learners._one_step.take_steps`)."""
    seeds = range(first_seed, first_seed + draws)
    steps = [
        take_steps(StepConfig(ModelConfig(d, heads, code_seed=s, init_seed=s), random_pair(d, seed=s), data_seed=s,
                              epsilon=epsilon), rules)
        for s in seeds
    ]  # fmt: skip
    return [_summary(d, heads, rule, [by_rule[i] for by_rule in steps], first_seed) for i, rule in enumerate(rules)]


def _summary(d: int, heads: str, rule: str, results: list[StepResult], first_seed: int) -> DrawSummary:
    draws = len(results)
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


@experiment(
    "across_d",
    book=AcrossDPlan(tuple(_BOOK_GRID.items())),
    full=AcrossDPlan(tuple(_FULL_GRID.items())),
    full_minutes=0.4,
)
def one_step_across_d(plan: AcrossDPlan) -> AcrossD:
    r"""One step across d: the tied model with the lattice and the certified rule, the split model with its certified rule.

    For each ``(d, draws)`` of the grid, each draw is one seed (codes, pair, start): the population
    step, then the certified worst case over all :math:`2^d` inputs.
    """
    cases = [
        (d, heads, rules)
        for d, _ in plan.grid
        for heads, rules in (("tied", ("lattice", "certified")), ("split", ("certified",)))
    ]
    draws = dict(plan.grid)
    rows = tuple(
        row
        for d, heads, rules in progress(cases, "one step across d")
        for row in _draws(d, heads, rules, draws[d], plan.first_seed, plan.epsilon)
    )
    return AcrossD(rows=rows, epsilon=plan.epsilon, first_seed=plan.first_seed)


@dataclass(frozen=True)
class StepCurves:
    r"""Certified worst case against the sharpness :math:`\kappa`, per model and sample size, over draws."""

    d: int
    kappas: tuple[float, ...]
    labels: tuple[str, ...]  # "tied, population", "split, n = 10,000", ...
    worst: tuple[tuple[tuple[float, ...], ...], ...]  # [label][draw][kappa]
    first_seed: int

    def _rows(self, label: str) -> tuple[tuple[float, ...], ...]:
        if label not in self.labels:
            raise ValueError(f"label must be one of {list(self.labels)}, got {label!r}")
        return self.worst[self.labels.index(label)]

    @public
    def median(self, label: str) -> tuple[float, ...]:
        """The median worst case over the draws, per sharpness, for one of ``labels``.

        Examples
        --------
        >>> import dataclasses
        >>> from xorlib.experiments import plan, run
        >>> curves = run("step_sizes", dataclasses.replace(plan("step_sizes"), d=8, sample_sizes=(0,), kappas=(1.0, 100.0), draws=2))
        >>> len(curves.median("tied, population"))
        2
        """
        return tuple(statistics.median(column) for column in zip(*self._rows(label), strict=True))

    @public
    def success_fraction(self, label: str, epsilon: Epsilon) -> tuple[float, ...]:
        """The fraction of draws whose certified worst case is at most ``epsilon``, per sharpness, for one of ``labels``.

        Examples
        --------
        >>> import dataclasses
        >>> from xorlib.experiments import plan, run
        >>> curves = run("step_sizes", dataclasses.replace(plan("step_sizes"), d=8, sample_sizes=(0,), kappas=(1.0, 100.0), draws=2))
        >>> len(curves.success_fraction("split, population", 1e-6))
        2
        """
        rows = self._rows(label)
        return tuple(sum(w <= epsilon for w in column) / len(rows) for column in zip(*rows, strict=True))


@config
class StepSizesPlan:
    """One ``d`` (up to 2^20), sample sizes (0: the population gradient; ``n * d`` at most 2^32), sharpnesses, draws."""

    d: Annotated[int, Between(4, 2**20)] = 32
    sample_sizes: Annotated[tuple[Annotated[int, Between(0, 2**32)], ...], Items(1, 16)] = (0, 100_000)
    kappas: Annotated[tuple[Annotated[float, Between(0.0, 1e12, open_low=True)], ...], Items(1, 1000)] = tuple(
        float(10 ** (k / 8)) for k in range(0, 49)
    )
    draws: Draws = 10
    first_seed: Seed = 1000

    def __post_init__(self) -> None:
        if max(self.sample_sizes) * self.d > 2**32:
            raise ValueError(
                f"sample_sizes times d must be at most 2**32 entries, got {max(self.sample_sizes) * self.d:,}"
            )


@experiment("step_sizes", book=StepSizesPlan(), full=StepSizesPlan(draws=40))
def step_size_curves(plan: StepSizesPlan) -> StepCurves:
    r"""For both models and each sample size (0: the population gradient), the worst case after one step of each sharpness.

    One gradient per draw; all step sizes in one pass over the positions.
    """
    d, first_seed = plan.d, plan.first_seed
    labels, worst = [], []
    for heads in HEADS:
        for n in plan.sample_sizes:
            rows = []
            for seed in progress(range(first_seed, first_seed + plan.draws), f"{heads}, n = {n}"):
                model = ModelConfig(d, heads, code_seed=seed, init_seed=seed)
                config = StepConfig(model, random_pair(d, seed=seed), n=n or None, data_seed=seed)
                rows.append(tuple(float(w) for w in worst_case_curve(config, plan.kappas).worst_case.upper))
            labels.append(f"{heads}, " + ("population" if n == 0 else f"n = {n:,}"))
            worst.append(tuple(rows))
    return StepCurves(d, tuple(plan.kappas), tuple(labels), tuple(worst), first_seed)


@dataclass(frozen=True)
class TieFrequency:
    """How often balanced codes leave the hidden pair unseparated (a tied margin of exactly 0)."""

    d: int
    m: int
    draws: int
    ties: int
    bound: float  # xorlib.theory.tie_probability_bound


@dataclass(frozen=True)
class TieFrequencies:
    """One :class:`TieFrequency` per ``d`` of the plan."""

    rows: tuple[TieFrequency, ...]


@config
class TiePlan:
    """Dimensions (dense codes: ``d`` up to 2^16), draws of codes and pair per ``d`` (at most 10^5), the first seed."""

    ds: Annotated[tuple[DenseDimension, ...], Items(1, 32)] = (16, 64, 256)
    draws: Annotated[int, Between(1, 10**5)] = 200
    first_seed: Seed = 0


@experiment("tie_frequency", book=TiePlan(), full=TiePlan(draws=2000))
def tie_frequency(plan: TiePlan) -> TieFrequencies:
    """How often balanced codes leave the pair unseparated (tied margin zero), beside the bound of Lemma (ties are rare)."""
    rows = []
    for d in plan.ds:
        ties = 0
        for seed in range(plan.first_seed, plan.first_seed + plan.draws):
            ties += tied_margin(Codes(d, seed=seed).dense(), random_pair(d, seed=seed)) <= 1e-12
        m = Codes(d).m
        rows.append(TieFrequency(d, m, plan.draws, ties, tie_probability_bound(d, m)))
    return TieFrequencies(tuple(rows))


@dataclass(frozen=True)
class SplitRates:
    """For independent starts: the measured split rate at two start scales and the first-order limit."""

    d: int
    starts: int
    first_order: float  # xorlib.theory.split_probability_first_order
    measured: tuple[tuple[float, float], ...]  # (sigma, fraction of starts whose one step splits the heads)


@dataclass(frozen=True)
class IndependentStarts:
    """One :class:`SplitRates` per ``d`` of the plan."""

    rows: tuple[SplitRates, ...]


@config
class IndependentStartsPlan:
    """Dimensions (dense codes: up to 2^16), start scales, random starts per ``d`` (at most 10^5), the seed of codes and pair."""

    ds: Annotated[tuple[DenseDimension, ...], Items(1, 32)] = (16, 64, 256)
    sigmas: Sigmas = (0.05, 1.0)
    starts: Annotated[int, Between(1, 10**5)] = 300
    seed: Seed = 11


@experiment("independent_starts", book=IndependentStartsPlan(), full=IndependentStartsPlan(starts=3000))
def independent_start_split_rates(plan: IndependentStartsPlan) -> IndependentStarts:
    """How often one population step splits the heads from an independent random start (codes and pair of ``seed``)."""
    rows = []
    for d in plan.ds:
        model = ModelConfig(d, "split", code_seed=plan.seed)
        codes = model.codes.dense()
        pair = random_pair(d, seed=plan.seed)
        measured = []
        for sigma in plan.sigmas:
            splits = 0
            for start in range(plan.starts):
                q = ModelConfig(d, "split", start="independent", sigma=sigma, init_seed=start).initial_queries()
                score_gradient = population_objective(q @ codes.T, pair, model.readout, model.normaliser)[1]
                direction = -(score_gradient @ codes) @ codes.T
                splits += sorted(direction.argmax(1).tolist()) == list(pair)
            measured.append((float(sigma), splits / plan.starts))
        first_order = split_probability_first_order(codes, pair, "independent")
        rows.append(SplitRates(d, plan.starts, first_order, tuple(measured)))
    return IndependentStarts(tuple(rows))


@dataclass(frozen=True)
class SigmaSweep:
    """The split model at several start scales: draws that split and succeed, and the median certified sharpness."""

    d: int
    draws: int
    sigmas: tuple[float, ...]
    successes: tuple[int, ...]
    kappa_median: tuple[float, ...]


@config
class SigmaSweepPlan:
    """One ``d``, the start scales, held-out draws per scale (at most 10,000) from ``first_seed``."""

    d: Dimension = 1024
    sigmas: Sigmas = (0.001, 0.01, 0.1, 1.0, 2.0, 4.0, 8.0)
    draws: Draws = 10
    first_seed: Seed = 1000


@experiment("sigma_sweep", book=SigmaSweepPlan(), full=SigmaSweepPlan(draws=50))
def sigma_sweep(plan: SigmaSweepPlan) -> SigmaSweep:
    """One population step of the split model at each start scale, on held-out draws."""
    d, draws, first_seed = plan.d, plan.draws, plan.first_seed
    successes, kappas = [], []
    for sigma in progress(plan.sigmas, "sigma sweep"):
        results = [one_step(d, "split", seed=first_seed + k, sigma=sigma) for k in range(draws)]
        successes.append(sum(r.split and r.success for r in results))
        kappas.append(statistics.median(r.kappa for r in results))
    return SigmaSweep(d, draws, tuple(plan.sigmas), tuple(successes), tuple(kappas))


@dataclass(frozen=True)
class SplitOnTies:
    """The split model's one step on many draws at one small ``d``: the seeds of the draws with and without a tie
    of the tied margin, and of those on which the step fails (certified worst case above ``epsilon``)."""

    d: int
    epsilon: float
    tie: tuple[int, ...]
    tie_failed: tuple[int, ...]
    no_tie: tuple[int, ...]
    no_tie_failed: tuple[int, ...]
    recomputed: int  # draws near a threshold, taken by one_step itself (see _split_successes)


@config
class SplitOnTiesPlan:
    """One small ``d`` (dense codes, up to 1024), draws (at most 10^5) from ``first_seed``, the target ``epsilon``."""

    d: Annotated[int, Between(4, 1024)] = 16
    draws: Annotated[int, Between(1, 10**5)] = 2000
    first_seed: Seed = 1000
    epsilon: Epsilon = 1e-6


@experiment("split_on_ties", book=SplitOnTiesPlan(), full=SplitOnTiesPlan(draws=5000), full_minutes=0.1)
def split_on_ties(plan: SplitOnTiesPlan) -> SplitOnTies:
    """Whether the split model needs the tied margin: its one step on draws with a tie and on draws without.

    Draw ``s`` is ``one_step(d, "split", seed=s)`` (its success from :func:`_split_successes`: the same outcome,
    for all the draws at once); it has a tie when its tied margin (:func:`xorlib.theory.tied_margin`) is zero.
    """
    d, seeds = plan.d, range(plan.first_seed, plan.first_seed + plan.draws)
    ties, success, recomputed = _split_successes(d, seeds, plan.epsilon)
    tie = dict(zip(seeds, ties, strict=True))
    failed = {s for s, ok in zip(seeds, success, strict=True) if not ok}
    return SplitOnTies(
        d=d,
        epsilon=plan.epsilon,
        tie=tuple(s for s in seeds if tie[s]),
        tie_failed=tuple(s for s in seeds if tie[s] and s in failed),
        no_tie=tuple(s for s in seeds if not tie[s]),
        no_tie_failed=tuple(s for s in seeds if not tie[s] and s in failed),
        recomputed=recomputed,
    )


#: A draw whose batched worst case is within this factor of epsilon (either side) is taken by one_step itself.
_CLEAR_BY = 10.0
#: ... and so is one whose direction's top two entries are this close, relative to its largest entry.
_GAP_AT_LEAST = 1e-6


def _split_successes(d: int, seeds: range, epsilon: float) -> tuple[list[bool], list[bool], int]:
    r"""For every seed, whether its draw has a tie and ``one_step(d, "split", seed=s).success``; and how many
    draws were taken by ``one_step`` itself.

    The same step, on dense codes (``d m`` small) and many draws at once: the population gradient
    (:func:`xorlib._moments.population_objective`) at the antisymmetric start, the self-certified step
    :func:`xorlib.theory.split_step_from_gaps` of each head's direction (its batched form), and the certificate
    (:func:`xorlib._certificate.certificate`) of the scores after it. Each draw's positions are reordered so
    that its pair comes first, so all share one pair. It differs from :func:`xorlib.one_step` only in the
    order of its sums (streamed passes there, dense products here): relative differences below
    :math:`10^{-7}` in the step and in the worst case at :math:`d = 16`. Where that could change the
    outcome, because the worst case is within a factor :data:`_CLEAR_BY` of ``epsilon`` or a head's top two
    direction entries nearly tie (the step then depends on their small gap), the draw is taken by
    :func:`xorlib.one_step` itself. The tests compare every draw with ``one_step``.
    """
    ties: list[bool] = []
    success: list[bool] = []
    recompute: list[int] = []
    log_ratio = math.log((d - 1) / split_rest_target(epsilon))
    chunk = max(1, 2**20 // (d * Codes(d).m))  # draws per batch: about 8 MB of codes
    for first in range(0, len(seeds), chunk):
        batch = seeds[first : first + chunk]
        models = [ModelConfig(d, "split", code_seed=s, init_seed=s) for s in batch]
        codes = []
        for model, s in zip(models, batch, strict=True):
            u, v = random_pair(d, seed=s)
            dense = model.codes.dense()
            ties.append(tied_margin(dense, (u, v)) <= 1e-12)
            codes.append(dense[[u, v, *(k for k in range(d) if k not in (u, v))]])
        P = torch.stack(codes)  # (B, d, m), each draw's pair at positions 0 and 1
        q = torch.stack([model.initial_queries() for model in models])  # (B, 2, m)
        c1 = models[0].readout[1]
        s = q @ P.mT
        score_gradient = population_objective(s, (0, 1), models[0].readout, models[0].normaliser)[1]
        direction = -(d**2 / c1) * (score_gradient @ P)
        t = direction @ P.mT
        top = t.topk(2, dim=-1).values
        gaps = top[..., 0] - top[..., 1]  # (B, 2)
        kappa = split_step(gaps, s.amax(-1) - s.amin(-1), log_ratio)
        after = (q + kappa.view(-1, 1, 1) * direction) @ P.mT
        worst = certificate(*log_weights(after, (0, 1)), torch.tensor(False), models[0]).upper
        unclear = (
            (gaps < _GAP_AT_LEAST * t.abs().amax(-1)).any(-1)
            | ~torch.isfinite(worst)
            | ((worst > epsilon / _CLEAR_BY) & (worst < epsilon * _CLEAR_BY))
        )
        success += (worst <= epsilon).tolist()
        recompute += [first + k for k in torch.nonzero(unclear).flatten().tolist()]
    for k in recompute:
        success[k] = one_step(d, "split", seed=seeds[k], epsilon=epsilon).success
    return ties, success, len(recompute)
