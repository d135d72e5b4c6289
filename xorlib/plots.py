"""Figures of the book. Each function draws on a Matplotlib ``Axes`` and returns it.

New figure functions are appended at the end of this file. Plot functions take computed results (tensors, arrays, dicts) and never run an
experiment themselves, so a chapter shows exactly the numbers it computed.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ._validate import check_pair, check_tensor

HEAD_COLOURS = ("#1f77b4", "#d62728")


def _axes(ax: Axes | None, figsize: tuple[float, float] = (6.0, 3.0)) -> Axes:
    if ax is None:
        _, ax = plt.subplots(figsize=figsize, layout="constrained")
    return ax


def plot_attention(
    weights: torch.Tensor,
    pair: tuple[int, int],
    *,
    ax: Axes | None = None,
    title: str | None = None,
    log: bool = False,
) -> Axes:
    """Stem plot of each head's attention over positions, the relevant pair marked.

    Parameters
    ----------
    weights
        Shape ``(2, d)``: the attention weights of the two heads.
    pair
        The relevant positions, marked with vertical bands.
    log
        Use a logarithmic weight axis (shows the tiny mass left elsewhere).
    """
    weights = check_tensor("weights", weights, ndim=2)
    d = weights.shape[1]
    pair = check_pair("pair", pair, d)
    ax = _axes(ax)
    positions = np.arange(d)
    values = weights.detach().cpu().double().numpy()
    for h in range(values.shape[0]):
        offset = (h - 0.5) * 0.25
        ax.vlines(positions + offset, 0 if not log else values.min() / 2, values[h], color=HEAD_COLOURS[h], lw=1.2)
        ax.plot(positions + offset, values[h], "o", ms=3, color=HEAD_COLOURS[h], label=f"head {h + 1}")
    for k in pair:
        ax.axvspan(k - 0.5, k + 0.5, color="0.85", zorder=0)
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("position $i$")
    ax.set_ylabel(r"attention $\alpha_{h,i}$")
    ax.set_xlim(-1, d)
    if title:
        ax.set_title(title)
    ax.legend(frameon=False, loc="upper right")
    return ax


def plot_attention_heatmap(
    weights: Sequence[torch.Tensor] | torch.Tensor,
    pair: tuple[int, int],
    *,
    labels: Sequence[str] | None = None,
    fig: Figure | None = None,
) -> Figure:
    """Heatmap of attention: one row per (snapshot, head), one column per position.

    ``weights`` is a sequence of ``(2, d)`` tensors (before/after, or one per
    seed); ``labels`` names each snapshot.
    """
    stack = [
        check_tensor("weights", w, ndim=2) for w in (weights if not isinstance(weights, torch.Tensor) else [weights])
    ]
    d = stack[0].shape[1]
    pair = check_pair("pair", pair, d)
    rows = torch.cat([w.detach().cpu().double() for w in stack]).numpy()
    labels = list(labels) if labels is not None else [f"snapshot {k}" for k in range(len(stack))]
    if len(labels) != len(stack):
        raise ValueError(f"labels must name each of the {len(stack)} snapshots, got {len(labels)}")
    fig = fig or plt.figure(figsize=(7.0, 0.45 * rows.shape[0] + 1.2), layout="constrained")
    ax = fig.add_subplot()
    image = ax.imshow(rows, aspect="auto", cmap="magma", interpolation="nearest", vmin=0.0, vmax=max(rows.max(), 1e-12))
    ax.set_yticks(range(rows.shape[0]), [f"{lab}, head {h + 1}" for lab in labels for h in range(2)])
    ax.set_xticks(list(pair), [rf"$i^*={pair[0]}$", rf"$j^*={pair[1]}$"])
    ax.set_xlabel("position")
    fig.colorbar(image, ax=ax, label="attention weight")
    return fig


def plot_loss_vs_sharpness(
    curves: dict[str, dict[str, list[float]]],
    *,
    key: str = "worst",
    ax: Axes | None = None,
    floor: float = 1e-30,
    title: str | None = None,
) -> Axes:
    r"""Loss after one step against the sharpness :math:`\kappa`, one line per labelled curve.

    ``curves`` maps a label to a dict with lists ``"kappa"`` and ``key`` (as
    returned by :func:`xorlib.theory.one_step_curve`). Values below ``floor``
    are drawn at ``floor`` so that exact zeros stay on a log axis.
    """
    ax = _axes(ax, (6.0, 3.6))
    for label, curve in curves.items():
        values = np.maximum(np.asarray(curve[key], dtype=float), floor)
        ax.plot(curve["kappa"], values, "o-", ms=3, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(r"sharpness $\kappa = 2\eta/d^2$")
    ax.set_ylabel(
        {"worst": "worst-case loss over all inputs", "mean": "mean loss", "rest": "rest mass $E$"}.get(key, key)
    )
    if title:
        ax.set_title(title)
    ax.legend(frameon=False, fontsize="small")
    return ax


def plot_score_gradient(
    coefficients: dict[str, torch.Tensor],
    pair: tuple[int, int],
    *,
    ax: Axes | None = None,
) -> Axes:
    r"""Per-position gradient coefficients :math:`-\partial L/\partial s_k` (one head), one marker style per source.

    ``coefficients`` maps a label (``"population"``, ``"n = 1000"``, ...) to a
    tensor of shape ``(d,)``.
    """
    ax = _axes(ax, (7.0, 3.2))
    markers = iter(["o", "x", "+", "^", "s", "v"])
    for label, values in coefficients.items():
        values = check_tensor("coefficients", values, ndim=1).detach().cpu().double().numpy()
        pair = check_pair("pair", pair, values.shape[0])
        ax.plot(np.arange(values.shape[0]), values, next(markers), ms=4, label=label, alpha=0.8)
    for k in pair:
        ax.axvspan(k - 0.5, k + 0.5, color="0.85", zorder=0)
    ax.axhline(0.0, color="0.5", lw=0.8)
    ax.set_xlabel("position $k$")
    ax.set_ylabel(r"$-\partial L / \partial s_{k}$")
    ax.legend(frameon=False, fontsize="small", ncol=2)
    return ax


def plot_explorer(state: object, *, fig: Figure | None = None, floor: float = 1e-18) -> Figure:
    r"""The explorer's picture of one :class:`xorlib.widgets.ExplorerState`.

    Left: the attention of both heads after the step (log axis when every
    weight is positive), the hidden pair shaded. Right: the mean and the
    worst-case loss before the step (uniform attention) and after it, on a log
    axis, values below ``floor`` drawn at ``floor``. A worst case that is only
    bracketed is drawn at its upper bound with the bracket as an error bar.
    """
    fig = fig or plt.figure(figsize=(10.0, 3.4), layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=[2.2, 1.0])
    weights = check_tensor("state.weights_after", state.weights_after, ndim=2)
    title = (
        f"{state.attention}, d={state.d}, m={state.m}, κ={state.kappa:.3g}, {state.gradient}: "
        f"{state.pair_mass:.3f} of the attention on the pair"
    )
    plot_attention(weights, state.pair, ax=left, log=bool((weights > 0).all()), title=title)
    before = np.maximum([state.mean_before, state.worst_before], floor)
    after = np.maximum([state.mean_after, state.worst_after], floor)
    x = np.arange(2)
    right.bar(x - 0.2, before, 0.4, color="0.7", label="before (uniform)")
    bars = right.bar(x + 0.2, after, 0.4, color=HEAD_COLOURS[0], label="after one step")
    if not state.worst_after_exact:
        lower = max(state.worst_after_lower, floor)
        right.errorbar([1.2], [after[1]], yerr=[[after[1] - lower], [0.0]], fmt="none", ecolor="k", capsize=3)
    for bar, value in zip(bars, after, strict=True):
        right.annotate(f"{value:.1e}", (bar.get_x() + bar.get_width() / 2, value), ha="center", va="bottom", fontsize=8)
    right.set_yscale("log")
    right.set_ylim(floor, 1e3)
    right.set_xticks(x, ["mean loss", "worst case" + ("" if state.worst_after_exact else " (bound)")])
    right.set_title("loss before (grey) and after (blue)", fontsize="medium")
    return fig


# --------------------------------------------------------------------------- finite samples and the FFNN baseline
# (chapters 05_finite_samples and 06_ffnn_baseline)

_D_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22")


def plot_kappa_window(
    profile: dict[str, object], *, epsilon: float, ax: Axes | None = None, floor: float = 1e-12
) -> Axes:
    r"""Worst-case loss after one step against :math:`\kappa`: one line per sample size, the population dashed.

    ``profile`` is the output of :func:`xorlib.experiments.finite_samples.kappa_profile`.
    The horizontal line is the target :math:`\varepsilon`; a sample size succeeds
    where its line dips below it. Values below ``floor`` are drawn at ``floor``.
    """
    ax = _axes(ax, (6.4, 3.6))
    kappa = np.asarray(profile["kappa"], dtype=float)
    for k, (n, worst) in enumerate(zip(profile["n"], profile["worst"], strict=True)):
        ax.plot(kappa, np.maximum(worst, floor), "o-", ms=3, color=_D_COLOURS[k % len(_D_COLOURS)], label=f"n = {n:,}")
    ax.plot(kappa, np.maximum(profile["population"], floor), "k--", lw=1.2, label="population")
    ax.axhline(epsilon, color="0.4", lw=0.8, ls=":")
    ax.annotate(rf"$\varepsilon = {epsilon:g}$", (kappa[0], epsilon), xytext=(2, 3), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(max(floor, 1e-6), 4.0)
    ax.set_xlabel(r"sharpness $\kappa$ of the step")
    ax.set_ylabel("worst-case loss over all inputs")
    ax.legend(frameon=False, fontsize="small", loc="lower left")
    return ax


def plot_success_curves(
    result: dict[str, object], *, key: str = "oracle", ax: Axes | None = None, window: bool = True
) -> Axes:
    r"""Success probability against the sample size, one colour per ``d``; the window estimate dotted.

    ``result`` is :func:`xorlib.experiments.finite_samples.finite_sample_experiment`'s
    output; ``key`` is ``"oracle"``, ``"rule"`` or ``"fixed"``.
    """
    if key not in ("oracle", "rule", "fixed"):
        raise ValueError(f"key must be one of ['oracle', 'rule', 'fixed'], got {key!r}")
    ax = _axes(ax, (6.0, 3.4))
    for k, d in enumerate(result["d"]):
        colour = _D_COLOURS[k % len(_D_COLOURS)]
        ax.plot(result["n"][k], result[key][k], "o-", ms=3, color=colour, label=f"d = {d}")
        if window:
            ax.plot(result["n"][k], result["window"][k], ":", color=colour, lw=1.2)
    ax.set_xscale("log")
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("samples $n$ in the one step")
    ax.set_ylabel("success probability")
    ax.legend(frameon=False, fontsize="small", loc="upper left")
    return ax


def plot_sample_thresholds(table: dict[str, list], *, ax: Axes | None = None) -> Axes:
    r"""The fitted sample threshold :math:`n^*(d)` beside the window estimate and the two reference lines.

    ``table`` is :func:`xorlib.experiments.finite_samples.success_table`'s output.
    The grey line is a least-squares power law through the oracle thresholds.
    """
    ax = _axes(ax, (6.0, 3.8))
    d = np.asarray(table["d"], dtype=float)
    styles = (
        ("n_oracle", "o-", "measured, best $\\kappa$ (oracle)"),
        ("n_rule", "s-", "measured, pair-free rule"),
        ("n_fixed", "^-", "measured, fixed $\\kappa$"),
        ("n_window", "k--", "window estimate"),
        ("sq_frontier", "k:", r"SQ frontier $\binom{d}{2} / 2m$"),
        ("info_floor", "k-.", r"information floor $\log_2\binom{d}{2}$"),
    )
    for key, style, label in styles:
        ax.plot(d, np.asarray(table[key], dtype=float), style, ms=4, label=label)
    finite = np.isfinite(np.asarray(table["n_oracle"], dtype=float))
    if finite.sum() >= 2:
        slope, intercept = np.polyfit(np.log(d[finite]), np.log(np.asarray(table["n_oracle"])[finite]), 1)
        grid = np.geomspace(d.min(), d.max(), 50)
        ax.plot(
            grid,
            np.exp(intercept) * grid**slope,
            color="0.6",
            lw=3,
            alpha=0.4,
            zorder=0,
            label=f"fit $d^{{{slope:.2f}}}$",
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("$d$")
    ax.set_ylabel("samples for 50 % success")
    ax.legend(frameon=False, fontsize="x-small", loc="center left", bbox_to_anchor=(1.02, 0.5))
    return ax


def plot_accuracy_curves(mlp: dict[str, list], *, ax: Axes | None = None) -> Axes:
    r"""Median accuracy on fresh samples against SGD steps, one line per ``d``.

    ``mlp`` is :func:`xorlib.experiments.ffnn.mlp_scaling`'s output.
    """
    ax = _axes(ax, (6.0, 3.2))
    for k, d in enumerate(mlp["d"]):
        ax.plot(
            mlp["curve_steps"][k],
            mlp["curve_accuracy"][k],
            "-",
            color=_D_COLOURS[k % len(_D_COLOURS)],
            label=f"d = {d}",
        )
    ax.axhline(1.0, color="0.6", lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.set_xlabel("online SGD steps (batch 32)")
    ax.set_ylabel("median accuracy (8192 fresh samples)")
    ax.legend(frameon=False, fontsize="small", loc="lower right")
    return ax


def plot_neuron_gradient(
    gradient: torch.Tensor, pair: tuple[int, int], *, ax: Axes | None = None, title: str | None = None
) -> Axes:
    r"""One hidden unit's first-layer gradient :math:`\partial L/\partial w_{k,i}` over positions, the pair shaded."""
    values = check_tensor("gradient", gradient, ndim=1).detach().cpu().double().numpy()
    pair = check_pair("pair", pair, values.shape[0])
    ax = _axes(ax, (6.0, 3.0))
    positions = np.arange(values.shape[0])
    ax.vlines(positions, 0.0, values, color=HEAD_COLOURS[0], lw=1.4)
    ax.plot(positions, values, "o", ms=3, color=HEAD_COLOURS[0])
    for k in pair:
        ax.axvspan(k - 0.5, k + 0.5, color="0.85", zorder=0)
    ax.axhline(0.0, color="0.5", lw=0.8)
    ax.set_xlabel("input position $i$")
    ax.set_ylabel(r"$\partial L / \partial w_{k,i}$")
    if title:
        ax.set_title(title)
    return ax


def plot_neuron_fraction(neuron: dict[str, list], *, ax: Axes | None = None) -> Axes:
    r"""Share of hidden units whose two largest first-layer gradient entries are the pair, against :math:`n/(d\ln d)`.

    ``neuron`` is :func:`xorlib.experiments.ffnn.neuron_one_step`'s output.
    """
    ax = _axes(ax, (6.0, 3.2))
    for k, d in enumerate(neuron["d"]):
        n = np.asarray(neuron["n"][k], dtype=float)
        ax.plot(
            n / (d * np.log(d)),
            neuron["fraction"][k],
            "o-",
            ms=3,
            color=_D_COLOURS[k % len(_D_COLOURS)],
            label=f"d = {d}",
        )
    ax.set_xscale("log")
    ax.set_ylim(-0.02, 1.0)
    ax.set_xlabel(r"batch size $n / (d \ln d)$")
    ax.set_ylabel("units with the pair on top")
    ax.legend(frameon=False, fontsize="small", loc="upper left")
    return ax


def plot_who_pays_what(
    rows: dict[str, list], *, references: dict[str, list] | None = None, fig: Figure | None = None
) -> Figure:
    r"""Parameters, samples and compute against :math:`d` for each model, in three panels of one figure.

    ``rows`` is :func:`xorlib.experiments.ffnn.who_pays_what`'s output;
    ``references`` optionally maps a label to per-``d`` sample counts (drawn
    dotted in the samples panel, e.g. the SQ frontier and the information floor).
    """
    fig = fig or plt.figure(figsize=(10.5, 3.4), layout="constrained")
    axes = fig.subplots(1, 3)
    models = list(dict.fromkeys(rows["model"]))
    markers = ("o", "s", "^", "D")
    for panel, (key, label) in zip(
        axes,
        (("params", "trainable parameters"), ("samples", "samples to success (50 %)"), ("flops", "training FLOPs")),
        strict=True,
    ):
        for j, model in enumerate(models):
            idx = [k for k, name in enumerate(rows["model"]) if name == model]
            panel.plot(
                [rows["d"][k] for k in idx],
                [rows[key][k] for k in idx],
                markers[j % 4] + "-",
                color=HEAD_COLOURS[j % 2] if j < 2 else "0.3",
                label=model,
            )
        panel.set_xscale("log", base=2)
        panel.set_yscale("log")
        panel.set_xlabel("$d$")
        panel.set_title(label, fontsize="medium")
    if references:
        ds = list(dict.fromkeys(rows["d"]))
        for style, (label, values) in zip((":", "-."), references.items(), strict=False):
            axes[1].plot(ds, values, "k" + style, lw=1.0, label=label)
    axes[0].legend(frameon=False, fontsize="small")
    axes[1].legend(frameon=False, fontsize="x-small")
    return fig


# --- Experiments 1, 2 and 5 (one step across d, attention variants, multi-step training) ---

_VARIANT_STYLE = {
    "softmax": ("#1f77b4", "o"),
    "linear": ("#ff7f0e", "s"),
    "componentwise": ("#2ca02c", "^"),
    "sigmoid": ("#9467bd", "v"),
}


def plot_one_step_across_d(
    sweep: dict[str, object],
    *,
    target: float | None = None,
    ax: Axes | None = None,
    floor: float = 1e-60,
) -> Axes:
    r"""Worst-case loss after one step against :math:`\kappa`, one colour per ``d``.

    ``sweep`` is :func:`xorlib.experiments.one_step.one_step_sweep`'s output. The line is
    the median over the draws whose pair margin is positive, the band their range;
    ``target`` draws a horizontal line. Values below ``floor`` are drawn at ``floor``.
    """
    ax = _axes(ax, (6.4, 3.8))
    kappas = np.asarray(sweep["kappas"], dtype=float)
    for a, d in enumerate(sweep["ds"]):
        separable = np.asarray(sweep["margin"][a]) > 1e-12
        worst = np.maximum(np.asarray(sweep["worst"][a])[separable], floor)  # (draws, K)
        if worst.size == 0:
            continue
        colour = _D_COLOURS[a % len(_D_COLOURS)]
        ax.plot(kappas, np.median(worst, axis=0), "o-", ms=3, color=colour, label=f"d = {d:,}")
        ax.fill_between(kappas, worst.min(axis=0), worst.max(axis=0), color=colour, alpha=0.08, lw=0)
    if target is not None:
        ax.axhline(target, color="0.3", lw=0.8, ls=":")
        ax.annotate(f"{target:g}", (kappas[0], target), xytext=(2, 3), textcoords="offset points", fontsize="small")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(floor, 10.0)
    ax.set_xlabel(r"sharpness $\kappa$ of the single step ($\eta = \kappa d^2/2$)")
    ax.set_ylabel("worst-case loss over all $2^d$ inputs")
    ax.legend(frameon=False, fontsize="x-small", ncol=2, loc="lower left")
    return ax


def plot_variant_code_dim(
    sweep: dict[str, object],
    *,
    epsilon: float,
    prediction: Sequence[float] | None = None,
    fig: Figure | None = None,
    floor: float = 1e-20,
) -> Figure:
    r"""Three panels against the code dimension :math:`m` at fixed ``d``, one line per normaliser.

    Left: fraction of draws whose best one-step worst-case loss is :math:`\le\varepsilon`
    (``prediction``, if given, is drawn dashed for softmax). Middle: the best worst-case
    loss (median over draws; floor ``floor``). Right: the best mean loss (median). ``sweep``
    is :func:`xorlib.experiments.attention_variants.code_dim_sweep`'s output.
    """
    fig = fig or plt.figure(figsize=(11.0, 3.4), layout="constrained")
    axes = fig.subplots(1, 3)
    ms = np.asarray(sweep["ms"], dtype=float)
    for attention in sweep["attentions"]:
        colour, marker = _VARIANT_STYLE.get(attention, ("0.3", "o"))
        table = sweep[attention]
        success = (np.asarray(table["best_worst_upper"]) <= epsilon).mean(axis=1)
        axes[0].plot(ms, success, marker + "-", ms=3, color=colour, label=attention)
        worst = np.clip(np.median(table["best_worst_upper"], axis=1), floor, 1e6)
        axes[1].plot(ms, worst, marker + "-", ms=3, color=colour, label=attention)
        mean = np.clip(np.median(table["best_mean"], axis=1), floor, 1e6)
        axes[2].plot(ms, mean, marker + "-", ms=3, color=colour, label=attention)
    if prediction is not None:
        axes[0].plot(ms, prediction, "--", color=_VARIANT_STYLE["softmax"][0], lw=1, label="softmax, predicted")
    axes[1].axhline(epsilon, color="0.3", lw=0.8, ls=":")
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("code dimension $m$ (parameters $2m$)")
    axes[0].set_ylabel(rf"fraction of draws with worst case $\leq {epsilon:g}$")
    axes[0].set_ylim(-0.03, 1.03)
    axes[1].set_yscale("log")
    axes[1].set_ylabel("best worst-case loss (median)")
    axes[2].set_yscale("log")
    axes[2].set_ylabel("best mean loss (median)")
    axes[0].legend(frameon=False, fontsize="x-small")
    fig.suptitle(f"one step from uniform attention, d = {sweep['d']}, best step size per normaliser", fontsize="medium")
    return fig


def plot_min_code_dim(table: dict[str, object], *, ax: Axes | None = None) -> Axes:
    r"""Smallest code dimension reaching :math:`\varepsilon` against ``d``, per normaliser, with reference lines.

    ``table`` is :func:`xorlib.experiments.attention_variants.min_code_dim_across_d`'s output.
    Normalisers that never reach :math:`\varepsilon` (up to :math:`m = d`) are drawn as crosses
    on the line :math:`m = d`, labelled "never".
    """
    ax = _axes(ax, (6.4, 3.8))
    ds = np.asarray(table["ds"], dtype=float)
    ax.plot(ds, ds, color="0.6", lw=1, label="$m = d$ (one-hot codes)")
    ax.plot(ds, table["default_m"], color="0.3", lw=1, ls="--", label=r"$\lceil 4\log_2 d\rceil$ (default)")
    for offset, attention in enumerate(table["attentions"]):
        colour, marker = _VARIANT_STYLE.get(attention, ("0.3", "o"))
        values = table["min_m"][attention]
        reached = [(d, m) for d, m in zip(ds, values, strict=True) if m is not None]
        never = [d for d, m in zip(ds, values, strict=True) if m is None]
        if reached:
            ax.plot(*zip(*reached, strict=True), marker + "-", color=colour, ms=5, label=attention)
        if never:
            jitter = 1.0 + 0.06 * offset
            ax.plot(np.asarray(never) * jitter, np.asarray(never) * 1.25, "x", color=colour, ms=6, mew=1.5,
                    label=f"{attention}: never")  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("input length $d$")
    ax.set_ylabel(r"smallest $m$ with worst case $\leq \varepsilon$")
    ax.legend(frameon=False, fontsize="x-small", loc="upper left")
    return ax


def plot_training_curves(
    curves: dict[str, np.ndarray],
    *,
    ax: Axes | None = None,
    ylabel: str = "population loss",
    reference: float | None = None,
    reference_label: str = "one step",
    floor: float = 1e-12,
) -> Axes:
    r"""Loss against the step, one colour per labelled set of runs: median line and min-max band.

    ``curves`` maps a label to an array of shape ``(runs, steps + 1)``; ``reference`` draws
    a horizontal line (the one-step result, say). Values below ``floor`` are drawn at ``floor``.
    """
    ax = _axes(ax, (6.4, 3.6))
    for k, (label, values) in enumerate(curves.items()):
        values = np.maximum(np.asarray(values, dtype=float), floor)
        steps = np.arange(values.shape[1])
        colour = _D_COLOURS[k % len(_D_COLOURS)]
        ax.plot(steps, np.median(values, axis=0), color=colour, lw=1.4, label=label)
        ax.fill_between(steps, values.min(axis=0), values.max(axis=0), color=colour, alpha=0.15, lw=0)
    ax.set_yscale("log")
    if reference is not None:
        bottom = ax.get_ylim()[0]
        if reference >= bottom:
            ax.axhline(reference, color="k", lw=1, ls="--", label=reference_label)
        else:  # far below the curves: say so instead of squashing them
            ax.annotate(f"{reference_label}: {reference:.0e}\n(far below the axis)", (0.98, 0.55),
                        xycoords="axes fraction", ha="right", fontsize="small")  # fmt: skip
    ax.set_xlabel("optimiser step $t$")
    ax.set_ylabel(ylabel)
    ax.legend(frameon=False, fontsize="x-small")
    return ax


def plot_head_heatmap(
    weights: np.ndarray | torch.Tensor, support: Sequence[int], *, ax: Axes | None = None, title: str | None = None
) -> Axes:
    """Heatmap of ``k`` heads' attention (shape ``(k, d)``), the support positions labelled on the x axis."""
    values = weights.detach().cpu().numpy() if isinstance(weights, torch.Tensor) else np.asarray(weights)
    if values.ndim != 2:
        raise ValueError(f"weights must have shape (k, d), got {values.shape}")
    ax = _axes(ax, (7.0, 0.45 * values.shape[0] + 1.4))
    image = ax.imshow(
        values, aspect="auto", cmap="magma", interpolation="nearest", vmin=0.0, vmax=max(values.max(), 1e-12)
    )
    ax.set_yticks(range(values.shape[0]), [f"head {h + 1}" for h in range(values.shape[0])])
    ax.set_xticks(list(support), [str(s) for s in support])
    ax.set_xlabel("position (support positions labelled)")
    if title:
        ax.set_title(title)
    ax.figure.colorbar(image, ax=ax, label="attention weight")
    return ax


def plot_window_extrapolation(far: dict[str, list], *, ax: Axes | None = None) -> Axes:
    r"""The window estimate of :math:`n^*` far beyond the simulated sizes, with the SQ frontier and the information floor.

    ``far`` holds lists ``d``, ``n_window``, ``sq_frontier`` and ``info_floor``. The
    grey line has the slope of :math:`d^2\ln d`, drawn through the last point.
    """
    ax = _axes(ax, (6.0, 3.6))
    d = np.asarray(far["d"], dtype=float)
    ax.plot(d, far["n_window"], "ko--", ms=4, label="window estimate")
    ax.plot(d, far["sq_frontier"], "k:", label=r"SQ frontier $\binom{d}{2}/2m$")
    ax.plot(d, far["info_floor"], "k-.", label=r"information floor $\log_2\binom{d}{2}$")
    reference = d**2 * np.log(d)
    scaled = reference * far["n_window"][-1] / reference[-1]
    ax.plot(d, scaled, color="0.6", lw=3, alpha=0.4, label=r"slope of $d^2\ln d$")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("$d$")
    ax.set_ylabel("samples for 50 % success")
    ax.legend(frameon=False, fontsize="x-small", loc="center left", bbox_to_anchor=(1.02, 0.5))
    return ax
