r"""Models linear in their parameters: the counterexample to the old symmetry argument, and the proved bound.

* :func:`frozen_features`: a frozen random ReLU layer with only its output weights
  fitted classifies all :math:`2^d` inputs, for several pairs: frozen but distinct
  first-layer weights do **not** make positions interchangeable;
* :func:`linear_bound`: the proved bound for models linear in their parameters,
  :math:`\text{mean}_S \operatorname{dist}(\chi_S, V)^2 \ge 1 - \dim V/\binom d2`, against
  random features, with the one-step Transformer beside it.

Experiments ``frozen_features`` and ``linear_bound``.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Annotated

import numpy as np
import torch

from .._contract import Between, Items, Seed, config
from ..codes import Codes
from ..learners._mlp import init_mlp
from ..learners._one_step import one_step
from ..task import all_inputs, random_pair
from ._criteria import EPSILON
from ._registry import experiment

Width = Annotated[int, Between(1, 4096)]


def _features(d: int, width: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """All inputs ``(2^d, d)`` and the frozen random ReLU features plus a constant, ``(2^d, width + 1)``, float64."""
    params = init_mlp(d, width, seed=seed, dtype=torch.float64)
    x = all_inputs(d)
    hidden = torch.relu(x @ params.first[0].T + params.first_bias[0])
    return x, torch.cat([hidden, torch.ones(x.shape[0], 1, dtype=torch.float64)], dim=1)


@dataclass(frozen=True)
class FeatureFit:
    """One pair fitted by least squares on the frozen features: sign accuracy over all inputs and the L² error."""

    pair: tuple[int, int]
    accuracy: float
    l2_error: float


@dataclass(frozen=True)
class FrozenFeaturesResult:
    """:func:`frozen_features`: the fits, and the number of trained numbers (``width + 1``)."""

    d: int
    width: int
    trained: int
    fits: tuple[FeatureFit, ...]
    all_pairs_fitted: int  # of the C(d, 2) pairs, how many are classified perfectly


@config
class FrozenFeaturesPlan:
    """``d`` from 3 to 16 (all 2^d inputs are enumerated), the width (at most 4096), pairs to report, the seed."""

    d: Annotated[int, Between(3, 16)] = 10
    width: Width = 200
    pairs: Annotated[int, Between(1, 120)] = 3
    seed: Seed = 0

    def __post_init__(self) -> None:
        if self.pairs > math.comb(self.d, 2):
            raise ValueError(
                f"pairs must be at most C(d, 2) = {math.comb(self.d, 2)} at d = {self.d}, got {self.pairs}"
            )


@experiment("frozen_features", book=FrozenFeaturesPlan(), full=FrozenFeaturesPlan())
def frozen_features(plan: FrozenFeaturesPlan) -> FrozenFeaturesResult:
    r"""A frozen random first layer (PyTorch's initialisation), only the ``width + 1`` output numbers fitted.

    The output layer is fitted by least squares on all :math:`2^d` inputs (the
    minimiser of the square loss that training it would reach); the fit's sign is
    checked on every input, for ``pairs`` random pairs and for all :math:`\binom d2`.
    The least squares use LAPACK's SVD-based solver (``gelsd``), which gives the same bits
    in every run; the default (``gelsy``) does not.
    """
    d, width, pairs, seed = plan.d, plan.width, plan.pairs, plan.seed
    x, phi = _features(d, width, seed)
    everything = list(itertools.combinations(range(d), 2))
    targets = torch.stack([-x[:, i] * x[:, j] for i, j in everything], dim=1)  # (2^d, C(d, 2))
    fitted = phi @ torch.linalg.lstsq(phi, targets, driver="gelsd").solution
    accuracy = (torch.sign(fitted) == targets).double().mean(0)
    error = (fitted - targets).pow(2).mean(0).sqrt()
    chosen, seen = [], set()
    for t in itertools.count():
        pair = random_pair(d, seed=seed + t)
        if pair not in seen:
            seen.add(pair)
            chosen.append(pair)
        if len(chosen) == pairs:
            break
    fits = tuple(FeatureFit(p, float(accuracy[everything.index(p)]), float(error[everything.index(p)])) for p in chosen)
    return FrozenFeaturesResult(d, width, width + 1, fits, int((accuracy == 1).sum()))


@dataclass(frozen=True)
class LinearBoundResult:
    r"""Per width ``p``: the mean over the :math:`\binom d2` pairs of the best squared L² error
    :math:`\operatorname{dist}(\chi_S, V)^2` with :math:`V` = span of the ``p`` features and a constant,
    and the proved floor :math:`\max(0, 1 - \dim V/\binom d2)`. ``transformer_*``: the split
    one-step Transformer's squared L² errors :math:`2L` for every pair (one population step from its start),
    with its ``2m`` parameters.
    """

    @property
    def transformer_fitted(self) -> int:
        """Pairs the Transformer fits to squared L² error below :data:`EPSILON`."""
        return int(np.sum(np.array(self.transformer_errors) < EPSILON))

    @property
    def linear_floor_for_fitted(self) -> float:
        r"""The dimension a linear model needs to fit as many pairs that well: :math:`(1 - \varepsilon)\,k`."""
        return (1 - EPSILON) * self.transformer_fitted

    d: int
    widths: tuple[int, ...]
    dims: tuple[int, ...]
    mean_error: tuple[float, ...]
    floor: tuple[float, ...]
    transformer_parameters: int
    transformer_errors: tuple[float, ...]


@config
class LinearBoundPlan:
    """``d`` from 4 to 16 (all 2^d inputs are enumerated), the feature widths (each at most 4096), the seed."""

    d: Annotated[int, Between(4, 16)] = 12
    widths: Annotated[tuple[Width, ...], Items(1, 32)] = (4, 8, 16, 32, 64, 128, 256)
    seed: Seed = 0


@experiment("linear_bound", book=LinearBoundPlan(), full=LinearBoundPlan())
def linear_bound(plan: LinearBoundPlan) -> LinearBoundResult:
    r"""Random ReLU features of each width against the bound :math:`\text{mean}_S \operatorname{dist}^2 \ge 1 - \dim V/\binom d2`.

    Exact: the :math:`2^d` inputs are enumerated, so :math:`L^2` under the uniform
    measure is a mean over rows. :math:`\dim V` is the rank of the features.
    """
    d, widths, seed = plan.d, plan.widths, plan.seed
    pairs = list(itertools.combinations(range(d), 2))
    dims, means, floors = [], [], []
    for width in widths:
        x, phi = _features(d, width, seed)
        basis, _ = torch.linalg.qr(phi)
        rank = int(torch.linalg.matrix_rank(phi))
        basis = basis[:, :rank] if rank < basis.shape[1] else basis
        targets = torch.stack([-x[:, i] * x[:, j] for i, j in pairs], dim=1)
        captured = ((basis.T @ targets) ** 2).sum(0) / x.shape[0]  # |projection|^2 in L2(uniform)
        dims.append(rank)
        means.append(float((1 - captured).mean()))
        floors.append(max(0.0, 1 - rank / len(pairs)))
    errors = tuple(_split_error(d, p, seed) for p in pairs)
    return LinearBoundResult(d, widths, tuple(dims), tuple(means), tuple(floors), 2 * Codes(d).m, errors)


def _split_error(d: int, pair: tuple[int, int], seed: int) -> float:
    """Squared L² error :math:`2L` of the split model after one population step."""
    return 2 * one_step(d, "split", seed=seed, pair=pair, epsilon=EPSILON).mean_loss_after
