r"""Softmax against the other normalisers: one population step of each, at its best step size.

For each normaliser, model and code dimension, one population gradient step from
the model's start, at every sharpness of a wide grid (``1e-3`` to ``max(1e4, 10 d)``);
the reported value is the **best** certified worst case over the grid (an oracle
choice that favours the alternatives: it uses the pair). The certificate is
:func:`xorlib.certify.worst_case_loss`, sound for any weights.
``python -m xorlib.experiments.attention_variants --full`` runs the full grid.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .._checks import check_choice, check_float, check_int, check_pair, check_seed, check_sequence
from ..attention import ATTENTION_KINDS, _weights
from ..certify import worst_case_loss
from ..codes import Codes
from ..model import HEADS, ModelConfig
from ..population import loss_of_weights, population_gradient, population_loss
from ..runtime import progress
from ..task import random_pair
from ._criteria import check_ds
from ._runner import experiment

__all__ = ["variant_step", "variant_table"]


def kappa_grid(d: int, per_decade: int = 6) -> torch.Tensor:
    r"""Sharpnesses from :math:`10^{-3}` to :math:`\max(10^{12}, 10d)`, ``per_decade`` per decade.

    Wide on purpose: the unnormalised forms need far larger steps than softmax to
    move their weights by order one (their score gradient carries an extra :math:`1/d`).
    """
    top = float(np.log10(max(1e12, 10 * d)))
    return torch.logspace(-3, top, round((top + 3) * per_decade) + 1, dtype=torch.float64)


def best_worst_case(config: ModelConfig, pair: tuple[int, int], kappas: torch.Tensor) -> tuple[float, float, float]:
    """Over the step sizes: the smallest certified worst case (upper bound), its sharpness, and the smallest attained loss.

    The third value is a proof of failure: at every step size of the grid some
    input has a loss at least this large.
    """
    codes = config.codes.dense()
    q0 = config.initial_queries()
    _, c1 = config.readout
    grad = population_gradient(q0, codes, pair, heads=config.heads, attention=config.attention)
    if not bool(grad.any()):  # a stationary start: no step moves it
        stuck = worst_case_loss(_weights(q0 @ codes.T, config.attention), pair, heads=config.heads)
        return float(stuck.upper), 0.0, float(stuck.lower)
    steps = q0 - (kappas * config.d**2 / c1).view(-1, 1, 1) * grad  # (K, 2, m)
    scores = steps @ codes.T
    if config.attention == "componentwise":  # e^s overflows: such steps are worse than any finite loss
        scores = torch.where(scores > 700, torch.full_like(scores, 700.0), scores)
    certificate = worst_case_loss(_weights(scores, config.attention), pair, heads=config.heads)
    worst = torch.nan_to_num(certificate.upper, nan=float("inf"), posinf=float("inf"))
    best = int(torch.argmin(worst))
    attained = torch.nan_to_num(certificate.lower, nan=float("inf"), posinf=float("inf"))  # overflowed: enormous losses
    return float(worst[best]), float(kappas[best]), float(attained.min())


@dataclass(frozen=True)
class VariantStep:
    """One population step of a model with any normaliser: the weights after it and their certificate."""

    config: ModelConfig
    pair: tuple[int, int]
    kappa: float
    weights_before: torch.Tensor  # (2, d)
    weights_after: torch.Tensor  # (2, d)
    worst_case: object  # xorlib.certify.WorstCase of the weights after the step
    mean_loss_after: float


def variant_step(config: ModelConfig, pair: tuple[int, int], kappa: float) -> VariantStep:
    r"""One population step of sharpness :math:`\kappa` (step size :math:`\kappa d^2/c_1`) for any normaliser (dense: moderate ``d``).

    Component-wise scores are capped at 700 so that :math:`e^s` stays finite; the
    certificate of such a step is enormous, as it should be.
    """
    if not isinstance(config, ModelConfig):
        raise TypeError(f"config must be a ModelConfig, got {type(config).__name__}")
    kappa = check_float("kappa", kappa, minimum=0.0, maximum=1e15)
    codes = config.codes.dense()
    pair = check_pair("pair", pair, config.d)
    q0 = config.initial_queries()
    _, c1 = config.readout
    grad = population_gradient(q0, codes, pair, heads=config.heads, attention=config.attention)
    q = q0 - (kappa * config.d**2 / c1) * grad
    scores = q @ codes.T
    if config.attention == "componentwise":
        scores = scores.clamp(max=700.0)
    weights = _weights(scores, config.attention)
    loss = (
        population_loss(q, codes, pair, heads=config.heads, attention=config.attention)
        if config.attention != "componentwise"
        else None
    )
    return VariantStep(
        config, pair, kappa, _weights(q0 @ codes.T, config.attention), weights,
        worst_case_loss(weights, pair, heads=config.heads),
        float(loss) if loss is not None else float(loss_of_weights(weights, pair, heads=config.heads)),
    )  # fmt: skip


@dataclass(frozen=True)
class VariantRow:
    """One normaliser, model, ``d`` and ``m``: the best worst case over step sizes, per draw."""

    attention: str
    heads: str
    d: int
    m: int
    code_kind: str
    best: tuple[float, ...]  # per draw: the smallest certified worst case over the step sizes
    best_kappa: tuple[float, ...]
    floor: tuple[float, ...]  # per draw: at every step size some input has at least this loss


@dataclass(frozen=True)
class VariantTable:
    """Rows of :class:`VariantRow`."""

    rows: tuple[VariantRow, ...]
    first_seed: int


def _dims(d: int) -> tuple[tuple[int, str], ...]:
    """Code dimensions tried at ``d``: the default, a larger one, and one-hot codes (m = d)."""
    default = Codes(d).m
    larger = min(4 * default, d)
    if d % 2 and larger % 2 == 0:
        larger -= 1
    dims = [(default, "balanced"), (larger, "balanced"), (d, "onehot")]
    return tuple(dict.fromkeys(dims))


@experiment
def variant_table(
    ds: tuple[int, ...] = (16, 64, 256),
    kinds: tuple[str, ...] = ATTENTION_KINDS,
    *,
    draws: int = 3,
    first_seed: int = 1000,
) -> VariantTable:
    """The best certified worst case of one population step, for every normaliser, model, ``d`` and code dimension."""
    ds = check_ds(ds, 4)
    kinds = tuple(
        check_choice(f"kinds[{k}]", kind, ATTENTION_KINDS) for k, kind in enumerate(check_sequence("kinds", kinds))
    )
    draws, first_seed = check_int("draws", draws, minimum=1), check_seed("first_seed", first_seed)
    rows = []
    cases = [
        (kind, heads, d, m, code_kind) for d in ds for m, code_kind in _dims(d) for heads in HEADS for kind in kinds
    ]
    for kind, heads, d, m, code_kind in progress(cases, "attention variants"):
        kappas = kappa_grid(d)
        results = []
        for seed in range(first_seed, first_seed + draws):
            config = ModelConfig(d, heads, m=m, attention=kind, code_kind=code_kind, code_seed=seed, init_seed=seed)
            results.append(best_worst_case(config, random_pair(d, seed=seed), kappas))
        best, kappa, floor = zip(*results, strict=True)
        rows.append(VariantRow(kind, heads, d, m, code_kind, best, kappa, floor))
    return VariantTable(tuple(rows), first_seed)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m xorlib.experiments.attention_variants [--full]``: the best worst case per normaliser."""
    parser = argparse.ArgumentParser(description="Softmax against the other normalisers.")
    parser.add_argument("--full", action="store_true", help="more d and draws")
    args = parser.parse_args(argv)
    table = variant_table((16, 64, 256, 1024), draws=10) if args.full else variant_table()
    for row in table.rows:
        print(
            f"{row.attention:>14} {row.heads:>6} d={row.d:<5} m={row.m:<5} {row.code_kind:>8}: "
            f"best certified worst case {max(row.best):.3g}; at every step some input has loss >= {min(row.floor):.3g}"
        )
    return 0


if __name__ == "__main__":  # run the package's module, so results carry the package's types
    from xorlib.experiments.attention_variants import main as package_main

    sys.exit(package_main())
