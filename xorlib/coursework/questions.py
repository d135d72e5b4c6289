r"""What a question is: an auto-graded function to write (:class:`AutoQuestion`: everything the grader needs, none
of it from a submission), or a written answer marked by the teacher against a rubric (:class:`WrittenQuestion`).
"""

from __future__ import annotations

import inspect
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass

__all__ = []  # the rest is internal to xorlib.coursework

#: What replaces a solution in the student's answer cell.
STUB = "raise NotImplementedError  # your code here"

_MARKER = re.compile(r"^[ \t]*#[ \t]*(BEGIN|END) SOLUTION\b", re.M)
_SOLUTION = re.compile(
    r"^(?P<indent>[ \t]*)#[ \t]*BEGIN SOLUTION\b(?P<body>.*?)^[ \t]*#[ \t]*END SOLUTION\b.*?$", re.M | re.S
)
_ID = re.compile(r"^ch(?P<chapter>\d\d)-(?P<kind>[qw])(?P<number>\d+)$")

#: The levels: a warm-up (a formula of the chapter, written out), a core exercise (a derivation of the chapter as
#: vectorised code, or a short argument), a challenge (several steps the chapter does not take).
LEVELS = ("warm-up", "core", "challenge")
#: The range of ``minutes``, the estimated time for a student who has read the chapter.
MINUTES = (5, 90)


@dataclass(frozen=True, eq=False)
class Case:
    """One test case: positional arguments, described in words; ``d`` (the number of positions, where there is one)
    lets a diagnosis name factors such as :math:`d/(d-1)`."""

    description: str
    args: tuple[object, ...]
    d: int | None = None


@dataclass(frozen=True, eq=False)
class Mistake:
    """A known mistake: what it is, and the output it gives (``compute`` takes the case's arguments)."""

    text: str
    compute: Callable[..., object]


class _Question:
    """What both kinds share: the effort, checked when a question is made, and the chapter its id names."""

    def __post_init__(self) -> None:
        """Refuse a malformed question: its id, points, level, time, solution markers, or autograd flag."""
        match, auto = _ID.match(self.id), isinstance(self, AutoQuestion)
        problems = [f"its id must look like 'chNN-{'q' if auto else 'w'}K'" * (not match or (match["kind"] == "q") != auto),
                    "it must be worth a positive number of points" * (self.points <= 0),
                    f"level must be one of {', '.join(map(repr, LEVELS))}, got {self.level!r}" * (self.level not in LEVELS)]  # fmt: skip
        if type(self.minutes) is not int or not MINUTES[0] <= self.minutes <= MINUTES[1]:
            problems.append(f"minutes must be an int from {MINUTES[0]} to {MINUTES[1]} (the estimated time for a "
                            f"student who has read the chapter), got {self.minutes!r}")  # fmt: skip
        if auto and stub_source(self.answer_source()) == self.answer_source():
            problems.append("the solution has no # BEGIN SOLUTION / # END SOLUTION block")
        if auto and ("without autograd" in self.prompt) == self.autograd:
            problems.append("autograd=False exactly where the prompt says 'without autograd'")
        if problems := [p for p in problems if p]:
            raise ValueError(f"question {self.id}: {'; '.join(problems)}")

    @property
    def chapter(self) -> str:
        """``"chNN"``."""
        return self.id.split("-")[0]


@dataclass(frozen=True, eq=False)
class AutoQuestion(_Question):
    r"""An auto-graded question: a function to write, with its cases, reference and diagnosis.

    Parameters
    ----------
    id, title, points, level, minutes, prompt
        ``"chNN-qK"`` (also the exercise's label and its cells' tag suffix); what the book shows (the prompt in
        Markdown with :math:`\LaTeX`); the difficulty (:data:`LEVELS`) and the minutes to expect (:data:`MINUTES`).
    solution
        The teacher's solution, a top-level function of the bank module whose body sits between ``# BEGIN
        SOLUTION`` and ``# END SOLUTION`` (nbgrader's markers): its source is the book's answer cell, and with the
        body replaced by :data:`STUB` the student's. Its name is the function the student writes.
    reference, public, hidden
        The expected output from the same arguments (computed in the grader only); ``public()`` and
        ``hidden(seed)``, the test cases (hidden ones drawn from the teacher's seed, never shown).
    outputs, imports
        Names of the returned values (``("weights", "z")``); lines above the function in the answer cell.
    mistakes, diagnose, hint, nan_hint
        Known mistakes, recognised by their outputs; an optional ``diagnose(args, got, expected) -> str | None``
        tried when none matches; a line shown with every failure; what to say about NaN or infinite entries.
    rtol, atol
        Tolerances of :func:`numpy.allclose`; ``atol`` is scaled by the largest expected magnitude (at least 1).
    forbidden, autograd
        The xorlib names that would answer the question (the grading build leaves them out); ``False`` where the
        prompt says "without autograd": the cases then run with autograd disabled, and a cell naming it scores 0.
    """

    id: str
    title: str
    points: int
    level: str
    minutes: int
    prompt: str
    solution: Callable[..., object]
    reference: Callable[..., object]
    public: Callable[[], tuple[Case, ...]]
    hidden: Callable[[int], tuple[Case, ...]]
    outputs: tuple[str, ...] = ("the result",)
    imports: str = ""
    mistakes: tuple[Mistake, ...] = ()
    hint: str = ""
    rtol: float = 1e-6
    atol: float = 1e-10
    forbidden: tuple[str, ...] = ()
    diagnose: Callable[..., str | None] | None = None
    nan_hint: str = "an exponential overflowed or something was divided by zero."
    autograd: bool = True

    @property
    def function(self) -> str:
        """The name of the function the student writes."""
        return self.solution.__name__

    @property
    def signature(self) -> str:
        """``name(arg, ...)`` as the student writes it."""
        return f"{self.function}{inspect.signature(self.solution)}"

    def answer_source(self) -> str:
        """The book's answer cell: the imports and the teacher's solution."""
        source = textwrap.dedent(inspect.getsource(self.solution)).strip("\n")
        return f"{self.imports.strip()}\n\n\n{source}" if self.imports.strip() else source

    def student_source(self) -> str:
        """The student's answer cell: the same, with the solution replaced by ``raise NotImplementedError``."""
        return stub_source(self.answer_source())

    def check_source(self) -> str:
        """The check cell, exactly as the student version holds it (grading compares against this)."""
        return f'check("{self.id}", {self.function})'


@dataclass(frozen=True)
class Criterion:
    """One line of a rubric: what earns ``points``."""

    points: int
    text: str


@dataclass(frozen=True)
class WrittenQuestion(_Question):
    """A question answered in prose or maths, marked by the teacher against a rubric; ``answer`` is the model answer
    (Markdown), folded in the book and absent from the student version, like the rubric."""

    id: str
    title: str
    level: str
    minutes: int
    prompt: str
    rubric: tuple[Criterion, ...]
    answer: str

    @property
    def points(self) -> int:
        """The marks available: the rubric's total."""
        return sum(c.points for c in self.rubric)


Question = AutoQuestion | WrittenQuestion


def stub_source(source: str) -> str:
    """Replace each ``# BEGIN SOLUTION`` ... ``# END SOLUTION`` block by :data:`STUB`, at the marker's indentation
    (:class:`ValueError` for a marker without its partner, or nested markers)."""
    stubbed = _SOLUTION.sub(lambda block: block["indent"] + STUB, source)
    if _MARKER.search(stubbed) or any(_MARKER.search(block["body"]) for block in _SOLUTION.finditer(source)):
        raise ValueError("a BEGIN SOLUTION without an END SOLUTION after it, or one inside another")
    return "\n".join(stubbed.splitlines())
