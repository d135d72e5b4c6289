"""``make test`` runs every test of the built book: each file with tests marked ``book`` or ``lab`` is named in one
of the Makefile's lists of the book's checks (``BOOK_BROWSER``, ``BOOK_PDF``, ``BOOK_LAB``), which name files
rather than collect every module of ``tests/book`` (seconds of imports per job)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LISTS = ("BOOK_BROWSER", "BOOK_PDF", "BOOK_LAB")


def _listed() -> set[str]:
    makefile = (ROOT / "Makefile").read_text()
    found: set[str] = set()
    for name in LISTS:
        match = re.search(rf"^{name} := (.*)$", makefile, flags=re.M)
        assert match, f"the Makefile has no {name} list"
        found |= set(match[1].split())
    return found


def _marked(text: str) -> bool:
    return bool(re.search(r"pytest\.mark\.(book|lab)\b", text))


def test_every_file_of_book_or_lab_tests_is_in_a_book_job() -> None:
    marked = {
        path.relative_to(ROOT).as_posix()
        for path in sorted((ROOT / "tests").rglob("test_*.py"))
        if path != Path(__file__) and _marked(path.read_text())
    }
    listed = _listed()
    assert marked, "no test is marked book or lab"
    assert marked <= listed, f"marked book or lab but in no job of make test: {sorted(marked - listed)}"
    assert all((ROOT / path).is_file() for path in listed), listed


def test_the_check_sees_a_mark() -> None:
    assert _marked("@pytest.mark.book\ndef test_x(): ...") and _marked("pytestmark = [pytest.mark.lab]")
    assert not _marked("@pytest.mark.notebooks\ndef test_x(): ...")
