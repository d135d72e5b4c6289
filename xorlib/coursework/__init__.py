"""Coursework: graded exercises in every chapter, and a grader students cannot fool.

The question bank (:mod:`~xorlib.coursework.bank`, one module per chapter)
is the instructor's source: questions, points, solutions, check code, public
and hidden test cases, references and known mistakes. From it:

* ``sync`` writes each chapter's exercise section (:mod:`~xorlib.coursework.sync`);
* ``student`` writes the student notebooks (:mod:`~xorlib.coursework.student`);
* :func:`check` gives feedback while working, on the public cases;
* ``grade`` and ``grade-all`` run the answer cells in a sandbox, compare the
  outputs with references computed in the grader, and write a CSV gradebook and
  Gradescope results (:mod:`~xorlib.coursework.grading`, :mod:`~xorlib.coursework.gradebook`).

Command line: ``python -m xorlib.coursework {sync,student,grade,grade-all,list} --help``.
This is the tooling layer: it imports the rest of xorlib, and nothing imports it.
"""

from __future__ import annotations

from .feedback import CheckFailure, check
from .gradebook import ClassReport as ClassReport
from .gradebook import grade_all, read_marks
from .grading import GradeReport as GradeReport
from .grading import grade_notebook
from .render import question_table
from .sandbox import Limits as Limits
from .student import write_student_versions
from .sync import sync_chapter as sync_chapter

__all__ = [
    "CheckFailure",
    "check",
    "grade_all",
    "grade_notebook",
    "question_table",
    "read_marks",
    "write_student_versions",
]
