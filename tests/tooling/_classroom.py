"""Building submissions for the grading tests: answer cells (correct, wrong, hostile) placed into student notebooks."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

from xorlib.coursework.bank import get_question
from xorlib.coursework.render import student_notebook

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).parent / "fixtures" / "coursework" / "02_fixture_chapter.md"
Q1, Q2, Q3 = (get_question(f"ch02-q{k}") for k in (1, 2, 3))


def code(q, body: str) -> str:
    """An answer cell: the question's def line and docstring, with ``body`` as its code."""
    head = q.student_source().split("    raise NotImplementedError")[0]
    return head + "\n".join("    " + line if line else "" for line in body.strip("\n").splitlines())


def answers(**override: str) -> dict[str, str]:
    """The correct answer cells of chapter 2, with some replaced (``ch02_q1=...``)."""
    found = {q.id: q.answer_source() for q in (Q1, Q2, Q3)}
    found.update({k.replace("_", "-"): v for k, v in override.items()})
    return found


def hostile(prefix: str, q=Q1) -> str:
    """An answer cell that runs ``prefix`` (the attack) when the cell runs, then defines the right function."""
    return prefix.strip("\n") + "\n\n\n" + q.answer_source()


def submission(answer_cells: dict[str, str], base=None, **edits) -> nbformat.NotebookNode:
    """The student notebook of the fixture chapter (or ``base``) with these answer cells, and optional edits:
    ``drop_tag`` (a question whose answer cell loses its tag), ``wrap_checks``, ``points_1000``, ``move_first``
    (a question whose block moves to the top), ``delete`` (a question whose answer cell is deleted)."""
    notebook = copy.deepcopy(base if base is not None else student_notebook(FIXTURE))
    cells, moved = [], []
    for cell in notebook.cells:
        tags = cell.metadata.get("tags", [])
        qid = next((t.split("-", 1)[1] for t in tags if t.startswith(("answer-", "check-", "question-"))), None)
        if qid and f"answer-{qid}" in tags:
            if edits.get("delete") == qid:
                continue
            cell.source = answer_cells.get(qid, cell.source)
            if edits.get("drop_tag") == qid:
                cell.metadata["tags"] = []
        if qid and f"check-{qid}" in tags:
            if edits.get("wrap_checks"):
                cell.source = f"try:\n    {cell.source}\nexcept Exception:\n    pass"
            if edits.get("points_1000"):
                cell.source += "  # points: 1000"
        (moved if qid and qid == edits.get("move_first") else cells).append(cell)
    notebook.cells = moved + cells
    return notebook


def write(notebook: nbformat.NotebookNode, path: Path, *, mtime: float | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".md":
        import jupytext

        jupytext.write(notebook, path, fmt="md:myst")
    else:
        nbformat.write(notebook, path)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def other_python() -> str | None:
    """An interpreter every user may run (the tests' own lies under /root here), with the same ABI, or None."""
    candidate = shutil.which("python3.11", path="/usr/bin:/usr/local/bin")
    if candidate and sys.version_info[:2] == (3, 11):
        return candidate
    return None


def run_as(uid: int, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    """Run ``argv`` as an unprivileged ``uid`` (root only)."""
    return subprocess.run(argv, user=uid, group=uid, extra_groups=[], capture_output=True, text=True, check=False,
                          **kwargs)  # fmt: skip
