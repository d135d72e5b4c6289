"""Tests of xorlib.training: multi-step training, recovery, and the k-head parity model."""

from __future__ import annotations

import itertools

import pytest
import torch

from xorlib.codes import positional_codes
from xorlib.data import all_inputs, random_pair, sample_inputs, xor_labels
from xorlib.gradient import (
    empirical_gradient,
    lr_for_sharpness,
    one_step_from_uniform,
    population_gradient,
    population_loss,
    population_loss_weights,
)
from xorlib.model import head_outputs, head_weights, initial_queries, readout, squared_loss
from xorlib.training import (
    TrainResult,
    data_seed,
    parity_labels,
    parity_population_loss,
    parity_predictions,
    parity_recovered_mask,
    parity_support,
    parity_worst_case_bound,
    recovered,
    recovered_mask,
    single_threaded,
    train_attention,
    train_attention_seeds,
    train_parity_heads_seeds,
)

D, PAIR = 12, (3, 8)


def weights_on(d: int, rows: list[dict[int, float]]) -> torch.Tensor:
    """Head weights with the given mass on given positions, the rest spread evenly."""
    out = torch.zeros(len(rows), d, dtype=torch.float64)
    for h, row in enumerate(rows):
        rest = 1.0 - sum(row.values())
        others = [k for k in range(d) if k not in row]
        out[h, others] = rest / len(others)
        for k, w in row.items():
            out[h, k] = w
    return out


# --- recovery -------------------------------------------------------------------------


def test_recovered_accepts_every_exact_solution_and_rejects_the_trap() -> None:
    u, v = PAIR
    balanced = weights_on(D, [{u: 0.5, v: 0.5}, {u: 0.5, v: 0.5}])
    one_balanced = weights_on(D, [{u: 0.999, v: 0.0005}, {u: 0.4995, v: 0.4995}])
    trap = weights_on(D, [{u: 0.999}, {u: 0.999}])
    uniform = torch.full((2, D), 1.0 / D, dtype=torch.float64)
    split = weights_on(D, [{u: 0.999}, {v: 0.999}])
    assert recovered(balanced, PAIR)
    assert recovered(one_balanced, PAIR)  # exact too: one balanced head suffices for f = 1 - 2 z1 z2
    assert not recovered(trap, PAIR)
    assert not recovered(uniform, PAIR)
    assert not recovered(split, PAIR, "xor")  # f = 1 - 2 x_u x_v is wrong
    assert recovered(split, PAIR, "product")  # f = -x_u x_v is right
    assert not recovered(balanced, PAIR, "product")


def test_recovered_needs_most_of_the_mass_on_the_pair() -> None:
    u, v = PAIR
    spread = weights_on(D, [{u: 0.2, v: 0.2}, {u: 0.2, v: 0.2}])  # pair on top, but 0.6 elsewhere
    assert float(spread[0, u]) > float(spread[0, 0])
    assert not recovered(spread, PAIR)


def test_recovered_agrees_with_enumeration_of_the_sign() -> None:
    # Whenever recovered holds, every one of the 2^d inputs is classified correctly.
    x = all_inputs(D)
    y = xor_labels(x, PAIR)
    generator = torch.Generator().manual_seed(0)
    for _ in range(200):
        scores = torch.randn(2, D, generator=generator, dtype=torch.float64) * 4
        scores[:, list(PAIR)] += torch.rand(2, 2, generator=generator, dtype=torch.float64) * 8
        weights = torch.softmax(scores, -1)
        if recovered(weights, PAIR):
            f = readout(head_outputs(weights, x))
            assert bool((torch.sign(f) == y).all())


def test_recovered_mask_is_batched_and_recovered_is_single() -> None:
    u, v = PAIR
    batch = torch.stack([weights_on(D, [{u: 0.5, v: 0.5}] * 2), weights_on(D, [{u: 0.999}] * 2)])
    assert recovered_mask(batch, PAIR).tolist() == [True, False]
    with pytest.raises(ValueError, match="one model"):
        recovered(batch, PAIR)
    with pytest.raises(ValueError, match="d >= 3"):
        recovered(torch.full((2, 2), 0.5, dtype=torch.float64), (0, 1))
    with pytest.raises(ValueError, match="readout_kind"):
        recovered(batch[0], PAIR, "sum")


# --- training ---------------------------------------------------------------------------


def test_result_shapes_and_initial_record() -> None:
    result = train_attention(D, PAIR, steps=7, seed=3, code_seed=4)
    assert isinstance(result, TrainResult)
    assert result.steps_run == 7
    assert result.population_loss.shape == result.worst_case_loss.shape == (8,)
    assert result.train_loss is None
    codes = positional_codes(D, seed=4)
    start = initial_queries(codes.shape[1], init="random", scale=1.0, seed=3)
    assert float(result.population_loss[0]) == pytest.approx(float(population_loss(start, codes, PAIR)), abs=1e-14)
    assert result.queries.shape == (2, codes.shape[1])
    assert torch.allclose(result.weights, head_weights(result.queries, codes))


def test_sgd_from_zero_first_step_is_the_one_step_update() -> None:
    codes = positional_codes(D, seed=0)
    lr = lr_for_sharpness(30.0, D)
    result = train_attention(D, PAIR, optimizer="sgd", lr=lr, steps=1, init="zero", init_scale=0.0)
    assert torch.allclose(result.queries, one_step_from_uniform(codes, PAIR, lr), rtol=1e-10, atol=1e-12)


def test_training_gradient_matches_autograd_on_all_inputs() -> None:
    # One SGD step of size 1 exposes the gradient: g = q0 - q1.
    d = 10
    pair = random_pair(d, seed=1)
    codes = positional_codes(d, seed=2)
    for attention, readout_kind in itertools.product(
        ("softmax", "linear", "componentwise", "sigmoid"), ("xor", "product")
    ):
        result = train_attention(
            d, pair, attention=attention, readout_kind=readout_kind, optimizer="sgd", lr=1.0, steps=1,
            init_scale=0.7, seed=5, code_seed=2,
        )  # fmt: skip
        start = initial_queries(codes.shape[1], init="random", scale=0.7, seed=5).requires_grad_()
        x = all_inputs(d)
        loss = squared_loss(
            readout(head_outputs(head_weights(start, codes, attention), x), readout_kind), xor_labels(x, pair)
        )
        (grad,) = torch.autograd.grad(loss.mean(), start)
        assert torch.allclose(start.detach() - result.queries, grad, rtol=1e-9, atol=1e-13), (attention, readout_kind)


def test_empirical_gradient_uses_its_own_fixed_batch() -> None:
    n, seed = 300, 4
    codes = positional_codes(D, seed=0)
    start = initial_queries(codes.shape[1], init="random", scale=0.5, seed=seed)
    result = train_attention(
        D, PAIR, optimizer="sgd", lr=1.0, steps=1, gradient="empirical", n=n, init_scale=0.5, seed=seed
    )
    x = sample_inputs(n, D, seed=data_seed(seed), dtype=torch.float64)
    y = xor_labels(x, PAIR)
    expected = empirical_gradient(start, codes, x, y)
    assert torch.allclose(start - result.queries, expected, rtol=1e-10, atol=1e-14)
    assert result.train_loss is not None and result.train_loss.shape == (2,)


def test_adam_takes_sign_sized_first_steps() -> None:
    codes = positional_codes(D, seed=0)
    start = initial_queries(codes.shape[1], init="random", scale=1.0, seed=0)
    grad = population_gradient(start, codes, PAIR)
    result = train_attention(D, PAIR, lr=0.1, steps=1)
    assert torch.allclose(start - result.queries, 0.1 * torch.sign(grad), atol=1e-4)  # eps = 1e-8 in Adam


def test_batched_runs_equal_single_runs() -> None:
    pair = random_pair(40, seed=2)
    for gradient, n in (("population", None), ("empirical", 200)):
        batch = train_attention_seeds(
            40, pair, seeds=(0, 5), code_seed=(1, 2), steps=30, gradient=gradient, n=n, init_scale=0.01
        )
        for run, seed, code_seed in zip(batch, (0, 5), (1, 2), strict=True):
            single = train_attention(
                40, pair, seed=seed, code_seed=code_seed, steps=30, gradient=gradient, n=n, init_scale=0.01
            )
            assert run.steps_to_recovery == single.steps_to_recovery
            assert torch.allclose(run.population_loss, single.population_loss, rtol=1e-10, atol=1e-14)
            assert torch.allclose(run.queries, single.queries, rtol=1e-10, atol=1e-14)


def test_training_is_reproducible() -> None:
    a = train_attention(D, PAIR, steps=20, seed=9, gradient="empirical", n=100)
    b = train_attention(D, PAIR, steps=20, seed=9, gradient="empirical", n=100)
    assert torch.equal(a.population_loss, b.population_loss) and torch.equal(a.queries, b.queries)
    c = train_attention(D, PAIR, steps=20, seed=10, gradient="empirical", n=100)
    assert not torch.equal(a.queries, c.queries)


def test_adam_recovers_and_stop_when_recovered_truncates() -> None:
    d = 32
    pair = random_pair(d, seed=0)
    full = train_attention(d, pair, steps=200, init_scale=0.01, readout_kind="product")
    assert full.steps_to_recovery is not None
    assert recovered(full.weights, pair, "product")
    assert float(full.worst_case_loss[-1]) < 1e-2
    stopped = train_attention(d, pair, steps=200, init_scale=0.01, readout_kind="product", stop_when_recovered=True)
    assert stopped.steps_run == full.steps_to_recovery == stopped.steps_to_recovery
    assert torch.equal(stopped.population_loss, full.population_loss[: stopped.steps_run + 1])
    assert recovered(stopped.weights, pair, "product")


def test_xor_readout_plateau_from_a_large_start() -> None:
    # Both heads pile onto one position with weight ~ 1/sqrt(2): E f = 0, loss ~ 1/2.
    d = 256
    pair = random_pair(d, seed=0)
    result = train_attention(d, pair, steps=150, init_scale=1.0, seed=1)
    assert result.steps_to_recovery is None
    assert float(result.population_loss[-1]) == pytest.approx(0.5, abs=0.02)
    assert float(result.weights.max()) == pytest.approx(2**-0.5, abs=0.05)


def test_divergence_is_reported_not_returned_as_nan() -> None:
    with pytest.raises(ValueError, match="diverged|must stay below"):
        train_attention(D, PAIR, attention="componentwise", optimizer="sgd", lr=1e12, steps=5)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"d": 2}, ValueError, "d must be >= 3"),
        ({"d": 12.5}, TypeError, "d must be an integer"),
        ({"pair": (3, 3)}, ValueError, "distinct"),
        ({"pair": (3, 12)}, ValueError, r"pair\[1\]"),
        ({"m": 0}, ValueError, "m must be >= 1"),
        ({"attention": "relu"}, ValueError, "attention"),
        ({"readout_kind": "sum"}, ValueError, "readout_kind"),
        ({"optimizer": "rmsprop"}, ValueError, "optimizer"),
        ({"lr": 0.0}, ValueError, "lr must be > 0"),
        ({"lr": float("nan")}, ValueError, "lr must be finite"),
        ({"steps": -1}, ValueError, "steps must be >= 0"),
        ({"gradient": "sampled"}, ValueError, "gradient"),
        ({"gradient": "empirical"}, ValueError, "n .* is required"),
        ({"n": 100}, ValueError, "n is only used"),
        ({"gradient": "empirical", "n": 0}, ValueError, "n must be >= 1"),
        ({"init": "ones"}, ValueError, "init"),
        ({"init_scale": -1.0}, ValueError, "init_scale"),
        ({"seed": -1}, ValueError, "seed must be >= 0"),
        ({"code_seed": "a"}, TypeError, "code_seed"),
        ({"code_kind": "onehot", "m": 5}, ValueError, "m must be d"),
        ({"code_kind": "fourier"}, ValueError, "code_kind"),
        ({"stop_when_recovered": 1}, TypeError, "stop_when_recovered"),
        ({"progress": "yes"}, TypeError, "progress"),
        ({"device": "nowhere"}, ValueError, "device"),
    ],
)
def test_train_attention_validates_every_argument(kwargs: dict, error: type, match: str) -> None:
    arguments = {"d": D, "pair": PAIR, "steps": 1} | kwargs
    d, pair = arguments.pop("d"), arguments.pop("pair")
    with pytest.raises(error, match=match):
        train_attention(d, pair, **arguments)


def test_train_attention_seeds_validates_seeds() -> None:
    with pytest.raises(TypeError, match="seeds"):
        train_attention_seeds(D, PAIR, seeds=[], steps=1)
    with pytest.raises(ValueError, match=r"seeds\[1\]"):
        train_attention_seeds(D, PAIR, seeds=[0, -2], steps=1)
    with pytest.raises(ValueError, match="one per run"):
        train_attention_seeds(D, PAIR, seeds=[0, 1], code_seed=(0, 1, 2), steps=1)


def test_data_seed_and_single_threaded() -> None:
    assert data_seed(0) != 0 and data_seed(1) != data_seed(0) and data_seed(7) == data_seed(7)
    before = torch.get_num_threads()
    with single_threaded():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_training_on_cuda_matches_cpu() -> None:
    cpu = train_attention(D, PAIR, steps=10)
    gpu = train_attention(D, PAIR, steps=10, device="cuda")
    assert gpu.queries.device.type == "cuda"
    assert torch.allclose(cpu.population_loss, gpu.population_loss, rtol=1e-9)


# --- k-sparse parity --------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 2, 3])
def test_parity_population_loss_matches_enumeration(k: int) -> None:
    d = 7
    x = all_inputs(d)
    support = parity_support(d, k, seed=k)
    generator = torch.Generator().manual_seed(k)
    for _ in range(3):
        weights = torch.rand(k, d, generator=generator, dtype=torch.float64) * 2 - 0.5  # not normalised, signed
        enumerated = 0.5 * ((parity_predictions(weights, x) - parity_labels(x, support)) ** 2).mean()
        assert float(parity_population_loss(weights, support)) == pytest.approx(float(enumerated), rel=1e-12)
    batch = torch.rand(4, k, d, generator=generator, dtype=torch.float64)
    assert parity_population_loss(batch, support).shape == (4,)


def test_parity_k2_is_the_product_readout_of_the_two_head_model() -> None:
    weights = torch.softmax(torch.randn(2, 9, dtype=torch.float64), -1)
    assert float(parity_population_loss(weights, (2, 5))) == pytest.approx(
        float(population_loss_weights(weights, (2, 5), "product")), rel=1e-12
    )


def test_parity_worst_case_bound_is_certified() -> None:
    d, k = 8, 3
    x = all_inputs(d)
    support = parity_support(d, k, seed=0)
    y = parity_labels(x, support)
    generator = torch.Generator().manual_seed(1)
    certified = 0
    for _ in range(100):
        scores = torch.randn(k, d, generator=generator, dtype=torch.float64)
        scores[torch.arange(k), torch.tensor(support)] += torch.rand(k, generator=generator, dtype=torch.float64) * 8
        weights = torch.softmax(scores, -1)
        bound = float(parity_worst_case_bound(weights, support))
        worst = float((0.5 * (parity_predictions(weights, x) - y) ** 2).max())
        assert worst <= bound + 1e-12
        if bool(parity_recovered_mask(weights, support)):
            certified += 1
            assert bool((torch.sign(parity_predictions(weights, x)) == y).all())
    assert certified > 10


def test_parity_heads_learn_and_tied_heads_stay_tied_for_one_step() -> None:
    d, k = 8, 3
    support = parity_support(d, k, seed=0)
    runs = train_parity_heads_seeds(d, support, seeds=range(4), steps=60)
    assert all(r.steps_to_recovery is not None for r in runs)
    assert all(bool(parity_recovered_mask(r.weights, support)) for r in runs)
    tied = train_parity_heads_seeds(d, support, seeds=(0,), steps=1, tied=True)[0]
    spread = (tied.weights - tied.weights[0]).abs().max()
    assert float(spread) < 1e-12  # one symmetric step cannot split the heads


def test_parity_empirical_gradient_and_validation() -> None:
    support = parity_support(10, 3, seed=0)
    runs = train_parity_heads_seeds(10, support, seeds=(0,), steps=5, gradient="empirical", n=500)
    assert runs[0].train_loss is not None and runs[0].train_loss.shape == (6,)
    with pytest.raises(ValueError, match="required"):
        train_parity_heads_seeds(10, support, seeds=(0,), gradient="empirical")
    with pytest.raises(ValueError, match="only used"):
        train_parity_heads_seeds(10, support, seeds=(0,), n=10)
    with pytest.raises(ValueError, match="distinct"):
        train_parity_heads_seeds(10, (1, 1, 2), seeds=(0,))
    with pytest.raises(ValueError, match="k <= 3"):
        train_parity_heads_seeds(10, (0, 1, 2, 3), seeds=(0,))
    with pytest.raises(ValueError, match="k <= 3"):
        parity_population_loss(torch.rand(4, 10, dtype=torch.float64), (0, 1, 2, 3))
    with pytest.raises(ValueError, match="one head per support bit"):
        parity_population_loss(torch.rand(2, 10, dtype=torch.float64), (0, 1, 2))
    with pytest.raises(ValueError, match="init_scale"):
        train_parity_heads_seeds(10, support, seeds=(0,), init_scale=0.0)
    assert parity_support(10, 3, seed=4) == parity_support(10, 3, seed=4)
