r"""What a feed-forward network pays for sparse XOR, measured beside the one-step Transformer.

* :func:`lr_grid`: Barak et al.'s protocol (:mod:`xorlib.learners.mlp`) over their
  learning-rate grid at their :math:`n \in \{10, 20, 30\}` for :math:`k = 2`; the best
  :math:`\eta` per setting, as they report it (a setting is solved if some :math:`\eta` solves it);
* :func:`same_criterion`: samples to success of the MLP and of both one-step
  Transformers under the **same** two criteria: (a) the learner's own loss below
  :math:`10^{-2}` on every input, (b) every sign right;
* :func:`frozen_features`: the counterexample to "frozen first-layer weights make
  positions interchangeable": a frozen random ReLU layer with only its output
  weights fitted classifies all :math:`2^d` inputs, for several pairs;
* :func:`linear_bound`: the proved bound for models linear in their parameters,
  :math:`\text{mean}_S \operatorname{dist}(\chi_S, V)^2 \ge 1 - \dim V/\binom d2`, against
  random features, with the one-step Transformer beside it.

``python -m xorlib.experiments.ffnn --full`` runs the full grids (cached) and prints them.
"""

from __future__ import annotations

import argparse
import itertools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .. import _random
from .._checks import check_float, check_int, check_seed
from ..codes import default_code_dim
from ..learners.mlp import BARAK_EVAL_N, BARAK_LRS, MLPConfig, init_mlp, min_margin, mlp_snapshots, train_mlp
from ..learners.training import DivergenceError, worst_and_margin
from ..model import ModelConfig
from ..one_step import OneStepConfig, learning_curve, one_step
from ..runtime import progress
from ..task import all_inputs, random_pair, sample_xor
from ._runner import experiment

__all__ = [
    "CriterionRow",
    "FeatureFit",
    "FrozenFeaturesResult",
    "LearningRateRow",
    "LinearBoundResult",
    "LrGridResult",
    "SameCriterionResult",
    "frozen_features",
    "linear_bound",
    "lr_grid",
    "main",
    "same_criterion",
]

EPSILON = 1e-2  # criterion (a): the learner's own loss below this on every input
_EXACT_D = 20  # enumerate all inputs up to here; beyond, sample Barak's 2^13 fresh inputs
LEARNERS = ("MLP", "Transformer, tied", "Transformer, split")


def _check_ds(ds: Sequence[int], minimum: int) -> tuple[int, ...]:
    if isinstance(ds, (str, bytes)) or not isinstance(ds, Sequence) or not ds:
        raise TypeError(f"ds must be a non-empty sequence of dimensions, got {ds!r}")
    return tuple(check_int(f"ds[{k}]", d, minimum=minimum, maximum=4096) for k, d in enumerate(ds))


def _median(values: Sequence[float | None]) -> float:
    """Median over runs, a run that never succeeded counting as +inf (nan when the median is infinite)."""
    finite = np.array([math.inf if v is None else float(v) for v in values])
    value = float(np.quantile(finite, 0.5, method="inverted_cdf"))
    return value if math.isfinite(value) else math.nan


# ----------------------------------------------------------------------------- Barak et al.'s learning-rate grid
@dataclass(frozen=True)
class LearningRateRow:
    """One (``d``, learning rate) of :func:`lr_grid`: how many of ``trials`` networks succeeded, and when."""

    d: int
    lr: float
    trials: int
    successes: int
    median_steps: float  # nan when fewer than half succeeded
    median_samples: float
    diverged: bool
    seconds: float

    @property
    def solved(self) -> bool:
        """Barak et al.'s criterion for a setting: at least 20 % of the trials succeed."""
        return self.successes >= 0.2 * self.trials


@dataclass(frozen=True)
class LrGridResult:
    """Every (``d``, ``lr``) row, and per ``d`` the best row (most successes, then fewest median steps)."""

    rows: tuple[LearningRateRow, ...]
    best: tuple[LearningRateRow, ...]
    width: int
    max_steps: int
    trials: int

    def summary(self) -> list[dict[str, object]]:
        """One table row per (``d``, rate), with Barak et al.'s verdict (``solved``) and whether it is the best rate."""
        best = {(row.d, row.lr) for row in self.best}
        return [
            {"d": row.d, "lr": row.lr, "successes": f"{row.successes} of {row.trials}", "solved": row.solved,
             "median_samples": row.median_samples, "median_steps": row.median_steps, "diverged": row.diverged,
             "best": (row.d, row.lr) in best}
            for row in self.rows
        ]  # fmt: skip


@experiment
def lr_grid(
    ds: tuple[int, ...] = (10, 20, 30),
    *,
    lrs: tuple[float, ...] = BARAK_LRS,
    trials: int = 8,
    width: int = 128,
    max_steps: int = 2000,
    seed: int = 0,
) -> LrGridResult:
    """Barak et al.'s protocol at each ``d`` and learning rate; trial ``t`` has the pair ``random_pair(d, seed=seed + t)``.

    A learning rate whose run diverges (:class:`~xorlib.learners.training.DivergenceError`)
    counts as failing every trial, and is marked ``diverged``.
    """
    ds = _check_ds(ds, 2)
    lrs = tuple(check_float(f"lrs[{k}]", lr, minimum=0.0, maximum=1e6, strict_minimum=True) for k, lr in enumerate(lrs))
    trials, seed = check_int("trials", trials, minimum=1, maximum=1000), check_seed("seed", seed)
    rows, best = [], []
    for d in progress(ds, "learning-rate grid"):
        pairs = [random_pair(d, seed=seed + t) for t in range(trials)]
        here = []
        for lr in lrs:
            start = time.perf_counter()
            config = MLPConfig(d, width=width, lr=lr, max_steps=max_steps)
            try:
                steps = train_mlp(config, pairs, seed=seed).steps_to_success
                diverged = False
            except DivergenceError:
                steps, diverged = (None,) * trials, True
            median = _median(steps)
            here.append(
                LearningRateRow(
                    d, lr, trials, sum(s is not None for s in steps), median, median * config.batch, diverged,
                    time.perf_counter() - start,
                )
            )  # fmt: skip
        rows += here
        best.append(
            min(here, key=lambda r: (-r.successes, r.median_steps if math.isfinite(r.median_steps) else math.inf))
        )
    return LrGridResult(tuple(rows), tuple(best), width, max_steps, trials)


# ----------------------------------------------------------------------------- the same criteria for every learner
@dataclass(frozen=True)
class CriterionRow:
    """Samples to success of one learner at one ``d`` under one criterion.

    ``fraction[j]`` is the fraction of trials that succeed with ``n[j]`` samples;
    ``n50`` is the smallest ``n`` of the grid at which at least half succeed (nan: none).
    ``test`` says how "every input" was checked.
    """

    d: int
    learner: str
    criterion: str  # "loss" (a) or "sign" (b)
    parameters: int
    test: str
    n: tuple[int, ...]
    fraction: tuple[float, ...]
    n50: float


@dataclass(frozen=True)
class SameCriterionResult:
    """All rows of :func:`same_criterion`, and the learning rate the MLP used."""

    rows: tuple[CriterionRow, ...]
    mlp_lr: float
    trials: int
    epsilon: float

    def row(self, d: int, learner: str, criterion: str) -> CriterionRow:
        """The row of one ``d``, learner and criterion (``"loss"`` or ``"sign"``)."""
        for row in self.rows:
            if (row.d, row.learner, row.criterion) == (d, learner, criterion):
                return row
        raise KeyError(f"no row for d = {d}, learner = {learner!r}, criterion = {criterion!r}")

    def summary(self) -> list[dict[str, object]]:
        """One table row per (``d``, learner): parameters, ``n50`` under (a) and (b), and how "every input" was checked."""
        rows = []
        for d in sorted({row.d for row in self.rows}):
            for learner in LEARNERS:
                loss, sign = self.row(d, learner, "loss"), self.row(d, learner, "sign")
                test = sign.test if loss.test == sign.test else f"(a) {loss.test}; (b) {sign.test}"
                rows.append({"d": d, "learner": learner, "parameters": loss.parameters, "n_loss": loss.n50,
                             "n_sign": sign.n50, "test": test})  # fmt: skip
        return rows


def _n50(n: Sequence[int], fraction: Sequence[float]) -> float:
    hits = [size for size, f in zip(n, fraction, strict=True) if f >= 0.5]
    return float(hits[0]) if hits else math.nan


def _test_set(d: int, pair: tuple[int, int], seed: int) -> tuple[torch.Tensor, torch.Tensor, str]:
    if d <= _EXACT_D:
        x = all_inputs(d)
        return x, -x[:, pair[0]] * x[:, pair[1]], "all inputs (exact)"
    x, y = sample_xor(BARAK_EVAL_N, d, pair, seed=_random.derive_seed(seed, "test", d))
    return x, y, f"{BARAK_EVAL_N:,} fresh samples"


def _transformer_checks(d: int, heads: str, trial: int, grid: Sequence[int], test) -> list[tuple[bool, bool]]:
    """Criteria (a) and (b) after one step of one model on the first ``n`` samples of trial ``trial``, for each ``n``.

    The model, pair and samples are those of ``one_step(d, heads, seed=trial, n=n)``; the steps
    for all ``n`` come from one pass over one stream (:func:`xorlib.one_step.learning_curve`).
    """
    model = ModelConfig(d, heads, code_seed=trial, init_seed=trial)
    config = OneStepConfig(model, random_pair(d, seed=trial), data_seed=trial, epsilon=EPSILON)
    return [
        _criteria(r.weights_after, float(r.worst_case.upper), heads, test) for r in learning_curve(config, list(grid))
    ]


def _criteria(weights: torch.Tensor, certified: float, heads: str, test) -> tuple[bool, bool]:
    """Criteria (a) and (b) for a two-head model: exact on all inputs, or the certificate and fresh samples."""
    x, y, how = test
    worst, margin = worst_and_margin(weights, x, y, heads=heads)
    return (worst < EPSILON if how.startswith("all") else certified < EPSILON), margin > 0


def _sample_grid(low: int, high: int, per_octave: int) -> tuple[int, ...]:
    count = round(per_octave * math.log2(high / low)) + 1
    return tuple(sorted({round(low * 2 ** (j / per_octave)) for j in range(count)}))


@experiment
def same_criterion(
    ds: tuple[int, ...] = (16, 32),
    *,
    trials: int = 10,
    n_max: int = 2**16,
    per_octave: int = 1,
    mlp_lr: float = 1.0,
    width: int = 128,
    seed: int = 0,
) -> SameCriterionResult:
    r"""Success fraction against the number of samples, for the MLP and both one-step Transformers, under both criteria.

    Trial ``t`` (``seed + t``) fixes the pair ``random_pair(d, seed=t)`` for every
    learner. *Transformer*: one step (:func:`xorlib.one_step`, its pair-free
    certified step rule with target :math:`10^{-2}`) on the first ``n`` samples of the trial's stream. *MLP*: online SGD
    at ``mlp_lr`` (the best of Barak et al.'s grid here), its parameters taken after
    ``n/32`` steps. Criteria: (a) the learner's own loss below :math:`10^{-2}` on every
    input, squared loss for the Transformer and hinge loss (margin :math:`> 0.99`) for the
    MLP; (b) every sign right. "Every input" is all :math:`2^d` inputs for
    :math:`d \le 20`; beyond, the Transformer's (a) is its :math:`O(d)` certificate and every
    other check uses :math:`2^{13}` fresh samples (an estimate, marked in ``test``).
    """
    ds = _check_ds(ds, 4)
    trials, seed = check_int("trials", trials, minimum=1, maximum=1000), check_seed("seed", seed)
    n_max = check_int("n_max", n_max, minimum=64, maximum=2**22)
    per_octave = check_int("per_octave", per_octave, minimum=1, maximum=8)
    grid = _sample_grid(32, n_max, per_octave)
    rows = []
    for d in progress(ds, "same criterion"):
        trial_ids = [seed + t for t in range(trials)]
        pairs = [random_pair(d, seed=t) for t in trial_ids]
        tests = [_test_set(d, p, t) for p, t in zip(pairs, trial_ids, strict=True)]
        m = default_code_dim(d)
        for heads in ("tied", "split"):
            ok = np.array(
                [_transformer_checks(d, heads, t, grid, test) for t, test in zip(trial_ids, tests, strict=True)]
            )
            for c, (criterion, test) in enumerate(
                (("loss", "certificate" if d > _EXACT_D else tests[0][2]), ("sign", tests[0][2]))
            ):
                fraction = tuple(float(v) for v in ok[:, :, c].mean(0))
                rows.append(
                    CriterionRow(
                        d, f"Transformer, {heads}", criterion, 2 * m, test, grid, fraction, _n50(grid, fraction)
                    )
                )
        config = MLPConfig(d, width=width, lr=mlp_lr, max_steps=grid[-1] // 32)
        steps = sorted({max(1, n // config.batch) for n in grid})
        snaps = mlp_snapshots(config, pairs, steps, seed=seed)
        samples = None if d <= _EXACT_D else BARAK_EVAL_N
        margins = np.array([min_margin(p, pairs, samples=samples, seed=seed).numpy() for p in snaps.params])  # (S, T)
        n_mlp = tuple(s * config.batch for s in steps)
        for criterion, level in (("loss", 1 - EPSILON), ("sign", 0.0)):
            fraction = tuple(float(v) for v in (margins > level).mean(1))
            test = "all inputs (exact)" if samples is None else f"{BARAK_EVAL_N:,} fresh samples"
            rows.append(
                CriterionRow(d, "MLP", criterion, config.parameters, test, n_mlp, fraction, _n50(n_mlp, fraction))
            )
    return SameCriterionResult(tuple(rows), mlp_lr, trials, EPSILON)


# ----------------------------------------------------------------------------- the Omega(d) argument
def _features(d: int, width: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """All inputs ``(2^d, d)`` and the frozen random ReLU features plus a constant, ``(2^d, width + 1)``, float64."""
    params = init_mlp(d, width, seed=seed, dtype=torch.float64)
    x = all_inputs(d)
    hidden = torch.relu(x @ params.first[0].T + params.first_bias[0])
    return x, torch.cat([hidden, torch.ones(x.shape[0], 1, dtype=torch.float64)], dim=1)


@dataclass(frozen=True)
class FeatureFit:
    """One pair fitted by least squares on the frozen features: sign accuracy over all inputs and the L² error."""

    pair: tuple[int, int]
    accuracy: float
    l2_error: float


@dataclass(frozen=True)
class FrozenFeaturesResult:
    """:func:`frozen_features`: the fits, and the number of trained numbers (``width + 1``)."""

    d: int
    width: int
    trained: int
    fits: tuple[FeatureFit, ...]
    all_pairs_fitted: int  # of the C(d, 2) pairs, how many are classified perfectly


@experiment
def frozen_features(d: int = 10, *, width: int = 200, pairs: int = 3, seed: int = 0) -> FrozenFeaturesResult:
    r"""A frozen random first layer (PyTorch's initialisation), only the ``width + 1`` output numbers fitted.

    The output layer is fitted by least squares on all :math:`2^d` inputs (the
    minimiser of the square loss that training it would reach); the fit's sign is
    checked on every input, for ``pairs`` random pairs and for all :math:`\binom d2`.
    """
    d = check_int("d", d, minimum=3, maximum=16)
    width, seed = check_int("width", width, minimum=1, maximum=4096), check_seed("seed", seed)
    pairs = check_int("pairs", pairs, minimum=1, maximum=math.comb(d, 2))
    x, phi = _features(d, width, seed)
    everything = list(itertools.combinations(range(d), 2))
    targets = torch.stack([-x[:, i] * x[:, j] for i, j in everything], dim=1)  # (2^d, C(d, 2))
    fitted = phi @ torch.linalg.lstsq(phi, targets).solution
    accuracy = (torch.sign(fitted) == targets).double().mean(0)
    error = (fitted - targets).pow(2).mean(0).sqrt()
    chosen, seen = [], set()
    for t in itertools.count():
        pair = random_pair(d, seed=seed + t)
        if pair not in seen:
            seen.add(pair)
            chosen.append(pair)
        if len(chosen) == pairs:
            break
    fits = tuple(FeatureFit(p, float(accuracy[everything.index(p)]), float(error[everything.index(p)])) for p in chosen)
    return FrozenFeaturesResult(d, width, width + 1, fits, int((accuracy == 1).sum()))


@dataclass(frozen=True)
class LinearBoundResult:
    r"""Per width ``p``: the mean over the :math:`\binom d2` pairs of the best squared L² error
    :math:`\operatorname{dist}(\chi_S, V)^2` with :math:`V` = span of the ``p`` features and a constant,
    and the proved floor :math:`\max(0, 1 - \dim V/\binom d2)`. ``transformer_*``: the split
    one-step Transformer's squared L² errors :math:`2L` for every pair (one population step from its start),
    with its ``2m`` parameters.
    """

    @property
    def transformer_fitted(self) -> int:
        """Pairs the Transformer fits to squared L² error below :data:`EPSILON`."""
        return int(np.sum(np.array(self.transformer_errors) < EPSILON))

    @property
    def linear_floor_for_fitted(self) -> float:
        r"""The dimension a linear model needs to fit as many pairs that well: :math:`(1 - \varepsilon)\,k`."""
        return (1 - EPSILON) * self.transformer_fitted

    d: int
    widths: tuple[int, ...]
    dims: tuple[int, ...]
    mean_error: tuple[float, ...]
    floor: tuple[float, ...]
    transformer_parameters: int
    transformer_errors: tuple[float, ...]


@experiment
def linear_bound(
    d: int = 12, *, widths: tuple[int, ...] = (4, 8, 16, 32, 64, 128, 256), seed: int = 0
) -> LinearBoundResult:
    r"""Random ReLU features of each width against the bound :math:`\text{mean}_S \operatorname{dist}^2 \ge 1 - \dim V/\binom d2`.

    Exact: the :math:`2^d` inputs are enumerated, so :math:`L^2` under the uniform
    measure is a mean over rows. :math:`\dim V` is the rank of the features.
    """
    d = check_int("d", d, minimum=4, maximum=16)
    seed = check_seed("seed", seed)
    widths = tuple(check_int(f"widths[{k}]", w, minimum=1, maximum=4096) for k, w in enumerate(widths))
    pairs = list(itertools.combinations(range(d), 2))
    dims, means, floors = [], [], []
    for width in widths:
        x, phi = _features(d, width, seed)
        basis, _ = torch.linalg.qr(phi)
        rank = int(torch.linalg.matrix_rank(phi))
        basis = basis[:, :rank] if rank < basis.shape[1] else basis
        targets = torch.stack([-x[:, i] * x[:, j] for i, j in pairs], dim=1)
        captured = ((basis.T @ targets) ** 2).sum(0) / x.shape[0]  # |projection|^2 in L2(uniform)
        dims.append(rank)
        means.append(float((1 - captured).mean()))
        floors.append(max(0.0, 1 - rank / len(pairs)))
    errors = tuple(_split_error(d, p, seed) for p in pairs)
    return LinearBoundResult(d, widths, tuple(dims), tuple(means), tuple(floors), 2 * default_code_dim(d), errors)


def _split_error(d: int, pair: tuple[int, int], seed: int) -> float:
    """Squared L² error :math:`2L` of the split model after one population step."""
    return 2 * one_step(d, "split", seed=seed, pair=pair, epsilon=EPSILON).mean_loss_after


# ----------------------------------------------------------------------------- command line
def main(argv: Sequence[str] | None = None) -> int:
    """``python -m xorlib.experiments.ffnn [--full]``: run the grids (cached) and print them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="25 trials and 20,000 steps per rate; d up to 64")
    args = parser.parse_args(argv)
    grid = lr_grid(trials=25, max_steps=20_000) if args.full else lr_grid()
    print(f"Barak et al.'s grid, width {grid.width}, at most {grid.max_steps:,} steps")
    for row in grid.rows:
        print(f"d {row.d:>3}  lr {row.lr:<6g} {row.successes:>3}/{row.trials} succeeded  median samples {row.median_samples:>9,.0f}"
              f"{'  diverged' if row.diverged else ''}")  # fmt: skip
    same = same_criterion((16, 32, 64), trials=32, per_octave=2, n_max=2**18) if args.full else same_criterion()
    print(f"\nsamples to 50 % success (MLP at lr {same.mlp_lr:g}, {same.trials} trials)")
    for row in same.rows:
        print(f"d {row.d:>3}  {row.learner:<18} ({row.criterion}, {row.test}): n50 = {row.n50:,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
