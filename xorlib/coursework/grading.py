"""Grade one submitted notebook from the instructor's source.

A submission contributes its answer cells, found by their tags (``answer-<id>``, or else by the function they define),
and nothing else: questions, points, check code
and test cases come from the bank. The answer cells run in a sandbox (:mod:`~xorlib.coursework.sandbox`), in
notebook order, then every public case, then every hidden case: a hidden case's inputs reach the runner only after
everything whose text can appear in the feedback (cell errors, public cases) has run, and a hidden case reports
only a fixed diagnosis, never the answer's words or numbers. The references are computed here, and the comparison
and diagnosis are the ones :func:`~xorlib.coursework.check` shows. A question earns its points when its answer
passes every public and hidden case and its check cell (``check-<id>``) is exactly the teacher's and sits after its
answer cell, before the next question's; anything else scores 0, with why.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import errno
import functools
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # imported where a notebook is read or written: nbformat and jupytext take about 1.5 s
    import nbformat

from . import _runner
from .bank import chapter_of, chapter_questions, get_question
from .bank._common import SETUP
from .feedback import ReturnError, as_outputs, autograd_used, expected_outputs, judge
from .questions import AutoQuestion, Case
from .sandbox import SANDBOXES, Limits, Session, Stopped, Tier, check_private, choose_tier, site_dirs

__all__ = []  # GradeReport is what grade_notebook returns; xorlib.coursework exports the functions

_MAX_CELL = 10**6  # characters of an answer cell
_BUILTIN_ERRORS = {n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)}


#: Metadata key of the student versions: which chapter, and which questions, a notebook holds.
METADATA_KEY = "xorlib_coursework"
_MAX_BYTES = 32 * 2**20  # of a notebook


class NotebookError(ValueError):
    """The file is not a notebook that can be read."""


def read_notebook(path: str | Path) -> nbformat.NotebookNode:
    """Read an ``.ipynb`` notebook or a jupytext MyST ``.md`` file, or raise :class:`NotebookError`: missing, a
    symbolic link (to another student's work, or outside the folder), over 32 MB, or not a valid notebook."""
    import jupytext
    import nbformat

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
        notebook = nbformat.reads(text, as_version=4) if path.suffix == ".ipynb" else jupytext.reads(text, "md:myst")
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
        upper = min(others, default=len(notebook.cells))
        located[q.id] = Located(index, source, _check_problem(code, q, index, upper), note)
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


@dataclass(frozen=True)
class QuestionResult:
    """One question: points earned of ``points``, a status word and the feedback."""

    id: str
    title: str
    points: int
    score: int
    status: str
    feedback: str


@dataclass(frozen=True, repr=False)
class GradeReport:
    """The grade of one notebook: one :class:`QuestionResult` per auto-graded question of its chapter.

    ``error`` is set when the notebook could not be graded (unreadable, of no known chapter, a link, or the
    sandbox failed: never the student's words); ``tier`` names how the answers were isolated; ``notes`` are for
    the teacher (which file was chosen, similarity flags).
    """

    notebook: str
    student: str
    chapter: str | None
    questions: tuple[QuestionResult, ...]
    tier: str = ""
    seconds: float = 0.0
    error: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def score(self) -> int:
        return sum(q.score for q in self.questions)

    @property
    def max_score(self) -> int:
        """Points available (from the bank or the teacher's config, never from the submission)."""
        return sum(q.points for q in self.questions)

    def __repr__(self) -> str:
        return f"<GradeReport {self.student}: {self.score}/{self.max_score} ({Path(self.notebook).name})>"

    def __str__(self) -> str:
        lines = [f"{self.student}: {Path(self.notebook).name} ({self.chapter or 'unknown chapter'})"]
        lines += [f"  not graded: {self.error}"] if self.error else []
        for q in self.questions:
            lines.append(f"  {q.id}  {q.score}/{q.points}  {q.status}")
            lines += ["      " + line for line in q.feedback.splitlines()] if q.status != "passed" else []
        lines.append(f"  Total {self.score}/{self.max_score}   [sandbox: {self.tier}; {self.seconds:.1f} s]")
        return "\n".join(lines)

    @classmethod
    def from_dict(cls, data: dict) -> GradeReport:
        """The inverse of :func:`dataclasses.asdict` (a report read back from JSON, also one saved before a
        question's result lost its ``passed`` and ``total`` counts)."""
        known = {f.name for f in dataclasses.fields(QuestionResult)}
        questions = tuple(QuestionResult(**{k: v for k, v in q.items() if k in known}) for q in data["questions"])
        return cls(**{**data, "questions": questions, "notes": tuple(data["notes"])})

    def gradescope(self) -> dict:
        """This report as Gradescope's ``results.json``: the score, and one test per question."""
        tests = [{"name": f"{q.id} {q.title}", "score": q.score, "max_score": q.points, "output": q.feedback,
                  "visibility": "visible", "status": "passed" if q.score == q.points else "failed"}
                 for q in self.questions]  # fmt: skip
        summary = f"not graded: {self.error}" if self.error else f"{self.score}/{self.max_score} points"
        return gradescope_result(tests, f"{summary} (sandbox: {self.tier})", self.seconds)


def gradescope_result(tests: list[dict], output: str, seconds: float = 0.0, **extra: object) -> dict:
    """Gradescope's ``results.json``: the tests' total score, visible to the student; stdout hidden."""
    return {"score": sum(t["score"] for t in tests), "execution_time": round(seconds, 2), "visibility": "visible",
            "output": output, "stdout_visibility": "hidden", "tests": tests, **extra}  # fmt: skip


@dataclass(frozen=True)
class Grading:
    """Settings resolved once for a notebook or a class: the hidden seed, the limits, the tier, points."""

    seed: int
    limits: Limits
    tier: Tier
    points: dict = field(default_factory=dict)

    def points_of(self, question: AutoQuestion) -> int:
        return self.points.get(question.id, question.points)


#: The seed of the hidden cases anyone can compute (the bank is public): for practice only.
PUBLIC_SEED = 0


def grading_settings(seed: object, practice: object, limits: object, sandbox: object, trusted: object, points: dict,
             private: list) -> Grading:  # fmt: skip
    """The settings of a grading run, checked once: the seed's rule, the limits, the tier (and its privacy)."""
    for name, value in (("practice", practice), ("trusted", trusted)):
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be True or False, got {type(value).__name__}")
    if seed is None and not practice:
        raise ValueError("seed is required for summative grading: pass your private seed (seed=..., SEED=... or "
                         f"--seed-file), or practice=True (--practice) to grade with the public seed {PUBLIC_SEED}")  # fmt: skip
    seed = PUBLIC_SEED if seed is None else seed
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise ValueError(f"seed must be an int in [0, 2**63), got {seed!r}")
    if seed == PUBLIC_SEED and not practice:
        raise ValueError(f"seed {PUBLIC_SEED} is public (anyone can compute its hidden cases): pass your private seed "
                         "for summative grading, or practice=True (--practice)")  # fmt: skip
    limits = Limits() if limits is None else limits
    if not isinstance(limits, Limits):
        raise TypeError(f"limits must be a sandbox Limits or None, got {type(limits).__name__}")
    if sandbox not in SANDBOXES:
        raise ValueError(f"sandbox must be one of {', '.join(SANDBOXES)}, got {sandbox!r}")
    tier = choose_tier(sandbox, trusted=trusted)
    package = Path(__file__).resolve().parents[1]
    secret = [package, *(Path(s) / "xorlib" for s in site_dirs()), *[p for p in private if p is not None]]
    check_private(tier, [str(p) for p in secret], seed if seed != PUBLIC_SEED else -1)
    return Grading(seed, limits, tier, dict(points))


@functools.lru_cache(maxsize=256)
def _cases(question_id: str, seed: int) -> tuple[tuple[Case, tuple[np.ndarray, ...], bool], ...]:
    """A question's cases, with the expected outputs (computed here, once per process) and whether each is public."""
    question = get_question(question_id)
    public = tuple((c, expected_outputs(question, c), True) for c in question.public())
    return public + tuple((c, expected_outputs(question, c), False) for c in question.hidden(seed))


@dataclass
class _Outcome:
    cell: dict | None = None
    replies: dict = field(default_factory=dict)
    stopped: str | None = None
    used: float = 0.0


def _run(plan: list[tuple[AutoQuestion, str]], grading: Grading, deadline: float) -> tuple[dict, str | None]:
    """Run the cells, then the public cases, then the hidden ones; restart past a question that stops its runner.

    Returns ``{question id: _Outcome}`` and why the notebook could not be graded (``None`` when it was).
    """
    outcomes = {q.id: _Outcome() for q, _ in plan}
    work = [(q, k, c) for public in (True, False) for q, _ in plan
            for k, c in enumerate(_cases(q.id, grading.seed)) if c[2] == public]  # fmt: skip
    session, current, hidden = None, None, False
    limits = grading.limits
    while True:
        try:
            if session is None:
                try:
                    session = Session(grading.tier, limits, SETUP)
                except OSError as err:  # e.g. no process could be forked: this notebook is not graded, not the class
                    raise Stopped(f"its process could not be started ({err})") from None
                if not session.started.get("ok"):
                    return outcomes, "the teacher's setup failed in the sandbox (before any answer ran)"
                for q, code in plan:
                    outcome, current, hidden = outcomes[q.id], q, False
                    if outcome.stopped is None:
                        start = time.monotonic()
                        request = {"op": "cell", "q": q.id, "code": code, "function": q.function}
                        try:
                            reply = session.ask(request, min(limits.cell_s - outcome.used, deadline - start))
                        except _runner.Malformed as err:
                            reply = {"defined": False, "error": {"type": "", "message": f"malformed reply ({err})"}}
                        if outcome.cell is None:
                            outcome.cell, outcome.used = reply, outcome.used + time.monotonic() - start
            for q, k, (case, _, public) in work:
                outcome, current, hidden = outcomes[q.id], q, not public
                if outcome.stopped or k in outcome.replies or (outcome.cell or {}).get("defined") is not True:
                    continue
                start = time.monotonic()
                request = {"op": "case", "q": q.id, "args": _runner.encode_input(tuple(case.args)),
                           "forbid_autograd": None if q.autograd else f"{q.id} asks for this without autograd"}  # fmt: skip
                try:
                    outcome.replies[k] = session.ask(request, min(limits.cell_s - outcome.used, deadline - start))
                except _runner.Malformed as err:
                    outcome.replies[k] = f"malformed result ({err})"
                outcome.used += time.monotonic() - start
            session.close()
            return outcomes, None
        except Stopped as stop:
            if session is None:
                return outcomes, f"the sandbox did not start: {stop}"
            session = None
            why = "the notebook's total time limit was reached" if time.monotonic() >= deadline else str(stop)
            if hidden and why.startswith("its process"):  # its exit status or signal is the answer's own number
                why = "its process ended during a hidden case"
            outcomes[current.id].stopped = why
            if time.monotonic() >= deadline:
                for outcome in outcomes.values():
                    outcome.stopped = outcome.stopped or why
                return outcomes, None


def _error_text(error: object, function: str, public: bool) -> str:
    if not isinstance(error, dict) or not isinstance(error.get("type"), str):
        return "malformed result"
    kind = error["type"] if error["type"] in _BUILTIN_ERRORS else "an exception"
    if not public:  # the answer's own words never reach the feedback of a hidden case
        return f"{function} raised {kind}"
    line = f" (line {error['line']} of the answer cell)" if type(error.get("line")) is int else ""
    return f"{function} raised {error['type']}: {str(error.get('message', ''))[:300]}{line}"


def _got(reply: object, question: AutoQuestion, public: bool) -> tuple | str:
    """One case's outputs from its reply, or what went wrong (for a hidden case, in fixed words only)."""
    if isinstance(reply, str):
        return reply
    if "value" not in reply:
        return (
            "not implemented yet"
            if reply.get("stub") is True
            else _error_text(reply.get("error"), question.function, public)
        )
    try:
        value = _runner.decode_output(reply["value"])
        if isinstance(value, str) or (isinstance(value, tuple) and any(isinstance(v, str) for v in value)):
            kind = f" ({value})" if public and isinstance(value, str) else ""
            return f"{question.function} returned something that is not numbers{kind}"
        return as_outputs(value, question.outputs)
    except _runner.Malformed as err:
        return f"malformed result ({err})"
    except ReturnError as err:
        return str(err) if public else "the answer returned the wrong kind of value"


def _judge(question: AutoQuestion, outcome: _Outcome, seed: int) -> tuple[str, str]:
    """``(status, feedback)`` of one question."""
    cases = _cases(question.id, seed)
    cell = outcome.cell or {}
    prefix = f"{_error_text(cell['error'], 'Your answer cell', True)}.\n" if cell.get("error") else ""
    stopped = f"{prefix}The sandbox stopped this question: {outcome.stopped}."
    if outcome.stopped and not outcome.replies:
        return "stopped", stopped
    if cell.get("defined") is not True:
        return "error", f"{prefix}The answer cell does not define a function {question.function}."
    passed, failure = 0, None
    for k, (case, expected, public) in enumerate(cases):
        got = _got(outcome.replies[k], question, public) if k in outcome.replies else "no result came back"
        if got == "not implemented yet":
            return "not implemented", f"{question.function} is not implemented yet (it raises NotImplementedError)."
        verdict = judge(question, case, got, expected)
        passed += verdict.passed
        if not verdict.passed and failure is None:
            failure = f"Failed a public case.\n{verdict.message}" if public else (
                f"Failed a hidden case ({case.description}): {verdict.summary}")  # fmt: skip
    if outcome.stopped:
        return "stopped", stopped
    if failure is None:
        return "passed", f"{prefix}Passed all {len(cases)} test cases."
    return "failed", f"{prefix}{failure}\nPassed {passed} of {len(cases)} test cases."


def grade_path(path: Path, student: str, grading: Grading) -> GradeReport:
    """Grade one submission with resolved settings (never raises for a bad submission)."""
    start = time.monotonic()
    tier = grading.tier.describe()
    try:
        notebook = read_notebook(path)
    except NotebookError as err:
        return GradeReport(str(path), student, None, (), tier, error=str(err))
    chapter = notebook_chapter(notebook, path)
    questions = chapter_questions(chapter, AutoQuestion)
    if not questions:
        return GradeReport(str(path), student, chapter, (), tier, error=f"no auto-graded questions for {chapter!r}")
    located = locate(notebook, questions)
    plan = sorted(((q, located[q.id].answer_code) for q in questions if located[q.id].answer_index is not None
                   and len(located[q.id].answer_code) <= _MAX_CELL), key=lambda qa: located[qa[0].id].answer_index)  # fmt: skip
    outcomes, fatal = _run(plan, grading, start + grading.limits.total_s) if plan else ({}, None)
    results = []
    for q in questions:
        spot, points = located[q.id], grading.points_of(q)
        if fatal:
            results.append(QuestionResult(q.id, q.title, points, 0, "not graded", fatal))
            continue
        if spot.answer_index is None or len(spot.answer_code) > _MAX_CELL:
            why = f"No answer cell (a code cell tagged answer-{q.id}, defining {q.function})."
            results.append(QuestionResult(q.id, q.title, points, 0, "no answer", why if spot.answer_index is None
                                          else f"The answer cell has more than {_MAX_CELL} characters."))  # fmt: skip
            continue
        status, feedback = _judge(q, outcomes[q.id], grading.seed)
        feedback = f"Note: {spot.note}.\n{feedback}" if spot.note else feedback
        if not q.autograd and (used := autograd_used(spot.answer_code)):
            status = "uses autograd"
            feedback = f"This question scores 0: its prompt asks for it without autograd, and the answer uses {used}.\n{feedback}"
        if spot.check_problem:  # "its check cell was altered (it must be ...)" gives "check cell was altered"
            status = spot.check_problem.split(" (")[0].removeprefix("its ")
            feedback = f"This question scores 0: {spot.check_problem}. Restore it from the student version.\n{feedback}"
        results.append(QuestionResult(q.id, q.title, points, points * (status == "passed"), status, feedback))
    return GradeReport(str(path), student, chapter, tuple(results), tier, time.monotonic() - start, fatal)
