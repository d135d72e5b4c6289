"""Chapter 6's start scale with samples (``sigma_samples``): the plan, the fields, held-out seeds, the table's rows."""

from __future__ import annotations

import dataclasses
import typing

import pytest

import xorlib
from xorlib.experiments import plan, run
from xorlib.experiments._registry import REGISTRY
from xorlib.experiments._sigma_samples import SigmaRow, SigmaSamples
from xorlib.learners._one_step import StepConfig, learning_curve, learning_curves
from xorlib.model import ModelConfig
from xorlib.task import random_pair

SMALL = dataclasses.replace(plan("sigma_samples"), d=16, sigmas=(0.001, 1.0), multiples=(4, 64), draws=3)


@pytest.fixture(scope="module")
def small() -> SigmaSamples:
    return run("sigma_samples", SMALL)


def test_a_small_plan_runs_and_fills_every_field(small: SigmaSamples) -> None:
    assert isinstance(small, SigmaSamples) and small.d == 16 and small.draws == 3
    assert small.sample_sizes == (4 * 16**2, 64 * 16**2) and small.multiples == (4, 64)
    shape = (len(SMALL.sigmas), SMALL.draws, len(SMALL.multiples))
    for name in ("success", "worst", "peaks"):
        values = getattr(small, name)
        assert (len(values), len(values[0]), len(values[0][0])) == shape, name
    assert all(len(head_peaks) == 2 for per_sigma in small.peaks for per_draw in per_sigma for head_peaks in per_draw)
    assert len(small.population_split) == 2 and len(small.pairs) == 3
    assert [row.sigma for row in small.rows] == [0.001, 1.0]
    for row in small.rows:
        assert isinstance(row, SigmaRow) and row.draws == 3
        assert len(row.successes) == len(row.splits) == len(row.one_bit) == 2
        assert all(s + o <= 3 for s, o in zip(row.splits, row.one_bit, strict=True))  # a split is never one bit
        assert all(ok <= split for ok, split in zip(row.successes, row.splits, strict=True))


def test_each_cell_is_the_public_one_step(small: SigmaSamples) -> None:
    """Draw k at scale sigma and n samples is ``xorlib.one_step(d, "split", seed=first_seed + k, n=n, sigma=sigma)``."""
    s, k, j = 1, 2, 0
    alone = xorlib.one_step(
        small.d, "split", seed=small.first_seed + k, n=small.sample_sizes[j], sigma=small.sigmas[s], epsilon=0.01
    )
    assert alone.found == small.peaks[s][k][j] and alone.pair == small.pairs[k]
    assert alone.success == small.success[s][k][j]
    assert float(alone.worst_case.upper) == pytest.approx(small.worst[s][k][j], rel=1e-6, abs=1e-300)


def test_the_table_has_the_shape_the_chapter_reads(small: SigmaSamples) -> None:
    table = small.table()
    assert len(table) == len(SMALL.sigmas)
    keys = list(table[0])
    assert all(list(row) == keys for row in table) and len(keys) == 3 + len(SMALL.multiples)
    assert len(plan("sigma_samples").multiples) + 3 <= 6  # the book's table stays narrow
    assert keys[0] == r"$\sigma$" and keys[-2] == "one bit, $64d^2$"
    assert [row[r"$\sigma$"] for row in table] == list(SMALL.sigmas)
    assert [row["$n = 4d^2$"] for row in table] == [row.successes[0] for row in small.rows]


def test_the_seeds_are_held_out() -> None:
    """The draws' seeds (7000 on) fall in no other experiment's range of seeds (its draws, or 1,000 from its seed)."""
    ours = plan("sigma_samples", full=True)
    mine = set(range(ours.first_seed, ours.first_seed + ours.draws))
    for name, entry in REGISTRY.items():
        for candidate in (entry.book, entry.full) if name != "sigma_samples" else ():
            fields = {f.name: getattr(candidate, f.name) for f in dataclasses.fields(candidate)}
            count = (
                fields.get("draws") or fields.get("starts") or max((n for _, n in fields.get("grid", ())), default=0)
            )
            for field, value in fields.items():
                if field.endswith("seed"):
                    assert not mine & set(range(value, value + max(count, 1000))), (name, field)


def test_the_plan_refuses_bad_sample_sizes() -> None:
    with pytest.raises(ValueError, match="multiples must be increasing"):
        dataclasses.replace(plan("sigma_samples"), multiples=(16, 4))
    with pytest.raises(ValueError, match="multiples times d"):
        dataclasses.replace(plan("sigma_samples"), d=256, multiples=(1024,))
    hints = typing.get_type_hints(type(plan("sigma_samples")), include_extras=True)
    assert "first_seed" in hints and plan("sigma_samples").first_seed == 7000


def test_learning_curves_share_one_stream_and_refuse_two_tasks() -> None:
    d, seed = 16, 3
    configs = tuple(
        StepConfig(ModelConfig(d, "split", code_seed=seed, sigma=s, init_seed=seed), random_pair(d, seed=seed),
                   data_seed=seed, epsilon=1e-2)
        for s in (0.01, 1.0)
    )  # fmt: skip
    together = learning_curves(configs, (100, 1000))
    for config, curve in zip(configs, together, strict=True):
        for shared, alone in zip(curve, learning_curve(config, (100, 1000)), strict=True):
            assert shared.found == alone.found and shared.kappa == pytest.approx(alone.kappa, rel=1e-9)
    other = dataclasses.replace(configs[1], data_seed=4)
    with pytest.raises(ValueError, match="differ only in their model's start"):
        learning_curves((configs[0], other), (100,))
