r"""Coursework: student versions of the exercise notebooks, and an autograder.

The chapters are the assignment sources. An exercise is written once, with its
solution, so that the book executes (and thereby tests) the solution at every
build; the student version is generated from the same file:

* in a **code cell**, the lines between ``# BEGIN SOLUTION`` and
  ``# END SOLUTION`` (the markers that nbgrader and otter-grader use) are
  replaced by ``raise NotImplementedError`` at the indentation of the marker;
  a code cell tagged ``solution`` is replaced by that stub as a whole;
* in a **markdown cell**, ``{solution}`` directive blocks (sphinx-exercise),
  ``<!-- BEGIN SOLUTION -->`` ... ``<!-- END SOLUTION -->`` blocks and whole
  cells tagged ``solution`` are removed, as are the cells from a
  ``{solution-start}`` directive to its ``{solution-end}``;
* **check cells**, code cells with a top-level call of one of the functions
  of :data:`xorlib.checks.CHECKS`, are kept unchanged; outputs are cleared.

Grading executes a submitted notebook with :mod:`nbclient` (errors allowed,
each cell with a timeout), and scores each check cell: it earns its points
(1, or ``# points: N`` in the cell) when it ran without an error. A stub that
still raises :class:`NotImplementedError` fails only its own check cells, so
the other questions are still graded. Check cells are grouped into questions
by the nearest ``{exercise}`` directive title (or markdown heading) above them.

Command line::

    python -m xorlib.coursework student chapters/01_task_and_model.md --out student
    python -m xorlib.coursework grade student/01_task_and_model.ipynb [--timeout 60] [--json score.json]

``grade`` exits with status 2 on a malformed notebook (unreadable, invalid,
unbalanced solution markers, or without any check cell), else 0.
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat

from ._validate import check_int
from .checks import CHECKS

__all__ = [
    "STUB",
    "CheckCell",
    "CheckResult",
    "Exercise",
    "GradeReport",
    "MalformedNotebook",
    "find_check_cells",
    "grade_notebook",
    "list_exercises",
    "main",
    "read_notebook",
    "strip_code_solutions",
    "strip_markdown_solutions",
    "student_notebook",
    "write_student_version",
]

#: What replaces a solution in a code cell.
STUB = "raise NotImplementedError  # your code here"

_CODE_BEGIN = re.compile(r"^(?P<indent>[ \t]*)#+[ \t]*BEGIN SOLUTION\b")
_CODE_END = re.compile(r"^[ \t]*#+[ \t]*END SOLUTION\b")
_MD_BEGIN = re.compile(r"^[ \t]*<!--[ \t]*BEGIN SOLUTION[ \t]*-->")
_MD_END = re.compile(r"^[ \t]*<!--[ \t]*END SOLUTION[ \t]*-->")
_FENCE_OPEN = re.compile(r"^[ \t]*(?P<fence>`{3,}|:{3,})\{(?P<name>[\w-]+)\}(?P<title>.*)$")
_HEADING = re.compile(r"^#{1,6}[ \t]+(?P<title>.+?)[ \t]*#*[ \t]*$")
_POINTS = re.compile(r"#[ \t]*points:[ \t]*(?P<points>\d+)")
_BOOK_ONLY_TAGS = ("hide-input", "hide-cell", "remove-input", "remove-cell")


class MalformedNotebook(ValueError):
    """The notebook cannot be read, fails validation, or has no (or unbalanced) exercise markup."""


# --------------------------------------------------------------------------- reading


def read_notebook(path: str | Path) -> nbformat.NotebookNode:
    """Read an ``.ipynb`` notebook or a jupytext MyST ``.md`` file, validated.

    Raises
    ------
    MalformedNotebook
        If the file is missing, unreadable, or not a valid notebook.
    """
    path = Path(path)
    if not path.is_file():
        raise MalformedNotebook(f"no such notebook: {path}")
    try:
        if path.suffix == ".ipynb":
            notebook = nbformat.read(path, as_version=4)
        elif path.suffix == ".md":
            import jupytext

            notebook = jupytext.read(path)
        else:
            raise MalformedNotebook(f"{path}: expected a .ipynb or a MyST .md notebook, got {path.suffix!r}")
        nbformat.validate(notebook)
    except MalformedNotebook:
        raise
    except Exception as err:  # nbformat and jupytext raise many kinds of error for a broken file
        raise MalformedNotebook(f"{path}: not a valid notebook ({type(err).__name__}: {err})") from err
    return notebook


# --------------------------------------------------------------------------- stripping solutions


def strip_code_solutions(source: str) -> tuple[str, int]:
    """Replace each ``# BEGIN SOLUTION`` ... ``# END SOLUTION`` block by :data:`STUB`.

    Returns the new source and the number of blocks replaced. Raises
    :class:`MalformedNotebook` for a marker without its partner or nested markers.
    """
    out: list[str] = []
    replaced = 0
    inside = False
    for number, line in enumerate(source.splitlines(), start=1):
        begin, end = _CODE_BEGIN.match(line), _CODE_END.match(line)
        if begin:
            if inside:
                raise MalformedNotebook(f"line {number}: BEGIN SOLUTION inside another solution block")
            inside = True
            out.append(begin.group("indent") + STUB)
            replaced += 1
        elif end:
            if not inside:
                raise MalformedNotebook(f"line {number}: END SOLUTION without a BEGIN SOLUTION")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise MalformedNotebook("BEGIN SOLUTION without an END SOLUTION")
    return "\n".join(out), replaced


def _fence_closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return len(stripped) >= len(fence) and set(stripped) == {fence[0]}


def strip_markdown_solutions(source: str) -> tuple[str, int]:
    """Remove ``{solution}`` directive blocks and ``<!-- BEGIN/END SOLUTION -->`` blocks from markdown.

    A directive block ends at a line holding only the same fence character,
    at least as many times as the opening fence (the CommonMark rule, so a
    shorter nested fence inside does not end it). Returns the new source and
    the number of blocks removed.
    """
    lines = source.splitlines()
    out: list[str] = []
    removed = 0
    k = 0
    while k < len(lines):
        line = lines[k]
        opening = _FENCE_OPEN.match(line)
        if opening and opening.group("name") == "solution":
            fence = opening.group("fence")
            k += 1
            while k < len(lines) and not _fence_closes(lines[k], fence):
                k += 1
            if k == len(lines):
                raise MalformedNotebook(f"a {{solution}} block opened with {fence} is never closed")
            removed += 1
        elif _MD_BEGIN.match(line):
            k += 1
            while k < len(lines) and not _MD_END.match(lines[k]):
                if _MD_BEGIN.match(lines[k]):
                    raise MalformedNotebook("<!-- BEGIN SOLUTION --> inside another solution block")
                k += 1
            if k == len(lines):
                raise MalformedNotebook("<!-- BEGIN SOLUTION --> without <!-- END SOLUTION -->")
            removed += 1
        elif _MD_END.match(line):
            raise MalformedNotebook("<!-- END SOLUTION --> without <!-- BEGIN SOLUTION -->")
        else:
            out.append(line)
        k += 1
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip("\n")
    return text, removed


def _directive_names(source: str) -> list[str]:
    return [m.group("name") for line in source.splitlines() if (m := _FENCE_OPEN.match(line))]


def student_notebook(notebook: nbformat.NotebookNode) -> tuple[nbformat.NotebookNode, int]:
    """The student version of ``notebook`` (a deep copy) and the number of solutions removed.

    See the module docstring for the markup. Outputs and execution counts are
    cleared; book-only display tags (``hide-input`` and the like) are dropped
    from the cells that held a solution, so the stub is visible.
    """
    student = copy.deepcopy(notebook)
    cells = []
    removed = 0
    in_gated = False
    for cell in student.cells:
        tags = list(cell.get("metadata", {}).get("tags", []))
        names = _directive_names(cell.source) if cell.cell_type == "markdown" else []
        if in_gated:  # inside a gated solution: drop every cell, the block counts once
            in_gated = "solution-end" not in names
            continue
        if "solution-start" in names:
            if "solution-end" not in names:
                in_gated = True
            removed += 1
            continue
        if cell.cell_type == "markdown":
            if "solution" in tags:
                removed += 1
                continue
            cell.source, count = strip_markdown_solutions(cell.source)
            removed += count
            if not cell.source.strip() and count:
                continue
        elif cell.cell_type == "code":
            if "solution" in tags:
                cell.source, count = STUB, 1
            else:
                cell.source, count = strip_code_solutions(cell.source)
            removed += count
            if count:
                cell.metadata["tags"] = [t for t in tags if t not in (*_BOOK_ONLY_TAGS, "solution")]
                if not cell.metadata["tags"]:
                    del cell.metadata["tags"]
            cell.outputs = []
            cell.execution_count = None
        cells.append(cell)
    if in_gated:
        raise MalformedNotebook("a {solution-start} block has no {solution-end}")
    student.cells = cells
    return student, removed


# --------------------------------------------------------------------------- finding checks


def _check_calls(source: str) -> list[str]:
    """Names of the :data:`~xorlib.checks.CHECKS` functions called at the top level of a code cell.

    Only a statement that is itself a call, such as ``check_one_step(my_step)`` or
    ``checks.check_one_step(my_step)``, counts: a check called inside a
    ``try`` block or a function (a demonstration of a failure) is not graded.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:  # IPython magics or a student's typo: fall back to a pattern
        pattern = r"^(?:[A-Za-z_][\w.]*\.)?(" + "|".join(CHECKS) + r")\s*\("
        return re.findall(pattern, source, re.MULTILINE)
    names = []
    for statement in tree.body:
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            func = statement.value.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name in CHECKS:
                names.append(name)
    return names


@dataclass(frozen=True)
class CheckCell:
    """A code cell that calls a check: where it is, which question it belongs to, what it is worth."""

    index: int
    question: str
    check: str
    points: int


def _question_titles(cell: nbformat.NotebookNode) -> list[str]:
    titles = []
    for line in cell.source.splitlines():
        if (m := _FENCE_OPEN.match(line)) and m.group("name") in ("exercise", "exercise-start"):
            titles.append(m.group("title").strip() or "exercise")
        elif m := _HEADING.match(line):
            titles.append(m.group("title").strip())
    return titles


def find_check_cells(notebook: nbformat.NotebookNode) -> list[CheckCell]:
    """Every check cell of ``notebook``, in order.

    Raises
    ------
    MalformedNotebook
        If a cell calls more than one check (its points could not be told apart).
    """
    found = []
    question = "(before the first heading)"
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "markdown":
            titles = _question_titles(cell)
            question = titles[-1] if titles else question
            continue
        if cell.cell_type != "code":
            continue
        calls = _check_calls(cell.source)
        if len(calls) > 1:
            raise MalformedNotebook(f"cell {index} calls {len(calls)} checks ({', '.join(calls)}); use one per cell")
        if calls:
            points = int(m.group("points")) if (m := _POINTS.search(cell.source)) else 1
            found.append(CheckCell(index=index, question=question, check=calls[0], points=points))
    return found


@dataclass(frozen=True)
class Exercise:
    """One ``{exercise}`` directive of a notebook, with the checks that follow it."""

    title: str
    label: str
    checks: tuple[str, ...]
    points: int


def list_exercises(notebook: nbformat.NotebookNode) -> list[Exercise]:
    """The ``{exercise}`` directives of ``notebook`` in order, each with the check cells up to the next one.

    An exercise without a check cell is a pen-and-paper exercise (``checks == ()``).
    """
    exercises: list[list] = []
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            lines = cell.source.splitlines()
            for k, line in enumerate(lines):
                if (m := _FENCE_OPEN.match(line)) and m.group("name") in ("exercise", "exercise-start"):
                    label = next(
                        (o.split(":", 2)[2].strip() for o in lines[k + 1 :] if o.strip().startswith(":label:")), ""
                    )
                    exercises.append([m.group("title").strip() or "exercise", label, [], 0])
        elif cell.cell_type == "code" and exercises:
            calls = _check_calls(cell.source)
            if calls:
                points = int(m.group("points")) if (m := _POINTS.search(cell.source)) else 1
                exercises[-1][2].extend(calls)
                exercises[-1][3] += points * len(calls)
    return [Exercise(title, label, tuple(checks), points) for title, label, checks, points in exercises]


def write_student_version(source: str | Path, out_dir: str | Path) -> tuple[list[Path], int, int]:
    """Write ``out_dir/<stem>.ipynb`` and ``out_dir/<stem>.md`` for one source notebook.

    Returns the written paths, the number of solutions removed and the number
    of check cells kept. A source with neither solutions nor checks is skipped
    (no files, ``([], 0, 0)``).
    """
    import jupytext

    source = Path(source)
    notebook = read_notebook(source)
    student, removed = student_notebook(notebook)
    checks = find_check_cells(student)
    if not removed and not checks:
        return [], 0, 0
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    ipynb, markdown = out_dir / f"{source.stem}.ipynb", out_dir / f"{source.stem}.md"
    nbformat.write(student, ipynb)
    jupytext.write(student, markdown, fmt="md:myst")
    return [ipynb, markdown], removed, len(checks)


# --------------------------------------------------------------------------- grading


@dataclass
class CheckResult:
    """The outcome of one check cell."""

    question: str
    check: str
    points: int
    earned: int
    message: str = ""


@dataclass
class GradeReport:
    """Scores of a graded notebook: one :class:`CheckResult` per check cell."""

    notebook: str
    results: list[CheckResult] = field(default_factory=list)
    note: str = ""

    @property
    def earned(self) -> int:
        """Points earned."""
        return sum(r.earned for r in self.results)

    @property
    def total(self) -> int:
        """Points available."""
        return sum(r.points for r in self.results)

    def by_question(self) -> dict[str, tuple[int, int]]:
        """``{question: (earned, available)}`` in notebook order."""
        table: dict[str, tuple[int, int]] = {}
        for r in self.results:
            earned, total = table.get(r.question, (0, 0))
            table[r.question] = (earned + r.earned, total + r.points)
        return table

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready summary."""
        return {
            "notebook": self.notebook,
            "earned": self.earned,
            "total": self.total,
            "questions": {q: {"earned": e, "total": t} for q, (e, t) in self.by_question().items()},
            "checks": [asdict(r) for r in self.results],
            "note": self.note,
        }

    def __str__(self) -> str:
        width = max([len(q) for q in self.by_question()] + [8])
        lines = [f"Grading {self.notebook}"]
        for question, (earned, total) in self.by_question().items():
            lines.append(f"  {question:<{width}}  {earned}/{total}")
            for r in self.results:
                if r.question == question and r.message:
                    lines.append(f"    {r.check}: " + r.message.replace("\n", "\n      "))
        lines.append(f"  {'Total':<{width}}  {self.earned}/{self.total}")
        if self.note:
            lines.append(f"  Note: {self.note}")
        return "\n".join(lines)


def _error_summary(cell: nbformat.NotebookNode, check: str) -> str | None:
    """A cell's first error, or ``None``: a check's whole message, else the error's first line."""
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            lines = (output.get("evalue") or "").strip().splitlines()
            if output.get("ename") == "CheckFailure":  # the whole message: it carries the diagnosis
                return "\n".join(lines).removeprefix(f"{check}: ")
            return f"{output.get('ename', 'Error')}: {lines[0] if lines else ''}".strip()
    return None


def grade_notebook(
    path: str | Path, *, timeout: int = 60, kernel_name: str = "python3", startup_timeout: int = 120
) -> GradeReport:
    """Execute a submitted notebook and score its check cells.

    Parameters
    ----------
    path
        The submission, ``.ipynb`` or MyST ``.md``.
    timeout
        Seconds each cell may run; a cell past it is interrupted and counts as an error.
    kernel_name
        The Jupyter kernel that runs the submission.
    startup_timeout
        Seconds to wait for the kernel to start.

    Raises
    ------
    MalformedNotebook
        If the notebook cannot be read or has no check cell.
    """
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    timeout = check_int("timeout", timeout, minimum=1)
    path = Path(path)
    notebook = read_notebook(path)
    check_cells = find_check_cells(notebook)
    if not check_cells:
        raise MalformedNotebook(f"{path}: no check cell (a code cell calling one of {', '.join(CHECKS)})")
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    client = NotebookClient(
        notebook,
        timeout=timeout,
        startup_timeout=startup_timeout,
        kernel_name=kernel_name,
        allow_errors=True,
        interrupt_on_timeout=True,
        resources={"metadata": {"path": str(path.resolve().parent)}},
    )
    note = ""
    try:
        # The kernel process's own stdout/stderr (start-up warnings) are dropped; cell output comes over ZMQ.
        client.execute(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except DeadKernelError as err:
        note = f"the kernel died ({err}); the cells after it were not run"
    report = GradeReport(notebook=str(path), note=note)
    for item in check_cells:
        cell = notebook.cells[item.index]
        error = _error_summary(cell, item.check)
        if cell.get("execution_count") is None:
            message = "not run"
        elif error is not None:
            message = error
        else:
            message = ""
        earned = 0 if message else item.points
        report.results.append(CheckResult(item.question, item.check, item.points, earned, message))
    return report


# --------------------------------------------------------------------------- command line


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m xorlib.coursework", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    student = commands.add_parser("student", help="write student versions (solutions stripped, checks kept)")
    student.add_argument("sources", nargs="+", type=Path, help="assignment sources (.md or .ipynb)")
    student.add_argument("--out", type=Path, default=Path("student"), help="output folder (default: student)")
    grade = commands.add_parser("grade", help="execute a submitted notebook and print its score")
    grade.add_argument("notebook", type=Path)
    grade.add_argument("--timeout", type=int, default=60, help="seconds per cell (default 60)")
    grade.add_argument("--kernel", default="python3", help="Jupyter kernel name (default python3)")
    grade.add_argument("--json", type=Path, default=None, help="also write the score as JSON to this file")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m xorlib.coursework``; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "student":
            for source in args.sources:
                written, removed, checks = write_student_version(source, args.out)
                if not written:
                    print(f"{source}: skipped (no exercises)")
                else:
                    print(
                        f"{source} -> {', '.join(map(str, written))}: {removed} solution(s) removed, {checks} check(s)"
                    )
            return 0
        report = grade_notebook(args.notebook, timeout=args.timeout, kernel_name=args.kernel)
    except MalformedNotebook as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(report)
    if args.json is not None:
        args.json.write_text(json.dumps(report.as_dict(), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
