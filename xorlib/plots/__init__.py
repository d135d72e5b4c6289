"""Figures of the book. Importing this package applies the book's figure style (:mod:`xorlib.plots.style`)."""

from __future__ import annotations

from . import style

style.apply()

__all__ = ["style"]
