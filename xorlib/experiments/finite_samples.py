r"""Experiment 3: one gradient step from :math:`n` samples instead of the population.

**The step.** Start from :math:`q_1 = q_2 = 0` (uniform attention, so
:math:`z_1 = z_2 = z = \tfrac1d\sum_i x_i`) and take one step on the mean loss of
:math:`n` samples. By the closed form of :func:`xorlib.gradient.empirical_gradient`,
the gradient with respect to either head's weights is :math:`-c_1\hat c`, where

.. math:: \hat c = \frac1n\sum_{s=1}^n w_s\, x_s, \qquad w_s = r_s z_s = (c_0 - c_1 z_s^2 - y_s)\, z_s ,

is the *coefficient vector*: one number per position, linear in the per-sample
terms, so it can be accumulated chunk by chunk with bounded memory. Both heads
get the same gradient (the heads stay tied), and through the softmax at
uniform attention and the codes, a step of sharpness :math:`\kappa`
(:func:`xorlib.gradient.lr_for_sharpness`) sets the scores to
:math:`\kappa\hat s` with

.. math:: \hat s = d\, P P^\top \Pi\, \hat c, \qquad \Pi = I - \tfrac1d \mathbf 1\mathbf 1^\top .

In the population :math:`\mathbb E\hat c_k = \text{const} + \tfrac1d\mathbb 1[k\in\{i^*,j^*\}]`,
so :math:`\mathbb E\hat s_k = \langle p_k, p_{i^*} + p_{j^*}\rangle`: the population step.

**The trap.** With samples, :math:`\hat s_{i^*} - \hat s_{j^*} = \Delta \neq 0`, so
:math:`\alpha_{i^*}/\alpha_{j^*} = e^{\kappa\Delta}`. Suppressing the other
positions needs a large :math:`\kappa` (:math:`\kappa\gamma \gtrsim \ln(d/\sqrt\varepsilon)`),
keeping the pair balanced needs a small one (:math:`\kappa|\Delta| \le 2\operatorname{artanh}((\varepsilon/2)^{1/4})`).
Too large a step puts both heads on one relevant position: :math:`f = 1 - 2x^2 = -1`,
a constant, and worst-case loss 2.

**The noise.** :math:`\Delta = a^\top\hat c` for a fixed vector :math:`a`, and the
covariance of the per-sample vector :math:`w_s x_s` is known exactly
(:func:`coefficient_moments`), so :math:`\operatorname{Var}\Delta = a^\top\Sigma a/n`
exactly (:func:`balance_noise_variance`); to leading order it is :math:`4d^2/(mn)`.
The window closes unless :math:`n \gtrsim d^2\operatorname{polylog}(d)`.

The experiment (:func:`finite_sample_experiment`) measures the success
probability over a grid of :math:`n` and :math:`d` with real samples,
trials batched as a leading tensor dimension, and compares the fitted
threshold with the window estimate (:func:`window_success_probability`), the
statistical-query frontier of Edelman et al. and the information floor.
"""

from __future__ import annotations

import argparse
import itertools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from tqdm.auto import tqdm

from .._runtime import single_threaded
from .._validate import check_device, check_float, check_int, check_pair, check_seed, check_tensor
from ..attention import scores_vjp
from ..cache import cached
from ..codes import positional_codes
from ..data import make_generator, random_signs
from ..gradient import worst_case_loss
from ..model import readout_constants
from ..theory import rest_mass_for_loss

__all__ = [
    "BOOK_DS",
    "DEFAULT_EPSILON",
    "DEFAULT_KAPPAS",
    "FIXED_KAPPA",
    "FULL_DS",
    "CoefficientMoments",
    "balance_direction",
    "balance_noise_variance",
    "balance_tolerance",
    "bootstrap_exponent",
    "coefficient_moments",
    "coefficients_from_samples",
    "finite_sample_experiment",
    "finite_sample_run",
    "fit_power_law",
    "fit_threshold",
    "html_table",
    "information_floor",
    "kappa_profile",
    "learnable_pairs",
    "main",
    "n_grid_for",
    "query_gradient_from_coefficients",
    "self_calibrated_kappa",
    "sq_frontier",
    "streamed_coefficients",
    "success_table",
    "success_table_html",
    "suppression_edge",
    "trial_successes",
    "unit_scores",
    "window_edges",
    "window_success_probability",
    "window_threshold",
    "worst_case_from_balance",
    "worst_case_over_kappas",
]

#: A step succeeds when its worst-case loss :math:`\max_x \ell(x)` is below this target :math:`\varepsilon`.
DEFAULT_EPSILON = 1e-2
#: The sharpness grid the step size is chosen from (geometric, 2 to 400).
DEFAULT_KAPPAS = tuple(float(k) for k in np.geomspace(2.0, 400.0, 31))
#: The population-tuned sharpness of chapter 1, used as the "fixed step" rule.
FIXED_KAPPA = 30.0
BOOK_DS = (8, 16, 32, 64)
FULL_DS = (8, 12, 16, 24, 32, 48, 64, 96, 128)

# --------------------------------------------------------------------------- data and the step


def _pair_index(pairs: Sequence[tuple[int, int]], d: int, device: torch.device) -> torch.Tensor:
    checked = [check_pair(f"pairs[{t}]", p, d) for t, p in enumerate(pairs)]
    return torch.tensor(checked, device=device, dtype=torch.long).reshape(-1, 2)


def n_grid_for(d: int, *, low: float = 0.5, high: float = 512.0, per_octave: int = 2) -> tuple[int, ...]:
    r"""Sample sizes :math:`n = \lfloor 2^{k/\text{per\_octave}}\rceil` between ``low * d**2`` and ``high * d**2``."""
    d = check_int("d", d, minimum=2)
    low = check_float("low", low, minimum=0.0, strict_minimum=True)
    high = check_float("high", high, minimum=low, strict_minimum=True)
    per_octave = check_int("per_octave", per_octave, minimum=1, maximum=16)
    k_lo = math.ceil(per_octave * math.log2(max(low * d * d, 1.0)))
    k_hi = math.floor(per_octave * math.log2(high * d * d))
    return tuple(sorted({round(2 ** (k / per_octave)) for k in range(k_lo, k_hi + 1)}))


def _weighted_sum(x: torch.Tensor, index: torch.Tensor, c0: float, c1: float) -> torch.Tensor:
    """Sum over the rows of x (trials, rows, d) of w_s x_s, w_s = (c0 - c1 z^2 - y) z, each trial with its own pair."""
    arange = torch.arange(x.shape[0], device=x.device)
    z = x.sum(-1) / x.shape[-1]
    y = -x[arange, :, index[:, 0]] * x[arange, :, index[:, 1]]
    weight = (c0 - c1 * z * z - y) * z
    return torch.bmm(weight.unsqueeze(1), x).squeeze(1)


def coefficients_from_samples(x: torch.Tensor, pair: tuple[int, int], readout_kind: str = "xor") -> torch.Tensor:
    r"""The coefficient vector :math:`\hat c = \frac1n\sum_s (c_0 - c_1 z_s^2 - y_s) z_s x_s` of explicit samples ``x`` ``(n, d)``.

    Labels are :math:`y = -x_{i^*}x_{j^*}`; the result has shape ``(d,)``, float64.
    The reference for :func:`streamed_coefficients`, which does the same in chunks.
    """
    x = check_tensor("x", x, ndim=2)
    index = _pair_index([pair], x.shape[1], x.device)
    c0, c1 = readout_constants(readout_kind)
    return _weighted_sum(x.double().unsqueeze(0), index, c0, c1)[0] / x.shape[0]


def streamed_coefficients(
    d: int,
    pairs: Sequence[tuple[int, int]],
    n_grid: Sequence[int],
    *,
    seed: int = 0,
    readout_kind: str = "xor",
    block: int = 1 << 19,
    device: str | torch.device = "cpu",
    progress: bool = False,
) -> torch.Tensor:
    r"""The coefficient vectors :math:`\hat c = \frac1n\sum_s r_s z_s x_s` at uniform attention, for every ``n`` in ``n_grid``.

    One trial per entry of ``pairs`` (its hidden pair), all trials drawn
    together as a leading dimension. The samples of a trial are one stream:
    its first ``n_grid[0]`` samples, then the next ones up to ``n_grid[1]``,
    and so on, so every sample size costs only the samples it adds. Data come
    in chunks of about ``block`` entries (:func:`random_signs`), so memory stays
    bounded whatever :math:`n`; each chunk's sum is exact in float32 up to
    rounding and the running sums are float64.

    Returns
    -------
    torch.Tensor
        Shape ``(len(pairs), len(n_grid), d)``, float64.
    """
    d = check_int("d", d, minimum=4)
    device = check_device("device", device)
    index = _pair_index(pairs, d, device)
    if len(n_grid) == 0:
        raise ValueError("n_grid must hold at least one sample size")
    grid = [check_int(f"n_grid[{k}]", n, minimum=1) for k, n in enumerate(n_grid)]
    if any(b <= a for a, b in itertools.pairwise(grid)):
        raise ValueError(f"n_grid must be strictly increasing, got {tuple(grid)}")
    block = check_int("block", block, minimum=1024)
    c0, c1 = readout_constants(readout_kind)
    trials = index.shape[0]
    rows_per_chunk = max(16, block // (trials * d))
    generator = make_generator(check_seed("seed", seed), device)
    total = torch.zeros(trials, d, dtype=torch.float64, device=device)
    out = torch.empty(trials, len(grid), d, dtype=torch.float64, device=device)
    done = 0
    with (
        single_threaded(),
        tqdm(total=grid[-1], desc=f"samples (d={d})", unit="sample", disable=not progress, leave=False) as bar,
    ):
        for k, n in enumerate(grid):
            while done < n:
                rows = min(rows_per_chunk, n - done)
                x = random_signs(generator, (trials, rows, d), device=device)
                total += _weighted_sum(x, index, c0, c1).double()
                done += rows
                bar.update(rows)
            out[:, k] = total / n
    return out


def query_gradient_from_coefficients(
    coefficients: torch.Tensor, codes: torch.Tensor, readout_kind: str = "xor"
) -> torch.Tensor:
    r"""The gradient :math:`\nabla_q\hat L` at :math:`q = 0` (softmax), shape ``(..., 2, m)``, from coefficient vectors.

    The weight gradient of each head is :math:`-c_1\hat c`; the softmax VJP at
    uniform attention and the codes give
    :math:`\nabla_{q_h}\hat L = P^\top\,\tfrac1d\Pi(-c_1\hat c)`. Equal to
    :func:`xorlib.gradient.empirical_gradient` on the same samples (tested).
    """
    coefficients = check_tensor("coefficients", coefficients, ndim=(1, 2, 3))
    codes = check_tensor("codes", codes, ndim=2)
    d = codes.shape[0]
    if coefficients.shape[-1] != d:
        raise ValueError(f"coefficients must have last dimension d = {d}, got shape {tuple(coefficients.shape)}")
    _, c1 = readout_constants(readout_kind)
    grad_weights = (-c1 * coefficients).unsqueeze(-2).expand(*coefficients.shape[:-1], 2, d).to(codes.dtype)
    uniform = torch.full_like(grad_weights, 1.0 / d)
    return scores_vjp(torch.zeros_like(grad_weights), uniform, grad_weights, "softmax") @ codes


def unit_scores(coefficients: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
    r"""The scores per unit sharpness after the step, :math:`\hat s = d\,PP^\top\Pi\hat c`, shape ``(..., d)``.

    A step of sharpness :math:`\kappa` (step size :math:`\eta = \kappa d^2/c_1`)
    gives both heads the scores :math:`\kappa\hat s`. Cost :math:`O(dm)`.
    """
    coefficients = check_tensor("coefficients", coefficients, ndim=(1, 2, 3))
    codes = check_tensor("codes", codes, ndim=2)
    d = codes.shape[0]
    if coefficients.shape[-1] != d:
        raise ValueError(f"coefficients must have last dimension d = {d}, got shape {tuple(coefficients.shape)}")
    centred = (coefficients - coefficients.mean(-1, keepdim=True)).to(codes.dtype)
    return d * (centred @ codes) @ codes.T


def _pair_first(scores: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Reorder the last axis of ``scores`` (trials, ..., d) so that each trial's pair sits at positions 0 and 1."""
    trials, d = scores.shape[0], scores.shape[-1]
    positions = torch.arange(d, device=scores.device).expand(trials, d)
    is_pair = (positions == index[:, :1]) | (positions == index[:, 1:])
    others = positions[~is_pair].view(trials, d - 2)
    order = torch.cat([index, others], dim=1)
    shape = (trials,) + (1,) * (scores.ndim - 2) + (d,)
    return scores.gather(-1, order.view(shape).expand_as(scores))


def worst_case_over_kappas(
    scores: torch.Tensor, pairs: Sequence[tuple[int, int]], kappas: Sequence[float], readout_kind: str = "xor"
) -> torch.Tensor:
    r"""Exact worst-case loss after a step of each sharpness, from unit scores of shape ``(trials, ..., d)``.

    Both heads carry the weights :math:`\operatorname{softmax}(\kappa\hat s)`
    (tied), so :func:`xorlib.gradient.worst_case_loss` is exact wherever it
    matters (see its docstring); where it is only a bound, the bound is used,
    which can only understate success. Returns shape ``(trials, ..., len(kappas))``.
    """
    scores = check_tensor("scores", scores, ndim=(2, 3))
    index = _pair_index(pairs, scores.shape[-1], scores.device)
    if index.shape[0] != scores.shape[0]:
        raise ValueError(f"pairs must name one pair per trial ({scores.shape[0]}), got {index.shape[0]}")
    kappa = torch.tensor([check_float("kappa", k, minimum=0.0) for k in kappas], dtype=torch.float64)
    kappa = kappa.to(scores.device)
    ordered = _pair_first(scores.double(), index)
    weights = torch.softmax(ordered.unsqueeze(-2) * kappa.unsqueeze(-1), dim=-1)  # (trials, ..., K, d)
    d = weights.shape[-1]
    tied = weights.unsqueeze(-2).expand(*weights.shape[:-1], 2, d).reshape(-1, 2, d)
    return worst_case_loss(tied, (0, 1), readout_kind).value.view(weights.shape[:-1])


def _recovered(scores: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Strictly: both pair positions score above every other position (trials, ...)."""
    ordered = _pair_first(scores, index)
    return ordered[..., :2].amin(-1) > ordered[..., 2:].amax(-1)


def self_calibrated_kappa(scores: torch.Tensor, kappas: Sequence[float], rest_target: float) -> torch.Tensor:
    r"""The smallest sharpness in ``kappas`` whose step leaves at most ``rest_target`` of the attention off the top two positions.

    A rule that never looks at the hidden pair: the learner sees only its own
    scores :math:`\hat s` after the step. Since a larger step only hurts the
    balance, the smallest step that suppresses the rest is the natural choice.
    Returns the index into ``kappas`` (the last one if none suffices), shape ``scores.shape[:-1]``.
    """
    scores = check_tensor("scores", scores, ndim=(1, 2, 3))
    rest_target = check_float("rest_target", rest_target, minimum=0.0, maximum=1.0, strict_minimum=True)
    kappa = torch.tensor([check_float("kappa", k, minimum=0.0) for k in kappas], dtype=torch.float64)
    if bool((kappa[1:] <= kappa[:-1]).any()):
        raise ValueError("kappas must be strictly increasing")
    weights = torch.softmax(scores.double().unsqueeze(-2) * kappa.to(scores.device).unsqueeze(-1), dim=-1)
    top_two = weights.topk(2, dim=-1).values.sum(-1)
    enough = (1.0 - top_two) <= rest_target
    first = torch.where(enough.any(-1), enough.double().argmax(-1), torch.full_like(enough[..., 0], len(kappa) - 1))
    return first.long()


# --------------------------------------------------------------------------- exact noise at uniform attention


@dataclass(frozen=True)
class CoefficientMoments:
    r"""Exact first and second moments of the per-sample vector :math:`V = w\,x` at uniform attention.

    By symmetry only the class of a position matters: in the pair (``p``) or
    not (``o``). ``mean_p = E[w x_{i*}]``, ``mean_o = E[w x_k]``;
    ``second = E[w^2]`` (every diagonal entry), ``second_pp = E[w^2 x_{i*}x_{j*}]``,
    ``second_po = E[w^2 x_{i*} x_k]``, ``second_oo = E[w^2 x_k x_l]`` (``k != l``
    outside the pair). Then :math:`\operatorname{Cov}\hat c = \Sigma/n` with
    :math:`\Sigma = \mathbb E[VV^\top] - \mathbb E V\,\mathbb E V^\top`.
    """

    d: int
    mean_p: float
    mean_o: float
    second: float
    second_pp: float
    second_po: float
    second_oo: float

    def covariance(self, pair: tuple[int, int], *, device: str | torch.device = "cpu") -> torch.Tensor:
        r"""The :math:`d \times d` covariance :math:`\Sigma` of :math:`V` (for moderate ``d``)."""
        u, v = check_pair("pair", pair, self.d)
        mean = torch.full((self.d,), self.mean_o, dtype=torch.float64, device=check_device("device", device))
        mean[[u, v]] = self.mean_p
        second = torch.full((self.d, self.d), self.second_oo, dtype=torch.float64, device=mean.device)
        second[[u, v], :] = self.second_po
        second[:, [u, v]] = self.second_po
        second[u, v] = second[v, u] = self.second_pp
        second.fill_diagonal_(self.second)
        return second - torch.outer(mean, mean)

    def quadratic_form(self, a: torch.Tensor, pair: tuple[int, int]) -> torch.Tensor:
        r""":math:`a^\top\Sigma a` for ``a`` of shape ``(..., d)``, in :math:`O(d)` without forming :math:`\Sigma`."""
        a = check_tensor("a", a, ndim=(1, 2), last_dim=self.d).double()
        u, v = check_pair("pair", pair, self.d)
        a_u, a_v = a[..., u], a[..., v]
        rest = a.clone()
        rest[..., [u, v]] = 0.0
        sum_o, sq_o = rest.sum(-1), (rest * rest).sum(-1)
        # Second moments E[(a.V)^2], then subtract (a.EV)^2.
        second = (
            self.second * (a * a).sum(-1)
            + 2 * self.second_pp * a_u * a_v
            + 2 * self.second_po * (a_u + a_v) * sum_o
            + self.second_oo * (sum_o**2 - sq_o)
        )
        mean = self.mean_p * (a_u + a_v) + self.mean_o * sum_o
        return second - mean**2


def coefficient_moments(d: int, readout_kind: str = "xor") -> CoefficientMoments:
    r"""Exact moments of :math:`V = w x`, :math:`w = (c_0 - c_1z^2 - y)z`, at uniform attention, in :math:`O(d)`.

    Everything depends on the two relevant bits :math:`a = x_{i^*}`,
    :math:`b = x_{j^*}` and the sum :math:`T` of the other :math:`d-2` bits,
    :math:`\tfrac{T + d - 2}{2} \sim \operatorname{Bin}(d - 2, \tfrac12)`, with
    :math:`z = (a + b + T)/d` and :math:`y = -ab`. Exchangeability of the other
    bits gives :math:`\mathbb E[x_k \mid T] = T/(d-2)` and
    :math:`\mathbb E[x_k x_l\mid T] = (T^2 - (d-2))/((d-2)(d-3))` for
    :math:`k \ne l`, so every moment is a sum over :math:`4(d-1)` atoms.
    """
    d = check_int("d", d, minimum=4)
    c0, c1 = readout_constants(readout_kind)
    n_other = d - 2
    ones = torch.arange(n_other + 1, dtype=torch.float64)
    log_pmf = (
        math.lgamma(n_other + 1) - torch.lgamma(ones + 1) - torch.lgamma(n_other - ones + 1) - n_other * math.log(2.0)
    )
    t = (2 * ones - n_other).view(1, 1, -1)
    weight = (torch.exp(log_pmf) / 4).view(1, 1, -1)  # each of the four (a, b) has probability 1/4
    a = torch.tensor([1.0, -1.0], dtype=torch.float64).view(2, 1, 1)
    b = a.view(1, 2, 1)
    z = (a + b + t) / d
    y = -a * b
    w = (c0 - c1 * z * z - y) * z

    def expect(values: torch.Tensor) -> float:
        return float((weight * values).sum())

    w2 = w * w
    return CoefficientMoments(
        d=d,
        mean_p=expect(w * a),
        mean_o=expect(w * t) / n_other,
        second=expect(w2),
        second_pp=expect(w2 * a * b),
        second_po=expect(w2 * a * t) / n_other,
        second_oo=expect(w2 * (t * t - n_other)) / (n_other * (n_other - 1)),
    )


def balance_direction(codes: torch.Tensor, pair: tuple[int, int]) -> torch.Tensor:
    r"""The vector :math:`a` with :math:`\Delta = \hat s_{i^*} - \hat s_{j^*} = a^\top\hat c`: :math:`a = d\,\Pi P(p_{i^*} - p_{j^*})`."""
    codes = check_tensor("codes", codes, ndim=2)
    u, v = check_pair("pair", pair, codes.shape[0])
    a = codes.shape[0] * (codes @ (codes[u] - codes[v])).double()
    return a - a.mean()


def balance_noise_variance(codes: torch.Tensor, pair: tuple[int, int], readout_kind: str = "xor") -> float:
    r"""Exactly :math:`n\operatorname{Var}\Delta = a^\top\Sigma a` for the balance noise :math:`\Delta = \hat s_{i^*} - \hat s_{j^*}`.

    To leading order :math:`\Sigma \approx \mathbb E[w^2] I \approx \tfrac2d I` and
    :math:`\|a\|^2 \approx d^2\cdot\tfrac dm\cdot 2`, so :math:`n\operatorname{Var}\Delta \approx 4d^2/m`.
    """
    codes = check_tensor("codes", codes, ndim=2)
    moments = coefficient_moments(codes.shape[0], readout_kind)
    return float(moments.quadratic_form(balance_direction(codes, pair), pair))


def worst_case_from_balance(rest: float, imbalance: float) -> float:
    r"""Exact worst-case loss of tied heads with rest mass :math:`E \le \tfrac12` and imbalance :math:`\delta = \alpha_{i^*} - \alpha_{j^*}`.

    :math:`\max(32E^2(1-E)^2,\ 2(|\delta| + E)^4)`: inputs with agreeing relevant
    bits see :math:`|z| \ge 1 - 2E` whatever :math:`\delta`; inputs with differing
    bits see :math:`|z| \le |\delta| + E`, with loss :math:`2z^4`. For
    :math:`\delta = 0` this is :func:`xorlib.theory.worst_case_from_rest_mass`.
    """
    rest = check_float("rest", rest, minimum=0.0, maximum=0.5)
    imbalance = check_float("imbalance", imbalance, minimum=-1.0, maximum=1.0)
    return max(32 * rest**2 * (1 - rest) ** 2, 2 * (abs(imbalance) + rest) ** 4)


def balance_tolerance(epsilon: float) -> float:
    r"""The largest :math:`\kappa|\Delta|` a perfectly suppressed step tolerates: :math:`2\operatorname{artanh}((\varepsilon/2)^{1/4})`.

    With the rest mass at 0, inputs whose relevant bits differ (:math:`y = +1`)
    give :math:`z = \pm(\alpha_{i^*} - \alpha_{j^*}) = \pm\tanh(\kappa\Delta/2)` and
    loss :math:`2z^4`; asking :math:`2z^4 \le \varepsilon` gives the bound. The
    balance condition is *quartic*, far more forgiving than the suppression
    condition :math:`32E^2 \le \varepsilon`.
    """
    epsilon = check_float("epsilon", epsilon, minimum=0.0, maximum=2.0, strict_minimum=True)
    return 2.0 * math.atanh((epsilon / 2) ** 0.25)


def _rest_mass_edge(ordered: torch.Tensor, target: float, kappa_max: float) -> torch.Tensor:
    """Smallest kappa with rest mass (mass off positions 0, 1) <= target, by bisection; inf if kappa_max fails."""

    def rest(kappa: torch.Tensor) -> torch.Tensor:
        logits = ordered * kappa.unsqueeze(-1)
        return torch.exp(torch.logsumexp(logits[..., 2:], -1) - torch.logsumexp(logits, -1))

    low = torch.zeros(ordered.shape[:-1], dtype=torch.float64, device=ordered.device)
    high = torch.full_like(low, kappa_max)
    feasible = rest(high) <= target
    for _ in range(60):
        mid = (low + high) / 2
        ok = rest(mid) <= target
        high = torch.where(ok, mid, high)
        low = torch.where(ok, low, mid)
    return torch.where(feasible, high, torch.full_like(high, math.inf))


def suppression_edge(
    codes: torch.Tensor, pairs: Sequence[tuple[int, int]], epsilon: float, *, kappa_max: float = 1e4
) -> torch.Tensor:
    r"""For each pair, the smallest :math:`\kappa` whose *population* step has rest mass :math:`\le E_\varepsilon`.

    :math:`E_\varepsilon` is :func:`xorlib.theory.rest_mass_for_loss`. The rest mass
    of the population step decreases in :math:`\kappa` (for a positive margin),
    so a vectorised bisection finds the edge; ``inf`` where even
    ``kappa_max`` does not suppress (margin :math:`\le 0`).
    """
    codes = check_tensor("codes", codes, ndim=2)
    index = _pair_index(pairs, codes.shape[0], codes.device)
    scores = (codes @ (codes[index[:, 0]] + codes[index[:, 1]]).T).T.double()  # (pairs, d)
    return _rest_mass_edge(_pair_first(scores, index), rest_mass_for_loss(epsilon), kappa_max)


def window_edges(scores: torch.Tensor, pair: tuple[int, int], epsilon: float = DEFAULT_EPSILON) -> dict[str, float]:
    r"""The window of sharpness for one step with unit scores ``scores`` ``(d,)``: suppression edge and balance edge.

    ``kappa_lo``: the smallest :math:`\kappa` with rest mass :math:`\le E_\varepsilon`
    (exact, by bisection on these scores). ``kappa_hi``: :math:`b_\varepsilon/|\Delta|`
    (:func:`balance_tolerance`), where the imbalance alone would reach
    :math:`\varepsilon`. Also ``delta`` :math:`= \hat s_{i^*} - \hat s_{j^*}` and
    ``margin`` :math:`= \min(\hat s_{i^*}, \hat s_{j^*}) - \max_{k \notin\{i^*,j^*\}}\hat s_k`.
    """
    scores = check_tensor("scores", scores, ndim=1)
    index = _pair_index([pair], scores.shape[0], scores.device)
    ordered = _pair_first(scores.double().unsqueeze(0), index)
    delta = float(ordered[0, 0] - ordered[0, 1])
    return {
        "kappa_lo": float(_rest_mass_edge(ordered, rest_mass_for_loss(epsilon), 1e4)[0]),
        "kappa_hi": balance_tolerance(epsilon) / abs(delta) if delta != 0 else math.inf,
        "delta": delta,
        "margin": float(ordered[0, :2].min() - ordered[0, 2:].max()),
    }


def window_success_probability(
    codes: torch.Tensor,
    pairs: Sequence[tuple[int, int]],
    n_values: Sequence[int],
    epsilon: float = DEFAULT_EPSILON,
    readout_kind: str = "xor",
) -> np.ndarray:
    r"""The window estimate of the success probability at each :math:`n`, averaged over ``pairs``.

    Take the step at the population suppression edge :math:`\kappa_{\rm lo}`
    (:func:`suppression_edge`) and treat the balance noise as Gaussian,
    :math:`\Delta \sim \mathcal N(0, V/n)` with the exact :math:`V`
    (:func:`balance_noise_variance`). Success needs
    :math:`|\Delta| \le \tau = b_\varepsilon/\kappa_{\rm lo}` (:func:`balance_tolerance`), so

    .. math:: P(n) = \operatorname{mean}_{\text{pairs}}\operatorname{erf}\bigl(\tau\sqrt{n/(2V)}\bigr).

    It ignores the noise in the other scores (a smaller effect, see the book)
    and is a prediction, not a bound.
    """
    edge = suppression_edge(codes, pairs, epsilon)
    variance = torch.tensor([balance_noise_variance(codes, p, readout_kind) for p in pairs], dtype=torch.float64)
    tau = balance_tolerance(epsilon) / edge.cpu()
    n = torch.tensor([check_int("n", n, minimum=1) for n in n_values], dtype=torch.float64)
    return torch.erf(tau.unsqueeze(1) * torch.sqrt(n.unsqueeze(0) / (2 * variance.unsqueeze(1)))).mean(0).numpy()


def window_threshold(
    d: int, *, pairs: int = 200, epsilon: float = DEFAULT_EPSILON, seed: int = 0, code_seed: int = 0
) -> dict[str, float]:
    r"""The window estimate's :math:`n^*` (50 % success) at ``d``, over ``pairs`` random pairs, without any sampling of data.

    Pairs are drawn uniformly; those the population step cannot learn (infinite
    suppression edge) are dropped, as in the experiment. The averaged
    :func:`window_success_probability` is increasing in :math:`n`, so
    :math:`n^*` is found by bisection in :math:`\ln n`. Cost :math:`O(\text{pairs}\cdot d\,m)`:
    usable far beyond the sizes that can be simulated. Returns ``n_star``,
    ``m`` and ``learnable`` (the fraction of the drawn pairs kept).
    """
    d = check_int("d", d, minimum=4)
    pairs = check_int("pairs", pairs, minimum=1)
    codes = positional_codes(d, seed=code_seed)
    generator = make_generator(check_seed("seed", seed))
    first = torch.randint(d, (pairs,), generator=generator)
    second = (first + torch.randint(1, d, (pairs,), generator=generator)) % d
    drawn = [(min(u, v), max(u, v)) for u, v in zip(first.tolist(), second.tolist(), strict=True)]
    edge = suppression_edge(codes, drawn, epsilon, kappa_max=400.0)
    kept = [p for p, e in zip(drawn, edge.tolist(), strict=True) if math.isfinite(e)]
    if not kept:
        raise ValueError(f"none of the {pairs} drawn pairs is learnable at d = {d}; draw more pairs")
    tau = balance_tolerance(epsilon) / suppression_edge(codes, kept, epsilon)
    variance = torch.tensor([balance_noise_variance(codes, p) for p in kept], dtype=torch.float64)

    def probability(log_n: float) -> float:
        return float(torch.erf(tau * torch.sqrt(math.exp(log_n) / (2 * variance))).mean())

    low, high = 0.0, math.log(1e15)
    for _ in range(80):
        mid = (low + high) / 2
        low, high = (low, mid) if probability(mid) >= 0.5 else (mid, high)
    return {"n_star": math.exp(high), "m": codes.shape[1], "learnable": len(kept) / pairs}


# --------------------------------------------------------------------------- reference lines


def sq_frontier(d: int, m: int) -> float:
    r"""Edelman et al.'s statistical-query frontier for one step: batch :math:`\gtrsim \binom d2/(r T)` with :math:`r = 2m`, :math:`T = 1`."""
    d = check_int("d", d, minimum=2)
    m = check_int("m", m, minimum=1)
    return math.comb(d, 2) / (2 * m)


def information_floor(d: int) -> float:
    r"""The information floor :math:`\log_2\binom d2`: each sample gives at most one bit about the pair."""
    return math.log2(math.comb(check_int("d", d, minimum=2), 2))


# --------------------------------------------------------------------------- fits


def _logistic_fits(log_n: np.ndarray, counts: np.ndarray, trials: int) -> tuple[np.ndarray, np.ndarray]:
    """Maximum-likelihood (centre, width) of a logistic in log n for each row of counts (B, N), by grid search."""
    centres = np.linspace(log_n[0] - 2.0, log_n[-1] + 2.0, 600)
    widths = np.geomspace(0.05, 5.0, 80)
    p = 1.0 / (1.0 + np.exp(-(log_n[None, None, :] - centres[:, None, None]) / widths[None, :, None]))
    p = np.clip(p, 1e-9, 1 - 1e-9).reshape(-1, len(log_n))  # (grid, N)
    log_p, log_q = np.log(p), np.log1p(-p)
    # loglik[b, g] = sum_n k[b, n] log p[g, n] + (trials - k[b, n]) log(1 - p[g, n])
    loglik = counts @ (log_p - log_q).T + trials * log_q.sum(-1)
    best = np.argmax(loglik, axis=-1)
    i, j = np.unravel_index(best, (len(centres), len(widths)))
    return centres[i], widths[j]


def fit_threshold(n_values: Sequence[float], successes: Sequence[float], trials: int) -> dict[str, float]:
    r"""Fit :math:`P(n) = \sigma((\ln n - \ln n^*)/w)` to success fractions by binomial maximum likelihood.

    A grid search over :math:`(\ln n^*, w)` (robust, no optimiser). Returns
    ``n_star`` (50 %), ``n_90`` (90 %), ``width`` (in :math:`\ln n`).
    """
    trials = check_int("trials", trials, minimum=1)
    log_n = np.log(np.asarray(n_values, dtype=float))
    k = np.asarray(successes, dtype=float) * trials
    if log_n.shape != k.shape or log_n.ndim != 1 or len(log_n) < 2:
        raise ValueError("n_values and successes must be 1-d sequences of the same length (at least 2)")
    centre, width = (float(v[0]) for v in _logistic_fits(log_n, k[None, :], trials))
    return {"n_star": float(np.exp(centre)), "n_90": float(np.exp(centre + width * np.log(9.0))), "width": width}


def trial_successes(result: dict[str, object], k: int, key: str = "oracle") -> np.ndarray:
    r"""Per-trial success, shape ``(trials, len(n))``, at the ``k``-th ``d`` of a :func:`finite_sample_experiment` result.

    ``key`` is ``"oracle"`` (some :math:`\kappa` of the grid succeeds) or ``"rule"``
    (the pair-free rule's :math:`\kappa` succeeds).
    """
    if key not in ("oracle", "rule"):
        raise ValueError(f"key must be one of ['oracle', 'rule'], got {key!r}")
    success = np.asarray(result["recovered"][k])[..., None] & (np.asarray(result["worst"][k]) < result["epsilon"])
    if key == "oracle":
        return success.any(-1)
    chosen = np.asarray(result["chosen_index"][k])
    return np.take_along_axis(success, chosen[..., None], axis=-1)[..., 0]


def bootstrap_exponent(
    result: dict[str, object], key: str = "oracle", *, resamples: int = 200, level: float = 0.9, seed: int = 0
) -> dict[str, float]:
    r"""The fitted exponent of :math:`n^*(d)` with a bootstrap interval over trials.

    Each resample draws the trials of every ``d`` with replacement, refits
    every threshold (:func:`fit_threshold`) and the power law
    (:func:`fit_power_law`). Returns ``exponent`` (on the data), ``low`` and
    ``high`` (the central ``level`` interval of the resampled exponents).
    """
    resamples = check_int("resamples", resamples, minimum=10)
    level = check_float("level", level, minimum=0.0, maximum=1.0, strict_minimum=True)
    rng = np.random.default_rng(check_seed("seed", seed))
    log_d = np.log(np.asarray(result["d"], dtype=float))
    log_n_star = []
    for k in range(len(result["d"])):
        success = trial_successes(result, k, key)
        trials = success.shape[0]
        draws = rng.integers(trials, size=(resamples, trials))
        counts = success[draws].sum(1).astype(float)  # (resamples, N)
        centres, _ = _logistic_fits(np.log(np.asarray(result["n"][k], dtype=float)), counts, trials)
        log_n_star.append(centres)
    slopes = np.polyfit(log_d, np.stack(log_n_star), 1)[0]  # one slope per resample
    table = success_table(result)
    point = fit_power_law(result["d"], table["n_oracle" if key == "oracle" else "n_rule"])["exponent"]
    tail = (1 - level) / 2
    return {"exponent": point, "low": float(np.quantile(slopes, tail)), "high": float(np.quantile(slopes, 1 - tail))}


def fit_power_law(x: Sequence[float], y: Sequence[float]) -> dict[str, float]:
    r"""Least-squares fit of :math:`\ln y = a\ln x + b`; returns ``exponent`` :math:`a` and ``prefactor`` :math:`e^b`."""
    lx, ly = np.log(np.asarray(x, dtype=float)), np.log(np.asarray(y, dtype=float))
    if lx.shape != ly.shape or lx.ndim != 1 or len(lx) < 2:
        raise ValueError("x and y must be 1-d sequences of the same length (at least 2)")
    if not (np.isfinite(lx).all() and np.isfinite(ly).all()):
        raise ValueError("x and y must be positive and finite")
    slope, intercept = np.polyfit(lx, ly, 1)
    return {"exponent": float(slope), "prefactor": float(np.exp(intercept))}


# --------------------------------------------------------------------------- the experiment


def learnable_pairs(codes: torch.Tensor, epsilon: float = DEFAULT_EPSILON, kappa_max: float = 400.0) -> torch.Tensor:
    r"""All pairs :math:`(i < j)` that the *population* step learns at some :math:`\kappa \le` ``kappa_max``, shape ``(P, 2)``.

    With :math:`m = O(\log d)` sign codes, a few pairs tie with another
    position (margin :math:`\le 0`) or need a huge step; no sample size helps
    them, so the finite-sample experiment draws its pairs from the rest and
    reports the fraction.
    """
    codes = check_tensor("codes", codes, ndim=2)
    d = codes.shape[0]
    all_pairs = torch.combinations(torch.arange(d, device=codes.device), 2)
    edges = torch.cat(
        [
            suppression_edge(codes, [tuple(p) for p in chunk.tolist()], epsilon, kappa_max=kappa_max)
            for chunk in all_pairs.split(4096)
        ]
    )
    return all_pairs[torch.isfinite(edges)]


@cached
def finite_sample_run(
    d: int,
    *,
    trials: int = 32,
    epsilon: float = DEFAULT_EPSILON,
    kappas: tuple[float, ...] = DEFAULT_KAPPAS,
    fixed_kappa: float = FIXED_KAPPA,
    n_low: float = 0.5,
    n_high: float = 512.0,
    seed: int = 0,
    code_seed: int = 0,
    device: str = "cpu",
    progress: bool = False,
) -> dict[str, object]:
    r"""One ``d`` of :func:`finite_sample_experiment` (cached on disk per ``d``, so any grid reuses it)."""
    with single_threaded():
        return _finite_sample_run(
            d,
            trials=trials,
            epsilon=epsilon,
            kappas=kappas,
            fixed_kappa=fixed_kappa,
            n_low=n_low,
            n_high=n_high,
            seed=seed,
            code_seed=code_seed,
            device=device,
            progress=progress,
        )


def _finite_sample_run(
    d: int,
    *,
    trials: int = 32,
    epsilon: float = DEFAULT_EPSILON,
    kappas: tuple[float, ...] = DEFAULT_KAPPAS,
    fixed_kappa: float = FIXED_KAPPA,
    n_low: float = 0.5,
    n_high: float = 512.0,
    seed: int = 0,
    code_seed: int = 0,
    device: str = "cpu",
    progress: bool = False,
) -> dict[str, object]:
    """The body of :func:`finite_sample_run`."""
    d = check_int("d", d, minimum=4)
    trials = check_int("trials", trials, minimum=1)
    epsilon = check_float("epsilon", epsilon, minimum=0.0, maximum=2.0, strict_minimum=True)
    fixed_kappa = check_float("fixed_kappa", fixed_kappa, minimum=0.0, strict_minimum=True)
    kappas = tuple(check_float("kappa", k, minimum=0.0, strict_minimum=True) for k in kappas)
    seed = check_seed("seed", seed)
    start = time.perf_counter()
    codes = positional_codes(d, seed=code_seed, device=device)
    m = codes.shape[1]
    candidates = learnable_pairs(codes, epsilon)
    pick = torch.randint(len(candidates), (trials,), generator=make_generator(seed + 7919 * d))
    pairs = [tuple(p) for p in candidates[pick].tolist()]
    index = _pair_index(pairs, d, codes.device)
    n_grid = n_grid_for(d, low=n_low, high=n_high)
    coefficients = streamed_coefficients(d, pairs, n_grid, seed=seed + d, device=device, progress=progress)
    scores = unit_scores(coefficients, codes)  # (trials, N, d)
    worst = worst_case_over_kappas(scores, pairs, kappas)  # (trials, N, K)
    recovered = _recovered(scores, index)  # (trials, N)
    success = recovered.unsqueeze(-1) & (worst < epsilon)
    chosen = self_calibrated_kappa(scores, kappas, rest_mass_for_loss(epsilon) / 2)
    rule = success.gather(-1, chosen.unsqueeze(-1)).squeeze(-1)
    fixed_worst = worst_case_over_kappas(scores, pairs, (fixed_kappa,)).squeeze(-1)
    fixed = recovered & (fixed_worst < epsilon)
    ordered = _pair_first(scores, index)
    variances = [balance_noise_variance(codes, p) for p in pairs]
    return {
        "d": d,
        "m": m,
        "n": list(n_grid),
        "oracle": success.any(-1).double().mean(0).tolist(),
        "rule": rule.double().mean(0).tolist(),
        "fixed": fixed.double().mean(0).tolist(),
        "window": window_success_probability(codes, pairs, n_grid, epsilon).tolist(),
        "worst": worst.cpu().numpy(),
        "recovered": recovered.cpu().numpy(),
        "chosen_kappa": torch.tensor(kappas, dtype=torch.float64)[chosen.cpu()].numpy(),
        "chosen_index": chosen.cpu().numpy(),
        "delta": (ordered[..., 0] - ordered[..., 1]).cpu().numpy(),
        "pairs": pairs,
        "variance_exact": float(np.mean(variances)),
        "variance_leading": 4.0 * d * d / m,
        "learnable_fraction": len(candidates) / math.comb(d, 2),
        "seconds": time.perf_counter() - start,
        "kappas": list(kappas),
        "epsilon": epsilon,
        "trials": trials,
        "fixed_kappa": fixed_kappa,
    }


def finite_sample_experiment(
    ds: tuple[int, ...] = BOOK_DS,
    *,
    trials: int = 32,
    epsilon: float = DEFAULT_EPSILON,
    kappas: tuple[float, ...] = DEFAULT_KAPPAS,
    fixed_kappa: float = FIXED_KAPPA,
    n_low: float = 0.5,
    n_high: float = 512.0,
    seed: int = 0,
    code_seed: int = 0,
    device: str = "cpu",
    progress: bool = False,
) -> dict[str, object]:
    r"""Success probability of one empirical step from zero init, over a grid of :math:`n` and :math:`d`.

    For each ``d`` (:func:`finite_sample_run`, cached per ``d``): codes :math:`P`
    (balanced, default :math:`m`); ``trials`` hidden pairs drawn uniformly from
    the learnable pairs (:func:`learnable_pairs`); for each trial one stream of
    samples, read at every :math:`n` of :func:`n_grid_for` (``n_low * d**2`` to
    ``n_high * d**2``). At each :math:`(n, \kappa)`: the step's exact worst-case
    loss, and whether the pair is recovered (it strictly tops both heads'
    attention). Success = recovered and worst-case loss :math:`< \varepsilon`.
    Three ways to pick :math:`\kappa` from ``kappas``:

    * ``oracle``: the best :math:`\kappa` for that sample (it looks at the pair);
    * ``rule``: :func:`self_calibrated_kappa` with rest target :math:`E_\varepsilon/2`
      (never looks at the pair);
    * ``fixed``: :math:`\kappa` = ``fixed_kappa`` for every :math:`n` and :math:`d`.

    Returns plain data, one list entry per ``d``: ``n`` (grid), ``oracle``,
    ``rule``, ``fixed`` (success fractions), ``window`` (window estimate),
    ``worst`` (trials x n x kappa worst-case losses), ``recovered``,
    ``chosen_kappa`` and ``chosen_index`` (the rule's choice), ``delta`` (balance noise
    :math:`\Delta`), ``pairs``, ``variance_exact`` and ``variance_leading``
    (:math:`n\operatorname{Var}\Delta` averaged over the trials' pairs, exact vs
    :math:`4d^2/m`), ``learnable_fraction``, ``m``, ``seconds``; and the scalars
    ``kappas``, ``epsilon``, ``trials``, ``fixed_kappa``.
    """
    if len(ds) == 0:
        raise ValueError("ds must hold at least one dimension d")
    runs = [
        finite_sample_run(
            d,
            trials=trials,
            epsilon=epsilon,
            kappas=kappas,
            fixed_kappa=fixed_kappa,
            n_low=n_low,
            n_high=n_high,
            seed=seed,
            code_seed=code_seed,
            device=device,
            progress=progress,
        )
        for d in tqdm(ds, desc="finite samples across d", disable=not progress)
    ]
    scalars = ("kappas", "epsilon", "trials", "fixed_kappa")
    result: dict[str, object] = {key: [run[key] for run in runs] for key in runs[0] if key not in scalars}
    result.update({key: runs[0][key] for key in scalars})
    return result


def _threshold(n: Sequence[int], curve: Sequence[float], trials: int) -> dict[str, float]:
    """fit_threshold, or nan where the curve never rises above 10 % (nothing to fit)."""
    if max(curve) < 0.1:
        return {"n_star": math.nan, "n_90": math.nan, "width": math.nan}
    return fit_threshold(n, curve, trials)


def success_table(result: dict[str, object]) -> dict[str, list]:
    r"""Per ``d``: the fitted thresholds :math:`n^*` (oracle, rule, fixed, window estimate) and the reference lines.

    Keys: ``d, m, params, n_oracle, n_oracle_90, n_rule, n_rule_90, n_fixed, n_window, sq_frontier, info_floor``.
    Thresholds come from :func:`fit_threshold`; ``nan`` where a curve never
    rises above 10 % on the grid (no threshold to fit).
    """
    trials = int(result["trials"])
    keys = ("d", "m", "params", "n_oracle", "n_oracle_90", "n_rule", "n_rule_90", "n_fixed", "n_window")
    rows: dict[str, list] = {key: [] for key in (*keys, "sq_frontier", "info_floor")}
    for k, d in enumerate(result["d"]):
        n, m = result["n"][k], result["m"][k]
        oracle = _threshold(n, result["oracle"][k], trials)
        rule = _threshold(n, result["rule"][k], trials)
        window = _threshold(n, result["window"][k], 10_000)
        for key, value in (
            ("d", d),
            ("m", m),
            ("params", 2 * m),
            ("n_oracle", oracle["n_star"]),
            ("n_oracle_90", oracle["n_90"]),
            ("n_rule", rule["n_star"]),
            ("n_rule_90", rule["n_90"]),
            ("n_fixed", _threshold(n, result["fixed"][k], trials)["n_star"]),
            ("n_window", window["n_star"]),
            ("sq_frontier", sq_frontier(d, m)),
            ("info_floor", information_floor(d)),
        ):
            rows[key].append(value)
    return rows


def kappa_profile(
    d: int,
    n_values: Sequence[int],
    *,
    pair: tuple[int, int],
    kappas: Sequence[float] = DEFAULT_KAPPAS,
    seed: int = 0,
    code_seed: int = 0,
    device: str = "cpu",
) -> dict[str, object]:
    r"""Worst-case loss against :math:`\kappa` for one sample stream read at each ``n``, and for the population.

    Returns ``kappa``, ``worst`` (one list per ``n``), ``population`` (the
    population step), ``delta`` (:math:`\Delta` per ``n``), ``margin``
    (:math:`\min(\hat s_{i^*},\hat s_{j^*}) - \max_{k}\hat s_k` per ``n``) and the weights
    after the step at each :math:`\kappa` for the largest ``n`` (``weights``).
    """
    d = check_int("d", d, minimum=4)
    pair = check_pair("pair", pair, d)
    codes = positional_codes(d, seed=code_seed, device=device)
    coefficients = streamed_coefficients(d, [pair], sorted(n_values), seed=seed, device=device)
    scores = unit_scores(coefficients, codes)  # (1, N, d)
    population = (codes @ (codes[pair[0]] + codes[pair[1]])).double().view(1, d)
    index = _pair_index([pair], d, codes.device)
    ordered = _pair_first(scores, index)[0]
    return {
        "n": sorted(n_values),
        "kappa": list(kappas),
        "worst": worst_case_over_kappas(scores, [pair], kappas)[0].tolist(),
        "population": worst_case_over_kappas(population, [pair], kappas)[0].tolist(),
        "delta": (ordered[:, 0] - ordered[:, 1]).tolist(),
        "margin": (ordered[:, :2].amin(-1) - ordered[:, 2:].amax(-1)).tolist(),
        "scores": scores[0].cpu(),
        "population_scores": population[0].cpu(),
    }


def html_table(header: Sequence[str], rows: Sequence[Sequence[object]], formats: Sequence[str]) -> str:
    """A small HTML table (for a notebook's rich output): one format spec per column, ``nan`` shown as a dash."""
    if len(formats) != len(header) or any(len(row) != len(header) for row in rows):
        raise ValueError(f"every row and formats must have one entry per column ({len(header)})")

    def cell(value: object, spec: str) -> str:
        if isinstance(value, float) and not math.isfinite(value):
            return "&ndash;"
        return format(value, spec)

    head = "".join(f"<th>{h}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{cell(v, f)}</td>" for v, f in zip(row, formats, strict=True)) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def success_table_html(table: dict[str, list], result: dict[str, object]) -> str:
    """:func:`success_table` (with the learnable fraction from ``result``) as an HTML table."""
    header = (
        "d", "2m", "learnable pairs", "n* (oracle)", "n* (pair-free rule)", "n* (fixed κ)", "window estimate",
        "SQ frontier C(d,2)/2m", "log₂ C(d,2)", "n* / SQ frontier",
    )  # fmt: skip
    rows = [
        (
            d,
            table["params"][k],
            result["learnable_fraction"][k],
            table["n_oracle"][k],
            table["n_rule"][k],
            table["n_fixed"][k],
            table["n_window"][k],
            table["sq_frontier"][k],
            table["info_floor"][k],
            table["n_oracle"][k] / table["sq_frontier"][k],
        )
        for k, d in enumerate(table["d"])
    ]
    return html_table(header, rows, ("d", "d", ".1%", ".3g", ".3g", ".3g", ".3g", ".3g", ".3g", ".0f"))


# --------------------------------------------------------------------------- command line


def _print_table(result: dict[str, object]) -> None:
    table = success_table(result)
    header = f"{'d':>5} {'m':>4} {'2m':>4} {'learnable':>9} {'n*_oracle':>10} {'n90_oracle':>10} {'n*_rule':>10}"
    header += f" {'n*_fixed':>10} {'n*_window':>10} {'SQ batch':>9} {'log2C(d,2)':>10} {'sec':>6}"
    print(header)
    for k, d in enumerate(table["d"]):
        print(
            f"{d:>5} {table['m'][k]:>4} {table['params'][k]:>4} {result['learnable_fraction'][k]:>9.3f}"
            f" {table['n_oracle'][k]:>10.3g} {table['n_oracle_90'][k]:>10.3g} {table['n_rule'][k]:>10.3g}"
            f" {table['n_fixed'][k]:>10.3g} {table['n_window'][k]:>10.3g} {table['sq_frontier'][k]:>9.3g}"
            f" {table['info_floor'][k]:>10.3g} {result['seconds'][k]:>6.1f}"
        )
    for key in ("n_oracle", "n_rule", "n_window"):
        ok = [k for k, v in enumerate(table[key]) if math.isfinite(v)]
        if len(ok) >= 2:
            fit = fit_power_law([table["d"][k] for k in ok], [table[key][k] for k in ok])
            line = f"fitted exponent of {key} ~ d^a: a = {fit['exponent']:.2f}"
            if key != "n_window" and len(ok) == len(table["d"]):
                interval = bootstrap_exponent(result, key.removeprefix("n_"))
                line += f" (90 % bootstrap interval {interval['low']:.2f} to {interval['high']:.2f})"
            print(line)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m xorlib.experiments.finite_samples [--full]``: run the grid (cached) and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help=f"the full grid d in {FULL_DS} (else the book grid)")
    parser.add_argument("--trials", type=int, default=None, help="trials per d (default 64 full, 32 book)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    torch.set_num_threads(min(2, torch.get_num_threads()))
    ds = FULL_DS if args.full else BOOK_DS
    trials = args.trials or (64 if args.full else 32)
    start = time.perf_counter()
    result = finite_sample_experiment(ds, trials=trials, device=args.device, progress=True)
    _print_table(result)
    print(f"total {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
