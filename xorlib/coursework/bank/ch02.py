"""Chapter 2, the tied model in one step: the population gradient, the step from zero, the exact worst case."""

from __future__ import annotations

import torch

from ...model import ModelConfig
from ...population import population
from ..questions import AutoQuestion, Case, Criterion, Mistake, WrittenQuestion
from ._common import cases, codes, gaussian, gradient_mistakes, pair, peaked_scores, seeded


# fmt: off
def tied_gradient(queries, codes, pair):
    """The exact population gradient of the tied model in the queries (softmax, f =
    1 - 2 z1 z2), shape (2, m).
    """
    # BEGIN SOLUTION
    c0, c1 = 1.0, 2.0
    u, v = pair
    weights = torch.softmax(queries @ codes.T, dim=-1)

    def weight_gradient(own, other):
        grad = (
            c1**2
            * (
                own * (other @ other)
                + 2 * (own @ other) * other
                - 2 * own * other**2
            )
            - c1 * c0 * other
        )
        # the label term, from E[y z1 z2] = -(a_u b_v + a_v b_u)
        grad[u] -= c1 * other[v]
        grad[v] -= c1 * other[u]
        return grad

    g = torch.stack(
        [
            weight_gradient(weights[0], weights[1]),
            weight_gradient(weights[1], weights[0]),
        ]
    )
    return (weights * (g - (weights * g).sum(-1, keepdim=True))) @ codes
    # END SOLUTION
# fmt: on


def _gradient_reference(queries: torch.Tensor, codes: torch.Tensor, pair: tuple[int, int]) -> torch.Tensor:
    model = ModelConfig(codes.shape[0], "tied", m=codes.shape[1], code_kind="gaussian")  # its codes: `codes`
    return population(model, queries, pair, codes=codes).gradient


def _gradient_case(description: str, d: int, m: int, kind: str, scale: float, *labels: object) -> Case:
    queries = gaussian((2, m), scale, "ch02-q1", *labels)
    return Case(description, (queries, codes(d, m, kind, "ch02-q1", *labels), pair(d, "ch02-q1", *labels)), d=d)


TIED_GRADIENT = AutoQuestion(
    id="ch02-q1", title="The exact population gradient of the tied model", points=3, level="core", minutes=35,
    prompt=(
        "Write `tied_gradient(queries, codes, pair)`: the exact gradient of the population loss "
        "$L = \\mathbb E_x[\\tfrac12(f - y)^2]$ in the queries, shape `(2, m)`, for softmax attention "
        "and the tied readout $f = 1 - 2 z_1 z_2$, at *any* queries (the two heads may differ). "
        "Use the closed form of $\\partial L/\\partial \\alpha_h$, then pull it back through the "
        "softmax and the codes. No sampling: the answer is compared with the exact value to about six digits."
    ),
    solution=tied_gradient, reference=_gradient_reference,
    public=cases(_gradient_case, ("uniform attention (zero queries), balanced codes, d=8", 8, 6, "balanced", 0.0, "a"),
                 ("uniform attention, unbalanced iid codes, d=9", 9, 5, "iid", 0.0, "b"),
                 ("two different random queries, d=10", 10, 6, "iid", 1.5, "c")),
    hidden=seeded(_gradient_case, ("sharp untied heads, balanced codes, d=40", 40, 10, "balanced", 4.0, "d"),
                  ("random queries, odd d=17, iid codes", 17, 7, "iid", 2.0, "e"),
                  ("random queries, Gaussian codes, d=12", 12, 8, "gaussian", 1.0, "f")),
    outputs=("the gradient",),
    mistakes=(
        Mistake(
            "wrong sign: this is minus the gradient (the direction of steepest descent).",
            lambda q, p, pr: -_gradient_reference(q, p, pr),
        ),
        Mistake(
            "missing softmax centring: the softmax Jacobian gives alpha * (g - <alpha, g>), you computed alpha * g.",
            lambda q, p, pr: gradient_mistakes(q, p, pr, 1.0, 2.0)[0],
        ),
        Mistake(
            "forgotten label term: the term -c1 (delta_{j,u} b_v + delta_{j,v} b_u), from E[y z1 z2], is missing.",
            lambda q, p, pr: gradient_mistakes(q, p, pr, 1.0, 2.0)[1],
        ),
        Mistake(
            "you used the split model's readout (c0 = 0, c1 = 1); the tied model has f = 1 - 2 z1 z2.",
            lambda q, p, pr: (
                population(
                    ModelConfig(p.shape[0], "split", m=p.shape[1], code_kind="gaussian"), q, pr, codes=p
                ).gradient
            ),
        ),
    ),
    hint="differentiate L(a, b) in the weights, pull back through the softmax (alpha * (g - <alpha, g>)) "
    "and the codes (scores = queries @ codes.T).",
    forbidden=("xorlib.population.population",),
)  # fmt: skip


# fmt: off
def tied_step_from_zero(codes, pair, lr):
    """Both queries after one population gradient step of size lr from q1 = q2 = 0,
    shape (2, m).
    """
    # BEGIN SOLUTION
    d = codes.shape[0]
    i, j = pair
    query = (2.0 * lr / d**2) * (codes[i] + codes[j] - (2.0 / d) * codes.sum(0))
    return torch.stack([query, query])
    # END SOLUTION
# fmt: on


def _step_reference(codes: torch.Tensor, pair: tuple[int, int], lr: float) -> torch.Tensor:
    zero = torch.zeros(2, codes.shape[1], dtype=codes.dtype)
    model = ModelConfig(codes.shape[0], "tied", m=codes.shape[1], code_kind="gaussian")  # its codes: `codes`
    return -lr * population(model, zero, pair, codes=codes).gradient


def _step_case(description: str, d: int, m: int, kind: str, sharpness: float, *labels: object) -> Case:
    # the step that gives the pair a score of `sharpness` times its overlap
    lr = sharpness * d**2 / 2
    return Case(
        f"{description}, lr={lr:g}", (codes(d, m, kind, "ch02-q2", *labels), pair(d, "ch02-q2", *labels), lr), d=d
    )


def _step_mistakes() -> tuple[Mistake, ...]:
    def uncentred(codes, pair, lr):
        d = codes.shape[0]
        query = (2.0 * lr / d**2) * (codes[pair[0]] + codes[pair[1]])
        return torch.stack([query, query])

    return (
        Mistake(
            "wrong sign: you stepped up the gradient (q + lr * grad); descent subtracts it.",
            lambda p, pr, lr: -_step_reference(p, pr, lr),
        ),
        Mistake(
            "you dropped the centring term -(2/d) sum_k p_k: it vanishes for balanced codes, not for these.", uncentred
        ),
        Mistake(
            "you returned the gradient itself; one step from zero lands at -lr * grad.",
            lambda p, pr, lr: _step_reference(p, pr, lr) / -lr,
        ),
    )


TIED_STEP = AutoQuestion(
    id="ch02-q2", title="One step from zero", points=2, level="warm-up", minutes=10,
    prompt=(
        "Write `tied_step_from_zero(codes, pair, lr)`: both queries after one population gradient step "
        "of size `lr` from $q_1 = q_2 = 0$ (softmax, tied readout), shape `(2, m)`, for *any* codes "
        "`(d, m)`: balanced or not, $d$ even or odd."
    ),
    solution=tied_step_from_zero, reference=_step_reference,
    public=cases(_step_case, ("balanced codes, d=8", 8, 6, "balanced", 30.0, "a"),
                 ("balanced codes, d=64", 64, 24, "balanced", 30.0, "b")),
    hidden=seeded(_step_case, ("unbalanced iid codes (the codes do not sum to zero), odd d=9", 9, 6, "iid", 5.0, "c"),
                  ("Gaussian codes, d=16", 16, 8, "gaussian", 12.0, "d"),
                  ("balanced codes, odd d=21", 21, 9, "balanced", 20.0, "e")),
    outputs=("the queries after the step",), mistakes=_step_mistakes(),
    hint="at q = 0 every weight is 1/d; the new queries are 0 - lr * grad, the same for both heads.",
    forbidden=("xorlib.population.population",),
)  # fmt: skip


# fmt: off
def tied_worst_case(weights, pair):
    """The largest loss over all 2^d inputs for tied softmax heads with weights (d,)
    (rest mass <= 1/2), in O(d).
    """
    # BEGIN SOLUTION
    u, v = pair
    # E, the rest mass: the attention outside the pair
    rest = weights.sum() - weights[u] - weights[v]
    gap = (weights[u] - weights[v]).abs()
    # hidden bits equal (y = -1): |z| can fall to 1 - 2E
    agree = 32 * rest**2 * (1 - rest) ** 2
    # hidden bits differ (y = +1): |z| can rise to gap + E
    differ = 2 * (gap + rest) ** 4
    return float(torch.maximum(agree, differ))
    # END SOLUTION
# fmt: on


def _worst_reference(weights: torch.Tensor, pair: tuple[int, int]) -> float:
    u, v = pair
    others = torch.ones_like(weights, dtype=torch.bool)
    others[[u, v]] = False
    rest = weights[others].sum()
    gap = (weights[u] - weights[v]).abs()
    return float(torch.maximum(32 * rest**2 * (1 - rest) ** 2, 2 * (gap + rest) ** 4))


def _worst_case(description: str, d: int, height: float, skew: float, *labels: object) -> Case:
    hidden = pair(d, "ch02-q3", *labels)
    scores = peaked_scores(d, hidden, height, 1.0, "ch02-q3", *labels)
    scores[hidden[0]] += skew  # the two pair weights differ by a factor e^skew
    return Case(f"{description}, d={d}", (torch.softmax(scores, -1), hidden), d=d)


def _worst_mistakes() -> tuple[Mistake, ...]:
    def mean_loss(weights, pair):
        a, (u, v) = weights, pair
        m4 = 3 * (a @ a) ** 2 - 2 * (a**4).sum()  # E[z^4]
        return float(0.5 * (1 + 1 - 2 * 2 * (a @ a + 2 * a[u] * a[v]) + 4 * m4))

    def agree_only(weights, pair):
        rest = weights.sum() - weights[pair[0]] - weights[pair[1]]
        return float(32 * rest**2 * (1 - rest) ** 2)

    def differ_only(weights, pair):
        rest = weights.sum() - weights[pair[0]] - weights[pair[1]]
        return float(2 * ((weights[pair[0]] - weights[pair[1]]).abs() + rest) ** 4)

    return (
        Mistake("you returned the mean loss over the inputs, not the largest.", mean_loss),
        Mistake("you only considered inputs whose hidden bits agree (y = -1); the others can be worse.", agree_only),
        Mistake("you only considered inputs whose hidden bits differ (y = +1); the others can be worse.", differ_only),
    )


TIED_WORST_CASE = AutoQuestion(
    id="ch02-q3", title="The worst case over all inputs, in O(d)", points=3, level="core", minutes=20,
    prompt=(
        "After the step the two heads are tied, $\\alpha_1 = \\alpha_2 = \\alpha$ (softmax weights, "
        "shape `(d,)`). Write `tied_worst_case(weights, pair)`: the largest loss "
        "$\\tfrac12(1 - 2z^2 - y)^2$ over all $2^d$ inputs, as a float, in $O(d)$ time, without "
        "enumerating inputs. You may assume the rest mass $E = \\sum_{k \\ne i^*, j^*} \\alpha_k$ is "
        "at most $\\tfrac12$. Hint: write $z = z_{uv} + z_{\\text{rest}}$ with $z_{uv} = \\alpha_{i^*}x_{i^*} + \\alpha_{j^*}x_{j^*}$ "
        "and ask how large and how small $|z|$ can be, separately for $y = -1$ and $y = +1$."
    ),
    solution=tied_worst_case, reference=_worst_reference,
    public=cases(_worst_case, ("tied heads after a moderate step", 8, 3.0, 0.0, "a"),
                 ("unequal pair weights", 12, 5.0, 0.7, "b"),
                 ("far too many inputs to enumerate", 1000, 12.0, 0.0, "c")),
    hidden=seeded(_worst_case, ("rest mass near 1/2", 16, 2.7, 0.0, "d"),
                  ("strongly unequal pair weights", 10, 6.0, 2.0, "e"), ("a sharp head", 5000, 18.0, 0.3, "f")),
    outputs=("the worst-case loss",), mistakes=_worst_mistakes(),
    hint="for each value of y, |z| ranges over [|c| - S, |c| + S]; the loss is largest at one end.", rtol=1e-9,
    atol=1e-15, forbidden=("xorlib.certify.worst_case_loss", "xorlib.certify.certify_scores"),
)  # fmt: skip


HEADS_STAY_TIED = WrittenQuestion(
    id="ch02-w1", title="A one-head model in disguise", level="core", minutes=15,
    prompt=(
        "Explain why, in the tied model started at $q_1 = q_2 = 0$, the two queries are still equal "
        "after any number of full-batch gradient steps. What does that mean for the number of "
        "parameters that do the work?"
    ),
    rubric=(
        Criterion(1, "The loss is symmetric under exchanging the heads, so at $q_1 = q_2$ both gradients are equal."),
        Criterion(1, "Induction: equal queries stay equal after every step."),
        Criterion(1, "Conclusion: effectively one head, $m$ numbers (not $2m$) do the work."),
    ),
    answer=(
        "$f = 1 - 2z_1z_2$ and the loss are unchanged when the heads are swapped. At a point with "
        "$q_1 = q_2$ the swap maps the point to itself, so the gradient in $q_1$ equals the gradient in "
        "$q_2$; a gradient step keeps $q_1 = q_2$, and by induction every later step does. The model is "
        "a one-head model with $f = 1 - 2z^2$: its $m$ query entries are the parameters that matter."
    ),
)  # fmt: skip

QUESTIONS = (TIED_GRADIENT, TIED_STEP, TIED_WORST_CASE, HEADS_STAY_TIED)
