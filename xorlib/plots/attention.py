"""Figures of attention weights: bars for one model, heat maps for several."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from .._checks import check_float, check_instance, check_int, check_pair, check_sequence, check_tensor
from .._contract import public
from .style import subplots

#: Okabe–Ito colours (colour-blind safe): head 1, head 2, the hidden positions.
HEAD_COLOURS = ("#0072B2", "#D55E00")
PAIR_COLOUR = "#009E73"

__all__ = ["plot_attention", "plot_attention_maps"]


def _as_array(weights: torch.Tensor) -> np.ndarray:
    return weights.detach().double().cpu().numpy()


def _check_weights(name: str, weights: object, pair: object, pair_name: str = "pair") -> tuple[int, int]:
    """Both heads' weights ``(2, d)`` and a pair of positions among their ``d``."""
    weights = check_tensor(name, weights, ndim=2, shape={0: 2})
    return check_pair(pair_name, pair, weights.shape[1])


@public
def plot_attention(weights: torch.Tensor, pair: tuple[int, int], *, ax: Axes | None = None, title: str = "") -> Axes:
    """Both heads' attention over the positions (``weights`` of shape ``(2, d)``), hidden positions shaded.

    The y axis is fixed to [0, 1] so that plots side by side compare directly; the
    two heads are drawn as slightly offset bars.

    Examples
    --------
    >>> plot_attention(torch.full((2, 8), 0.125), (1, 5), title="uniform")  # doctest: +ELLIPSIS
    <Axes: ...>
    """
    _check_weights("weights", weights, pair)
    check_instance("ax", ax, (Axes, type(None)), "a matplotlib Axes or None")
    check_instance("title", title, str, "a str")
    w = _as_array(weights)
    d = w.shape[1]
    if ax is None:
        _, ax = subplots(1, height=2.6)
    positions = np.arange(d)
    for k in pair:
        ax.axvspan(k - 0.5, k + 0.5, color=PAIR_COLOUR, alpha=0.25, lw=0)
    width = 0.45
    for head, colour in enumerate(HEAD_COLOURS):
        ax.bar(
            positions + (head - 0.5) * width,
            np.clip(w[head], 0, 1),
            width=width,
            color=colour,
            label=f"head {head + 1}",
        )
    ax.set(xlim=(-0.75, d - 0.25), ylim=(0, 1.02), xlabel="position $k$", ylabel=r"weight $\alpha_{h,k}$")
    ax.set_title(title)
    ax.legend(loc="upper right", frameon=False, ncols=2)
    return ax


@public
def plot_attention_maps(
    rows: Sequence[tuple], *, floor: float = 1e-12, window: int | None = None, fig: Figure | None = None
) -> Figure:
    r"""Heat maps of :math:`\log_{10}` attention, one panel per ``(label, weights (2, d), pair[, tick labels])``, hidden positions marked.

    The colour scale is shared and clamped to ``[floor, 1]``, so a head that
    sits on one position reads as one bright cell in a dark row. ``window``: show only the
    ``2 window + 1`` positions around each hidden bit (0 to 10,000; fewer where the windows overlap),
    the ticks naming their true positions, so that a model with millions of positions fits.

    Examples
    --------
    >>> weights = torch.full((2, 8), 0.125)
    >>> plot_attention_maps([("uniform", weights, (1, 5))], window=2)  # doctest: +ELLIPSIS
    <Figure size ...>
    """
    for k, row in enumerate(check_sequence("rows", rows)):
        if isinstance(row, (str, bytes)) or not isinstance(row, Sequence) or len(row) not in (3, 4):
            raise TypeError(
                f"rows[{k}] must be (label, weights, pair) or (label, weights, pair, tick labels), got {row!r:.80}"
            )
        check_instance(f"rows[{k}][0] (label)", row[0], str, "a str")
        pair = _check_weights(f"rows[{k}][1] (weights)", row[1], row[2], f"rows[{k}][2] (pair)")  # sorted
        if len(row) == 4 and (
            len(check_sequence(f"rows[{k}][3] (tick labels)", row[3])) != 2
            or not all(isinstance(t, str) for t in row[3])
        ):
            raise TypeError(
                f"rows[{k}][3] (tick labels) must be two str, one per hidden position {pair}, got {row[3]!r:.80}"
            )
    floor = check_float("floor", floor, minimum=0.0, maximum=1.0, strict_minimum=True)
    if floor >= 1.0:
        raise ValueError(f"floor must be below 1 (the colour scale is [floor, 1]), got {floor}")
    check_instance("fig", fig, (Figure, type(None)), "a matplotlib Figure or None")
    if window is not None:
        window = check_int("window", window, minimum=0, maximum=10_000)
        rows = [(row[0], *_window(row[1], check_pair("pair", row[2], row[1].shape[-1]), window)) for row in rows]
    if fig is None:
        fig, _ = subplots(1, height=1.15 * len(rows) + 0.6)  # the book's width and text sizes
        fig.clear()
    axes = fig.subplots(len(rows), 1, squeeze=False)[:, 0]
    image = None
    for ax, (label, weights, pair, *ticks) in zip(axes, rows, strict=True):
        w = np.log10(np.clip(_as_array(weights), floor, 1.0))
        image = ax.imshow(w, aspect="auto", cmap="viridis", vmin=np.log10(floor), vmax=0, interpolation="nearest")
        ax.set_yticks([0, 1], ["head 1", "head 2"])
        names = ticks[0] if ticks else [str(k) for k in sorted(pair)]
        ax.set_xticks(sorted(pair), names)
        ax.set_xlabel("position (ticks: the hidden pair)")
        for k in pair:
            ax.axvline(k, color="white", lw=0.6, ls=":")
        ax.set_title(label, loc="left")
    fig.colorbar(image, ax=list(axes), label=r"$\log_{10}\alpha_{h,k}$", shrink=0.9)
    return fig


def _window(weights: torch.Tensor, pair: tuple[int, int], half: int) -> tuple[torch.Tensor, tuple[int, int], list[str]]:
    """The weights ``(2, d)`` at the ``2 half + 1`` positions around each hidden bit (fewer if the windows overlap),
    the hidden pair's places inside the window, and their true positions as tick labels."""
    d = weights.shape[-1]
    keep = sorted({k for centre in pair for k in range(centre - half, centre + half + 1) if 0 <= k < d})
    return weights[:, keep], (keep.index(pair[0]), keep.index(pair[1])), [f"{k:,}" for k in sorted(pair)]
