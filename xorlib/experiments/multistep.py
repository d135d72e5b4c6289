r"""Many small steps instead of one large one: Adam on the tied and the split model, beside the one step.

:func:`multistep_sweep` trains both models from their own starts (tied: :math:`q = 0`;
split: the antisymmetric random start) with Adam at learning rate 0.1, the
authors' optimiser, on the exact population gradient, ``runs`` runs per ``d``
(run ``r``: codes and start ``seed + r``), and records the certified worst-case
loss after every step (:mod:`xorlib.learners.training`). Beside it, the one-step
learner (:func:`xorlib.one_step`, population gradient) on the same codes and starts.

``python -m xorlib.experiments.multistep --full`` runs the full grid (cached) and prints it.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .._checks import check_choice, check_float, check_int, check_seed, check_sequence
from ..learners.training import OPTIMIZERS, TrainConfig, train_runs
from ..model import HEADS, ModelConfig
from ..one_step import one_step
from ..runtime import progress
from ..task import random_pair
from ._criteria import EPSILON, check_ds, median
from ._runner import experiment

__all__ = ["multistep_sweep"]


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

    def row(self, d: int, heads: str) -> MultistepRow:
        """The row of one ``d`` and model."""
        for row in self.rows:
            if (row.d, row.heads) == (d, heads):
                return row
        raise KeyError(f"no row for d = {d}, heads = {heads!r}")

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


@experiment
def multistep_sweep(
    ds: tuple[int, ...] = (16, 64, 256),
    *,
    heads: tuple[str, ...] = HEADS,
    runs: int = 8,
    steps: int = 150,
    optimizer: str = "adam",
    lr: float = 0.1,
    seed: int = 0,
) -> MultistepResult:
    """Adam (or SGD) from each model's own start, population gradient, ``runs`` runs per (``d``, model)."""
    ds = check_ds(ds, 4)
    heads = tuple(check_choice(f"heads[{k}]", h, HEADS) for k, h in enumerate(check_sequence("heads", heads)))
    runs, steps = check_int("runs", runs, minimum=1, maximum=1000), check_int("steps", steps, minimum=1, maximum=10**5)
    optimizer = check_choice("optimizer", optimizer, OPTIMIZERS)
    lr, seed = check_float("lr", lr, minimum=0.0, maximum=1e12, strict_minimum=True), check_seed("seed", seed)
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


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m xorlib.experiments.multistep [--full]``: run the sweep (cached) and print it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="d up to 4096, 32 runs, 1,000 steps")
    args = parser.parse_args(argv)
    result = multistep_sweep((16, 64, 256, 1024, 4096), runs=32, steps=1000) if args.full else multistep_sweep()
    print(f"{result.optimizer}, lr {result.lr:g}, population gradient, {result.steps} steps")
    for row in result.rows:
        print(f"d {row.d:>5} {row.heads:>5}: worst < {result.epsilon:g} in {row.success:>4.0%} of {row.runs} runs "
              f"(median step {row.steps_success:>5.0f}), every sign right in {row.sign:>4.0%} (median step "
              f"{row.steps_sign:>5.0f}); one step: median worst {np.nanmedian(row.one_step_worst):.2g}")  # fmt: skip
    return 0


if __name__ == "__main__":  # run the package's module, so results carry the package's types
    from xorlib.experiments.multistep import main as package_main

    raise SystemExit(package_main())
