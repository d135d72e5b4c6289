r"""The one-step theory in formulas: rest mass, worst case, step size and code dimension.

After one population step of sharpness :math:`\kappa` from uniform attention,
with balanced unit codes, both heads score position :math:`k` by
:math:`\kappa g_k` where :math:`g_k = \langle p_k, p_{i^*} + p_{j^*}\rangle`, so
:math:`g_{i^*} = g_{j^*} = 1 + \rho` with :math:`\rho = \langle p_{i^*}, p_{j^*}\rangle`.
Everything then follows from the **rest mass**

.. math:: E(\kappa) = \sum_{k \notin \{i^*, j^*\}} \alpha_k
        = \frac{\sum_{k\notin\{i^*,j^*\}} e^{\kappa g_k}}{2e^{\kappa(1+\rho)} + \sum_{k\notin\{i^*,j^*\}} e^{\kappa g_k}} .

These functions are the formulas the book derives; the tests check them
against :mod:`xorlib.gradient`, which computes the same quantities without them.
"""

from __future__ import annotations

import math

import torch
from tqdm.auto import tqdm

from ._validate import check_float, check_int, check_pair, check_tensor
from .cache import cached
from .codes import default_code_dim, pair_margin, positional_codes
from .data import random_pair
from .gradient import (
    empirical_gradient,
    lr_for_sharpness,
    one_step_from_uniform,
    population_loss_weights,
    worst_case_loss,
)
from .model import head_weights

__all__ = [
    "code_dim_for_margin",
    "one_step_curve",
    "one_step_table",
    "pair_scores",
    "rest_mass",
    "rest_mass_bound",
    "rest_mass_for_loss",
    "sufficient_sharpness",
    "typical_rest_mass",
    "worst_case_from_rest_mass",
]


def pair_scores(codes: torch.Tensor, pair: tuple[int, int]) -> torch.Tensor:
    r"""The per-position scores :math:`g_k = \langle p_k, p_{i^*} + p_{j^*}\rangle` (shape ``(d,)``), in :math:`O(dm)`."""
    codes = check_tensor("codes", codes, ndim=2)
    i, j = check_pair("pair", pair, codes.shape[0])
    return codes @ (codes[i] + codes[j])


def rest_mass(codes: torch.Tensor, pair: tuple[int, int], kappa: float) -> float:
    r"""The exact rest mass :math:`E(\kappa)` after a step of sharpness ``kappa`` (balanced codes)."""
    kappa = check_float("kappa", kappa, minimum=0.0)
    g = pair_scores(codes, pair).double()
    i, j = pair
    logits = kappa * g
    others = torch.ones_like(g, dtype=torch.bool)
    others[[i, j]] = False
    log_rest = torch.logsumexp(logits[others], 0)
    log_total = torch.logsumexp(logits, 0)
    return float(torch.exp(log_rest - log_total))


def rest_mass_bound(d: int, margin: float, kappa: float) -> float:
    r"""The margin bound :math:`E(\kappa) \le \tfrac{d-2}{2} e^{-\kappa\gamma}`.

    Each of the :math:`d-2` other positions scores at most
    :math:`\kappa(1 + \rho - \gamma)`, and the pair contributes
    :math:`2e^{\kappa(1+\rho)}` to the normaliser.
    """
    d = check_int("d", d, minimum=3)
    margin = check_float("margin", margin)
    kappa = check_float("kappa", kappa, minimum=0.0)
    return min(1.0, (d - 2) / 2 * math.exp(-kappa * margin))


def typical_rest_mass(d: int, m: int, kappa: float, rho: float = 0.0) -> float:
    r"""The Gaussian estimate :math:`E \approx R/(R + 2e^{\kappa(1+\rho)})` with :math:`R = (d-2)e^{\kappa^2/m}`.

    For random sign codes :math:`g_k` is a sum of :math:`2m` terms of size
    :math:`1/m`: approximately :math:`\mathcal N(0, 2/m)`, and
    :math:`\mathbb E e^{\kappa g} \approx e^{\kappa^2/m}`. Valid while the sum is
    not dominated by its largest term (:math:`\kappa \lesssim \sqrt{m\ln d}`).
    """
    d = check_int("d", d, minimum=3)
    m = check_int("m", m, minimum=1)
    kappa = check_float("kappa", kappa, minimum=0.0)
    log_ratio = math.log((d - 2) / 2) + kappa**2 / m - kappa * (1 + rho)
    return 1.0 / (1.0 + math.exp(-log_ratio)) if log_ratio > -700 else math.exp(log_ratio)


def worst_case_from_rest_mass(rest: float) -> float:
    r"""The exact worst-case loss of tied, balanced heads with rest mass :math:`E < \tfrac12`.

    With :math:`\alpha_{i^*} = \alpha_{j^*} = (1-E)/2`: if the two bits agree
    (:math:`y = -1`) the other bits can pull :math:`|z|` down to :math:`1 - 2E`, so
    :math:`\ell = \tfrac12(2 - 2(1-2E)^2)^2 = 32E^2(1-E)^2`; if they differ
    (:math:`y = +1`) they can push :math:`|z|` up to :math:`E`, so
    :math:`\ell = 2E^4`. The first is larger for :math:`E < \tfrac12`.
    """
    rest = check_float("rest", rest, minimum=0.0, maximum=0.5)
    return max(32 * rest**2 * (1 - rest) ** 2, 2 * rest**4)


def rest_mass_for_loss(epsilon: float) -> float:
    r"""The largest rest mass with worst-case loss :math:`\le\varepsilon`: :math:`E_\varepsilon = \tfrac12\bigl(1 - \sqrt{1 - \sqrt{\varepsilon/2}}\bigr)`.

    Inverts :math:`32E^2(1-E)^2 = \varepsilon`, i.e. :math:`4E(1-E) = \sqrt{\varepsilon/2}`;
    :math:`E_\varepsilon \approx \sqrt{\varepsilon/32}` for small :math:`\varepsilon`.
    """
    epsilon = check_float("epsilon", epsilon, minimum=0.0, maximum=2.0, strict_minimum=True)
    return 0.5 * (1 - math.sqrt(1 - math.sqrt(epsilon / 2)))


def sufficient_sharpness(d: int, margin: float, epsilon: float) -> float:
    r"""A sharpness that certifies worst-case loss :math:`\le\varepsilon`: :math:`\kappa_\varepsilon = \gamma^{-1}\ln\frac{d-2}{2E_\varepsilon}`.

    From :func:`rest_mass_bound`, :math:`E(\kappa_\varepsilon) \le E_\varepsilon`. The
    step size is then :math:`\eta = \kappa_\varepsilon d^2/2` (softmax, xor readout).
    """
    d = check_int("d", d, minimum=3)
    margin = check_float("margin", margin, minimum=0.0, strict_minimum=True)
    return max(0.0, math.log((d - 2) / (2 * rest_mass_for_loss(epsilon))) / margin)


def code_dim_for_margin(d: int, delta: float = 0.01, target: float = 0.5) -> int:
    r"""A code dimension at which random sign codes give margin :math:`\ge` ``target`` with probability :math:`\ge 1-\delta`.

    Hoeffding's inequality (which also holds for the balanced codes, sampled
    without replacement) gives :math:`P(g_k > t) \le e^{-mt^2/4}` for each
    :math:`k \notin \{i^*, j^*\}` and :math:`P(\rho < -t) \le e^{-mt^2/2}`. Asking
    :math:`\max_k g_k \le t_1`, :math:`\rho \ge -t_2` with
    :math:`1 - t_2 - t_1 \ge` target and a union bound over :math:`d - 1` events gives
    :math:`m \ge 4\ln(2(d-2)/\delta)/t_1^2` and :math:`m \ge 2\ln(2/\delta)/t_2^2`;
    we split :math:`1 - \text{target}` as :math:`t_1 = \tfrac23(1-\text{target})`,
    :math:`t_2 = \tfrac13(1-\text{target})`. The result is :math:`O(\log d)`.
    """
    d = check_int("d", d, minimum=3)
    delta = check_float("delta", delta, minimum=0.0, maximum=1.0, strict_minimum=True)
    target = check_float("target", target, minimum=0.0, maximum=1.0)
    if target >= 1.0:
        raise ValueError(f"target must be < 1, got {target}")
    t1, t2 = 2 * (1 - target) / 3, (1 - target) / 3
    return math.ceil(max(4 * math.log(2 * (d - 2) / delta) / t1**2, 2 * math.log(2 / delta) / t2**2))


def one_step_curve(
    codes: torch.Tensor,
    pair: tuple[int, int],
    kappas: list[float] | tuple[float, ...],
    *,
    samples: tuple[torch.Tensor, torch.Tensor] | None = None,
    readout_kind: str = "xor",
) -> dict[str, list[float]]:
    r"""Exact mean and worst-case loss, and rest mass, after one step, for each sharpness in ``kappas``.

    The step starts from :math:`q_1 = q_2 = 0` and has size
    :math:`\eta = \kappa d^2/2`. It uses the population gradient, or, with
    ``samples=(x, y)``, the empirical gradient on those samples (computed once;
    the step for every :math:`\kappa` is a multiple of it). Both keep the heads
    tied, so the worst case is exact wherever the pair holds half the mass.

    Uses :mod:`xorlib.gradient` (the generic closed form), not the formulas of
    this module, so the two can be checked against each other. Cost
    :math:`O(dm)` per sharpness (plus :math:`O(nd)` once for samples).
    ``"imbalance"`` is :math:`|\alpha_{i^*} - \alpha_{j^*}| / (\alpha_{i^*} + \alpha_{j^*})`.
    """
    codes = check_tensor("codes", codes, ndim=2)
    d = codes.shape[0]
    pair = check_pair("pair", pair, d)
    zero = torch.zeros(2, codes.shape[1], dtype=codes.dtype, device=codes.device)
    if samples is None:
        direction = one_step_from_uniform(codes, pair, 1.0, readout_kind=readout_kind)
    else:
        x, y = samples
        direction = -empirical_gradient(zero, codes, x.to(codes.dtype), y.to(codes.dtype), readout_kind=readout_kind)
    curve: dict[str, list[float]] = {"kappa": [], "mean": [], "worst": [], "rest": [], "exact": [], "imbalance": []}
    for kappa in kappas:
        kappa = check_float("kappa", kappa, minimum=0.0, strict_minimum=True)
        weights = head_weights(lr_for_sharpness(kappa, d, readout_kind=readout_kind) * direction, codes).double()
        bracket = worst_case_loss(weights, pair, readout_kind)
        others = weights[0].clone()
        others[list(pair)] = 0.0
        on_pair = weights[0, list(pair)]
        curve["kappa"].append(kappa)
        curve["mean"].append(float(population_loss_weights(weights, pair, readout_kind)))
        curve["worst"].append(float(bracket.value))
        curve["rest"].append(float(others.sum()))
        curve["exact"].append(float(bool(bracket.exact)))
        curve["imbalance"].append(float((on_pair[0] - on_pair[1]).abs() / on_pair.sum()))
    return curve


@cached
def one_step_table(
    ds: tuple[int, ...],
    *,
    epsilon: float = 1e-6,
    kappas: tuple[float, ...] = (5.0, 10.0, 20.0, 40.0, 80.0, 160.0),
    seed: int = 0,
    float32_from: int = 200_000,
    device: str = "cpu",
) -> dict[str, list]:
    r"""For each ``d``: the code dimension, margin, certified sharpness :math:`\kappa_\varepsilon`, step size, and losses.

    Codes and pair are drawn with ``seed``; the default code dimension
    :func:`xorlib.codes.default_code_dim` is used. Returns one row per ``d``
    (keys ``d, m, params, margin, kappa_eps, lr, worst_at_kappa_eps, exact``)
    and, under ``"curves"``, the :func:`one_step_curve` over ``kappas`` for each ``d``.
    Codes are float32 from ``d >= float32_from`` to keep memory at :math:`4dm` bytes.
    Cached on disk: the largest ``d`` takes seconds.
    """
    rows: dict[str, list] = {
        key: [] for key in ("d", "m", "params", "margin", "kappa_eps", "lr", "worst_at_kappa_eps", "exact")
    }
    rows["curves"] = []
    for d in tqdm(ds, desc="one step across d", disable=None):
        d = check_int("d", d, minimum=3)
        m = default_code_dim(d)
        dtype = torch.float32 if d >= float32_from else torch.float64
        codes = positional_codes(d, m, seed=seed, dtype=dtype, device=device)
        pair = random_pair(d, seed=seed)
        margin = pair_margin(codes, pair)
        kappa_eps = sufficient_sharpness(d, margin, epsilon) if margin > 0 else float("nan")
        certified = one_step_curve(codes, pair, [kappa_eps]) if margin > 0 else None
        for key, value in (("d", d), ("m", m), ("params", 2 * m), ("margin", margin), ("kappa_eps", kappa_eps)):
            rows[key].append(value)
        rows["lr"].append(lr_for_sharpness(kappa_eps, d) if margin > 0 else float("nan"))
        rows["worst_at_kappa_eps"].append(certified["worst"][0] if certified else float("nan"))
        rows["exact"].append(bool(certified["exact"][0]) if certified else False)
        rows["curves"].append(one_step_curve(codes, pair, list(kappas)))
        del codes
    return rows
