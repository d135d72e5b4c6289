"""The exercises, written from the bank: the book's section (``sync``), and the student versions (``student``).

The book's region (:func:`teacher_region`) holds per auto-graded question an ``{exercise}``, the answer cell (the
solution, folded, tagged ``answer-<id>``) and the check cell (``check-<id>``); per written question, an
``{exercise}``, its rubric and model answer, folded. :func:`sync_chapter` rewrites only the text between the lines
:data:`BEGIN` and :data:`END` (once per chapter, outside code blocks), byte for byte idempotent.

The student notebooks and the book's student edition (``_ext/student_edition.py``) come from :func:`student_text`:
the region replaced by :func:`student_region` (stubs, no rubrics or model answers, built from the bank, so nothing
of the teacher's region leaks) and, as a second line of defence, every other solution removed: ``{solution}``
directives, ``{solution-start}`` to ``{solution-end}``, ``<!-- BEGIN SOLUTION -->`` blocks, code cells tagged
``solution``, the bodies of ``# BEGIN SOLUTION`` blocks. A bank chapter id (``"ch02"``) gives the exercises alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where a notebook is read or written: nbformat and jupytext take about 1.5 s
    import nbformat

from ..report import html_table
from .bank import CHAPTERS, chapter_of, chapter_questions
from .bank._common import SETUP
from .grading import METADATA_KEY
from .questions import AutoQuestion, Question, WrittenQuestion, stub_source

__all__ = []  # internal to xorlib.coursework (which exports what readers call)

#: The marker lines that delimit the region the tool owns, each alone on its line.
BEGIN, END = "<!-- exercises:begin -->", "<!-- exercises:end -->"
_CODE_FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})")


class MarkerError(ValueError):
    """The exercise markers are repeated, or the end marker comes first."""


def markers(lines: list[str]) -> tuple[int, int] | None:
    """The lines of :data:`BEGIN` and :data:`END` outside code fences; ``None`` without either; else
    :class:`MarkerError`."""
    found: dict[str, list[int]] = {BEGIN: [], END: []}
    k = 0
    while k < len(lines):
        if opening := _CODE_FENCE.match(lines[k]):  # a code block or cell: its lines are not markers
            k = _block_end(lines, k, opening["fence"])
            continue
        found.get(lines[k].strip(), []).append(k)
        k += 1
    begins, ends = found[BEGIN], found[END]
    if not begins and not ends:
        return None
    if len(begins) != 1 or len(ends) != 1 or ends[0] < begins[0]:
        raise MarkerError(f"expected one {BEGIN} line followed by one {END} line, found {len(begins)} and {len(ends)}")
    return begins[0], ends[0]


def _points(n: float) -> str:
    return f"{n:g} point" + ("" if n == 1 else "s")


_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def _summary(questions: tuple[Question, ...]) -> str:
    """The exercises counted: 'Two auto-graded questions (5 points) and one written question (3 points)'."""
    parts = []
    for kind, what in ((AutoQuestion, "auto-graded question"), (WrittenQuestion, "written question")):
        chosen = [q for q in questions if isinstance(q, kind)]
        if chosen or kind is AutoQuestion:
            count = _WORDS[len(chosen)] if len(chosen) < len(_WORDS) else str(len(chosen))
            parts.append(f"{count} {what}{'s' * (len(chosen) != 1)} ({_points(sum(q.points for q in chosen))})")
    text = " and ".join(parts)
    return text[0].upper() + text[1:]


def _code_cell(source: str, cell_tags: list[str]) -> str:
    return f"```{{code-cell}} ipython3\n:tags: [{', '.join(cell_tags)}]\n\n{source}\n```"


#: The setup cell: the teacher's imports and the student-facing ``check``.
_SETUP_CELL = _code_cell(f"{SETUP.strip()}\n\nfrom xorlib.coursework import check", ["coursework-setup"])


def header(q: Question) -> str:
    """The line above a prompt: "3 points · core · about 20 minutes · checked with check("ch06-q1", …)", or for a
    written question "3 points, written · challenge · about 30 minutes · marked as ch01-w1"."""
    effort = f"{q.level} · about {q.minutes} minute{'s' * (q.minutes != 1)}"
    if isinstance(q, AutoQuestion):
        return f'**{_points(q.points)}** · {effort} · checked with `check("{q.id}", …)`'
    return f"**{_points(q.points)}, written** · {effort} · marked as `{q.id}`"


def _question(q: Question, *, teacher: bool, book: bool) -> list[str]:
    """One exercise: its directive (``book``) or heading, then its cells (the teacher's: solution and rubric)."""
    head = f"{header(q)}\n\n{q.prompt}"
    parts = [f"::::{{exercise}} {q.title}\n:label: {q.id}\n\n{head}\n::::" if book else f"### {q.title}\n\n{head}"]
    if isinstance(q, AutoQuestion):
        answer = _code_cell(q.answer_source(), ["hide-input", f"answer-{q.id}"]) if teacher else _code_cell(
            q.student_source(), [f"answer-{q.id}"])  # fmt: skip
        return [*parts, answer, _code_cell(q.check_source(), [f"check-{q.id}"])]
    if not teacher:
        return [*parts, f'+++ {{"tags": ["written-{q.id}"]}}\n\n*Your answer here.*\n\n+++']  # its own cell
    rubric = "\n".join(f"- **{_points(c.points)}**: {c.text}" for c in q.rubric)
    return [*parts, f":::{{admonition}} Rubric ({_points(q.points)})\n:class: dropdown\n\n{rubric}\n:::",
            f"::::{{solution}} {q.id}\n:class: dropdown\n\n{q.answer}\n::::"]  # fmt: skip


def teacher_region(chapter: str) -> str:
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
    return "\n\n".join([intro, _SETUP_CELL, *(p for q in questions for p in _question(q, teacher=True, book=True))])


def student_region(chapter: str, *, book: bool = False) -> str:
    """The student's exercise section for ``chapter`` as MyST text: stubs, check cells, prompts; no solutions, no
    rubrics. ``book=True`` keeps the ``{exercise}`` directives and labels of the book (its student edition);
    otherwise headings in plain Markdown, which read the same in any Jupyter."""
    questions = chapter_questions(chapter)
    if not questions:
        return ""
    intro = (
        (f"({chapter}-exercises)=\n" if book else "") + f"## Exercises\n\n{_summary(questions)}.\n\n"
        "* Write each function in its **answer cell**, replacing `raise NotImplementedError`; keep everything the "
        "function needs (helpers, imports) inside that cell.\n"
        "* Run the **check cell** below it for feedback: it runs the public test cases and explains what is wrong.\n"
        "* Do not edit, move or delete the check cells. Only the answer cells are graded: they run in a fresh "
        "process, with hidden test cases too, and without the book's reference functions.\n"
        "* Answer the written questions in the Markdown cell under each of them.\n"
        "* Each exercise gives its level (warm-up, core or challenge) and about how long it takes once the chapter "
        "is read."
    )
    return "\n\n".join([intro, _SETUP_CELL, *(p for q in questions for p in _question(q, teacher=False, book=book))])


@dataclass(frozen=True)
class SyncResult:
    """What :func:`sync_chapter` did to one file: ``"updated"``, ``"unchanged"``, ``"out of date"``, ``"no markers"``
    or ``"error"``."""

    path: str
    status: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.path}: {self.status}" + (f" ({self.detail})" if self.detail else "")


def sync_text(text: str, chapter: str | None) -> str | None:
    """The chapter text with its region rewritten for ``chapter``, ``None`` without markers (:class:`MarkerError` for
    malformed ones)."""
    lines = text.splitlines(keepends=True)
    found = markers(lines)
    if found is None:
        return None
    region = teacher_region(chapter) if chapter else ""
    middle = ["\n", region + "\n", "\n"] if region else []
    return "".join([*lines[: found[0] + 1], *middle, *lines[found[1] :]])


def sync_chapter(path: str | Path, *, check: bool = False) -> SyncResult:
    """Rewrite the exercise region of one chapter file from the bank (``check``: only report whether it would change)."""
    path = Path(path)
    chapter = chapter_of(path)
    try:
        text = path.read_text(encoding="utf-8")
        new = sync_text(text, chapter)
    except (OSError, MarkerError) as err:
        return SyncResult(str(path), "error", str(err))
    if new is None:
        return SyncResult(str(path), "no markers", f"left untouched; add {BEGIN} and {END} lines to get exercises")
    count = len(chapter_questions(chapter))
    detail = f"{count} exercise(s) from the bank's {chapter}" if count else f"no questions in the bank for {chapter}"
    status = "unchanged" if new == text else "out of date" if check else "updated"
    if status == "updated":
        path.write_text(new, encoding="utf-8")
    return SyncResult(str(path), status, detail)


def question_table() -> object:
    """Every question of the bank (chapter, id, title, points, the function to write or "written"), as a table."""
    rows = [(chapter, q.id, q.title, q.points, f"{q.function}(...)" if isinstance(q, AutoQuestion) else "written")
            for chapter, questions in CHAPTERS.items() for q in questions]  # fmt: skip
    return html_table(rows, ("chapter", "question", "title", "points", "answer"))


_FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|:{3,})\{(?P<name>[\w-]+)\}")
_TAGS = re.compile(r"^:tags:\s*\[(?P<tags>[^\]]*)\]")

README = """# Exercises

One notebook per chapter of the book. Open them in the book's environment (the Binder button of the book, or
`make env` in its repository), so that `from xorlib.coursework import check` works.

For each code question: write the function in its **answer cell**, replacing `raise NotImplementedError`, and keep
every helper and import it needs inside that cell; then run the **check cell** below it, which runs the public
test cases and explains a failure. Do not edit, move or delete the check cells or the cells' tags: a question whose
check cell was changed scores 0. Answer the written questions in the Markdown cell under each of them.

Submit the notebook (`.ipynb`, or the MyST `.md` file). Grading runs your answer cells only, in a fresh sandboxed
process without the book's reference functions, on the public test cases and on hidden ones.
"""


def _block_end(lines: list[str], k: int, fence: str) -> int:
    """The index after the closing fence of the block opened at line ``k``."""
    for j in range(k + 1, len(lines)):
        line = lines[j].strip()
        if line and set(line) == {fence[0]} and len(line) >= len(fence):
            return j + 1
    return len(lines)


def strip_solutions(text: str) -> str:
    """MyST text without solutions (see the module's docstring)."""
    lines, out, k, gated = text.splitlines(), [], 0, False
    while k < len(lines):
        opening = _FENCE.match(lines[k])
        name = opening.group("name") if opening else ""
        tags = [m.group("tags") for line in lines[k + 1 : k + 4] if opening and (m := _TAGS.match(line))]
        tagged = name == "code-cell" and "solution" in re.split(r"[\s,]+", tags[0] if tags else "")
        if gated or name in ("solution", "solution-start") or tagged:
            gated = (gated and name != "solution-end") or name == "solution-start"
            k = _block_end(lines, k, opening.group("fence")) if opening else k + 1
        elif re.match(r"^\s*<!--\s*BEGIN SOLUTION\s*-->", lines[k]):
            while k < len(lines) and not re.match(r"^\s*<!--\s*END SOLUTION\s*-->", lines[k]):
                k += 1
            k += 1
        else:
            out.append(lines[k])
            k += 1
    return re.sub(r"\n{3,}", "\n\n", stub_source("\n".join(out))).strip("\n") + "\n"


def student_text(text: str, chapter: str, *, book: bool = False) -> str:
    """A chapter's MyST text as the student sees it: its region rebuilt from the bank, every solution removed."""
    lines = text.splitlines()
    try:
        found = markers(lines)
    except MarkerError:
        found = None
    region = student_region(chapter, book=book)
    lines = [*lines[: found[0]], region, *lines[found[1] + 1 :]] if found else [*lines, "", region]
    return strip_solutions("\n".join(lines))


def student_notebook(source: str | Path) -> nbformat.NotebookNode:
    """The student notebook of a chapter file, or of a bank chapter id such as ``"ch02"`` (the exercises alone).

    Raises
    ------
    ValueError
        If the bank has no questions for that chapter.
    """
    import jupytext
    import nbformat

    if isinstance(source, str) and source in CHAPTERS:
        chapter, name = source, f"{source}_exercises.md"
        text = f"# Exercises of chapter {int(source[2:])}\n\n{student_region(source)}\n"
    else:
        path = Path(source)
        chapter, name = chapter_of(path), path.name
        if not chapter_questions(chapter):
            raise ValueError(
                f"the bank has no questions for {path.name} (a file NN_name.md or one of {', '.join(CHAPTERS)})"
            )
        text = student_text(path.read_text(encoding="utf-8"), chapter)
    notebook = jupytext.reads(text, fmt="md:myst")
    for k, cell in enumerate(notebook.cells):
        cell["id"] = f"cell-{k}"  # deterministic: the same chapter gives the same file
    notebook.metadata.pop("jupytext", None)
    questions = [q.id for q in chapter_questions(chapter)]
    notebook.metadata[METADATA_KEY] = {"chapter": chapter, "source": name, "questions": questions}
    notebook.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    notebook.nbformat, notebook.nbformat_minor = 4, 5
    nbformat.validate(notebook)
    return notebook


def write_student_notebooks(sources: list, out: Path) -> list[str]:
    """Write ``out/<stem>.ipynb`` for each source with questions, and ``out/README.md``; one line per source."""
    import nbformat

    out.mkdir(parents=True, exist_ok=True)
    messages = []
    for source in sources:
        try:
            notebook = student_notebook(source)
        except ValueError as err:  # a chapter with no questions in the bank
            messages.append(f"{source}: skipped ({err})")
            continue
        target = out / f"{Path(source).stem}.ipynb"
        nbformat.write(notebook, target)
        messages.append(f"{source} -> {target}: {len(notebook.metadata[METADATA_KEY]['questions'])} question(s)")
    (out / "README.md").write_text(README)
    return messages
