"""The look of every figure: colour-blind-safe colours, legible fonts, and a width that fits the book's column.

Importing :mod:`xorlib.plots` applies this style (:func:`apply`). No text is under 10 pt. A figure of one panel per
row made with :func:`subplots` is 5.1 inches (510 px) wide, so that it is legible where it is shown: at its natural
size in the book's 1280-px column (688 px) the smallest label is 13.9 px, and on a 390-px phone, where the figure
shrinks to its 335-px box, still 9.1 px (a full-column figure with 9-pt labels shrank them to 6.3 px there).
Two panels side by side take the full column (6.7 inches): 13.9 px on a desktop, but only 7.4 px on a phone, which
the book's browser check reports; ``per_row=1`` stacks them instead. A third panel goes on a new row.

The book's build and tests measure the smallest text a reader sees with a font probe that lives with them
(``_ext/font_probe.py``), never in a reader's kernel: importing :mod:`xorlib` only sets Matplotlib's defaults.
"""

from __future__ import annotations

import math

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from cycler import cycler
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from .._checks import check_float, check_int

__all__ = ["PALETTE", "subplots"]

#: Okabe & Ito's eight colours, distinguishable with every common colour-vision deficiency, in the order the
#: figures cycle through them (yellow, the weakest on white, comes last but one).
PALETTE: dict[str, str] = {
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "bluish green": "#009E73",
    "orange": "#E69F00",
    "reddish purple": "#CC79A7",
    "sky blue": "#56B4E9",
    "yellow": "#F0E442",
    "black": "#000000",
}

#: Pixels per inch of every figure: with the width below, one figure pixel is one CSS pixel in the book.
_DPI = 100
#: The content column of the book at a 1280-px window (sphinx-book-theme 1.3): 752 px less 2 x 32 px padding.
_COLUMN_PX = 688
#: A captioned figure's box on a 390-px phone (measured in the built book): the column less the figure's margins.
_PHONE_COLUMN_PX = 335
#: Figure width in inches, one panel per row: narrow enough that the smallest text stays 9 px on a phone.
_WIDTH_IN = 5.1
#: Figure width in inches, two panels per row: the desktop column, less a margin for the tight bounding box.
_WIDTH_TWO_IN = 6.7
#: Height of one row of panels, in inches, for one and for two panels per row.
_ROW_HEIGHT_IN = {1: 2.9, 2: 2.8}
#: The smallest font of the style (tick labels, legends), in points: 13.9 px at the natural size, 9.1 px on a phone.
_SMALL_PT = 10.0

_RC = {
    "figure.dpi": _DPI,
    "savefig.dpi": "figure",
    "figure.figsize": (_WIDTH_IN, _ROW_HEIGHT_IN[1]),
    "figure.constrained_layout.use": True,
    "figure.facecolor": "white",
    "savefig.facecolor": "white",
    "axes.prop_cycle": cycler(color=list(PALETTE.values())),
    "image.cmap": "viridis",
    "font.size": 10.5,
    "axes.titlesize": 11.0,
    "axes.labelsize": 10.5,
    "figure.titlesize": 11.5,
    "xtick.labelsize": _SMALL_PT,
    "ytick.labelsize": _SMALL_PT,
    "legend.fontsize": _SMALL_PT,
    "legend.title_fontsize": _SMALL_PT,
    "legend.frameon": False,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": False,
    "lines.linewidth": 1.6,
    "lines.markersize": 5.0,
}


def apply() -> None:
    """Set Matplotlib's defaults to the book's style.

    Called when :mod:`xorlib.plots` is imported; calling it again is harmless.
    """
    mpl.rcParams.update(_RC)


def subplots(
    panels: int = 1, *, per_row: int = 2, height: float | None = None, **kwargs: object
) -> tuple[Figure, Axes | np.ndarray]:
    """A figure with ``panels`` axes, one or two per row, legible in the book's column on a desktop and on a phone.

    Parameters
    ----------
    panels
        Number of axes, at least 1.
    per_row
        Panels side by side, 1 or 2 (more would shrink every label below legibility).
    height
        Height of one row in inches (default 2.9 for one panel per row, 2.8 for two).
    **kwargs
        Passed to :func:`matplotlib.pyplot.subplots` (``sharex``, ``sharey``, ``subplot_kw``, ...).

    Returns
    -------
    fig, axes
        A single :class:`~matplotlib.axes.Axes` when ``panels == 1``, else a flat array of ``panels`` axes, row
        by row (an odd last panel leaves the right half of its row empty).
    """
    panels = check_int("panels", panels, minimum=1, maximum=12)
    per_row = check_int("per_row", per_row, minimum=1, maximum=2)
    columns = min(per_row, panels)
    rows = math.ceil(panels / columns)
    row_height = _ROW_HEIGHT_IN[columns] if height is None else check_float("height", height, minimum=1.0, maximum=8)
    for key in ("figsize", "nrows", "ncols", "layout", "squeeze"):
        if key in kwargs:
            raise TypeError(f"subplots() sets {key!r} itself; pass panels=, per_row= and height= instead")
    width = _WIDTH_IN if columns == 1 else _WIDTH_TWO_IN
    fig = plt.figure(figsize=(width, row_height * rows), layout="constrained")
    if panels == 1:
        return fig, fig.subplots(**kwargs)
    grid = np.asarray(fig.subplots(rows, columns, squeeze=False, **kwargs)).ravel()
    for spare in grid[panels:]:  # an odd last panel leaves one slot empty
        spare.remove()
    return fig, grid[:panels]
