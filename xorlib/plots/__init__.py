"""Figures of the book, one module per chapter's figures. Importing this package applies the book's figure style.

The style is :mod:`xorlib.plots.style` (:func:`~xorlib.plots.style.subplots` makes a figure as wide as the book's
column); the explorer's figure is :func:`xorlib.explorer.plot_explorer`.
"""

from __future__ import annotations

from . import style

style.apply()

__all__: list[str] = []
