"""Tests of xorlib.codes: norms, balance, coherence, margin, validation."""

from __future__ import annotations

import math

import pytest
import torch

from xorlib.codes import coherence, default_code_dim, pair_margin, positional_codes


@pytest.mark.parametrize("kind", ["balanced", "iid"])
def test_codes_have_unit_norm_and_are_seeded(kind: str) -> None:
    codes = positional_codes(101, 24, kind=kind, seed=3)
    assert codes.shape == (101, 24)
    assert torch.allclose(codes.norm(dim=1), torch.ones(101, dtype=codes.dtype))
    assert torch.equal(codes, positional_codes(101, 24, kind=kind, seed=3))
    assert not torch.equal(codes, positional_codes(101, 24, kind=kind, seed=4))


def test_balanced_codes_sum_to_zero_for_even_d_and_nearly_for_odd_d() -> None:
    even = positional_codes(200, 16, seed=0)
    assert torch.allclose(even.sum(0), torch.zeros(16, dtype=even.dtype), atol=1e-12)
    odd = positional_codes(201, 16, seed=0)
    assert torch.allclose(odd.sum(0).abs(), torch.full((16,), 1 / 4, dtype=odd.dtype))


def test_onehot_codes_are_the_identity() -> None:
    assert torch.equal(positional_codes(7, kind="onehot"), torch.eye(7, dtype=torch.float64))
    with pytest.raises(ValueError, match="m must be >= 7"):
        positional_codes(7, 5, kind="onehot")


def test_coherence_matches_brute_force_and_the_random_code_scale() -> None:
    codes = positional_codes(300, 64, seed=1)
    gram = codes @ codes.T
    gram.fill_diagonal_(0)
    assert coherence(codes, block=37) == pytest.approx(float(gram.abs().max()))
    # Hoeffding + union bound: mu <= sqrt(2 ln(d^2 / delta) / m) with delta = 1e-3.
    assert coherence(codes) <= math.sqrt(2 * math.log(300**2 / 1e-3) / 64)


def test_pair_margin_is_positive_for_default_codes_and_matches_definition() -> None:
    codes = positional_codes(1000, seed=2)
    pair = (17, 640)
    direction = codes[17] + codes[640]
    scores = codes @ direction
    others = torch.cat([scores[:17], scores[18:640], scores[641:]])
    assert pair_margin(codes, pair) == pytest.approx(float(scores[17] - others.max()))
    assert pair_margin(codes, pair) > 0


def test_default_code_dim_grows_like_log_d() -> None:
    dims = [default_code_dim(10**k) for k in range(1, 7)]
    assert dims == sorted(dims)
    assert default_code_dim(10**6) == math.ceil(4 * math.log2(10**6))
    assert default_code_dim(2) == 8


@pytest.mark.parametrize(
    ("call", "error", "text"),
    [
        (lambda: positional_codes(1, 4), ValueError, "d must be >= 2"),
        (lambda: positional_codes(8, 0), ValueError, "m must be >= 1"),
        (lambda: positional_codes(8, 4, kind="gaussian"), ValueError, "kind must be one of"),
        (lambda: coherence("codes"), TypeError, "codes must be a torch.Tensor"),
        (lambda: pair_margin(torch.eye(4, dtype=torch.float64), (0, 4)), ValueError, "pair"),
        (lambda: default_code_dim(10, factor=0), ValueError, "factor must be > 0"),
    ],
)
def test_bad_input_raises_clear_errors(call, error, text) -> None:
    with pytest.raises(error, match=text):
        call()


def reference_balanced_codes(d: int, m: int, seed: int) -> torch.Tensor:
    """The straightforward construction: one permuted balanced sign vector per coordinate, stacked."""
    generator = torch.Generator().manual_seed(seed)
    template = torch.ones(d, dtype=torch.int8)
    template[(d + 1) // 2 :] = -1
    columns = [template[torch.randperm(d, generator=generator)] for _ in range(m)]
    return torch.stack(columns, dim=1).to(torch.float64) / math.sqrt(m)


@pytest.mark.parametrize(("d", "m", "seed"), [(2, 1, 0), (11, 5, 3), (1000, 37, 9), (4096, 64, 1)])
def test_in_place_construction_equals_the_straightforward_one_bit_for_bit(d: int, m: int, seed: int) -> None:
    assert torch.equal(positional_codes(d, m, seed=seed), reference_balanced_codes(d, m, seed))


def test_codes_do_not_depend_on_the_device_they_are_put_on() -> None:
    # Drawn on the CPU, then moved: 'meta' stands in for another device's placement.
    assert positional_codes(50, 8, seed=2, device="meta").shape == (50, 8)
    assert positional_codes(50, 8, seed=2, device="cpu").device.type == "cpu"
