r"""The explorer's figure: what one step did, drawn so that every setting of the controls stays inside its panels.

The public face is :mod:`xorlib.explorer` (:func:`xorlib.explorer.plot_explorer`); this module also
defines the state the figure draws, :class:`ExplorerState`, which :func:`xorlib.explorer.explorer_state` computes.

Four panels (:func:`xorlib.plots.style.subplots`, stacked): the attention of head 1 and of head 2 after the
step, the loss before and after it, and a short summary of the setting. Everything clamps, whatever the
setting: the weight axes are fixed to :math:`[0, 1]` and weights outside (the unnormalised forms reach
:math:`10^{11}` or go negative) are clipped, with the true extremes written inside the panel; the loss axis is fixed
to :data:`LOSS_RANGE` and a loss beyond it is drawn at the edge and labelled with its value; every text is short,
in a fixed size, clipped to its panel.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from .._checks import check_instance, check_int
from .style import PALETTE, subplots

#: The loss axis: losses below are drawn at the left edge, above at the right edge, both labelled.
LOSS_RANGE = (1e-30, 1e6)
#: Heads' colours and the shading of the hidden positions.
_HEADS = (PALETTE["blue"], PALETTE["vermillion"])
_PAIR = PALETTE["bluish green"]
_BEFORE = "#BBBBBB"
#: Weight axis: the bars live in [0, 1], the band above holds the clipping note.
_WEIGHT_TOP = 1.38
#: Up to this many positions the weights are bars; beyond, one line per position (one artist, fast).
_BARS_UP_TO = 128
_FONT = 10.0
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


@dataclass(frozen=True)
class ExplorerState:
    r"""One setting of the explorer, the step it takes, and the numbers its figure shows.

    Attributes
    ----------
    d, heads, attention, kappa, n, sigma, seed
        The setting, as validated by :func:`explorer_state`.
    m
        The code dimension (the default of :class:`xorlib.model.ModelConfig`).
    pair
        The hidden pair :math:`(u, v)`.
    lr
        The learning rate :math:`\eta = \kappa d^2 / c_1`.
    weights_before, weights_after
        Both heads' attention, shape ``(2, d)``, at the start and after the step. The unnormalised forms can give
        weights far outside :math:`[0, 1]` (component-wise attention caps its scores at 700 so that :math:`e^s`
        stays finite).
    mean_loss_before, mean_loss_after
        The population loss :math:`\mathbb E_x[\ell]` (``inf`` where float64 overflows).
    worst_before, worst_after
        The certified worst case over all :math:`2^d` inputs (an upper bound; ``inf`` where it overflows).
    worst_after_lower
        The loss of an input that is attained after the step: the worst case lies in ``[lower, worst_after]``.
    worst_after_exact
        Whether the bracket is closed (``worst_after`` is the worst case itself).
    signs_correct
        Certified: after the step, the sign of the prediction is the label on every input.
    result
        The step itself: the result of :func:`xorlib.one_step` (softmax) or the experiments' one step of
        another normaliser.
    """

    d: int
    heads: str
    attention: str
    kappa: float
    n: int
    sigma: float
    seed: int
    m: int
    pair: tuple[int, int]
    lr: float
    weights_before: torch.Tensor
    weights_after: torch.Tensor
    mean_loss_before: float
    mean_loss_after: float
    worst_before: float
    worst_after: float
    worst_after_lower: float
    worst_after_exact: bool
    signs_correct: bool
    result: object

    @property
    def found(self) -> tuple[int, int]:
        """The position each head attends to most after the step."""
        return tuple(int(k) for k in self.weights_after.argmax(-1))  # type: ignore[return-value]

    @property
    def split(self) -> bool:
        """Whether the two heads attend most to the two different hidden bits."""
        return tuple(sorted(self.found)) == self.pair

    @property
    def pair_mass(self) -> tuple[float, float]:
        r"""Per head, the weight on the hidden pair after the step, :math:`\alpha_{h,u} + \alpha_{h,v}`."""
        return tuple(float(w) for w in self.weights_after[:, list(self.pair)].sum(-1))  # type: ignore[return-value]

    @property
    def weight_range(self) -> tuple[float, float]:
        """The smallest and the largest weight after the step, over both heads."""
        return float(self.weights_after.min()), float(self.weights_after.max())

    @property
    def gradient(self) -> str:
        """``"population gradient"`` or ``"n samples"``, for summaries."""
        return "population gradient" if self.n == 0 else f"{self.n:,} samples"


def readable(value: float, digits: int = 2) -> str:
    """A number as a reader reads it: ``0.72``, ``30``, ``1,234``, ``2.4 × 10⁻⁷``, ``10⁸``, ``−1.1 × 10⁻⁴``, ``overflow``.

    ``digits`` significant digits (1 to 17); a power of ten is written as one; ``overflow`` for an infinite value
    and ``undefined`` for NaN.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"value must be a real number, got {type(value).__name__} {value!r}")
    value = float(value)
    digits = check_int("digits", digits, minimum=1, maximum=17)
    if math.isnan(value):
        return "undefined"
    if math.isinf(value):
        return "overflow" if value > 0 else "−overflow"
    if value == 0:
        return "0"
    sign, x = ("−" if value < 0 else ""), abs(value)
    if 1e-3 <= x < 100:
        return sign + f"{x:.{digits}g}"
    if 100 <= x < 1e5:
        return sign + f"{x:,.0f}"
    mantissa, exponent = f"{x:.{digits - 1}e}".split("e")
    power = "10" + str(int(exponent)).translate(_SUPERSCRIPT)
    exact_power = math.isclose(x, 10.0 ** int(exponent), rel_tol=1e-12)
    return sign + (power if exact_power else f"{mantissa} × {power}")


def plot_explorer(state: ExplorerState) -> Figure:
    """The explorer's figure of one state (:func:`xorlib.explorer.explorer_state`).

    (a) Both heads' attention after the step, one panel each, the hidden positions shaded; (b) the mean and the
    certified worst-case loss before and after the step, on a log axis; (c) a summary of the setting. See the
    module docstring for how every panel clamps.

    Examples
    --------
    >>> from xorlib.explorer import explorer_state
    >>> plot_explorer(explorer_state(d=8, kappa=10.0))  # doctest: +ELLIPSIS
    <Figure size ...>
    """
    check_instance("state", state, ExplorerState, "an ExplorerState (from xorlib.explorer.explorer_state)")
    fig, axes = subplots(4, per_row=1, height=2.8)  # stacked: 10-pt text stays 9 px on a phone
    weights = state.weights_after.detach().double().cpu().numpy()
    for head, ax in enumerate(axes[:2]):
        _attention_panel(ax, weights[head], state.pair, head)
    _loss_panel(axes[2], state)
    _summary_panel(axes[3], state)
    return fig


def _note(ax: Axes, x: float, y: float, text: str, **kwargs: object) -> None:
    """A text in axes coordinates, in the fixed size, clipped to its panel."""
    ax.text(x, y, text, transform=ax.transAxes, fontsize=_FONT, clip_on=True, **kwargs)


def _attention_panel(ax: Axes, weights: np.ndarray, pair: tuple[int, int], head: int) -> None:
    """One head's weights after the step, clipped to [0, 1], the hidden positions shaded, extremes noted."""
    d = weights.shape[0]
    low, high = -0.5, d - 0.5
    half = max(0.5, d / 150)  # shading at least about three pixels wide
    for k in pair:
        ax.axvspan(max(k - half, low), min(k + half, high), ymax=1.0 / _WEIGHT_TOP, color=_PAIR, alpha=0.3, lw=0)
    shown = np.clip(np.nan_to_num(weights, nan=0.0, posinf=1.0, neginf=0.0), 0.0, 1.0)
    positions = np.arange(d)
    if d <= _BARS_UP_TO:
        ax.bar(positions, shown, width=0.8, color=_HEADS[head], lw=0)
    else:
        ax.vlines(positions, 0.0, shown, colors=_HEADS[head], lw=1.2)
    ax.axhline(1.0, color="0.6", lw=0.8, ls=":")
    ax.set(xlim=(low, high), ylim=(0.0, _WEIGHT_TOP), xlabel="position k")
    ax.set_yticks([0.0, 0.5, 1.0])
    ax.set_ylabel(f"weight α{'₁₂'[head]},k")
    ax.set_title(f"head {head + 1} after the step", fontsize=10)
    smallest, largest = float(np.min(weights)), float(np.max(weights))
    if smallest < -1e-12 or largest > 1 + 1e-12 or not np.isfinite(weights).all():
        note = f"weights outside [0, 1] clipped:\nmin {readable(smallest)}, max {readable(largest)}"
        _note(ax, 0.02, 0.97, note, va="top", color="0.25")
    else:
        _note(ax, 0.02, 0.97, f"on the pair: {readable(weights[list(pair)].sum(), 3)}", va="top", color="0.25")


def _loss_panel(ax: Axes, state: ExplorerState) -> None:
    """Mean and worst-case loss before and after, horizontal bars on a clamped log axis, each labelled."""
    floor, ceiling = LOSS_RANGE
    span = math.log10(ceiling) - math.log10(floor)
    rows = [
        ("mean, before", state.mean_loss_before, _BEFORE, "black", ""),
        ("mean, after", state.mean_loss_after, _HEADS[0], "white", ""),
        ("worst, before", state.worst_before, _BEFORE, "black", ""),
        ("worst, after", state.worst_after, _HEADS[0], "white", "" if state.worst_after_exact else "≤ "),
    ]
    for y, (_, value, colour, ink, prefix) in zip(range(3, -1, -1), rows, strict=True):
        drawn = _clamp(value, floor, ceiling)
        ax.barh(y, drawn - floor, left=floor, height=0.62, color=colour, lw=0)
        where = (math.log10(drawn) - math.log10(floor)) / span  # the bar's end, in axes coordinates
        if math.isfinite(value):
            label = prefix + readable(value) + ("" if floor <= value <= ceiling else " (off scale)")
        else:
            label = "overflow"
        if where > 0.55:
            ax.text(where - 0.015, y, label, transform=ax.get_yaxis_transform(), ha="right", va="center",
                    fontsize=_FONT, color=ink, clip_on=True)  # fmt: skip
        else:
            ax.text(where + 0.015, y, label, transform=ax.get_yaxis_transform(), ha="left", va="center",
                    fontsize=_FONT, color="black", clip_on=True)  # fmt: skip
    ax.set_xscale("log")
    ax.set(xlim=LOSS_RANGE, ylim=(-0.6, 3.6), xlabel="loss (log scale)")
    ticks = [1e-30, 1e-20, 1e-10, 1.0, 1e6]
    ax.set_xticks(ticks, [readable(t) if t != 1 else "1" for t in ticks])
    ax.minorticks_off()
    ax.set_yticks(range(3, -1, -1), [row[0] for row in rows])
    ax.set_title("loss, mean and worst case", fontsize=10)


def _clamp(value: float, low: float, high: float) -> float:
    """``value`` moved into ``[low, high]`` (NaN and overflow to ``high``)."""
    if not math.isfinite(value):
        return high
    return min(max(value, low), high)


def _summary_panel(ax: Axes, state: ExplorerState) -> None:
    """The setting and what the step did, in short lines (none longer than about 32 characters at the largest)."""
    ax.set_axis_off()
    ax.set_title("this setting", fontsize=10)
    start = f"σ = {readable(state.sigma)}" if state.heads == "split" else "q = 0"
    worst = readable(state.worst_after)
    if not math.isfinite(state.worst_after):
        worst = "worst case: overflow"
    else:
        worst = f"worst case {worst} (exact)" if state.worst_after_exact else f"worst case ≤ {worst} (bound)"
    u, v = state.pair
    on_pair = state.weights_after[:, [u, v]].tolist()
    moved = not bool((state.weights_after == state.weights_before).all())
    lines = [
        f"{state.heads} model, {state.attention}",
        f"d = {state.d:,}, m = {state.m}, seed {state.seed:,}",
        f"κ = {readable(state.kappa)}, start {start}",
        state.gradient + ("" if moved else " (zero)"),
        f"hidden bits u = {u:,}, v = {v:,}",
        "weights on u and v:",
        *(f"   head {h + 1}: {readable(a)}, {readable(b)}" for h, (a, b) in enumerate(on_pair)),
        worst,
        "every sign certified correct" if state.signs_correct else "signs not certified",
    ]
    _note(ax, 0.0, 1.0, "\n".join(lines), va="top", ha="left", linespacing=1.4)
