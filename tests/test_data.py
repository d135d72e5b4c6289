"""Tests of xorlib.data: sampling, labels, enumeration, validation."""

from __future__ import annotations

import pytest
import torch

from xorlib.data import all_inputs, random_pair, sample_inputs, sample_xor, xor_labels


def test_samples_are_signs_of_the_right_shape_and_balanced() -> None:
    x = sample_inputs(20_000, 12, seed=1)
    assert x.shape == (20_000, 12)
    assert set(x.unique().tolist()) == {-1.0, 1.0}
    # Each bit is a fair coin: the mean is within 5 standard errors of 0.
    assert float(x.mean(0).abs().max()) < 5 / 20_000**0.5


def test_same_seed_same_samples_other_seed_other_samples() -> None:
    assert torch.equal(sample_inputs(50, 9, seed=4), sample_inputs(50, 9, seed=4))
    assert not torch.equal(sample_inputs(50, 9, seed=4), sample_inputs(50, 9, seed=5))


def test_labels_are_minus_the_product_of_the_pair() -> None:
    x, y = sample_xor(1000, 10, (2, 7), seed=0)
    assert torch.equal(y, -x[:, 2] * x[:, 7])
    assert torch.equal(xor_labels(x, (7, 2)), y)


def test_label_is_uncorrelated_with_every_single_bit_and_other_pair() -> None:
    x = all_inputs(8)
    y = xor_labels(x, (1, 5))
    assert torch.allclose(x.T @ y, torch.zeros(8, dtype=x.dtype))
    pairs = x[:, :, None] * x[:, None, :]
    correlation = torch.einsum("nij,n->ij", pairs, y) / x.shape[0]
    expected = torch.zeros(8, 8, dtype=x.dtype)
    expected[1, 5] = expected[5, 1] = -1.0
    assert torch.allclose(correlation, expected)


def test_all_inputs_enumerates_the_cube_once() -> None:
    x = all_inputs(10)
    assert x.shape == (1024, 10)
    assert torch.unique(x, dim=0).shape[0] == 1024
    assert torch.equal(x[0], torch.ones(10, dtype=x.dtype))


def test_random_pair_is_two_distinct_sorted_positions_and_seeded() -> None:
    pairs = {random_pair(6, seed=s) for s in range(200)}
    assert all(0 <= i < j < 6 for i, j in pairs)
    assert len(pairs) == 15  # every one of C(6, 2) pairs appears
    assert random_pair(1000, seed=3) == random_pair(1000, seed=3)


@pytest.mark.parametrize(
    ("call", "error", "text"),
    [
        (lambda: sample_inputs(0, 5), ValueError, "n must be >= 1"),
        (lambda: sample_inputs(5, 1), ValueError, "d must be >= 2"),
        (lambda: sample_inputs(5.0, 5), TypeError, "n must be an integer"),
        (lambda: sample_inputs(5, 5, seed=-1), ValueError, "seed must be >= 0"),
        (lambda: sample_inputs(5, 5, device="nowhere"), ValueError, "device"),
        (lambda: sample_xor(5, 5, (1, 1)), ValueError, "distinct"),
        (lambda: sample_xor(5, 5, (1, 5)), ValueError, r"pair\[1\] must be <= 4"),
        (lambda: sample_xor(5, 5, 3), TypeError, "pair must be a pair"),
        (lambda: xor_labels(torch.ones(4), (0, 1)), ValueError, "x must have 2 dimensions"),
        (lambda: all_inputs(30), ValueError, "d must be <= 22"),
        (lambda: random_pair(1), ValueError, "d must be >= 2"),
    ],
)
def test_bad_input_raises_clear_errors(call, error, text) -> None:
    with pytest.raises(error, match=text):
        call()
