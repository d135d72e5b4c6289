"""The MLP baseline: hand-written gradients against autograd, the protocol, divergence, and bad inputs."""

from __future__ import annotations

import pytest
import torch
from _tolerance import assert_close, gamma

from xorlib._random import generator
from xorlib.learners._mlp import (
    BARAK_EVAL_N,
    MLPConfig,
    MLPParams,
    _all_correct,
    _forward,
    _fresh,
    _labels,
    hinge_gradients,
    init_mlp,
    min_margin,
    mlp_forward,
    mlp_snapshots,
    train_mlp,
)
from xorlib.learners._training import DivergenceError
from xorlib.task import all_inputs, sample_xor


def _autograd_reference(params: MLPParams, x: torch.Tensor, y: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
    """The same networks written as plain torch code, differentiated by autograd."""
    leaves = [p.clone().requires_grad_(True) for p in params]
    first, first_bias, second, second_bias = leaves
    hidden = torch.relu(torch.einsum("mwd,mnd->mnw", first, x) + first_bias.unsqueeze(1))
    f = torch.einsum("mnw,mw->mn", hidden, second) + second_bias.unsqueeze(1)
    loss = torch.clamp(1 - y * f, min=0).mean(-1)
    return list(torch.autograd.grad(loss.sum(), leaves)), loss.detach()


def test_hand_written_gradients_match_autograd() -> None:
    params = init_mlp(9, 7, models=3, seed=2, dtype=torch.float64)
    x, y = sample_xor(64, 9, (1, 4), seed=0)
    x, y = x.expand(3, -1, -1), y.expand(3, -1)
    ours, loss = hinge_gradients(params, x, y)
    reference, reference_loss = _autograd_reference(params, x, y)
    assert torch.allclose(loss, reference_loss)
    for a, b in zip(ours, reference, strict=True):
        # means over 64 samples of terms at most 1 in size (|g_f| <= 1/B, |a|, |w|, |x| <= 1), through W + d sums
        assert_close(a, b, operations=64 + 7 + 9, scale=1.0)
    assert float(loss.min()) > 0  # the hinge is active, so the gradients are not trivially zero
    assert all(float(g.abs().max()) > 0 for g in ours)


def test_parameter_count_shapes_and_default_initialisation() -> None:
    config = MLPConfig(10, width=7)
    params = init_mlp(10, 7, models=2, seed=0)
    assert sum(p[0].numel() for p in params) == config.parameters == 7 * 12 + 1
    assert mlp_forward(params, torch.ones(5, 10)).shape == (2, 5)
    wide = init_mlp(25, 400, seed=1)
    assert 0.19 < float(wide.first.abs().max()) <= 1 / 5  # uniform on +-1/sqrt(fan-in)
    assert float(wide.second.abs().max()) <= 1 / 20


def test_network_k_does_not_depend_on_the_ensemble_size() -> None:
    small, large = init_mlp(6, 4, models=2, seed=10), init_mlp(6, 4, models=3, seed=10)
    for a, b in zip(small, large, strict=True):
        assert torch.equal(a, b[:2])
    # the same holds for the training run: network 0 alone, or beside another network
    alone = train_mlp(MLPConfig(8, lr=1.0, max_steps=400), [(1, 5)], seed=3)
    beside = train_mlp(MLPConfig(8, lr=1.0, max_steps=400), [(1, 5), (0, 2)], seed=3)
    assert alone.steps_to_success[0] == beside.steps_to_success[0] is not None


def test_barak_protocol_succeeds_at_small_d_and_success_means_every_input() -> None:
    # at d = 8 the 8192 fresh test samples cover all 256 inputs (except with probability ~ e^-32)
    run = train_mlp(MLPConfig(8, width=32, lr=0.1, max_steps=3000), [(1, 5), (2, 6), (0, 7)], seed=0)
    assert run.success_fraction == 1.0 and max(run.steps_to_success) <= 1500
    assert run.samples_to_success == tuple(32 * s for s in run.steps_to_success)
    assert bool((min_margin(run.params, run.pairs) > 0).all())


def test_min_margin_is_the_smallest_margin_over_all_inputs() -> None:
    params = init_mlp(8, 16, models=2, seed=4)
    pairs = [(0, 3), (2, 7)]
    x = all_inputs(8, dtype=torch.float32)
    f = mlp_forward(params, x)
    direct = torch.stack([(-x[:, i] * x[:, j] * f[k]).min() for k, (i, j) in enumerate(pairs)])
    assert torch.allclose(min_margin(params, pairs), direct)
    # a sample's min is >= the true min, up to the float32 rounding of outputs of size <= W = 16 (sums of W + d terms)
    slack = 2 * gamma(16 + 8, torch.float32) * 16
    assert bool((min_margin(params, pairs, samples=4096, seed=1) >= direct - slack).all())


def test_min_margin_may_stop_once_every_network_is_at_most_a_level() -> None:
    """``stop_at`` (chapter 7's snapshots): every criterion at a level >= stop_at is decided as by the minimum."""
    pairs = [(0, 3), (2, 7), (1, 4)]
    untrained = init_mlp(16, 16, models=3, seed=4)  # 2^16 inputs: four chunks
    exact, early = min_margin(untrained, pairs), min_margin(untrained, pairs, stop_at=0.0)
    assert bool((exact <= early).all()) and bool((early <= 0.0).all())  # stopped: a margin some input has
    sampled = min_margin(untrained, pairs, samples=9000, seed=1)
    assert bool((sampled <= min_margin(untrained, pairs, samples=9000, seed=1, stop_at=0.0)).all())
    run = train_mlp(MLPConfig(8, width=32, lr=0.1, max_steps=3000), [(1, 5), (2, 6)], seed=0)
    assert bool((min_margin(run.params, run.pairs) > 0).all())  # not every network is <= 0: it reads every input
    assert torch.equal(min_margin(run.params, run.pairs, stop_at=0.0), min_margin(run.params, run.pairs))


def test_the_success_test_in_chunks_is_the_test_on_all_inputs_at_once() -> None:
    """The fresh test reads its inputs in chunks and stops at the first wrong sign: each output agrees with one
    product over all the inputs within its rounding bound, so the verdict is the same wherever the signs are
    decided beyond that bound (a wrong sign outside it, or every sign outside it)."""
    verdicts = set()
    for d in (10, 30):
        untrained = init_mlp(d, 128, models=2, seed=1)
        run = train_mlp(MLPConfig(d, lr=1.0, max_steps=400), [(1, 5), (0, 7)], seed=3)
        for params in (untrained, run.params):
            one = MLPParams(*(p[:1] for p in params))
            x = _fresh([generator(0, "test-chunks", d)], BARAK_EVAL_N, d, torch.float32)
            whole = _forward(one, x)[2]
            chunks = torch.cat([_forward(one, x[:, s : s + 1000])[2] for s in range(0, x.shape[1], 1000)], dim=1)
            scale = _forward(MLPParams(*(p.abs() for p in one)), x.abs())[2]  # the sum of |terms| of each output
            operations = d + one.first.shape[1] + 2
            assert_close(chunks, whole, operations=operations, scale=scale, dtype=torch.float32)
            index = torch.tensor([[1, 5]])
            signed = _labels(x, index) * whole
            decided = whole.abs() > 2 * gamma(operations, torch.float32) * scale
            verdict = _all_correct(one, x, index)
            if bool((decided & (signed <= 0)).any()) or bool(decided.all()):
                assert verdict == bool((signed > 0).all())
                verdicts.add(verdict)
    assert verdicts == {True, False}


def test_snapshots_follow_the_same_run_as_train_mlp() -> None:
    config = MLPConfig(8, lr=0.01, max_steps=50)  # too slow to succeed (and be frozen) within 50 steps
    run = train_mlp(config, [(1, 5)], seed=7)
    assert run.steps_to_success == (None,)
    snaps = mlp_snapshots(config, [(1, 5)], (10, 50), seed=7)
    assert snaps.steps == (10, 50)
    for a, b in zip(snaps.params[-1], run.params, strict=True):
        assert torch.equal(a, b)
    assert not torch.equal(snaps.params[0].first, snaps.params[1].first)


def test_divergence_raises_instead_of_reporting_accuracy_zero() -> None:
    with pytest.raises(DivergenceError, match="diverged at step"):
        train_mlp(MLPConfig(8, lr=1e4, max_steps=200), [(1, 5)])
    huge = init_mlp(8, 4)
    huge.first.mul_(3e38)  # finite, but the outputs overflow
    with pytest.raises(DivergenceError, match="NaN or infinite"):
        min_margin(huge, [(1, 5)])


def test_a_frozen_network_is_skipped_without_changing_the_others() -> None:
    """Networks that succeeded are frozen and no longer computed: each network of the ensemble ends as it ends
    when trained alone, though the others froze at other steps."""
    config = MLPConfig(8, width=16, lr=1.0, max_steps=400)
    pairs = [(1, 5), (0, 7), (2, 3)]
    run = train_mlp(config, pairs, seed=2)
    assert len(set(run.steps_to_success)) > 1 and None not in run.steps_to_success  # they froze at different steps
    for k in range(len(pairs)):
        alone = train_mlp(config, pairs[: k + 1], seed=2)  # network k's streams do not depend on the ensemble
        assert alone.steps_to_success[k] == run.steps_to_success[k]
        # the same float32 operations on the same numbers, in batches of other sizes: a BLAS that blocks a batch by
        # its size may round each step's sums (over d + W + batch terms of size <= 1) differently
        for a, b in zip(alone.params, run.params, strict=True):
            assert_close(a[k], b[k], operations=400 * (8 + 16 + 32), scale=1.0 + b[k].abs(), dtype=torch.float32)
