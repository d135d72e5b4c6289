"""Chapter 3, the split model: the product-readout gradient at an antisymmetric start; the self-certified step."""

from __future__ import annotations

import math

import torch

from ...model import ModelConfig
from ...population import population
from ..questions import AutoQuestion, Case, Criterion, Mistake, WrittenQuestion
from ._common import cases, codes, gaussian, gradient_mistakes, pair, seeded


# fmt: off
def split_gradient(queries, codes, pair):
    """The exact population gradient of the split model (softmax, f = -z1 z2) in the
    queries, shape (2, m).
    """
    # BEGIN SOLUTION
    u, v = pair
    weights = torch.softmax(queries @ codes.T, dim=-1)

    def weight_gradient(own, other):  # c0 = 0, c1 = 1
        grad = (
            own * (other @ other) + 2 * (own @ other) * other - 2 * own * other**2
        )
        grad[u] -= other[v]  # the label term
        grad[v] -= other[u]
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


def _split_reference(queries: torch.Tensor, codes: torch.Tensor, pair: tuple[int, int]) -> torch.Tensor:
    model = ModelConfig(codes.shape[0], "split", m=codes.shape[1], code_kind="gaussian")  # its codes: `codes`
    return population(model, queries, pair, codes=codes).gradient


def _split_case(description: str, d: int, m: int, kind: str, sigma: float, *labels: object) -> Case:
    q1 = gaussian((m,), sigma / math.sqrt(m), "ch03-q1", *labels)
    queries = torch.stack([q1, -q1])  # the antisymmetric start q2 = -q1
    hidden = pair(d, "ch03-q1", *labels)
    return Case(f"{description}, d={d}", (queries, codes(d, m, kind, "ch03-q1", *labels), hidden), d=d)


SPLIT_GRADIENT = AutoQuestion(
    id="ch03-q1", title="The population gradient of the split model", points=3, level="core", minutes=25,
    prompt=(
        "Write `split_gradient(queries, codes, pair)`: the exact population gradient in the queries, "
        "shape `(2, m)`, for softmax attention and the product readout $f = -z_1 z_2$ "
        "($c_0 = 0$, $c_1 = 1$). The cases start antisymmetric, $q_2 = -q_1$, but your function "
        "should be right at any queries."
    ),
    solution=split_gradient, reference=_split_reference,
    public=cases(_split_case, ("antisymmetric start, sigma=1, balanced codes", 8, 6, "balanced", 1.0, "a"),
                 ("antisymmetric start, sigma=0.5, iid codes", 10, 6, "iid", 0.5, "b")),
    hidden=seeded(_split_case, ("antisymmetric start, sigma=3 (sharp heads)", 40, 12, "balanced", 3.0, "c"),
                  ("antisymmetric start, odd d, balanced codes", 15, 7, "balanced", 1.0, "d"),
                  ("antisymmetric start, Gaussian codes", 12, 8, "gaussian", 2.0, "e")),
    outputs=("the gradient",),
    mistakes=(
        Mistake("wrong sign: this is minus the gradient.", lambda q, p, pr: -_split_reference(q, p, pr)),
        Mistake(
            "you used the tied readout (c0 = 1, c1 = 2); the split model has f = -z1 z2 (c0 = 0, c1 = 1).",
            lambda q, p, pr: (
                population(ModelConfig(p.shape[0], "tied", m=p.shape[1], code_kind="gaussian"), q, pr, codes=p).gradient
            ),
        ),
        Mistake(
            "missing softmax centring: alpha * (g - <alpha, g>), not alpha * g.",
            lambda q, p, pr: gradient_mistakes(q, p, pr, 0.0, 1.0)[0],
        ),
        Mistake(
            "forgotten label term -(delta_{j,u} b_v + delta_{j,v} b_u).",
            lambda q, p, pr: gradient_mistakes(q, p, pr, 0.0, 1.0)[1],
        ),
    ),
    hint="the tied model's gradient with c0 = 0, c1 = 1; the two heads now have different weights.",
    forbidden=("xorlib.population.population",),
)  # fmt: skip


# fmt: off
def self_certified_step(direction, scores, target):
    """The step eta = max_h (R_h + ln((d-1)/E)) / gap_h from the direction (2, d),
    start scores (2, d), target E.
    """
    # BEGIN SOLUTION
    d = scores.shape[-1]
    top = torch.topk(direction, 2, dim=-1).values  # (2 heads, 2 largest entries)
    gaps = top[:, 0] - top[:, 1]
    if bool((gaps <= 0).any()):
        return math.inf  # a tie at the top: no step certifies this head
    spreads = scores.max(-1).values - scores.min(-1).values
    return float(((spreads + math.log((d - 1) / target)) / gaps).max())
    # END SOLUTION
# fmt: on


def _step_reference(direction: torch.Tensor, scores: torch.Tensor, target: float) -> float:
    d = scores.shape[-1]
    ordered = direction.sort(dim=-1, descending=True).values
    gaps = ordered[:, 0] - ordered[:, 1]
    if not bool((gaps > 0).all()):
        return math.inf
    spreads = scores.amax(-1) - scores.amin(-1)
    return max(float((spreads[h] + math.log((d - 1) / target)) / gaps[h]) for h in range(2))


def _certify_case(description: str, d: int, target: float, tie: bool, *labels: object) -> Case:
    direction = gaussian((2, d), 1.0, "ch03-q2", "t", *labels)
    scores = gaussian((2, d), 0.3, "ch03-q2", "s", *labels)
    if tie:
        top = int(direction[1].argmax())
        direction[1, (top + 1) % d] = direction[1, top]
    return Case(f"{description}, d={d}, E={target:g}", (direction, scores, target), d=d)


def _certify_mistakes() -> tuple[Mistake, ...]:
    def min_over_heads(direction, scores, target):
        d = scores.shape[-1]
        ordered = direction.sort(dim=-1, descending=True).values
        gaps = ordered[:, 0] - ordered[:, 1]
        spreads = scores.amax(-1) - scores.amin(-1)
        return float(((spreads + math.log((d - 1) / target)) / gaps).min())

    def full_range_gap(direction, scores, target):
        d = scores.shape[-1]
        gaps = direction.amax(-1) - direction.amin(-1)
        spreads = scores.amax(-1) - scores.amin(-1)
        return float(((spreads + math.log((d - 1) / target)) / gaps).max())

    def no_spread(direction, scores, target):
        d = scores.shape[-1]
        ordered = direction.sort(dim=-1, descending=True).values
        return float((math.log((d - 1) / target) / (ordered[:, 0] - ordered[:, 1])).max())

    def d_not_d_minus_1(direction, scores, target):
        d = scores.shape[-1]
        ordered = direction.sort(dim=-1, descending=True).values
        spreads = scores.amax(-1) - scores.amin(-1)
        return float(((spreads + math.log(d / target)) / (ordered[:, 0] - ordered[:, 1])).max())

    return (
        Mistake(
            "you took the smaller of the two heads' steps; both must be certified, so take the larger.", min_over_heads
        ),
        Mistake(
            "the gap is between the largest and the SECOND largest entry, not the largest and the smallest.",
            full_range_gap,
        ),
        Mistake("you left out the spread R_h of the start scores.", no_spread),
        Mistake(
            "ln(d / E) where ln((d - 1)/E) belongs: the d - 1 positions other than the head's top.", d_not_d_minus_1
        ),
    )


SELF_CERTIFIED_STEP = AutoQuestion(
    id="ch03-q2", title="A step size that certifies itself", points=2, level="warm-up", minutes=10,
    prompt=(
        "A step of size $\\eta$ moves the scores of head $h$ from $s_h$ to $s_h + \\eta\\, t_h$. Let "
        "$\\gamma_h$ be the gap between the largest and the second largest entry of $t_h$ and "
        "$R_h = \\max_k s_{h,k} - \\min_k s_{h,k}$. Then the rest mass of head $h$ (everything but its "
        "top position) is at most $(d-1)e^{R_h - \\eta\\gamma_h}$. Write "
        "`self_certified_step(direction, scores, target)`: the smallest $\\eta$ that makes this bound "
        "at most `target` $= E$ for both heads, "
        "$\\eta = \\max_h (R_h + \\ln\\tfrac{d-1}{E})/\\gamma_h$, as a float; `math.inf` when a head "
        "has a tie at its top ($\\gamma_h = 0$). `direction` and `scores` have shape `(2, d)`. The "
        "step uses no knowledge of the hidden pair."
    ),
    solution=self_certified_step, reference=_step_reference,
    public=cases(_certify_case, ("random direction and start", 8, 1e-3, False, "a"),
                 ("random direction and start", 100, 1e-6, False, "b"),
                 ("head 2 has a tie at the top of its direction", 12, 1e-3, True, "c")),
    hidden=seeded(_certify_case, ("random direction and start", 33, 1e-4, False, "d"),
                  ("random direction and start", 1000, 1e-8, False, "e"),
                  ("a tie at the top of head 2", 50, 1e-2, True, "f")),
    outputs=("the step size",), mistakes=_certify_mistakes(),
    hint="sort each head's direction; the gap is the first entry minus the second.", rtol=1e-9,
)  # fmt: skip


WHY_ANTISYMMETRIC = WrittenQuestion(
    id="ch03-w1", title="Why the split model cannot start at zero", level="core", minutes=20,
    prompt=(
        "Start the split model at $q_1 = q_2 = 0$. What does one gradient step do to the two heads, "
        "and what loss does the model keep on the inputs whose hidden bits differ? Why does the "
        "antisymmetric start $q_2 = -q_1$ fix this?"
    ),
    rubric=(
        Criterion(1, "At zero both heads get the same gradient, so they stay equal and both sit on the pair."),
        Criterion(
            1,
            "Equal heads give $z_1 = z_2$, so $f = -z^2 \\le 0$ never fits $y = +1$: those inputs keep loss $\\tfrac12$.",
        ),
        Criterion(1, "The antisymmetric start breaks the symmetry: each head moves to one hidden bit."),
    ),
    answer=(
        "At $q = 0$ both heads have uniform weights and receive the same gradient, so after any "
        "number of steps $q_1 = q_2$ and $z_1 = z_2 = z$. Sitting on both hidden bits gives "
        "$z = (x_{i^*} + x_{j^*})/2$, so $f = -z^2$ is $-1$ when the bits agree and $0$ when they "
        "differ; the label is $-1$ and $+1$, so the inputs with differing bits keep loss $\\tfrac12$. "
        "With $q_2 = -q_1$ the heads start apart, the gradient pushes them to different hidden bits, "
        "and $f = -x_{i^*}x_{j^*} = y$ becomes reachable."
    ),
)  # fmt: skip

QUESTIONS = (SPLIT_GRADIENT, SELF_CERTIFIED_STEP, WHY_ANTISYMMETRIC)
