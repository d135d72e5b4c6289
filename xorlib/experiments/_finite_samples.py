r"""Finite samples: how many samples one step needs, for both models, under two success criteria.

For each model, dimension ``d``, code draw and trial (pair, start and samples),
one learning curve (``xorlib.learners._one_step.learning_curve``): one step from the
first :math:`n` samples of one stream for every :math:`n` of a grid, with the
pair-free certified rule aimed at :math:`\varepsilon`. Two criteria:
(A) the certified worst-case loss over all :math:`2^d` inputs is at most :math:`\varepsilon`;
(B) the certified sign of the prediction is right on every input. Reported seeds
start at ``first_seed`` (1000): no constant was chosen on them. Experiment ``finite_samples``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Literal

import numpy as np

from .._contract import MAX_SAMPLE_ENTRIES, Between, Items, Seed, config, public
from .._runtime import progress
from ..codes import Codes
from ..learners._one_step import StepConfig, learning_curve, take_step
from ..model import ModelConfig
from ..task import random_pair
from ..theory import split_sample_bound
from ._fits import bootstrap_exponent, logistic_threshold
from ._registry import experiment

#: The start scale of every trial.
SIGMA = 1.0
#: Success criteria: (A) the certified worst case at most epsilon, (B) every sign certified right.
Criterion = Literal["worst case", "signs"]


def sq_frontier(d: int, parameters: int) -> float:
    r"""Edelman et al.'s frontier for one step: a batch of about :math:`\binom d2 / r` samples for an :math:`r`-parameter model.

    Their Prop. 3 says an :math:`r`-parameter model run for :math:`T` noisy-gradient steps
    learns nothing unless :math:`rTB \gtrsim \binom dk`, up to constants; with :math:`T = 1`,
    :math:`k = 2`: :math:`B \gtrsim \binom d2/r`. Use :math:`r = m` for the tied model
    (its two heads are one) and :math:`r = 2m` for the split model.
    """
    return math.comb(d, 2) / parameters


def information_floor(d: int) -> float:
    r"""The information floor: identifying one pair among :math:`\binom d2` takes :math:`\log_2\binom d2` one-bit labels."""
    return math.log2(math.comb(d, 2))


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
    population_splits: tuple[tuple[bool, ...], ...]  # [code draw][trial]: the population step puts the heads on u, v

    @public
    def sample_bounds(self, delta: Annotated[float, Between(0.0, 1.0, open_low=True)] = 0.1) -> np.ndarray:
        """The closed-form sample bound :math:`N` (``cor-samples-closed-form``) for every trial ``(code draws, trials)``.

        ``nan`` where the corollary does not apply: the population direction's targets are not the hidden
        bits (``population_splits``), or a gap is not positive.

        Examples
        --------
        >>> import dataclasses
        >>> from xorlib.experiments import plan, run
        >>> tiny = plan("finite_samples").split.__class__(ds=(4,), code_draws=1, trials=1)
        >>> grid = run("finite_samples", dataclasses.replace(plan("finite_samples"), split=tiny, tied=tiny, resamples=10)).split.grids[0]
        >>> grid.sample_bounds(0.1).shape
        (1, 1)
        """
        out = np.full((len(self.population_gaps), len(self.population_gaps[0])), np.nan)
        rows = zip(self.population_gaps, self.start_ranges, self.population_splits, strict=True)
        for c, (gaps, ranges, splits) in enumerate(rows):
            for t, (gap, r, split) in enumerate(zip(gaps, ranges, splits, strict=True)):
                if gap > 0 and split:  # False for nan
                    out[c, t] = split_sample_bound(self.d, self.gram_norms[c], gap, delta, theta=math.expm1(2 * r))
        return out

    @public
    def successes(self, criterion: Criterion = "worst case") -> np.ndarray:
        """Booleans ``(code draws, trials, sample sizes)``: criterion ``"worst case"`` (A) or ``"signs"`` (B).

        Examples
        --------
        >>> import dataclasses
        >>> from xorlib.experiments import plan, run
        >>> tiny = plan("finite_samples").split.__class__(ds=(4,), code_draws=1, trials=1)
        >>> grid = run("finite_samples", dataclasses.replace(plan("finite_samples"), split=tiny, tied=tiny, resamples=10)).split.grids[0]
        >>> grid.successes("signs").shape[:2]
        (1, 1)
        """
        if criterion == "signs":
            return np.asarray(self.signs_correct, dtype=bool)
        return np.asarray(self.worst, dtype=float) <= self.epsilon


def trial_config(heads: str, d: int, code_draw: int, trial: int, epsilon: float, first_seed: int) -> StepConfig:
    """The step of one trial: code seed ``first_seed + code_draw``; pair, start and samples from one trial seed."""
    seed = 1_000_000 * (code_draw + 1) + first_seed + trial
    model = ModelConfig(d, heads, code_seed=first_seed + code_draw, sigma=SIGMA, init_seed=seed)
    return StepConfig(model, random_pair(d, seed=seed), data_seed=seed, epsilon=epsilon)


def _success_grid(
    heads: str, d: int, sample_sizes: tuple[int, ...], code_draws: int, trials: int, epsilon: float, first_seed: int
) -> SuccessGrid:
    """Learning curves of one model at one ``d``: code draw ``c`` uses code seed ``first_seed + c``."""
    sigma = SIGMA
    worst, signs, gaps, ranges, grams, splits = [], [], [], [], [], []
    for c in progress(range(code_draws), f"{heads}, d = {d}"):
        codes = Codes(d, seed=first_seed + c).dense()
        grams.append(float(np.linalg.norm(codes.numpy(), 2) ** 2))
        rows_w, rows_s, rows_g, rows_r, rows_p = [], [], [], [], []
        for t in range(trials):
            config = trial_config(heads, d, c, t, epsilon, first_seed)
            curve = learning_curve(config, sample_sizes)
            rows_w.append(tuple(float(r.worst_case.upper) for r in curve))
            rows_s.append(tuple(bool(r.worst_case.all_signs_correct) for r in curve))
            gap, split = _population_step(config)
            rows_g.append(gap)
            rows_p.append(split)
            rows_r.append(float((codes @ config.model.initial_queries()[0]).abs().max()))
        worst.append(tuple(rows_w))
        signs.append(tuple(rows_s))
        gaps.append(tuple(rows_g))
        ranges.append(tuple(rows_r))
        splits.append(tuple(rows_p))
    return SuccessGrid(
        heads, d, Codes(d).m, tuple(sample_sizes), epsilon, sigma, first_seed,
        tuple(worst), tuple(signs), tuple(gaps), tuple(ranges), tuple(grams), tuple(splits),
    )  # fmt: skip


def _population_step(config: StepConfig) -> tuple[float, bool]:
    """The smaller of the two heads' population direction gaps, and whether the population step splits the heads;
    ``(nan, False)`` where its certified rule asks for a step beyond what float64 certifies (a near-tie at the top
    of the direction: then no finite bound)."""
    try:
        population = take_step(config)
    except ValueError:  # take_step refuses an uncertifiable step (xorlib.learners._one_step._refuse_uncertifiable)
        return math.nan, False
    return min(population.direction_gaps), population.split


def thresholds(grid: SuccessGrid, criterion: str = "worst case") -> float:
    """The 50 % sample size :math:`n^*` of a grid (logistic fit over all its code draws and trials)."""
    ok = grid.successes(criterion)
    counts = ok.sum(axis=(0, 1))
    return logistic_threshold(grid.sample_sizes, counts, np.full(len(grid.sample_sizes), ok.shape[0] * ok.shape[1]))


@dataclass(frozen=True)
class ThresholdRow:
    """The samples one model needs at one ``d``, beside the closed-form sample bound (``cor-samples-closed-form``) and the reference lines."""

    heads: str
    d: int
    draws: int
    n_star_worst_case: float  # criterion (A)
    n_star_signs: float  # criterion (B)
    theorem_f: float  # median of the closed-form bound (cor-samples-closed-form) where it applies; nan for tied
    sq_frontier: float  # C(d, 2) / r, r = m (tied) or 2m (split)
    information_floor: float


def _threshold_row(grid: SuccessGrid, delta: float) -> ThresholdRow:
    parameters = grid.m if grid.heads == "tied" else 2 * grid.m  # the tied heads are one head: r = m
    bound = float(np.nanmedian(grid.sample_bounds(delta))) if grid.heads == "split" else math.nan
    return ThresholdRow(
        grid.heads, grid.d, len(grid.worst) * len(grid.worst[0]), thresholds(grid, "worst case"),
        thresholds(grid, "signs"), bound, sq_frontier(grid.d, parameters), information_floor(grid.d),
    )  # fmt: skip


@dataclass(frozen=True)
class Exponent:
    r"""A fitted exponent of :math:`n^* \propto d^\alpha` and its bootstrap interval (90 %)."""

    value: float
    low: float
    high: float


@dataclass(frozen=True)
class ModelSamples:
    """One model's grids (one per ``d``), the exponent of its :math:`n^*` under criterion (A), and its draws per ``d``."""

    heads: str
    grids: tuple[SuccessGrid, ...]
    exponent: Exponent
    draws: int  # code draws x trials at each d


@dataclass(frozen=True)
class FiniteSamples:
    """Both models' grids and fits, and the table of :math:`n^*` beside the sample bound and the reference lines."""

    split: ModelSamples
    tied: ModelSamples
    rows: tuple[ThresholdRow, ...]  # split first, then tied


@config
class ModelGrid:
    """One model's dimensions, code draws, trials per code draw, and the top of its sample grid in units of d^2.

    ``top`` ``None`` is the model's default (:data:`DEFAULT_TOP`); the plan checks that every curve's largest
    sample size ``n`` keeps ``n d`` within the one-step limit (``MAX_SAMPLE_ENTRIES``).
    """

    ds: Annotated[tuple[Annotated[int, Between(4, 1024)], ...], Items(1, 16)]
    code_draws: Annotated[int, Between(1, 100)]
    trials: Annotated[int, Between(1, 1000)]
    top: Annotated[float | None, Between(0.5, 256.0)] = None


@config
class FiniteSamplesPlan:
    """The split and the tied model's grids, the target, the bootstrap's resamples, the sample bound's delta, the first seed."""

    split: ModelGrid
    tied: ModelGrid
    epsilon: Annotated[float, Between(0.0, 2.0, open_low=True)] = 1e-2
    resamples: Annotated[int, Between(10, 10**4)] = 300
    delta: Annotated[float, Between(0.0, 1.0, open_low=True)] = 0.1
    first_seed: Seed = 1000

    def __post_init__(self) -> None:
        for heads in ("split", "tied"):
            grid = getattr(self, heads)
            for d in grid.ds:
                largest = grid_for(heads, d, grid.top)[-1]
                if largest * d > MAX_SAMPLE_ENTRIES:
                    raise ValueError(
                        f"{heads}.top must keep n * d <= {MAX_SAMPLE_ENTRIES:,} (the one-step limit): at d = {d} "
                        f"the grid reaches n = {largest:,}; take {heads}.top <= {MAX_SAMPLE_ENTRIES // d**3}"
                    )


#: The bottom and the top of each model's sample grid by default, in units of d^2.
DEFAULT_BOTTOM = {"split": 1 / 16, "tied": 1 / 2}
DEFAULT_TOP = {"split": 8.0, "tied": 128.0}


def grid_for(heads: str, d: int, top: float | None = None) -> tuple[int, ...]:
    """The sample sizes searched for one model at one ``d``: from ``bottom`` d^2 (at least 8) to ``top`` d^2, two per octave.

    By default the grid runs from d^2/16 to 8 d^2 (split) and from d^2/2 to 128 d^2 (tied): the full grid
    measures n* of 0.65 to 1.1 d^2 (split) and 14 to 55 d^2 (tied), so each grid starts where almost every
    trial fails and reaches several times past the 50 % point.
    """
    bottom = max(8, round(DEFAULT_BOTTOM[heads] * d * d))
    return sample_grid(bottom, round((DEFAULT_TOP[heads] if top is None else top) * d * d), per_octave=2)


def _model_samples(heads: str, grid: ModelGrid, plan: FiniteSamplesPlan) -> ModelSamples:
    grids = tuple(
        _success_grid(
            heads, d, grid_for(heads, d, grid.top), grid.code_draws, grid.trials, plan.epsilon, plan.first_seed
        )
        for d in grid.ds
    )
    fit = bootstrap_exponent(
        [g.d for g in grids], [g.sample_sizes for g in grids], [g.successes("worst case") for g in grids],
        resamples=plan.resamples,
    )  # fmt: skip
    return ModelSamples(heads, grids, Exponent(*fit), grid.code_draws * grid.trials)


_BOOK = FiniteSamplesPlan(split=ModelGrid((16, 24, 32, 48, 64, 96), 3, 4), tied=ModelGrid((16, 24, 32), 2, 6))
#: The full grid: the split model to d = 1024 (1.8 decades), its curves to 4 d^2 (n d <= 2^32 at d = 1024; n* is
#: 0.65 to 1.1 d^2); the tied model to d = 256 (its default top of 128 d^2 keeps n d <= 2^32 up to d = 322).
_FULL = FiniteSamplesPlan(
    split=ModelGrid((16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024), 4, 6, top=4.0),
    tied=ModelGrid((16, 24, 32, 48, 64, 96, 128, 192, 256), 4, 6),
)


@experiment("finite_samples", book=_BOOK, full=_FULL, full_minutes=6.3)
def finite_samples(plan: FiniteSamplesPlan) -> FiniteSamples:
    """Samples one step needs, both models, under both criteria: learning curves, n* fits, the sample bound beside them."""
    split = _model_samples("split", plan.split, plan)
    tied = _model_samples("tied", plan.tied, plan)
    rows = tuple(_threshold_row(grid, plan.delta) for model in (split, tied) for grid in model.grids)
    return FiniteSamples(split, tied, rows)
