r"""Experiment 4: what a feed-forward network pays for sparse XOR, beside the one-step Transformer.

* :func:`mlp_scaling`: a two-layer ReLU network trained by online SGD with the
  protocol of Barak et al. (2022) (:mod:`xorlib.baselines`), many seeds at once,
  across :math:`d`: parameters, steps, samples, FLOPs and wall time to 100 %
  accuracy on 8192 fresh samples.
* :func:`mlp_width_sweep`: the same at one :math:`d` for several widths (the
  parameter count cannot drop below :math:`\Theta(d)`, whatever the width).
* :func:`neuron_one_step`: the "one-step FFNN": after a single gradient step,
  in what fraction of hidden units do the two largest first-layer gradient
  entries sit on the hidden pair, as a function of the batch size.
* :func:`who_pays_what`: one table, both models measured in the same run: the
  one-step Transformer (:mod:`xorlib.experiments.finite_samples`) and the MLP.

``python -m xorlib.experiments.ffnn --full`` runs the full grid and prints the table.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from .._runtime import single_threaded
from .._validate import check_float, check_int, check_seed
from ..baselines import TwoLayerReLU, mlp_step_flops, train_mlp_ensemble
from ..cache import cached
from ..codes import positional_codes
from ..data import make_generator, random_pair, random_signs
from .finite_samples import (
    finite_sample_experiment,
    fit_power_law,
    html_table,
    streamed_coefficients,
    success_table,
    unit_scores,
)

__all__ = [
    "BOOK_DS",
    "BOOK_WIDTHS",
    "DEFAULT_WIDTH",
    "FULL_DS",
    "FULL_WIDTHS",
    "main",
    "mlp_run",
    "mlp_scaling",
    "mlp_width_sweep",
    "neuron_one_step",
    "transformer_step_flops",
    "who_pays_what",
    "who_pays_what_exponents",
    "who_pays_what_html",
]

BOOK_DS = (8, 16, 32)
FULL_DS = (8, 16, 32, 64, 128)
DEFAULT_WIDTH = 128
BOOK_WIDTHS = (4, 16, 64, 128)
FULL_WIDTHS = (2, 4, 8, 16, 32, 64, 128, 256, 512)


def _pairs(d: int, count: int, seed: int) -> list[tuple[int, int]]:
    return [random_pair(d, seed=seed + 10_007 * k + d) for k in range(count)]


def _quantile(values: Sequence[float | None], q: float) -> float:
    """Quantile over runs, a run that never succeeded counting as +inf (nan if the quantile is infinite)."""
    finite = np.array([math.inf if v is None else float(v) for v in values])
    value = float(np.quantile(finite, q, method="inverted_cdf"))
    return value if math.isfinite(value) else math.nan


@cached
def mlp_run(
    d: int,
    *,
    width: int = DEFAULT_WIDTH,
    seeds: int = 16,
    max_steps: int = 20_000,
    eval_every: int = 5,
    seed: int = 0,
    device: str = "cpu",
    progress: bool = False,
) -> dict[str, object]:
    r"""Online SGD (hinge, batch 32, lr 0.1, fresh samples) on ``seeds`` networks at one ``d`` (cached per argument set).

    Each network has its own hidden pair and initialisation; all train at
    once (:func:`xorlib.baselines.train_mlp_ensemble`). Returns ``d``, ``width``,
    ``params``; ``steps``, ``samples`` and ``flops`` to success of each seed
    (``None`` if it never succeeded within ``max_steps``); their medians
    (``median_*``: 50 % of the seeds have succeeded) and 90 % quantiles
    (``q90_*``); ``wall_time`` and ``train_time`` per network;
    ``success_fraction``; ``curve_steps`` and the median accuracy over seeds
    ``curve_accuracy`` (a network that has succeeded is frozen but still evaluated).
    """
    d = check_int("d", d, minimum=2)
    seeds = check_int("seeds", seeds, minimum=1)
    results = train_mlp_ensemble(
        d,
        _pairs(d, seeds, seed),
        width=width,
        max_steps=max_steps,
        eval_every=eval_every,
        seed=seed,
        device=device,
        progress=progress,
    )
    steps = [r.steps_to_success for r in results]
    samples = [r.samples_to_success for r in results]
    flops = [r.flops_to_success for r in results]
    return {
        "d": d,
        "width": width,
        "params": results[0].params,
        "steps": steps,
        "samples": samples,
        "flops": flops,
        "median_steps": _quantile(steps, 0.5),
        "q90_steps": _quantile(steps, 0.9),
        "median_samples": _quantile(samples, 0.5),
        "q90_samples": _quantile(samples, 0.9),
        "median_flops": _quantile(flops, 0.5),
        "wall_time": results[0].wall_time,
        "train_time": results[0].train_time,
        "success_fraction": float(np.mean([s is not None for s in steps])),
        "curve_steps": list(results[0].steps),
        "curve_accuracy": np.median(np.array([r.accuracy for r in results]), axis=0).tolist(),
    }


def _collect(runs: list[dict[str, object]]) -> dict[str, list]:
    return {key: [run[key] for run in runs] for key in runs[0]}


def mlp_scaling(
    ds: tuple[int, ...] = BOOK_DS,
    *,
    width: int = DEFAULT_WIDTH,
    seeds: int = 16,
    max_steps: int = 20_000,
    eval_every: int = 5,
    seed: int = 0,
    device: str = "cpu",
    progress: bool = False,
) -> dict[str, list]:
    r"""The MLP across ``d``: :func:`mlp_run` for each ``d`` (each cached), as one dict of lists."""
    if len(ds) == 0:
        raise ValueError("ds must hold at least one dimension d")
    return _collect(
        [
            mlp_run(
                d,
                width=width,
                seeds=seeds,
                max_steps=max_steps,
                eval_every=eval_every,
                seed=seed,
                device=device,
                progress=progress,
            )
            for d in tqdm(ds, desc="MLP across d", disable=not progress)
        ]
    )


def mlp_width_sweep(
    d: int = 32,
    widths: tuple[int, ...] = BOOK_WIDTHS,
    *,
    seeds: int = 16,
    max_steps: int = 20_000,
    eval_every: int = 5,
    seed: int = 0,
    device: str = "cpu",
    progress: bool = False,
) -> dict[str, list]:
    r"""The MLP at one ``d`` for several widths: :func:`mlp_run` per width (each cached), as one dict of lists.

    The width changes the steps little; the parameters stay :math:`\ge W(d+2)+1 = \Theta(d)`.
    """
    if len(widths) == 0:
        raise ValueError("widths must hold at least one width")
    return _collect(
        [
            mlp_run(
                d,
                width=width,
                seeds=seeds,
                max_steps=max_steps,
                eval_every=eval_every,
                seed=seed,
                device=device,
                progress=progress,
            )
            for width in tqdm(widths, desc=f"MLP widths (d={d})", disable=not progress)
        ]
    )


def _neuron_fractions(
    net: TwoLayerReLU, pair: tuple[int, int], grid: list[int], generator: torch.Generator, device: str
) -> list[float]:
    """Share of units whose top-2 |first-layer gradient| entries are the pair, at each n (one stream of samples)."""
    d, width = net.d, net.width
    chunk = max(256, (1 << 20) // width)
    total = torch.zeros(width, d, dtype=torch.float64, device=net.first.device)
    fractions, done = [], 0
    for n in grid:
        while done < n:
            rows = min(chunk, n - done)
            x = random_signs(generator, (1, rows, d), device=device).contiguous()
            y = -x[..., pair[0]] * x[..., pair[1]]
            total += net.hinge_gradients(x, y)[0][0].double() * rows  # the mean over the chunk, re-weighted
            done += rows
        top = (total / n).abs().topk(2, dim=-1).indices.sort(-1).values
        fractions.append(float(((top[:, 0] == min(pair)) & (top[:, 1] == max(pair))).double().mean()))
    return fractions


@cached
def neuron_one_step(
    ds: tuple[int, ...] = (8, 16, 32, 64),
    *,
    factors: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0),
    width: int = 512,
    seed: int = 0,
    device: str = "cpu",
) -> dict[str, list]:
    r"""The one-step FFNN: one hinge-loss gradient on :math:`n = f\,d\ln d` fresh samples, at initialisation.

    For each hidden unit :math:`k` of a width-``width`` network (each unit is an
    independent draw of the initialisation) the gradient with respect to its
    :math:`d` first-layer weights is computed on one batch of :math:`n` samples
    (accumulated in chunks; the larger batches extend the smaller ones).
    Returns, per ``d``: ``n`` (the batch sizes) and ``fraction``, the share of
    units whose two largest entries :math:`|\partial\hat L/\partial w_{k,i}|` are
    exactly the hidden pair.
    """
    seed = check_seed("seed", seed)
    if len(ds) == 0 or len(factors) == 0:
        raise ValueError("ds and factors must each hold at least one value")
    rows: dict[str, list] = {key: [] for key in ("d", "n", "fraction")}
    for d in ds:
        d = check_int("d", d, minimum=3)
        grid = sorted({max(1, round(check_float("factor", f, minimum=0.0) * d * math.log(d))) for f in factors})
        net = TwoLayerReLU(d, width, seed=seed, device=device)
        with single_threaded():
            fractions = _neuron_fractions(
                net, random_pair(d, seed=seed + d), grid, make_generator(seed + 31 * d, device), device
            )
        rows["d"].append(d)
        rows["n"].append(grid)
        rows["fraction"].append(fractions)
    return rows


def transformer_step_flops(n: int, d: int, m: int) -> int:
    r"""FLOPs of one empirical step from zero init: :math:`\approx 3nd` for :math:`\hat c`, plus :math:`4dm` for the scores.

    Per sample: :math:`d` additions for :math:`z`, a few operations for
    :math:`w`, :math:`2d` for the multiply-accumulate :math:`w\,x`. Counted, not
    measured (wall time is measured beside it).
    """
    return n * (3 * d + 8) + 4 * d * m


@cached
def who_pays_what(
    ds: tuple[int, ...] = BOOK_DS,
    *,
    trials: int = 32,
    seeds: int = 16,
    width: int = DEFAULT_WIDTH,
    seed: int = 0,
    device: str = "cpu",
    progress: bool = False,
) -> dict[str, list]:
    r"""Parameters, samples, steps and compute of both models, in one run, one row per (``d``, model).

    * **Transformer, one step**: :math:`2m` parameters; samples = the fitted
      :math:`n^*` of the pair-free rule of :func:`~xorlib.experiments.finite_samples.finite_sample_experiment`
      (50 % success; ``samples_90`` for 90 %); compute = :func:`transformer_step_flops`
      and the wall time of that one streamed step at :math:`n^*`, measured here.
    * **MLP, online SGD**: :math:`W(d+2)+1` parameters; median steps and samples
      to 100 % accuracy over ``seeds`` runs (90 % quantile in ``samples_90``);
      training FLOPs (:func:`xorlib.baselines.mlp_step_flops`) and training wall time per run.

    Keys: ``d, model, params, steps, samples, samples_90, flops, seconds``.
    """
    ds = tuple(check_int("d", d, minimum=4) for d in ds)
    fs = finite_sample_experiment(ds, trials=trials, seed=seed, device=device, progress=progress)
    table = success_table(fs)
    mlp = mlp_scaling(ds, width=width, seeds=seeds, seed=seed, device=device, progress=progress)
    keys = ("d", "model", "params", "steps", "samples", "samples_90", "flops", "seconds")
    rows: dict[str, list] = {key: [] for key in keys}

    def add(**row: object) -> None:
        for key in keys:
            rows[key].append(row[key])

    for k, d in enumerate(ds):
        m = table["m"][k]
        n_star = table["n_rule"][k]
        n_90 = table["n_rule_90"][k]
        n_timed = max(1, round(n_star)) if math.isfinite(n_star) else 1
        start = time.perf_counter()
        codes = positional_codes(d, seed=0, device=device)
        unit_scores(streamed_coefficients(d, [fs["pairs"][k][0]], [n_timed], seed=seed + 1, device=device), codes)
        seconds = time.perf_counter() - start
        add(
            d=d,
            model="Transformer (one step)",
            params=2 * m,
            steps=1,
            samples=n_star,
            samples_90=n_90,
            flops=float(transformer_step_flops(n_timed, d, m)),
            seconds=seconds,
        )
        add(
            d=d,
            model="MLP (online SGD)",
            params=mlp["params"][k],
            steps=mlp["median_steps"][k],
            samples=mlp["median_samples"][k],
            samples_90=mlp["q90_samples"][k],
            flops=mlp["median_flops"][k],
            seconds=mlp["train_time"][k],
        )
    rows["mlp_step_flops"] = [mlp_step_flops(d, width, 32) for d in ds]
    return rows


def who_pays_what_html(rows: dict[str, list]) -> str:
    """:func:`who_pays_what` as an HTML table (one row per ``d`` and model)."""
    header = (
        "d",
        "model",
        "trainable parameters",
        "steps",
        "samples (50 %)",
        "training FLOPs",
        "wall time (s)",
        "samples (90 %)",
    )
    body = [
        (
            rows["d"][k],
            rows["model"][k],
            rows["params"][k],
            float(rows["steps"][k]),
            float(rows["samples"][k]),
            float(rows["flops"][k]),
            float(rows["seconds"][k]),
            float(rows["samples_90"][k]),
        )
        for k in range(len(rows["d"]))
    ]
    return html_table(header, body, ("d", "s", ",d", ".4g", ".3g", ".3g", ".2g", ".3g"))


def who_pays_what_exponents(rows: dict[str, list]) -> dict[tuple[str, str], float]:
    r"""Fitted exponents :math:`a` in :math:`y \propto d^a` of parameters, samples and FLOPs, per model."""
    exponents: dict[tuple[str, str], float] = {}
    for model in dict.fromkeys(rows["model"]):
        idx = [k for k, name in enumerate(rows["model"]) if name == model]
        for key in ("params", "samples", "flops"):
            values = [rows[key][k] for k in idx]
            if len(idx) >= 2 and all(math.isfinite(v) for v in values):
                exponents[(model, key)] = fit_power_law([rows["d"][k] for k in idx], values)["exponent"]
    return exponents


def _print(rows: dict[str, list]) -> None:
    print(
        f"{'d':>5} {'model':<24} {'params':>8} {'steps':>7} {'samples':>10} {'samples90':>10} {'FLOPs':>10} {'sec':>8}"
    )
    for k in range(len(rows["d"])):
        print(
            f"{rows['d'][k]:>5} {rows['model'][k]:<24} {rows['params'][k]:>8} {rows['steps'][k]:>7.4g}"
            f" {rows['samples'][k]:>10.3g} {rows['samples_90'][k]:>10.3g} {rows['flops'][k]:>10.3g}"
            f" {rows['seconds'][k]:>8.3g}"
        )
    for (model, key), exponent in who_pays_what_exponents(rows).items():
        print(f"{model}: {key} ~ d^{exponent:.2f}")


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m xorlib.experiments.ffnn [--full]``: run the comparison (cached) and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help=f"the full grid d in {FULL_DS} (else {BOOK_DS})")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    torch.set_num_threads(min(2, torch.get_num_threads()))
    start = time.perf_counter()
    if args.full:
        rows = who_pays_what(FULL_DS, trials=64, seeds=32, device=args.device, progress=True)
        sweep = mlp_width_sweep(32, FULL_WIDTHS, seeds=32, device=args.device, progress=True)
    else:
        rows = who_pays_what(BOOK_DS, device=args.device, progress=True)
        sweep = mlp_width_sweep(32, BOOK_WIDTHS, device=args.device, progress=True)
    _print(rows)
    print("width sweep at d = 32:")
    for k, width in enumerate(sweep["width"]):
        print(
            f"  width {width:>4}: params {sweep['params'][k]:>6}, median steps {sweep['median_steps'][k]:>7.4g},"
            f" success {sweep['success_fraction'][k]:.2f}"
        )
    print(f"total {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
