r"""The authors' model of the paper's first version, reimplemented from its public description (no code copied).

*Input.* Bits :math:`b_j \in \{0, 1\}`, :math:`j = 0, \dots, n-1` (here :math:`n = d`); the
label is the parity of the :math:`k` hidden bits. The book's inputs map to bits by
:math:`b = (1 - x)/2`, so the book's label :math:`y = -\prod_{i \in S} x_i` is :math:`+1`
exactly when the parity is odd: the two conventions agree.

*Embedding.* Token :math:`j` is :math:`t_j = (b_j,\ 1 - b_j,\ \cos\tfrac{2\pi j}{n},\ \sin\tfrac{2\pi j}{n})`.

*Heads.* Head :math:`h` holds a :math:`4\times4` matrix masked so that only
:math:`A_{02}, A_{03}` train: **two free scalars** per head, started at
:math:`(\cos\theta_h, \sin\theta_h)` with :math:`\theta_h` uniform, and not constrained
to the circle afterwards. Its scores and output are

.. math::

    s_{h,j} = \frac{A^{(h)}_{02}\cos\frac{2\pi j}{n} + A^{(h)}_{03}\sin\frac{2\pi j}{n}}{n/4},

    \alpha_h = \operatorname{softmax}_j(s_h),\qquad o_h = \sum_j \alpha_{h,j}\, b_j .

Since the scores depend on the position only, attention is the same for every
input, and a head's attention is a von Mises bump on the circle of positions:
it can peak at one position only.

*Readout* (frozen). The soft count :math:`c = k\cdot\frac1k\sum_h o_h` goes through
:math:`k` ReLU units with biases :math:`-(i + \tfrac12)`:
:math:`g(c) = \sum_{i=0}^{k-1} (-1)^i (2 + 4i)\,\mathrm{ReLU}(c - i - \tfrac12)`. On an exact
count :math:`c \in \{0, \dots, k\}` this is :math:`c \bmod 2`, a 0/1 parity; the
description's "(or similar)" leaves the output scale open, and we take
:math:`\hat y = 2g(c) - 1`, which is exactly :math:`\pm1` on exact counts (the hinge
loss's margin 1). So the output weights are :math:`(-1)^i(4 + 8i)` and the output
bias :math:`-1`: :math:`3k + 1` frozen numbers.

*Loss and training.* The square of the mean hinge loss,
:math:`L = \bigl(\tfrac1N\sum_s \max(0, 1 - y_s\hat y_s)\bigr)^2`; Adam, learning rate 0.1,
full batch on :math:`0.6\cdot 2^n` uniform draws, capped at the authors' batch of
80,000 (they hold for :math:`n \le 17`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .._random import derive_seed, generator, random_bytes
from ._authors_core import attention, loss_and_grad, pack, parity_labels, pieces, readout
from ._authors_core import margins as smallest_margins
from ._optim import Adam
from ._training import DivergenceError

_EXACT_D = 20  # enumerate all 2^d inputs up to here
_FRESH = 2**13  # fresh samples for the sign test beyond it (Barak et al.'s test size)


@dataclass(frozen=True)
class AuthorsConfig:
    """The authors' training protocol for their ``k``-head model on ``d`` positions.

    Parameters
    ----------
    d
        Positions :math:`n`, ``4 <= d <= 64``.
    k
        Heads, equal to the parity order.
    lr, epochs
        Adam's learning rate and the number of full-batch steps.
    train_fraction, max_train
        The training set: ``train_fraction * 2**d`` uniform draws, at most ``max_train``.
    epsilon
        Worst-case hinge loss that counts as success.
    check_every
        Epochs between two checks of the success criteria.
    """

    d: int
    k: int = 2
    lr: float = 0.1
    epochs: int = 2000
    train_fraction: float = 0.6
    max_train: int = 80_000
    epsilon: float = 1e-2
    check_every: int = 10

    @property
    def n_train(self) -> int:
        """Training-set size, ``min(round(train_fraction * 2**d), max_train)``, at least 1."""
        return max(1, min(round(self.train_fraction * 2.0**self.d), self.max_train))

    @property
    def parameters(self) -> int:
        """Trainable numbers: two per head, ``2k``."""
        return 2 * self.k


def authors_init(k: int, *, seed: int = 0) -> torch.Tensor:
    r"""The start :math:`(A_{02}, A_{03}) = (\cos\theta_h, \sin\theta_h)`, :math:`\theta_h` uniform on :math:`[0, 2\pi)`: shape ``(k, 2)``."""
    theta = 2 * math.pi * torch.rand(k, generator=generator(seed, "authors-init", k), dtype=torch.float64)
    return torch.stack([theta.cos(), theta.sin()], dim=-1)


def authors_attention(a: torch.Tensor, d: int) -> torch.Tensor:
    r"""Attention :math:`\alpha_{h,j}` of heads with parameters ``a`` ``(..., k, 2)`` over ``d`` positions: ``(..., k, d)``."""
    return attention(a, d)


def peak_weight(radius: float, d: int) -> float:
    r"""The weight a head with :math:`|A| = r` puts on the position it is aimed at, :math:`1/\sum_j e^{(4r/d)(\cos(2\pi j/d) - 1)}`.

    With :math:`(A_{02}, A_{03}) = r(\cos\varphi, \sin\varphi)` the scores are
    :math:`(4r/d)\cos(2\pi j/d - \varphi)`; aimed at a position (:math:`\varphi = 2\pi j_0/d`),
    the softmax gives this weight to :math:`j_0`. It grows with :math:`r` only: the
    :math:`n/4` temperature makes a sharp head need a large :math:`r`.
    """
    angle = 2 * math.pi * torch.arange(d, dtype=torch.float64) / d
    return float(1 / torch.exp((4 * radius / d) * (angle.cos() - 1)).sum())


def radius_for_peak(d: int, weight: float) -> float:
    """The smallest :math:`|A|` at which :func:`peak_weight` reaches ``weight`` (in ``[1/d, 1)``), by bisection."""
    low, high = 0.0, 1.0
    while peak_weight(high, d) < weight:
        if high > 1e15:  # float64 cannot resolve the scores' differences beyond: the weight is out of reach
            raise ValueError(f"weight = {weight} is out of reach of a head on d = {d:,} positions in float64")
        low, high = high, 2 * high
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if peak_weight(middle, d) < weight else (low, middle)
    return high


def pair_mass_needed() -> float:
    r"""The combined attention :math:`\beta_u + \beta_v` of two heads on the two hidden bits above which every sign can be right.

    The readout (:math:`k = 2`) is :math:`\hat y = 15 - 8c` on :math:`(\tfrac32, 2]`; the input with both
    hidden bits set and no other has count :math:`\beta_u + \beta_v` and even parity, so it needs
    :math:`\hat y < 0` there: :math:`\beta_u + \beta_v > \tfrac{15}8`, the zero of the readout's last
    linear piece. With :math:`\beta_u, \beta_v > \tfrac34` this is also enough (every input's sign is right).
    """
    slopes, intercepts = pieces(2, torch.float64)
    return float(-intercepts[-1] / slopes[-1])


def parity_readout(count: torch.Tensor, k: int) -> torch.Tensor:
    r"""The frozen readout :math:`\hat y = -1 + \sum_{i<k} (-1)^i(4 + 8i)\,\mathrm{ReLU}(c - i - \tfrac12)` of soft counts ``count``."""
    return readout(count, k)


def _predict(a: torch.Tensor, bits: torch.Tensor) -> torch.Tensor:
    """Predictions ``(..., N)`` for parameters ``(..., k, 2)`` and bits ``(..., N, d)`` (no checks)."""
    k, d = a.shape[-2], bits.shape[-1]
    total = attention(a, d).sum(-2).to(bits.dtype)  # beta_j = sum_h alpha_{h,j}: the count is <beta, b>
    return readout((bits @ total.unsqueeze(-1)).squeeze(-1), k)


def authors_predict(a: torch.Tensor, bits: torch.Tensor) -> torch.Tensor:
    r"""Predictions :math:`\hat y` of the model with parameters ``a`` ``(k, 2)`` (or ``(R, k, 2)``) on ``bits`` ``(N, d)`` (or ``(R, N, d)``)."""
    return _predict(a, bits)


def _hinge_squared(a: torch.Tensor, bits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.clamp(1 - y * _predict(a, bits), min=0).mean(-1) ** 2


def authors_loss(a: torch.Tensor, bits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    r"""The authors' loss :math:`\bigl(\frac1N\sum_s \max(0, 1 - y_s\hat y_s)\bigr)^2`, labels ``y`` in :math:`\{\pm1\}`."""
    return _hinge_squared(a, bits, y.to(bits.dtype))


def _support_bits(support: Sequence[int]) -> torch.Tensor:
    """All ``2^k`` values of the hidden bits, ``(2^k, k)`` float64."""
    k = len(support)
    rows = torch.arange(2**k).unsqueeze(1)
    return ((rows >> torch.arange(k)) & 1).double()


def margin_bounds(a: torch.Tensor, d: int, support: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
    r"""A certified bracket ``(lower, attained)`` on :math:`\min_x y(x)\hat y(x)` over all :math:`2^d` inputs, in :math:`O(kd)`.

    With :math:`\beta = \sum_h \alpha_h`, the count is :math:`c = \sum_{j\in S}\beta_j b_j + r`,
    and the other bits give :math:`r \in [0, R]`, :math:`R = \sum_{j\notin S}\beta_j`, both ends
    attained (all other bits 0, or all 1). The readout is piecewise linear with
    kinks at :math:`i + \tfrac12`, so for each of the :math:`2^k` values of the hidden
    bits the smallest margin over the interval is at an end or a kink: a sound
    lower bound. ``attained`` is the smallest margin at the ends, a value some
    input has. Shapes ``a.shape[:-2]``.
    """
    k, support = a.shape[-2], list(support)
    beta = attention(a.double(), d).sum(-2)  # (..., d)
    on = beta[..., support]  # (..., |S|)
    rest = beta.sum(-1) - on.sum(-1)
    hidden = _support_bits(support)  # (2^|S|, |S|)
    base = hidden @ on.unsqueeze(-1)  # (..., 2^|S|, 1)
    y = 2.0 * (hidden.sum(-1) % 2) - 1  # odd parity -> +1
    kinks = torch.arange(k, dtype=torch.float64) + 0.5
    ends = torch.cat([base, base + rest[..., None, None]], dim=-1)  # (..., 2^|S|, 2)
    inside = (kinks > base) & (kinks < base + rest[..., None, None])
    candidates = torch.cat([ends, torch.where(inside, kinks.expand_as(inside), base.expand_as(inside))], dim=-1)
    attained = (y[:, None] * readout(ends, k)).amin(-1).amin(-1)
    lower = (y[:, None] * readout(candidates, k)).amin(-1).amin(-1)
    return lower - 1e-12, attained


@dataclass(frozen=True)
class AuthorsRun:
    """The record of :func:`train_authors`: one entry per run (seed); curves sampled every ``check_every`` epochs.

    ``epochs_to_success``: first checked epoch with worst-case hinge loss below ``epsilon`` on every input;
    ``epochs_to_sign``: first checked epoch with every sign right (``None``: never). ``sign_test`` says how the
    sign was checked: ``"all inputs"`` (enumeration) or ``"8192 fresh samples"``; success beyond ``d = 20`` uses the
    certified bracket of :func:`margin_bounds`.
    """

    config: AuthorsConfig
    supports: tuple[tuple[int, ...], ...]
    epochs: np.ndarray  # (C,) the checked epochs
    loss: np.ndarray  # (C, R) training loss
    margin: np.ndarray  # (C, R) smallest margin (certified lower bound beyond d = 20)
    epochs_to_success: tuple[int | None, ...]
    epochs_to_sign: tuple[int | None, ...]
    attention: np.ndarray  # (R, k, d) final attention
    params: np.ndarray  # (R, k, 2) final (A02, A03)
    largest_growth: np.ndarray  # (R, k) the largest growth of a head's radius |A| in one epoch
    seconds: float
    sign_test: str

    @property
    def success_fraction(self) -> float:
        """Fraction of runs that reached worst-case hinge loss below ``epsilon``."""
        return float(np.mean([e is not None for e in self.epochs_to_success]))

    @property
    def sign_fraction(self) -> float:
        """Fraction of runs that classified every (tested) input correctly at some check."""
        return float(np.mean([e is not None for e in self.epochs_to_sign]))


def _random_raw(seed: int, label: str, runs: int, n: int, d: int) -> torch.Tensor:
    """``(R, N, G)`` uniform random bytes, run ``r`` from the stream ``(seed, label, r, d)``."""
    groups = (d + 7) // 8
    return torch.stack([random_bytes(generator(seed, label, r, d), n * groups).view(n, groups) for r in range(runs)])


def _all_raw(d: int, runs: int) -> torch.Tensor:
    """All :math:`2^d` inputs as bytes ``(R, 2^d, G)`` (input ``r`` has :math:`b_i` = bit ``i`` of ``r``)."""
    rows = torch.arange(2**d).unsqueeze(1)
    raw = ((rows >> (8 * torch.arange((d + 7) // 8))) & 255).to(torch.uint8)
    return raw.unsqueeze(0).expand(runs, -1, -1)


def train_authors(config: AuthorsConfig, supports: Sequence[Sequence[int]], *, seed: int = 0) -> AuthorsRun:
    """Train one run per entry of ``supports`` (its hidden bits, ``k`` of them), batched as a leading axis.

    Run ``r`` draws its start, its training set and its sign test from streams of ``(seed, r)``.

    Raises
    ------
    DivergenceError
        If the loss or a parameter becomes NaN or infinite.
    """
    checked = [sorted(s) for s in supports]
    runs = len(checked)
    start = time.perf_counter()
    d = config.d
    raw = _random_raw(seed, "authors-data", runs, config.n_train, d)
    train_set, y = pack(raw, d), parity_labels(raw, checked)
    raw = _all_raw(d, runs) if d <= _EXACT_D else _random_raw(seed, "authors-test", runs, _FRESH, d)
    test_set, test_y = None if d <= _EXACT_D else pack(raw, d), parity_labels(raw, checked)  # None: all inputs
    sign_test = "all inputs" if d <= _EXACT_D else f"{_FRESH:,} fresh samples"
    a = torch.stack([authors_init(config.k, seed=derive_seed(seed, "run", r)) for r in range(runs)])
    optimiser = Adam(a, lr=config.lr)
    epochs, losses, margins = [], [], []
    success: list[int | None] = [None] * runs
    sign: list[int | None] = [None] * runs
    growth = torch.zeros(runs, config.k, dtype=torch.float64)
    for epoch in range(config.epochs + 1):
        loss, grad = loss_and_grad(a, d, train_set, y)
        if not (bool(torch.isfinite(loss).all()) and bool(torch.isfinite(grad).all())):
            raise DivergenceError(
                f"the authors' model diverged at epoch {epoch} (lr = {config.lr}): the loss is NaN or infinite"
            )
        if epoch % config.check_every == 0 or epoch == config.epochs:
            tested = smallest_margins(a, d, test_set, test_y)
            if d <= _EXACT_D:  # exact: the smallest margin over all inputs
                lower = tested
            else:  # certified lower bound, in O(kd)
                lower = torch.stack([margin_bounds(a[r], d, checked[r])[0] for r in range(runs)])
            epochs.append(epoch)
            losses.append(loss.numpy().copy())
            margins.append(lower.numpy().copy())
            for r in range(runs):
                if success[r] is None and float(lower[r]) > 1 - config.epsilon:
                    success[r] = epoch
                if sign[r] is None and float(tested[r]) > 0:
                    sign[r] = epoch
        if epoch == config.epochs:
            break
        radius = a.norm(dim=-1)
        optimiser.step(grad)
        growth = torch.maximum(growth, a.norm(dim=-1) - radius)
    final = a
    return AuthorsRun(
        config=config,
        supports=tuple(tuple(s) for s in checked),
        epochs=np.array(epochs),
        loss=np.array(losses),
        margin=np.array(margins),
        epochs_to_success=tuple(success),
        epochs_to_sign=tuple(sign),
        attention=attention(final, config.d).numpy(),
        params=final.numpy().copy(),
        largest_growth=growth.numpy(),
        seconds=time.perf_counter() - start,
        sign_test=sign_test,
    )
