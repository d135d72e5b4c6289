"""The sparse XOR task: labels, sampling, enumeration, and bad input."""

from __future__ import annotations

import pytest
import torch

from xorlib.task import all_inputs, random_pair, sample_xor, xor_labels


def test_labels_are_minus_the_product_of_the_hidden_bits() -> None:
    x = all_inputs(4)
    y = xor_labels(x, (1, 3))
    assert torch.equal(y, -x[:, 1] * x[:, 3])
    assert float(y.mean()) == 0.0  # balanced over the cube


def test_all_inputs_are_distinct_signs() -> None:
    x = all_inputs(10)
    assert x.shape == (1024, 10)
    assert torch.unique(x, dim=0).shape[0] == 1024
    assert set(x.unique().tolist()) == {-1.0, 1.0}


def test_random_pair_is_uniform_and_ordered() -> None:
    counts: dict[tuple[int, int], int] = {}
    for seed in range(3000):
        pair = random_pair(4, seed=seed)
        assert 0 <= pair[0] < pair[1] < 4
        counts[pair] = counts.get(pair, 0) + 1
    assert len(counts) == 6
    assert max(counts.values()) - min(counts.values()) < 150  # 500 expected each


def test_samples_are_reproducible_and_balanced() -> None:
    x, y = sample_xor(20_000, 30, (2, 7), seed=5)
    x2, y2 = sample_xor(20_000, 30, (2, 7), seed=5)
    assert torch.equal(x, x2) and torch.equal(y, y2)
    assert abs(float(x.mean())) < 0.01 and abs(float(y.mean())) < 0.02
    assert torch.equal(y, -x[:, 2] * x[:, 7])
    assert not torch.equal(x, sample_xor(20_000, 30, (2, 7), seed=6)[0])


def test_samples_do_not_depend_on_the_thread_count() -> None:
    previous = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = sample_xor(500, 40, (0, 1), seed=3)[0]
        torch.set_num_threads(2)
        two = sample_xor(500, 40, (0, 1), seed=3)[0]
    finally:
        torch.set_num_threads(previous)
    assert torch.equal(one, two)


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: sample_xor(10**12, 8, (0, 1)), ValueError, "n must be"),
        (lambda: sample_xor(2**31, 2, (0, 1)), ValueError, "GiB"),
        (lambda: sample_xor(0, 8, (0, 1)), ValueError, "n must be"),
        (lambda: sample_xor(5, 8, (0, 8)), ValueError, "pair[1]"),
        (lambda: sample_xor(5, 8, (3, 3)), ValueError, "distinct"),
        (lambda: sample_xor(5, 8, (0, 1), dtype=torch.int64), TypeError, "dtype"),
        (lambda: sample_xor(5, 8, (0, 1), device="cuda:7"), ValueError, "device"),
        (lambda: sample_xor(5, 8, (0, 1), seed=-1), ValueError, "seed must be"),
        (lambda: xor_labels(all_inputs(4).long(), (0, 1)), TypeError, "floating"),
        (lambda: xor_labels(2 * all_inputs(4), (0, 1)), ValueError, "-1, +1"),
        (lambda: all_inputs(40), ValueError, "d must be"),
        (lambda: random_pair(1), ValueError, "d must be"),
        (lambda: random_pair(8.0), TypeError, "d must be an integer"),
    ],
)
def test_bad_input_gets_a_clear_error(call, error, words) -> None:
    with pytest.raises(error, match=words.replace("[", r"\[").replace("+", r"\+")):
        call()
