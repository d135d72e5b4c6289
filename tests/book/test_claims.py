"""The status table of the introduction: every claim points at a label that exists and a test that exists."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import labels_of

from xorlib.claims import CLAIMS, STATUSES, claims_table

ROOT = Path(__file__).resolve().parents[2]


def test_every_claim_points_at_a_real_label_and_test() -> None:
    for claim in CLAIMS:
        assert claim.status in STATUSES
        chapter = (ROOT / "chapters" / f"{claim.chapter}.md").read_text()
        assert claim.label in labels_of(chapter), claim
        # The title the table shows is the statement's (``{prf:lemma} Ties are rare`` then its label) or the section's.
        statement = rf"\{{prf:\w+\}} {re.escape(claim.title)}\n(?:.*\n){{0,3}}?:label: {re.escape(claim.label)}\n"
        section = rf"\({re.escape(claim.label)}\)=\n#+ {re.escape(claim.title)}\n"
        assert re.search(statement, chapter) or re.search(section, chapter), (claim.label, claim.title)
        path, _, name = claim.test.partition("::")
        source = (ROOT / path).read_text()
        if name:
            assert f"def {name}(" in source, claim.test


def test_the_table_renders_every_claim() -> None:
    html = str(claims_table())  # xorlib.report.html_table's HTML
    assert html.count("<tr>") == len(CLAIMS) + 1
    assert "ch. 2, lemma “Ties are rare”" in html  # where: the chapter and the statement's title, never a label slug
    assert not re.search(r"\d\^\d", html)  # powers of ten as superscripts (10⁶), never 10^6


def _readme_rows() -> list[list[str]]:
    """The rows of the README's table under "What the book shows, and for which model", as lists of cells."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## What the book shows, and for which model\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    assert lines[0] == "| claim of the abstract | model | status in the book | where |", lines[0]
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines[2:]]


def test_the_readme_table_is_the_status_table_word_for_word() -> None:
    """Issue 20: the README over-claimed (Theorem F "proved", softmax "proved ... both"); its rows are CLAIMS'."""
    from xorlib.claims import _where

    rows = _readme_rows()
    assert [row[0] for row in rows] == [c.claim for c in CLAIMS]
    for row, claim in zip(rows, CLAIMS, strict=True):
        assert row == [claim.claim, claim.model, claim.status, _where(claim)], (row, claim)
