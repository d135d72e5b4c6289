"""Chapter 4's split model on ties (``split_on_ties``): the batched step gives ``one_step``'s outcome on every draw."""

from __future__ import annotations

import dataclasses

import pytest

import xorlib
from xorlib.codes import Codes
from xorlib.experiments import _one_step as experiments
from xorlib.experiments import plan, run
from xorlib.task import random_pair
from xorlib.theory import tied_margin

SEEDS = range(1000, 1300)  # the chapter's first 300 draws: 4 failures, 2 of them on ties


def _one_by_one(d: int, seeds: range) -> tuple[list[bool], list[bool]]:
    ties = [tied_margin(Codes(d, seed=s).dense(), random_pair(d, seed=s)) <= 1e-12 for s in seeds]
    return ties, [xorlib.one_step(d, "split", seed=s).success for s in seeds]


@pytest.fixture(scope="module")
def at_16() -> tuple[list[bool], list[bool]]:
    return _one_by_one(16, SEEDS)


def test_the_batch_is_one_step_on_every_one_of_300_draws(at_16) -> None:
    ties, success = at_16
    assert experiments._split_successes(16, SEEDS, 1e-6) == (ties, success, 0)  # none near a threshold
    failed_ties = sum(t and not ok for t, ok in zip(ties, success, strict=True))
    assert sum(ties) >= 20 and failed_ties >= 2 and success.count(False) > failed_ties  # ties, failures of both kinds


def test_draws_near_a_threshold_are_taken_by_one_step_itself(at_16, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(experiments, "_CLEAR_BY", 1e300)  # every draw is "near": all go through one_step
    ties, success = at_16
    assert experiments._split_successes(16, SEEDS[:40], 1e-6) == (ties[:40], success[:40], 40)


def test_the_batch_is_one_step_at_a_larger_d_and_another_epsilon() -> None:
    seeds = range(2000, 2030)
    ties, success, _ = experiments._split_successes(64, seeds, 1e-9)
    assert success == [xorlib.one_step(64, "split", seed=s, epsilon=1e-9).success for s in seeds]
    assert ties == [tied_margin(Codes(64, seed=s).dense(), random_pair(64, seed=s)) <= 1e-12 for s in seeds]


def test_the_experiment_sorts_the_draws(at_16) -> None:
    small = run("split_on_ties", dataclasses.replace(plan("split_on_ties"), draws=len(SEEDS)))
    ties, success = at_16
    assert small.d == 16 and small.epsilon == 1e-6
    assert small.tie == tuple(s for s, t in zip(SEEDS, ties, strict=True) if t)
    assert small.no_tie == tuple(s for s, t in zip(SEEDS, ties, strict=True) if not t)
    failed = {s for s, ok in zip(SEEDS, success, strict=True) if not ok}
    assert small.tie_failed == tuple(s for s in small.tie if s in failed)
    assert small.no_tie_failed == tuple(s for s in small.no_tie if s in failed)
