r"""The certificate's arithmetic, trusting its callers: from log-weights to a bracket on the worst-case loss.

The public face and the mathematics are in :mod:`xorlib.certify`; ``xorlib.learners._one_step`` streams the
log-weights and calls :func:`certificate` here with the same arithmetic. :func:`tied_worst_case` is the
book's formula for tied heads, used by the certificate and by :func:`xorlib.theory.tied_worst_case`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

_EPS = torch.finfo(torch.float64).eps
#: The smallest normal float64 (2.2e-308): the certificate's upper bound never goes below it (an underflow is not exact).
_TINY = torch.finfo(torch.float64).tiny
_BITS = torch.tensor([[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0]], dtype=torch.float64)  # (x_u, x_v)


@dataclass(frozen=True)
class WorstCase:
    r"""A certified bracket on :math:`\max_{x\in\{\pm1\}^d} \ell(x)`: ``lower <= max <= upper``.

    ``lower`` is (up to an explicit rounding allowance) the loss of an input
    that is attained; no input exceeds ``upper``. ``exact`` marks where the two
    agree to nine digits. Fields are tensors of the batch shape (0-d for one model).
    """

    lower: torch.Tensor
    upper: torch.Tensor
    exact: torch.Tensor
    margin: torch.Tensor  # a lower bound on min_x y f(x): every input is classified correctly where it is > 0

    @property
    def all_signs_correct(self) -> torch.Tensor:
        """Certified: the sign of the prediction is the label on every input."""
        return self.margin > 0

    @property
    def value(self) -> torch.Tensor:
        """The certified value: the upper bound (equal to the maximum where ``exact``)."""
        return self.upper


def _finish(
    lower: torch.Tensor, upper: torch.Tensor, exact_allowed: torch.Tensor | bool, margin: torch.Tensor
) -> WorstCase:
    """The bracket, with the upper bound floored at float64's smallest normal number (:data:`_TINY`).

    A loss below it underflows (to a subnormal number with few digits, or to 0): the certificate then
    reports :data:`_TINY`, which is still an upper bound, and never flags it exact.
    """
    underflow = upper < _TINY
    upper = upper.clamp(min=_TINY)
    exact = (upper - lower <= 1e-9 * upper.abs()) & torch.as_tensor(exact_allowed) & ~underflow
    return WorstCase(lower=lower, upper=upper, exact=exact, margin=margin)


def _box_loss(
    centre: torch.Tensor,
    radius: torch.Tensor,
    base: torch.Tensor,
    mult: torch.Tensor,
    signs: torch.Tensor,
    spread: torch.Tensor,
):
    r"""Upper and attained-lower losses for the residual :math:`B - \mu Q`, :math:`Q = (1+e_1)(1+e_2) - 1`.

    Each deviation ranges over :math:`e_h \in \text{centre}_h \pm \text{radius}_h` (last axis:
    the two heads); :math:`B` (``base``) is exact and :math:`\mu` (``mult``) is
    :math:`\pm c_1`. The loss is convex in :math:`Q`, and :math:`Q` is bilinear in the
    deviations, so the corners of the box bound it; the two corners with both
    other bits all equal to :math:`\rho = \pm1` are attained: they move :math:`e_h` by
    :math:`\rho\, x_{\tau_h} \text{radius}_h`, with the target signs ``signs``. ``spread`` bounds
    how far the computed deviations may be from the exact ones (rounding of the
    log-weights); the box is widened by it for the upper bound and the attained
    values are discounted by it for the lower bound.
    """
    e1, e2 = centre[..., 0], centre[..., 1]
    r1, r2 = radius[..., 0], radius[..., 1]

    def q_of(f1: torch.Tensor, f2: torch.Tensor) -> torch.Tensor:
        return f1 + f2 + f1 * f2  # (1 + f1)(1 + f2) - 1, without forming 1 + f

    w1, w2 = r1 + spread[..., 0], r2 + spread[..., 1]
    corners = torch.stack([q_of(e1 + s1 * w1, e2 + s2 * w2) for s1 in (1, -1) for s2 in (1, -1)], -1)
    q_low, q_high = corners.amin(-1), corners.amax(-1)
    q_error = spread[..., 0] * (1 + e2.abs() + w2) + spread[..., 1] * (1 + e1.abs() + w1)
    slack = 8 * _EPS * (base.abs() + mult.abs() * torch.maximum(q_low.abs(), q_high.abs())) + 1e-300
    lower_slack = slack + mult.abs() * q_error
    upper = 0.5 * (torch.maximum((base - mult * q_low).abs(), (base - mult * q_high).abs()) + slack) ** 2
    x1, x2 = signs[..., 0], signs[..., 1]
    attained = torch.stack([q_of(e1 + s * x1 * r1, e2 + s * x2 * r2) for s in (1, -1)], -1)
    lower = (
        0.5 * ((base.unsqueeze(-1) - mult.unsqueeze(-1) * attained).abs().amax(-1) - lower_slack).clamp(min=0.0) ** 2
    )
    # The margin y f = 1 + y (f - y) is linear in Q: its minimum over the box is at an end.
    y = labels_of(base, mult)
    margin = 1 + torch.minimum(y * (base - mult * q_low), y * (base - mult * q_high)) - lower_slack - 4 * _EPS
    return upper, lower, margin


def labels_of(base: torch.Tensor, mult: torch.Tensor) -> torch.Tensor:
    """The labels of the four cases (last axis), broadcast like ``base``: rows of :data:`_BITS` in order."""
    labels = -_BITS[:, 0] * _BITS[:, 1]
    return labels.to(base.device).expand_as(base)


def tied_worst_case(rest, gap):
    r"""The exact worst-case loss of tied xor heads with rest mass :math:`E \le \tfrac12` and pair gap :math:`g`:
    :math:`\max\bigl(32E^2(1-E)^2,\ 2(g + E)^4\bigr)` (floats or tensors)."""
    agree, differ = 32 * rest**2 * (1 - rest) ** 2, 2 * (gap + rest) ** 4
    return torch.maximum(agree, differ) if isinstance(agree, torch.Tensor) else max(agree, differ)


def split_step(gaps: torch.Tensor, spreads: torch.Tensor, log_ratio: float) -> torch.Tensor:
    r"""The split model's self-certified sharpness, :math:`\max_h (R_h + \ln\tfrac{d-1}E)/\gamma_h`, over the last axis.

    ``log_ratio`` is :math:`\ln\frac{d-1}E`; any leading shape (many draws at once), unchecked, ``inf`` where a gap
    is 0. :func:`xorlib.theory.split_step_from_gaps` is the checked form for one draw.
    """
    return ((spreads + log_ratio) / gaps).amax(-1)


def log_weights(scores: torch.Tensor, pair: tuple[int, int]) -> tuple[torch.Tensor, ...]:
    r"""Softmax log-weights from scores ``(..., d)`` in float64: :math:`\log a_u`, :math:`\log a_v`, :math:`\log S` (the
    rest, :math:`S = e^{\operatorname{lse}(s_{k\notin\{u,v\}}) - \operatorname{lse}(s)}`) and the bound on the absolute
    rounding error of each. Nothing is lost when :math:`S` is far below :math:`10^{-16}`."""
    s = scores.double()
    u, v = pair
    total = torch.logsumexp(s, dim=-1)
    rest = s.clone()
    rest[..., [u, v]] = -torch.inf
    log_rest = torch.logsumexp(rest, dim=-1) if s.shape[-1] > 2 else torch.full_like(total, -torch.inf)
    log_error = 16 * _EPS * (s.abs().amax(-1) + math.log(s.shape[-1]) + 1)  # absolute error of each log-weight
    return s[..., u] - total, s[..., v] - total, log_rest - total, log_error


def certificate(
    log_au: torch.Tensor,
    log_av: torch.Tensor,
    log_rest: torch.Tensor,
    log_error: torch.Tensor,
    tied: torch.Tensor,
    model,
) -> WorstCase:
    """The certificate of a softmax ``model`` from per-head log-weights on ``u``, ``v`` and the rest, each ``(..., 2)``.

    ``log_error`` bounds the absolute rounding error of each log-weight, so each weight is known to a
    relative ``expm1(log_error)``; ``tied`` marks the entries whose two heads are equal.
    """
    c0, c1 = model.readout
    a_u, a_v, rest = log_au.exp(), log_av.exp(), log_rest.exp()
    target_u = a_u >= a_v  # each head's target bit: the hidden position it weights more
    a_other = torch.where(target_u, a_v, a_u)
    bits = _BITS.to(a_u.device)  # (4, 2): rows (x_u, x_v)
    x_t = torch.where(target_u.unsqueeze(-2), bits[:, :1], bits[:, 1:])  # (..., 4, 2) sign of each head's target
    x_o = torch.where(target_u.unsqueeze(-2), bits[:, 1:], bits[:, :1])
    labels = -bits[:, 0] * bits[:, 1]
    # z_h = x_t (1 + e_h), e_h = x_t (z_h - x_t) = -S_h + a_o (x_t x_o - 1) + x_t r_h, no cancellation.
    centre = -rest.unsqueeze(-2) + a_other.unsqueeze(-2) * (x_t * x_o - 1)
    product_of_targets = x_t[..., 0] * x_t[..., 1]  # t = z1 z2 = P0 (1 + e1)(1 + e2)
    base = c0 - labels - c1 * product_of_targets
    relative = torch.expm1(log_error)  # (..., 2)
    spread = (relative * 2 * (rest + a_other)).unsqueeze(-2).expand_as(centre)
    radius = rest.unsqueeze(-2).expand_as(centre)
    upper, lower, margin = _box_loss(centre, radius, base, c1 * product_of_targets, x_t, spread)
    upper, lower, margin = upper.amax(-1), lower.amax(-1), margin.amin(-1)
    if model.tied:  # exact one-dimensional extremes for tied xor heads with S <= 1/2
        S, gap = rest[..., 0], (a_u[..., 0] - a_v[..., 0]).abs()
        # each pair weight is known to a relative `relative`: the gap, a difference, to that times their sum
        allowance = relative[..., 0] * (a_u[..., 0] + a_v[..., 0])
        use = tied & (S <= 0.5)
        slack = 1e-12 + 8 * relative[..., 0]  # the loss is a polynomial of degree 4 in S and the gap
        upper = torch.where(use, tied_worst_case(S, gap + allowance) * (1 + slack), upper)
        lower = torch.where(use, tied_worst_case(S, (gap - allowance).clamp(min=0.0)) * (1 - slack), lower)
        # y f = 2 z^2 - 1 (bits agree, |z| >= 1 - 2S) or 1 - 2 z^2 (bits differ, |z| <= gap + S)
        widest = gap + allowance + S
        exact_margin = torch.minimum(2 * (1 - 2 * S) ** 2 - 1, 1 - 2 * widest**2) - (1e-12 + 16 * relative[..., 0])
        margin = torch.where(use, exact_margin, margin)
    return _finish(lower, upper, True, margin)


def of_weights(weights: torch.Tensor, pair: tuple[int, int], model) -> WorstCase:
    """The certificate of arbitrary head weights ``(..., 2, d)`` (see :func:`xorlib.certify.worst_case_loss`)."""
    c0, c1 = model.readout
    unit = torch.finfo(weights.dtype).eps * (weights.shape[-1] + 4)  # input rounding plus summation error
    w = weights.double()
    u, v = pair
    others = w.clone()
    others[..., [u, v]] = 0.0
    rest = others.abs().sum(-1) * (1 + unit) + unit * (w[..., u].abs() + w[..., v].abs())  # (..., 2)
    bits = _BITS.to(w.device)
    centre = bits[:, 0, None] * w[..., None, :, u] + bits[:, 1, None] * w[..., None, :, v]  # (..., 4, 2)
    labels = -bits[:, 0] * bits[:, 1]
    radius = rest.unsqueeze(-2).expand_as(centre)
    corners = torch.stack(
        [
            (centre[..., 0] + s1 * radius[..., 0]) * (centre[..., 1] + s2 * radius[..., 1])
            for s1 in (1, -1)
            for s2 in (1, -1)
        ],
        -1,
    )
    residual = (c0 - labels).unsqueeze(-1) - c1 * corners
    slack = 8 * _EPS * ((c0 - labels).abs() + c1 * corners.abs().amax(-1)) + 1e-300
    upper = (0.5 * (residual.abs().amax(-1) + slack) ** 2).amax(-1)
    margin = (1 + (labels.unsqueeze(-1) * residual).amin(-1) - slack - 4 * _EPS).amin(-1)  # y f = 1 + y (f - y)
    # Attained: the other bits all +1 or all -1 (exact for those inputs, up to the slack).
    plain = others.sum(-1).unsqueeze(-2)  # sum of the other weights, all bits +1
    attained = torch.stack(
        [(centre[..., 0] + s * plain[..., 0]) * (centre[..., 1] + s * plain[..., 1]) for s in (1, -1)], -1
    )
    lower_attained = (
        0.5 * (((c0 - labels).unsqueeze(-1) - c1 * attained).abs().amax(-1) - slack).clamp(min=0) ** 2
    ).amax(-1)
    # Tied heads: |z| in [|c| - S, |c| + S], both ends attained by aligning or opposing every other bit.
    tied = (weights[..., 0, :] == weights[..., 1, :]).all(-1)
    c_abs = centre[..., 0].abs()

    def tied_loss(spread: torch.Tensor) -> torch.Tensor:
        spread = spread[..., :1].expand_as(c_abs)
        ends = torch.stack([(c_abs + spread) ** 2, (c_abs - spread).clamp(min=0) ** 2], -1)
        return (0.5 * ((c0 - labels).unsqueeze(-1) - c1 * ends) ** 2).amax(-1).amax(-1)

    tied_ok = tied & (c_abs >= rest[..., :1]).all(-1)
    upper = torch.where(tied_ok, tied_loss(rest) * (1 + 64 * unit) + 1e-300, upper)
    lower = torch.where(tied_ok, tied_loss(others.abs().sum(-1)) * (1 - 64 * unit), lower_attained)
    exact_allowed = weights.dtype == torch.float64
    return _finish(lower, upper, exact_allowed, margin)
