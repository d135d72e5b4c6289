"""Figures of the feed-forward chapter: the learning-rate grid, samples to success under both criteria, the linear bound."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

from .._checks import check_members
from .._contract import public
from ..experiments._criteria import LEARNERS
from ..experiments._ffnn import LrGridResult, SameCriterionResult
from ..experiments._linear_models import LinearBoundResult
from .style import PALETTE, subplots

__all__ = ["plot_linear_bound", "plot_lr_grid", "plot_same_criterion"]

_COLOURS = dict(zip(LEARNERS, (PALETTE["vermillion"], PALETTE["blue"], PALETTE["bluish green"]), strict=True))
_CRITERIA = {"loss": ("-", "o", "(a) loss < 0.01 everywhere"), "sign": ("--", "s", "(b) every sign right")}


@public
def plot_lr_grid(result: LrGridResult) -> Figure:
    """Median fresh samples to Barak et al.'s success against the learning rate, one line per ``d``.

    A rate at which fewer than half the trials succeeded within the budget is drawn
    as an open marker on the budget line.

    Examples
    --------
    >>> import dataclasses
    >>> from xorlib.experiments import plan, run
    >>> grid = run("lr_grid", dataclasses.replace(plan("lr_grid"), ds=(4,), lrs=(1.0,), trials=1, max_steps=10))
    >>> plot_lr_grid(grid)  # doctest: +ELLIPSIS
    <Figure size ...>
    """
    if not isinstance(result, LrGridResult):
        raise TypeError(f"result must be an LrGridResult, got {type(result).__name__}")
    fig, ax = subplots(1)
    budget = result.max_steps * 32
    colours = list(PALETTE.values())
    for k, d in enumerate(sorted({row.d for row in result.rows})):
        rows = sorted((r for r in result.rows if r.d == d), key=lambda r: r.lr)
        lrs = np.array([r.lr for r in rows])
        samples = np.array([r.median_samples for r in rows])
        done = np.isfinite(samples)
        colour = colours[k % len(colours)]
        ax.plot(lrs[done], samples[done], marker="o", color=colour, label=f"$d = {d}$")
        ax.plot(lrs[~done], np.full((~done).sum(), budget), ls="none", marker="o", mfc="white", color=colour)
    ax.axhline(budget, color=PALETTE["black"], lw=0.8, ls=":")
    ax.annotate(f"budget ({result.max_steps:,} steps)", (0.02, budget), xycoords=("axes fraction", "data"),
                xytext=(0, 6), textcoords="offset points")  # fmt: skip
    ax.set(xscale="log", yscale="log", xlabel=r"learning rate $\eta$", ylabel="median fresh samples to success")
    ax.set_ylim(top=budget * 3)
    ax.legend(loc="lower left")
    return fig


@public
def plot_same_criterion(result: SameCriterionResult, ds: Sequence[int] | None = None) -> Figure:
    """Fraction of trials that succeed against the number of samples: one panel per ``d``, both criteria per learner.

    Examples
    --------
    >>> import dataclasses
    >>> from xorlib.experiments import plan, run
    >>> small = dataclasses.replace(plan("same_criterion"), ds=(4,), trials=1, n_max=64)
    >>> plot_same_criterion(run("same_criterion", small), ds=(4,))  # doctest: +ELLIPSIS
    <Figure size ...>
    """
    if not isinstance(result, SameCriterionResult):
        raise TypeError(f"result must be a SameCriterionResult, got {type(result).__name__}")
    present = sorted({row.d for row in result.rows})
    ds = present if ds is None else check_members("ds", ds, present)
    fig, axes = subplots(len(ds), per_row=1, sharey=True)  # stacked: legible on a phone
    axes = np.atleast_1d(axes)
    for ax, d in zip(axes, ds, strict=True):
        for learner in LEARNERS:
            for criterion, (style, marker, _) in _CRITERIA.items():
                row = result.row(d, learner, criterion)
                ax.plot(row.n, row.fraction, ls=style, marker=marker, ms=3.5, color=_COLOURS[learner])
        ax.axhline(0.5, color=PALETTE["black"], lw=0.6, ls=":")
        ax.set(xscale="log", ylim=(-0.03, 1.03), xlabel="samples $n$", title=f"$d = {d}$")
    axes[0].set_ylabel("fraction of trials")
    handles = [axes[0].plot([], [], color=c, label=name)[0] for name, c in _COLOURS.items()]
    handles += [
        axes[0].plot([], [], color="0.4", ls=s, marker=m, ms=3.5, label=text)[0] for s, m, text in _CRITERIA.values()
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=2)  # within the figure's width
    return fig


@public
def plot_linear_bound(result: LinearBoundResult) -> Figure:
    r"""Mean squared :math:`L^2` error over all pairs against the number of trained numbers, with the proved floor.

    Examples
    --------
    >>> import dataclasses
    >>> from xorlib.experiments import plan, run
    >>> bound = run("linear_bound", dataclasses.replace(plan("linear_bound"), d=4, widths=(4, 8)))
    >>> plot_linear_bound(bound)  # doctest: +ELLIPSIS
    <Figure size ...>
    """
    if not isinstance(result, LinearBoundResult):
        raise TypeError(f"result must be a LinearBoundResult, got {type(result).__name__}")
    fig, ax = subplots(1)
    dims = np.array(result.dims)
    ax.plot(dims, result.mean_error, marker="o", color=PALETTE["vermillion"], label="random ReLU features (measured)")
    grid = np.geomspace(dims.min(), dims.max(), 200)
    floor = 1 - grid / len(result.transformer_errors)
    ax.plot(
        grid[floor > 0], floor[floor > 0], color=PALETTE["black"], ls="--", label=r"proved floor $1 - D/\binom{d}{2}$"
    )
    errors = np.array(result.transformer_errors)
    ax.plot([result.transformer_parameters], [np.nanmean(np.where(errors < 1, errors, np.nan))], marker="*", ms=12,
            ls="none", color=PALETTE["blue"],
            label=f"split Transformer, one step (mean over the {result.transformer_fitted} of "
                  f"{len(errors)} pairs it fits)")  # fmt: skip
    ax.set(xscale="log", yscale="log", xlabel="trained numbers $D$ (dimension of the span)",
           ylabel="mean squared $L^2$ error over pairs", title=f"$d = {result.d}$, all {2**result.d:,} inputs")  # fmt: skip
    fig.legend(loc="outside lower center", ncols=1)  # below the axes: never over the ticks or the data
    return fig
