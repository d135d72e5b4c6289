"""The reader-facing one step, for both models: the claims of chapters 2-4 as assertions."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from _tolerance import assert_close

from xorlib import one_step
from xorlib.codes import Codes
from xorlib.learners._one_step import StepConfig, take_step, take_steps
from xorlib.model import ModelConfig
from xorlib.population import population
from xorlib.task import all_inputs, xor_labels


def test_split_heads_split_on_every_one_of_20_draws_at_d_64() -> None:
    results = [one_step(64, "split", seed=seed) for seed in range(100, 120)]
    assert all(r.split for r in results)
    assert all(r.success for r in results)  # certified worst case <= 1e-6 with the pair-free step
    assert all(r.parameters == 2 * 24 for r in results)


@pytest.mark.parametrize("heads", ["tied", "split"])
def test_pair_free_step_certifies_1e_6_at_d_10_000(heads: str) -> None:
    for seed in (1000, 1001, 1002):  # held-out seeds (>= 1000, as in chapter 4): no constant was chosen on them
        result = one_step(10_000, heads, seed=seed)
        assert float(result.worst_case.upper) <= 1e-6
        assert result.mean_loss_after <= float(result.worst_case.upper)


def test_the_lattice_rule_needs_no_data_and_certifies_the_tied_model() -> None:
    result = one_step(4096, "tied", seed=5, step="lattice")
    assert result.success
    # its worst case is so small (about 1e-56) that the rounding allowance of the pair weights (their gap's and the
    # scores' derived allowance, xorlib._logsums.log_weight_error) is larger than it: a bracket, honestly not
    # flagged exact (issue 20), whose upper end is still far below any loss that matters
    worst = result.worst_case
    assert float(worst.upper) < 1e-40 and 0 < float(worst.lower) <= float(worst.upper) and not bool(worst.exact)


@pytest.mark.parametrize("d", [17, 1001, 4097])
def test_odd_d_works_as_well_as_even_d(d: int) -> None:
    """Issue 10, item 3: the old codes were unbalanced for odd d (worst case 2.4e-4 at d = 1001)."""
    for heads in ("tied", "split"):
        result = one_step(d, heads, seed=3)
        assert result.success, (d, heads, float(result.worst_case.upper))


def test_tied_heads_are_one_head_in_disguise() -> None:
    """The tied step keeps the heads equal, and equals a one-head model's step of half the size."""
    d = 10
    result = one_step(d, "tied", seed=1, m=7, step=3.0)
    assert torch.equal(result.queries_after[0], result.queries_after[1])
    codes = Codes(d, 7, seed=1).dense()
    q = torch.zeros(7, dtype=torch.float64, requires_grad=True)
    x = all_inputs(d)
    z = x @ torch.softmax(codes @ q, 0)
    one_head = (0.5 * (1 - 2 * z**2 - xor_labels(x, result.pair)) ** 2).mean()
    (grad,) = torch.autograd.grad(one_head, q)
    expected = -(result.lr / 2) * grad
    # Entries that are zero in exact arithmetic come out as exact zeros from the closed form but as rounding noise
    # from autograd's sum over 2^d inputs: compare on the scale of the step, for a mean over 2^d inputs.
    scale = float(expected.abs().max())
    assert_close(result.queries_after[0], expected, operations=2**d + 4 * d * 7, scale=scale)


@pytest.mark.parametrize("heads", ["tied", "split"])
def test_streamed_step_equals_the_dense_closed_form(heads: str) -> None:
    d = 2 * 65536 + 10  # three blocks
    result = one_step(d, heads, seed=2, step=50.0)
    model = result.config.model
    codes = model.codes.dense()
    q = model.initial_queries()
    expected = q - result.lr * population(model, q, result.pair, codes=codes).gradient
    # Streamed and dense, the gradient is a sum over d positions (in blocks or in one product).
    assert_close(result.queries_after, expected, operations=2 * d, scale=float(expected.abs().max()))


def test_same_numbers_on_one_and_two_threads() -> None:
    previous = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = one_step(3000, "split", seed=4, n=2000)
        torch.set_num_threads(2)
        two = one_step(3000, "split", seed=4, n=2000)
    finally:
        torch.set_num_threads(previous)
    assert one.kappa == two.kappa and float(one.worst_case.upper) == float(two.worst_case.upper)


def test_finite_samples() -> None:
    result = one_step(32, "split", seed=7, n=40_000)
    assert result.split and result.success
    small = one_step(32, "split", seed=7, n=20)
    assert small.config.n == 20 and float(small.worst_case.upper) >= 0


def test_independent_start_and_explicit_config() -> None:
    model = ModelConfig(64, "split", start="independent", init_seed=3)
    result = take_step(StepConfig(model, (5, 40)))
    assert result.pair == (5, 40)
    assert result.weights_after.shape == (2, 64)


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"d": 3}, ValueError, "d must be"),
        ({"d": 64, "heads": "both"}, ValueError, "heads must be one of"),
        ({"d": 64, "heads": "split", "step": "lattice"}, ValueError, "lattice"),
        ({"d": 64, "step": -1.0}, ValueError, "step must be"),
        ({"d": 64, "step": float("nan")}, ValueError, "step must be a finite"),
        ({"d": 64, "epsilon": 0.0}, ValueError, "epsilon must be"),
        ({"d": 64, "n": 0}, ValueError, "n must be"),
        ({"d": 10**7, "n": 10**6}, ValueError, "n \\* d must be at most"),
        ({"d": 2 * 10**7, "n": 200}, ValueError, "GiB"),  # the dense codes (the samples stay packed)
        ({"d": 64, "sigma": -1.0}, ValueError, "sigma must be"),
        ({"d": 64, "pair": (3, 3)}, ValueError, "distinct"),
        ({"d": 64, "device": "cuda"}, ValueError, "CUDA is not available"),
        ({"d": 64, "code_kind": "x"}, ValueError, "code_kind must be one of"),
        ({"d": 64, "device": "meta"}, ValueError, "device is 'meta'"),
        ({"d": 64, "bogus": 1}, TypeError, "unknown option"),
        ({"d": 64, "heads": "split", "step": "lattice"}, ValueError, "tied model's rule"),
        ({"d": 64, "seed": 1.5}, TypeError, "seed must be an integer"),
    ],
)
def test_bad_input(kwargs, error, words) -> None:
    if "cuda" in str(kwargs.get("device", "")) and torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    with pytest.raises(error, match=words):
        one_step(**kwargs)


def test_finding_1_a_step_float64_cannot_certify_is_refused_with_the_range_that_works() -> None:
    """Issue 19, finding 1: sigma = 1000 made kappa 2e28 and a worst case of NaN; now refused, naming the range."""
    with pytest.raises(ValueError, match=r"kappa = 2\.05e\+28.*steps up to about kappa = .* can be certified"):
        one_step(1024, "split", seed=1, sigma=1000)
    result = one_step(1024, "split", seed=0, sigma=1000)  # the same start scale, a step float64 still certifies
    assert torch.isfinite(result.worst_case.upper) and torch.isfinite(result.worst_case.margin)


def test_finding_8_no_gap_and_no_lattice_is_refused_naming_the_codes() -> None:
    """Issue 19, finding 8: m = 1 Gaussian codes gave 'margin_step must be ..., got nan' for every seed."""
    with pytest.raises(ValueError, match="gaussian codes have no lattice step.*a larger m"):
        one_step(64, "split", code_kind="gaussian", m=1)
    with pytest.raises(ValueError, match="code_kind='gaussian' has no lattice step"):
        one_step(64, "tied", code_kind="gaussian", step="lattice")


def test_counts_have_a_maximum_refused_before_any_work() -> None:
    import time

    start = time.perf_counter()
    with pytest.raises(ValueError, match="n \\* d must be at most"):
        one_step(64, n=10**8)
    with pytest.raises(ValueError, match="d must be an integer in \\[4, 1000000000\\]"):
        one_step(10**10)
    assert time.perf_counter() - start < 1.0


def test_steps_of_several_rules_from_one_gradient_are_the_single_steps() -> None:
    """take_steps shares the gradient between rules: each result is its own take_step, bit for bit."""
    for heads, rules in (("tied", ("lattice", "certified", 300.0)), ("split", ("certified", 50.0))):
        config = StepConfig(ModelConfig(64, heads, code_seed=3, init_seed=3), (5, 40), data_seed=3)
        shared = take_steps(config, rules)
        for rule, result in zip(rules, shared, strict=True):
            single = take_step(dataclasses.replace(config, step=rule))
            assert result.config == single.config and result.kappa == single.kappa
            assert torch.equal(result.queries_after, single.queries_after)
            assert float(result.worst_case.upper) == float(single.worst_case.upper)
        assert len({r.kappa for r in shared}) == len(rules)  # the rules did choose different steps
