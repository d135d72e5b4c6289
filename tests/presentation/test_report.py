"""xorlib.report.html_table: readable numbers, HTML that cannot break the page, errors that name the argument."""

from __future__ import annotations

import dataclasses
import html.parser
import math

import numpy as np
import pytest
import torch

from xorlib.report import as_power, html_table


class _Cells(html.parser.HTMLParser):
    """The text of every header and data cell, row by row, and the classes seen."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.classes: list[str] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.classes += [value or "" for key, value in attrs if key == "class"]
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _cells(table: object) -> _Cells:
    parser = _Cells()
    parser.feed(str(table))
    return parser


def test_numbers_read_as_numbers() -> None:
    values = [1240.0, 1630.0, 19500.0, 0.0201, 2.43, 1.4e-6, 2.5e7, 12345, -3, math.nan, None, math.inf, 0.0, True]
    table = html_table([values], columns=[f"c{k}" for k in range(len(values))])
    (header, row) = _cells(table).rows
    assert row == [
        "1,240",
        "1,630",
        "19,500",
        "0.0201",
        "2.43",
        "1.4 × 10⁻⁶",
        "2.5 × 10⁷",
        "12,345",
        "−3",
        "—",
        "—",
        "∞",
        "0",
        "yes",
    ]
    assert header[0] == "c0"


def test_neighbouring_numbers_never_run_together() -> None:
    # The finding of issue 11: "1.24e+031.63e+031.95e+04". Each value is its own cell, in scientific notation never.
    table = html_table([{"a": 1.24e3, "b": 1.63e3, "c": 1.95e4}])
    assert "e+0" not in str(table)
    assert _cells(table).rows[1] == ["1,240", "1,630", "19,500"]


def test_rows_from_mappings_dataclasses_sequences_and_tensors() -> None:
    @dataclasses.dataclass(frozen=True)
    class Row:
        d: int
        loss: float

    from_dataclasses = _cells(html_table([Row(100, 0.5), Row(1000, 0.25)])).rows
    from_mappings = _cells(html_table([{"d": 100, "loss": 0.5}, {"d": 1000, "loss": 0.25}])).rows
    from_sequences = _cells(html_table([(100, 0.5), (1000, 0.25)], columns=["d", "loss"])).rows
    from_numpy = _cells(html_table([(np.int64(100), torch.tensor(0.5)), (1000, np.float32(0.25))], ["d", "loss"])).rows
    assert (
        from_dataclasses
        == from_mappings
        == from_sequences
        == from_numpy
        == [["d", "loss"], ["100", "0.5"], ["1,000", "0.25"]]
    )


def test_columns_headers_formats_and_caption() -> None:
    table = html_table(
        [{"d": 100, "rate": 0.123, "name": "a<b"}],
        columns={"name": "model", "rate": "success $p$"},
        formats={"rate": ".0%"},
        caption="Runs at $d = 100$",
    )
    text = str(table)
    assert _cells(table).rows == [["model", "success \\(p\\)"], ["a<b", "12%"]]
    assert "a&lt;b" in text  # escaped
    assert '<span class="math notranslate nohighlight">\\(d = 100\\)</span>' in text  # typeset by MathJax
    assert "$" not in text.replace('aria-label="Runs at $d = 100$"', "")
    assert html_table([{"x": 2}], formats={"x": lambda v: f"{v} runs"})._repr_html_().count("2 runs") == 1


def test_a_format_spec_in_e_notation_still_reads_as_powers_of_ten() -> None:
    table = html_table([{"w": 1.8416061290e-02, "n": 3}], formats={"w": ".3e", "n": "d"})
    assert _cells(table).rows[1] == ["1.842 × 10⁻²", "3"]
    assert "e-0" not in str(table)


def test_the_table_scrolls_inside_its_own_box() -> None:
    text = str(html_table([{"a": 1}]))
    assert text.startswith('<div class="xorlib-table-wrap')
    assert "overflow-x: auto" in text.split(">", 1)[0]  # scrolls even where the book's CSS is absent (Jupyter)
    classes = _cells(html_table([{"a": 1, "b": "x"}])).classes
    assert "xorlib-table" in classes and "num" in classes and "text" in classes


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"rows": "abc"}, TypeError, "rows"),
        ({"rows": []}, ValueError, "rows is empty"),
        ({"rows": [(1, 2)]}, ValueError, "columns must be given"),
        ({"rows": [(1, 2)], "columns": ["a"]}, ValueError, "rows[0] has 2 values"),
        ({"rows": [{"a": 1}], "columns": ["b"]}, ValueError, "rows[0] has no column 'b'"),
        ({"rows": [{"a": 1}], "formats": {"b": ".2f"}}, ValueError, "formats names 'b'"),
        ({"rows": [{"a": 1}], "formats": {"a": 3}}, TypeError, "formats['a']"),
        ({"rows": [{"a": 1}], "columns": "a"}, TypeError, "columns"),
        ({"rows": [object()]}, TypeError, "rows[0]"),
    ],
)
def test_errors_name_the_argument(kwargs: dict, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message.replace("[", r"\[").replace("]", r"\]")):
        html_table(**kwargs)


def test_powers_of_ten_read_as_prose_not_e_notation() -> None:
    assert as_power(5.7e-7) == "5.7 × 10⁻⁷"
    assert as_power(61_000, 0) == "6 × 10⁴"
    assert as_power(-1.518e-18, 2) == "−1.52 × 10⁻¹⁸"
    assert as_power(0.0) == "0" and as_power(math.inf) == "∞"
    assert as_power(2.0) == "2.0" and as_power(57.3) == "57" and as_power(5712.0) == "5,700"
    assert as_power(-0.25, 2) == "−2.50 × 10⁻¹"
    for bad, error in ((math.nan, ValueError), ("1e-3", TypeError), (True, TypeError)):
        with pytest.raises(error):
            as_power(bad)
    with pytest.raises(ValueError, match="digits"):
        as_power(1.0, digits=9)
