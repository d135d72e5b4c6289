"""Positional codes: exact balance and unit norm for every d, streaming = dense, reproducibility, speed-free checks."""

from __future__ import annotations

import math

import pytest
import torch
from _tolerance import EPS, assert_close

from xorlib.codes import Codes

BLOCK = Codes.BLOCK


@pytest.mark.parametrize("d", [4, 5, 16, 17, 64, 101, 1000, 1001, 2 * BLOCK + 6, 2 * BLOCK + 7])
def test_balanced_codes_are_exactly_balanced_with_unit_rows_for_every_d(d: int) -> None:
    codes = Codes(d, seed=3)
    signs = codes.dense() * math.sqrt(codes.nonzeros)
    integer = signs.round()
    assert torch.equal(signs, integer)  # entries are exactly +-1/sqrt(N) (and 0 for odd d)
    assert torch.equal(integer.sum(0), torch.zeros(codes.m, dtype=integer.dtype))  # every column sums to zero
    assert torch.equal((integer != 0).sum(1), torch.full((d,), codes.nonzeros))  # unit norm: N nonzeros per row
    m = max(8, math.ceil(4 * math.log2(d)))  # the default code dimension, made odd (at most d) for odd d
    assert codes.m == (min(m + (m % 2 == 0), d) if d % 2 else m)


def test_odd_d_needs_an_odd_code_dimension() -> None:
    with pytest.raises(ValueError, match="m must be odd"):
        Codes(1001, 40)
    assert Codes(1001, 41).nonzeros == 40


@pytest.mark.parametrize("kind", ["balanced", "iid", "gaussian", "onehot"])
@pytest.mark.parametrize("d", [12, 13, BLOCK + 2, BLOCK + 3])
def test_streamed_products_equal_the_dense_ones(kind: str, d: int) -> None:
    if kind == "onehot" and d > 100:
        pytest.skip("one-hot codes are d x d")
    m = None if kind in ("balanced", "onehot") else 10
    codes = Codes(d, m, seed=1, kind=kind)
    dense = codes.dense()
    q = torch.randn(3, codes.m, dtype=torch.float64)
    w = torch.randn(2, d, dtype=torch.float64)
    # Each score sums m products and each pull-back d: both ways round within gamma_n of the exact sums.
    assert_close(codes.scores(q), q @ dense.T, operations=codes.m + 2, scale=q.abs() @ dense.abs().T)
    assert_close(codes.pull(w), w @ dense, operations=d + 2, scale=w.abs() @ dense.abs())
    index = [0, d - 1, d // 2, 1]
    assert torch.equal(codes.rows(index), dense[index])


def test_codes_depend_only_on_their_seed() -> None:
    a, b = Codes(500, seed=7).dense(), Codes(500, seed=7).dense()
    assert torch.equal(a, b)
    assert not torch.equal(a, Codes(500, seed=8).dense())
    assert torch.equal(Codes(500, seed=7).dense(dtype=torch.float32), a.float())


def test_golden_values_pin_the_construction() -> None:
    """A change of construction must be deliberate: it changes every number in the book."""
    codes = Codes(64, seed=0)
    signs = (codes.dense() * math.sqrt(codes.m)).round().long()
    fingerprint = int(((signs[:, :8] > 0).long() * (2 ** torch.arange(8))).sum(1)[:6].sum())
    assert codes.m == 24
    assert fingerprint == GOLDEN


GOLDEN = 768


def test_margins_of_sign_codes_lie_on_the_lattice() -> None:
    """Every tied margin <p_u - p_k, p_u + p_v> is a multiple of 4/m (even d) or 1/N (odd d)."""
    for d in (16, 33, 64, 101):
        codes = Codes(d, seed=d)
        p = codes.dense()
        gram = p @ p.T
        for u, v in ((0, 1), (2, d - 1), (d // 2, d // 3)):
            margins = gram[u, u] + gram[u, v] - gram[:, u] - gram[:, v]
            steps = margins / codes.margin_step
            # four inner products of unit rows (m terms each, |sum| <= 1), three additions, one division
            tolerance = 2 * 4 * (codes.m + 4) * EPS / codes.margin_step
            assert float((steps - steps.round()).abs().max()) <= tolerance


def test_columns_are_independent_enough_for_the_tie_bound() -> None:
    """Per coordinate, three distinct rows are 'in the box' with probability <= 3/4 (measured, d = 16)."""
    hits, trials = 0, 0
    for seed in range(300):
        s = (Codes(16, seed=seed).dense() > 0).long()
        u, v, k = s[0], s[1], s[2]
        hits += int(((k == u) | (k == v)).sum())
        trials += s.shape[1]
    assert hits / trials < 0.75 + 0.01


def test_bad_code_arguments() -> None:
    with pytest.raises(ValueError, match="d must be"):
        Codes(3)
    with pytest.raises(ValueError, match="kind must be one of"):
        Codes(8, kind="sparse")
    with pytest.raises(ValueError, match="m must be an integer"):
        Codes(8, 10**8, kind="iid")
    with pytest.raises(ValueError, match="GiB"):
        Codes(10**9, 80).dense()
    with pytest.raises(ValueError, match="size 24 along axis -1"):
        Codes(64).scores(torch.zeros(2, 5, dtype=torch.float64))
    with pytest.raises(TypeError, match="floating"):
        Codes(64).scores(torch.zeros(2, 24, dtype=torch.int64))
