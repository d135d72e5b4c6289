"""Figures of multi-step training and of the authors' model: certified worst case per step, margins, attention maps."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

from .._checks import check_members
from .._contract import public
from ..experiments._authors import AuthorsResult, AuthorsRuns
from ..experiments._multistep import MultistepResult
from .style import PALETTE, subplots

__all__ = ["plot_authors_attention", "plot_authors_margins", "plot_multistep"]


@public
def plot_multistep(result: MultistepResult) -> Figure:
    """Certified worst-case loss against the step, one panel per model, one line (median, quartile band) per ``d``.

    The one-step learner's median on the same codes is the marker at step 1.

    Examples
    --------
    >>> import dataclasses
    >>> from xorlib.experiments import plan, run
    >>> sweep = run("multistep", dataclasses.replace(plan("multistep"), ds=(4,), runs=1, steps=2))
    >>> plot_multistep(sweep)  # doctest: +ELLIPSIS
    <Figure size ...>
    """
    if not isinstance(result, MultistepResult):
        raise TypeError(f"result must be a MultistepResult, got {type(result).__name__}")
    heads = list(dict.fromkeys(row.heads for row in result.rows))
    fig, axes = subplots(len(heads), per_row=1, sharey=True)  # stacked: legible on a phone
    axes = np.atleast_1d(axes)
    colours = list(PALETTE.values())
    floor = 1e-12
    for ax, model in zip(axes, heads, strict=True):
        for k, row in enumerate(r for r in result.rows if r.heads == model):
            steps = np.arange(row.worst_median.shape[0])
            colour = colours[k % len(colours)]
            ax.plot(steps, np.clip(row.worst_median, floor, None), color=colour, label=f"$d = {row.d}$")
            ax.fill_between(
                steps,
                np.clip(row.worst_low, floor, None),
                np.clip(row.worst_high, floor, None),
                color=colour,
                alpha=0.2,
                lw=0,
            )
            ax.plot(
                [1], [max(float(np.nanmedian(row.one_step_worst)), floor)], marker="*", ms=11, color=colour, ls="none"
            )
        ax.axhline(result.epsilon, color=PALETTE["black"], lw=0.8, ls=":")
        ax.set(yscale="log", xlabel="step", title=f"{model} model", ylim=(floor, 10))
    axes[0].set_ylabel("certified worst-case loss")
    axes[0].legend(loc="lower left", title="median (band: quartiles); ★ one step")
    return fig


def _panels(result: AuthorsResult, ds: Sequence[int] | None) -> list[AuthorsRuns]:
    if not isinstance(result, AuthorsResult):
        raise TypeError(f"result must be an AuthorsResult, got {type(result).__name__}")
    if ds is None:
        return list(result.authors)
    return [result.runs_at(d) for d in check_members("ds", ds, [runs.d for runs in result.authors])]


@public
def plot_authors_margins(result: AuthorsResult, ds: Sequence[int] | None = None) -> Figure:
    """The smallest margin :math:`\\min_x y\\hat y` against the epoch, one line per run, one panel per ``d``.

    Above 0 every sign is right; above 0.99 the hinge loss is below 0.01 on every input.
    Beyond :math:`d = 20` the margin is the certified lower bound.

    Examples
    --------
    >>> import dataclasses
    >>> from xorlib.experiments import plan, run
    >>> result = run("authors", dataclasses.replace(plan("authors"), ds=(4,), epochs=(2,), runs=(1,), adam_steps=2))
    >>> plot_authors_margins(result, ds=(4,))  # doctest: +ELLIPSIS
    <Figure size ...>
    """
    panels = _panels(result, ds)
    fig, axes = subplots(len(panels), per_row=1, sharey=True)  # stacked: legible on a phone
    axes = np.atleast_1d(axes)
    colours = list(PALETTE.values())
    for ax, runs in zip(axes, panels, strict=True):
        for r in range(runs.margin.shape[1]):
            ax.plot(runs.epochs, runs.margin[:, r], color=colours[r % len(colours)], lw=1.2)
        for level, style, label in ((0.0, ":", "(b) every sign right"), (0.99, "--", "(a) hinge < 0.01")):
            ax.axhline(level, color=PALETTE["black"], lw=0.8, ls=style)
            ax.annotate(label, (0.98, level), xycoords=("axes fraction", "data"), xytext=(0, -11),
                        textcoords="offset points", ha="right")  # fmt: skip
        ax.set(xlabel="epoch", title=f"$d = {runs.d}$", ylim=(-3.1, 1.1))
    axes[0].set_ylabel("smallest margin over all inputs")
    return fig


@public
def plot_authors_attention(result: AuthorsResult, ds: Sequence[int] | None = None) -> Figure:
    r"""Final attention of every head of every run, as used by the model (with the :math:`n/4` temperature).

    One panel per ``d``; rows are (run, head), columns positions, the hidden bits
    outlined; the colour scale is linear on :math:`[0, 1]`.

    Examples
    --------
    >>> import dataclasses
    >>> from xorlib.experiments import plan, run
    >>> result = run("authors", dataclasses.replace(plan("authors"), ds=(4,), epochs=(2,), runs=(1,), adam_steps=2))
    >>> plot_authors_attention(result, ds=(4,))  # doctest: +ELLIPSIS
    <Figure size ...>
    """
    panels = _panels(result, ds)
    fig, axes = subplots(len(panels), per_row=1, height=2.2 + 0.12 * max(r.attention.shape[0] * r.k for r in panels))
    axes = np.atleast_1d(axes)
    image = None
    for ax, runs in zip(axes, panels, strict=True):
        runs_count, k, d = runs.attention.shape
        image = ax.imshow(runs.attention.reshape(runs_count * k, d), aspect="auto", cmap="viridis", vmin=0, vmax=1,
                          interpolation="nearest")  # fmt: skip
        for r, support in enumerate(runs.supports):
            for j in support:
                ax.add_patch(_outline(j, r * k, k))
        ax.set_yticks(np.arange(runs_count) * k + (k - 1) / 2, [f"run {r + 1}" for r in range(runs_count)])
        ax.set(xlabel="position $j$ (outlined: hidden bits)", title=f"$d = {runs.d}$")
        for r in range(1, runs_count):
            ax.axhline(r * k - 0.5, color="white", lw=1.0)
    fig.colorbar(image, ax=list(axes), label=r"attention $\alpha_{h,j}$", shrink=0.9)
    return fig


def _outline(column: int, row: int, height: int):
    from matplotlib.patches import Rectangle

    return Rectangle((column - 0.5, row - 0.5), 1, height, fill=False, edgecolor=PALETTE["orange"], lw=1.6)
