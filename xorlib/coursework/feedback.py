"""The student-facing check: ``check("ch02-q1", my_function)`` runs the public test cases and explains failures.

It is feedback while working, nothing more: grading never runs it, and never
runs anything in the student's kernel (:mod:`~xorlib.coursework.grading`).
Only the public cases are used; grading adds the hidden ones.
"""

from __future__ import annotations

import ast
import copy
import inspect
import textwrap
import types
from collections.abc import Callable, Iterator

from ._compare import ReturnError, Verdict, as_outputs, judge
from .bank import CHAPTERS, get_question
from .questions import AutoQuestion, Case

__all__ = []  # internal to xorlib.coursework (which exports what readers call)


class CheckFailure(AssertionError):
    """An answer disagrees with the reference on a public test case; the message says where and why."""


_NOT_IMPLEMENTED = "not implemented yet"
_AUTOGRAD_NAMES = {"backward", "autograd", "enable_grad", "set_grad_enabled", "_set_grad_enabled", "requires_grad",
                   "requires_grad_", "func", "functorch"}  # fmt: skip


class _UnknownQuestion(KeyError, ValueError):
    """A question id the bank does not have (a :class:`KeyError`, and a :class:`ValueError` like other bad input)."""


def _fresh(args: tuple[object, ...]) -> tuple[object, ...]:
    """Copies of the arguments, so that an answer that modifies its inputs cannot change the reference's."""
    return tuple(a.clone() if hasattr(a, "clone") else copy.deepcopy(a) for a in args)


def run_case(question: AutoQuestion, fn: Callable[..., object], case: Case) -> tuple | str:
    """Call ``fn`` on a case (autograd disabled where the question forbids it): its outputs as arrays, or why not."""
    try:
        forbid = None if question.autograd else f"{question.id} asks for this without autograd"
        import torch

        from ._runner import autograd_guard

        with autograd_guard(torch).forbid(forbid):
            value = fn(*_fresh(case.args))
    except NotImplementedError:
        return _NOT_IMPLEMENTED
    except Exception as err:  # the student's error, reported as feedback
        return f"{question.function} raised {type(err).__name__}: {err}"
    try:
        return as_outputs(value, question.outputs)
    except ReturnError as err:
        return str(err)


def autograd_used(source: str) -> str | None:
    """``"backward (line 7)"``: the first autograd name an answer cell uses, or ``None``."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # nor can it run: its cell fails in the sandbox
        return None
    for node in ast.walk(tree):
        name = getattr(node, "attr", None) or getattr(node, "id", None) or getattr(node, "module", None) or ""
        names = [a.name for a in node.names] if isinstance(node, (ast.Import, ast.ImportFrom)) else [name]
        for found in names:
            if set(found.split(".")) & _AUTOGRAD_NAMES:
                return f"{found} (line {node.lineno})"
    return None


def expected_outputs(question: AutoQuestion, case: Case) -> tuple:
    """The reference's outputs for one case, as arrays."""
    return as_outputs(question.reference(*_fresh(case.args)), question.outputs)


def _names(code: types.CodeType) -> Iterator[str]:
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _names(const)


def reference_used(fn: Callable[..., object]) -> str | None:
    """The xorlib module or function (other than :mod:`xorlib.task`) an answer reaches for, if any.

    Grading runs without them (:mod:`~xorlib.coursework._build`), so an answer
    that calls one passes here and scores 0 there; ``check`` says so at once.
    """
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    cells = {}
    for name, cell in zip(code.co_freevars, fn.__closure__ or (), strict=False):
        try:
            cells[name] = cell.cell_contents
        except ValueError:  # a closure variable not assigned yet
            continue
    for name in [*_names(code), *cells]:
        if name.startswith("xorlib") and not name.startswith("xorlib.task"):
            return name
        value = cells[name] if name in cells else getattr(fn, "__globals__", {}).get(name)
        module = value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", None) or ""
        if module.startswith("xorlib") and not module.startswith("xorlib.task"):
            return module if isinstance(value, types.ModuleType) else f"{module}.{name}"
    return None


def check(question_id: str, fn: Callable[..., object]) -> None:
    """Run the public test cases of a question on ``fn`` and print a line per case, or raise with a diagnosis.

    Parameters
    ----------
    question_id
        The question, e.g. ``"ch02-q1"`` (the label of its exercise).
    fn
        The function you wrote.

    Raises
    ------
    CheckFailure
        On the first case where ``fn`` disagrees with the reference: the case,
        the expected and returned values, a diagnosis and a hint.
    """
    if not isinstance(question_id, str):
        raise TypeError(f"question_id must be a question id such as 'ch02-q1', got {type(question_id).__name__}")
    try:
        question = get_question(question_id)
    except KeyError:
        known = ", ".join(q.id for questions in CHAPTERS.values() for q in questions if isinstance(q, AutoQuestion))
        raise _UnknownQuestion(f"no question {question_id!r}: question_id must be one of {known}") from None
    if not isinstance(question, AutoQuestion):
        raise ValueError(
            f"question_id {question_id!r} is a written question: it is marked by your teacher, not checked"
        )
    if not callable(fn):
        raise TypeError(f"fn must be your function {question.function}, got {type(fn).__name__}")
    cases = question.public()
    for case in cases:
        got = run_case(question, fn, case)
        if got == _NOT_IMPLEMENTED:  # not a failure: a fresh notebook runs from top to bottom
            print(f"{question_id}: not answered yet. Replace `raise NotImplementedError` in the answer cell, run it, "
                  "then this cell again.")  # fmt: skip
            return
        verdict: Verdict = judge(question, case, got, expected_outputs(question, case))
        if not verdict.passed:
            raise CheckFailure(verdict.message)
    names = "".join(f"\n  - {c.description}" for c in cases)
    print(f"{question_id} passed its {len(cases)} public test cases:{names}\nGrading adds hidden test cases.")
    try:
        uses_autograd = None if question.autograd else autograd_used(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError):  # no source (a lambda typed at a prompt): grading still checks the cell
        uses_autograd = None
    if uses_autograd:
        print(f"Warning: {question.function} uses {uses_autograd}; {question.id} asks for it without autograd, so "
              "grading scores this answer 0.")  # fmt: skip
    if used := reference_used(fn):
        print(
            f"Warning: {question.function} uses {used}. Grading runs without the book's own code (only "
            "xorlib.task is there), so this answer would score 0: write the computation yourself."
        )
