"""The exercise checks, both ways: reference solutions pass, classic mistakes fail with a message naming them."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from xorlib.checks import (
    CHECKS,
    CheckFailure,
    check_one_step,
    check_population_gradient,
    check_softmax_head,
    check_worst_case_loss,
)
from xorlib.gradient import population_loss

# ----------------------------------------------------------------------------- reference solutions
# Written as a student would write them, independently of xorlib's implementation.


def softmax_head(query, codes, x):
    scores = codes @ query
    scores = scores - scores.max()
    weights = torch.exp(scores) / torch.exp(scores).sum()
    return weights, x @ weights


def population_gradient(queries, codes, pair, *, centring=True, label=True, sign=1.0):
    c0, c1 = 1.0, 2.0
    u, v = pair
    weights = torch.softmax(queries @ codes.T, dim=-1)

    def head(own, other):
        grad = c1**2 * (own * (other @ other) + 2 * (own @ other) * other - 2 * own * other**2) - c1 * c0 * other
        if label:
            grad[u] -= c1 * other[v]
            grad[v] -= c1 * other[u]
        return grad

    g = torch.stack([head(weights[0], weights[1]), head(weights[1], weights[0])])
    centre = (weights * g).sum(-1, keepdim=True) if centring else 0.0
    return sign * (weights * (g - centre)) @ codes


def population_gradient_autograd(queries, codes, pair):
    queries = queries.clone().requires_grad_(True)
    population_loss(queries, codes, pair).backward()
    return queries.grad


def one_step(codes, pair, lr, *, denominator=None, sign=-1.0, centring=True, label=True):
    d = codes.shape[0]
    denominator = d**2 if denominator is None else denominator
    i, j = pair
    relevant = codes[i] + codes[j] if label else 0.0 * codes[i]
    total = codes.sum(0)
    # Without centring the step at uniform attention is -lr * (1/d) P^T g, g = dL/dalpha at 1/d.
    if not centring:
        g = population_gradient(torch.zeros(2, codes.shape[1], dtype=codes.dtype), codes, pair, centring=False)
        return -sign * -lr * g
    query = (2 * lr / denominator) * (relevant - (2.0 / d) * total)
    return (-sign) * torch.stack([query, query])


def worst_case(weights, pair, *, reduce="max", aligned=True):
    a = weights[0]
    u, v = pair
    rest = a.abs().sum() - a[u].abs() - a[v].abs()
    losses = []
    for xu in (1.0, -1.0):
        for xv in (1.0, -1.0):
            y = -xu * xv
            c = (a[u] * xu + a[v] * xv).abs()
            # aligned=False forgets the inputs whose other bits oppose c (where |z| is smallest).
            ends = (c + rest, (c - rest).clamp(min=0.0)) if aligned else (c + rest,)
            losses += [0.5 * (1 - y - 2 * z**2) ** 2 for z in ends]
    losses = torch.stack(losses)
    return losses.max() if reduce == "max" else losses.mean()


def failure(check: Callable[..., None], fn: Callable[..., object]) -> str:
    with pytest.raises(CheckFailure) as info:
        check(fn)
    return str(info.value)


# ----------------------------------------------------------------------------- the reference passes


@pytest.mark.parametrize(
    ("check", "fn"),
    [
        (check_softmax_head, softmax_head),
        (check_population_gradient, population_gradient),
        (check_population_gradient, population_gradient_autograd),
        (check_one_step, one_step),
        (check_worst_case_loss, worst_case),
    ],
    ids=["softmax_head", "gradient", "gradient_autograd", "one_step", "worst_case"],
)
def test_reference_passes(check, fn, capsys) -> None:
    check(fn)
    assert f"{check.__name__} passed" in capsys.readouterr().out


def test_checks_registry_names_every_check() -> None:
    import xorlib.checks as checks

    assert set(CHECKS) == {name for name in checks.__all__ if name.startswith("check_")}


def test_check_failure_is_an_assertion_error() -> None:
    assert issubclass(CheckFailure, AssertionError)


def test_not_a_function_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="fn must be"):
        check_one_step(42)


# ----------------------------------------------------------------------------- softmax head mistakes


def test_softmax_wrong_sign() -> None:
    def wrong(query, codes, x):
        weights = torch.softmax(-(codes @ query), -1)
        return weights, x @ weights

    assert "wrong sign" in failure(check_softmax_head, wrong)


def test_softmax_without_max_subtraction_overflows_to_nan() -> None:
    def naive(query, codes, x):
        e = torch.exp(codes @ query)
        weights = e / e.sum()
        return weights, x @ weights

    message = failure(check_softmax_head, naive)
    assert "NaN" in message and "largest score" in message and "huge scores" in message


def test_softmax_off_by_one_normalisation() -> None:
    def off_by_one(query, codes, x):
        s = codes @ query
        e = torch.exp(s - s.max())
        weights = e / (e.sum() + 1)
        return weights, x @ weights

    message = failure(check_softmax_head, off_by_one)
    assert "sum to" in message and "normalisation" in message


def test_softmax_componentwise_is_named() -> None:
    def componentwise(query, codes, x):
        weights = torch.exp(codes @ query) / codes.shape[0]
        return weights, x @ weights

    message = failure(check_softmax_head, componentwise)
    assert "component-wise" in message


def test_softmax_wrong_shape() -> None:
    def column(query, codes, x):
        weights, z = softmax_head(query, codes, x)
        return weights[:, None], z

    message = failure(check_softmax_head, column)
    assert "wrong shape" in message and "(6, 1)" in message


def test_softmax_z_ignores_weights() -> None:
    def plain_mean(query, codes, x):
        weights, _ = softmax_head(query, codes, x)
        return weights, x.mean(-1)

    assert "weights were not used" in failure(check_softmax_head, plain_mean)


def test_softmax_not_a_pair() -> None:
    assert "pair (weights, z)" in failure(check_softmax_head, lambda q, p, x: softmax_head(q, p, x)[0])


def test_softmax_not_implemented() -> None:
    def stub(query, codes, x):
        raise NotImplementedError

    assert "not implemented yet" in failure(check_softmax_head, stub)


def test_student_exception_is_reported_with_the_case() -> None:
    def crashes(query, codes, x):
        return codes.T @ query, x  # shape error inside the student's code

    message = failure(check_softmax_head, crashes)
    assert "raised RuntimeError" in message and "test case" in message


def test_returned_list_is_accepted_and_nonnumeric_is_named() -> None:
    def as_lists(query, codes, x):
        weights, z = softmax_head(query, codes, x)
        return weights.tolist(), z.tolist()

    check_softmax_head(as_lists)
    assert "should be a torch.Tensor" in failure(check_softmax_head, lambda q, p, x: ("weights", "z"))


# ----------------------------------------------------------------------------- gradient mistakes


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"sign": -1.0}, "wrong sign"),
        ({"centring": False}, "missing softmax centring term"),
        ({"label": False}, "forgotten label term"),
    ],
)
def test_population_gradient_mistakes(kwargs, expected) -> None:
    assert expected in failure(check_population_gradient, lambda q, p, pair: population_gradient(q, p, pair, **kwargs))


def test_population_gradient_constant_factor() -> None:
    message = failure(check_population_gradient, lambda q, p, pair: 2.0 * population_gradient(q, p, pair))
    assert "2 times the right one" in message and "1/2" in message


def test_population_gradient_uniform_only_accepts_a_uniform_only_solution() -> None:
    def uniform_only(queries, codes, pair):
        assert bool((queries == 0).all()), "this solution only handles q = 0"
        return population_gradient(queries, codes, pair)

    check_population_gradient(uniform_only, only_uniform=True)
    assert "random untied queries" in failure(check_population_gradient, uniform_only)


def test_population_gradient_nan() -> None:
    message = failure(check_population_gradient, lambda q, p, pair: population_gradient(q, p, pair) * torch.nan)
    assert "NaN" in message


# ----------------------------------------------------------------------------- one-step mistakes


def test_one_step_wrong_sign() -> None:
    assert "wrong sign" in failure(check_one_step, lambda codes, pair, lr: one_step(codes, pair, lr, sign=1.0))


def test_one_step_off_by_one_normalisation() -> None:
    def off(codes, pair, lr):
        return one_step(codes, pair, lr, denominator=(codes.shape[0] - 1) ** 2)

    message = failure(check_one_step, off)
    assert "off-by-one" in message and "(d - 1)^2" in message


def test_one_step_missing_centring_fails_on_unbalanced_codes() -> None:
    message = failure(check_one_step, lambda codes, pair, lr: one_step(codes, pair, lr, centring=False))
    assert "missing softmax centring term" in message and "unbalanced" in message


def test_one_step_forgotten_label_term() -> None:
    assert "forgotten label term" in failure(
        check_one_step, lambda codes, pair, lr: one_step(codes, pair, lr, label=False)
    )


def test_one_step_one_head_only_is_a_shape_error() -> None:
    message = failure(check_one_step, lambda codes, pair, lr: one_step(codes, pair, lr)[0])
    assert "wrong shape" in message and "(2, 6)" in message


# ----------------------------------------------------------------------------- worst-case mistakes


def test_worst_case_mean_instead_of_max() -> None:
    def population_mean(weights, pair):
        from xorlib.gradient import population_loss_weights

        return population_loss_weights(weights, pair)

    assert "mean loss" in failure(check_worst_case_loss, population_mean)


def test_worst_case_mean_of_the_candidates_is_wrong_too() -> None:
    message = failure(check_worst_case_loss, lambda w, pair: worst_case(w, pair, reduce="mean"))
    assert "the worst-case loss:" in message and "returned" in message
    assert "Counterexample" in message


def test_worst_case_aligned_bits_only_underestimates_with_a_witness() -> None:
    message = failure(check_worst_case_loss, lambda w, pair: worst_case(w, pair, aligned=False))
    assert "Counterexample: the input x = [" in message


def test_worst_case_vector_instead_of_number() -> None:
    message = failure(check_worst_case_loss, lambda w, pair: torch.stack([worst_case(w, pair)] * 4))
    assert "wrong shape" in message and "()" in message


def test_worst_case_nan() -> None:
    assert "NaN" in failure(check_worst_case_loss, lambda w, pair: float("nan"))


def test_worst_case_sign_error_in_the_label() -> None:
    def flipped_label(weights, pair):
        return worst_case(-weights, pair)  # |c| and S are unchanged: flipping the weights must not matter

    check_worst_case_loss(flipped_label)

    def wrong_label(weights, pair):
        a = weights[0]
        u, v = pair
        rest = a.abs().sum() - a[u].abs() - a[v].abs()
        losses = []
        for xu in (1.0, -1.0):
            for xv in (1.0, -1.0):
                y = xu * xv  # wrong sign of the label
                c = (a[u] * xu + a[v] * xv).abs()
                losses += [0.5 * (1 - y - 2 * z**2) ** 2 for z in (c + rest, (c - rest).clamp(min=0.0))]
        return max(losses)

    assert "check_worst_case_loss failed" in failure(check_worst_case_loss, wrong_label)


def test_checks_leave_no_state_between_calls(capsys) -> None:
    # The student's function may modify its inputs in place; the next case and the reference are unaffected.
    def destructive(weights, pair):
        value = worst_case(weights, pair)
        weights.zero_()
        return value

    check_worst_case_loss(destructive)
    assert "passed" in capsys.readouterr().out
