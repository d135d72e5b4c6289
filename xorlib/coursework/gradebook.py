"""A class at once: grade a folder of submissions in parallel, merge the teacher's written marks, export.

A submission is ``DIR/<student>.ipynb`` or ``DIR/<student>/<anything>.ipynb``
(one notebook per chapter). :func:`grade_all` grades them on ``workers``
sandboxes at a time and :meth:`ClassReport.write` writes, into ``OUT``:

``gradebook.csv``
    one row per student, one column per question (auto-graded, then
    written), then ``auto``, ``written``, ``total``, ``max`` and ``notes``;
``results/<student>.json``
    the Gradescope autograder format (``score``, and ``tests`` with ``name``,
    ``score``, ``max_score``, ``output``, ``visibility``), and ``results.json``,
    all of them in one list;
``written_marks_template.csv``
    a sheet for the written questions: one row per student, one empty column
    per written question. Fill it in and pass it back with ``--marks``.
"""

from __future__ import annotations

import csv
import io
import json
import queue
import re
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .._checks import check_choice, check_float, check_int, check_path, check_seed, check_sequence
from ._html import Table, table
from .bank import CHAPTERS, chapter_questions, written_questions
from .grading import GradeReport, grade_notebook
from .questions import AutoQuestion, Question, WrittenQuestion
from .sandbox import DEFAULT_LIMITS, ISOLATIONS, Limits

__all__ = ["ClassReport", "grade_all", "read_marks"]  # the rest is internal to xorlib.coursework

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


class MarksError(ValueError):
    """The written-marks CSV names an unknown question, or a mark outside ``[0, points]``."""


def find_submissions(folder: str | Path) -> list[tuple[str, Path]]:
    """``(student, notebook)`` for every ``.ipynb`` under ``folder`` (checkpoints and hidden folders skipped)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"no such folder of submissions: {folder}")
    found = []
    for path in sorted(folder.rglob("*.ipynb")):
        relative = path.relative_to(folder)
        if any(part.startswith(".") for part in relative.parts):
            continue
        found.append((relative.parts[0] if len(relative.parts) > 1 else path.stem, path))
    return found


def read_marks(path: str | Path) -> dict[str, dict[str, float]]:
    """Read the teacher's marks for written questions: ``{student: {question id: marks}}``.

    The CSV has a ``student`` column and one column per written question id
    (``ch02-w1``); empty cells are "not marked yet".

    Raises
    ------
    MarksError
        For an unknown or auto-graded question id, a repeated student, or a
        mark that is not a number in ``[0, points]`` (naming the row and column).
    """
    path = check_path("path", path)
    allowed = {q.id: q for q in written_questions()}
    with open(path, newline="", encoding="utf-8-sig") as handle:  # -sig: spreadsheets often add a byte-order mark
        reader = csv.DictReader(handle)
        columns = [c for c in (reader.fieldnames or []) if c and c != "student"]
        if "student" not in (reader.fieldnames or []):
            raise MarksError(f"{path}: the first row must name a 'student' column")
        unknown = [c for c in columns if c not in allowed]
        if unknown:
            raise MarksError(f"{path}: unknown written question(s) {', '.join(unknown)}; known: {', '.join(allowed)}")
        marks: dict[str, dict[str, float]] = {}
        for line, row in enumerate(reader, start=2):
            student = (row.get("student") or "").strip()
            if not student:
                continue
            if student in marks:
                raise MarksError(f"{path}, line {line}: student {student!r} appears twice")
            marks[student] = {}
            for column in columns:
                text = (row.get(column) or "").strip()
                if not text:
                    continue
                try:
                    value = float(text)
                except ValueError:
                    raise MarksError(f"{path}, line {line}, {column}: {text!r} is not a number") from None
                if not 0 <= value <= allowed[column].points:
                    raise MarksError(
                        f"{path}, line {line}, {column}: {value:g} is outside [0, {allowed[column].points}]"
                    )
                marks[student][column] = value
    return marks


def _number(value: float) -> str:
    return f"{value:g}"


@dataclass(frozen=True, repr=False)
class ClassReport:
    """The grades of a class: every notebook's :class:`~xorlib.coursework.grading.GradeReport`, and the written marks."""

    reports: tuple[GradeReport, ...]
    marks: dict[str, dict[str, float]] = field(default_factory=dict)
    seconds: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.reports, tuple) or not all(isinstance(r, GradeReport) for r in self.reports):
            raise TypeError(f"reports must be a tuple of GradeReport, got {self.reports!r:.80}")
        if not isinstance(self.marks, dict) or not all(isinstance(m, dict) for m in self.marks.values()):
            raise TypeError(
                f"marks must be a dict {{student: {{question id: marks}}}} (see read_marks), got {self.marks!r:.80}"
            )
        check_float("seconds", self.seconds, minimum=0.0)

    def students(self) -> list[str]:
        """Every student with a submission or a mark, sorted."""
        return sorted({r.student for r in self.reports} | set(self.marks))

    def chapters(self) -> list[str]:
        """The chapters of the submissions and of the marks, in book order."""
        seen = {r.chapter for r in self.reports} | {q.split("-")[0] for m in self.marks.values() for q in m}
        return [c for c in CHAPTERS if c in seen]

    def columns(self) -> list[Question]:
        """The gradebook's questions: auto-graded ones, then written ones, of the chapters present."""
        chapters = self.chapters()
        auto = [q for c in chapters for q in chapter_questions(c, AutoQuestion)]
        return auto + [q for c in chapters for q in chapter_questions(c, WrittenQuestion)]

    def row(self, student: str) -> dict[str, object]:
        """One student's gradebook row: a score per question (``""`` when not graded yet), totals and notes."""
        reports = [r for r in self.reports if r.student == student]
        scores = {q.id: q.score for r in reports for q in r.questions}
        written = self.marks.get(student, {})
        row: dict[str, object] = {"student": student}
        auto_total, written_total, maximum = 0, 0.0, 0
        for q in self.columns():
            if isinstance(q, AutoQuestion):
                row[q.id] = scores.get(q.id, "")  # blank: no notebook of this chapter from this student
                auto_total += scores.get(q.id, 0)
            else:
                row[q.id] = _number(written[q.id]) if q.id in written else ""
                written_total += written.get(q.id, 0.0)
            maximum += q.points
        notes = [f"{Path(r.notebook).name}: {r.error}" for r in reports if r.error]
        notes += [f"{q.id}: {q.status}" for r in reports for q in r.questions if q.status.startswith("check cell")]
        notes += [f"{q.id}: {q.status}" for r in reports for q in r.questions if q.status == "stopped"]
        chapters = [r.chapter for r in reports if r.chapter]
        notes += [f"{c}: {chapters.count(c)} notebooks, the last one counts" for c in sorted(set(chapters))
                  if chapters.count(c) > 1]  # fmt: skip
        if not reports:
            notes.append("no submission")
        row.update(auto=auto_total, written=_number(written_total), total=_number(auto_total + written_total))
        row.update(max=maximum, notes="; ".join(notes))
        return row

    def csv(self) -> str:
        """The gradebook as CSV text."""
        out = io.StringIO()
        fields = ["student", *(q.id for q in self.columns()), "auto", "written", "total", "max", "notes"]
        writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        for student in self.students():
            writer.writerow(self.row(student))
        return out.getvalue()

    def gradescope(self, student: str) -> dict:
        """One student's Gradescope ``results.json``: every auto-graded question, and the written marks entered."""
        reports = [r for r in self.reports if r.student == student]
        tests = [t for r in reports for t in r.gradescope()["tests"]]
        for q in self.columns():
            if isinstance(q, WrittenQuestion) and q.id in self.marks.get(student, {}):
                mark = self.marks[student][q.id]
                tests.append({"name": f"{q.id} {q.title} (written)", "score": mark, "max_score": q.points,
                              "output": "Marked by your teacher against the rubric.", "visibility": "visible"})  # fmt: skip
        summary = [f"{Path(r.notebook).name}: {r.gradescope()['output']}" for r in reports] or ["no submission"]
        return {
            "score": sum(t["score"] for t in tests),
            "execution_time": round(sum(r.seconds for r in reports), 2),
            "output": "; ".join(summary),
            "visibility": "visible",
            "stdout_visibility": "hidden",
            "tests": tests,
            "extra_data": {"student": student, "notebooks": [Path(r.notebook).name for r in reports]},
        }

    def marks_template(self) -> str:
        """A CSV sheet for the written questions of the chapters present, one empty row per student."""
        written = [q for q in self.columns() if isinstance(q, WrittenQuestion)]
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["student", *(q.id for q in written)])
        for student in self.students():
            writer.writerow([student, *(_number(self.marks[student][q.id]) if q.id in self.marks.get(student, {})
                                        else "" for q in written)])  # fmt: skip
        return out.getvalue()

    def write(self, out: str | Path) -> list[Path]:
        """Write the gradebook, the Gradescope results and the marks template into ``out``; return the paths."""
        out = Path(out)
        (out / "results").mkdir(parents=True, exist_ok=True)
        written = [out / "gradebook.csv", out / "written_marks_template.csv", out / "results.json"]
        written[0].write_text(self.csv())
        written[1].write_text(self.marks_template())
        everyone = [self.gradescope(s) for s in self.students()]
        written[2].write_text(json.dumps(everyone, indent=1) + "\n")
        for student, result in zip(self.students(), everyone, strict=True):
            path = out / "results" / f"{_SAFE.sub('_', student)}.json"
            path.write_text(json.dumps(result, indent=1) + "\n")
            written.append(path)
        return written

    def __repr__(self) -> str:
        return f"<ClassReport: {len(self.reports)} notebook(s), {len(self.students())} student(s)>"

    def __str__(self) -> str:
        lines = [f"{len(self.reports)} notebook(s), {len(self.students())} student(s), graded in {self.seconds:.1f} s"]
        width = max([len(s) for s in self.students()] + [8])
        for student in self.students():
            row = self.row(student)
            lines.append(f"  {student:<{width}} {row['total']:>6} / {row['max']}  {row['notes']}".rstrip())
        return "\n".join(lines)

    def table(self) -> Table:
        """The gradebook as a table: a row per student, a column per question, the total and the notes."""
        fields = ["student", *(q.id for q in self.columns()), "total", "max", "notes"]
        return table(fields, [[self.row(s)[f] for f in fields] for s in self.students()])

    def _repr_html_(self) -> str:
        return self.table()._repr_html_()


def grade_all(
    folder: str | Path,
    *,
    marks: str | Path | None = None,
    workers: int = 2,
    hidden_seed: int = 0,
    limits: Limits = DEFAULT_LIMITS,
    isolation: str = "auto",
    hide: Sequence[str] = (),
) -> ClassReport:
    """Grade every submission in ``folder``, ``workers`` at a time, and merge the written marks.

    Parameters
    ----------
    folder
        The submissions (see :func:`find_submissions`).
    marks
        Optional CSV of written marks (:func:`read_marks`).
    workers
        Sandboxes run at once (2 on a 2-core machine).
    hidden_seed, limits, isolation
        As for :func:`xorlib.coursework.grading.grade_notebook`.
    hide
        Extra paths to hide from the sandboxes (the output folder).
    """
    folder = check_path("folder", folder)
    marks = None if marks is None else check_path("marks", marks)
    workers, hidden_seed = check_int("workers", workers, minimum=1, maximum=64), check_seed("hidden_seed", hidden_seed)
    if not isinstance(limits, Limits):
        raise TypeError(f"limits must be a Limits (xorlib.coursework.sandbox.Limits), got {type(limits).__name__}")
    isolation = check_choice("isolation", isolation, ISOLATIONS)
    hide = tuple(str(check_path(f"hide[{k}]", h)) for k, h in enumerate(check_sequence("hide", hide, nonempty=False)))
    start = time.monotonic()
    written = read_marks(marks) if marks is not None else {}
    submissions = find_submissions(folder)
    slots: queue.Queue[int] = queue.Queue()
    for slot in range(workers):
        slots.put(slot)

    def grade(item: tuple[str, Path]) -> GradeReport:
        slot = slots.get()
        try:
            return grade_notebook(item[1], student=item[0], hidden_seed=hidden_seed, limits=limits,
                                  isolation=isolation, slot=slot, hide=(str(folder), *hide))  # fmt: skip
        finally:
            slots.put(slot)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        reports = tuple(pool.map(grade, submissions))
    return ClassReport(reports, written, time.monotonic() - start)
