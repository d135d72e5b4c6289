"""The streamed empirical gradient (packed bits, look-up tables, histograms) = the dense closed form on the same samples."""

from __future__ import annotations

import pytest
import torch
from _tolerance import gamma

from xorlib._moments import empirical_objective
from xorlib._samples import BLOCK_BYTES, chunk_rows, score_gradients, stream_samples
from xorlib.model import ModelConfig


def _forward_error_bound(weights: torch.Tensor, x: torch.Tensor, y: torch.Tensor, c0: float, c1: float):
    r"""A bound on each entry of the score gradient's error from the float32 forward pass (rigorous to first order).

    Each head output :math:`z_h` is a float32 sum of ``ceil(d/8)`` table entries, each a float32 rounding of a sum of
    eight weights: :math:`|\delta z_h| \le e_h = \gamma^{(32)}_{d/8+8}\sum_k|\alpha_{h,k}|`. The pull
    :math:`p_1 = r z_2` then moves by at most :math:`c_1(|z_1|e_2+|z_2|e_1+e_1e_2)(|z_2|+e_2) + |r|e_2`, the weight
    gradient by the mean of that, and the softmax pull-back :math:`\alpha\odot(g - \langle\alpha, g\rangle)` by
    :math:`2\alpha_k` times it. The float64 sums differ in order by :math:`\gamma_{n+d}` of their absolute terms.
    """
    per_row = (x.shape[1] + 7) // 8
    e = gamma(per_row + 8, torch.float32) * weights.abs().sum(-1)  # (2,)
    z = weights @ x.T  # (2, n)
    r = c0 - c1 * z[0] * z[1] - y
    moved = torch.stack(
        [
            c1 * (z[0].abs() * e[1] + z[1].abs() * e[0] + e[0] * e[1]) * (z[1].abs() + e[1]) + r.abs() * e[1],
            c1 * (z[0].abs() * e[1] + z[1].abs() * e[0] + e[0] * e[1]) * (z[0].abs() + e[0]) + r.abs() * e[0],
        ]
    )
    terms = (r.abs() * z.flip(0).abs()).mean(-1)  # the mean of |p_h x_s|
    per_head = c1 * (moved.mean(-1) + 2 * gamma(x.shape[0] + x.shape[1]) * terms)
    return 2 * weights * per_head[:, None] + 1e-300


@pytest.mark.parametrize(("d", "heads"), [(13, "split"), (40, "tied"), (64, "split"), (5000, "split")])
def test_streamed_gradient_equals_the_dense_closed_form(d: int, heads: str) -> None:
    model = ModelConfig(d, heads, code_seed=3, init_seed=4)
    scores = model.initial_queries() @ model.codes.dense().T
    pair, seed = (2, d - 3), 7
    # the last size spans two chunks; at d = 5000 a chunk (1024 rows) is cut into passes of BLOCK_BYTES
    sizes = [5, 1000, chunk_rows(d) + 37] if d < 5000 else [5, 900, 1100]
    assert d < 5000 or chunk_rows(d) * ((d + 7) // 8) > BLOCK_BYTES
    streamed = score_gradients(scores, pair, model.readout, model.normaliser, sizes, seed)
    weights = model.normaliser.weights(scores)
    for n, got in zip(sizes, streamed, strict=True):
        x, y = stream_samples(d, pair, seed, n)
        assert x.shape == (n, d) and set(x.unique().tolist()) == {-1.0, 1.0}
        _, expected = empirical_objective(scores, x, y, model.readout, model.normaliser)
        bound = _forward_error_bound(weights, x, y, *model.readout)
        assert bool(((got - expected).abs() <= bound).all()), float(((got - expected).abs() / bound).max())
        assert float((got - expected).abs().max()) < 1e-3 * float(expected.abs().max())  # a real slip fails here


def test_nested_prefixes_equal_independent_computations_bitwise() -> None:
    d = 24
    model = ModelConfig(d, "split", code_seed=1, init_seed=2)
    scores = model.initial_queries() @ model.codes.dense().T
    sizes = [17, 400, chunk_rows(d), chunk_rows(d) + 1, 3 * chunk_rows(d) - 5]
    together = score_gradients(scores, (0, 5), model.readout, model.normaliser, sizes, 9)
    for n, got in zip(sizes, together, strict=True):
        alone = score_gradients(scores, (0, 5), model.readout, model.normaliser, [n], 9)[0]
        assert torch.equal(got, alone)  # the histograms add the samples one at a time, in stream order
    assert not torch.equal(together[0], together[1])


def test_several_starts_on_one_stream_equal_each_start_alone() -> None:
    d = 32
    starts = [ModelConfig(d, "split", code_seed=1, init_seed=s, sigma=sigma) for s, sigma in ((1, 1.0), (2, 0.1))]
    dense = starts[0].codes.dense()
    scores = torch.stack([m.initial_queries() @ dense.T for m in starts])
    sizes = [300, 5000]
    both = score_gradients(scores, (3, 9), starts[0].readout, starts[0].normaliser, sizes, 4)
    for k, model in enumerate(starts):
        alone = score_gradients(scores[k], (3, 9), model.readout, model.normaliser, sizes, 4)
        for n, a, b in zip(sizes, alone, both, strict=True):
            x, y = stream_samples(d, (3, 9), 4, n)
            bound = _forward_error_bound(model.normaliser.weights(scores[k]), x, y, *model.readout)
            assert b.shape == (2, 2, d) and bool(((b[k] - a).abs() <= 2 * bound).all())


def test_the_stream_is_the_same_whatever_its_length() -> None:
    d = 20
    x_short, y_short = stream_samples(d, (1, 4), 3, 50)
    x_long, y_long = stream_samples(d, (1, 4), 3, chunk_rows(d) + 10)
    assert torch.equal(x_short, x_long[:50]) and torch.equal(y_short, y_long[:50])
    assert torch.equal(y_long, -x_long[:, 1] * x_long[:, 4])
    assert not torch.equal(x_short, stream_samples(d, (1, 4), 4, 50)[0])


def test_the_gradient_does_not_depend_on_the_thread_count() -> None:
    d = 48
    model = ModelConfig(d, "split", code_seed=5, init_seed=6)
    scores = model.initial_queries() @ model.codes.dense().T
    previous = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = score_gradients(scores, (1, 2), model.readout, model.normaliser, [3000, 20000], 8)
        torch.set_num_threads(2)
        two = score_gradients(scores, (1, 2), model.readout, model.normaliser, [3000, 20000], 8)
    finally:
        torch.set_num_threads(previous)
    assert all(torch.equal(a, b) for a, b in zip(one, two, strict=True))
