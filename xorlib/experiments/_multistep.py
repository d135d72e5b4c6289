r"""Many small steps instead of one large one: Adam on the tied and the split model, beside the one step.

:func:`multistep_sweep` trains both models from their own starts (tied: :math:`q = 0`;
split: the antisymmetric random start) with Adam at learning rate 0.1, the
authors' optimiser, on the exact population gradient, ``runs`` runs per ``d``
(run ``r``: codes and start ``seed + r``), and records the certified worst-case
loss after every step (``xorlib.learners._training``). Beside it, the one-step
learner (:func:`xorlib.one_step`, population gradient) on the same codes and starts.

Experiment ``multistep``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import numpy as np

from .._contract import Between, Heads, Items, Seed, config, public
from .._runtime import progress
from ..learners._one_step import one_step
from ..learners._training import TrainConfig, train_runs
from ..model import ModelConfig
from ..task import random_pair
from ._criteria import EPSILON, median
from ._registry import experiment


@dataclass(frozen=True)
class MultistepRow:
    r"""One model at one ``d``: how the runs fared, and the certified worst case along the way.

    ``success`` / ``sign``: fractions of runs whose certified worst case went below
    :math:`\varepsilon` / below :math:`\tfrac12` (every sign right) within the budget;
    ``steps_*``: median first step at which it did (nan: fewer than half);
    ``worst_median``, ``worst_low``, ``worst_high``: median, 25 % and 75 % quantile of
    the certified worst case after each step, over the runs; ``one_step_worst``:
    the one-step learner's certified worst case on the same codes, per run;
    ``top_weight`` and ``pair_mass``: each run's largest final attention weight and
    final weight on the hidden pair (of head 1; per run).
    """

    d: int
    heads: str
    parameters: int
    runs: int
    success: float
    sign: float
    steps_success: float
    steps_sign: float
    final_worst: float  # median over runs after the last step
    worst_median: np.ndarray
    worst_low: np.ndarray
    worst_high: np.ndarray
    one_step_worst: tuple[float, ...]
    top_weight: tuple[float, ...]
    pair_mass: tuple[float, ...]


@dataclass(frozen=True)
class MultistepResult:
    """:func:`multistep_sweep`: one row per (``d``, model), and the protocol."""

    rows: tuple[MultistepRow, ...]
    optimizer: str
    lr: float
    steps: int
    epsilon: float

    @public
    def row(self, d: int, heads: Heads) -> MultistepRow:
        """The row of one ``d`` and model.

        Examples
        --------
        >>> import dataclasses
        >>> from xorlib.experiments import plan, run
        >>> sweep = run("multistep", dataclasses.replace(plan("multistep"), ds=(4,), runs=1, steps=2))
        >>> sweep.row(4, "split").runs
        1
        """
        for row in self.rows:
            if (row.d, row.heads) == (d, heads):
                return row
        raise ValueError(f"d and heads must name a row: d in {sorted({r.d for r in self.rows})}, got ({d}, {heads!r})")

    def summary(self) -> list[dict[str, object]]:
        """One table row per (``d``, model): success fractions, median steps, final and one-step worst cases."""
        return [
            {"d": row.d, "model": row.heads, "runs": row.runs, "success": row.success, "steps_success": row.steps_success,
             "sign": row.sign, "steps_sign": row.steps_sign, "final": row.final_worst,
             "one_step": float(np.nanmedian(row.one_step_worst))}
            for row in self.rows
        ]  # fmt: skip


def _one_step_worst(d: int, heads: str, model: ModelConfig, pair: tuple[int, int]) -> float:
    return float(one_step(d, heads, seed=model.code_seed, pair=pair, m=model.m, epsilon=EPSILON).worst_case.upper)


@config
class MultistepPlan:
    """Dimensions (4 to 4096), models, runs per case (at most 1000), steps (at most 10^5), the optimiser and its rate."""

    ds: Annotated[tuple[Annotated[int, Between(4, 4096)], ...], Items(1, 16)] = (16, 64, 256)
    heads: Annotated[tuple[Heads, ...], Items(1, 2)] = ("tied", "split")
    runs: Annotated[int, Between(1, 1000)] = 8
    steps: Annotated[int, Between(1, 10**5)] = 150
    optimizer: Literal["adam", "sgd"] = "adam"
    lr: Annotated[float, Between(0.0, 1e12, open_low=True)] = 0.1
    seed: Seed = 0


@experiment(
    "multistep",
    book=MultistepPlan(),
    full=MultistepPlan(ds=(16, 64, 256, 1024, 4096), runs=32, steps=1000),
    full_minutes=0.9,
)
def multistep_sweep(plan: MultistepPlan) -> MultistepResult:
    """Many small steps instead of one large one: Adam (or SGD) from each model's own start, population gradient."""
    ds, heads, runs, steps, optimizer, lr, seed = (
        plan.ds, plan.heads, plan.runs, plan.steps, plan.optimizer, plan.lr, plan.seed,
    )  # fmt: skip
    rows = []
    for d, model_heads in progress([(d, h) for d in ds for h in heads], "multi-step training"):
        pair = random_pair(d, seed=seed)
        model = ModelConfig(d, model_heads, code_seed=seed, init_seed=seed)
        config = TrainConfig(model, pair, steps=steps, optimizer=optimizer, lr=lr, epsilon=EPSILON)
        results = train_runs(config, runs)
        worst = np.stack([r.worst_case for r in results])  # (runs, steps + 1)
        low, middle, high = np.quantile(worst, [0.25, 0.5, 0.75], axis=0)
        rows.append(
            MultistepRow(
                d, model_heads, model.parameters, runs,
                float(np.mean([r.steps_to_success is not None for r in results])),
                float(np.mean([r.steps_to_sign is not None for r in results])),
                median([r.steps_to_success for r in results]), median([r.steps_to_sign for r in results]),
                float(middle[-1]), middle, low, high,
                tuple(_one_step_worst(d, model_heads, r.model, pair) for r in results),
                tuple(float(r.weights[0].max()) for r in results),
                tuple(float(r.weights[0, list(pair)].sum()) for r in results),
            )
        )  # fmt: skip
    return MultistepResult(tuple(rows), optimizer, lr, steps, EPSILON)
