"""The book's reference pages and front matter, checked against the chapters (no build needed).

* **Notation** (``chapters/notation.md``): one pipe table ``| $symbol$ | meaning with the **term** | {ref}`label` |``.
  Every row's label is a chapter's label, its symbol and its bold term appear within :data:`NEAR` characters of
  each other in that chapter's prose (so the chapter says what the page says), and no symbol is listed twice.
* **Glossary** (``chapters/glossary.md``): ``| **term** | meaning | {ref}`label` |``; each term appears in the
  chapter named, and no term is listed twice.
* **Errata**, **quick start**, **how to cite**: the pages exist, the front page links to them and to the PDF, and
  ``CITATION.cff`` validates against the Citation File Format 1.2.0 schema (vendored: offline, like ``cffconvert
  --validate``).
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
import yaml
from conftest import labels_of

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
CHAPTERS = ROOT / "chapters"
NEAR = 400  # characters: "within a few lines"


@dataclasses.dataclass(frozen=True)
class Row:
    key: str  # the symbol's TeX, or the term
    term: str  # the bold term of the meaning (the glossary: the term itself)
    label: str


def _table(text: str) -> list[list[str]]:
    """The cells of the page's first pipe table, header and separator dropped."""
    rows = [line.strip() for line in text.splitlines() if line.strip().startswith("|")]
    cells = [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]
    return [row for row in cells[2:] if row]


def notation_rows(text: str) -> list[Row]:
    rows = []
    for cells in _table(text):
        if len(cells) != 3:
            raise ValueError(f"a notation row has {len(cells)} columns, not 3: {cells}")
        symbol = re.fullmatch(r"\$(.+)\$", cells[0])
        term = re.search(r"\*\*(.+?)\*\*", cells[1])
        label = re.fullmatch(r"\{ref\}`(?:[^<`]*<)?([\w.:-]+)>?`", cells[2])
        if not (symbol and term and label):
            raise ValueError(f"a notation row is not | $symbol$ | meaning with a **term** | {{ref}}`label` |: {cells}")
        rows.append(Row(symbol[1].strip(), term[1], label[1]))
    return rows


def glossary_rows(text: str) -> list[Row]:
    rows = []
    for cells in _table(text):
        term = re.fullmatch(r"\*\*(.+)\*\*", cells[0]) if len(cells) == 3 else None
        label = re.fullmatch(r"\{ref\}`(?:[^<`]*<)?([\w.:-]+)>?`", cells[2]) if len(cells) == 3 else None
        if not (term and label):
            raise ValueError(f"a glossary row is not | **term** | meaning | {{ref}}`label` |: {cells}")
        rows.append(Row(term[1], term[1], label[1]))
    return rows


def _prose(text: str) -> str:
    """A chapter without its code cells, front matter and HTML comments."""
    text = re.sub(r"^```\{code-cell\}.*?^```", "", text, flags=re.M | re.S)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    return re.sub(r"\A---\n.*?\n---\n", "", text, flags=re.S)


def _chapter_of(label: str, chapters: dict[str, str]) -> str | None:
    for name, text in chapters.items():
        if label in labels_of(text):
            return name
    return None


def _maths_with(symbol: str, prose: str) -> list[int]:
    """Offsets of the maths spans of ``prose`` that contain ``symbol`` as a whole (``\\gamma``, not ``\\gammas``)."""
    pattern = re.escape(symbol) + (r"(?![A-Za-z])" if symbol[-1].isalpha() else "")
    if re.fullmatch(r"[A-Za-z]", symbol):
        pattern = rf"(?<![\\A-Za-z]){re.escape(symbol)}(?![A-Za-z])"
    spans = re.finditer(r"\$\$.*?\$\$|\$[^$\n]+\$", prose, flags=re.S)
    return [m.start() for m in spans if re.search(pattern, m.group(0))]


def check(rows: list[Row], chapters: dict[str, str], *, symbols: bool) -> list[str]:
    """What is wrong with a notation (``symbols=True``) or glossary page's rows."""
    found = []
    seen: dict[str, int] = {}
    for row in rows:
        key = re.sub(r"\s+", "", row.key) if symbols else row.key.lower()
        if key in seen:
            found.append(f"{row.key!r} is listed twice")
        seen[key] = 1
        name = _chapter_of(row.label, chapters)
        if name is None:
            found.append(f"{row.key!r}: no chapter has the label {row.label!r}")
            continue
        prose = _prose(chapters[name])
        terms = [m.start() for m in re.finditer(re.escape(row.term), prose, flags=re.I)]
        if not terms:
            found.append(f"{row.key!r}: {name} never says {row.term!r}")
            continue
        if symbols:
            near = [t for t in terms for s in _maths_with(row.key, prose) if abs(t - s) <= NEAR]
            if not near:
                found.append(f"{row.key!r}: in {name}, ${row.key}$ never appears near {row.term!r}")
    return found


def _chapters() -> dict[str, str]:
    return {path.stem: path.read_text() for path in sorted(CHAPTERS.glob("*.md"))}


# --- the checkers catch what they should, on small pages ----------------------------------------------------------


FIXTURE_CHAPTERS = {
    "ch": "(ch-a)=\n# A\n\nThe **rest mass** $E$ is what is left; the margin is $\\gamma$.\n\n"
    "```{code-cell} ipython3\n# rho in code only: $\\rho$ rest\n```\n"
}


def test_the_notation_checker_finds_wrong_missing_and_doubled_rows() -> None:
    page = (
        "| Symbol | Meaning | Defined in |\n|:--|:--|:--|\n"
        "| $E$ | the **rest mass** | {ref}`ch-a` |\n"
        "| $\\gamma$ | the **margin** | {ref}`ch-a` |\n"
        "| $\\rho$ | a **rest** of code | {ref}`ch-a` |\n"
        "| $E$ | the **error** | {ref}`ch-a` |\n"
        "| $x$ | an **input** | {ref}`nowhere` |\n"
    )
    found = check(notation_rows(page), FIXTURE_CHAPTERS, symbols=True)
    assert found == [
        "'\\\\rho': in ch, $\\rho$ never appears near 'rest'",
        "'E' is listed twice",
        "'E': ch never says 'error'",
        "'x': no chapter has the label 'nowhere'",
    ], found
    with pytest.raises(ValueError, match="not"):
        notation_rows("| a | b | c |\n|--|--|--|\n| $E$ | no term | {ref}`ch-a` |\n")


def test_the_glossary_checker_finds_missing_and_doubled_terms() -> None:
    page = (
        "| Term | Meaning | Defined in |\n|--|--|--|\n| **rest mass** | m | {ref}`ch-a` |\n"
        "| **Rest mass** | again | {ref}`ch-a` |\n| **heuristic window** | w | {ref}`ch-a` |\n"
    )
    assert check(glossary_rows(page), FIXTURE_CHAPTERS, symbols=False) == [
        "'Rest mass' is listed twice",
        "'heuristic window': ch never says 'heuristic window'",
    ]


# --- the book's pages ---------------------------------------------------------------------------------------------


def test_the_notation_page_agrees_with_the_chapters() -> None:
    rows = notation_rows((CHAPTERS / "notation.md").read_text())
    assert rows, "the notation page lists no symbol"
    assert check(rows, _chapters(), symbols=True) == []


def test_the_glossary_agrees_with_the_chapters() -> None:
    rows = glossary_rows((CHAPTERS / "glossary.md").read_text())
    assert rows, "the glossary lists no term"
    assert check(rows, _chapters(), symbols=False) == []


def test_the_reference_pages_are_in_the_book_and_the_front_page_links_them() -> None:
    toc = (ROOT / "_toc.yml").read_text()
    for page in ("quickstart", "notation", "glossary", "errata"):
        assert f"file: chapters/{page}\n" in toc, f"{page} is not in _toc.yml"
    intro = (ROOT / "intro.md").read_text()
    box = intro[intro.index("xorlib-front") : intro.index(":::", intro.index("xorlib-front"))]
    for link in ('href="book.pdf"', "chapters/quickstart", "chapters/errata", "CITATION.cff", "issue"):
        assert link in box, f"the front page's box does not link {link}"
    errata = re.sub(r"<!--.*?-->", "", (CHAPTERS / "errata.md").read_text(), flags=re.S)
    entries = re.findall(r"^## (\d{4}-\d{2}-\d{2}): .+$", errata, flags=re.M)
    assert entries and entries == sorted(entries, reverse=True), "errata entries: dated headings, newest first"
    for field in ("**What changed.**", "**Why.**", "**Where.**"):
        assert errata.count(field) == len(entries), f"every erratum says {field}"


def test_citation_cff_validates_against_the_format_schema() -> None:
    import jsonschema

    schema = json.loads((FIXTURES / "cff-1.2.0.schema.json").read_text())
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    for value in ("date-released",):  # YAML reads dates as dates; the schema (like cffconvert) wants strings
        if value in citation:
            citation[value] = str(citation[value])
    validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.FormatChecker())
    errors = [f"{'/'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(citation)]
    assert not errors, errors
    broken = dict(citation, authors=[{"nickname": 3}])
    assert list(validator.iter_errors(broken)), "the schema check accepts a broken file"
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert citation["repository-code"] == config["repository"]["url"], "CITATION.cff and _config.yml disagree"
    import xorlib

    assert citation["version"] == xorlib.__version__, "CITATION.cff's version is not the package's"
