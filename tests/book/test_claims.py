"""The status table of the introduction: every claim points at a label that exists and a test that exists."""

from __future__ import annotations

import re
from pathlib import Path

from xorlib.claims import CLAIMS, STATUSES, claims_table

ROOT = Path(__file__).resolve().parents[2]


def test_every_claim_points_at_a_real_label_and_test() -> None:
    for claim in CLAIMS:
        assert claim.status in STATUSES
        chapter = (ROOT / "chapters" / f"{claim.chapter}.md").read_text()
        assert re.search(rf"(:label: {re.escape(claim.label)}\b|\({re.escape(claim.label)}\)=)", chapter), claim
        path, _, name = claim.test.partition("::")
        source = (ROOT / path).read_text()
        if name:
            assert f"def {name}(" in source, claim.test


def test_the_table_renders_every_claim() -> None:
    html = str(claims_table())  # xorlib.report.html_table's HTML
    assert html.count("<tr>") == len(CLAIMS) + 1
