"""Grade one submitted notebook from the instructor's source.

What a submission contributes is its answer cells, matched by question id, and
nothing else. The questions, points, check code and test cases come from the
bank; the answer cells run in the sandbox (:mod:`~xorlib.coursework.sandbox`)
with the grading build of xorlib, and only their outputs come back, as
numbers. The references are computed here, in the grader's process, and the
comparison and the diagnosis are the ones :func:`~xorlib.coursework.check`
shows students (:mod:`~xorlib.coursework._compare`). A question earns its
points when its answer passes every public and hidden case and its check cell
is intact and in place; anything else scores 0, with the reason.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._checks import check_choice, check_float, check_instance, check_int, check_path, check_seed, check_sequence
from . import _wire
from ._compare import ReturnError, as_outputs, judge
from ._html import table
from .bank import SETUP, chapter_questions, get_question
from .feedback import expected_outputs
from .notebooks import Located, NotebookError, locate, notebook_chapter, read_notebook
from .questions import AutoQuestion, Case
from .sandbox import DEFAULT_LIMITS, ISOLATIONS, Job, Limits, SandboxResult, run_jobs

__all__ = ["GradeReport", "grade_notebook"]  # the rest is internal to xorlib.coursework

_NOT_IMPLEMENTED = "not implemented yet (the answer still raises NotImplementedError)"
_MAX_CELL = 10**6  # characters of an answer cell


@dataclass(frozen=True)
class QuestionResult:
    """The grade of one question: points earned of ``points``, a status word and the feedback."""

    id: str
    title: str
    points: int
    score: int
    status: str
    feedback: str
    passed_cases: int = 0
    total_cases: int = 0


@dataclass(frozen=True, repr=False)
class GradeReport:
    """The grade of one notebook: one :class:`QuestionResult` per auto-graded question of its chapter.

    ``error`` is set when the notebook could not be graded at all (unreadable,
    of no known chapter, or the grading environment failed); ``sandbox`` says
    how the answers were isolated.
    """

    notebook: str
    student: str
    chapter: str | None
    questions: tuple[QuestionResult, ...]
    sandbox: str = ""
    seconds: float = 0.0
    error: str | None = None

    def __post_init__(self) -> None:
        for name in ("notebook", "student", "sandbox"):
            check_instance(name, getattr(self, name), str, "a str")
        for name in ("chapter", "error"):
            check_instance(name, getattr(self, name), (str, type(None)), "a str or None")
        if not isinstance(self.questions, tuple) or not all(isinstance(q, QuestionResult) for q in self.questions):
            raise TypeError(f"questions must be a tuple of QuestionResult, got {self.questions!r:.80}")
        check_float("seconds", self.seconds, minimum=0.0)

    @property
    def score(self) -> int:
        """Points earned."""
        return sum(q.score for q in self.questions)

    @property
    def max_score(self) -> int:
        """Points available (from the bank, never from the submission)."""
        return sum(q.points for q in self.questions)

    def __repr__(self) -> str:
        return f"<GradeReport {self.student}: {self.score}/{self.max_score} ({Path(self.notebook).name})>"

    def __str__(self) -> str:
        lines = [f"{self.student}: {Path(self.notebook).name} ({self.chapter or 'unknown chapter'})"]
        if self.error:
            lines.append(f"  could not be graded: {self.error}")
        for q in self.questions:
            lines.append(f"  {q.id}  {q.score}/{q.points}  {q.status}")
            if q.status != "passed":
                lines.extend("      " + line for line in q.feedback.splitlines())
        lines.append(f"  Total {self.score}/{self.max_score}   [{self.sandbox}; {self.seconds:.1f} s]")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        rows = [(q.id, q.title, f"{q.score}/{q.points}", q.status) for q in self.questions]
        return table(("question", "title", "score", "status"), rows)._repr_html_()

    def gradescope(self) -> dict:
        """This report as a Gradescope ``results.json`` (score, and one test per question)."""
        tests = [
            {"name": f"{q.id} {q.title}", "score": q.score, "max_score": q.points, "output": q.feedback,
             "visibility": "visible", "status": "passed" if q.score == q.points else "failed"}
            for q in self.questions
        ]  # fmt: skip
        return {
            "score": self.score,
            "execution_time": round(self.seconds, 2),
            "output": self.error or f"{self.score}/{self.max_score} points ({self.sandbox})",
            "visibility": "visible",
            "stdout_visibility": "hidden",
            "tests": tests,
        }


@functools.lru_cache(maxsize=256)
def _cases(question_id: str, hidden_seed: int) -> tuple[tuple[Case, tuple[np.ndarray, ...], bool], ...]:
    """The cases of a question with their expected outputs (computed once per process) and whether each is public."""
    question = get_question(question_id)
    public = tuple((c, expected_outputs(question, c), True) for c in question.public())
    hidden = tuple((c, expected_outputs(question, c), False) for c in question.hidden(hidden_seed))
    return public + hidden


def _job(question: AutoQuestion, code: str, hidden_seed: int) -> Job:
    cases = tuple(_wire.encode_input(tuple(c.args)) for c, _, _ in _cases(question.id, hidden_seed))
    return Job(question.id, question.function, code, cases)


def _got(event: dict, question: AutoQuestion) -> tuple | str:
    """One case's outputs from its event, or what went wrong."""
    if event.get("e") == "raise":
        return _NOT_IMPLEMENTED if event.get("stub") else f"{question.function} raised {event.get('error')}"
    try:
        value = _wire.decode_output(event.get("value"))
    except ValueError:
        return "the answer's output could not be read"
    if isinstance(value, _wire.Unsupported) or (
        isinstance(value, tuple) and any(isinstance(v, _wire.Unsupported) for v in value)
    ):
        return f"{question.function} returned something that is not numbers: {value}"
    try:
        return as_outputs(value, question.outputs)
    except ReturnError as err:
        return str(err)


def _judge_question(
    question: AutoQuestion, events: list[dict], stopped: str | None, hidden_seed: int
) -> tuple[str, str, int, int]:
    """``(status, feedback, passed, total)`` of one question from its events."""
    cases = _cases(question.id, hidden_seed)
    cell_error = next((e.get("error") for e in events if e.get("e") == "cell-error"), None)
    prefix = f"Your answer cell raised {cell_error}.\n" if cell_error else ""
    if stopped:
        return "stopped", f"{prefix}The sandbox stopped this question: {stopped}.", 0, len(cases)
    if any(e.get("e") == "missing" for e in events):
        return "error", f"{prefix}The answer cell does not define a function {question.function}.", 0, len(cases)
    outputs = {e.get("k"): e for e in events if e.get("e") in ("out", "raise")}
    passed, first_failure = 0, None
    for k, (case, expected, public) in enumerate(cases):
        got = _got(outputs[k], question) if k in outputs else "no result came back for this case"
        if got == _NOT_IMPLEMENTED:
            return "not implemented", f"{question.function} is {_NOT_IMPLEMENTED}.", 0, len(cases)
        verdict = judge(question, case, got, expected)
        passed += verdict.passed
        if not verdict.passed and first_failure is None:
            where = "public" if public else "hidden"
            first_failure = verdict.message if public else f"hidden case ({case.description}): {verdict.summary}"
            first_failure = f"Failed a {where} case.\n{first_failure}"
    if first_failure is None:
        return "passed", f"{prefix}Passed all {len(cases)} test cases.", passed, len(cases)
    return "failed", f"{prefix}{first_failure}\nPassed {passed} of {len(cases)} test cases.", passed, len(cases)


def _result(question: AutoQuestion, located: Located, result: SandboxResult | None, hidden_seed: int) -> QuestionResult:
    def make(status: str, feedback: str, passed: int = 0, total: int = 0, score: int = 0) -> QuestionResult:
        return QuestionResult(question.id, question.title, question.points, score, status, feedback, passed, total)

    if len(located.answer_code) > _MAX_CELL:
        return make("error", f"The answer cell has {len(located.answer_code)} characters, more than {_MAX_CELL}.")
    if located.answer_index is None:
        return make(
            "no answer", f"No answer cell (a code cell tagged answer-{question.id}, defining {question.function})."
        )
    events = [e for e in result.events if e.get("q") == question.id] if result else []
    status, feedback, passed, total = _judge_question(question, events, result.stopped.get(question.id), hidden_seed)
    if located.note:
        feedback = f"Note: {located.note}.\n{feedback}"
    if located.check_problem:  # e.g. "its check cell was altered (it must be ...)" gives "check cell was altered"
        status = located.check_problem.split(" (")[0].removeprefix("its ")
        why = f"This question scores 0: {located.check_problem}. Restore it from the student version."
        return make(status, f"{why}\n{feedback}", passed, total)
    return make(status, feedback, passed, total, question.points if status == "passed" else 0)


def grade_notebook(
    path: str | Path,
    *,
    student: str | None = None,
    hidden_seed: int = 0,
    limits: Limits = DEFAULT_LIMITS,
    isolation: str = "auto",
    slot: int = 0,
    hide: Sequence[str] = (),
) -> GradeReport:
    """Grade a submitted notebook (``.ipynb`` or MyST ``.md``) against the bank.

    Parameters
    ----------
    path
        The submission.
    student
        Name in the report (default: the file's stem).
    hidden_seed
        The teacher's seed for the hidden cases (keep it private for summative work).
    limits, isolation, slot, hide
        The sandbox's settings (:func:`xorlib.coursework.sandbox.run_jobs`).

    Never raises for a bad submission: an unreadable notebook is reported with
    ``error`` set and no points.
    """
    path = check_path("path", path)
    if student is not None and not isinstance(student, str):
        raise TypeError(f"student must be a name (a str) or None, got {type(student).__name__}")
    hidden_seed = check_seed("hidden_seed", hidden_seed)
    if not isinstance(limits, Limits):
        raise TypeError(f"limits must be a Limits (xorlib.coursework.sandbox.Limits), got {type(limits).__name__}")
    isolation, slot = check_choice("isolation", isolation, ISOLATIONS), check_int("slot", slot, minimum=0, maximum=63)
    hide = tuple(str(check_path(f"hide[{k}]", h)) for k, h in enumerate(check_sequence("hide", hide, nonempty=False)))
    start = time.monotonic()
    student = student or path.stem
    try:
        notebook = read_notebook(path)
    except NotebookError as err:
        return GradeReport(str(path), student, None, (), error=str(err))
    chapter = notebook_chapter(notebook, path)
    questions = chapter_questions(chapter, AutoQuestion)
    if not questions:
        return GradeReport(str(path), student, chapter, (), error=f"no auto-graded questions for chapter {chapter!r}")
    located = locate(notebook, questions)
    jobs = [
        _job(q, located[q.id].answer_code, hidden_seed)
        for q in questions
        if located[q.id].answer_index is not None and len(located[q.id].answer_code) <= _MAX_CELL
    ]
    result = None
    if jobs:
        result = run_jobs(jobs, SETUP, limits=limits, isolation=isolation, slot=slot, hide=(*hide, str(path.parent)))
    results = tuple(_result(q, located[q.id], result, hidden_seed) for q in questions)
    fatal = result.fatal if result else None
    if fatal:
        results = tuple(QuestionResult(q.id, q.title, q.points, 0, "not graded", fatal) for q in questions)
    sandbox = (
        "nothing to run"
        if result is None
        else f"{result.tier}, " + (f"uid {result.uid}" if result.uid is not None else "same user")
    )
    return GradeReport(
        str(path), student, chapter, results, sandbox=sandbox, seconds=time.monotonic() - start, error=fatal
    )
