r"""The feed-forward baseline: two-layer ReLU networks trained by online SGD.

The network is

.. math:: f(x) = \sum_{k=1}^{W} a_k\,\mathrm{ReLU}(\langle w_k, x\rangle + b_k) + c,

with PyTorch's default initialisation (every weight and bias uniform on
:math:`\pm 1/\sqrt{\text{fan-in}}`) and :math:`W(d + 2) + 1` trainable numbers.

*The protocol* is that of Barak et al. (2022): hinge loss :math:`\max(0, 1 - yf)`,
plain SGD on minibatches of ``batch = 32`` **fresh** samples at every step, the
learning rate tuned over :data:`BARAK_LRS`, and success = 100 % accuracy on
:math:`2^{13}` fresh samples. *Our choices* (not theirs): width 128; checking for
success only once the last ``screen`` minibatches (fresh samples, classified
before each update) were all correct, which costs nothing and delays the
detection by at most ``screen`` steps; freezing a network once it succeeded.

*Ensembles.* ``M`` networks train at once as the leading axis of every tensor
(batched matrix products, one Python iteration per SGD step, never per sample).
Network ``k`` draws its initialisation and its data from streams of
``(seed, k)``, so its run does not depend on how many networks train beside it; a network that
succeeded is frozen and no longer computed.

The gradients are written by hand. With :math:`g_f = -y\,\mathbb 1[yf < 1]/B`:

.. math::

    \partial_a = h^\top g_f,\quad \partial_c = \textstyle\sum g_f,\quad
    g_h = g_f\, a^\top \odot \mathbb 1[Wx + b > 0],

    \partial_W = g_h^\top x,\quad \partial_b = \textstyle\sum g_h .
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from .._random import bytes_to_signs, generator, random_bytes
from ..task import all_inputs
from ._training import DivergenceError

#: The learning-rate grid of Barak et al. (2022).
BARAK_LRS = (0.001, 0.01, 0.1, 1.0)
#: Their test: 100 % accuracy on this many fresh samples.
BARAK_EVAL_N = 2**13
_BLOCK = 64  # SGD steps whose fresh minibatches are drawn at once
_CHUNK = 4096  # fresh inputs per chunk when evaluating on many inputs
_TEST_ROWS = 1024  # inputs per chunk of the success test, which stops at the first chunk with a wrong sign
_CHUNK_ACTIVATIONS = 2**20  # hidden activations (networks x inputs x width) per chunk of all inputs: they stay in cache
_MAX_EXACT_D = 20  # largest d whose 2^d inputs are enumerated


@dataclass(frozen=True)
class MLPConfig:
    """One online-SGD protocol for a two-layer ReLU network on sparse XOR in ``d`` dimensions.

    Parameters
    ----------
    d
        Input dimension, ``2 <= d <= 4096``.
    width
        Hidden units :math:`W`.
    lr
        SGD learning rate :math:`\\eta > 0`.
    batch
        Fresh samples per step.
    max_steps
        Step budget.
    eval_n
        The success test: 100 % accuracy on this many fresh samples.
    screen
        A fresh test runs once the last ``screen`` minibatches were all classified correctly (0: after every step).
    """

    d: int
    width: int = 128
    lr: float = 0.1
    batch: int = 32
    max_steps: int = 20_000
    eval_n: int = BARAK_EVAL_N
    screen: int = 4

    @property
    def parameters(self) -> int:
        r"""Trainable numbers of one network, :math:`W(d + 2) + 1`."""
        return self.width * (self.d + 2) + 1


class MLPParams(NamedTuple):
    """The parameters of ``M`` networks: ``first`` ``(M, W, d)``, ``first_bias`` ``(M, W)``, ``second`` ``(M, W)``, ``second_bias`` ``(M,)``."""

    first: torch.Tensor
    first_bias: torch.Tensor
    second: torch.Tensor
    second_bias: torch.Tensor

    @property
    def models(self) -> int:
        """Number of networks ``M``."""
        return self.first.shape[0]


def init_mlp(d: int, width: int, *, models: int = 1, seed: int = 0, dtype: torch.dtype = torch.float32) -> MLPParams:
    r"""PyTorch's default initialisation for ``models`` networks; network ``k`` from the stream ``(seed, k)``."""

    def uniform(gen: torch.Generator, shape: tuple[int, ...], fan_in: int) -> torch.Tensor:
        return (2 * torch.rand(shape, generator=gen, dtype=torch.float64) - 1) / math.sqrt(fan_in)

    parts = []
    for k in range(models):
        gen = generator(seed, "mlp-init", k, d, width)
        parts.append(
            (
                uniform(gen, (width, d), d),
                uniform(gen, (width,), d),
                uniform(gen, (width,), width),
                uniform(gen, (), width),
            )
        )
    return MLPParams(*(torch.stack(group).to(dtype) for group in zip(*parts, strict=True)))


def _per_network(params: MLPParams, x: torch.Tensor) -> torch.Tensor:
    """Inputs ``(n, d)`` shared by every network, or ``(M, n, d)``, as ``(M, n, d)``."""
    return x.unsqueeze(0).expand(params.models, *x.shape) if x.ndim == 2 else x


def _forward(params: MLPParams, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Pre-activations and activations ``(M, n, W)``, and outputs ``(M, n)`` (no checks)."""
    pre = torch.baddbmm(params.first_bias.unsqueeze(1), x, params.first.transpose(1, 2))
    h = torch.relu(pre)
    f = torch.bmm(h, params.second.unsqueeze(-1)).squeeze(-1) + params.second_bias.unsqueeze(-1)
    return pre, h, f


def mlp_forward(params: MLPParams, x: torch.Tensor) -> torch.Tensor:
    """Outputs :math:`f(x)` of every network, shape ``(M, n)``; ``x`` is ``(n, d)`` (shared) or ``(M, n, d)``."""
    return _forward(params, _per_network(params, x))[2]


def _hinge_step(
    params: MLPParams, x: torch.Tensor, y: torch.Tensor, pull: torch.Tensor
) -> tuple[MLPParams, torch.Tensor]:
    """Hand-written gradients of the mean hinge loss, and the margins :math:`y f` ``(M, B)`` (no checks).

    ``pull`` is :math:`-y/B` (exact for :math:`y = \\pm 1`), so that :math:`g_f` is ``pull`` where the hinge is active.
    """
    pre, h, f = _forward(params, x)
    margin = y * f
    grad_f = pull * (margin < 1.0)
    grad_h = grad_f.unsqueeze(-1) * params.second.unsqueeze(1) * (pre > 0)
    grads = MLPParams(
        first=torch.bmm(grad_h.transpose(1, 2), x),
        first_bias=grad_h.sum(1),
        second=torch.bmm(grad_f.unsqueeze(1), h).squeeze(1),
        second_bias=grad_f.sum(-1),
    )
    return grads, margin


def hinge_gradients(params: MLPParams, x: torch.Tensor, y: torch.Tensor) -> tuple[MLPParams, torch.Tensor]:
    r"""Gradients of each network's mean hinge loss :math:`\frac1B\sum_s \max(0, 1 - y_s f(x_s))`, and the losses ``(M,)``.

    ``x`` is ``(B, d)`` or ``(M, B, d)``, ``y`` is ``(B,)`` or ``(M, B)``.
    """
    x = _per_network(params, x)
    y = y.expand(x.shape[0], -1) if y.ndim == 1 else y
    grads, margin = _hinge_step(params, x, y, -y / x.shape[1])
    return grads, torch.clamp(1.0 - margin, min=0.0).mean(-1)


def _pair_index(pairs: Sequence[tuple[int, int]]) -> torch.Tensor:
    return torch.tensor([sorted(p) for p in pairs], dtype=torch.long)


def _labels(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """:math:`y = -x_i x_j` per network: ``x`` ``(M, n, d)``, ``index`` ``(M, 2)``, result ``(M, n)``."""
    chosen = x.gather(2, index.unsqueeze(1).expand(-1, x.shape[1], -1))
    return -chosen[..., 0] * chosen[..., 1]


def _fresh(gens: Sequence[torch.Generator], rows: int, d: int, dtype: torch.dtype) -> torch.Tensor:
    """``(M, rows, d)`` fresh uniform signs, network ``k`` from its own generator."""
    per_row = (d + 7) // 8
    packed = torch.stack([random_bytes(g, rows * per_row).view(rows, per_row) for g in gens])
    return bytes_to_signs(packed, d, dtype)


def _sgd(
    params: MLPParams, config: MLPConfig, index: torch.Tensor, seed: int, active: torch.Tensor
) -> Iterator[tuple[int, torch.Tensor, torch.Tensor]]:
    """Run online SGD in place on ``params``; yield ``(t, all_correct, finite)`` after update ``t`` (``1..max_steps``).

    ``all_correct`` ``(M,)`` says whether the minibatch of step ``t`` was classified correctly before the update,
    ``finite`` whether its outputs were finite. Only networks with ``active[k]`` are updated, and only they are
    computed (a frozen network costs nothing); the caller may switch networks off between steps, never back on.
    """
    models, d, dtype = params.models, config.d, params.first.dtype
    gens = [generator(seed, "mlp-data", k, d) for k in range(models)]
    rate = torch.tensor(config.lr, dtype=dtype)
    step = 0
    while step < config.max_steps and bool(active.any()):
        block = min(_BLOCK, config.max_steps - step)
        nets = torch.nonzero(active).flatten()  # the block's data, for the networks still learning only
        x_all = _fresh([gens[k] for k in nets.tolist()], block * config.batch, d, dtype)
        y_all = _labels(x_all, index[nets]).view(len(nets), block, config.batch)
        pull_all = -y_all / config.batch
        x_all = x_all.view(len(nets), block, config.batch, d)
        for b in range(block):
            if bool(active.all()):  # every network learns: the whole ensemble, in place
                grads, margin = _hinge_step(params, x_all[:, b], y_all[:, b], pull_all[:, b])
                for p, g in zip(params, grads, strict=True):
                    p.sub_(g * rate)
                correct, finite = (margin > 0).all(-1), torch.isfinite(margin).all(-1)
            else:  # only the networks still learning
                live = torch.nonzero(active).flatten()
                rows = torch.searchsorted(nets, live)
                sub = MLPParams(*(p.index_select(0, live) for p in params))
                grads, margin = _hinge_step(sub, x_all[rows, b], y_all[rows, b], pull_all[rows, b])
                for p, q, g in zip(params, sub, grads, strict=True):
                    p.index_copy_(0, live, q.sub_(g * rate))
                correct = torch.zeros(models, dtype=torch.bool)
                finite = torch.ones(models, dtype=torch.bool)
                correct[live] = (margin > 0).all(-1)
                finite[live] = torch.isfinite(margin).all(-1)
            step += 1
            yield step, correct, finite


def _all_correct(params: MLPParams, x: torch.Tensor, index: torch.Tensor) -> bool:
    """Whether one network classifies every input of ``x`` ``(1, n, d)`` correctly, read in chunks of
    :data:`_TEST_ROWS` inputs up to the first wrong one (a failed test, the common case, stops early).

    Each output is a row of the same matrix product (a dot product over ``d``) as over all ``n`` at once, so it
    agrees with that product within its rounding bound (bit for bit on the development machine's BLAS); the
    verdict can differ only where an output lies within that bound of 0, as it can between two BLAS anyway.
    """
    y = _labels(x, index)
    for start in range(0, x.shape[1], _TEST_ROWS):
        part = slice(start, start + _TEST_ROWS)
        if not bool((y[:, part] * _forward(params, x[:, part])[2] > 0).all()):
            return False
    return True


def _diverged(step: int, lr: float, bad: torch.Tensor) -> DivergenceError:
    return DivergenceError(
        f"online SGD diverged at step {step} with lr = {lr}: network(s) {torch.nonzero(bad).flatten().tolist()} "
        "produced NaN or infinite outputs; lower lr"
    )


@dataclass(frozen=True)
class MLPRun:
    """The outcome of :func:`train_mlp` for an ensemble of networks (one entry per network)."""

    config: MLPConfig
    pairs: tuple[tuple[int, int], ...]
    steps_to_success: tuple[int | None, ...]
    seconds: float
    params: MLPParams

    @property
    def samples_to_success(self) -> tuple[int | None, ...]:
        """Fresh training samples seen until success, ``steps * batch`` (``None``: not within the budget)."""
        return tuple(None if s is None else s * self.config.batch for s in self.steps_to_success)

    @property
    def success_fraction(self) -> float:
        """Fraction of the networks that succeeded within ``max_steps``."""
        return float(np.mean([s is not None for s in self.steps_to_success]))


def train_mlp(config: MLPConfig, pairs: Sequence[tuple[int, int]], *, seed: int = 0) -> MLPRun:
    """Barak et al.'s protocol for one network per entry of ``pairs`` (its hidden pair), all trained at once.

    A network whose last ``config.screen`` minibatches were all correct is tested
    on ``config.eval_n`` fresh samples; at 100 % it has succeeded and is frozen.
    Training ends when every network has succeeded or after ``config.max_steps``.

    Raises
    ------
    DivergenceError
        If any network's outputs become NaN or infinite.
    """
    index = _pair_index(pairs)
    models = index.shape[0]
    start = time.perf_counter()
    params = init_mlp(config.d, config.width, models=models, seed=seed)
    active = torch.ones(models, dtype=torch.bool)
    streak = torch.zeros(models, dtype=torch.long)
    eval_gens = [generator(seed, "mlp-eval", k, config.d) for k in range(models)]
    success: list[int | None] = [None] * models
    with torch.no_grad():
        for step, correct, finite in _sgd(params, config, index, seed, active):
            if not bool(finite.all()):
                raise _diverged(step, config.lr, ~finite)
            streak = torch.where(correct, streak + 1, 0)
            due = torch.nonzero(active & (streak >= config.screen)).flatten().tolist()
            for k in due:  # a fresh test of network k alone
                x = _fresh([eval_gens[k]], config.eval_n, config.d, params.first.dtype)
                if _all_correct(MLPParams(*(p[k : k + 1] for p in params)), x, index[k : k + 1]):
                    success[k], active[k] = step, False
                streak[k] = 0
            if not bool(active.any()):
                break
    return MLPRun(config, tuple(map(tuple, index.tolist())), tuple(success), time.perf_counter() - start, params)


@dataclass(frozen=True)
class MLPSnapshots:
    """The parameters of every network after each step count in ``steps`` (training never stops early)."""

    config: MLPConfig
    pairs: tuple[tuple[int, int], ...]
    steps: tuple[int, ...]
    params: tuple[MLPParams, ...]
    seconds: float


def mlp_snapshots(
    config: MLPConfig, pairs: Sequence[tuple[int, int]], steps: Sequence[int], *, seed: int = 0
) -> MLPSnapshots:
    """Train like :func:`train_mlp` (same initialisation and data) without stopping, keeping the parameters after each of ``steps``.

    ``steps`` must be increasing and at most ``config.max_steps``.
    """
    index, wanted = _pair_index(pairs), list(steps)
    models = index.shape[0]
    start = time.perf_counter()
    params = init_mlp(config.d, config.width, models=models, seed=seed)
    active = torch.ones(models, dtype=torch.bool)
    kept, todo = [], iter(wanted)
    target = next(todo)
    with torch.no_grad():
        for step, _, finite in _sgd(params, config, index, seed, active):
            if not bool(finite.all()):
                raise _diverged(step, config.lr, ~finite)
            if step == target:
                kept.append(MLPParams(*(p.clone() for p in params)))
                target = next(todo, None)
                if target is None:
                    break
    return MLPSnapshots(
        config, tuple(map(tuple, index.tolist())), tuple(wanted), tuple(kept), time.perf_counter() - start
    )


def min_margin(
    params: MLPParams,
    pairs: Sequence[tuple[int, int]],
    *,
    samples: int | None = None,
    seed: int = 0,
    stop_at: float | None = None,
) -> torch.Tensor:
    r"""Each network's smallest margin :math:`\min_x y(x) f(x)`, shape ``(M,)``.

    ``samples=None``: over **all** :math:`2^d` inputs, exactly (``d <= 20``).
    Otherwise over ``samples`` fresh inputs of the stream ``(seed, k)``: an
    estimate, not a certificate. The hinge loss is below :math:`\varepsilon` on every
    input iff the margin exceeds :math:`1 - \varepsilon`; every sign is right iff it is positive.
    ``stop_at``: stop after the chunk of inputs at which every network's smallest margin so far is at most
    ``stop_at``; each entry is then a margin some input has, at most ``stop_at`` (so whether the smallest margin
    exceeds any level at least ``stop_at`` is decided exactly), and the inputs not reached are not checked.
    """
    models, _, d = params.first.shape
    index = _pair_index(pairs)
    dtype = params.first.dtype
    if samples is None:  # d <= 20
        inputs = all_inputs(d, dtype=dtype).to(params.first.device)
        rows = max(64, _CHUNK_ACTIVATIONS // (models * params.first.shape[1]))
        chunks = (inputs[s : s + rows].expand(models, -1, -1) for s in range(0, inputs.shape[0], rows))
    else:
        gens = [generator(seed, "mlp-margin", k, d) for k in range(models)]
        sizes = [min(_CHUNK, samples - s) for s in range(0, samples, _CHUNK)]
        chunks = (_fresh(gens, rows, d, dtype).to(params.first.device) for rows in sizes)
    smallest = torch.full((models,), math.inf, dtype=dtype, device=params.first.device)
    with torch.no_grad():
        for x in chunks:
            margin = _labels(x, index.to(x.device)) * _forward(params, x)[2]
            smallest = torch.minimum(smallest, margin.amin(-1))
            if stop_at is not None and bool((smallest <= stop_at).all()):
                break
    if not bool(torch.isfinite(smallest).all()):
        raise DivergenceError("the networks' outputs are NaN or infinite: their parameters diverged")
    return smallest
