"""What a reader of the chapters' sources and pages is promised (issue 11, findings 6 and 9), checked statically.

* bookkeeping is hidden: every code cell that glues a number into the prose is a ``remove-cell`` or
  ``remove-input`` cell, so the reader sees the story and the short calls, not ``glue(...)``;
* code wraps at the book's width: no visible code line is longer than 88 columns;
* the API reference is split by module: one page per floor, each module under its own heading.
"""

from __future__ import annotations

import re
from pathlib import Path

import jupytext
import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted(p for p in (ROOT / "chapters").glob("*.md") if p.read_text().startswith("---\njupytext"))
HIDDEN = {"remove-cell", "remove-input"}


def _visible_code_cells(path: Path) -> list[tuple[int, str]]:
    cells = jupytext.read(path).cells
    return [
        (k, cell.source)
        for k, cell in enumerate(cells)
        if cell.cell_type == "code" and not HIDDEN & set(cell.metadata.get("tags", []))
    ]


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_bookkeeping_is_hidden_and_code_fits_the_column(path: Path) -> None:
    for k, source in _visible_code_cells(path):
        assert "glue(" not in source, f"{path.name}, cell {k}: a visible cell glues numbers (tag it remove-cell)"
        wide = [line for line in source.splitlines() if len(line) > 88]
        assert not wide, f"{path.name}, cell {k}: lines over 88 columns: {wide[:2]}"


def test_the_api_reference_is_split_by_module_with_headings() -> None:
    pages = sorted(p for p in (ROOT / "chapters" / "api").glob("*.md") if p.stem != "index")
    assert len(pages) >= 4, pages
    index = (ROOT / "chapters" / "api" / "index.md").read_text()
    for page in pages:
        text = page.read_text()
        modules = re.findall(r"^\.\. automodule:: (\S+)", text, flags=re.M)
        assert modules, f"{page.name} documents no module"
        for module in modules:  # a heading names the module, or the package that groups it (xorlib.plots)
            parts = module.split(".")
            names = "|".join(re.escape(".".join(parts[:k])) for k in range(2, len(parts) + 1))
            assert re.search(rf"^## `({names})`: \S", text, flags=re.M), f"{page.name}: {module} has no heading"
        assert page.stem in index, f"the API index does not list {page.name}"
