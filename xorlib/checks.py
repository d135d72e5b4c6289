r"""Checks for the exercises: test a student's implementation against :mod:`xorlib`.

Each ``check_*`` function calls the student's function on a few prepared test
cases (small and large ``d``, balanced and unbalanced codes, sharp and flat
attention), compares the result with the reference implementation in
:mod:`xorlib`, and either prints a short pass message or raises
:class:`CheckFailure` with

* the test case (its inputs, in words),
* what was expected and what came back,
* a *diagnosis* when the wrong answer matches a known mistake (wrong sign,
  a missing softmax centring term, a normalisation off by one, a forgotten
  label term, the mean instead of the maximum, ...), and
* a hint.

Usage in a notebook::

    from xorlib.checks import check_softmax_head

    def softmax_head(query, codes, x):
        ...
        return weights, z

    check_softmax_head(softmax_head)

The checks work in ``float64`` on ``device`` and never modify the arrays they
pass: the student's function receives fresh copies.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from ._validate import check_device
from .attention import attention_weights, scores_vjp
from .codes import positional_codes
from .data import all_inputs, sample_inputs
from .gradient import (
    exhaustive_losses,
    lr_for_sharpness,
    one_step_from_uniform,
    population_grad_weights,
    population_gradient,
    population_loss_weights,
    worst_case_loss,
)
from .model import readout_constants

__all__ = [
    "CHECKS",
    "CheckFailure",
    "check_one_step",
    "check_population_gradient",
    "check_softmax_head",
    "check_worst_case_loss",
]

#: Names of the public check functions (the coursework grader counts calls to these).
CHECKS = ("check_softmax_head", "check_population_gradient", "check_one_step", "check_worst_case_loss")


class CheckFailure(AssertionError):
    """Raised when a student's implementation disagrees with the reference.

    The message names the test case, the expected and the returned values,
    a diagnosis of the mistake where one is recognised, and a hint.
    """


@dataclass(frozen=True)
class _Case:
    """One test case: a description in words and the keyword inputs for the student's function."""

    description: str
    inputs: dict[str, object]


# --------------------------------------------------------------------------- helpers


def _require_callable(fn: object) -> Callable[..., object]:
    if not callable(fn):
        raise TypeError(f"fn must be the function you wrote (a callable), got {type(fn).__name__}")
    return fn


def _fresh(value: object) -> object:
    """A copy the student's function may modify without touching the reference inputs."""
    return value.clone() if isinstance(value, torch.Tensor) else value


def _fmt(value: torch.Tensor, limit: int = 6) -> str:
    """Short printable form of a tensor: its first entries (rounding noise shown as 0) and its shape."""
    flat = value.detach().reshape(-1).cpu().double()
    if not value.ndim:
        return f"{float(value):.6g}"
    scale = float(flat[torch.isfinite(flat)].abs().max()) if bool(torch.isfinite(flat).any()) else 0.0
    flat = torch.where(flat.abs() < 1e-12 * scale, torch.zeros_like(flat), flat)
    shown = ", ".join(f"{float(v):.6g}" for v in flat[:limit])
    more = ", ..." if flat.numel() > limit else ""
    return f"[{shown}{more}] (shape {tuple(value.shape)})"


def _call(check: str, fn: Callable[..., object], case: _Case) -> object:
    """Call the student's function; turn any exception into a helpful :class:`CheckFailure`."""
    name = getattr(fn, "__name__", "your function")
    inputs = {key: _fresh(value) for key, value in case.inputs.items()}
    try:
        return fn(*inputs.values())
    except NotImplementedError as err:
        raise CheckFailure(
            f"{check}: {name} is not implemented yet.\n"
            "  Replace the line `raise NotImplementedError` with your code, run that cell, then run this one again."
        ) from err
    except Exception as err:
        raise CheckFailure(
            f"{check}: {name} raised {type(err).__name__}: {err}\n  on test case: {case.description}\n"
            "  Hint: read the traceback above this message; check the shapes of the inputs (listed in the exercise)."
        ) from err


def _to_tensor(check: str, what: str, value: object, case: _Case, device: torch.device) -> torch.Tensor:
    """Convert a returned value (tensor, array, number) to a float64 tensor, or fail naming the type."""
    if isinstance(value, torch.Tensor):
        if value.is_complex() or value.dtype == torch.bool:
            raise CheckFailure(f"{check}: {what} has dtype {value.dtype}; return a real floating tensor.")
        return value.detach().to(device=device, dtype=torch.float64)
    try:
        return torch.as_tensor(value, dtype=torch.float64, device=device)
    except (TypeError, ValueError, RuntimeError) as err:
        raise CheckFailure(
            f"{check}: {what} should be a torch.Tensor (or a number), but your function returned "
            f"a {type(value).__name__}: {value!r:.80}\n  on test case: {case.description}"
        ) from err


def _close(got: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float) -> bool:
    return got.shape == expected.shape and bool(torch.allclose(got, expected, rtol=rtol, atol=atol))


def _factor_hint(factor: float, d: int) -> str:
    """Name a constant factor between the returned and the expected value, if it is a familiar one."""
    known = {
        -1.0: "the wrong sign",
        2.0: "a missing factor 1/2 (the loss is (f - y)^2 / 2)",
        0.5: "an extra factor 1/2",
        d / (d - 1): "an off-by-one normalisation: d - 1 where d belongs",
        (d - 1) / d: "an off-by-one normalisation: d where d - 1 belongs, or d + 1 where d belongs",
        (d / (d - 1)) ** 2: "an off-by-one normalisation: (d - 1)^2 where d^2 belongs",
        ((d - 1) / d) ** 2: "an off-by-one normalisation: (d + 1)^2 or d^2 where (d - 1)^2 belongs",
        float(d): "a missing division by d",
        1.0 / d: "an extra division by d",
    }
    for value, meaning in known.items():
        if math.isclose(factor, value, rel_tol=1e-6):
            return meaning
    return "a wrong constant (a step size, a normalisation or a factor of the readout)"


def _compare(
    check: str,
    what: str,
    got: object,
    expected: torch.Tensor,
    case: _Case,
    *,
    mistakes: Sequence[tuple[str, torch.Tensor]] = (),
    hint: str = "",
    counterexample: str = "",
    d: int | None = None,
    rtol: float = 1e-6,
    atol: float = 1e-10,
) -> torch.Tensor:
    """Fail with a diagnosis unless ``got`` matches ``expected`` (shape, finiteness, values).

    ``mistakes`` pairs an explanation with the value that mistake would give;
    a returned value that matches one is diagnosed by name. ``counterexample``
    is shown when the values differ (an input that disproves the answer).
    """
    got = _to_tensor(check, what, got, case, expected.device)
    header = f"{check} failed on test case: {case.description}\n"
    if got.shape != expected.shape:
        squeezable = got.numel() == expected.numel()
        extra = " (same entries, different layout: check squeeze/unsqueeze/transpose)" if squeezable else ""
        raise CheckFailure(
            f"{header}  {what} has the wrong shape: expected {tuple(expected.shape)}, got {tuple(got.shape)}{extra}."
            + (f"\n  Hint: {hint}" if hint else "")
        )
    if not bool(torch.isfinite(got).all()):
        bad = int((~torch.isfinite(got)).sum())
        raise CheckFailure(
            f"{header}  {what} contains {bad} NaN or infinite value(s): {_fmt(got)}.\n"
            "  Hint: an exponential overflowed or something divided by zero. Softmax is unchanged by "
            "subtracting the largest score first: exp(s - max(s)) never overflows."
        )
    atol = atol * max(1.0, float(expected.abs().max()))
    if _close(got, expected, rtol, atol):
        return got
    lines = [
        f"{header}  {what}:",
        f"    expected {_fmt(expected)}",
        f"    returned {_fmt(got)}",
        f"    largest difference {float((got - expected).abs().max()):.3g}",
    ]
    diagnosis = next((text for text, value in mistakes if _close(got, value.to(got.dtype), rtol, atol)), None)
    if diagnosis is None and expected.numel() > 1 and float(expected.abs().max()) > 0:
        factor = float((got * expected).sum() / (expected * expected).sum())
        if _close(got, factor * expected, rtol, atol):
            size = d if d is not None else 2
            diagnosis = f"your answer is {factor:.6g} times the right one: {_factor_hint(factor, size)}."
    if diagnosis is not None:
        lines.append(f"  Diagnosis: {diagnosis}")
    if counterexample:
        lines.append(f"  Counterexample: {counterexample}")
    if hint:
        lines.append(f"  Hint: {hint}")
    raise CheckFailure("\n".join(lines))


def _passed(check: str, cases: Sequence[_Case]) -> None:
    print(f"{check} passed all {len(cases)} test cases:" + "".join(f"\n  - {c.description}" for c in cases))


def _codes(d: int, m: int, kind: str, seed: int, device: torch.device) -> torch.Tensor:
    return positional_codes(d, m, kind=kind, seed=seed, device=device)


def _random_queries(m: int, scale: float, seed: int, device: torch.device) -> torch.Tensor:
    generator = torch.Generator(device=device).manual_seed(seed)
    return scale * torch.randn(2, m, generator=generator, device=device, dtype=torch.float64)


# --------------------------------------------------------------------------- check_softmax_head


def check_softmax_head(fn: Callable[..., object], *, device: str | torch.device = "cpu") -> None:
    r"""Check a softmax head ``fn(query, codes, x) -> (weights, z)``.

    The head scores position :math:`i` by :math:`s_i = \langle q, p_i\rangle`,
    takes :math:`\alpha = \operatorname{softmax}(s)` and outputs
    :math:`z = \sum_i \alpha_i x_i` for each row of ``x``.

    Parameters
    ----------
    fn
        The student's function. It receives ``query`` of shape ``(m,)``,
        ``codes`` of shape ``(d, m)`` and ``x`` of shape ``(n, d)`` and returns
        ``weights`` of shape ``(d,)`` and ``z`` of shape ``(n,)``.
    device
        Where the test tensors live.

    Raises
    ------
    CheckFailure
        On the first test case where ``fn`` disagrees with
        :func:`xorlib.attention.attention_weights`.
    """
    fn = _require_callable(fn)
    device = check_device("device", device)
    check = "check_softmax_head"
    cases = []
    for d, m, scale, seed, label in ((6, 4, 1.0, 0, "small"), (50, 12, 3.0, 1, "medium"), (20, 8, 2000.0, 2, "")):
        codes = _codes(d, m, "iid", seed, device)
        query = _random_queries(m, scale, seed, device)[0]
        x = sample_inputs(5, d, seed=seed, device=device, dtype=torch.float64)
        description = (
            f"{label} d={d}, m={m}, n=5" if label else f"huge scores up to {scale:g} (a very sharp head), d={d}"
        )
        cases.append(_Case(description, {"query": query, "codes": codes, "x": x}))

    for case in cases:
        query, codes, x = case.inputs["query"], case.inputs["codes"], case.inputs["x"]
        scores = codes @ query
        expected = attention_weights(scores, "softmax")
        result = _call(check, fn, case)
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            raise CheckFailure(
                f"{check}: your function must return a pair (weights, z), got {type(result).__name__}.\n"
                f"  on test case: {case.description}"
            )
        weights = _to_tensor(check, "weights", result[0], case, device)
        mistakes = [
            (
                "wrong sign: your weights are largest where the score is smallest (softmax of -s).",
                torch.softmax(-scores, -1),
            ),
            (
                "uniform weights: the scores never entered (did you use s = 0?).",
                torch.full_like(scores, 1.0 / len(scores)),
            ),
            (
                "missing normaliser: exp(s) / d gives component-wise attention, not softmax.",
                torch.exp(scores.clamp(max=700)) / len(scores),
            ),
        ]
        if weights.shape == expected.shape and bool(torch.isfinite(weights).all()):
            total = float(weights.sum())
            if not math.isclose(total, 1.0, rel_tol=1e-6) and not any(
                _close(weights, v, 1e-6, 1e-12) for _, v in mistakes
            ):
                raise CheckFailure(
                    f"{check} failed on test case: {case.description}\n"
                    f"  your weights sum to {total:.6g}, but softmax weights sum to 1.\n"
                    "  Diagnosis: a wrong normalisation (an off-by-one in the sum, an extra term in the "
                    "denominator, or a sum over the wrong axis).\n"
                    "  Hint: alpha_i = exp(s_i) / sum_k exp(s_k), the sum running over all d positions."
                )
        _compare(
            check,
            "weights",
            weights,
            expected,
            case,
            mistakes=mistakes,
            hint="s = codes @ query (one score per position), then a softmax over the d positions.",
        )
        _compare(
            check,
            "z",
            result[1],
            x @ expected,
            case,
            mistakes=[("z is the plain average of the bits: the weights were not used.", x.mean(-1))],
            hint="z_s = sum_i weights_i * x_{s,i} for every row s of x, i.e. x @ weights.",
        )
    _passed(check, cases)


# --------------------------------------------------------------------------- gradient checks


def _gradient_mistakes(
    queries: torch.Tensor, codes: torch.Tensor, pair: tuple[int, int]
) -> list[tuple[str, torch.Tensor]]:
    """The population gradient as three classic mistakes would compute it (softmax, xor readout)."""
    _, c1 = readout_constants("xor")
    scores = queries @ codes.T
    weights = attention_weights(scores, "softmax")
    grad_weights = population_grad_weights(weights, pair, "xor")
    u, v = pair
    no_label = grad_weights.clone()
    no_label[0, u] += c1 * weights[1, v]
    no_label[0, v] += c1 * weights[1, u]
    no_label[1, u] += c1 * weights[0, v]
    no_label[1, v] += c1 * weights[0, u]
    right = scores_vjp(scores, weights, grad_weights, "softmax") @ codes
    return [
        (
            "wrong sign: this is minus the gradient (the direction of steepest *descent*).",
            -right,
        ),
        (
            "missing softmax centring term: the softmax Jacobian gives alpha * (g - <alpha, g>), "
            "you computed alpha * g.",
            (weights * grad_weights) @ codes,
        ),
        (
            "forgotten label term: your gradient does not depend on the pair (i*, j*); the term "
            "-c1 (delta_{j,i*} b_{j*} + delta_{j,j*} b_{i*}) comes from E[y z1 z2].",
            scores_vjp(scores, weights, no_label, "softmax") @ codes,
        ),
    ]


def check_population_gradient(
    fn: Callable[..., object], *, only_uniform: bool = False, device: str | torch.device = "cpu"
) -> None:
    r"""Check ``fn(queries, codes, pair) -> grad``, the exact population gradient (softmax, xor readout).

    The reference is :func:`xorlib.gradient.population_gradient`:
    :math:`\nabla_{q_h} L = P^\top\bigl[\alpha_h \odot (g_h - \langle\alpha_h, g_h\rangle)\bigr]`
    with :math:`g_h = \partial L/\partial\alpha_h`.

    Parameters
    ----------
    fn
        The student's function. It receives ``queries`` of shape ``(2, m)``,
        ``codes`` of shape ``(d, m)`` and ``pair = (i, j)`` and returns the
        gradient, shape ``(2, m)``.
    only_uniform
        Test only at :math:`q_1 = q_2 = 0` (uniform attention), for the easier
        version of the exercise; by default random, untied queries are tested too.
    device
        Where the test tensors live.
    """
    fn = _require_callable(fn)
    device = check_device("device", device)
    check = "check_population_gradient"
    settings = [
        (8, 6, "balanced", 0.0, (1, 5), "uniform attention, balanced codes, d=8"),
        (9, 5, "iid", 0.0, (0, 7), "uniform attention, unbalanced iid codes (sum of codes != 0), d=9"),
    ]
    if not only_uniform:
        settings += [
            (10, 6, "iid", 1.5, (2, 3), "random untied queries, d=10"),
            (40, 10, "balanced", 4.0, (31, 7), "random untied queries with sharp heads, d=40"),
        ]
    cases = []
    for k, (d, m, kind, scale, pair, description) in enumerate(settings):
        queries = _random_queries(m, scale, 10 + k, device)
        cases.append(_Case(description, {"queries": queries, "codes": _codes(d, m, kind, k, device), "pair": pair}))
    for case in cases:
        queries, codes, pair = case.inputs["queries"], case.inputs["codes"], case.inputs["pair"]
        expected = population_gradient(queries, codes, pair)
        _compare(
            check,
            "the gradient",
            _call(check, fn, case),
            expected,
            case,
            mistakes=_gradient_mistakes(queries, codes, pair),
            hint="differentiate L(a, b) with respect to the weights, then pull back through the softmax "
            "(alpha * (g - <alpha, g>)) and the codes (scores = queries @ codes.T).",
            d=codes.shape[0],
        )
    _passed(check, cases)


def check_one_step(fn: Callable[..., object], *, device: str | torch.device = "cpu") -> None:
    r"""Check ``fn(codes, pair, lr) -> queries``, one population step of size ``lr`` from zero queries.

    The reference is :func:`xorlib.gradient.one_step_from_uniform`: for
    softmax and the xor readout,
    :math:`q_h^+ = \frac{c_1\eta}{d^2}\bigl(p_{i^*} + p_{j^*} - \tfrac2d\sum_k p_k\bigr)`.

    Parameters
    ----------
    fn
        The student's function. It receives ``codes`` of shape ``(d, m)``,
        ``pair = (i, j)`` and the step size ``lr`` and returns both queries
        after the step, shape ``(2, m)``.
    device
        Where the test tensors live.
    """
    fn = _require_callable(fn)
    device = check_device("device", device)
    check = "check_one_step"
    settings = [
        (8, 6, "balanced", (2, 6), 30.0, "balanced codes, d=8"),
        (9, 6, "iid", (0, 4), 5.0, "unbalanced iid codes (sum of codes != 0), odd d=9"),
        (64, 24, "balanced", (10, 50), 30.0, "balanced codes, d=64"),
    ]
    cases = []
    for k, (d, m, kind, pair, kappa, description) in enumerate(settings):
        lr = lr_for_sharpness(kappa, d)
        cases.append(
            _Case(f"{description}, lr={lr:g}", {"codes": _codes(d, m, kind, k, device), "pair": pair, "lr": lr})
        )
    for case in cases:
        codes, pair, lr = case.inputs["codes"], case.inputs["pair"], case.inputs["lr"]
        expected = one_step_from_uniform(codes, pair, lr)
        zero = torch.zeros_like(expected)
        mistakes = [(text, -lr * grad) for text, grad in _gradient_mistakes(zero, codes, pair)]
        mistakes[0] = ("wrong sign: you stepped up the gradient (q + lr * grad); descent subtracts it.", mistakes[0][1])
        mistakes.append(("one step from zero goes to -lr * grad, you returned the gradient itself.", expected / -lr))
        _compare(
            check,
            "the queries after the step",
            _call(check, fn, case),
            expected,
            case,
            mistakes=mistakes,
            hint="at q = 0 every weight is 1/d; the new queries are 0 - lr * grad, the same for both heads.",
            d=codes.shape[0],
        )
    _passed(check, cases)


# --------------------------------------------------------------------------- check_worst_case_loss


def _tied_weights(d: int, kappa: float, pair: tuple[int, int], seed: int, device: torch.device) -> torch.Tensor:
    """Tied head weights after one population step of sharpness ``kappa`` (as in the book)."""
    codes = _codes(d, max(8, d // 2), "balanced", seed, device)
    queries = one_step_from_uniform(codes, pair, lr_for_sharpness(kappa, d))
    return attention_weights(queries @ codes.T, "softmax")


def check_worst_case_loss(fn: Callable[..., object], *, device: str | torch.device = "cpu") -> None:
    r"""Check ``fn(weights, pair) -> float``: the largest loss over all :math:`2^d` inputs, for tied heads.

    For tied heads (:math:`\alpha_1 = \alpha_2 = \alpha`, xor readout) the loss
    depends on :math:`t = z^2`; with :math:`c = \alpha_{i^*}x_{i^*} + \alpha_{j^*}x_{j^*}` and
    :math:`S = \sum_{k\ne i^*,j^*}|\alpha_k|`, :math:`|z|` ranges over
    :math:`[|c| - S, |c| + S]`. The test cases all have the pair carrying more
    attention than the other positions together (:math:`|c| \ge S` where it
    matters), so the answer is exact. It is compared with the maximum over
    every input (exhaustive enumeration, small ``d``) and with
    :func:`xorlib.gradient.worst_case_loss` (large ``d``).

    Parameters
    ----------
    fn
        The student's function. It receives ``weights`` of shape ``(2, d)`` (two
        equal rows) and ``pair`` and returns one number.
    device
        Where the test tensors live.
    """
    fn = _require_callable(fn)
    device = check_device("device", device)
    check = "check_worst_case_loss"
    # (d, kappa, pair, code seed): seeds picked so that the pair outweighs the rest (exact worst case).
    settings = [(8, 3.0, (1, 4), 0), (10, 5.0, (0, 9), 3), (12, 10.0, (3, 7), 1), (1000, 15.0, (123, 456), 0)]
    cases = [
        _Case(
            f"tied heads after one step of sharpness {kappa:g}, d={d}, pair={pair}",
            {
                "weights": _tied_weights(d, kappa, pair, seed, device),
                "pair": pair,
            },
        )
        for d, kappa, pair, seed in settings
    ]
    for case in cases:
        weights, pair = case.inputs["weights"], case.inputs["pair"]
        d = weights.shape[-1]
        reference = worst_case_loss(weights, pair)
        assert bool(reference.exact), "internal: every test case must have an exact worst case"
        mean = population_loss_weights(weights, pair)
        mistakes = [("you returned the mean loss over the inputs, not the maximum.", mean)]
        got = _to_tensor(check, "the worst-case loss", _call(check, fn, case), case, device)
        if got.numel() == 1 and got.ndim > 0:
            got = got.reshape(())
        counterexample = ""
        if d <= 14:
            losses = exhaustive_losses(weights, pair)
            expected = losses.max()
            mistakes.append(
                ("you returned the smallest loss over the inputs (the best case), not the worst.", losses.min())
            )
            worst_input = all_inputs(d, device=device)[int(losses.argmax())]
            if got.ndim == 0 and bool(torch.isfinite(got)) and bool(got < expected):
                counterexample = (
                    f"the input x = {worst_input.int().tolist()} has loss {float(expected):.6g}, "
                    f"more than your {float(got):.6g}."
                )
        else:
            expected = reference.value
        _compare(
            check,
            "the worst-case loss",
            got,
            expected.reshape(()),
            case,
            mistakes=mistakes,
            hint="for each of the 4 values of (x_i*, x_j*), the extremes of |z| are |c| + S (the other bits "
            "aligned with c) and |c| - S (opposed to it); the loss 0.5 * (1 - y - 2 z^2)^2 is largest at one "
            "of them. Return one number (a max over inputs, not a vector).",
            counterexample=counterexample,
            rtol=1e-6,
            atol=1e-12,
        )
    _passed(check, cases)
