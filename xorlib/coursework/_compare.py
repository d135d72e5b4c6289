r"""Compare an answer's outputs with the reference, and say what went wrong.

Both the student-facing :func:`~xorlib.coursework.check` and the grader come
here, so a student sees while working exactly the diagnosis the grader writes.
Values are compared as float64 NumPy arrays. A failure names the test case,
the output, what was expected and what came back, the largest difference and,
when it recognises one, the mistake: a known mistake of the question, a
constant factor (the wrong sign, a missing :math:`\tfrac12`, :math:`d-1` where
:math:`d` belongs), the right values in another order, a wrong shape, NaNs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .questions import AutoQuestion, Case

__all__ = ["ReturnError", "Verdict", "as_outputs", "judge"]

_MAX_ENTRIES = 10**7


class ReturnError(ValueError):
    """The answer returned something that is not the kind of value asked for."""


@dataclass(frozen=True)
class Verdict:
    """The outcome of one case: ``passed``, and a message (empty on success).

    ``summary`` is the diagnosis without the numbers, for hidden cases.
    """

    passed: bool
    message: str = ""
    summary: str = ""


def _array(value: object, what: str) -> np.ndarray:
    """One returned value as a float64 array (tensors, arrays, numbers, nested lists of numbers)."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor, without importing torch here
        if getattr(value, "is_complex", lambda: False)():
            raise ReturnError(f"{what} is a complex tensor; return a real floating tensor")
        value = value.detach().cpu().double().numpy()
    if isinstance(value, bool) or value is None or isinstance(value, str):
        raise ReturnError(f"{what} should be a tensor or a number, got {type(value).__name__} {value!r:.60}")
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError) as err:
        raise ReturnError(f"{what} should be a tensor or a number, got {type(value).__name__}: {err}") from err
    if array.size > _MAX_ENTRIES:
        raise ReturnError(f"{what} has {array.size} entries, far more than asked for")
    return array


def as_outputs(value: object, names: Sequence[str]) -> tuple[np.ndarray, ...]:
    """Split a returned value into one float64 array per named output.

    Raises
    ------
    ReturnError
        If the value is not a tuple of the right length (several outputs) or
        not convertible to numbers.
    """
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
        known += [
            (d / (d - 1), "an off-by-one normalisation: d - 1 where d belongs"),
            ((d - 1) / d, "an off-by-one normalisation: d where d - 1 belongs"),
            ((d / (d - 1)) ** 2, "an off-by-one normalisation: (d - 1)^2 where d^2 belongs"),
            (((d - 1) / d) ** 2, "an off-by-one normalisation: d^2 where (d - 1)^2 belongs"),
            (float(d), "a missing division by d"),
            (1.0 / d, "an extra division by d"),
            (float(d * d), "a missing division by d^2"),
        ]
    for value, meaning in known:
        if math.isclose(factor, value, rel_tol=1e-6):
            return meaning
    return "a wrong constant (a step size, a normalisation, or a factor of the readout)"


def _generic_diagnosis(
    got: np.ndarray, expected: np.ndarray, case: Case, rtol: float, atol: float
) -> tuple[str, str] | None:
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


def _mistake_outputs(question: AutoQuestion, case: Case) -> list[tuple[str, tuple[np.ndarray, ...]]]:
    found = []
    for mistake in question.mistakes:
        try:
            found.append((mistake.text, as_outputs(mistake.compute(*case.args), question.outputs)))
        except (ArithmeticError, ValueError, RuntimeError):  # a mistake that cannot be evaluated here is skipped
            continue
    return found


def judge(
    question: AutoQuestion,
    case: Case,
    got: tuple[np.ndarray, ...] | str,
    expected: tuple[np.ndarray, ...],
) -> Verdict:
    """Compare one case's outputs (or why there are none, a string) with the reference.

    ``got`` is either the arrays of :func:`as_outputs` or a message saying why there are none. The verdict's
    ``summary`` (what a hidden case shows) holds no number computed from the answer's outputs.
    """
    header = f"{question.id} failed on test case: {case.description}"
    hint = f"\n  Hint: {question.hint}" if question.hint else ""
    if isinstance(got, str):
        return Verdict(False, f"{header}\n  {got}{hint}", got.splitlines()[0])
    for name, g, e in zip(question.outputs, got, expected, strict=True):
        if g.shape != e.shape and g.size == e.size == 1:
            g = g.reshape(e.shape)  # a number returned as a one-entry tensor, or the reverse
        if g.shape != e.shape:
            layout = (
                " (same number of entries: check a squeeze, an unsqueeze or a transpose)" if g.size == e.size else ""
            )
            text = f"{name} has the wrong shape: expected {tuple(e.shape)}, got {tuple(g.shape)}{layout}."
            return Verdict(
                False, f"{header}\n  {text}{hint}", f"{name} has the wrong shape (expected {tuple(e.shape)})."
            )
        bad = np.isfinite(e) & ~np.isfinite(g)
        if bad.any():
            text = f"{name} has NaN or infinite entries where the answer is finite"
            message = f"{header}\n  {text}: {_fmt(g)}.\n  Hint: {question.nan_hint}"
            return Verdict(False, message, f"{text}. Hint: {question.nan_hint}")
        if _close(g, e, question.rtol, question.atol):
            continue
        known = next((text for text, outputs in _mistake_outputs(question, case)
                      if all(_close(a, b, question.rtol, question.atol) for a, b in zip(got, outputs, strict=True))),
                     None)  # fmt: skip
        own = question.diagnose(case.args, got, expected) if known is None and question.diagnose else None
        generic = (
            _generic_diagnosis(g, e, case, question.rtol, question.atol) if known is None and own is None else None
        )
        diagnosis = known or own or (generic[0] if generic else None)
        safe = known or (generic[1] if generic else None)  # a question's own diagnosis may quote the answer's numbers
        difference = float(np.nanmax(np.abs(g - e))) if g.size else 0.0
        lines = [header, f"  {name}:", f"    expected {_fmt(e)}", f"    returned {_fmt(g)}",
                 f"    largest difference {difference:.3g}"]  # fmt: skip
        if diagnosis:
            lines.append(f"  Diagnosis: {diagnosis}")
        return Verdict(False, "\n".join(lines) + hint, f"{name} is wrong" + (f": {safe}" if safe else "."))
    return Verdict(True)
