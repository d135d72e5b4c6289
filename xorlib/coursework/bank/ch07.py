"""Chapter 7, the FFNN baseline: the hinge-loss gradients of a two-layer ReLU network; its parameter count."""

from __future__ import annotations

import math

import torch

from ..questions import AutoQuestion, Case, Criterion, Mistake, WrittenQuestion
from ._common import cases, gaussian, pair, samples, seeded


# fmt: off
def hinge_gradients(x, y, w, b, a):
    """Gradients (dw, db, da) of the mean hinge loss of f(x) = sum_j a_j relu(w_j .
    x + b_j).
    """
    # BEGIN SOLUTION
    n = x.shape[0]
    pre = x @ w.T + b  # (n, width): the pre-activations
    hidden = torch.relu(pre)
    f = hidden @ a  # (n,)
    active = (y * f < 1).to(
        x.dtype
    )  # the hinge max(0, 1 - y f) has slope -y where y f < 1
    df = -y * active / n  # d(mean loss)/df_s
    da = hidden.T @ df
    dpre = df[:, None] * a[None, :] * (pre > 0).to(x.dtype)
    return dpre.T @ x, dpre.sum(0), da
    # END SOLUTION
# fmt: on


def _hinge_loss(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor, b: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    return torch.clamp(1 - y * (torch.relu(x @ w.T + b) @ a), min=0).mean()


def _hinge_reference(
    x: torch.Tensor, y: torch.Tensor, w: torch.Tensor, b: torch.Tensor, a: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    params = [p.detach().clone().requires_grad_(True) for p in (w, b, a)]
    return torch.autograd.grad(_hinge_loss(x, y, *params), params)


def _hinge_case(description: str, n: int, d: int, width: int, *labels: object) -> Case:
    x, y = samples(n, d, pair(d, "ch07-q1", *labels), "ch07-q1", *labels)
    w = gaussian((width, d), 1 / math.sqrt(d), "ch07-q1", "w", *labels)
    b = gaussian((width,), 0.1, "ch07-q1", "b", *labels)
    a = gaussian((width,), 2 / math.sqrt(width), "ch07-q1", "a", *labels)
    return Case(f"{description}: n={n}, d={d}, width={width}", (x, y, w, b, a), d=d)


def _hinge_mistakes() -> tuple[Mistake, ...]:
    def everywhere(x, y, w, b, a):  # the gradient of the mean of 1 - y f, hinge ignored
        params = [p.detach().clone().requires_grad_(True) for p in (w, b, a)]
        loss = (1 - y * (torch.relu(x @ params[0].T + params[1]) @ params[2])).mean()
        return torch.autograd.grad(loss, params)

    def no_relu_mask(x, y, w, b, a):
        pre = x @ w.T + b
        hidden = torch.relu(pre)
        df = -y * (y * (hidden @ a) < 1).double() / x.shape[0]
        dpre = df[:, None] * a[None, :]
        return dpre.T @ x, dpre.sum(0), hidden.T @ df

    def summed(x, y, w, b, a):
        return tuple(x.shape[0] * g for g in _hinge_reference(x, y, w, b, a))

    return (
        Mistake("you differentiated 1 - y f everywhere; the hinge contributes only where y f < 1.", everywhere),
        Mistake("the ReLU's derivative is missing: units with w_j . x + b_j <= 0 pass no gradient.", no_relu_mask),
        Mistake("you summed over the samples; the loss is the mean.", summed),
    )


HINGE_GRADIENTS = AutoQuestion(
    id="ch07-q1", title="Hinge-loss gradients of a two-layer network", points=3, level="core", minutes=30,
    prompt=(
        "The baseline is $f(x) = \\sum_j a_j \\operatorname{relu}(\\langle w_j, x\\rangle + b_j)$ with the "
        "mean hinge loss $\\frac1n\\sum_s \\max(0, 1 - y_s f(x_s))$. For `x` `(n, d)`, `y` `(n,)`, `w` "
        "`(width, d)`, `b` `(width,)` and `a` `(width,)`, write `hinge_gradients(x, y, w, b, a)`: the "
        "gradients `(dw, db, da)` in the shapes of `w`, `b`, `a`, without autograd. At the kinks "
        "take the derivative from the side where the function is flat (relu'(0) = 0, and no "
        "hinge gradient at $yf = 1$); the test cases avoid them."
    ),
    solution=hinge_gradients, reference=_hinge_reference,
    public=cases(_hinge_case, ("a small network", 8, 4, 3, "a"), ("a wider network", 64, 10, 32, "b")),
    hidden=seeded(_hinge_case, ("more samples", 500, 20, 16, "c"), ("one hidden unit", 30, 6, 1, "d"),
                  ("a wide network", 40, 8, 100, "e")),
    outputs=("dw", "db", "da"), mistakes=_hinge_mistakes(),
    hint="dL/df_s = -y_s [y_s f_s < 1] / n; then the chain rule through a and the ReLU mask.", autograd=False,
)  # fmt: skip


# fmt: off
def parameter_count(d, width):
    """The number of trainable parameters of f(x) = sum_j a_j relu(w_j . x + b_j) on
    d inputs.
    """
    # BEGIN SOLUTION
    return width * d + width + width  # w, b and a
    # END SOLUTION
# fmt: on


def _count_case(d: int, width: int) -> Case:
    return Case(f"d={d}, width={width}", (d, width), d=d)


PARAMETER_COUNT = AutoQuestion(
    id="ch07-q2", title="How many parameters the baseline trains", points=1, level="warm-up", minutes=5,
    prompt=(
        "Write `parameter_count(d, width)`: the number of trainable numbers of the network "
        "$f(x) = \\sum_{j=1}^{\\text{width}} a_j \\operatorname{relu}(\\langle w_j, x\\rangle + b_j)$ on "
        "$d$ inputs, as an int. Compare it with the two-head model's $2m$."
    ),
    solution=parameter_count, reference=lambda d, width: width * (d + 2),
    public=cases(_count_case, (20, 100), (1000, 512)),
    hidden=lambda seed: (_count_case(7, 1), _count_case(64 + seed % 50, 3000)), outputs=("the count",),
    mistakes=(
        Mistake("you forgot the biases b_j (one per hidden unit).", lambda d, width: width * (d + 1)),
        Mistake("you counted only the first layer w.", lambda d, width: width * d),
        Mistake(
            "this network has no output bias: f is sum_j a_j relu(...), nothing added.", lambda d, w: w * (d + 2) + 1
        ),
    ),
    hint="count w (width x d), b (width) and a (width).", rtol=0.0, atol=0.0,
)  # fmt: skip


COMPARE_BUDGETS = WrittenQuestion(
    id="ch07-w1", title="Parameters against samples", level="core", minutes=15,
    prompt=(
        "The two-head model trains $2m = O(\\log d)$ numbers; the baseline trains "
        "$\\text{width}\\cdot(d+2)$. Discuss what this comparison does and does not say about which "
        "model needs fewer samples."
    ),
    rubric=(
        Criterion(1, "States the counts: logarithmic in $d$ against at least linear in $d$."),
        Criterion(1, "Notes that sample needs are not fixed by parameter counts (the architecture's prior matters)."),
        Criterion(1, "Says what would settle it: measured $n^*$ of both, under the same protocol."),
    ),
    answer=(
        "The attention model's codes are fixed and only its queries train, $2m = O(\\log d)$ numbers, "
        "while the network trains at least $d + 2$ per hidden unit. Fewer parameters do not by "
        "themselves imply fewer samples: what matters is how well the architecture's inductive bias "
        "matches sparse parity (the attention model can only select positions). The comparison that "
        "settles it is the measured sample threshold $n^*(d)$ of both models under one protocol."
    ),
)  # fmt: skip

QUESTIONS = (HINGE_GRADIENTS, PARAMETER_COUNT, COMPARE_BUDGETS)
