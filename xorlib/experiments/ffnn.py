r"""What a feed-forward network pays for sparse XOR, measured beside the one-step Transformer.

* :func:`lr_grid`: Barak et al.'s protocol (:mod:`xorlib.learners.mlp`) over their
  learning-rate grid at their :math:`n \in \{10, 20, 30\}` for :math:`k = 2`; the best
  :math:`\eta` per setting, as they report it (a setting is solved if some :math:`\eta` solves it);
* :func:`same_criterion`: samples to success of the MLP and of both one-step
  Transformers under the **same** two criteria: (a) the learner's own loss below
  :math:`10^{-2}` on every input, (b) every sign right;
* the models linear in their parameters are in :mod:`xorlib.experiments.linear_models`.

``python -m xorlib.experiments.ffnn --full`` runs the full grids (cached) and prints them.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .._checks import check_float, check_int, check_seed, check_sequence
from ..codes import default_code_dim
from ..learners.mlp import BARAK_EVAL_N, BARAK_LRS, MLPConfig, min_margin, mlp_snapshots, train_mlp
from ..learners.training import DivergenceError
from ..runtime import progress
from ..task import random_pair
from ._criteria import EPSILON, EXACT_D, LEARNERS, check_ds, median, n50, sample_grid, test_set, transformer_checks
from ._runner import experiment

__all__ = ["lr_grid", "same_criterion"]


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
    ds = check_ds(ds, 2)
    lrs = tuple(
        check_float(f"lrs[{k}]", lr, minimum=0.0, maximum=1e6, strict_minimum=True)
        for k, lr in enumerate(check_sequence("lrs", lrs))
    )
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
    ds = check_ds(ds, 4)
    trials, seed = check_int("trials", trials, minimum=1, maximum=1000), check_seed("seed", seed)
    n_max = check_int("n_max", n_max, minimum=64, maximum=2**22)
    per_octave = check_int("per_octave", per_octave, minimum=1, maximum=8)
    mlp_lr = check_float("mlp_lr", mlp_lr, minimum=0.0, maximum=1e6, strict_minimum=True)
    width = check_int("width", width, minimum=1, maximum=65536)
    grid = sample_grid(32, n_max, per_octave)
    rows = []
    for d in progress(ds, "same criterion"):
        trial_ids = [seed + t for t in range(trials)]
        pairs = [random_pair(d, seed=t) for t in trial_ids]
        tests = [test_set(d, p, t) for p, t in zip(pairs, trial_ids, strict=True)]
        m = default_code_dim(d)
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
        margins = np.array([min_margin(p, pairs, samples=samples, seed=seed).numpy() for p in snaps.params])  # (S, T)
        n_mlp = tuple(s * config.batch for s in steps)
        for criterion, level in (("loss", 1 - EPSILON), ("sign", 0.0)):
            fraction = tuple(float(v) for v in (margins > level).mean(1))
            test = "all inputs (exact)" if samples is None else f"{BARAK_EVAL_N:,} fresh samples"
            rows.append(
                CriterionRow(d, "MLP", criterion, config.parameters, test, n_mlp, fraction, n50(n_mlp, fraction))
            )
    return SameCriterionResult(tuple(rows), mlp_lr, trials, EPSILON)


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


if __name__ == "__main__":  # run the package's module, so results carry the package's types
    from xorlib.experiments.ffnn import main as package_main

    raise SystemExit(package_main())
