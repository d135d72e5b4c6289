"""Shared helpers of the baseline experiments: the success criteria, the test sets, medians, sample grids.

Criterion (a): the learner's own loss below :data:`EPSILON` on every input; criterion
(b): every sign right. "Every input" means all :math:`2^d` inputs for ``d <= EXACT_D``,
else Barak et al.'s :math:`2^{13}` fresh samples (an estimate, labelled as such).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
import torch

from .._random import derive_seed
from ..learners._mlp import BARAK_EVAL_N
from ..learners._one_step import StepConfig, learning_curve
from ..learners._training import worst_and_margin
from ..model import ModelConfig
from ..task import all_inputs, random_pair, sample_xor

EPSILON = 1e-2  # criterion (a): the learner's own loss below this on every input
EXACT_D = 20  # enumerate all inputs up to here; beyond, sample Barak's 2^13 fresh inputs
Learner = Literal["MLP", "Transformer, tied", "Transformer, split"]
LEARNERS = Learner.__args__


def median(values: Sequence[float | None]) -> float:
    """Median over runs, a run that never succeeded counting as +inf (nan when the median is infinite)."""
    finite = np.array([math.inf if v is None else float(v) for v in values])
    value = float(np.quantile(finite, 0.5, method="inverted_cdf"))
    return value if math.isfinite(value) else math.nan


def n50(n: Sequence[int], fraction: Sequence[float]) -> float:
    """The first sample size at which at least half the trials succeed (nan if none)."""
    hits = [size for size, f in zip(n, fraction, strict=True) if f >= 0.5]
    return float(hits[0]) if hits else math.nan


def test_set(d: int, pair: tuple[int, int], seed: int) -> tuple[torch.Tensor, torch.Tensor, str]:
    """The inputs every criterion is checked on, their labels, and how they were chosen."""
    if d <= EXACT_D:
        x = all_inputs(d)
        return x, -x[:, pair[0]] * x[:, pair[1]], "all inputs (exact)"
    x, y = sample_xor(BARAK_EVAL_N, d, pair, seed=derive_seed(seed, "test", d))
    return x, y, f"{BARAK_EVAL_N:,} fresh samples"


def criteria(weights: torch.Tensor, certified: float, model: ModelConfig, test) -> tuple[bool, bool]:
    """Criteria (a) and (b) for a two-head model: exact on all inputs, or the certificate and fresh samples."""
    x, y, how = test
    worst, margin = worst_and_margin(weights, x, y, model)
    return (worst < EPSILON if how.startswith("all") else certified < EPSILON), margin > 0


def transformer_checks(d: int, heads: str, trial: int, grid: Sequence[int], test) -> list[tuple[bool, bool]]:
    """Criteria (a) and (b) after one step of one model on the first ``n`` samples of trial ``trial``, for each ``n``.

    The model, pair and samples are those of ``one_step(d, heads, seed=trial, n=n)``; the steps
    for all ``n`` come from one pass over one stream (``xorlib.learners._one_step.learning_curve``).
    """
    model = ModelConfig(d, heads, code_seed=trial, init_seed=trial)
    config = StepConfig(model, random_pair(d, seed=trial), data_seed=trial, epsilon=EPSILON)
    return [criteria(r.weights_after, float(r.worst_case.upper), model, test) for r in learning_curve(config, grid)]


def sample_grid(low: int, high: int, per_octave: int) -> tuple[int, ...]:
    """Sample sizes from ``low`` to ``high``, ``per_octave`` per doubling."""
    count = round(per_octave * math.log2(high / low)) + 1
    return tuple(sorted({round(low * 2 ** (j / per_octave)) for j in range(count)}))
