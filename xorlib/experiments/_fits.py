r"""Fits for the experiments (trusting their callers): 50 % thresholds of success curves, power laws, and a two-level bootstrap.

* :func:`logistic_threshold`: the maximum-likelihood fit of
  :math:`P(\text{success}\mid n) = \sigma(a + b\ln n)` to success counts, and its 50 %
  point :math:`n^* = e^{-a/b}`;
* :func:`power_law`: least squares of :math:`\ln y = \ln C + \alpha\ln x`;
* :func:`bootstrap_exponent`: the exponent :math:`\alpha` of :math:`n^* \propto d^\alpha`, with a
  bootstrap that resamples **code draws**, and trials within each, so that the
  spread between code draws shows in the interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def logistic_threshold(sample_sizes: Sequence[float], successes: Sequence[float], trials: Sequence[float]) -> float:
    r"""The 50 % point :math:`n^*` of a logistic fit in :math:`\ln n` (``nan`` if the data never cross 50 %).

    Newton's method on the log-likelihood of :math:`\sigma(a + b\ln n)`, with a tiny
    ridge so that separable data (a sharp step) still give the crossing point.
    """
    x = np.log(np.asarray(sample_sizes, dtype=float))
    k = np.asarray(successes, dtype=float)
    t = np.asarray(trials, dtype=float)
    if k.sum() == 0 or k.sum() == t.sum():
        return math.nan
    centre = x.mean()
    design = np.stack([np.ones_like(x), x - centre], axis=1)
    beta = np.zeros(2)
    ridge = 1e-6 * np.eye(2)
    for _ in range(100):
        p = 1 / (1 + np.exp(-design @ beta))
        gradient = design.T @ (k - t * p) - ridge @ beta
        hessian = design.T @ (design * (t * p * (1 - p))[:, None]) + ridge
        step = np.linalg.solve(hessian, gradient)
        beta += step
        if np.abs(step).max() < 1e-10:
            break
    a, b = beta
    if b <= 0:
        return math.nan
    return float(math.exp(centre - a / b))


def power_law(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    r"""The exponent :math:`\alpha` and prefactor :math:`C` of :math:`y = Cx^\alpha`, by least squares in log-log (finite points only)."""
    lx, ly = np.log(np.asarray(x, dtype=float)), np.log(np.asarray(y, dtype=float))
    keep = np.isfinite(lx) & np.isfinite(ly)
    if keep.sum() < 2:
        return math.nan, math.nan
    slope, intercept = np.polyfit(lx[keep], ly[keep], 1)
    return float(slope), float(math.exp(intercept))


def bootstrap_exponent(
    ds: Sequence[int],
    sample_sizes: Sequence[Sequence[int]],
    successes: Sequence[np.ndarray],
    *,
    resamples: int = 400,
    seed: int = 0,
    level: float = 0.9,
) -> tuple[float, float, float]:
    r"""The exponent of :math:`n^*(d)` and a bootstrap interval (``level``), resampling code draws, then trials.

    ``successes[i]`` is a boolean array ``(code draws, trials, len(sample_sizes[i]))``
    for dimension ``ds[i]``. Returns ``(exponent, low, high)``.
    """
    rng = np.random.default_rng(seed)

    def exponent(arrays: Sequence[np.ndarray]) -> float:
        thresholds = [
            logistic_threshold(n, a.sum(axis=(0, 1)), np.full(len(n), a.shape[0] * a.shape[1]))
            for n, a in zip(sample_sizes, arrays, strict=True)
        ]
        return power_law(ds, thresholds)[0]

    point = exponent(successes)
    draws = []
    for _ in range(resamples):
        arrays = []
        for a in successes:
            codes = rng.integers(0, a.shape[0], a.shape[0])
            trials = rng.integers(0, a.shape[1], (a.shape[0], a.shape[1]))
            arrays.append(a[codes[:, None], trials])
        draws.append(exponent(arrays))
    finite = np.asarray([x for x in draws if math.isfinite(x)])
    if finite.size < resamples // 2:
        return point, math.nan, math.nan
    tail = (1 - level) / 2
    return point, float(np.quantile(finite, tail)), float(np.quantile(finite, 1 - tail))
