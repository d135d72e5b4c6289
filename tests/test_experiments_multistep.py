"""Tests of experiment 5 (xorlib.experiments.multistep): multi-step training and k-sparse parity."""

from __future__ import annotations

import numpy as np
import pytest

from xorlib.experiments import multistep
from xorlib.experiments.multistep import (
    BOOK_ADAM_DS,
    BOOK_PARITY_DS,
    adam_sweep,
    one_step_reference,
    parity_sweep,
    sgd_sweep,
    summarise_runs,
)


@pytest.mark.slow
def test_adam_product_readout_always_recovers_and_xor_readout_plateaus() -> None:
    adam = adam_sweep(BOOK_ADAM_DS)
    results = adam["results"]
    for d in BOOK_ADAM_DS:
        for scale in adam["init_scales"]:
            assert summarise_runs(results[(d, "product", scale)])["recovered_at_end"] == 1.0
    d_big = max(BOOK_ADAM_DS)
    assert summarise_runs(results[(d_big, "xor", 1.0)])["recovered_at_end"] == 0.0
    # The stalled xor runs sit on the mean-matching plateau: top weight ~ 1/sqrt(2), overlap ~ 1/2.
    stalled = [
        (w, o)
        for (d, r, _), rec in results.items()
        if r == "xor" and d >= 64
        for w, o, ok in zip(rec["top_weight"], rec["heads_overlap"], rec["recovered_at_end"], strict=True)
        if not ok
    ]
    assert len(stalled) >= 6
    assert all(abs(w - 2**-0.5) < 0.05 and abs(o - 0.5) < 0.03 for w, o in stalled)
    # Steps to recovery grow slowly with d for the product readout.
    steps = [summarise_runs(results[(d, "product", 1.0)])["median_steps"] for d in BOOK_ADAM_DS]
    assert steps == sorted(steps) and steps[-1] <= 3 * steps[0]


@pytest.mark.slow
def test_constant_step_gradient_descent_is_one_step_or_unstable() -> None:
    zero = sgd_sweep(64, init="zero", init_scale=0.0)
    random_start = sgd_sweep(64, init="random", init_scale=0.01)
    big = summarise_runs(zero["results"][300.0])
    assert big["median_steps"] == 1 and big["recovered_at_end"] == 1.0
    middle = summarise_runs(zero["results"][1.0])
    assert middle["recovered"] >= 0.5 and middle["recovered_at_end"] == 0.0  # recovers, then overshoots
    assert summarise_runs(random_start["results"][300.0])["recovered_at_end"] < 1.0


def test_one_step_reference_is_far_below_adam() -> None:
    reference = one_step_reference(64, runs=3)
    assert max(reference["worst"]) < 1e-20


@pytest.mark.slow
def test_parity_heads_recover_the_support() -> None:
    parity = parity_sweep(BOOK_PARITY_DS)
    for d in BOOK_PARITY_DS:
        record = parity["results"][d]
        assert record["recovered"] == 1.0
        weights = record["weights"]
        top = weights.argmax(-1)
        assert sorted(top.tolist()) == list(parity["supports"][d])  # one head per support bit
    few = parity_sweep((32,), gradient="empirical", n=200)
    many = parity_sweep((32,), gradient="empirical", n=5000)
    assert few["results"][32]["recovered"] < many["results"][32]["recovered"] == 1.0


def test_summarise_runs() -> None:
    record = {
        "steps_to_recovery": [3, None, 5, 7],
        "recovered_at_end": [True, False, True, False],
        "worst_case_loss": np.array([[2.0, 0.1], [2.0, 2.0], [2.0, 0.2], [2.0, 1.0]]),
    }
    s = summarise_runs(record)
    assert s["recovered"] == 0.75 and s["recovered_at_end"] == 0.5
    assert s["median_steps"] == 5 and s["median_final_worst"] == pytest.approx(0.6)


def test_validation() -> None:
    with pytest.raises(ValueError, match="gradient"):
        adam_sweep.uncached((16,), gradient="sampled")
    with pytest.raises(ValueError, match="runs"):
        adam_sweep.uncached((16,), runs=0)
    with pytest.raises(ValueError, match="kappa"):
        sgd_sweep.uncached(16, kappas=(0.0,))
    with pytest.raises(ValueError, match="d must be >= 3"):
        one_step_reference(2)


@pytest.mark.slow
def test_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert multistep.main([]) == 0
    out = capsys.readouterr().out
    assert "3-sparse parity" in out and "product" in out
