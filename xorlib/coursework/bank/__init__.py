"""The question bank: one module per main chapter, ``ch01`` ... ``ch07``, each with a ``QUESTIONS`` tuple.

A chapter file ``chapters/NN_name.md`` is matched to the bank module ``chNN`` by its two-digit prefix. Inside a chapter,
auto-graded questions share the notebook's namespace, so their function names must differ.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..questions import AutoQuestion, Question
from . import ch01, ch02, ch03, ch04, ch05, ch06, ch07

__all__ = ["CHAPTERS", "chapter_questions"]  # what a teacher reads; the rest is internal to xorlib.coursework


def _collect() -> dict[str, tuple[Question, ...]]:
    chapters: dict[str, tuple[Question, ...]] = {}
    seen: set[str] = set()
    for module in (ch01, ch02, ch03, ch04, ch05, ch06, ch07):
        chapter = module.__name__.rpartition(".")[2]
        functions = [q.function for q in module.QUESTIONS if isinstance(q, AutoQuestion)]
        if len(set(functions)) != len(functions):
            raise ValueError(f"{chapter}: two questions ask for a function of the same name")
        for question in module.QUESTIONS:
            if question.chapter != chapter or question.id in seen:
                raise ValueError(
                    f"question {question.id}: its id is used twice, or names another chapter than {chapter}"
                )
            seen.add(question.id)
        chapters[chapter] = tuple(module.QUESTIONS)
    return chapters


#: ``{"ch01": (question, ...), ...}`` in book order: every chapter's questions, as :func:`chapter_questions` gives them.
#:
#: :meta hide-value:
CHAPTERS: dict[str, tuple[Question, ...]] = _collect()
_BY_ID = {q.id: q for questions in CHAPTERS.values() for q in questions}
_PREFIX = re.compile(r"^(\d\d)_")


class UnknownQuestion(KeyError, ValueError):
    """A question id the bank does not have (a :class:`KeyError`, and a :class:`ValueError` like other bad input)."""


def get_question(question_id: str) -> Question:
    """The question with this id (``"ch02-q1"``); :class:`UnknownQuestion` for another, listing the known ones."""
    if question_id not in _BY_ID:
        raise UnknownQuestion(f"no question {question_id!r}: question_id must be one of {', '.join(_BY_ID)}")
    return _BY_ID[question_id]


def chapter_of(path: str | Path) -> str | None:
    """``"ch02"`` for ``chapters/02_tied_one_step.md`` (any suffix), ``None`` without a two-digit prefix."""
    match = _PREFIX.match(Path(path).name)
    return f"ch{match.group(1)}" if match else None


def chapter_questions(chapter: str | None, kind: type | None = None) -> tuple[Question, ...]:
    """The questions of a chapter (``()`` if it has none), optionally only ``AutoQuestion`` or ``WrittenQuestion``."""
    questions = CHAPTERS.get(chapter or "", ())
    return tuple(q for q in questions if kind is None or isinstance(q, kind))
