"""Chapter 4, one step across d: the rest mass without cancellation; the lattice sharpness."""

from __future__ import annotations

import math

import torch

from ..questions import AutoQuestion, Case, Criterion, Mistake, WrittenQuestion
from ._common import cases, gaussian, pair, seeded


# fmt: off
def rest_mass(scores, pair):
    """The softmax mass of each head outside the hidden pair, shape (2,), accurate
    even when it is 1e-200.
    """
    # BEGIN SOLUTION
    u, v = pair
    rest = scores.clone()
    rest[:, [u, v]] = -math.inf
    return torch.exp(
        torch.logsumexp(rest, dim=-1) - torch.logsumexp(scores, dim=-1)
    )
    # END SOLUTION
# fmt: on


def _rest_reference(scores: torch.Tensor, pair: tuple[int, int]) -> torch.Tensor:
    s = scores.double()
    keep = torch.ones(s.shape[-1], dtype=torch.bool)
    keep[list(pair)] = False
    return torch.exp(torch.logsumexp(s[:, keep], dim=-1) - torch.logsumexp(s, dim=-1))


def _rest_case(description: str, d: int, base: float, height: tuple[float, float], *labels: object) -> Case:
    hidden = pair(d, "ch04-q1", *labels)
    scores = base + gaussian((2, d), 1.0, "ch04-q1", *labels)
    scores[0, list(hidden)] += height[0]
    scores[1, list(hidden)] += height[1]
    return Case(f"{description}, d={d}", (scores, hidden), d=d)


def _rest_mistakes() -> tuple[Mistake, ...]:
    def one_minus_pair(scores, pair):
        weights = torch.softmax(scores, dim=-1)
        return 1.0 - weights[:, pair[0]] - weights[:, pair[1]]

    def pair_mass(scores, pair):
        weights = torch.softmax(scores, dim=-1)
        return weights[:, pair[0]] + weights[:, pair[1]]

    return (
        Mistake(
            "you computed 1 - alpha_u - alpha_v, which cancels: at these scores it is rounding noise. "
            "Sum the rest's weights, or better, subtract log-sum-exps.",
            one_minus_pair,
        ),
        Mistake("you returned the pair's mass alpha_u + alpha_v, not the rest's.", pair_mass),
    )


REST_MASS = AutoQuestion(
    id="ch04-q1", title="The rest mass, without cancellation", points=2, level="warm-up", minutes=10,
    prompt=(
        "For scores `scores` of shape `(2, d)` (two softmax heads) and the hidden `pair` $(u, v)$, write "
        "`rest_mass(scores, pair)`: $E_h = \\sum_{k \\ne u, v} \\alpha_{h,k}$ for both heads, shape `(2,)`, "
        "with a *relative* error below $10^{-6}$ even when $E_h$ is $10^{-200}$ and the scores are near "
        "$\\pm 10^4$. Hint: $\\log E_h = \\operatorname{lse}(s_{h,\\text{rest}}) - \\operatorname{lse}(s_h)$."
    ),
    solution=rest_mass, reference=_rest_reference,
    public=cases(_rest_case, ("moderate scores: rest masses near 1/2 and 1/10", 10, 0.0, (1.0, 3.5), "a"),
                 ("sharp heads: rest masses near 1e-11", 100, 0.0, (30.0, 31.0), "b"),
                 ("scores near 10^4, rest masses near 1e-15", 50, 1e4, (40.0, 38.0), "c")),
    hidden=seeded(_rest_case, ("scores near -10^4, rest masses near 1e-200", 200, -1e4, (465.0, 470.0), "d"),
                  ("one flat head, one sharp head, scores near 10^4", 64, 1e4, (0.0, 60.0), "e"),
                  ("moderate scores", 7, 2.0, (2.0, 0.5), "f")),
    outputs=("the rest masses",), mistakes=_rest_mistakes(),
    hint="torch.logsumexp is stable; exp of a difference of two log-sum-exps never cancels.", rtol=1e-6, atol=0.0,
    nan_hint="an exponential overflowed: subtract the largest score, or work with log-sum-exps.",
)  # fmt: skip


# fmt: off
def lattice_sharpness(d, m, epsilon):
    """The sharpness kappa = ln((d - 2) / (2 E)) / (4 / m) that certifies worst-case
    loss epsilon (sign codes).
    """
    # BEGIN SOLUTION
    root = math.sqrt(epsilon / 2)
    target = root / (
        2 * (1 + math.sqrt(1 - root))
    )  # E = (1 - sqrt(1 - sqrt(eps/2))) / 2, without cancellation
    return math.log((d - 2) / (2 * target)) / (4 / m)
    # END SOLUTION
# fmt: on


def _rest_target(epsilon: float) -> float:
    return (1 - math.sqrt(1 - math.sqrt(epsilon / 2))) / 2


def _sharpness_reference(d: int, m: int, epsilon: float) -> float:
    return math.log((d - 2) / (2 * _rest_target(epsilon))) * m / 4


def _sharpness_case(d: int, m: int, epsilon: float, seed: int = 0) -> Case:
    d += 2 * (seed % 997)  # the teacher's seed moves the hidden cases
    return Case(f"d={d}, m={m}, epsilon={epsilon:g}", (d, m, epsilon), d=d)


LATTICE_SHARPNESS = AutoQuestion(
    id="ch04-q2", title="The sharpness from the lattice step", points=2, level="warm-up", minutes=10,
    prompt=(
        "For sign codes every positive margin is a multiple of the lattice step $4/m$, so one sharpness "
        "works for every draw whose margin is positive. Write `lattice_sharpness(d, m, epsilon)`: "
        "$\\kappa = \\ln\\frac{d-2}{2E_\\varepsilon} \\big/ \\frac4m$ with "
        "$E_\\varepsilon = \\tfrac12\\bigl(1 - \\sqrt{1 - \\sqrt{\\varepsilon/2}}\\bigr)$, the rest mass at "
        "which $32E^2(1-E)^2 = \\varepsilon$; return a float. It must stay accurate for "
        "$\\varepsilon = 10^{-6}$ and $d = 10^8$."
    ),
    solution=lattice_sharpness, reference=_sharpness_reference,
    public=cases(_sharpness_case, (64, 24, 1e-2), (1000, 40, 1e-3)),
    hidden=seeded(_sharpness_case, (10**6, 80, 1e-4), (16, 16, 0.1), (10**8, 108, 1e-6)), outputs=("kappa",),
    mistakes=(
        Mistake(
            "you used epsilon itself as the rest-mass target; the target is E = (1 - sqrt(1 - sqrt(eps/2)))/2.",
            lambda d, m, eps: math.log((d - 2) / (2 * eps)) * m / 4,
        ),
        Mistake(
            "d - 1 where d - 2 belongs: the rest has d - 2 positions.",
            lambda d, m, eps: math.log((d - 1) / (2 * _rest_target(eps))) * m / 4,
        ),
        Mistake(
            "the lattice step is 4/m, so kappa = ln(...) * m / 4; you divided by m / 4.",
            lambda d, m, eps: math.log((d - 2) / (2 * _rest_target(eps))) * 4 / m,
        ),
        Mistake(
            "a missing 1/2 inside: the target solves 32 S^2 (1 - S)^2 = eps, i.e. uses sqrt(eps/2), not sqrt(eps).",
            lambda d, m, eps: math.log((d - 2) / (1 - math.sqrt(1 - math.sqrt(eps)))) * m / 4,
        ),
    ),
    hint="natural logarithms; E_eps is about sqrt(eps/32) for small eps.", rtol=1e-8,
)  # fmt: skip


NO_PAIR_NEEDED = WrittenQuestion(
    id="ch04-w1", title="A step size chosen without the pair", level="core", minutes=15,
    prompt=(
        "The certified step of the tied model depends on the margin between the pair and the "
        "closest other position, which depends on the unknown pair. Explain why the lattice step "
        "$4/m$ lets us choose the step without knowing the pair, and what can still go wrong."
    ),
    rubric=(
        Criterion(1, "With sign codes the margins are multiples of $4/m$, so a positive margin is at least $4/m$."),
        Criterion(1, "A sharpness certified at margin $4/m$ is then certified for every positive margin."),
        Criterion(1, "What can fail: a tie (margin 0), with probability at most $(d-2)(3/4)^m$."),
    ),
    answer=(
        "For sign codes with entries $\\pm 1/\\sqrt m$, the margin $\\langle p_u - p_k, p_u + p_v\\rangle$ "
        "is $4/m$ times the number of coordinates where $p_u$ and $p_v$ agree and $p_k$ differs, so every "
        "positive margin is at least $4/m$. The rest-mass bound decreases with the margin, so the "
        "sharpness that certifies margin $4/m$ certifies them all, whatever the pair. It fails only "
        "when some position ties with the pair (margin 0); a union bound puts that probability at "
        "most $(d-2)(3/4)^m$."
    ),
)  # fmt: skip

QUESTIONS = (REST_MASS, LATTICE_SHARPNESS, NO_PAIR_NEEDED)
