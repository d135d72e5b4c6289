"""The one allow-list of the book's checks: today's offenders, page by page and check by check.

Some checks of issues 21 and 22 still fail on the current chapters, whose content is rewritten later. Each such
check reports its offenders as short, stable strings (a table's first headers, a phrase, a count); the test passes
when they are exactly the ones ``tests/book/allowlist.yml`` lists for that page and check, and fails on a new
offender and on a listed one that no longer offends (remove it: the list only shrinks). A chapter rewrite empties
its entries; an empty file means every check holds everywhere.

``XORLIB_ALLOWLIST_UPDATE=1 pytest tests/book ...`` rewrites the file from what the checks find, instead of failing
(for a deliberate change; review the diff).
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

PATH = Path(__file__).resolve().parent / "allowlist.yml"
UPDATE = os.environ.get("XORLIB_ALLOWLIST_UPDATE") == "1"
HEADER = """\
# Today's offenders of the book's checks, by page and check (tests/book/_allowlist.py). A check passes when its
# offenders are exactly these: a new one fails, and so does an entry that no longer offends (delete it). The
# chapter rewrites of issues 21 and 22 empty this file.
"""

_found: dict[str, dict[str, list[str]]] = {}
_judged: set[tuple[str, str]] = set()


def _load() -> dict[str, dict[str, list[str]]]:
    if not PATH.is_file():
        return {}
    return yaml.safe_load(PATH.read_text()) or {}


def judge(page: str, check: str, found: list[str]) -> None:
    """Assert that ``found`` (the offenders of ``check`` on ``page``) are exactly the allowed ones."""
    found = sorted(set(found))
    _judged.add((page, check))
    if UPDATE:
        if found:
            _found.setdefault(page, {})[check] = found
        return
    allowed = set(_load().get(page, {}).get(check, []))
    new = [item for item in found if item not in allowed]
    stale = sorted(allowed - set(found))
    message = []
    if new:
        message.append(f"{page}, {check}: {len(new)} new: " + "; ".join(new[:8]))
    if stale:
        message.append(f"{page}, {check}: fixed, so remove from tests/book/allowlist.yml: " + "; ".join(stale[:8]))
    assert not message, "\n".join(message)


def write() -> None:
    """With ``XORLIB_ALLOWLIST_UPDATE=1``: the file, with the entries of the checks judged in this run replaced."""
    if not UPDATE or not _judged:
        return
    data = _load()
    for page, check in _judged:
        data.get(page, {}).pop(check, None)
    for page, checks in _found.items():
        data.setdefault(page, {}).update(checks)
    data = {page: dict(sorted(checks.items())) for page, checks in sorted(data.items()) if checks}
    text = yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=200) if data else "{}\n"
    PATH.write_text(HEADER + text)
