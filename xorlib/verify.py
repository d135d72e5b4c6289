r"""The book's numerical checks of its own formulas, as functions that chapters show and tests assert.

Each check computes a quantity two ways (closed form against autograd, against
enumeration of all :math:`2^d` inputs, against the exact computation it
approximates) and returns the discrepancy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ._checks import check_choice, check_float, check_int, check_pair, check_seed, check_tensor
from .attention import ATTENTION_KINDS, _weights
from .codes import Codes
from .model import HEADS, ModelConfig, readout_constants
from .population import population_gradient, population_loss, population_score_gradient
from .task import all_inputs, random_pair, xor_labels
from .theory import split_direction_first_order

__all__ = ["enumeration_check", "one_head_gap", "remainder_ratio", "worst_case_by_enumeration"]


@dataclass(frozen=True)
class EnumerationCheck:
    """The largest discrepancies, over both readouts and all normalisers, at random queries."""

    d: int
    loss_error: float  # |closed-form loss - average over all 2^d inputs|
    gradient_error: float  # relative |closed-form gradient - autograd of the enumerated loss|


def enumeration_check(d: int = 13, m: int = 7, seed: int = 1) -> EnumerationCheck:
    r"""Closed-form population loss and gradient against autograd of the average over all :math:`2^d` inputs."""
    d = check_int("d", d, minimum=4, maximum=18)
    codes = Codes(d, m, seed=seed).dense()
    pair = random_pair(d, seed=seed)
    x = all_inputs(d)
    y = xor_labels(x, pair)
    worst_loss = worst_grad = 0.0
    for heads in HEADS:
        c0, c1 = readout_constants(heads)
        for kind in ATTENTION_KINDS:
            gen = torch.Generator().manual_seed(seed + 1)
            q = (0.8 * torch.randn(2, codes.shape[1], dtype=torch.float64, generator=gen)).requires_grad_()
            z = x @ _weights(q @ codes.T, kind).T
            enumerated = (0.5 * (c0 - c1 * z[:, 0] * z[:, 1] - y) ** 2).mean()
            (autograd,) = torch.autograd.grad(enumerated, q)
            closed = population_loss(q.detach(), codes, pair, heads=heads, attention=kind)
            gradient = population_gradient(q.detach(), codes, pair, heads=heads, attention=kind)
            worst_loss = max(worst_loss, abs(float(enumerated.detach()) - float(closed)))
            worst_grad = max(worst_grad, float((gradient - autograd).abs().max() / autograd.abs().max()))
    return EnumerationCheck(d, worst_loss, worst_grad)


def worst_case_by_enumeration(weights: torch.Tensor, pair: tuple[int, int], heads: str) -> float:
    r"""The largest loss over all :math:`2^d` inputs, by enumeration (``d <= 20``): the reference for certificates."""
    weights = check_tensor("weights", weights, ndim=2, shape={0: 2})
    d = check_int("weights.shape[1] (the positions d)", weights.shape[1], minimum=4, maximum=20)
    pair = check_pair("pair", pair, d)
    heads = check_choice("heads", heads, HEADS)
    x = all_inputs(d)
    c0, c1 = readout_constants(heads)
    z = x @ weights.double().T
    return float((0.5 * (c0 - c1 * z[:, 0] * z[:, 1] - xor_labels(x, pair)) ** 2).max())


def one_head_gap(d: int = 10, m: int = 7, seed: int = 1, lr: float = 3.0 * 50) -> float:
    r"""How far the tied model's query after a step of size ``lr`` is from a one-head model's after half that step.

    The one-head model has readout :math:`1 - 2z^2`; its gradient is autograd of the
    average over all :math:`2^d` inputs. Zero up to rounding by Prop. (one head in disguise).
    """
    d = check_int("d", d, minimum=4, maximum=22)
    m = check_int("m", m, minimum=1, maximum=4096)
    lr = check_float("lr", lr, minimum=0.0, maximum=1e12)
    codes = Codes(d, m, seed=seed).dense()
    pair = random_pair(d, seed=seed)
    zero = torch.zeros(2, m, dtype=torch.float64)
    two_heads = zero - lr * population_gradient(zero, codes, pair, heads="tied")
    q = torch.zeros(m, dtype=torch.float64, requires_grad=True)
    x = all_inputs(d)
    z = x @ torch.softmax(codes @ q, 0)
    (grad,) = torch.autograd.grad((0.5 * (1 - 2 * z**2 - xor_labels(x, pair)) ** 2).mean(), q)
    return float(max((two_heads[0] - two_heads[1]).abs().max(), (two_heads[0] + (lr / 2) * grad).abs().max()))


def remainder_ratio(d: int, sigma: float, seed: int = 0) -> tuple[float, float]:
    r"""At an antisymmetric start of scale ``sigma``: :math:`r = \|s - \bar s\|_\infty` and :math:`d^2\|t - t^{\mathrm{lin}}\|_\infty/r^2` (Lemma S2)."""
    d, seed = check_int("d", d, minimum=4), check_seed("seed", seed)
    config = ModelConfig(d, "split", sigma=sigma, code_seed=d, init_seed=seed)
    codes = config.codes.dense()
    pair = random_pair(d, seed=d)
    q = config.initial_queries()
    s = codes @ q[0]
    r = float((s - s.mean()).abs().max())
    exact = -(population_score_gradient(q, codes, pair, heads="split") @ codes) @ codes.T
    linear = split_direction_first_order(codes, pair, q[0])
    return r, float((exact - linear).abs().max()) * d**2 / r**2 if r > 0 else math.nan
