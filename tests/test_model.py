"""Tests of xorlib.model: shapes, parameter count, readout, initialisation, validation."""

from __future__ import annotations

import pytest
import torch

from xorlib.attention import ATTENTION_KINDS
from xorlib.data import all_inputs, xor_labels
from xorlib.model import (
    TwoHeadTransformer,
    head_outputs,
    head_weights,
    initial_queries,
    num_trainable_parameters,
    readout,
)


@pytest.mark.parametrize("attention", ATTENTION_KINDS)
def test_forward_shapes_and_uniform_start(attention: str) -> None:
    model = TwoHeadTransformer(30, 12, attention=attention)
    x = all_inputs(12)[:50].repeat(1, 3)[:, :30]
    f = model(x)
    assert f.shape == (50,)
    assert model.weights().shape == (2, 30)
    # Zero queries: uniform attention, z_h = mean(x), f = 1 - 2 mean(x)^2.
    assert torch.allclose(f, 1 - 2 * x.mean(1) ** 2)


def test_trainable_parameters_are_the_two_queries() -> None:
    for d, m in [(8, 5), (1000, 40)]:
        model = TwoHeadTransformer(d, m)
        assert num_trainable_parameters(model) == 2 * m
        assert [name for name, _ in model.named_parameters()] == ["queries"]
    assert num_trainable_parameters(TwoHeadTransformer(10**4)) == 2 * TwoHeadTransformer(10**4).m
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        num_trainable_parameters("model")


def test_xor_readout_is_exact_when_both_heads_split_the_pair() -> None:
    d, pair = 9, (2, 6)
    weights = torch.zeros(2, d, dtype=torch.float64)
    weights[:, list(pair)] = 0.5
    x = all_inputs(d)
    f = readout(head_outputs(weights, x), "xor")
    assert torch.equal(f, xor_labels(x, pair))
    # The product readout is not: it outputs 0 whenever the two bits differ.
    g = readout(head_outputs(weights, x), "product")
    assert torch.equal(g[xor_labels(x, pair) == 1], torch.zeros_like(g[xor_labels(x, pair) == 1]))


def test_product_readout_is_exact_when_the_heads_take_one_bit_each() -> None:
    d, pair = 7, (1, 4)
    weights = torch.zeros(2, d, dtype=torch.float64)
    weights[0, 1] = weights[1, 4] = 1.0
    x = all_inputs(d)
    assert torch.equal(readout(head_outputs(weights, x), "product"), xor_labels(x, pair))


def test_forward_matches_the_definition_with_random_queries() -> None:
    model = TwoHeadTransformer(20, 6, init="random", init_scale=2.0, init_seed=1)
    x = all_inputs(20)[:64]
    scores = model.codes @ model.queries.detach().T  # (d, 2)
    alpha = torch.softmax(scores, dim=0)
    z = x @ alpha
    assert torch.allclose(model(x), 1 - 2 * z[:, 0] * z[:, 1])


def test_random_initialisation_is_seeded_and_has_the_stated_scale() -> None:
    q = initial_queries(400, init="random", scale=3.0, seed=7)
    assert torch.equal(q, initial_queries(400, init="random", scale=3.0, seed=7))
    assert float(q.norm(dim=1).mean()) == pytest.approx(3.0, rel=0.1)
    assert torch.equal(initial_queries(5), torch.zeros(2, 5, dtype=torch.float64))


@pytest.mark.parametrize(
    ("call", "error", "text"),
    [
        (lambda: TwoHeadTransformer(10, attention="relu"), ValueError, "attention must be one of"),
        (lambda: TwoHeadTransformer(10, readout="sum"), ValueError, "readout must be one of"),
        (lambda: TwoHeadTransformer(10, code_kind="dense"), ValueError, "code_kind must be one of"),
        (lambda: TwoHeadTransformer(1), ValueError, "d must be >= 2"),
        (lambda: TwoHeadTransformer(10, 4)(torch.ones(3, 9)), ValueError, "last dimension 10"),
        (lambda: TwoHeadTransformer(10, 4)(torch.full((3, 10), float("nan"))), ValueError, "finite"),
        (lambda: head_weights(torch.zeros(3, 4), torch.zeros(10, 4)), ValueError, "2 heads"),
        (lambda: head_weights(torch.zeros(2, 4), torch.zeros(10, 5)), ValueError, "last dimension 4"),
        (lambda: initial_queries(4, init="random", scale=-1.0), ValueError, "scale must be >= 0"),
        (lambda: initial_queries(4, init="orthogonal"), ValueError, "init must be one of"),
    ],
)
def test_bad_input_raises_clear_errors(call, error, text) -> None:
    with pytest.raises(error, match=text):
        call()
