"""Student versions: ``python -m xorlib.coursework student chapters/*.md --out student``.

For every chapter with questions in the bank it writes ``student/<chapter>.ipynb``:
the chapter with its exercise region replaced by the student's cells
(:func:`~xorlib.coursework.render.student_cells`: stubs, check cells, prompts;
no solutions, rubrics or hidden tests), built from the bank rather than by
editing the book's cells, so nothing of the teacher's version can leak through
the region. A chapter without the markers gets the exercises appended at its
end (and a warning). As a second line of defence, any other solution in the
chapter is removed too: ``# BEGIN SOLUTION`` blocks in code, cells tagged
``solution``, ``{solution}`` directives and ``<!-- BEGIN SOLUTION -->`` blocks in
Markdown. Outputs are cleared. A ``README.md`` for students goes with them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

from .._checks import check_path, check_sequence
from .bank import chapter_of, chapter_questions
from .notebooks import METADATA_KEY, read_notebook, tags
from .questions import stub_source
from .render import BEGIN, END, marker_lines, student_cells

__all__ = ["write_student_versions"]  # the rest is internal to xorlib.coursework

_FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|:{3,})\{(?P<name>[\w-]+)\}")
_MD_BEGIN = re.compile(r"^[ \t]*<!--[ \t]*BEGIN SOLUTION[ \t]*-->")
_MD_END = re.compile(r"^[ \t]*<!--[ \t]*END SOLUTION[ \t]*-->")

README = """# Exercises

One notebook per chapter of the book. Open them in the book's environment (the Binder button of
the book, or `make env` in its repository), so that `from xorlib.coursework import check` works.

For each code question:

1. write the function in its **answer cell**, replacing `raise NotImplementedError`, and keep every
   helper and import it needs inside that same cell;
2. run the **check cell** below it: it runs the public test cases and explains a failure.

Do not edit, move or delete the check cells or the cells' tags: a question whose check cell was
changed scores 0. Answer the written questions in the Markdown cell under each of them.

Submit the `.ipynb` file, with its name unchanged. Grading runs your answer cells only, in a fresh
process without the book's reference functions, on the public test cases and on hidden ones.
"""


def _skip_block(lines: list[str], k: int, fence: str) -> int:
    """The index after the closing fence of the directive block opened at line ``k``."""
    k += 1
    while k < len(lines):
        line = lines[k].strip()
        if line and set(line) == {fence[0]} and len(line) >= len(fence):
            return k + 1
        k += 1
    return k


def _strip_markdown_solutions(source: str, gated: bool) -> tuple[str, bool]:
    """Remove solutions from Markdown: ``{solution}`` blocks, everything from ``{solution-start}`` to
    ``{solution-end}`` (which may span cells: ``gated`` says whether one is open) and
    ``<!-- BEGIN SOLUTION -->`` ... ``<!-- END SOLUTION -->`` blocks. Returns the text and whether a gate is open.
    """
    lines, out, k = source.splitlines(), [], 0
    while k < len(lines):
        opening = _FENCE.match(lines[k])
        name = opening.group("name") if opening else ""
        if gated:
            gated = name != "solution-end"
            k = _skip_block(lines, k, opening.group("fence")) if opening else k + 1
        elif name in ("solution", "solution-start"):
            gated = name == "solution-start"
            k = _skip_block(lines, k, opening.group("fence"))
        elif _MD_BEGIN.match(lines[k]):
            while k < len(lines) and not _MD_END.match(lines[k]):
                k += 1
            k += 1
        else:
            out.append(lines[k])
            k += 1
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip("\n"), gated


def _strip_cells(cells: list[nbformat.NotebookNode]) -> list[nbformat.NotebookNode]:
    """Cells of the chapter outside the region, without solutions (cells inside a gated solution are dropped)."""
    kept, gated = [], False
    for cell in cells:
        if "solution" in tags(cell):
            continue
        if cell.cell_type == "markdown":
            cell.source, gated = _strip_markdown_solutions(cell.source, gated)
            if cell.source.strip():
                kept.append(cell)
        elif not gated:
            if cell.cell_type == "code":
                cell.source = stub_source(cell.source)
                cell.outputs, cell.execution_count = [], None
            kept.append(cell)
    return kept


def _split(cell: nbformat.NotebookNode, marker: str) -> tuple[str, str] | None:
    """The text of a Markdown cell before and after a marker line, or ``None`` without the marker."""
    if cell.cell_type != "markdown":
        return None
    lines = cell.source.splitlines()
    for k in marker_lines(lines, marker)[:1]:
        return "\n".join(lines[:k]).strip("\n"), "\n".join(lines[k + 1 :]).strip("\n")
    return None


@dataclass(frozen=True)
class StudentVersion:
    """A student notebook and what building it noticed."""

    notebook: nbformat.NotebookNode
    chapter: str
    warnings: tuple[str, ...] = ()


def student_notebook(path: str | Path) -> StudentVersion | None:
    """The student version of a chapter file, or ``None`` if the bank has no questions for its chapter."""
    path = Path(path)
    chapter = chapter_of(path)
    if not chapter_questions(chapter):
        return None
    notebook = read_notebook(path)
    cells, warnings = list(notebook.cells), []
    begin = next(((k, s) for k, c in enumerate(cells) if (s := _split(c, BEGIN))), None)
    end = next(((k, s) for k, c in enumerate(cells) if (s := _split(c, END))), None)
    exercises = student_cells(chapter)
    if begin and end and begin[0] <= end[0]:
        before, after = begin[1][0], end[1][1]
        kept_before = _strip_cells(cells[: begin[0]])
        if before:
            kept_before.append(nbformat.v4.new_markdown_cell(before))
        kept_after = [nbformat.v4.new_markdown_cell(after)] if after else []
        kept_after += _strip_cells(cells[end[0] + 1 :])
        new_cells = [*kept_before, *exercises, *kept_after]
    else:
        warnings.append(f"{path.name} has no exercise markers: the exercises are appended at its end")
        new_cells = [*_strip_cells(cells), *exercises]
    notebook.cells = new_cells
    for k, cell in enumerate(notebook.cells):
        cell["id"] = f"cell-{k}"  # deterministic: the same chapter gives the same file
    notebook.metadata.pop("jupytext", None)
    questions = [q.id for q in chapter_questions(chapter)]
    notebook.metadata[METADATA_KEY] = {"chapter": chapter, "source": path.name, "questions": questions}
    notebook.metadata.setdefault("kernelspec", {"display_name": "Python 3", "language": "python", "name": "python3"})
    notebook.nbformat, notebook.nbformat_minor = 4, 5
    nbformat.validate(notebook)
    return StudentVersion(notebook, chapter, tuple(warnings))


def write_student_versions(paths: list[str | Path], out: str | Path) -> list[str]:
    """Write ``out/<stem>.ipynb`` for each chapter with questions, and ``out/README.md``; return one line per chapter."""
    paths = [check_path(f"paths[{k}]", p) for k, p in enumerate(check_sequence("paths", paths, nonempty=False))]
    out = check_path("out", out)
    out.mkdir(parents=True, exist_ok=True)
    messages = []
    for path in paths:
        version = student_notebook(path)
        if version is None:
            messages.append(f"{path}: skipped (no questions in the bank for this chapter)")
            continue
        target = out / f"{Path(path).stem}.ipynb"
        nbformat.write(version.notebook, target)
        count = len(chapter_questions(version.chapter))
        messages.append(f"{path} -> {target}: {count} question(s)" + "".join(f"; {w}" for w in version.warnings))
    (out / "README.md").write_text(README)
    return messages
