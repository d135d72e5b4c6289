"""Figures of the finite-sample experiments: success against samples, and the samples needed against d."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.ticker import NullFormatter

from .._checks import check_choice, check_instance, check_numbers, check_sequence
from .._contract import public
from ..experiments._finite_samples import SuccessGrid
from .style import subplots

__all__ = ["plot_sample_thresholds", "plot_success_curves"]

#: Okabe–Ito colours, one per dimension.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")


@public
def plot_success_curves(grids: Sequence[SuccessGrid], *, criterion: str = "worst case", ax: Axes | None = None) -> Axes:
    """The fraction of draws that succeed against :math:`n/d^2`, one line per ``d``.

    Examples
    --------
    >>> import dataclasses
    >>> from xorlib.experiments import plan, run
    >>> tiny = plan("finite_samples").split.__class__(ds=(4,), code_draws=1, trials=1)
    >>> samples = run("finite_samples", dataclasses.replace(plan("finite_samples"), split=tiny, tied=tiny, resamples=10))
    >>> plot_success_curves(samples.split.grids, criterion="signs")  # doctest: +ELLIPSIS
    <Axes: ...>
    """
    for k, grid in enumerate(check_sequence("grids", grids)):
        check_instance(f"grids[{k}]", grid, SuccessGrid, "a SuccessGrid (a row of run('finite_samples'))")
    criterion = check_choice("criterion", criterion, ("worst case", "signs"))
    check_instance("ax", ax, (Axes, type(None)), "a matplotlib Axes or None")
    if ax is None:
        _, ax = subplots(1)
    for grid, colour in zip(grids, PALETTE, strict=False):
        ok = grid.successes(criterion)
        fraction = ok.mean(axis=(0, 1))
        ax.plot(np.asarray(grid.sample_sizes) / grid.d**2, fraction, "o-", ms=3, color=colour, label=f"d = {grid.d}")
    ax.set(
        xscale="log", ylim=(-0.03, 1.03), xlabel=r"samples per $d^2$, $n/d^2$", ylabel="fraction of draws that succeed"
    )
    ax.axhline(0.5, color="0.6", lw=0.8, ls=":")
    ax.legend(frameon=False, loc="upper left")
    return ax


@public
def plot_sample_thresholds(rows: dict[str, tuple[Sequence[int], Sequence[float]]], *, ax: Axes | None = None) -> Axes:
    """Sample sizes against ``d`` on log-log axes: ``rows`` maps a label to ``(ds, values)``; dashed lines for references.

    Examples
    --------
    >>> plot_sample_thresholds({"n*": ([16, 32], [250.0, 1000.0]), "reference: d^2": ([16, 32], [256.0, 1024.0])})  # doctest: +ELLIPSIS
    <Axes: ...>
    """
    if not isinstance(rows, Mapping) or not rows:
        raise TypeError(f"rows must be a non-empty mapping {{label: (ds, values)}}, got {type(rows).__name__}")
    for label, row in rows.items():
        check_instance("rows' labels", label, str, "a str")
        if isinstance(row, (str, bytes)) or not isinstance(row, Sequence) or len(row) != 2:
            raise TypeError(f"rows[{label!r}] must be a pair (ds, values), got {row!r:.80}")
        ds = check_numbers(f"rows[{label!r}][0] (ds)", row[0], minimum=0.0, strict_minimum=True)
        values = check_numbers(f"rows[{label!r}][1] (values)", row[1], finite=False)  # NaN: no threshold
        if len(ds) != len(values):
            raise ValueError(f"rows[{label!r}] must hold as many values as ds, got {len(values)} and {len(ds)}")
    check_instance("ax", ax, (Axes, type(None)), "a matplotlib Axes or None")
    if ax is None:
        _, ax = subplots(1, height=3.6)
    for (label, (ds, values)), colour in zip(rows.items(), PALETTE, strict=False):
        reference = label.startswith("reference")
        ax.plot(ds, values, "--" if reference else "o-", color=colour, ms=4, label=label.removeprefix("reference: "))
    ax.set(xscale="log", yscale="log", xlabel="dimension $d$", ylabel="samples")
    # Ticks at the measured d (a log axis would name only 2 × 10¹, 3 × 10¹, ...); the legend below, off the curves.
    measured = sorted({int(d) for label, (ds, _) in rows.items() if not label.startswith("reference") for d in ds})
    if measured:
        ax.set_xticks(measured, [f"{d:,}" for d in measured])
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.legend(frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncols=2)
    return ax
