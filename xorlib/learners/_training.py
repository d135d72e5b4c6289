r"""Multi-step training of the two-head model: many small steps instead of one large one.

*What this is:* a trainer for the tied and the split model of
:mod:`xorlib.model`, from the model's own start, with the exact population
gradient (:mod:`xorlib.population`) or the gradient of the mean loss on one
fixed sample of ``n`` points (full batch, as in the authors' code), and Adam or
plain SGD taking the step (the updates of :mod:`torch.optim`, bit for bit, from
:mod:`xorlib.learners._optim`): the gradient is computed in closed form. *What it is not:* the
one-step learner (:func:`xorlib.one_step`), which chooses one certified step.

Several runs train at once as a leading batch axis; Adam and SGD act
coordinate by coordinate, so a batch of runs is a set of independent runs.
Run ``r`` of :func:`train_runs` uses the codes ``code_seed + r``, the start
``init_seed + r`` and, for the empirical gradient, its own sample. The hidden
pair is shared: the codes are exchangeable across positions, so varying the
codes with the pair fixed is the same as drawing the pair.

After every step the trainer records the population loss and the certified
worst-case loss over all :math:`2^d` inputs (:func:`xorlib.certify.certify_scores`
for softmax attention, :func:`xorlib.certify.worst_case_loss` otherwise): its
upper bound below :math:`\varepsilon` is success, below :math:`\tfrac12` every sign
is right (for :math:`y = \pm1`, :math:`\tfrac12(f - y)^2 < \tfrac12 \iff yf > 0`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from .._certificate import certificate, log_weights, of_weights
from .._checks import check_size
from .._moments import loss_of_weights, population_objective
from .._random import derive_seed
from ..model import ModelConfig
from ..task import sample_xor
from ._optim import SGD, Adam

#: Certified worst-case loss below which every input is classified correctly.
SIGN_LOSS = 0.5


class DivergenceError(ValueError):
    """A learner's loss or gradient became NaN or infinite: the run diverged (lower the learning rate)."""


@dataclass(frozen=True)
class TrainConfig:
    r"""One multi-step training protocol for one model on one task.

    Parameters
    ----------
    model
        The model and its start (:class:`xorlib.model.ModelConfig`).
    pair
        The hidden pair.
    steps
        Number of optimiser steps :math:`T`.
    optimizer
        ``"adam"`` or ``"sgd"`` (plain gradient descent).
    lr
        Learning rate.
    gradient
        ``"population"`` (exact) or ``"empirical"`` (full batch on ``n`` samples).
    n
        Sample size, required for ``gradient="empirical"`` (and only then).
    data_seed
        Seed of the samples.
    epsilon
        Worst-case loss that counts as success.
    """

    model: ModelConfig
    pair: tuple[int, int]
    steps: int = 300
    optimizer: Literal["adam", "sgd"] = "adam"
    lr: float = 0.1
    gradient: Literal["population", "empirical"] = "population"
    n: int | None = None  # required for the empirical gradient (and only then)
    data_seed: int = 0
    epsilon: float = 1e-2


@dataclass(frozen=True)
class TrainResult:
    r"""The record of one run: curves of length :math:`T + 1` (entry 0 is the start), on the CPU.

    Attributes
    ----------
    model
        The model of this run (its codes and start).
    loss
        Population loss after each step.
    worst_case
        Certified upper bound on :math:`\max_x \ell(x)` after each step.
    train_loss
        Mean loss on the training sample after each step (``None`` for the population gradient).
    steps_to_success
        First step with ``worst_case < epsilon`` (``None``: never).
    steps_to_sign
        First step with ``worst_case < 1/2``, i.e. every sign certified right (``None``: never).
    queries, weights
        Final queries ``(2, m)`` and attention weights ``(2, d)``.
    """

    model: ModelConfig
    loss: np.ndarray
    worst_case: np.ndarray
    train_loss: np.ndarray | None
    steps_to_success: int | None
    steps_to_sign: int | None
    queries: torch.Tensor
    weights: torch.Tensor


def _first_below(curve: np.ndarray, level: float) -> int | None:
    hits = np.flatnonzero(curve < level)
    return int(hits[0]) if hits.size else None


def _empirical(scores: torch.Tensor, x: torch.Tensor, y: torch.Tensor, c0: float, c1: float, normaliser):
    """Mean sample loss ``(R,)`` and its score gradient ``(R, 2, d)`` for runs with their own samples ``x`` ``(R, n, d)``."""
    weights = normaliser.weights(scores)
    z = torch.einsum("rnd,rhd->rnh", x, weights)
    residual = c0 - c1 * z[..., 0] * z[..., 1] - y
    pull = (-c1 / x.shape[1]) * residual.unsqueeze(-1) * z.flip(-1)  # head 1 is pulled by z_2, head 2 by z_1
    return 0.5 * (residual**2).mean(-1), normaliser.pullback(scores, weights, torch.einsum("rnh,rnd->rhd", pull, x))


def train_runs(config: TrainConfig, runs: int = 1) -> tuple[TrainResult, ...]:
    """Train ``runs`` independent runs of ``config`` at once (run ``r``: codes and start shifted by ``r``).

    Raises
    ------
    DivergenceError
        If a loss or a gradient becomes NaN or infinite.
    """
    base = config.model
    models = [
        dataclasses.replace(base, code_seed=base.code_seed + r, init_seed=base.init_seed + r) for r in range(runs)
    ]
    d, m, pair, model = base.d, base.m, config.pair, base
    c0, c1 = model.readout
    check_size(f"train_runs(runs={runs}, d={d}, m={m})", runs * d * m, 8)
    codes = torch.stack([model.codes.dense() for model in models])  # (R, d, m)
    parameter = torch.stack([model.initial_queries() for model in models])  # (R, 2, m)
    x = y = None
    if config.gradient == "empirical":
        check_size(f"the samples (runs={runs}, n={config.n}, d={d})", runs * config.n * d, 8)
        seeds = [derive_seed(config.data_seed, "train", r) for r in range(runs)]
        x, y = (torch.stack(t) for t in zip(*(sample_xor(config.n, d, pair, seed=s) for s in seeds), strict=True))
    optimiser = (Adam if config.optimizer == "adam" else SGD)(parameter, lr=config.lr)
    curves = {key: np.full((config.steps + 1, runs), math.nan) for key in ("loss", "worst", "train")}
    for t in range(config.steps + 1):
        with torch.no_grad():
            scores = parameter @ codes.transpose(1, 2)  # (R, 2, d)
            weights = model.normaliser.weights(scores)
            curves["loss"][t] = loss_of_weights(weights, pair, model.readout).numpy()
            if model.attention == "softmax":
                tied = (scores[..., 0, :] == scores[..., 1, :]).all(-1)
                curves["worst"][t] = certificate(*log_weights(scores, pair), tied, model).upper.numpy()
            else:
                curves["worst"][t] = of_weights(weights, pair, model).upper.numpy()
            if x is None:
                score_grad = population_objective(scores, pair, model.readout, model.normaliser)[1]
            else:
                train_loss, score_grad = _empirical(scores, x, y, c0, c1, model.normaliser)
                curves["train"][t] = train_loss.numpy()
            grad = score_grad @ codes
            if not (np.isfinite(curves["loss"][t]).all() and bool(torch.isfinite(grad).all())):
                raise DivergenceError(
                    f"training diverged at step {t} ({config.optimizer}, lr = {config.lr}): the loss or the "
                    "gradient is NaN or infinite; lower lr"
                )
        if t == config.steps:
            break
        optimiser.step(grad)
    final = parameter
    return tuple(
        TrainResult(
            model=models[r],
            loss=curves["loss"][:, r].copy(),
            worst_case=curves["worst"][:, r].copy(),
            train_loss=None if x is None else curves["train"][:, r].copy(),
            steps_to_success=_first_below(curves["worst"][:, r], config.epsilon),
            steps_to_sign=_first_below(curves["worst"][:, r], SIGN_LOSS),
            queries=final[r].clone(),
            weights=weights[r].clone(),
        )
        for r in range(runs)
    )


def train(config: TrainConfig) -> TrainResult:
    """Train one run of ``config`` (the first run of :func:`train_runs`)."""
    return train_runs(config, 1)[0]


def worst_and_margin(
    weights: torch.Tensor, x: torch.Tensor, y: torch.Tensor, model: ModelConfig
) -> tuple[float, float]:
    r"""The largest loss :math:`\max_s \tfrac12(f(x_s) - y_s)^2` and the smallest margin :math:`\min_s y_s f(x_s)` on inputs ``x``.

    ``weights`` ``(2, d)`` are the heads' attention; pass all :math:`2^d` inputs
    (:func:`xorlib.task.all_inputs`) for the exact worst case.
    """
    c0, c1 = model.readout
    z = x @ weights.T
    f = c0 - c1 * z[:, 0] * z[:, 1]
    return float((0.5 * (f - y) ** 2).max()), float((y * f).min())
