r"""The authors' own v1 model, run beside the book's learners on the same pairs and with the same criteria.

:func:`authors_comparison` trains the authors' model (``xorlib.learners._authors``,
:math:`k = 2`) at each :math:`d` and, on the same hidden pairs, the book's learners:
the one-step split and tied Transformers and Adam on the split model, each on the
authors' training-set size :math:`0.6\cdot 2^d` (capped at 80,000), and the MLP with
Barak et al.'s protocol. Every learner is judged by (a) its own loss below
:math:`10^{-2}` on every input and (b) every sign right, checked on all :math:`2^d` inputs
for :math:`d \le 20` (beyond: the certificates for (a), :math:`2^{13}` fresh samples for (b)).

Experiments ``authors`` (the full plan has the long budgets of the independent run: 3,000 epochs
at :math:`d = 8, 16`, 15,000 at :math:`d = 32`) and ``authors_default`` (the authors' own default,
:math:`n = 16`, :math:`k = 3`, 2,000 epochs).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

import numpy as np
import torch

from .._contract import Between, Items, Seed, config, public
from .._random import generator
from .._runtime import progress
from ..learners._authors import AuthorsConfig, pair_mass_needed, radius_for_peak, train_authors
from ..learners._mlp import BARAK_EVAL_N, MLPConfig, min_margin, train_mlp
from ..learners._one_step import one_step
from ..learners._training import TrainConfig, train
from ..model import ModelConfig
from ..task import random_pair
from ._criteria import EPSILON, criteria, median, test_set
from ._registry import experiment

#: The peak weight whose radius :attr:`AuthorsRuns.radius_needed` reports: a head aimed at one position puts 15/16 on
#: it, so that two heads aimed at two hidden bits that are not neighbours put the 15/8 of
#: :func:`~xorlib.learners._authors.pair_mass_needed` on the pair.
PEAK = pair_mass_needed() / 2

PATTERNS = ("one head per bit", "both heads on both bits", "near-uniform attention", "another pattern")


@dataclass(frozen=True)
class AuthorsRow:
    """One learner at one ``d``: its size, its data, and how often (and how fast) it met each criterion.

    ``success`` and ``sign`` are the fractions of runs that met criterion (a) and (b) when
    they stopped (``stop``). ``steps_*`` is the median number of steps (epochs for
    full-batch learners) until the criterion first held, a run that never met it counting
    as infinite (nan: fewer than half met it, or not tracked); ``budget`` is the most steps a run was allowed.
    """

    d: int
    learner: str
    parameters: int
    samples: float
    runs: int
    budget: int
    success: float  # (a) fraction of runs
    sign: float  # (b) fraction of runs
    steps_success: float
    steps_sign: float
    seconds: float  # wall time per run
    test: str
    stop: str


@dataclass(frozen=True)
class AuthorsRuns:
    """The authors' model at one ``d``: curves, final attention and the pattern each run ended in."""

    d: int
    k: int
    supports: tuple[tuple[int, ...], ...]
    epochs: np.ndarray  # (C,)
    margin: np.ndarray  # (C, R): smallest margin, exact (d <= 20) or certified lower bound
    loss: np.ndarray  # (C, R)
    attention: np.ndarray  # (R, k, d)
    radius: np.ndarray  # (R, k): |A| of each head at the end
    patterns: tuple[str, ...]
    radius_needed: float  # the |A| at which a head puts PEAK = 15/16 on the position it is aimed at
    largest_growth: np.ndarray  # (R, k): the largest growth of each head's |A| in one epoch


@dataclass(frozen=True)
class AuthorsResult:
    """:func:`authors_comparison`: one row per (``d``, learner), and the authors' runs per ``d``."""

    rows: tuple[AuthorsRow, ...]
    authors: tuple[AuthorsRuns, ...]

    @public
    def row(self, d: int, learner: str) -> AuthorsRow:
        """The row of one ``d`` and learner (``"authors' model (v1)"``, ``"one step, split"``, ...).

        Examples
        --------
        >>> import dataclasses
        >>> from xorlib.experiments import plan, run
        >>> result = run("authors", dataclasses.replace(plan("authors"), ds=(4,), epochs=(2,), runs=(1,), adam_steps=2))
        >>> result.row(4, "one step, split").runs
        1
        """
        for row in self.rows:
            if (row.d, row.learner) == (d, learner):
                return row
        learners = sorted({row.learner for row in self.rows})
        raise ValueError(
            f"d and learner must name a row: d in {sorted({r.d for r in self.rows})}, learner one of {learners}, got ({d}, {learner!r})"
        )

    @public
    def runs_at(self, d: int) -> AuthorsRuns:
        """The authors' runs at ``d``.

        Examples
        --------
        >>> import dataclasses
        >>> from xorlib.experiments import plan, run
        >>> result = run("authors", dataclasses.replace(plan("authors"), ds=(4,), epochs=(2,), runs=(1,), adam_steps=2))
        >>> result.runs_at(4).d
        4
        """
        for runs in self.authors:
            if runs.d == d:
                return runs
        raise ValueError(f"d must be one of {[runs.d for runs in self.authors]}, got {d}")


def _pattern(attention: np.ndarray, support: Sequence[int]) -> str:
    """Name the attention pattern of one run, ``attention`` ``(k, d)``, on its hidden bits ``support``.

    *one head per bit*: the heads' top positions are the hidden bits, one each, with
    more than half the head's weight; *both heads on both bits*: every head puts more
    than 0.3 on every hidden bit; *near-uniform attention*: no weight reaches :math:`2/d`; else *another pattern*.
    """
    d = attention.shape[-1]
    tops = sorted(int(i) for i in attention.argmax(-1))
    if tops == sorted(support) and bool((attention.max(-1) > 0.5).all()):
        return PATTERNS[0]
    if bool((attention[:, list(support)] > 0.3).all()):
        return PATTERNS[1]
    if float(attention.max()) < 2 / d:
        return PATTERNS[2]
    return PATTERNS[3]


def _authors(d: int, epochs: int, pairs: list[tuple[int, int]], seed: int) -> tuple[AuthorsRow, AuthorsRuns]:
    config = AuthorsConfig(d, k=2, epochs=epochs)
    run = train_authors(config, pairs, seed=seed)
    exact = d <= 20
    row = AuthorsRow(
        d, "authors' model (v1)", config.parameters, config.n_train, len(pairs), epochs, run.success_fraction,
        run.sign_fraction, median(run.epochs_to_success), median(run.epochs_to_sign), run.seconds / len(pairs),
        "all inputs (exact)" if exact else f"(a) certificate; (b) {run.sign_test}", f"after {epochs:,} epochs",
    )  # fmt: skip
    patterns = tuple(_pattern(a, s) for a, s in zip(run.attention, run.supports, strict=True))
    radius = np.linalg.norm(run.params, axis=-1)
    return row, AuthorsRuns(
        d, 2, run.supports, run.epochs, run.margin, run.loss, run.attention, radius, patterns, radius_for_peak(d, PEAK),
        run.largest_growth,
    )  # fmt: skip


def _how(d: int, tests) -> str:
    """How a two-head model's criteria were checked: all inputs, or its certificate for (a) and fresh samples for (b)."""
    return tests[0][2] if d <= 20 else f"(a) certificate; (b) {tests[0][2]}"


def _one_step_rows(d: int, n: int, trials: list[int], tests) -> list[AuthorsRow]:
    rows = []
    for heads in ("split", "tied"):
        start, met = time.perf_counter(), []
        for trial, test in zip(trials, tests, strict=True):
            result = one_step(d, heads, seed=trial, n=n, epsilon=EPSILON)
            met.append(criteria(result.weights_after, float(result.worst_case.upper), result.config.model, test))
        ok = np.array(met)
        rows.append(
            AuthorsRow(
                d, f"one step, {heads}", 2 * ModelConfig(d, heads).m, n, len(trials), 1, float(ok[:, 0].mean()),
                float(ok[:, 1].mean()), 1.0 if ok[:, 0].mean() >= 0.5 else math.nan,
                1.0 if ok[:, 1].mean() >= 0.5 else math.nan, (time.perf_counter() - start) / len(trials), _how(d, tests),
                "after 1 step",
            )
        )  # fmt: skip
    return rows


def _adam_row(d: int, n: int, steps: int, trials: list[int], pairs, tests) -> AuthorsRow:
    start, success, sign, met = time.perf_counter(), [], [], []
    for trial, pair, test in zip(trials, pairs, tests, strict=True):
        model = ModelConfig(d, "split", code_seed=trial, init_seed=trial)
        result = train(
            TrainConfig(model, pair, steps=steps, gradient="empirical", n=n, data_seed=trial, epsilon=EPSILON)
        )
        met.append(criteria(result.weights, float(result.worst_case[-1]), model, test))
        success.append(result.steps_to_success)
        sign.append(result.steps_to_sign)
    ok = np.array(met)
    return AuthorsRow(
        d, "Adam, split", 2 * model.m, n, len(trials), steps, float(ok[:, 0].mean()), float(ok[:, 1].mean()),
        median(success), median(sign), (time.perf_counter() - start) / len(trials), _how(d, tests), f"after {steps} steps",
    )  # fmt: skip


def _mlp_row(d: int, trials: list[int], pairs, lr: float, seed: int) -> AuthorsRow:
    config = MLPConfig(d, lr=lr)
    run = train_mlp(config, pairs, seed=seed)
    margin = min_margin(run.params, pairs, samples=None if d <= 20 else BARAK_EVAL_N, seed=seed).numpy()
    test = "all inputs (exact)" if d <= 20 else f"{BARAK_EVAL_N:,} fresh samples"
    return AuthorsRow(
        d, f"MLP, lr {lr:g}", config.parameters, median(run.samples_to_success), len(trials), config.max_steps,
        float((margin > 1 - EPSILON).mean()), float((margin > 0).mean()), math.nan, math.nan,
        run.seconds / len(trials), test, f"at 100 % on {config.eval_n:,} fresh samples",
    )  # fmt: skip


@config
class AuthorsPlan:
    """Dimensions (4 to 64), and for each its epochs (at most 10^6) and runs (at most 100); Adam's steps, the MLP's rate."""

    ds: Annotated[tuple[Annotated[int, Between(4, 64)], ...], Items(1, 16)] = (8, 16, 32)
    epochs: Annotated[tuple[Annotated[int, Between(1, 10**6)], ...], Items(1, 16)] = (1000, 1000, 300)
    runs: Annotated[tuple[Annotated[int, Between(1, 100)], ...], Items(1, 16)] = (5, 5, 3)
    adam_steps: Annotated[int, Between(1, 10**5)] = 100
    mlp_lr: Annotated[float, Between(0.0, 1e6, open_low=True)] = 1.0
    seed: Seed = 0

    @public
    def protocol(self, d: Annotated[int, Between(4, 64)]) -> AuthorsConfig:
        """The authors' training protocol at ``d`` (two heads): ``parameters``, ``n_train`` (their set's size), ``lr``...

        Examples
        --------
        >>> from xorlib.experiments import plan
        >>> plan("authors").protocol(16).n_train
        39322
        """
        return AuthorsConfig(d, k=2)

    def __post_init__(self) -> None:
        if len(self.epochs) != len(self.ds) or len(self.runs) != len(self.ds):
            raise ValueError(
                f"epochs and runs must give one value per d ({len(self.ds)}), got {len(self.epochs)} and {len(self.runs)}"
            )


@experiment(
    "authors", book=AuthorsPlan(), full=AuthorsPlan(epochs=(3000, 3000, 15000), runs=(5, 5, 5)), full_minutes=3.7
)
def authors_comparison(plan: AuthorsPlan) -> AuthorsResult:
    """The authors' model and the book's learners at each ``d`` (``epochs[i]`` and ``runs[i]`` for ``ds[i]``).

    Run ``r`` at ``d`` has the pair ``random_pair(d, seed=seed + r)`` for every learner.
    The MLP's "samples" are its median fresh samples to Barak et al.'s success, its
    criteria checked on its final (frozen) parameters; the other learners use the
    authors' training-set size.
    """
    ds, epochs, runs, adam_steps, mlp_lr, seed = (
        plan.ds,
        plan.epochs,
        plan.runs,
        plan.adam_steps,
        plan.mlp_lr,
        plan.seed,
    )
    rows, authors = [], []
    for d, budget, count in progress(list(zip(ds, epochs, runs, strict=True)), "authors' model"):
        trials = [seed + r for r in range(count)]
        pairs = [random_pair(d, seed=t) for t in trials]
        tests = [test_set(d, p, t) for p, t in zip(pairs, trials, strict=True)]
        row, runs_d = _authors(d, budget, pairs, seed)
        n = AuthorsConfig(d).n_train
        rows += [row, *_one_step_rows(d, n, trials, tests), _adam_row(d, n, adam_steps, trials, pairs, tests)]
        rows.append(_mlp_row(d, trials, pairs, mlp_lr, seed))
        authors.append(runs_d)
    return AuthorsResult(tuple(rows), tuple(authors))


@config
class AuthorsDefaultPlan:
    """Runs (at most 100), epochs (at most 10^6), the seed."""

    runs: Annotated[int, Between(1, 100)] = 5
    epochs: Annotated[int, Between(1, 10**6)] = 2000
    seed: Seed = 0


@experiment("authors_default", book=AuthorsDefaultPlan(), full=AuthorsDefaultPlan(), full_minutes=0.5)
def authors_default(plan: AuthorsDefaultPlan) -> AuthorsRuns:
    """The authors' own default: :math:`n = 16`, :math:`k = 3` hidden bits and heads, 2,000 epochs."""
    seed = plan.seed
    supports = [
        tuple(sorted(torch.randperm(16, generator=generator(seed + r, "support", 16))[:3].tolist()))
        for r in range(plan.runs)
    ]
    run = train_authors(AuthorsConfig(16, k=3, epochs=plan.epochs), supports, seed=seed)
    patterns = tuple("all signs right" if e is not None else "not solved" for e in run.epochs_to_sign)
    radius = np.linalg.norm(run.params, axis=-1)
    return AuthorsRuns(
        16,
        3,
        run.supports,
        run.epochs,
        run.margin,
        run.loss,
        run.attention,
        radius,
        patterns,
        radius_for_peak(16, PEAK),
        run.largest_growth,
    )
