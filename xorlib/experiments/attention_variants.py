r"""Experiment 2, "softmax vs linear vs component-wise": the one-step protocol for each normaliser.

Protocol. Same single population step from uniform attention as
:mod:`xorlib.experiments.one_step`, for each normaliser of
:data:`xorlib.attention.ATTENTION_KINDS`. Each normaliser gets its own best step
size: a grid search over the sharpness :math:`\kappa` (:func:`kappa_grid`, 6 values
per decade) that minimises the certified worst-case loss. Searching on the
quantity we report is legitimate here because the worst case is computed exactly
(not estimated from samples): the grid search gives every variant its best shot.

For every code dimension :math:`m` (balanced codes for :math:`m < d`, one-hot codes
for :math:`m = d`) we record the best worst-case loss and the best mean loss, and
:func:`min_code_dim` finds the smallest :math:`m` at which a normaliser reaches
worst-case loss :math:`\le \varepsilon` on every draw, or ``None`` if none up to
:math:`m = d` does.

Worst case, both ways. :func:`xorlib.gradient.worst_case_loss` brackets the
worst case; its lower end is loose when the other positions carry more mass than
the pair (a subset-sum problem). For the one-step models (tied heads)
:func:`attained_worst_loss` closes most of that gap with explicit inputs that
balance the other bits against the pair. "Reaches :math:`\varepsilon`" is decided
on the certified upper bound, "fails" on the attained lower bound, so neither
verdict rests on a loose bound.

``python -m xorlib.experiments.attention_variants --full`` runs the full grid.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from .._validate import check_choice, check_device, check_float, check_int, check_pair, check_seed, check_tensor
from ..attention import ATTENTION_KINDS, attention_weights, scores_vjp
from ..cache import cached
from ..codes import default_code_dim, positional_codes
from ..data import random_pair
from ..gradient import lr_for_sharpness, population_grad_weights, population_loss_weights, worst_case_loss
from ..model import READOUTS, readout_constants
from ..training import recovered_mask, single_threaded, train_attention_seeds

__all__ = [
    "BOOK_DS",
    "BOOK_D_FIXED",
    "EPSILON",
    "FIXED_D_INSTANCES",
    "FULL_DS",
    "M_GRID",
    "attained_worst_loss",
    "calibrated_rest_mass",
    "certainly_fails",
    "code_dim_sweep",
    "code_dims",
    "kappa_grid",
    "main",
    "min_code_dim",
    "min_code_dim_across_d",
    "multistep_variants",
    "one_step_grid",
    "one_step_unit_scores",
]

#: Target worst-case loss.
EPSILON = 1e-2
#: The fixed d of the m-sweep, and the d grids for "smallest m" (book and full).
BOOK_D_FIXED = 256
BOOK_DS = (16, 64, 256, 1024)
FULL_DS = (16, 64, 256, 1024, 4096, 16384)
#: Candidate code dimensions below d (one-hot codes add m = d).
M_GRID = (2, 3, 4, 5, 6, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 64, 96, 128, 256, 512)
BOOK_INSTANCES = tuple(range(6))
FIXED_D_INSTANCES = tuple(range(12))
FULL_INSTANCES = tuple(range(8))
#: Largest score whose exponential float64 holds comfortably (e^700 ~ 1e304).
_MAX_EXP_SCORE = 700.0


def kappa_grid(d: int, attention: str, *, per_decade: int = 6) -> tuple[float, ...]:
    r"""The sharpness grid for normaliser ``attention`` at input length ``d``.

    Geometric from :math:`10^{-2}` to :math:`\max(10^4, 10 d)` (linear attention needs
    :math:`\kappa \approx d/2` to calibrate the pair), with ``per_decade`` points per
    decade; for ``"componentwise"`` it stops at :math:`\kappa = 300` so that no
    score (at most about :math:`2\kappa`) overflows the exponential.
    """
    d = check_int("d", d, minimum=3)
    attention = check_choice("attention", attention, ATTENTION_KINDS)
    per_decade = check_int("per_decade", per_decade, minimum=1, maximum=100)
    top = 300.0 if attention == "componentwise" else max(1e4, 10.0 * d)
    count = math.floor(per_decade * (math.log10(top) + 2)) + 1
    return tuple(float(10 ** (-2 + k / per_decade)) for k in range(count))


def code_dims(d: int) -> tuple[int, ...]:
    """The code dimensions swept at input length ``d``: the values of :data:`M_GRID` below ``d``, then ``d`` (one-hot)."""
    d = check_int("d", d, minimum=3)
    return (*[m for m in M_GRID if m < d], d)


def one_step_unit_scores(
    d: int,
    m: int,
    pair: tuple[int, int],
    *,
    attention: str = "softmax",
    readout_kind: str = "xor",
    code_seed: int = 0,
    device: str | torch.device = "cpu",
) -> torch.Tensor:
    r"""The scores :math:`s^+ = P q^+` after one population step of sharpness 1 from :math:`q = 0`, shape ``(2, d)``.

    With :math:`g_s = \partial L/\partial s` at uniform attention, the query gradient is
    :math:`P^\top g_s` and the new scores are :math:`s^+ = -\eta P P^\top g_s`,
    :math:`\eta` = :func:`~xorlib.gradient.lr_for_sharpness` ``(1, d)``. Balanced codes
    (``m < d``) form :math:`P`; one-hot codes (``m == d``) have :math:`PP^\top = I`, so
    :math:`s^+ = -\eta g_s` without a :math:`d \times d` matrix.
    """
    d = check_int("d", d, minimum=3)
    m = check_int("m", m, minimum=1, maximum=d)
    pair = check_pair("pair", pair, d)
    attention = check_choice("attention", attention, ATTENTION_KINDS)
    device = check_device("device", device)
    uniform_scores = torch.zeros(2, d, dtype=torch.float64, device=device)
    weights = attention_weights(uniform_scores, attention)
    grad_scores = scores_vjp(uniform_scores, weights, population_grad_weights(weights, pair, readout_kind), attention)
    lr = lr_for_sharpness(1.0, d, attention=attention, readout_kind=readout_kind)
    if m == d:
        return -lr * grad_scores
    codes = positional_codes(d, m, seed=check_seed("code_seed", code_seed), device=device)
    return -lr * (grad_scores @ codes) @ codes.T


def attained_worst_loss(weights: torch.Tensor, pair: tuple[int, int], readout_kind: str = "xor") -> torch.Tensor:
    r"""A loss attained by explicit inputs, for tied heads: a lower bound on the worst case.

    For tied heads :math:`z = c + \sum_{k \notin\{i^*,j^*\}} \alpha_k x_k` with
    :math:`c = \alpha_{i^*}x_{i^*} + \alpha_{j^*}x_{j^*}`, and the loss is a function of
    :math:`z^2`. Besides aligning every other bit with :math:`c` (largest :math:`|z|`), we
    try to bring :math:`z` near 0: sort the other weights by size, oppose the :math:`K`
    largest to :math:`c` and alternate the signs of the rest, for every :math:`K`. Each
    such input is a real point of :math:`\{\pm1\}^d`, so the largest of their losses is
    attained; it reaches :math:`|z| \le \max_k|\alpha_k|` whenever
    :math:`\sum_k |\alpha_k| \ge |c|`. Cost :math:`O(d \log d)`.

    Parameters
    ----------
    weights
        Tied head weights, shape ``(2, d)`` or ``(batch, 2, d)`` with equal heads (only head 1 is read).
    """
    weights = check_tensor("weights", weights, ndim=(2, 3))
    if weights.shape[-2] != 2:
        raise ValueError(f"weights must have shape (..., 2, d), got {tuple(weights.shape)}")
    if not bool((weights[..., 0, :] == weights[..., 1, :]).all()):
        raise ValueError("attained_worst_loss is for tied heads: weights[..., 0, :] must equal weights[..., 1, :]")
    d = weights.shape[-1]
    u, v = check_pair("pair", pair, d)
    c0, c1 = readout_constants(readout_kind)
    head = weights[..., 0, :].to(torch.float64)
    others = head.clone()
    others[..., [u, v]] = 0.0
    sizes = others.abs().sort(dim=-1, descending=True).values[..., : d - 2]  # (..., d-2)
    prefix = torch.nn.functional.pad(sizes.cumsum(-1), (1, 0))  # P_K, K = 0..d-2
    alternating = sizes * torch.where(torch.arange(d - 2, device=sizes.device) % 2 == 0, 1.0, -1.0)
    suffix = torch.nn.functional.pad(alternating.flip(-1).cumsum(-1).flip(-1), (0, 1))  # T_K
    parity = torch.where(torch.arange(d - 1, device=sizes.device) % 2 == 0, 1.0, -1.0)
    best = torch.full(head.shape[:-1], -math.inf, dtype=torch.float64, device=head.device)
    for xu in (1.0, -1.0):
        for xv in (1.0, -1.0):
            centre = (xu * head[..., u] + xv * head[..., v]).abs().unsqueeze(-1)
            label = -xu * xv
            balanced = centre - prefix + parity * suffix  # z for "oppose K, then alternate"
            aligned = centre + prefix[..., -1:]  # every other bit with c
            z = torch.cat([balanced, aligned], dim=-1)
            loss = 0.5 * (c0 - label - c1 * z**2) ** 2
            best = torch.maximum(best, loss.amax(-1))
    return best


def _weights_for_kappas(unit_scores: torch.Tensor, kappas: torch.Tensor, attention: str) -> torch.Tensor:
    scores = kappas[:, None, None] * unit_scores
    if attention == "componentwise" and float(scores.max()) > _MAX_EXP_SCORE:
        raise ValueError(f"kappa grid too large for componentwise attention: scores reach {float(scores.max()):.3g}")
    return attention_weights(scores, attention)


def _evaluate(
    unit: torch.Tensor, kappas: Sequence[float], pair: tuple[int, int], attention: str, readout_kind: str
) -> dict[str, torch.Tensor]:
    kappa = torch.tensor(kappas, dtype=torch.float64, device=unit.device)
    # The step keeps the heads tied: normalise one head and share it.
    weights = _weights_for_kappas(unit[:1], kappa, attention).expand(-1, 2, -1)
    worst = worst_case_loss(weights, pair, readout_kind)
    head = weights[:, 0]
    pair_mass = head[:, pair[0]] + head[:, pair[1]]
    return {
        "kappas": kappa,
        # Element-wise weights can reach e^600: a loss that overflows is simply astronomically large.
        "mean": _finite_or_inf(population_loss_weights(weights, pair, readout_kind)),
        "worst_upper": _finite_or_inf(worst.upper),
        "worst_lower": _finite_or_inf(torch.maximum(worst.lower, attained_worst_loss(weights, pair, readout_kind))),
        "pair_mass": pair_mass,
        "rest_mass": head.abs().sum(-1) - head[:, pair[0]].abs() - head[:, pair[1]].abs(),
    }


def _finite_or_inf(values: torch.Tensor) -> torch.Tensor:
    return torch.where(torch.isfinite(values), values, torch.full_like(values, math.inf))


def _best_index(worst: torch.Tensor, mean: torch.Tensor) -> int:
    """Index of the smallest worst-case loss; among (relative 1e-9) ties, the one of smallest mean loss."""
    floor = float(worst.min())
    ties = worst <= floor + 1e-9 * max(floor, 1e-300)
    return int(torch.argmin(torch.where(ties, mean, torch.full_like(mean, math.inf))))


def _refined(kappas: Sequence[float], index: int, points: int) -> list[float]:
    """A geometric grid of ``points`` values between the neighbours of ``kappas[index]``."""
    low = kappas[max(index - 1, 0)]
    high = kappas[min(index + 1, len(kappas) - 1)]
    return [low * (high / low) ** (k / (points - 1)) for k in range(points)] if high > low else []


def one_step_grid(
    d: int,
    m: int,
    *,
    attention: str = "softmax",
    instance: int = 0,
    readout_kind: str = "xor",
    kappas: Sequence[float] | None = None,
    refine: int = 12,
    device: str | torch.device = "cpu",
) -> dict[str, np.ndarray | float | int]:
    r"""One draw (codes and pair seeded by ``instance``): metrics after one step for a grid of :math:`\kappa`.

    The grid is ``kappa_grid(d, attention)`` (or ``kappas``), refined with ``refine`` more
    geometric points between the neighbours of the best :math:`\kappa` for the worst case
    and of the best for the mean loss (the exponential weights of ``"componentwise"`` are
    so sensitive to :math:`\kappa` that a coarse grid would miss its calibration).

    Returns
    -------
    dict
        Arrays over the evaluated :math:`\kappa` (sorted): ``kappas``, ``mean`` (population loss),
        ``worst_upper`` (certified), ``worst_lower`` (attained), ``pair_mass`` and
        ``rest_mass`` (:math:`\sum_{k\notin\{i^*,j^*\}}|\alpha_k|`, one head); ``best`` (index of the
        smallest worst case, ties broken by the mean loss), ``best_mean`` (index of the smallest
        mean loss) and ``unit_pair_score`` (the score of :math:`i^*` at :math:`\kappa = 1`).
    """
    d = check_int("d", d, minimum=3)
    attention = check_choice("attention", attention, ATTENTION_KINDS)
    check_choice("readout_kind", readout_kind, READOUTS)
    instance = check_seed("instance", instance)
    refine = check_int("refine", refine, minimum=0, maximum=1000)
    coarse = kappa_grid(d, attention) if kappas is None else tuple(kappas)
    coarse = tuple(check_float("kappas", k, minimum=0.0, strict_minimum=True) for k in coarse)
    if not coarse:
        raise ValueError("kappas must hold at least one sharpness")
    pair = random_pair(d, seed=instance)
    unit = one_step_unit_scores(
        d, m, pair, attention=attention, readout_kind=readout_kind, code_seed=instance, device=device
    )
    coarse = tuple(sorted(coarse))
    result = _evaluate(unit, coarse, pair, attention, readout_kind)
    if refine >= 2 and len(coarse) > 1:
        extra = _refined(coarse, _best_index(result["worst_upper"], result["mean"]), refine)
        extra += _refined(coarse, int(torch.argmin(result["mean"])), refine)
        if extra:
            more = _evaluate(unit, extra, pair, attention, readout_kind)
            result = {key: torch.cat([result[key], more[key]]) for key in result}
    order = torch.argsort(result["kappas"])
    ordered = result["kappas"][order]
    keep = torch.ones_like(ordered, dtype=torch.bool)
    keep[1:] = ordered[1:] > ordered[:-1] * (1 + 1e-12)  # the two refinements may share points
    order = order[keep]
    arrays = {key: value[order].cpu().numpy() for key, value in result.items()}
    worst_t, mean_t = torch.as_tensor(arrays["worst_upper"]), torch.as_tensor(arrays["mean"])
    return {
        **arrays,
        "best": _best_index(worst_t, mean_t),
        "best_mean": int(torch.argmin(mean_t)),
        "unit_pair_score": float(unit[0, pair[0]]),
    }


@cached
def code_dim_sweep(
    d: int,
    *,
    attentions: tuple[str, ...] = ATTENTION_KINDS,
    instances: tuple[int, ...] = BOOK_INSTANCES,
    readout_kind: str = "xor",
    progress: bool = False,
    device: str = "cpu",
) -> dict[str, object]:
    r"""Best (over the :math:`\kappa` grid) one-step losses for every normaliser, code dimension and draw.

    Returns
    -------
    dict
        ``d``, ``ms`` (:func:`code_dims`), ``attentions``, ``instances`` and, per normaliser,
        arrays of shape ``(len(ms), len(instances))``. At the step minimising the worst case:
        ``best_worst_upper``, ``best_worst_lower``, ``best_kappa``, ``pair_mass``, ``rest_mass``;
        ``min_worst_lower`` is the attained loss minimised over every :math:`\kappa` tried. At
        the step minimising the mean loss: ``best_mean``, ``mean_kappa``, ``mean_pair_mass``,
        ``mean_rest_mass``, ``mean_worst_lower``.
    """
    with single_threaded():
        d = check_int("d", d, minimum=3)
        attentions = tuple(check_choice("attentions", a, ATTENTION_KINDS) for a in attentions)
        if not attentions or not instances:
            raise ValueError("attentions and instances must each hold at least one value")
        ms = code_dims(d)
        keys = ("best_worst_upper", "best_worst_lower", "min_worst_lower", "best_kappa", "pair_mass", "rest_mass")
        keys += ("best_mean", "mean_kappa", "mean_pair_mass", "mean_rest_mass", "mean_worst_lower", "unit_pair_score")
        out: dict[str, object] = {"d": d, "ms": ms, "attentions": attentions, "instances": tuple(instances)}
        grid = [(a, i, j) for a in attentions for i in range(len(ms)) for j in range(len(instances))]
        tables = {a: {key: np.zeros((len(ms), len(instances))) for key in keys} for a in attentions}
        for attention, i, j in tqdm(grid, disable=not progress, desc=f"variants d={d}"):
            res = one_step_grid(
                d, ms[i], attention=attention, instance=instances[j], readout_kind=readout_kind, device=device
            )
            best, best_mean = res["best"], res["best_mean"]
            row = tables[attention]
            row["best_worst_upper"][i, j] = res["worst_upper"][best]
            row["best_worst_lower"][i, j] = res["worst_lower"][best]
            row["min_worst_lower"][i, j] = res["worst_lower"].min()
            row["best_kappa"][i, j] = res["kappas"][best]
            row["pair_mass"][i, j] = res["pair_mass"][best]
            row["rest_mass"][i, j] = res["rest_mass"][best]
            row["best_mean"][i, j] = res["mean"][best_mean]
            row["mean_kappa"][i, j] = res["kappas"][best_mean]
            row["mean_pair_mass"][i, j] = res["pair_mass"][best_mean]
            row["mean_rest_mass"][i, j] = res["rest_mass"][best_mean]
            row["mean_worst_lower"][i, j] = res["worst_lower"][best_mean]
            row["unit_pair_score"][i, j] = res["unit_pair_score"]
        out.update(tables)
        return out


def min_code_dim(sweep: dict[str, object], attention: str, epsilon: float = EPSILON) -> int | None:
    r"""Smallest swept :math:`m` at which ``attention`` reaches worst-case loss :math:`\le\varepsilon` on every draw.

    Decided on the certified upper bound; ``None`` if no swept :math:`m \le d` does.
    """
    epsilon = check_float("epsilon", epsilon, minimum=0.0, strict_minimum=True)
    if attention not in sweep["attentions"]:
        raise ValueError(f"attention must be one of the swept normalisers {sweep['attentions']}, got {attention!r}")
    reached = (sweep[attention]["best_worst_upper"] <= epsilon).all(axis=1)
    hits = [m for m, ok in zip(sweep["ms"], reached, strict=True) if ok]
    return min(hits) if hits else None


def certainly_fails(sweep: dict[str, object], attention: str, epsilon: float = EPSILON) -> bool:
    r"""Whether every swept :math:`m` (and every :math:`\kappa`) has an input with loss :math:`> \varepsilon` on some draw."""
    epsilon = check_float("epsilon", epsilon, minimum=0.0, strict_minimum=True)
    return bool((sweep[attention]["min_worst_lower"] > epsilon).any(axis=1).all())


@cached
def min_code_dim_across_d(
    ds: tuple[int, ...] = BOOK_DS,
    *,
    attentions: tuple[str, ...] = ATTENTION_KINDS,
    instances: tuple[int, ...] = BOOK_INSTANCES,
    epsilon: float = EPSILON,
    progress: bool = False,
    device: str = "cpu",
) -> dict[str, object]:
    r"""For each ``d``: the smallest :math:`m` reaching :math:`\varepsilon` per normaliser (``None``: never up to :math:`m = d`).

    Returns ``ds``, ``attentions``, ``min_m`` (dict: normaliser -> list over ``ds``),
    ``fails`` (dict: normaliser -> list of :func:`certainly_fails`) and ``default_m``
    (:func:`xorlib.codes.default_code_dim`).
    """
    with single_threaded():
        ds = tuple(check_int(f"ds[{k}]", d, minimum=3) for k, d in enumerate(ds))
        min_m: dict[str, list[int | None]] = {a: [] for a in attentions}
        fails: dict[str, list[bool]] = {a: [] for a in attentions}
        for d in tqdm(ds, disable=not progress, desc="smallest m"):
            sweep = code_dim_sweep(d, attentions=attentions, instances=instances, device=device)
            for a in attentions:
                min_m[a].append(min_code_dim(sweep, a, epsilon))
                fails[a].append(certainly_fails(sweep, a, epsilon))
        return {
            "ds": ds,
            "attentions": tuple(attentions),
            "epsilon": epsilon,
            "min_m": min_m,
            "fails": fails,
            "default_m": [default_code_dim(d) for d in ds],
        }


@cached
def multistep_variants(
    d: int = 64,
    *,
    attentions: tuple[str, ...] = ATTENTION_KINDS,
    code_kinds: tuple[str, ...] = ("balanced", "onehot"),
    runs: int = 3,
    steps: int = 250,
    lr: float = 0.1,
    init_scale: float = 0.01,
    pair_seed: int = 0,
    progress: bool = False,
    device: str = "cpu",
) -> dict[str, object]:
    r"""Adam (full population gradient) from a small random start, for each normaliser and code kind.

    Run ``r`` uses init seed ``r`` and (balanced codes, default :math:`m`) code seed ``r``;
    one-hot codes have :math:`m = d`. Returns ``results[(attention, code_kind)]`` with the
    population and worst-case loss curves (arrays ``(runs, steps + 1)``), the steps to
    recovery (``None`` if never), whether each run is recovered at the end, and the final
    rest mass :math:`\max_h \sum_{k\notin\{i^*,j^*\}}|\alpha_{h,k}|` per run.
    """
    with single_threaded():
        d = check_int("d", d, minimum=3)
        runs = check_int("runs", runs, minimum=1, maximum=1000)
        pair = random_pair(d, seed=check_seed("pair_seed", pair_seed))
        grid = [(a, c) for a in attentions for c in code_kinds]
        results = {}
        for attention, code_kind in tqdm(grid, disable=not progress, desc="multi-step variants"):
            out = train_attention_seeds(
                d,
                pair,
                seeds=range(runs),
                attention=attention,
                lr=lr,
                steps=steps,
                init_scale=init_scale,
                code_kind=code_kind,
                code_seed=tuple(range(runs)) if code_kind != "onehot" else 0,
                device=device,
            )
            final = torch.stack([r.weights for r in out]).cpu()
            others = final.abs().clone()
            others[..., list(pair)] = 0.0
            results[(attention, code_kind)] = {
                "population_loss": np.stack([r.population_loss.numpy() for r in out]),
                "worst_case_loss": np.stack([r.worst_case_loss.numpy() for r in out]),
                "steps_to_recovery": [r.steps_to_recovery for r in out],
                "recovered_at_end": recovered_mask(final, pair).tolist(),
                "rest_mass": others.sum(-1).amax(-1).tolist(),
            }
        return {
            "d": d,
            "pair": pair,
            "runs": runs,
            "steps": steps,
            "attentions": tuple(attentions),
            "code_kinds": tuple(code_kinds),
            "m": {c: (d if c == "onehot" else default_code_dim(d)) for c in code_kinds},
            "results": results,
        }


def calibrated_rest_mass(
    d: int, m: int, *, attention: str, instance: int = 0, device: str | torch.device = "cpu"
) -> dict[str, float]:
    r"""The one-step rest mass at the step that *calibrates* the pair (pair mass exactly 1), and its predictions.

    After the step both relevant positions score :math:`\kappa g` with :math:`g = g_{i^*}` (the unit
    score of :func:`one_step_unit_scores`). Calibration fixes :math:`\kappa`:

    * ``"componentwise"``: :math:`2e^{\kappa g}/d = 1`, so :math:`\kappa = \ln(d/2)/g`. Predictions:
      the Jensen floor :math:`(1 - 2/d)\exp(-2\ln(d/2)/(d-2))` (valid for any query, balanced codes,
      even :math:`d`) and the Gaussian estimate :math:`(1-2/d)e^{\kappa^2/m}`;
    * ``"linear"``: :math:`2(1 + \kappa g)/d = 1`, so :math:`\kappa = (d/2 - 1)/g`. Prediction: the
      other weights are :math:`(1 + \kappa g_k)/d \approx \kappa g_k/d` with
      :math:`g_k \approx \mathcal N(0, 2/m)`, so :math:`\sum_k|\alpha_k| \approx \kappa\,\tfrac{d-2}{d}\,\tfrac{2}{\sqrt{\pi m}}`.

    ``"softmax"`` is calibrated at every :math:`\kappa` and ``"sigmoid"`` never (each weight is
    below :math:`2/d`): both raise ``ValueError``. Uses balanced codes (``m < d``).
    """
    d = check_int("d", d, minimum=4)
    m = check_int("m", m, minimum=1, maximum=d - 1)
    attention = check_choice("attention", attention, ("linear", "componentwise"))
    pair = random_pair(d, seed=check_seed("instance", instance))
    unit = one_step_unit_scores(d, m, pair, attention=attention, code_seed=instance, device=device)[0]
    g = float(unit[pair[0]])
    if not g > 0:
        raise ValueError(f"the pair scores {g:.3g} <= 0 after the step: no step calibrates it")
    others = torch.ones(d, dtype=torch.bool, device=unit.device)
    others[list(pair)] = False
    if attention == "componentwise":
        kappa = math.log(d / 2) / g
        if kappa * float(unit.max()) > _MAX_EXP_SCORE:
            raise ValueError("calibration needs scores beyond the float64 range of the exponential")
        rest = float((torch.exp(kappa * unit[others]) / d).sum())
        return {
            "kappa": kappa,
            "rest_mass": rest,
            "jensen_floor": (1 - 2 / d) * math.exp(-2 * math.log(d / 2) / (d - 2)),
            "gaussian_estimate": (1 - 2 / d) * math.exp(kappa**2 / m),
        }
    kappa = (d / 2 - 1) / g
    rest = float(((1 + kappa * unit[others]) / d).abs().sum())
    return {"kappa": kappa, "rest_mass": rest, "gaussian_estimate": kappa * (d - 2) / d * 2 / math.sqrt(math.pi * m)}


def _format_min_m(table: dict[str, object]) -> str:
    attentions = table["attentions"]
    lines = [f"smallest m with worst-case loss <= {table['epsilon']:g} on every draw (None: never up to m = d)"]
    lines.append(f"{'d':>7} {'4log2d':>6} " + " ".join(f"{a:>14}" for a in attentions))
    for k, d in enumerate(table["ds"]):
        cells = []
        for a in attentions:
            m = table["min_m"][a][k]
            cells.append(f"{'never' if m is None else m:>9}{' (x)' if table['fails'][a][k] else '    '}")
        lines.append(f"{d:>7} {table['default_m'][k]:>6} " + " ".join(f"{c:>14}" for c in cells))
    lines.append("(x): an attained input has loss > epsilon at every m and kappa (certified failure)")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``python -m xorlib.experiments.attention_variants [--full]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="full grid (d up to 16384, 8 draws)")
    args = parser.parse_args(argv)
    ds, instances = (FULL_DS, FULL_INSTANCES) if args.full else (BOOK_DS, BOOK_INSTANCES)
    table = min_code_dim_across_d(ds, instances=instances, progress=True)
    print(_format_min_m(table))
    runs, steps = (8, 500) if args.full else (3, 250)
    multi = multistep_variants(BOOK_D_FIXED // 4, runs=runs, steps=steps, progress=True)
    print(f"\nAdam lr 0.1 from a small random start, d = {multi['d']}, {runs} runs, {steps} steps")
    for (attention, code_kind), record in multi["results"].items():
        recovered = float(np.mean(record["recovered_at_end"]))
        worst = float(np.median(record["worst_case_loss"][:, -1]))
        print(f"{attention:>14} {code_kind:>9} (m = {multi['m'][code_kind]:>3}): recovered {recovered:.2f}, "
              f"median final worst-case loss {worst:.2e}, rest mass {max(record['rest_mass']):.3f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
