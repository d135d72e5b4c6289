"""Coursework: graded exercises in every chapter, and a grader students cannot steer.

The question bank (:mod:`~xorlib.coursework.bank`, one module per chapter) is the instructor's source: questions,
points, solutions, public and hidden test cases, references and known mistakes. What a teacher calls:

* :func:`student_notebooks`: the student notebooks (no solutions, rubrics or hidden tests);
* :func:`check`: the students' feedback while working, on the public cases;
* :func:`grade_notebook` and :func:`grade_all`: grading in a sandbox (bubblewrap, or the container itself),
  feedback pages, the gradebook, Gradescope results and the similarity report;
* :func:`autograder_zip`: the Gradescope autograder;
* :func:`question_table`: the bank at a glance.

Command line: ``python -m xorlib.coursework {sync,student,grade,grade-all,autograder,gradescope} --help``.
This is the tooling floor: it imports the rest of xorlib, and nothing imports it.
"""

from __future__ import annotations

import os
from pathlib import Path

from .autograder import write_zip
from .feedback import CheckFailure, check
from .gradebook import ClassReport, Config, grade_class, load_reports, read_marks, read_roster
from .grading import GradeReport, grade_path, grading_settings
from .render import question_table, write_student_notebooks

__all__ = ["CheckFailure", "autograder_zip", "check", "grade_all", "grade_notebook", "question_table",
           "student_notebooks"]  # fmt: skip


def _path(name: str, value: object, *, exists: bool = True, none: bool = False) -> Path | None:
    if value is None and none:
        return None
    if not isinstance(value, (str, os.PathLike)) or not str(value):
        allowed = "a path (a str or Path)" + " or None" * none
        raise TypeError(f"{name} must be {allowed}, got {type(value).__name__}")
    if exists and not Path(value).exists():
        raise ValueError(f"{name}: no such file or folder: {value}")
    return Path(value)


def grade_notebook(path, *, seed=None, practice=False, student=None, config=None, limits=None, sandbox="auto",
                   trusted=False) -> GradeReport:  # fmt: skip
    """Grade one submitted notebook (``.ipynb`` or MyST ``.md``) against the bank, in a sandbox.

    Parameters
    ----------
    path
        The submission (a symbolic link is refused). Never raises for a bad one: its report has ``error`` set.
    seed, practice
        The teacher's private seed of the hidden cases (an int), required unless ``practice`` allows the public
        seed 0 (formative work: anyone can compute its hidden cases from the public bank).
    student, config, limits
        Name in the report (default: the file's stem); a teacher's ``.toml``/``.json`` file (points per question,
        weights per chapter); :class:`~xorlib.coursework.sandbox.Limits` (time per question, memory, ...).
    sandbox, trusted
        ``"auto"`` (bubblewrap, else the container tier, else refuse), ``"bwrap"``, ``"container"``, or
        ``"unsandboxed"``; ``trusted``: the answers are your own (a demonstration), run unsandboxed where no tier
        exists.
    """
    path = _path("path", path, exists=False)
    if student is not None and not isinstance(student, str):
        raise TypeError(f"student must be a name (a str) or None, got {type(student).__name__}")
    config = Config.read(_path("config", config, none=True))
    grading = grading_settings(seed, practice, limits, sandbox, trusted, config.points, [path.parent])
    return grade_path(path, student or path.stem, grading)


def grade_all(folder, *, seed=None, practice=False, roster=None, marks=None, config=None, only=None, previous=None,
              workers=2, limits=None, sandbox="auto", trusted=False) -> ClassReport:  # fmt: skip
    """Grade every submission in ``folder``, ``workers`` at a time; merge the written marks; flag similar answers.

    Parameters
    ----------
    folder
        The submissions: ``.ipynb`` and ``.md`` files, at any depth (symbolic links refused).
    roster, marks
        CSV ``id,name,email`` (a file names its student's id or email); CSV of the teacher's marks for written
        questions (a ``student`` column, one per question id).
    only, previous
        Regrade one student; the others' reports come from ``previous`` (a folder :meth:`ClassReport.write` wrote).
    workers
        Sandboxes at once (1 to 64; 2 on a 2-core machine).
    seed, practice, config, limits, sandbox, trusted
        As for :func:`grade_notebook`.
    """
    folder = _path("folder", folder)
    if not folder.is_dir():
        raise ValueError(f"folder must be a folder of submissions, got the file {folder}")
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 64:
        raise ValueError(f"workers must be an int in [1, 64], got {workers!r}")
    if only is not None and not isinstance(only, str):
        raise TypeError(f"only must be a student's id (a str) or None, got {type(only).__name__}")
    roster_path, marks_path = _path("roster", roster, none=True), _path("marks", marks, none=True)
    config_path, previous = _path("config", config, none=True), _path("previous", previous, exists=False, none=True)
    config = Config.read(config_path)
    private = [folder, previous, roster_path, marks_path, config_path]
    grading = grading_settings(seed, practice, limits, sandbox, trusted, config.points, private)
    people = read_roster(roster_path) if roster_path else None
    written = read_marks(marks_path, config) if marks_path else {}
    old = load_reports(previous) if previous is not None and only is not None else ()
    return grade_class(folder, grading, roster=people, marks=written, config=config, only=only, workers=workers,
                       previous=old)  # fmt: skip


def student_notebooks(sources, out="student") -> list[str]:
    """Write the student notebook of each source into ``out``, with a README; return one line per source.

    A source is a chapter file (``chapters/02_tied_one_step.md``: the chapter with its exercises, every solution
    removed) or a bank chapter id (``"ch02"``: the exercises alone, which needs no copy of the book).
    """
    if isinstance(sources, (str, os.PathLike)) or not all(isinstance(s, (str, os.PathLike)) for s in sources):
        raise TypeError("sources must be a list of chapter files or bank chapter ids such as 'ch02'")
    return write_student_notebooks(list(sources), _path("out", out, exists=False))


def autograder_zip(chapter, out="autograder.zip", *, seed=None, practice=False, config=None) -> Path:
    """Write the Gradescope autograder of ``chapter`` (``"ch02"``, ``"02"`` or ``2``) into ``out``.

    Without ``seed``, a private one is drawn at random and stored in the zip (its ``config.json``); the zip
    itself is then the secret. ``practice=True`` uses the public seed 0.
    """
    if not isinstance(practice, bool):
        raise TypeError(f"practice must be True or False, got {type(practice).__name__}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 < seed < 2**63):
        raise ValueError(f"seed must be an int in [1, 2**63) or None (drawn at random), got {seed!r}")
    points = Config.read(_path("config", config, none=True)).points
    return write_zip(chapter, _path("out", out, exists=False), seed, practice, points)
