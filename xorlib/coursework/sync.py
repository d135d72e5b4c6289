"""Write a chapter's exercise section from the bank: ``python -m xorlib.coursework sync chapters/*.md``.

Only the text between the marker lines ``<!-- exercises:begin -->`` and
``<!-- exercises:end -->`` (each alone on its line, once per chapter, outside
code blocks, so that a chapter may quote them) is rewritten; the rest of the file is left byte for byte. A chapter without the
markers is left untouched (and reported), as is one with malformed markers
(reported as an error). Running it twice changes nothing the second time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .bank import chapter_of
from .render import BEGIN, END, marker_lines, teacher_region

__all__ = []  # internal to xorlib.coursework (which exports what readers call)


class MarkerError(ValueError):
    """The exercise markers are repeated, or the end marker comes first."""


@dataclass(frozen=True)
class SyncResult:
    """What :func:`sync_chapter` did to one file: ``"updated"``, ``"unchanged"``, ``"no markers"`` or ``"error"``."""

    path: str
    status: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.path}: {self.status}" + (f" ({self.detail})" if self.detail else "")


def _marker_lines(lines: list[str]) -> tuple[int, int] | None:
    begins, ends = marker_lines(lines, BEGIN), marker_lines(lines, END)
    if not begins and not ends:
        return None
    if len(begins) != 1 or len(ends) != 1 or ends[0] < begins[0]:
        raise MarkerError(f"expected one {BEGIN} line followed by one {END} line, found {len(begins)} and {len(ends)}")
    return begins[0], ends[0]


def sync_text(text: str, chapter: str | None) -> str | None:
    """The chapter text with its region rewritten for ``chapter``, or ``None`` if it has no markers.

    Raises
    ------
    MarkerError
        For malformed markers.
    """
    lines = text.splitlines(keepends=True)
    found = _marker_lines(lines)
    if found is None:
        return None
    begin, end = found
    region = teacher_region(chapter) if chapter else ""
    middle = ["\n", region + "\n", "\n"] if region else []
    return "".join([*lines[: begin + 1], *middle, *lines[end:]])


def sync_chapter(path: str | Path, *, check: bool = False) -> SyncResult:
    """Rewrite the exercise region of one chapter file from the bank (``check``: only report whether it would change)."""
    if not isinstance(path, (str, Path)) or not isinstance(check, bool):
        raise TypeError(
            f"path must be a str or Path and check a bool, got {type(path).__name__}, {type(check).__name__}"
        )
    path = Path(path)
    chapter = chapter_of(path)
    try:
        text = path.read_text(encoding="utf-8")
        new = sync_text(text, chapter)
    except (OSError, MarkerError) as err:
        return SyncResult(str(path), "error", str(err))
    if new is None:
        return SyncResult(str(path), "no markers", f"left untouched; add {BEGIN} and {END} lines to get exercises")
    count = teacher_region(chapter).count("{exercise}") if chapter else 0
    detail = f"{count} exercise(s) from the bank's {chapter}" if count else f"no questions in the bank for {chapter}"
    if new == text:
        return SyncResult(str(path), "unchanged", detail)
    if check:
        return SyncResult(str(path), "out of date", detail)
    path.write_text(new, encoding="utf-8")
    return SyncResult(str(path), "updated", detail)
