"""Reading notebooks, and finding a question's answer cell and check cell in a submission.

The cells are found by their tags, which the sync and student tools write: ``answer-<id>`` on the answer cell,
``check-<id>`` on the check cell, ``written-<id>`` on the Markdown cell of a written answer, and ``coursework-setup`` on
the cell that imports ``check``. An answer cell whose tag was lost is found by the function it defines. The check cell
must be exactly the teacher's (:meth:`~xorlib.coursework.questions.AutoQuestion.check_source`) and sit after its answer
cell and before the next question's; otherwise the question scores 0 and the report says why.
"""

from __future__ import annotations

import ast
import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import nbformat

from .bank import chapter_of
from .questions import AutoQuestion

__all__ = []  # the rest is internal to xorlib.coursework

#: Metadata key of the student versions: which chapter, and which questions, a notebook holds.
METADATA_KEY = "xorlib_coursework"
_MAX_BYTES = 32 * 2**20


class NotebookError(ValueError):
    """The file is not a notebook that can be read."""


def read_notebook(path: str | Path) -> nbformat.NotebookNode:
    """Read an ``.ipynb`` notebook or a jupytext MyST ``.md`` file (validated; at most 32 MB).

    Raises
    ------
    NotebookError
        If the file is missing, a symbolic link (it could point at another student's work, or outside the
        folder), too large, or not a valid notebook.
    """
    path = Path(path)
    if path.suffix not in (".ipynb", ".md"):
        raise NotebookError(f"{path.name}: expected a .ipynb or a MyST .md notebook, got {path.suffix!r}")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # never through a link, never a FIFO's wait
    except OSError as err:
        link = err.errno == errno.ELOOP or path.is_symlink()
        raise NotebookError(
            f"{path.name} is a symbolic link: refused" if link else f"no such notebook: {path}"
        ) from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotebookError(f"{path.name} is not a regular file: refused")
        data = handle.read(_MAX_BYTES + 1)
    if len(data) > _MAX_BYTES:
        raise NotebookError(f"{path.name} is larger than {_MAX_BYTES // 2**20} MB: refused")
    try:
        text = data.decode("utf-8")
        if path.suffix == ".ipynb":
            notebook = nbformat.reads(text, as_version=4)
        else:
            import jupytext

            notebook = jupytext.reads(text, fmt="md:myst")
        nbformat.validate(notebook)
    except Exception as err:  # nbformat, jupytext and json raise many kinds of error for a broken file
        raise NotebookError(f"{path.name}: not a valid notebook ({type(err).__name__}: {str(err)[:200]})") from None
    return notebook


def tags(cell: nbformat.NotebookNode) -> list[str]:
    """A cell's tags (``[]`` when it has none or they are malformed)."""
    found = cell.get("metadata", {}).get("tags", [])
    return [t for t in found if isinstance(t, str)] if isinstance(found, list) else []


def notebook_chapter(notebook: nbformat.NotebookNode, path: str | Path) -> str | None:
    """The chapter a notebook belongs to: its metadata, else its file name, else its cells' tags."""
    meta = notebook.get("metadata", {}).get(METADATA_KEY, {})
    if isinstance(meta, dict) and isinstance(meta.get("chapter"), str):
        return meta["chapter"]
    if chapter := chapter_of(path):
        return chapter
    for cell in notebook.cells:
        for tag in tags(cell):
            if tag.startswith(("answer-ch", "check-ch")):
                return tag.split("-")[1]
    return None


def _normalise(source: str) -> str:
    return "\n".join(line.rstrip() for line in source.strip().splitlines())


def _defines(source: str, function: str) -> bool:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # a student's cell may be any text at all
        return f"def {function}(" in source
    return any(isinstance(n, ast.FunctionDef) and n.name == function for n in tree.body)


@dataclass(frozen=True)
class Located:
    """Where a question's cells are in a submission, and what is wrong with its check cell, if anything."""

    answer_index: int | None
    answer_code: str
    check_problem: str | None
    note: str = ""


def locate(notebook: nbformat.NotebookNode, questions: tuple[AutoQuestion, ...]) -> dict[str, Located]:
    """Find each question's answer cell by its tag (or the function it defines) and judge its check cell."""
    code = [(k, c) for k, c in enumerate(notebook.cells) if c.get("cell_type") == "code"]
    answers: dict[str, tuple[int | None, str, str]] = {}
    for q in questions:
        tagged = [(k, c) for k, c in code if f"answer-{q.id}" in tags(c)]
        found = tagged or [(k, c) for k, c in code if _defines(c.source, q.function)]
        note = f"answer cell found by its function {q.function} (its tag was missing)" if not tagged else (
            "" if len(tagged) == 1 else "several answer cells: the last one is graded")  # fmt: skip
        answers[q.id] = (found[-1][0], found[-1][1].source, note) if found else (None, "", "")
    located = {}
    for q in questions:  # wherever the blocks moved: the check follows its answer, before the next answer cell
        index, source, note = answers[q.id]
        others = [a[0] for qid, a in answers.items() if qid != q.id and a[0] is not None and a[0] > (index or 0)]
        located[q.id] = Located(
            index, source, _check_problem(code, q, index, min(others, default=len(notebook.cells))), note
        )
    return located


def _check_problem(code: list, question: AutoQuestion, answer: int | None, upper: int) -> str | None:
    """Why the check cell of ``question`` does not count, or ``None`` when it is intact and in place."""
    expected = _normalise(question.check_source())
    tagged = [(k, c) for k, c in code if f"check-{question.id}" in tags(c)]
    found = tagged or [(k, c) for k, c in code if _normalise(c.source) == expected]
    if not found:
        return f"its check cell is missing (it must be exactly `{question.check_source()}`)"
    intact = [(k, c) for k, c in found if _normalise(c.source) == expected]
    if not intact:
        return f"its check cell was altered (it must be exactly `{question.check_source()}`)"
    if answer is None or not any(answer < k < upper for k, _ in intact):
        return "its check cell was moved (it must follow the answer cell, before the next question)"
    return None
