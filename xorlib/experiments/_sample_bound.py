r"""The proved sample bound of chapter 6 (``thm-samples``) and the Gaussian-gap heuristic, on the measured draws.

For every draw (codes, pair and start) of the split model that the finite-samples experiment measures,
the exact mean, variance and range of its :math:`2(d-1)` gap functionals (:mod:`xorlib._gaps`). Per
dimension :math:`d`, over the :math:`J` draws:

* the **bound** :math:`N`: the smallest :math:`n` at which the averaged failure bound
  :math:`\frac1J\sum_j\min\bigl(1, \sum_ie^{-n\Lambda_{j,i}}\bigr)` is at most :math:`\delta'` (1/2 by default). At
  :math:`n \ge N` the expected fraction of the draws that succeed is at least :math:`1 - \delta'`, so with
  :math:`\delta' = \tfrac12` it is comparable with the measured :math:`n^*`, the 50 % point of the
  same draws; a draw whose population targets are not the hidden bits is outside the theorem and
  counts as a failure (``outside``);
* the **heuristic prediction**: the :math:`n` at which the gaps, as independent Gaussians with their own
  means and variances, are all positive on half of the draws. Experiment ``sample_bound``.

It reads the finite-samples experiment's result from the cache (computing it if absent), so its own
cost is the moments: ``full_minutes`` is that part, which puts it after ``finite_samples`` on the
command line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated

from .._contract import Between, config
from .._gaps import GapMoments, gap_moments, gaussian_threshold, sample_bound
from ..learners._one_step import StepConfig
from ._finite_samples import FiniteSamplesPlan, SuccessGrid, finite_samples, thresholds, trial_config
from ._registry import REGISTRY, experiment


@dataclass(frozen=True)
class BoundRow:
    """At one ``d``: the measured :math:`n^*` (criterion (a)), the proved bound :math:`N` and the heuristic prediction."""

    d: int
    draws: int
    outside: int  # draws whose population targets are not the hidden bits (no guarantee: counted as failures)
    n_star: float
    bound: float
    prediction: float
    draw_bounds: tuple[float, ...]  # each draw's own N at the plan's delta ("inf" outside the hypothesis)

    @property
    def ratio(self) -> float:
        """The bound over the measured :math:`n^*`."""
        return self.bound / self.n_star


@dataclass(frozen=True)
class SampleBound:
    """The bound :math:`N` of ``thm-samples`` and the Gaussian-gap prediction beside the measured :math:`n^*`, per ``d``."""

    delta: float
    rows: tuple[BoundRow, ...]

    def table(self) -> list[dict[str, float]]:
        """The rows for :func:`xorlib.report.html_table`, with the ratio of the bound to the measured :math:`n^*`."""
        return [
            {"d": r.d, "draws": r.draws, "outside": r.outside, "n_star": r.n_star, "bound": r.bound,
             "ratio": r.ratio, "prediction": r.prediction}
            for r in self.rows
        ]  # fmt: skip


@config
class SampleBoundPlan:
    """The finite-samples plan whose split-model draws the bound uses, and the bound's failure probability delta'."""

    samples: FiniteSamplesPlan
    delta: Annotated[float, Between(0.0, 1.0, open_low=True)] = 0.5


def draw_configs(grid: SuccessGrid) -> list[StepConfig]:
    """The steps of a grid's draws (code draws x trials), as the finite-samples experiment took them."""
    draws, trials = len(grid.worst), len(grid.worst[0])
    return [
        trial_config(grid.heads, grid.d, c, t, grid.epsilon, grid.first_seed)
        for c in range(draws)
        for t in range(trials)
    ]


def draw_moments(config: StepConfig) -> GapMoments:
    """The gap functionals of one draw: its codes, its start and its pair."""
    model = config.model
    return gap_moments(model.codes.dense(), model.initial_queries(), config.pair)


def _row(grid: SuccessGrid, delta: float) -> BoundRow:
    moments = [draw_moments(config) for config in draw_configs(grid)]
    return BoundRow(
        d=grid.d,
        draws=len(moments),
        outside=sum(not g.hypothesis for g in moments),
        n_star=thresholds(grid, "worst case"),
        bound=sample_bound(moments, delta),
        prediction=gaussian_threshold(moments),
        draw_bounds=tuple(sample_bound([g], delta) if g.hypothesis else math.inf for g in moments),
    )


_BOOK = SampleBoundPlan(REGISTRY["finite_samples"].book)
_FULL = SampleBoundPlan(REGISTRY["finite_samples"].full)


@experiment("sample_bound", book=_BOOK, full=_FULL, full_minutes=0.3)
def sample_bound_table(plan: SampleBoundPlan) -> SampleBound:
    """The proved sample bound and the Gaussian-gap prediction of n*, on the finite-samples experiment's split draws."""
    samples = finite_samples(plan.samples)
    return SampleBound(plan.delta, tuple(_row(grid, plan.delta) for grid in samples.split.grids))
