"""Tolerances that follow the magnitudes compared and the work behind them, never the last bits of one BLAS.

A floating-point sum of ``n`` terms is within :math:`\\gamma_n \\sum_i |t_i|` of the exact one, with
:math:`\\gamma_n = n u / (1 - n u)` and :math:`u = \\varepsilon / 2` (Higham, *Accuracy and Stability of
Numerical Algorithms*, Thm 3.1), whatever the order of summation, the blocking or the fused multiply-adds a
CPU's BLAS chooses. Two computations of the same quantity are then within twice that of each other:
:func:`assert_close` asserts exactly this, entry by entry, for a stated number of rounded operations and a
stated scale (the sum of the absolute values of the terms, or a bound on it). It is a worst-case bound: it holds
on any CPU and thread count, and it is still far below any real error (a wrong term changes the result by
the term itself).
"""

from __future__ import annotations

import torch

EPS = torch.finfo(torch.float64).eps


def gamma(operations: float, dtype: torch.dtype = torch.float64) -> float:
    """:math:`\\gamma_n = nu/(1 - nu)`, the relative error bound of ``n`` rounded operations in ``dtype``."""
    u = torch.finfo(dtype).eps / 2
    return operations * u / (1 - operations * u)


def assert_close(
    got: torch.Tensor,
    expected: torch.Tensor,
    *,
    operations: float,
    scale: torch.Tensor | float,
    dtype: torch.dtype = torch.float64,
) -> None:
    """``|got - expected| <= 2 gamma(operations) * scale`` entry by entry (``scale``: the sum of |terms|, broadcast)."""
    got, expected = torch.as_tensor(got, dtype=torch.float64), torch.as_tensor(expected, dtype=torch.float64)
    bound = 2 * gamma(operations, dtype) * torch.as_tensor(scale, dtype=torch.float64)
    error = (got - expected).abs()
    worst = float((error - bound).max())
    assert worst <= 0, f"off by up to {float(error.max()):.3g}, above the rounding bound (largest excess {worst:.3g})"
