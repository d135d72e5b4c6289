"""The feed-forward baseline: the network, its hand-written gradients, online SGD and the one-step neuron."""

from __future__ import annotations

import pytest
import torch

from xorlib.baselines import (
    MLPResult,
    TwoLayerReLU,
    hinge_loss,
    mlp_step_flops,
    one_step_neuron_gradient,
    population_neuron_gradient,
    train_mlp_ensemble,
    train_mlp_online_sgd,
)
from xorlib.data import sample_xor


def test_parameter_count_and_shapes() -> None:
    net = TwoLayerReLU(10, 7, seed=0)
    assert sum(p.numel() for p in net.parameters()) == net.parameters_per_model() == 7 * 12 + 1
    x = torch.ones(5, 10)
    assert net(x).shape == (5,)
    ensemble = TwoLayerReLU(10, 7, seed=0, models=3)
    assert ensemble(x).shape == (3, 5)
    assert ensemble(torch.ones(3, 5, 10)).shape == (3, 5)


def test_ensemble_member_k_is_the_single_network_with_seed_plus_k() -> None:
    ensemble = TwoLayerReLU(6, 4, seed=10, models=3)
    for k in range(3):
        single = TwoLayerReLU(6, 4, seed=10 + k)
        for a, b in zip(ensemble.parameters(), single.parameters(), strict=True):
            assert torch.equal(a[k], b[0])


def test_default_initialisation_bounds() -> None:
    net = TwoLayerReLU(25, 400, seed=1)
    first, second = net.first.detach().abs().max(), net.second.detach().abs().max()
    assert 0.19 < float(first) <= 1 / 5
    assert float(second) <= 1 / 20


def test_hand_written_gradients_match_autograd() -> None:
    net = TwoLayerReLU(9, 6, seed=2, models=2, dtype=torch.float64)
    x, y = sample_xor(64, 9, (1, 4), seed=0, dtype=torch.float64)
    xb, yb = x.expand(2, -1, -1), y.expand(2, -1)
    *ours, loss = net.hinge_gradients(xb, yb)
    total = hinge_loss(net(xb), yb).mean(-1)
    assert torch.allclose(total.detach(), loss)
    reference = torch.autograd.grad(total.sum(), list(net.parameters()))
    for a, b in zip(ours, reference, strict=True):
        assert torch.allclose(a, b, atol=1e-12)


def test_one_step_neuron_gradient_matches_autograd() -> None:
    net = TwoLayerReLU(8, 5, seed=3, dtype=torch.float64)
    x, y = sample_xor(200, 8, (2, 6), seed=1, dtype=torch.float64)
    ours = one_step_neuron_gradient(net, x, y, unit=3)
    (reference,) = torch.autograd.grad(hinge_loss(net(x), y).mean(), [net.first])
    assert torch.allclose(ours, reference[0, 3], atol=1e-12)


def test_population_neuron_gradient_points_at_the_pair() -> None:
    # the two largest entries of a typical unit's population gradient are the pair (d = 12, all 4096 inputs)
    d, pair = 12, (3, 8)
    net = TwoLayerReLU(d, 64, seed=0, dtype=torch.float64)
    gradients = population_neuron_gradient(net, pair, unit=None).abs()
    assert torch.equal(gradients[5], population_neuron_gradient(net, pair, unit=5).abs())
    hits = sum(set(g.topk(2).indices.tolist()) == set(pair) for g in gradients)
    assert hits >= 40, hits


def test_online_sgd_reaches_full_accuracy_quickly_at_small_d() -> None:
    result = train_mlp_online_sgd(8, (1, 5), width=32, max_steps=2000, eval_every=10, seed=0)
    assert isinstance(result, MLPResult)
    assert result.steps_to_success is not None and result.steps_to_success <= 500
    assert result.steps_to_success % 10 == 0
    assert result.samples_to_success == 32 * result.steps_to_success
    assert result.accuracy[-1] == 1.0 and result.steps[-1] == result.steps_to_success
    assert result.flops_to_success == result.steps_to_success * mlp_step_flops(8, 32, 32)
    assert result.params == 32 * 10 + 1


def test_online_sgd_is_reproducible() -> None:
    a = train_mlp_online_sgd(8, (0, 3), width=16, max_steps=300, eval_every=10, seed=4)
    b = train_mlp_online_sgd(8, (0, 3), width=16, max_steps=300, eval_every=10, seed=4)
    assert a.steps_to_success == b.steps_to_success and a.accuracy == b.accuracy


def test_ensemble_trains_each_network_on_its_own_pair() -> None:
    results = train_mlp_ensemble(10, [(0, 1), (4, 9), (2, 7)], width=32, max_steps=3000, eval_every=10, seed=1)
    assert all(r.steps_to_success is not None for r in results)


def test_budget_too_small_gives_none() -> None:
    result = train_mlp_online_sgd(16, (0, 1), width=8, max_steps=5, eval_every=5)
    assert result.steps_to_success is None and result.samples_to_success is None and result.flops_to_success is None


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: TwoLayerReLU(1, 4), ValueError),
        (lambda: TwoLayerReLU(8, 0), ValueError),
        (lambda: TwoLayerReLU(8, 4, seed=-1), ValueError),
        (lambda: TwoLayerReLU(8, 4.5), TypeError),
        (lambda: TwoLayerReLU(8, 4)(torch.ones(3, 7)), ValueError),
        (lambda: TwoLayerReLU(8, 4, models=2)(torch.ones(3, 5, 8)), ValueError),
        (lambda: train_mlp_online_sgd(8, (0, 8)), ValueError),
        (lambda: train_mlp_online_sgd(8, (0, 1), lr=0.0), ValueError),
        (lambda: train_mlp_online_sgd(8, (0, 1), max_steps=10, eval_every=20), ValueError),
        (lambda: train_mlp_ensemble(8, []), ValueError),
        (lambda: one_step_neuron_gradient("net", torch.ones(2, 8), torch.ones(2)), TypeError),
        (lambda: one_step_neuron_gradient(TwoLayerReLU(8, 4), torch.ones(2, 8), torch.ones(2), unit=4), ValueError),
        (lambda: population_neuron_gradient(TwoLayerReLU(30, 2), (0, 1)), ValueError),
    ],
)
def test_bad_input_is_rejected(call, error) -> None:
    with pytest.raises(error):
        call()
