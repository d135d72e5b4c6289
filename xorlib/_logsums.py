r"""Log-domain sums over positions, and a rigorous bound on their rounding.

Softmax normalisers and moments are accumulated in the log domain: for head scores :math:`s_1, s_2`,

.. math::

    \langle a, b\rangle = e^{\operatorname{lse}(s_1+s_2) - \operatorname{lse}(s_1) - \operatorname{lse}(s_2)},\quad
    \|a\|^2 = e^{\operatorname{lse}(2s_1) - 2\operatorname{lse}(s_1)},\quad
    \textstyle\sum_k a_k^2b_k^2 = e^{\operatorname{lse}(2s_1+2s_2) - 2\operatorname{lse}(s_1) - 2\operatorname{lse}(s_2)},

so one pass gives all of them, and one exponential per entry gives both :math:`\operatorname{lse}(x)` and
:math:`\operatorname{lse}(2x)` (:func:`exp_sums`); the blocks' log-sums combine pairwise (:class:`LogSums`). The
formulas are those of :mod:`xorlib.population`.

*Rounding.* :func:`log_weight_error` bounds, rigorously, the rounding of each log-weight after a step: the
look-up scores, the exponentials, every sum in any order (:math:`\gamma_n`, Higham Thm 4.4) and the pairwise
combination of the blocks' log-sums (used by :func:`xorlib._stream.after_step` and
:func:`xorlib._candidates.after_from_candidates`).
This module trusts its callers (the public entry point is :func:`xorlib.one_step`).
"""

from __future__ import annotations

import functools
import math

import torch

#: The smallest exponent :func:`exp_sums` evaluates, divided by the largest power it sums (see there).
UNDERFLOW = -680.0


def exp_sums(
    x: torch.Tensor,
    top: torch.Tensor,
    powers: tuple[int, ...] = (1, 2),
    *,
    in_place: bool = False,
    raise_low: bool = True,
) -> torch.Tensor:
    r""":math:`\log\sum_k e^{p x_k}` along the last axis for each ``p`` of ``powers``, ``(len(powers), ...)``: one exponential.

    All are shifted by the same maximum :math:`M` (``top``): :math:`e^{2(x_k - M)}` is the square of
    :math:`e^{x_k - M}`, :math:`e^{4(x_k - M)}` the square of that. A row of :math:`-\infty` (masked) sums to
    :math:`-\infty`. ``in_place``: ``x`` (contiguous) is overwritten (by the exponentials, or their squares
    where the powers reach 4; no temporary, the same numbers). ``raise_low=False``: the caller knows that no
    argument is below :func:`lowest_argument`'s floor, so raising them to it would change nothing
    (:func:`clamp_changes_nothing`), and it is skipped; every entry is then finite, and so is every row's maximum
    (no masked row to guard).
    """
    empty = None if not raise_low else top == -torch.inf
    top = top if empty is None else torch.where(empty, torch.zeros_like(top), top)
    # Arguments below -680/p are raised to it: exp then never underflows (a slow path, and subnormal squares),
    # and a raised term adds at most e^{-680/p} to a sum of at least 1 (log_weight_error counts it).
    shifted = x.sub_(top.unsqueeze(-1)) if in_place else torch.sub(x, top.unsqueeze(-1))
    e = (shifted.clamp_(min=lowest_argument(powers)) if raise_low else shifted).exp_()
    out = []
    for power in powers:
        if power == 1:
            out.append(e.sum(-1))
        elif power == 2:
            out.append(torch.linalg.vector_norm(e, dim=-1).square_())  # one pass, no temporary
        else:  # 4: the sum of the squares of the squares
            out.append(torch.linalg.vector_norm(e.square_(), dim=-1).square_())
    scaled = _powers(powers, top.dtype, top.device).view(-1, *[1] * top.dim()) * top
    logs = torch.stack(out).log_() + scaled  # all powers at once (fewer calls)
    return logs if empty is None else torch.where(empty, -torch.inf, logs)


@functools.lru_cache(maxsize=16)
def _powers(powers: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """The powers as a tensor, made once (a pass asks for them at every block)."""
    return torch.tensor(powers, dtype=dtype, device=device)


def lowest_argument(powers: tuple[int, ...]) -> float:
    """The floor to which :func:`exp_sums` raises its arguments :math:`x_k - M`: ``UNDERFLOW / max(powers)``."""
    return UNDERFLOW / max(powers)


def clamp_changes_nothing(lows: list[float], tops: list[float], powers: tuple[int, ...]) -> bool:
    r"""Whether rows whose entries are at least ``lows``, shifted by their maxima ``tops``, all stay at or above
    :func:`lowest_argument`: rounding is monotone, so :math:`\text{fl}(x - M) \ge \text{fl}(\text{low} - M)`."""
    floor = lowest_argument(powers)
    return all(low - top >= floor for low, top in zip(lows, tops, strict=True))


def with_doubled_row(sums: torch.Tensor) -> torch.Tensor:
    r"""One head's off-pair log-sums ``(3, ..., 1)`` of :func:`exp_sums` with powers (1, 2, 4) as rows for the head
    and its cross row ``(2, ..., 2)``: the cross row of equal heads is :math:`2x`, so its sums are those of
    :math:`2x` and :math:`4x`."""
    return torch.stack([torch.cat([sums[0], sums[1]], dim=-1), torch.cat([sums[1], sums[2]], dim=-1)])


class LogSums:
    r"""Log-sums of parts, combined pairwise as they come (``logaddexp`` on a binary counter).

    At most :math:`\log_2` of the parts' count partial results are alive (no long-lived small tensors between
    the passes' large temporaries), and each part goes through at most ``depth`` combinations.
    """

    def __init__(self) -> None:
        self.levels: list[torch.Tensor | None] = []
        self.count = 0

    def add(self, part: torch.Tensor) -> None:
        self.count += 1
        for level in range(len(self.levels) + 1):
            if level == len(self.levels):
                self.levels.append(part)
                return
            if self.levels[level] is None:
                self.levels[level] = part
                return
            part, self.levels[level] = torch.logaddexp(self.levels[level], part), None

    def total(self) -> tuple[torch.Tensor, int]:
        """The combined log-sum and the depth of the combination tree."""
        present = [level for level in self.levels if level is not None]
        result = present[0]
        for level in present[1:]:
            result = torch.logaddexp(level, result)
        return result, len(self.levels) + len(present) - 1


def _gamma(n: float) -> float:
    r""":math:`\gamma_n = nu/(1 - nu)`, :math:`u = \varepsilon/2`: the relative error bound of ``n`` rounded operations."""
    unit = torch.finfo(torch.float64).eps / 2
    return n * unit / (1 - n * unit)


def log_weight_error(
    biggest: torch.Tensor, sizes: torch.Tensor, d: int, m: int, longest: int, depth: int
) -> torch.Tensor:
    r"""A rigorous bound on the absolute rounding error of each log-weight after the step, ``biggest``'s shape.

    With :math:`B` the largest score magnitude (``biggest``), :math:`u = \varepsilon/2`, :math:`\gamma_n = nu/(1-nu)`,
    :math:`G = \lceil m/8\rceil`, and any order of summation (Higham, Thm 4.4):

    * **scores** (:class:`xorlib._packed.Lookup`): a table entry sums at most 8 entries of :math:`q` and is
      scaled (:math:`\gamma_8`), doubled and negated (exact); the first table also adds the scaled total of
      the :math:`m` entries (:math:`\gamma_m`, one more rounding); a score adds one entry of each of the
      :math:`G` tables (:math:`\gamma_{G-1}` of their absolute sum, at most :math:`3A`), and for several step sizes
      :math:`s + \kappa t` adds two roundings. So each score is within :math:`E = \gamma_{m + 3G + 20}\,A` of the
      exact score of the step's queries, where :math:`A` (``sizes``) bounds :math:`\sum_r |q_r||P_{kr}|`
      (:math:`|q + \kappa\delta|`, or :math:`|q| + \kappa|\delta|`); a dense block's :math:`m`-term product is within
      :math:`\gamma_m A`. Every log-weight :math:`s_k - \operatorname{lse}(s)` then moves by at most :math:`2E`.
    * **log-sums** of the computed scores (:func:`exp_sums`): :math:`x - M` (:math:`u\cdot 2B`), the
      exponential (one ulp, :math:`2u`), an argument raised to the underflow floor (at most ``longest`` terms of
      :math:`e^{-170}`, against a sum of at least 1), the sum of at most ``longest`` positive terms
      (:math:`\gamma_n`), the logarithm and the shift back (:math:`2u\ln n + u(B + \ln d)`): at most
      :math:`u(5B + 4\ln d + 4) + \gamma_n + n e^{-170}`. Each of the ``depth`` levels of the pairwise combination
      adds :math:`u(2(B + \ln d) + 3)` (errors pass through ``logaddexp`` with weight at most one), and the
      three-term normaliser and the final difference as much again: per log-weight (the rest's and the whole
      normaliser's errors add), :math:`2[u(5B + 4\ln d + 4) + \gamma_n + n e^{-170} + (\text{depth} + 2)\,u(2(B + \ln d) + 3)]`.

    At moderate :math:`B` the sum's :math:`\gamma_n` (:math:`7\cdot10^{-12}` at :math:`n = 2^{16}`) and :math:`2E`
    dominate; both are far below what the certificate resolves (a relative change of the weights of that
    size). It replaces the allowance :math:`16\varepsilon(B + \ln d + 1)` of the earlier passes, which bounded
    the log-domain arithmetic for pairwise sums only and neither the look-ups nor sums in another order.
    """
    unit = torch.finfo(torch.float64).eps / 2
    log_d = math.log(d)
    groups = -(-m // 8)
    scores = 2 * _gamma(m + 3 * groups + 20) * sizes
    n = max(longest, 1)
    sums = unit * (5 * biggest + 4 * log_d + 4) + _gamma(n) + n * math.exp(UNDERFLOW / 4)
    combine = (depth + 2) * unit * (2 * (biggest + log_d) + 3)
    return scores + 2 * (sums + combine)
