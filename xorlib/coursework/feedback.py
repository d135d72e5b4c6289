r"""Feedback on an answer: the student's ``check("ch02-q1", my_function)`` (public cases, in the student's kernel),
and the comparison and diagnosis the grader uses too, so that a student sees while working what the grader writes.

Values are compared as float64 arrays. A failure names the case, the output, what was expected and what came back,
the largest difference and, when it recognises one, the mistake: a known mistake of the question, a constant factor
(the wrong sign, a missing :math:`\tfrac12`, :math:`d-1` where :math:`d` belongs), another order, a shape, NaNs.
"""

from __future__ import annotations

import ast
import copy
import inspect
import math
import textwrap
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ._runner import autograd_guard
from .bank import get_question
from .questions import AutoQuestion, Case

__all__ = []  # internal to xorlib.coursework (which exports what readers call)

_MAX_ENTRIES = 10**7


class ReturnError(ValueError):
    """The answer returned something that is not the kind of value asked for."""


@dataclass(frozen=True)
class Verdict:
    """The outcome of one case: ``passed``, a message (empty on success), and ``summary``, the diagnosis without the
    numbers, for hidden cases."""

    passed: bool
    message: str = ""
    summary: str = ""


def _array(value: object, what: str) -> np.ndarray:
    """One returned value as a float64 array (tensors, arrays, numbers, nested lists of numbers)."""
    if isinstance(value, torch.Tensor):
        if value.is_complex():
            raise ReturnError(f"{what} is a complex tensor; return a real floating tensor")
        value = value.detach().cpu().double().numpy()
    if isinstance(value, (bool, str)) or value is None:
        raise ReturnError(f"{what} should be a tensor or a number, got {type(value).__name__} {value!r:.60}")
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError) as err:
        raise ReturnError(f"{what} should be a tensor or a number, got {type(value).__name__}: {err}") from err
    if array.size > _MAX_ENTRIES:
        raise ReturnError(f"{what} has {array.size} entries, far more than asked for")
    return array


def as_outputs(value: object, names: Sequence[str]) -> tuple[np.ndarray, ...]:
    """Split a returned value into one float64 array per named output (:class:`ReturnError` if it is not a tuple of
    the right length, for several outputs, or not convertible to numbers)."""
    if len(names) == 1:
        return (_array(value, names[0]),)
    if not isinstance(value, (tuple, list)) or len(value) != len(names):
        got = f"a {type(value).__name__}" + (f" of length {len(value)}" if isinstance(value, (tuple, list)) else "")
        raise ReturnError(f"the function must return {len(names)} values ({', '.join(names)}) as a tuple, got {got}")
    return tuple(_array(v, n) for v, n in zip(value, names, strict=True))


def _fmt(array: np.ndarray, limit: int = 6) -> str:
    """The first entries of an array (rounding noise shown as 0) and its shape."""
    if array.ndim == 0:
        return f"{float(array):.10g}"
    flat = array.reshape(-1)
    finite = flat[np.isfinite(flat)]
    scale = float(np.abs(finite).max()) if finite.size else 0.0
    shown = np.where(np.abs(flat) < 1e-12 * scale, 0.0, flat)[:limit]
    more = ", ..." if flat.size > limit else ""
    return "[" + ", ".join(f"{v:.6g}" for v in shown) + f"{more}] (shape {tuple(array.shape)})"


def _close(got: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> bool:
    if got.shape != expected.shape:
        return False
    scale = float(np.abs(expected[np.isfinite(expected)]).max()) if np.isfinite(expected).any() else 1.0
    return bool(np.allclose(got, expected, rtol=rtol, atol=atol * max(1.0, scale), equal_nan=True))


def _factor_meaning(factor: float, d: int | None) -> str:
    """Name a constant factor between the answer and the right one, when it is a familiar one."""
    known = [(-1.0, "the wrong sign"), (2.0, "a missing factor 1/2"), (0.5, "an extra factor 1/2")]
    known += [(math.log(10), "log10 where the natural log belongs"), (1 / math.log(10), "log10 where ln belongs")]
    if d is not None and d > 2:
        off = "an off-by-one normalisation:"
        known += [(d / (d - 1), f"{off} d - 1 where d belongs"), ((d - 1) / d, f"{off} d where d - 1 belongs"),
                  ((d / (d - 1)) ** 2, f"{off} (d - 1)^2 where d^2 belongs"),
                  (((d - 1) / d) ** 2, f"{off} d^2 where (d - 1)^2 belongs"), (float(d), "a missing division by d"),
                  (1.0 / d, "an extra division by d"), (float(d * d), "a missing division by d^2")]  # fmt: skip
    for value, meaning in known:
        if math.isclose(factor, value, rel_tol=1e-6):
            return meaning
    return "a wrong constant (a step size, a normalisation, or a factor of the readout)"


def _generic_diagnosis(got: np.ndarray, expected: np.ndarray, case: Case, rtol: float, atol: float) -> tuple | None:
    """A constant factor, or the right values in another order: ``(diagnosis, the same without the answer's numbers)``."""
    factor = None
    if expected.size > 1 and float(np.abs(expected).max()) > 0 and np.isfinite(got).all():
        fit = float((got * expected).sum() / (expected * expected).sum())
        factor = fit if fit != 0 and _close(got, fit * expected, rtol, atol) else None
    elif expected.size == 1 and float(expected.reshape(())) != 0 and np.isfinite(got).all():
        fit = float(got.reshape(())) / float(expected.reshape(()))
        factor = None if _factor_meaning(fit, case.d).startswith("a wrong constant") else fit
    if factor is not None:
        meaning = _factor_meaning(factor, case.d)
        return f"your answer is {factor:.6g} times the right one: {meaning}.", f"a constant factor: {meaning}."
    if expected.size > 1 and _close(np.sort(got.reshape(-1)), np.sort(expected.reshape(-1)), rtol, atol):
        text = "you have the right values in the wrong order (check the order of the inputs, or an axis)."
        return text, text
    return None


def _known_mistake(question: AutoQuestion, case: Case, got: tuple[np.ndarray, ...]) -> str | None:
    """The text of the first known mistake whose outputs are the answer's."""
    for mistake in question.mistakes:
        try:
            outputs = as_outputs(mistake.compute(*case.args), question.outputs)
        except (ArithmeticError, ValueError, RuntimeError):  # a mistake that cannot be evaluated here is skipped
            continue
        if all(_close(a, b, question.rtol, question.atol) for a, b in zip(got, outputs, strict=True)):
            return mistake.text
    return None


def judge(question: AutoQuestion, case: Case, got: tuple[np.ndarray, ...] | str, expected: tuple) -> Verdict:
    """Compare one case's outputs (the arrays of :func:`as_outputs`, or a string saying why there are none) with the
    reference. The verdict's ``summary`` (what a hidden case shows) holds no number computed from the answer."""
    header = f"{question.id} failed on test case: {case.description}"
    hint = f"\n  Hint: {question.hint}" if question.hint else ""
    if isinstance(got, str):
        return Verdict(False, f"{header}\n  {got}{hint}", got.splitlines()[0])
    for name, g, e in zip(question.outputs, got, expected, strict=True):
        if g.shape != e.shape and g.size == e.size == 1:
            g = g.reshape(e.shape)  # a number returned as a one-entry tensor, or the reverse
        if g.shape != e.shape:
            layout = " (same number of entries: check a squeeze, an unsqueeze or a transpose)" * (g.size == e.size)
            text = f"{name} has the wrong shape: expected {tuple(e.shape)}, got {tuple(g.shape)}"
            return Verdict(False, f"{header}\n  {text}{layout}.{hint}", f"{text.split(', got')[0]}.")
        if (np.isfinite(e) & ~np.isfinite(g)).any():
            text = f"{name} has NaN or infinite entries where the answer is finite"
            message = f"{header}\n  {text}: {_fmt(g)}.\n  Hint: {question.nan_hint}"
            return Verdict(False, message, f"{text}. Hint: {question.nan_hint}")
        if _close(g, e, question.rtol, question.atol):
            continue
        known = _known_mistake(question, case, got)
        own = question.diagnose(case.args, got, expected) if known is None and question.diagnose else None
        generic = _generic_diagnosis(g, e, case, question.rtol, question.atol) if not (known or own) else None
        diagnosis = known or own or (generic[0] if generic else None)
        safe = known or (generic[1] if generic else None)  # a question's own diagnosis may quote the answer's numbers
        difference = float(np.nanmax(np.abs(g - e))) if g.size else 0.0
        lines = [header, f"  {name}:", f"    expected {_fmt(e)}", f"    returned {_fmt(g)}",
                 f"    largest difference {difference:.3g}"] + ([f"  Diagnosis: {diagnosis}"] if diagnosis else [])  # fmt: skip
        return Verdict(False, "\n".join(lines) + hint, f"{name} is wrong" + (f": {safe}" if safe else "."))
    return Verdict(True)


class CheckFailure(AssertionError):
    """An answer disagrees with the reference on a public test case; the message says where and why."""


_NOT_IMPLEMENTED = "not implemented yet"
_AUTOGRAD_NAMES = {"backward", "autograd", "enable_grad", "set_grad_enabled", "_set_grad_enabled", "requires_grad",
                   "requires_grad_", "func", "functorch"}  # fmt: skip


def _fresh(args: tuple[object, ...]) -> tuple[object, ...]:
    """Copies of the arguments, so that an answer that modifies its inputs cannot change the reference's."""
    return tuple(a.clone() if hasattr(a, "clone") else copy.deepcopy(a) for a in args)


def run_case(question: AutoQuestion, fn: Callable[..., object], case: Case) -> tuple | str:
    """Call ``fn`` on a case (autograd disabled where the question forbids it): its outputs as arrays, or why not."""
    try:
        with autograd_guard(torch).forbid(
            None if question.autograd else f"{question.id} asks for this without autograd"
        ):
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
    """The xorlib module or function (other than :mod:`xorlib.task`) an answer reaches for, if any: grading runs
    without them (:func:`~xorlib.coursework.sandbox.grading_build`), so ``check`` says at once that such an answer would score 0."""
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
    """Run the public test cases of question ``question_id`` (``"ch02-q1"``, its exercise's label) on ``fn``, the
    function you wrote, and print a line per case.

    Raises
    ------
    CheckFailure
        On the first case where ``fn`` disagrees with the reference: the case, the expected and returned values, a
        diagnosis and a hint.
    """
    if not isinstance(question_id, str):
        raise TypeError(f"question_id must be a question id such as 'ch02-q1', got {type(question_id).__name__}")
    question = get_question(question_id)
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
        print(f"Warning: {question.function} uses {used}. Grading runs without the book's own code (only xorlib.task "
              "is there), so this answer would score 0: write the computation yourself.")  # fmt: skip
