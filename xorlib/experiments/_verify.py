r"""The book's numerical checks of its own formulas, each computed two ways and returned as the discrepancy.

Each check computes a quantity two ways (closed form against autograd, against
enumeration of all :math:`2^d` inputs, against the exact computation it
approximates). Experiments ``enumeration_check``, ``one_head``, ``remainder`` and
``enumerated_worst_case``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated

import numpy as np
import torch

from .._certificate import WorstCase
from .._contract import MAX_M, Between, Heads, Items, Seed, config
from .._moments import population_objective
from .._normalisers import NORMALISERS
from ..codes import Codes
from ..learners._one_step import one_step
from ..model import ModelConfig
from ..task import all_inputs, random_pair, xor_labels
from ..theory import REMAINDER_CONSTANT, split_direction_first_order
from ._registry import experiment


def _population_gradient(model: ModelConfig, queries: torch.Tensor, codes: torch.Tensor, pair) -> torch.Tensor:
    return population_objective(queries @ codes.T, pair, model.readout, model.normaliser)[1] @ codes


@dataclass(frozen=True)
class EnumerationCheck:
    """The largest discrepancies, over both readouts and all normalisers, at random queries."""

    d: int
    loss_error: float  # |closed-form loss - average over all 2^d inputs|
    gradient_error: float  # relative |closed-form gradient - autograd of the enumerated loss|


@config
class EnumerationPlan:
    """``d`` from 4 to 18 (all 2^d inputs are enumerated), the code dimension, the seed."""

    d: Annotated[int, Between(4, 18)] = 13
    m: Annotated[int, Between(1, MAX_M)] = 7
    seed: Seed = 1


@experiment("enumeration_check", book=EnumerationPlan(), full=EnumerationPlan(d=18))
def enumeration_check(plan: EnumerationPlan) -> EnumerationCheck:
    r"""Closed-form population loss and gradient against autograd of the average over all :math:`2^d` inputs."""
    d, m, seed = plan.d, plan.m, plan.seed
    codes = Codes(d, m, seed=seed).dense()
    pair = random_pair(d, seed=seed)
    x = all_inputs(d)
    y = xor_labels(x, pair)
    worst_loss = worst_grad = 0.0
    for heads in ("tied", "split"):
        for kind in NORMALISERS:
            model = ModelConfig(d, heads, m=m, attention=kind, code_seed=seed)  # model.codes are the codes above
            c0, c1 = model.readout
            gen = torch.Generator().manual_seed(seed + 1)
            q = (0.8 * torch.randn(2, codes.shape[1], dtype=torch.float64, generator=gen)).requires_grad_()
            z = x @ model.normaliser.weights(q @ codes.T).T
            enumerated = (0.5 * (c0 - c1 * z[:, 0] * z[:, 1] - y) ** 2).mean()
            (autograd,) = torch.autograd.grad(enumerated, q)
            closed, score_gradient = population_objective(q.detach() @ codes.T, pair, model.readout, model.normaliser)
            gradient = score_gradient @ codes
            worst_loss = max(worst_loss, abs(float(enumerated.detach()) - float(closed)))
            worst_grad = max(worst_grad, float((gradient - autograd).abs().max() / autograd.abs().max()))
    return EnumerationCheck(d, worst_loss, worst_grad)


@dataclass(frozen=True)
class EnumeratedWorstCase:
    """One step's certified worst case beside the largest loss over all :math:`2^d` inputs, by enumeration."""

    d: int
    certified: WorstCase
    enumerated: float


@config
class EnumeratedWorstCasePlan:
    """``d`` from 4 to 20 (all 2^d inputs are enumerated), the model, the seed and a fixed sharpness."""

    d: Annotated[int, Between(4, 20)] = 14
    heads: Heads = "tied"
    seed: Seed = 2
    kappa: Annotated[float, Between(0.0, 1e12, open_low=True)] = 12.0


@experiment("enumerated_worst_case", book=EnumeratedWorstCasePlan(), full=EnumeratedWorstCasePlan(d=20))
def enumerated_worst_case(plan: EnumeratedWorstCasePlan) -> EnumeratedWorstCase:
    r"""The certificate of one step against the largest loss over all :math:`2^d` inputs, by enumeration."""
    result = one_step(plan.d, plan.heads, seed=plan.seed, step=plan.kappa)
    x = all_inputs(plan.d)
    c0, c1 = result.config.model.readout
    z = x @ result.weights_after.double().T
    largest = float((0.5 * (c0 - c1 * z[:, 0] * z[:, 1] - xor_labels(x, result.pair)) ** 2).max())
    return EnumeratedWorstCase(plan.d, result.worst_case, largest)


@dataclass(frozen=True)
class OneHeadGap:
    r"""How far the tied model's query after a step is from a one-head model's after half that step (zero by the Prop.)."""

    d: int
    gap: float


@config
class OneHeadPlan:
    """``d`` from 4 to 22 (all 2^d inputs are enumerated), the code dimension, the seed, the step size."""

    d: Annotated[int, Between(4, 22)] = 10
    m: Annotated[int, Between(1, MAX_M)] = 7
    seed: Seed = 1
    lr: Annotated[float, Between(0.0, 1e12)] = 3.0 * 50


@experiment("one_head", book=OneHeadPlan(), full=OneHeadPlan(d=16))
def one_head_gap(plan: OneHeadPlan) -> OneHeadGap:
    r"""How far the tied model's query after a step of size ``lr`` is from a one-head model's after half that step.

    The one-head model has readout :math:`1 - 2z^2`; its gradient is autograd of the
    average over all :math:`2^d` inputs. Zero up to rounding by Prop. (one head in disguise).
    """
    d, m, seed, lr = plan.d, plan.m, plan.seed, plan.lr
    codes = Codes(d, m, seed=seed).dense()
    pair = random_pair(d, seed=seed)
    zero = torch.zeros(2, m, dtype=torch.float64)
    two_heads = zero - lr * _population_gradient(ModelConfig(d, "tied", m=m, code_seed=seed), zero, codes, pair)
    q = torch.zeros(m, dtype=torch.float64, requires_grad=True)
    x = all_inputs(d)
    z = x @ torch.softmax(codes @ q, 0)
    (grad,) = torch.autograd.grad((0.5 * (1 - 2 * z**2 - xor_labels(x, pair)) ** 2).mean(), q)
    gap = float(max((two_heads[0] - two_heads[1]).abs().max(), (two_heads[0] + (lr / 2) * grad).abs().max()))
    return OneHeadGap(d, gap)


@dataclass(frozen=True)
class RemainderRow:
    r"""At an antisymmetric start of scale ``sigma``: :math:`r = \|s - \bar s\|_\infty` and :math:`d^2\|t - t^{\mathrm{lin}}\|_\infty/r^2`."""

    d: int
    sigma: float
    r: float
    ratio: float


@dataclass(frozen=True)
class Remainders:
    """The rows of the check, and the constant of ``lem-split-direction`` (chapter 3) that every ratio with :math:`r \\le 1/4` must stay below."""

    rows: tuple[RemainderRow, ...]
    constant: float


@config
class RemainderPlan:
    """Dimensions (dense codes: 4 to 2^14) and start scales; start ``k`` of each ``d`` has the seed ``k``."""

    ds: Annotated[tuple[Annotated[int, Between(4, 2**14)], ...], Items(1, 16)] = (16, 128, 1024)
    sigmas: Annotated[tuple[Annotated[float, Between(0.0, 1e3)], ...], Items(1, 256)] = tuple(
        float(s) for s in np.geomspace(0.003, 1.2, 14)
    )


@experiment("remainder", book=RemainderPlan(), full=RemainderPlan(ds=(16, 128, 1024, 8192)))
def remainder_ratios(plan: RemainderPlan) -> Remainders:
    r"""The split direction against its first-order form (``lem-split-direction``): the remainder over :math:`r^2/d^2` at many starts."""
    rows = []
    for d in plan.ds:
        for seed, sigma in enumerate(plan.sigmas):
            config = ModelConfig(d, "split", sigma=sigma, code_seed=d, init_seed=seed)
            codes = config.codes.dense()
            pair = random_pair(d, seed=d)
            q = config.initial_queries()
            s = codes @ q[0]
            r = float((s - s.mean()).abs().max())
            score_gradient = population_objective(q @ codes.T, pair, config.readout, config.normaliser)[1]
            exact = -(score_gradient @ codes) @ codes.T
            linear = split_direction_first_order(codes, pair, q[0])
            ratio = float((exact - linear).abs().max()) * d**2 / r**2 if r > 0 else math.nan
            rows.append(RemainderRow(d, sigma, r, ratio))
    return Remainders(tuple(rows), REMAINDER_CONSTANT)
