r"""What a feed-forward network pays for sparse XOR, measured beside the one-step Transformer.

* :func:`lr_grid`: Barak et al.'s protocol (``xorlib.learners._mlp``) over their
  learning-rate grid at their :math:`n \in \{10, 20, 30\}` for :math:`k = 2`; the best
  :math:`\eta` per setting, as they report it (a setting is solved if some :math:`\eta` solves it);
* :func:`same_criterion`: samples to success of the MLP and of both one-step
  Transformers under the **same** two criteria: (a) the learner's own loss below
  :math:`10^{-2}` on every input, (b) every sign right;
* the models linear in their parameters are in ``_linear_models``.

Experiments ``lr_grid`` and ``same_criterion``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Annotated, Literal

import numpy as np

from .._contract import Between, Items, Seed, config, public
from .._runtime import progress
from ..codes import Codes
from ..learners._mlp import BARAK_EVAL_N, BARAK_LRS, MLPConfig, min_margin, mlp_snapshots, train_mlp
from ..learners._training import DivergenceError
from ..task import random_pair
from ._criteria import EPSILON, EXACT_D, LEARNERS, Learner, median, n50, sample_grid, test_set, transformer_checks
from ._registry import experiment

Trials = Annotated[int, Between(1, 1000)]
LearningRate = Annotated[float, Between(0.0, 1e6, open_low=True)]


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


@config
class LrGridPlan:
    """Dimensions (2 to 4096), Barak et al.'s rates, trials (at most 1000), width (at most 65,536), steps (at most 10^7)."""

    ds: Annotated[tuple[Annotated[int, Between(2, 4096)], ...], Items(1, 16)] = (10, 20, 30)
    lrs: Annotated[tuple[LearningRate, ...], Items(1, 32)] = BARAK_LRS
    trials: Trials = 8
    width: Annotated[int, Between(1, 65536)] = 128
    max_steps: Annotated[int, Between(1, 10**7)] = 2000
    seed: Seed = 0


@experiment("lr_grid", book=LrGridPlan(), full=LrGridPlan(trials=25, max_steps=20_000), full_minutes=1.2)
def lr_grid(plan: LrGridPlan) -> LrGridResult:
    """Barak et al.'s protocol at each ``d`` and learning rate; trial ``t`` has the pair ``random_pair(d, seed=seed + t)``.

    A learning rate whose run diverges counts as failing every trial, and is marked ``diverged``.
    """
    ds, lrs, trials, width, max_steps, seed = plan.ds, plan.lrs, plan.trials, plan.width, plan.max_steps, plan.seed
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
            middle = median(steps)
            here.append(
                LearningRateRow(
                    d, lr, trials, sum(s is not None for s in steps), middle, middle * config.batch, diverged,
                    time.perf_counter() - start,
                )
            )  # fmt: skip
        rows += here
        best.append(
            min(here, key=lambda r: (-r.successes, r.median_steps if math.isfinite(r.median_steps) else math.inf))
        )
    return LrGridResult(tuple(rows), tuple(best), width, max_steps, trials)


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

    @public
    def row(self, d: int, learner: Learner, criterion: Literal["loss", "sign"]) -> CriterionRow:
        """The row of one ``d``, learner and criterion (``"loss"`` or ``"sign"``).

        Examples
        --------
        >>> import dataclasses
        >>> from xorlib.experiments import plan, run
        >>> same = run("same_criterion", dataclasses.replace(plan("same_criterion"), ds=(4,), trials=1, n_max=64))
        >>> same.row(4, "MLP", "sign").learner
        'MLP'
        """
        for row in self.rows:
            if (row.d, row.learner, row.criterion) == (d, learner, criterion):
                return row
        raise ValueError(f"d must be one of {sorted({row.d for row in self.rows})}, got {d}")

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


@config
class SameCriterionPlan:
    """Dimensions (4 to 1024), trials (at most 1000), the largest sample size (64 to 2^22), grid points per octave, the MLP."""

    ds: Annotated[tuple[Annotated[int, Between(4, 1024)], ...], Items(1, 16)] = (16, 32)
    trials: Trials = 10
    n_max: Annotated[int, Between(64, 2**22)] = 2**16
    per_octave: Annotated[int, Between(1, 8)] = 1
    mlp_lr: LearningRate = 1.0
    width: Annotated[int, Between(1, 65536)] = 128
    seed: Seed = 0


@experiment(
    "same_criterion",
    book=SameCriterionPlan(),
    full=SameCriterionPlan((16, 32, 64), trials=32, per_octave=2, n_max=2**18),
    full_minutes=1.1,
)
def same_criterion(plan: SameCriterionPlan) -> SameCriterionResult:
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
    ds, trials, seed, mlp_lr, width = plan.ds, plan.trials, plan.seed, plan.mlp_lr, plan.width
    n_max, per_octave = plan.n_max, plan.per_octave
    grid = sample_grid(32, n_max, per_octave)
    rows = []
    for d in progress(ds, "same criterion"):
        trial_ids = [seed + t for t in range(trials)]
        pairs = [random_pair(d, seed=t) for t in trial_ids]
        tests = [test_set(d, p, t) for p, t in zip(pairs, trial_ids, strict=True)]
        m = Codes(d).m
        for heads in ("tied", "split"):
            ok = np.array(
                [transformer_checks(d, heads, t, grid, test) for t, test in zip(trial_ids, tests, strict=True)]
            )
            for c, (criterion, test) in enumerate(
                (("loss", "certificate" if d > EXACT_D else tests[0][2]), ("sign", tests[0][2]))
            ):
                fraction = tuple(float(v) for v in ok[:, :, c].mean(0))
                rows.append(
                    CriterionRow(
                        d, f"Transformer, {heads}", criterion, 2 * m, test, grid, fraction, n50(grid, fraction)
                    )
                )
        config = MLPConfig(d, width=width, lr=mlp_lr, max_steps=grid[-1] // 32)
        steps = sorted({max(1, n // config.batch) for n in grid})
        snaps = mlp_snapshots(config, pairs, steps, seed=seed)
        samples = None if d <= EXACT_D else BARAK_EVAL_N
        # (S, T); a snapshot whose every network has a margin <= 0 fails both criteria: no need to read on
        margins = np.array(
            [min_margin(p, pairs, samples=samples, seed=seed, stop_at=0.0).numpy() for p in snaps.params]
        )
        n_mlp = tuple(s * config.batch for s in steps)
        for criterion, level in (("loss", 1 - EPSILON), ("sign", 0.0)):
            fraction = tuple(float(v) for v in (margins > level).mean(1))
            test = "all inputs (exact)" if samples is None else f"{BARAK_EVAL_N:,} fresh samples"
            rows.append(
                CriterionRow(d, "MLP", criterion, config.parameters, test, n_mlp, fraction, n50(n_mlp, fraction))
            )
    return SameCriterionResult(tuple(rows), mlp_lr, trials, EPSILON)
