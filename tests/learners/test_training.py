"""Multi-step training: the update is the closed-form gradient, the curves are the certificates, divergence raises."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from _tolerance import assert_close, gamma

from xorlib._random import derive_seed
from xorlib.certify import certify_scores
from xorlib.empirical import empirical
from xorlib.learners import _training as training
from xorlib.learners._training import DivergenceError, TrainConfig, train, train_runs, worst_and_margin
from xorlib.model import ModelConfig, TwoHeadModel
from xorlib.population import population
from xorlib.task import all_inputs, sample_xor


def test_first_sgd_step_is_minus_lr_times_the_population_gradient() -> None:
    model = ModelConfig(16, "split", init_seed=3)
    config = TrainConfig(model, (2, 9), steps=1, optimizer="sgd", lr=7.0)
    start = model.initial_queries()
    step = population(model, start, (2, 9))
    expected = start - 7.0 * step.gradient
    result = train(config)
    # batched (runs x heads) and single products of the same sums over d = 16 positions and m coordinates
    assert_close(result.queries, expected, operations=4 * 16 * model.m, scale=float(expected.abs().max()) + 7.0)
    assert result.loss[0] == pytest.approx(float(step.loss))


def test_training_decreases_the_loss_and_records_certificates() -> None:
    config = TrainConfig(ModelConfig(16, "split"), (2, 9), steps=40)
    result = train(config)
    assert result.loss[-1] < 0.01 * result.loss[0]
    scores = result.queries @ result.model.codes.dense().T
    certified = float(certify_scores(result.model, scores, (2, 9)).upper)
    assert result.worst_case[-1] == pytest.approx(certified, rel=1e-12)  # the same log-domain formula, batched
    assert result.steps_to_success is not None and result.worst_case[result.steps_to_success] < config.epsilon
    assert result.steps_to_success == 0 or result.worst_case[result.steps_to_success - 1] >= config.epsilon
    assert result.steps_to_sign <= result.steps_to_success
    # the certificate is an upper bound on the exact worst case over all 2^16 inputs
    x = all_inputs(16)
    worst, margin = worst_and_margin(result.weights, x, -x[:, 2] * x[:, 9], result.model)
    assert worst <= result.worst_case[-1] * (1 + 1e-9) and margin > 0


def test_runs_are_independent_and_match_single_runs() -> None:
    base = TrainConfig(ModelConfig(12, "tied", code_seed=5), (0, 7), steps=5)
    batch = train_runs(base, 3)
    shifted = dataclasses.replace(base, model=dataclasses.replace(base.model, code_seed=7, init_seed=2))
    single = train(shifted)
    # Adam divides each coordinate's step by sqrt(v) + 1e-8: a rounding difference delta of a gradient entry (a
    # sum over d positions, batched or not) moves a step by at most lr * delta / 1e-8, over `steps` steps.
    m = base.model.m
    tolerance = base.steps * base.lr * 2 * gamma(4 * 12 * m) * 4.0 / 1e-8
    assert float((batch[2].queries - single.queries).abs().max()) <= tolerance
    assert batch[2].model == shifted.model


def test_batched_empirical_gradient_matches_the_single_run_formula() -> None:
    model = ModelConfig(10, "split", init_seed=1)
    codes = model.codes.dense()
    queries = torch.stack([model.initial_queries(), 0.5 * model.initial_queries()])
    samples = [sample_xor(50, 10, (1, 8), seed=s) for s in (0, 1)]
    x, y = torch.stack([s[0] for s in samples]), torch.stack([s[1] for s in samples])
    c0, c1 = model.readout
    _, grad = training._empirical(queries @ codes.T, x, y, c0, c1, model.normaliser)
    for r in range(2):
        expected = empirical(model, queries[r], x[r], y[r]).score_gradient
        # Means over n = 50 samples of products of sums over d = 10 positions, batched or not: the scale is the sum
        # of the terms' magnitudes, |residual| |z| / n summed against |x| (the softmax pull-back at most doubles it).
        weights = torch.softmax(queries[r] @ codes.T, -1)
        z = weights @ x[r].T
        residual = (c0 - c1 * z[0] * z[1] - y[r]).abs()
        terms = (c1 / 50) * (residual * z.flip(0).abs()) @ x[r].abs()
        assert_close(grad[r], expected, operations=50 + 2 * 10, scale=2 * terms + 1e-300)
    # and the empirical trainer's loss is the mean squared loss of the model on its sample
    result = train(TrainConfig(model, (1, 8), steps=0, gradient="empirical", n=64))
    net = TwoHeadModel(model)
    xs, ys = sample_xor(64, 10, (1, 8), seed=derive_seed(0, "train", 0))
    with torch.no_grad():
        assert result.train_loss[0] == pytest.approx(float(0.5 * ((net(xs) - ys) ** 2).mean()))


def test_empirical_training_fits_its_sample() -> None:
    result = train(TrainConfig(ModelConfig(16, "split"), (3, 11), steps=60, gradient="empirical", n=2000))
    assert result.train_loss[-1] < 0.05 * result.train_loss[0]
    assert result.steps_to_sign is not None


def test_divergence_raises_a_clear_error() -> None:
    config = TrainConfig(ModelConfig(16, "split", attention="linear"), (1, 5), steps=50, optimizer="sgd", lr=1e6)
    with pytest.raises(DivergenceError, match="training diverged at step"):
        train(config)
    assert issubclass(DivergenceError, ValueError)


def test_worst_and_margin_is_the_brute_force_over_inputs() -> None:
    model = TwoHeadModel(ModelConfig(8, "tied", start="independent", sigma=3.0))
    x = all_inputs(8)
    y = -x[:, 1] * x[:, 4]
    f = model(x).detach()
    worst, margin = worst_and_margin(model.weights().detach(), x, y, model.config)
    assert worst == pytest.approx(float((0.5 * (f - y) ** 2).max()))
    assert margin == pytest.approx(float((y * f).min()))
