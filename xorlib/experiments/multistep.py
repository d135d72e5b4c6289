r"""Experiment 5, "multi-step training": Adam and SGD from random initialisation, and k-sparse parity.

Four sweeps, each batched over runs (run ``r`` uses init seed ``r`` and code seed ``r``;
the codes are exchangeable across positions, so varying them with a fixed pair is the
same as drawing the pair):

* :func:`adam_sweep`: Adam (``lr=0.1``, full batch, the authors' protocol) from a random
  start, for both readouts and two initial scales, with the population or the
  empirical gradient;
* :func:`sgd_sweep`: plain gradient descent with a constant step of sharpness
  :math:`\kappa` (:func:`xorlib.gradient.lr_for_sharpness`), whose first step *is* the
  one-step update of :mod:`xorlib.experiments.one_step`;
* :func:`one_step_reference`: the one-step result on the same draws, for comparison;
* :func:`parity_sweep`: k-sparse parity with k heads (:func:`xorlib.training.train_parity_heads_seeds`).

``python -m xorlib.experiments.multistep --full`` runs the full grids and prints tables.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from .._validate import check_choice, check_float, check_int
from ..cache import cached
from ..data import random_pair
from ..gradient import lr_for_sharpness
from ..model import READOUTS
from ..training import (
    GRADIENTS,
    parity_support,
    recovered_mask,
    single_threaded,
    train_attention_seeds,
    train_parity_heads_seeds,
)
from .one_step import CHOSEN_KAPPA, one_step_instance

__all__ = [
    "BOOK_ADAM_DS",
    "BOOK_PARITY_DS",
    "FULL_ADAM_DS",
    "FULL_PARITY_DS",
    "adam_sweep",
    "main",
    "one_step_reference",
    "parity_sweep",
    "sgd_sweep",
    "summarise_runs",
]

BOOK_ADAM_DS = (16, 64, 256, 1024)
FULL_ADAM_DS = (16, 64, 256, 1024, 4096, 16384)
BOOK_PARITY_DS = (8, 16, 32)
FULL_PARITY_DS = (8, 16, 32, 64, 128)
SGD_KAPPAS = (0.01, 0.1, 1.0, 10.0, 100.0, 300.0)
PAIR_SEED = 0


def _run_record(runs: Sequence[object], pair: tuple[int, int], readout_kind: str) -> dict[str, object]:
    final = torch.stack([r.weights for r in runs]).cpu()
    return {
        "steps_to_recovery": [r.steps_to_recovery for r in runs],
        "recovered_at_end": recovered_mask(final, pair, readout_kind).tolist(),
        "top_weight": final.amax(-1).amax(-1).tolist(),
        "heads_overlap": (final[:, 0] * final[:, 1]).sum(-1).tolist(),
        "train_loss": None if runs[0].train_loss is None else np.stack([r.train_loss.numpy() for r in runs]),
        "population_loss": np.stack([r.population_loss.numpy() for r in runs]),
        "worst_case_loss": np.stack([r.worst_case_loss.numpy() for r in runs]),
    }


@cached
def adam_sweep(
    ds: tuple[int, ...] = BOOK_ADAM_DS,
    *,
    readouts: tuple[str, ...] = READOUTS,
    init_scales: tuple[float, ...] = (1.0, 0.01),
    runs: int = 6,
    steps: int = 300,
    lr: float = 0.1,
    gradient: str = "population",
    n: int | None = None,
    progress: bool = False,
    device: str = "cpu",
) -> dict[str, object]:
    r"""Adam from a random start for every ``d`` x readout x initial scale, ``runs`` runs each.

    Returns
    -------
    dict
        The arguments, and ``results[(d, readout, scale)]`` with ``steps_to_recovery``
        (list over runs, ``None`` if never), ``recovered_at_end`` (list of bools),
        ``population_loss`` and ``worst_case_loss`` (arrays ``(runs, steps + 1)``).
    """
    with single_threaded():
        ds = tuple(check_int(f"ds[{k}]", d, minimum=3) for k, d in enumerate(ds))
        runs = check_int("runs", runs, minimum=1, maximum=1000)
        check_choice("gradient", gradient, GRADIENTS)
        grid = [(d, r, s) for d in ds for r in readouts for s in init_scales]
        results = {}
        for d, readout_kind, scale in tqdm(grid, disable=not progress, desc="adam"):
            pair = random_pair(d, seed=PAIR_SEED)
            out = train_attention_seeds(
                d,
                pair,
                seeds=range(runs),
                code_seed=tuple(range(runs)),
                readout_kind=readout_kind,
                optimizer="adam",
                lr=lr,
                steps=steps,
                gradient=gradient,
                n=n,
                init_scale=scale,
                device=device,
            )
            results[(d, readout_kind, scale)] = _run_record(out, pair, readout_kind)
        return {
            "ds": ds,
            "readouts": tuple(readouts),
            "init_scales": tuple(init_scales),
            "runs": runs,
            "steps": steps,
            "gradient": gradient,
            "n": n,
            "results": results,
        }


@cached
def sgd_sweep(
    d: int = 64,
    *,
    kappas: tuple[float, ...] = SGD_KAPPAS,
    runs: int = 6,
    steps: int = 300,
    init: str = "zero",
    init_scale: float = 0.0,
    gradient: str = "population",
    n: int | None = None,
    progress: bool = False,
    device: str = "cpu",
) -> dict[str, object]:
    r"""Gradient descent (``torch.optim.SGD``) with the constant step :math:`\eta = \kappa d^2/2`, per :math:`\kappa`.

    From ``init="zero"`` the first step is exactly the one-step update; ``init="random"``
    starts from queries of score scale ``init_scale``. Returns the arguments and
    ``results[kappa]`` as in :func:`adam_sweep` (``xor`` readout).
    """
    with single_threaded():
        d = check_int("d", d, minimum=3)
        pair = random_pair(d, seed=PAIR_SEED)
        results = {}
        for kappa in tqdm(kappas, disable=not progress, desc="sgd"):
            out = train_attention_seeds(
                d,
                pair,
                seeds=range(runs),
                code_seed=tuple(range(runs)),
                optimizer="sgd",
                lr=lr_for_sharpness(check_float("kappa", kappa, minimum=0.0, strict_minimum=True), d),
                steps=steps,
                gradient=gradient,
                n=n,
                init=init,
                init_scale=init_scale,
                device=device,
            )
            results[kappa] = _run_record(out, pair, "xor")
        return {"d": d, "kappas": tuple(kappas), "runs": runs, "steps": steps, "init": init, "init_scale": init_scale,
                "gradient": gradient, "results": results}  # fmt: skip


def one_step_reference(
    d: int, *, runs: int = 6, kappa: float = CHOSEN_KAPPA, device: str | torch.device = "cpu"
) -> dict[str, list[float]]:
    """The one-step result (zero start, one population step of sharpness ``kappa``) on the runs' code draws."""
    d = check_int("d", d, minimum=3)
    worst, mean = [], []
    for r in range(check_int("runs", runs, minimum=1)):
        out = one_step_instance(d, code_seed=r, pair_seed=PAIR_SEED, kappas=(kappa,), device=device)
        worst.append(float(out["worst"][0]))
        mean.append(float(out["mean"][0]))
    return {"worst": worst, "mean": mean}


@cached
def parity_sweep(
    ds: tuple[int, ...] = BOOK_PARITY_DS,
    *,
    k: int = 3,
    runs: int = 16,
    steps: int = 300,
    lr: float = 0.1,
    init_scale: float = 1.0,
    gradient: str = "population",
    n: int | None = None,
    tied: bool = False,
    progress: bool = False,
    device: str = "cpu",
) -> dict[str, object]:
    r"""k-sparse parity with k heads, Adam from a random start, ``runs`` seeds per ``d``.

    Returns the arguments, the ``supports`` and ``results[d]`` with ``steps_to_recovery``,
    ``recovered`` (fraction of runs whose heads split the support, certified),
    ``population_loss`` and ``worst_case_bound`` (arrays ``(runs, steps + 1)``) and the
    final ``weights`` of run 0.
    """
    with single_threaded():
        ds = tuple(check_int(f"ds[{j}]", d, minimum=k) for j, d in enumerate(ds))
        results, supports = {}, {}
        for d in tqdm(ds, disable=not progress, desc=f"{k}-parity"):
            support = parity_support(d, k, seed=PAIR_SEED)
            out = train_parity_heads_seeds(
                d,
                support,
                seeds=range(runs),
                lr=lr,
                steps=steps,
                gradient=gradient,
                n=n,
                init_scale=init_scale,
                tied=tied,
                device=device,
            )
            supports[d] = support
            steps_to = [r.steps_to_recovery for r in out]
            results[d] = {
                "steps_to_recovery": steps_to,
                "recovered": float(np.mean([s is not None for s in steps_to])),
                "population_loss": np.stack([r.population_loss.numpy() for r in out]),
                "worst_case_bound": np.stack([r.worst_case_bound.numpy() for r in out]),
                "weights": out[0].weights.cpu().numpy(),
            }
        return {"ds": ds, "k": k, "runs": runs, "steps": steps, "gradient": gradient, "n": n, "supports": supports,
                "results": results}  # fmt: skip


def summarise_runs(record: dict[str, object]) -> dict[str, float]:
    """Fraction recovered (ever, and at the end), median steps to recovery, median final worst-case loss."""
    steps_to = [s for s in record["steps_to_recovery"] if s is not None]
    return {
        "recovered": len(steps_to) / len(record["steps_to_recovery"]),
        "recovered_at_end": float(np.mean(record["recovered_at_end"])),
        "median_steps": float(np.median(steps_to)) if steps_to else float("nan"),
        "median_final_worst": float(np.median(record["worst_case_loss"][:, -1])),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``python -m xorlib.experiments.multistep [--full]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="full grids (d up to 16384, more runs and steps)")
    args = parser.parse_args(argv)
    full = args.full
    ds, runs, steps = (FULL_ADAM_DS, 16, 1000) if full else (BOOK_ADAM_DS, 6, 300)
    adam = adam_sweep(ds, runs=runs, steps=steps, progress=True)
    print(f"Adam lr 0.1, population gradient, {runs} runs, {steps} steps")
    print(
        f"{'d':>6} {'readout':>8} {'init':>5} {'recovered':>9} {'at end':>6} {'median steps':>12} {'final worst':>11}"
    )
    for (d, readout_kind, scale), record in adam["results"].items():
        s = summarise_runs(record)
        print(
            f"{d:>6} {readout_kind:>8} {scale:>5g} {s['recovered']:>9.2f} {s['recovered_at_end']:>6.2f} "
            f"{s['median_steps']:>12.0f} {s['median_final_worst']:>11.2e}"
        )
    sgd = sgd_sweep(64, runs=runs, steps=steps, progress=True)
    print(f"\nSGD from q = 0 (constant step eta = kappa d^2 / 2), d = 64, {runs} runs, {steps} steps")
    for kappa, record in sgd["results"].items():
        s = summarise_runs(record)
        print(f"kappa {kappa:>7g}: recovered {s['recovered']:.2f}, at end {s['recovered_at_end']:.2f}, "
              f"median steps {s['median_steps']:.0f}, final worst {s['median_final_worst']:.2e}")  # fmt: skip
    parity_ds = FULL_PARITY_DS if full else BOOK_PARITY_DS
    parity = parity_sweep(parity_ds, runs=32 if full else 16, steps=1000 if full else 300, progress=True)
    print("\n3-sparse parity with 3 heads, Adam lr 0.1, population gradient")
    for d, record in parity["results"].items():
        steps_to = [s for s in record["steps_to_recovery"] if s is not None]
        print(f"d {d:>4}: support {parity['supports'][d]}, recovered {record['recovered']:.2f}, "
              f"median steps {np.median(steps_to) if steps_to else float('nan'):.0f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
