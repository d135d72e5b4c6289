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
    ax.set_ylabel({"worst": "worst-case loss over all inputs", "mean": "mean loss", "rest": "rest mass $E$"}.get(key, key))
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
