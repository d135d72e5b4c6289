r"""Softmax against the other normalisers: one population step of each, at its best step size.

For each normaliser, model and code dimension, one population gradient step from
the model's start, at every sharpness of a wide grid (``1e-3`` to ``max(1e4, 10 d)``);
the reported value is the **best** certified worst case over the grid (an oracle
choice that favours the alternatives: it uses the pair). The certificate is
:func:`xorlib.certify.worst_case_loss`'s, sound for any weights. Experiments
``attention_variants`` and ``attention_best``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated

import numpy as np
import torch

from .._certificate import WorstCase, of_weights
from .._contract import Between, Heads, Items, Seed, config
from .._moments import loss_of_weights, population_objective
from .._normalisers import NORMALISERS, AttentionKind
from .._runtime import progress
from ..codes import Codes
from ..model import ModelConfig
from ..task import random_pair
from ._registry import experiment

HEADS = ("tied", "split")
#: Dimensions of this experiment: dense codes, one-hot codes d x d, and a grid of steps of (K, 2, d) weights.
VariantDimension = Annotated[int, Between(4, 4096)]


def _population_gradient(config: ModelConfig, queries: torch.Tensor, codes: torch.Tensor, pair) -> torch.Tensor:
    """The population gradient in the queries (``xorlib.population.population``'s, without the checks)."""
    return population_objective(queries @ codes.T, pair, config.readout, config.normaliser)[1] @ codes


def kappa_grid(d: int, per_decade: int = 6) -> torch.Tensor:
    r"""Sharpnesses from :math:`10^{-3}` to :math:`\max(10^{12}, 10d)`, ``per_decade`` per decade.

    Wide on purpose: the unnormalised forms need far larger steps than softmax to
    move their weights by order one (their score gradient carries an extra :math:`1/d`).
    """
    top = float(np.log10(max(1e12, 10 * d)))
    return torch.logspace(-3, top, round((top + 3) * per_decade) + 1, dtype=torch.float64)


def best_worst_case(config: ModelConfig, pair: tuple[int, int], kappas: torch.Tensor) -> tuple[float, float, float]:
    """Over the step sizes: the smallest certified worst case (upper bound), its sharpness, and the smallest attained loss.

    The third value is a proof of failure: at every step size of the grid some
    input has a loss at least this large.
    """
    codes = config.codes.dense()
    q0 = config.initial_queries()
    _, c1 = config.readout
    grad = _population_gradient(config, q0, codes, pair)
    if not bool(grad.any()):  # a stationary start: no step moves it
        stuck = of_weights(config.normaliser.weights(q0 @ codes.T), pair, config)
        return float(stuck.upper), 0.0, float(stuck.lower)
    steps = q0 - (kappas * config.d**2 / c1).view(-1, 1, 1) * grad  # (K, 2, m)
    scores = steps @ codes.T
    if config.attention == "componentwise":  # e^s overflows: such steps are worse than any finite loss
        scores = torch.where(scores > 700, torch.full_like(scores, 700.0), scores)
    certificate = of_weights(config.normaliser.weights(scores), pair, config)
    worst = torch.nan_to_num(certificate.upper, nan=float("inf"), posinf=float("inf"))
    best = int(torch.argmin(worst))
    attained = torch.nan_to_num(certificate.lower, nan=float("inf"), posinf=float("inf"))  # overflowed: enormous losses
    return float(worst[best]), float(kappas[best]), float(attained.min())


@dataclass(frozen=True)
class VariantStep:
    """One population step of a model with any normaliser: the weights after it and their certificate."""

    config: ModelConfig
    pair: tuple[int, int]
    kappa: float
    weights_before: torch.Tensor  # (2, d)
    weights_after: torch.Tensor  # (2, d)
    worst_case: WorstCase  # of the weights after the step
    mean_loss_after: float


def variant_step(config: ModelConfig, pair: tuple[int, int], kappa: float) -> VariantStep:
    r"""One population step of sharpness :math:`\kappa` (step size :math:`\kappa d^2/c_1`) for any normaliser (dense: moderate ``d``).

    Component-wise scores are capped at 700 so that :math:`e^s` stays finite; the
    certificate of such a step is enormous, as it should be.
    """
    codes = config.codes.dense()
    q0 = config.initial_queries()
    _, c1 = config.readout
    grad = _population_gradient(config, q0, codes, pair)
    q = q0 - (kappa * config.d**2 / c1) * grad
    scores = q @ codes.T
    if config.attention == "componentwise":
        scores = scores.clamp(max=700.0)
    weights = config.normaliser.weights(scores)
    if config.attention != "componentwise":
        loss = loss_of_weights(config.normaliser.weights(q @ codes.T), pair, config.readout)
    else:
        loss = loss_of_weights(weights, pair, config.readout)
    worst = of_weights(weights, pair, config)
    # Losses of degree four in weights near e^700 overflow (inf - inf is NaN): report the overflow as +inf.
    inf = {"posinf": torch.inf, "neginf": -torch.inf}  # nan_to_num would clamp infinities to the largest float
    worst = WorstCase(
        lower=torch.nan_to_num(worst.lower, nan=torch.inf, **inf), upper=torch.nan_to_num(worst.upper, nan=torch.inf, **inf),
        exact=worst.exact, margin=torch.nan_to_num(worst.margin, nan=-torch.inf, **inf),
    )  # fmt: skip
    mean = float(loss)
    return VariantStep(
        config, pair, kappa, config.normaliser.weights(q0 @ codes.T), weights, worst, mean if mean == mean else math.inf
    )


def variant_status(attention: str, heads: str, code_kind: str, d: int) -> str:
    r"""What covers one setting of the table: a statement whose hypotheses the setting meets, else what was observed.

    * linear and ReLU attention in the tied model: ``"proved (stationary)"``, the stationary start, which holds
      for any codes (at :math:`q = 0` every weight is 0 and the gradient vanishes);
    * softmax in the tied model with balanced codes and even :math:`d`: ``"proved (one step of the tied model)"``,
      the one-step theorem of the tied model (``thm-tied``);
    * component-wise attention in the tied model with balanced codes and :math:`d \ge 12`: the Jensen floor,
      ``"proved floor (Jensen); observed"``.

    Everything else is observed at the sizes tried: the split model (its one-step theorem, ``thm-split``, applies only
    where its computed bound :math:`\Gamma` is positive, not checked here, and the Jensen floor is proved for tied heads only), one-hot codes (not balanced),
    odd :math:`d`. Linear attention in the split model has, besides, the heuristic of its column space.
    """
    balanced = code_kind == "balanced"
    if heads == "tied" and attention in ("linear", "relu"):
        return "proved (stationary)"
    if heads == "tied" and attention == "softmax" and balanced and d % 2 == 0:
        return "proved (one step of the tied model)"
    if heads == "tied" and attention == "componentwise" and balanced and d >= 12:
        return "proved floor (Jensen); observed"
    if heads == "split" and attention == "softmax":
        return "observed (σ = 1)"
    if heads == "split" and attention == "linear":
        return "heuristic; observed"
    return "observed"


@dataclass(frozen=True)
class VariantRow:
    """One normaliser, model, ``d`` and ``m``: the best worst case over step sizes, per draw."""

    attention: str
    heads: str
    d: int
    m: int
    code_kind: str
    best: tuple[float, ...]  # per draw: the smallest certified worst case over the step sizes
    best_kappa: tuple[float, ...]
    floor: tuple[float, ...]  # per draw: at every step size some input has at least this loss

    @property
    def status(self) -> str:
        """What covers this row: proved (and by what), heuristic, or observed (:func:`variant_status`)."""
        return variant_status(self.attention, self.heads, self.code_kind, self.d)


@dataclass(frozen=True)
class VariantTable:
    """Rows of :class:`VariantRow`."""

    rows: tuple[VariantRow, ...]
    first_seed: int


def _dims(d: int) -> tuple[tuple[int, str], ...]:
    """Code dimensions tried at ``d``: the default, a larger one, and one-hot codes (m = d)."""
    default = Codes(d).m
    larger = min(4 * default, d)
    if d % 2 and larger % 2 == 0:
        larger -= 1
    dims = [(default, "balanced"), (larger, "balanced"), (d, "onehot")]
    return tuple(dict.fromkeys(dims))


@config
class VariantsPlan:
    """Dimensions (at most 4096), normalisers, draws per case (at most 1000) from ``first_seed``."""

    ds: Annotated[tuple[VariantDimension, ...], Items(1, 16)] = (16, 64, 256)
    kinds: Annotated[tuple[AttentionKind, ...], Items(1, 5)] = tuple(NORMALISERS)
    draws: Annotated[int, Between(1, 1000)] = 3
    first_seed: Seed = 1000


@experiment("attention_variants", book=VariantsPlan(), full=VariantsPlan(ds=(16, 64, 256, 1024), draws=10))
def variant_table(plan: VariantsPlan) -> VariantTable:
    """Softmax against the other normalisers: the best certified worst case of one population step, per model, d and m."""
    ds, kinds, draws, first_seed = plan.ds, plan.kinds, plan.draws, plan.first_seed
    rows = []
    cases = [
        (kind, heads, d, m, code_kind) for d in ds for m, code_kind in _dims(d) for heads in HEADS for kind in kinds
    ]
    for kind, heads, d, m, code_kind in progress(cases, "attention variants"):
        kappas = kappa_grid(d)
        results = []
        for seed in range(first_seed, first_seed + draws):
            config = ModelConfig(d, heads, m=m, attention=kind, code_kind=code_kind, code_seed=seed, init_seed=seed)
            results.append(best_worst_case(config, random_pair(d, seed=seed), kappas))
        best, kappa, floor = zip(*results, strict=True)
        rows.append(VariantRow(kind, heads, d, m, code_kind, best, kappa, floor))
    return VariantTable(tuple(rows), first_seed)


@dataclass(frozen=True)
class BestStep:
    """One normaliser's best step of the grid: the smallest certified worst case, its sharpness, the attained floor."""

    attention: str
    best: float
    kappa: float
    floor: float


@dataclass(frozen=True)
class BestSteps:
    """One :class:`BestStep` per normaliser of the plan, for one model, ``d`` and seed."""

    d: int
    heads: str
    seed: int
    rows: tuple[BestStep, ...]


@config
class BestPlan:
    """The explorer's default setting: one ``d`` (at most 4096), model and seed, and the normalisers to try."""

    d: VariantDimension = 64
    heads: Heads = "split"
    kinds: Annotated[tuple[AttentionKind, ...], Items(1, 5)] = ("linear", "componentwise")
    seed: Seed = 0


@experiment("attention_best", book=BestPlan(), full=BestPlan(kinds=tuple(NORMALISERS)))
def attention_best(plan: BestPlan) -> BestSteps:
    """One population step of each normaliser at its best sharpness, at the explorer's default setting (seed 0)."""
    pair = random_pair(plan.d, seed=plan.seed)
    rows = []
    for kind in plan.kinds:
        config = ModelConfig(plan.d, plan.heads, attention=kind, code_seed=plan.seed, init_seed=plan.seed)
        rows.append(BestStep(kind, *best_worst_case(config, pair, kappa_grid(plan.d))))
    return BestSteps(plan.d, plan.heads, plan.seed, tuple(rows))
