"""Multi-step training: the update is the closed-form gradient, the curves are the certificates, divergence raises."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from xorlib.certify import certify_scores
from xorlib.empirical import empirical_score_gradient
from xorlib.learners import training
from xorlib.learners.training import DivergenceError, TrainConfig, train, train_runs, worst_and_margin
from xorlib.model import ModelConfig, TwoHeadModel
from xorlib.population import population_gradient, population_loss
from xorlib.task import all_inputs, sample_xor


def test_first_sgd_step_is_minus_lr_times_the_population_gradient() -> None:
    model = ModelConfig(16, "split", init_seed=3)
    config = TrainConfig(model, (2, 9), steps=1, optimizer="sgd", lr=7.0)
    start, codes = model.initial_queries(), model.codes.dense()
    expected = start - 7.0 * population_gradient(start, codes, (2, 9), heads="split")
    result = train(config)
    assert torch.allclose(result.queries, expected, atol=1e-14)
    assert result.loss[0] == pytest.approx(float(population_loss(start, codes, (2, 9), heads="split")))


def test_training_decreases_the_loss_and_records_certificates() -> None:
    config = TrainConfig(ModelConfig(16, "split"), (2, 9), steps=40)
    result = train(config)
    assert result.loss[-1] < 0.01 * result.loss[0]
    scores = result.queries @ result.model.codes.dense().T
    assert result.worst_case[-1] == pytest.approx(float(certify_scores(scores, (2, 9), heads="split").upper), rel=1e-12)
    assert result.steps_to_success is not None and result.worst_case[result.steps_to_success] < config.epsilon
    assert result.steps_to_success == 0 or result.worst_case[result.steps_to_success - 1] >= config.epsilon
    assert result.steps_to_sign <= result.steps_to_success
    # the certificate is an upper bound on the exact worst case over all 2^16 inputs
    x = all_inputs(16)
    worst, margin = worst_and_margin(result.weights, x, -x[:, 2] * x[:, 9], heads="split")
    assert worst <= result.worst_case[-1] * (1 + 1e-9) and margin > 0


def test_runs_are_independent_and_match_single_runs() -> None:
    base = TrainConfig(ModelConfig(12, "tied", code_seed=5), (0, 7), steps=5)
    batch = train_runs(base, 3)
    shifted = dataclasses.replace(base, model=dataclasses.replace(base.model, code_seed=7, init_seed=2))
    single = train(shifted)
    assert torch.allclose(batch[2].queries, single.queries, atol=1e-13)
    assert batch[2].model == shifted.model


def test_batched_empirical_gradient_matches_the_single_run_formula() -> None:
    model = ModelConfig(10, "split", init_seed=1)
    codes = model.codes.dense()
    queries = torch.stack([model.initial_queries(), 0.5 * model.initial_queries()])
    samples = [sample_xor(50, 10, (1, 8), seed=s) for s in (0, 1)]
    x, y = torch.stack([s[0] for s in samples]), torch.stack([s[1] for s in samples])
    c0, c1 = model.readout
    _, grad = training._empirical(queries @ codes.T, x, y, c0, c1, "softmax")
    for r in range(2):
        expected = empirical_score_gradient(queries[r], codes, x[r], y[r], heads="split")
        assert torch.allclose(grad[r], expected, atol=1e-14)
    # and the empirical trainer's loss is the mean squared loss of the model on its sample
    result = train(TrainConfig(model, (1, 8), steps=0, gradient="empirical", n=64))
    net = TwoHeadModel(model)
    xs, ys = sample_xor(64, 10, (1, 8), seed=training._random.derive_seed(0, "train", 0))
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
    worst, margin = worst_and_margin(model.weights().detach(), x, y, heads="tied")
    assert worst == pytest.approx(float((0.5 * (f - y) ** 2).max()))
    assert margin == pytest.approx(float((y * f).min()))


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"gradient": "empirical"}, ValueError, "n \\(the full-batch sample size\\) is required"),
        ({"n": 10}, ValueError, "n is only used with gradient='empirical'"),
        ({"lr": 0.0}, ValueError, "lr must be"),
        ({"lr": float("inf")}, ValueError, "lr must be a finite"),
        ({"steps": -1}, ValueError, "steps must be"),
        ({"optimizer": "lbfgs"}, ValueError, "optimizer must be one of"),
        ({"pair": (3, 3)}, ValueError, "pair must hold two distinct"),
        ({"pair": (0, 99)}, ValueError, "pair\\[1\\] must be"),
        ({"epsilon": 0.0}, ValueError, "epsilon must be"),
    ],
)
def test_bad_configs_raise_clear_errors(kwargs: dict, error: type, message: str) -> None:
    arguments = {"model": ModelConfig(8), "pair": (0, 1), **kwargs}
    with pytest.raises(error, match=message):
        TrainConfig(**arguments)


def test_bad_arguments_raise_clear_errors() -> None:
    with pytest.raises(TypeError, match="model must be a ModelConfig"):
        TrainConfig("model", (0, 1))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="config must be a TrainConfig"):
        train({"d": 8})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="runs must be"):
        train_runs(TrainConfig(ModelConfig(8), (0, 1)), 0)
    with pytest.raises(ValueError, match="x must hold inputs in"):
        worst_and_margin(
            torch.zeros(2, 8, dtype=torch.float64),
            torch.zeros(3, 8, dtype=torch.float64),
            torch.ones(3, dtype=torch.float64),
        )
