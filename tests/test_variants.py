"""Chapter 5's claims: the stationary start, the Jensen floor, and the alternatives falling short of softmax."""

from __future__ import annotations

import math

import torch

from xorlib.attention import attention_weights
from xorlib.codes import Codes
from xorlib.experiments.attention_variants import best_worst_case, kappa_grid, variant_table
from xorlib.model import ModelConfig
from xorlib.population import population_gradient
from xorlib.task import all_inputs, random_pair, xor_labels


def test_stationary_start() -> None:
    codes = Codes(16, seed=0).dense()
    zero = torch.zeros(2, codes.shape[1], dtype=torch.float64)
    for kind in ("linear", "relu"):
        assert not bool(population_gradient(zero, codes, (2, 9), heads="tied", attention=kind).any())


def test_jensen_floor() -> None:
    """Rest mass >= (1 - 1/d)(d alpha_max)^(-1/(d-1)) for any query; the tied model keeps a loss >= 1/8 (d = 12)."""
    d = 12
    codes = Codes(d, seed=3).dense()
    x = all_inputs(d)
    pair = (2, 7)
    for seed in range(40):
        q = torch.randn(codes.shape[1], dtype=torch.float64, generator=torch.Generator().manual_seed(seed)) * (
            0.2 + seed / 4
        )
        w = attention_weights(codes @ q, "componentwise")
        top = float(w.max())
        assert float(w.sum() - top) >= (1 - 1 / d) * (d * top) ** (-1 / (d - 1)) * (1 - 1e-12)
        z = x @ w
        worst = float((0.5 * (1 - 2 * z * z - xor_labels(x, pair)) ** 2).max())
        assert worst >= 1 / 8


def test_alternatives_fall_short() -> None:
    table = variant_table.uncached((16, 64), draws=1)
    for row in table.rows:
        if row.attention == "softmax":
            assert max(row.best) < 1e-20
        else:
            assert min(row.best) > 1e-2, row


def test_best_worst_case_is_found_on_the_grid() -> None:
    config = ModelConfig(32, "tied", attention="softmax", code_seed=1)
    best, kappa, floor = best_worst_case(config, random_pair(32, seed=1), kappa_grid(32))
    assert best < 1e-20 and 0 < kappa and floor <= best
    assert math.isclose(float(kappa_grid(100)[-1]), 1e12)
