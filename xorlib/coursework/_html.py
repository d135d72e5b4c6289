"""A table that shows as the book's styled HTML table in a notebook (:func:`xorlib.report.html_table`) and as
aligned text in a terminal."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..report import html_table

__all__ = ["Table", "table"]


@dataclass(frozen=True, repr=False)
class Table:
    """Rows of cells under a header."""

    header: tuple[str, ...]
    rows: tuple[tuple[object, ...], ...]

    def _repr_html_(self) -> str:
        return html_table(self.rows, self.header)._repr_html_()

    def __repr__(self) -> str:
        return str(self)

    def __str__(self) -> str:
        cells = [self.header, *(tuple(map(str, r)) for r in self.rows)]
        widths = [max(len(row[k]) for row in cells) for k in range(len(self.header))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells)


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> Table:
    """A :class:`Table` from any sequences."""
    return Table(tuple(header), tuple(tuple(r) for r in rows))
