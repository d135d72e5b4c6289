"""The exercise section of a chapter, written from the bank: the book's version and the student's.

The book's version (:func:`teacher_region`) is MyST text for the region between
the markers of a chapter file: per auto-graded question, an ``{exercise}``
directive, the answer cell (the teacher's solution, folded, tagged
``answer-<id>``) and the check cell (tagged ``check-<id>``); per written
question, an ``{exercise}``, its rubric and its model answer, both folded.
The student's version (:func:`student_region`) holds the same questions with
``raise NotImplementedError`` for the solutions and no rubrics or model answers.
"""

from __future__ import annotations

import re

from ._html import Table, table
from .bank import CHAPTERS, chapter_questions
from .bank._common import SETUP
from .questions import AutoQuestion, Question, WrittenQuestion

__all__ = []  # internal to xorlib.coursework (which exports what readers call)

#: The marker lines that delimit the region the tool owns, each alone on its line.
BEGIN, END = "<!-- exercises:begin -->", "<!-- exercises:end -->"
SETUP_TAG = "coursework-setup"
_CODE_FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})")
CHECK_IMPORT = "from xorlib.coursework import check"


def marker_lines(lines: list[str], marker: str) -> list[int]:
    """The indices of the lines that are ``marker``, outside code fences (a chapter may quote the markers)."""
    found, fence = [], None
    for k, line in enumerate(lines):
        opening = _CODE_FENCE.match(line)
        if fence is None and opening:  # a code block, a code cell or a directive: its lines are not markers
            fence = opening.group("fence")
        elif fence is not None and line.strip().startswith(fence[0] * len(fence)) and not line.strip().strip(fence[0]):
            fence = None
        elif fence is None and line.strip() == marker:
            found.append(k)
    return found


def _points(n: float) -> str:
    return f"{n:g} point" + ("" if n == 1 else "s")


_WORDS = ("No", "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight", "Nine", "Ten")


def _count(n: int, what: str, *, capital: bool) -> str:
    word = _WORDS[n] if n < len(_WORDS) else str(n)
    return f"{word if capital else word.lower()} {what}{'s' * (n != 1)}"


def _summary(questions: tuple[Question, ...]) -> str:
    auto = [q for q in questions if isinstance(q, AutoQuestion)]
    written = [q for q in questions if isinstance(q, WrittenQuestion)]
    parts = [f"{_count(len(auto), 'auto-graded question', capital=True)} ({_points(sum(q.points for q in auto))})"]
    if written:
        parts.append(
            f"{_count(len(written), 'written question', capital=False)} ({_points(sum(q.points for q in written))})"
        )
    return " and ".join(parts)


def setup_source() -> str:
    """The setup cell: the teacher's imports and the student-facing ``check``."""
    return f"{SETUP.strip()}\n\n{CHECK_IMPORT}"


def _code_cell(source: str, cell_tags: list[str]) -> str:
    return f"```{{code-cell}} ipython3\n:tags: [{', '.join(cell_tags)}]\n\n{source}\n```"


def header(q: Question) -> str:
    """The line above an exercise's prompt: its points, level and time, then its id as the grading key.

    For an auto-graded question the id is shown in the check call that grades it, for a written one as the key the
    teacher's marks are entered under: "3 points · core · about 20 minutes · checked with check("ch06-q1", …)",
    "3 points, written · challenge · about 30 minutes · marked as ch01-w1" (points in bold, calls and ids as code).
    """
    effort = f"{q.level} · about {q.minutes} minute{'s' * (q.minutes != 1)}"
    if isinstance(q, AutoQuestion):
        return f'**{_points(q.points)}** · {effort} · checked with `check("{q.id}", …)`'
    return f"**{_points(q.points)}, written** · {effort} · marked as `{q.id}`"


def _teacher_question(q: Question) -> list[str]:
    if isinstance(q, AutoQuestion):
        head = f"::::{{exercise}} {q.title}\n:label: {q.id}\n\n{header(q)}\n\n{q.prompt}\n::::"
        return [head, _code_cell(q.answer_source(), ["hide-input", f"answer-{q.id}"]),
                _code_cell(q.check_source(), [f"check-{q.id}"])]  # fmt: skip
    rubric = "\n".join(f"- **{_points(c.points)}**: {c.text}" for c in q.rubric)
    return [
        f"::::{{exercise}} {q.title}\n:label: {q.id}\n\n{header(q)}\n\n{q.prompt}\n::::\n\n"
        f":::{{admonition}} Rubric ({_points(q.points)})\n:class: dropdown\n\n{rubric}\n:::\n\n"
        f"::::{{solution}} {q.id}\n:class: dropdown\n\n{q.answer}\n::::"
    ]


def teacher_region(chapter: str, source_name: str = "") -> str:
    """The MyST text between the markers for ``chapter`` (``""`` when the bank has no questions for it)."""
    questions = chapter_questions(chapter)
    if not questions:
        return ""
    intro = (
        f"<!-- Written by `python -m xorlib.coursework sync` from xorlib/coursework/bank/{chapter}.py: "
        "edit the bank, not this section. -->\n\n"
        f"({chapter}-exercises)=\n## Exercises\n\n{_summary(questions)}. Each code exercise ends with a check "
        f'cell, such as `check("{questions[0].id}", ...)`, that runs the public test cases and explains a '
        "failure; grading adds hidden cases, in a sandbox (see the coursework chapter). Solutions are folded. "
        "Each exercise gives its level (warm-up, core or challenge) and about how long it takes once the chapter "
        "is read."
    )
    parts = [intro, _code_cell(setup_source(), [SETUP_TAG])]
    for q in questions:
        parts.extend(_teacher_question(q))
    return "\n\n".join(parts)


def student_region(chapter: str, *, book: bool = False) -> str:
    """The student's exercise section for ``chapter`` as MyST text: stubs, check cells, prompts; no solutions, no
    rubrics. ``book=True`` keeps the ``{exercise}`` directives and labels of the book (its student edition);
    otherwise headings in plain Markdown, which read the same in any Jupyter."""
    questions = chapter_questions(chapter)
    if not questions:
        return ""
    parts = [
        (f"({chapter}-exercises)=\n" if book else "") + f"## Exercises\n\n{_summary(questions)}.\n\n"
        "* Write each function in its **answer cell**, replacing `raise NotImplementedError`; keep everything the "
        "function needs (helpers, imports) inside that cell.\n"
        "* Run the **check cell** below it for feedback: it runs the public test cases and explains what is wrong.\n"
        "* Do not edit, move or delete the check cells. Only the answer cells are graded: they run in a fresh "
        "process, with hidden test cases too, and without the book's reference functions.\n"
        "* Answer the written questions in the Markdown cell under each of them.\n"
        "* Each exercise gives its level (warm-up, core or challenge) and about how long it takes once the chapter "
        "is read.",
        _code_cell(setup_source(), [SETUP_TAG]),
    ]
    for q in questions:
        head = f"{header(q)}\n\n{q.prompt}"
        parts.append(
            f"::::{{exercise}} {q.title}\n:label: {q.id}\n\n{head}\n::::" if book else f"### {q.title}\n\n{head}"
        )
        if isinstance(q, AutoQuestion):
            parts += [
                _code_cell(q.student_source(), [f"answer-{q.id}"]),
                _code_cell(q.check_source(), [f"check-{q.id}"]),
            ]
        else:
            parts.append(f'+++ {{"tags": ["written-{q.id}"]}}\n\n*Your answer here.*\n\n+++')  # its own cell
    return "\n\n".join(parts)


def question_table() -> Table:
    """Every question of the bank: chapter, id, title, points, and the function to write (or "written")."""
    rows = [
        (chapter, q.id, q.title, q.points, f"{q.function}(...)" if isinstance(q, AutoQuestion) else "written")
        for chapter, questions in CHAPTERS.items()
        for q in questions
    ]
    return table(("chapter", "question", "title", "points", "answer"), rows)
