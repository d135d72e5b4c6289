"""Tables for the book: one helper, :func:`html_table`, from rows (or a result's rows) to a styled HTML table.

The table sits in a box that scrolls sideways when it is wider than the page (a phone), instead of being cut off;
numbers are right-aligned in columns of equal-width digits and written to be read: thousands separators
(``12,345``), three significant figures, powers of ten as ``1.4 × 10⁻⁶`` rather than ``1.4e-06`` (also where a
column's format spec asks for ``e``), and a dash for a missing value or NaN. Maths in ``$...$`` (headers, cells, caption) is typeset by MathJax in the book and in Jupyter.
The look (class ``xorlib-table``) is set by the book's ``_static/xorlib.css``; the scrolling works without it.
"""

from __future__ import annotations

import dataclasses
import html
import math
import numbers
import re
from collections.abc import Callable, Iterable, Mapping, Sequence

__all__ = ["as_power", "html_table", "in_words"]

_MISSING = "—"
_MATH = re.compile(r"\$([^$]+)\$")
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")

Format = str | Callable[[object], str]


@dataclasses.dataclass(frozen=True)
class _Table:
    """An HTML table that Jupyter and the book display (``_repr_html_``); ``str()`` gives the HTML."""

    html: str

    def _repr_html_(self) -> str:
        return self.html

    def __str__(self) -> str:
        return self.html


def _scalar(value: object) -> object:
    """NumPy and torch scalars (and 0-d arrays or tensors) as the Python number they hold."""
    if not isinstance(value, (str, bytes, bool, numbers.Number)) and getattr(value, "ndim", None) == 0:
        item = getattr(value, "item", None)
        if callable(item):
            return item()
    return value


def _is_missing(value: object) -> bool:
    return value is None or (
        isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral) and math.isnan(value)
    )


def _is_number(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _number(value: numbers.Real) -> str:
    """A number as a reader reads it: ``12,345``, ``0.0201``, ``2.43``, ``1.4 × 10⁻⁶``, ``−3``, ``∞``."""
    sign = "−" if value < 0 else ""
    if isinstance(value, numbers.Integral):
        return f"{sign}{abs(int(value)):,}"
    x = abs(float(value))
    if math.isinf(x):
        return f"{sign}∞"
    if x == 0:
        return "0"
    if x.is_integer() and x < 1e6:
        return f"{sign}{int(x):,}"
    if 1e-3 <= x < 1e3:
        return f"{sign}{x:.3g}"
    if 1e3 <= x < 1e6:
        return f"{sign}{x:,.0f}"
    return sign + _power_of_ten(x, 2, trim=True)


def _power_of_ten(x: float, digits: int, *, trim: bool = False) -> str:
    """``x > 0`` as ``m × 10ᵉ`` with ``digits`` after the point (``trim``: trailing zeros dropped)."""
    mantissa, exponent = f"{x:.{digits}e}".split("e")
    if trim:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa} × 10{str(int(exponent)).translate(_SUPERSCRIPT)}"


_E_NOTATION = re.compile(r"(?<![\w.])([-+]?)(\d+(?:\.\d*)?)[eE]([-+]?\d+)(?![\w.])")


def _no_e_notation(text: str) -> str:
    """``1.84e-02`` in a formatted cell, written as a reader reads it: ``1.84 × 10⁻²``."""

    def power(match: re.Match[str]) -> str:
        sign = "−" if match[1] == "-" else ""
        return f"{sign}{match[2]} × 10{str(int(match[3])).translate(_SUPERSCRIPT)}"

    return _E_NOTATION.sub(power, text)


def _text(value: object) -> str:
    """Escaped HTML for a header, caption or string cell; ``$...$`` becomes MathJax inline maths."""
    parts, last = [], 0
    source = str(value)
    for match in _MATH.finditer(source):
        parts.append(html.escape(source[last : match.start()]))
        parts.append(f'<span class="math notranslate nohighlight">\\({html.escape(match[1])}\\)</span>')
        last = match.end()
    parts.append(html.escape(source[last:]))
    return "".join(parts)


def _cell(value: object, fmt: Format | None) -> str:
    value = _scalar(value)
    if _is_missing(value):
        return _MISSING
    if fmt is not None:
        return _text(_no_e_notation(fmt(value) if callable(fmt) else format(value, fmt)))
    if isinstance(value, bool):
        return "yes" if value else "no"
    if _is_number(value):
        return html.escape(_number(value))
    return _text(value)


def _records(rows: Iterable[object], columns: Sequence[str] | None) -> tuple[list[str], list[list[object]]]:
    """Header keys and the rows as lists of values, from mappings, dataclass instances or sequences."""
    rows = list(rows)
    records: list[list[object]] = []
    keys = list(columns) if columns is not None else None
    for k, row in enumerate(rows):
        if dataclasses.is_dataclass(row) and not isinstance(row, type):
            row = {field.name: getattr(row, field.name) for field in dataclasses.fields(row)}
        if isinstance(row, Mapping):
            if keys is None:
                keys = [str(key) for key in row]
            missing = [key for key in keys if key not in row]
            if missing:
                raise ValueError(f"rows[{k}] has no column {missing[0]!r} (it has {list(row)})")
            records.append([row[key] for key in keys])
        elif isinstance(row, Sequence) and not isinstance(row, str):
            if keys is None:
                raise ValueError("columns must be given when rows are sequences")
            if len(row) != len(keys):
                raise ValueError(f"rows[{k}] has {len(row)} values, expected {len(keys)} (one per column)")
            records.append(list(row))
        else:
            raise TypeError(
                f"rows[{k}] must be a mapping, a dataclass instance or a sequence, got {type(row).__name__}"
            )
    if keys is None:
        raise ValueError("rows is empty: give columns to show an empty table")
    return keys, records


def html_table(
    rows: Iterable[object],
    columns: Sequence[str] | Mapping[str, str] | None = None,
    *,
    formats: Mapping[str, Format] | None = None,
    caption: str | None = None,
) -> _Table:
    """An HTML table of ``rows``, styled by the book and inside a box that scrolls sideways on a narrow screen.

    Parameters
    ----------
    rows
        The rows: mappings (``{"d": 100, "loss": 0.01}``), dataclass instances (a result's rows; their fields are
        the columns) or sequences of values (then ``columns`` names them, in order).
    columns
        Which columns to show, in order: a sequence of keys (shown as headers), or a mapping ``{key: header}``.
        Default: every key of the first row. Headers may hold maths in ``$...$``.
    formats
        Per column, a format spec (``".2%"``, ``",d"``, ``".3g"``) or a function from a value to text. Columns
        without one are formatted by kind: integers with thousands separators (``12,345``), other numbers to
        three significant figures with powers of ten written out (``1.4 × 10⁻⁶``), booleans as yes / no, None and
        NaN as a dash.
    caption
        A caption above the table (maths in ``$...$`` allowed).

    Returns
    -------
    An object that Jupyter and the book display as the table (``_repr_html_``); ``str()`` gives its HTML.

    Examples
    --------
    >>> table = html_table([{"d": 1000, "loss": 1.5e-7}, {"d": 10**6, "loss": float("nan")}], caption="Worst case")
    >>> "1,000" in str(table) and "1.5 × 10⁻⁷" in str(table) and "—" in str(table)
    True
    """
    if isinstance(rows, (str, bytes)) or not isinstance(rows, Iterable):
        raise TypeError(f"rows must be an iterable of rows, got {type(rows).__name__}")
    if columns is not None and (isinstance(columns, str) or not isinstance(columns, (Sequence, Mapping))):
        raise TypeError(
            f"columns must be a sequence of keys or a mapping of key to header, got {type(columns).__name__}"
        )
    headers = dict(columns) if isinstance(columns, Mapping) else None
    if columns is not None and not columns:
        raise ValueError("columns must name at least one column")
    keys, records = _records(rows, list(columns) if columns is not None else None)
    headers = headers or {key: key for key in keys}
    if formats is not None and not isinstance(formats, Mapping):
        raise TypeError(
            f"formats must be a mapping from column to format spec or function, got {type(formats).__name__}"
        )
    if caption is not None and not isinstance(caption, str):
        raise TypeError(f"caption must be a string or None, got {type(caption).__name__}")
    formats = dict(formats or {})
    unknown = [key for key in formats if key not in keys]
    if unknown:
        raise ValueError(f"formats names {unknown[0]!r}, which is not a column (columns: {keys})")
    for key, fmt in formats.items():
        if not (isinstance(fmt, str) or callable(fmt)):
            raise TypeError(f"formats[{key!r}] must be a format spec or a function, got {type(fmt).__name__}")
    records = [[_scalar(value) for value in row] for row in records]
    numeric = [
        all(_is_number(row[j]) or _is_missing(row[j]) for row in records) and any(_is_number(row[j]) for row in records)
        for j in range(len(keys))
    ]
    kind = ['class="num"' if is_number else 'class="text"' for is_number in numeric]
    lines = [
        '<div class="xorlib-table-wrap mathjax_process" role="region" tabindex="0"'
        + (f' aria-label="{html.escape(caption, quote=True)}"' if caption else "")
        + ' style="overflow-x: auto; max-width: 100%;">',
        '<table class="xorlib-table">',
    ]
    if caption:
        lines.append(f"<caption>{_text(caption)}</caption>")
    lines.append(
        "<thead><tr>"
        + "".join(f'<th scope="col" {kind[j]}>{_text(headers[key])}</th>' for j, key in enumerate(keys))
        + "</tr></thead>"
    )
    lines.append("<tbody>")
    for row in records:
        cells = (f"<td {kind[j]}>{_cell(value, formats.get(keys[j]))}</td>" for j, value in enumerate(row))
        lines.append("<tr>" + "".join(cells) + "</tr>")
    lines.append("</tbody>")
    lines.append("</table>")
    lines.append("</div>")
    return _Table("\n".join(lines))


_WORDS = ("none", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def in_words(count: int) -> str:
    """A count as prose reads it: "none", "one", ... "ten", then digits with separators ("1,240")."""
    if isinstance(count, bool) or not isinstance(count, numbers.Integral) or count < 0:
        raise TypeError(f"count must be a non-negative integer, got {count!r}")
    return _WORDS[count] if count <= 10 else f"{count:,}"


def as_power(value: float, digits: int = 1) -> str:
    r"""A number in scientific notation as prose reads it: ``5.7 × 10⁻⁷`` (``digits`` after the point), never ``5.7e-07``.

    Between 1 and 10⁴ there is no power of ten to read: ``2.0``, ``57``, ``5,700`` (the same significant digits).
    Zero is ``0``; the sign is a true minus; :math:`\pm\infty` is ``∞``. NaN is refused:
    a number the prose quotes must exist.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"value must be a real number, got {value!r}")
    if isinstance(digits, bool) or not isinstance(digits, numbers.Integral) or not 0 <= digits <= 6:
        raise ValueError(f"digits must be an integer from 0 to 6, got {digits!r}")
    x = float(value)
    if math.isnan(x):
        raise ValueError("value is NaN: there is no number to quote")
    sign = "−" if x < 0 else ""
    if math.isinf(x):
        return f"{sign}∞"
    if x == 0:
        return "0"
    exponent = int(f"{abs(x):.{int(digits)}e}".split("e")[1])
    if 0 <= exponent <= 3:  # 2.0, 57, 570, 5,700: no power of ten to read
        places = max(int(digits) - exponent, 0)
        return f"{sign}{round(abs(x), int(digits) - exponent):,.{places}f}"
    return sign + _power_of_ten(abs(x), int(digits))
