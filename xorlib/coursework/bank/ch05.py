"""Chapter 5, attention variants: ReLU and sigmoid attention, each with its pull-back (a vector-Jacobian product)."""

from __future__ import annotations

import math

import torch

from ...attention import attention_weights
from ...model import ModelConfig
from ..questions import AutoQuestion, Case, Criterion, Mistake, WrittenQuestion
from ._common import cases, gaussian, seeded


def _autograd_pullback(kind: str, scores: torch.Tensor, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The weights and :math:`(\\partial\\alpha/\\partial s)^\\top g` by automatic
    differentiation.
    """
    s = scores.detach().clone().requires_grad_(True)
    weights = attention_weights(ModelConfig(s.shape[-1], attention=kind), s)
    (pullback,) = torch.autograd.grad(weights, s, grad_outputs=grad)
    return weights.detach(), pullback


def _variant_case(description: str, d: int, scale: float, zeros: int, question: str, *labels: object) -> Case:
    scores = gaussian((2, d), scale, question, "s", *labels)
    scores[:, :zeros] = 0.0  # exact zeros, where the ReLU has its kink
    grad = gaussian((2, d), 1.0, question, "g", *labels)
    return Case(f"{description}, d={d}", (scores, grad), d=d)


# fmt: off
def relu_attention(scores, grad):
    """ReLU attention weights relu(s)/d and the pull-back (d alpha/d s)^T grad, both
    of shape (2, d).
    """
    # BEGIN SOLUTION
    d = scores.shape[-1]
    weights = torch.relu(scores) / d
    # the derivative at s = 0 is taken as 0
    pullback = (scores > 0).to(grad.dtype) * grad / d
    return weights, pullback
    # END SOLUTION
# fmt: on


def _relu_mistakes() -> tuple[Mistake, ...]:
    def at_zero(scores, grad):
        d = scores.shape[-1]
        return torch.relu(scores) / d, (scores >= 0).double() * grad / d

    def no_mask(scores, grad):
        d = scores.shape[-1]
        return torch.relu(scores) / d, grad / d

    def weights_times_grad(scores, grad):
        d = scores.shape[-1]
        return torch.relu(scores) / d, torch.relu(scores) / d * grad

    return (
        Mistake("at s = 0 exactly the ReLU's derivative is taken as 0 (as torch does); you used 1 there.", at_zero),
        Mistake("the pull-back has no mask: g/d is linear attention's; ReLU passes g only where s > 0.", no_mask),
        Mistake(
            "you multiplied the weights by g; the pull-back is the derivative of the weights times g.",
            weights_times_grad,
        ),
    )


RELU_ATTENTION = AutoQuestion(
    id="ch05-q1", title="ReLU attention and its pull-back", points=2, level="warm-up", minutes=10,
    prompt=(
        "ReLU attention sets $\\alpha_k = \\max(s_k, 0)/d$. For `scores` and an upstream gradient "
        "`grad` $= G$, both of shape `(2, d)`, write `relu_attention(scores, grad)`: the pair "
        "`(weights, pullback)` with the pull-back $\\bigl(\\partial\\alpha/\\partial s\\bigr)^\\top G$, both "
        "of shape `(2, d)`, without autograd. Take the derivative at $s_k = 0$ to be 0."
    ),
    solution=relu_attention, reference=lambda scores, grad: _autograd_pullback("relu", scores, grad),
    public=cases(_variant_case, ("scores of both signs", 6, 1.0, 0, "ch05-q1", "a"),
                 ("scores of both signs, two of them exactly 0", 20, 2.0, 2, "ch05-q1", "b")),
    hidden=seeded(_variant_case, ("large scores", 50, 100.0, 0, "ch05-q1", "c"),
                  ("five scores exactly 0", 9, 1.0, 5, "ch05-q1", "d"), ("tiny scores", 30, 1e-6, 0, "ch05-q1", "e")),
    outputs=("weights", "pullback"), mistakes=_relu_mistakes(),
    hint="the Jacobian of an element-wise map is diagonal: pullback_k = alpha'(s_k) g_k.",
    forbidden=("xorlib.attention.attention_weights",), autograd=False,
)  # fmt: skip


# fmt: off
def sigmoid_attention(scores, grad):
    """Sigmoid attention weights sigmoid(s - ln d) and the pull-back alpha (1 -
    alpha) grad, both (2, d).
    """
    # BEGIN SOLUTION
    d = scores.shape[-1]
    weights = torch.sigmoid(scores - math.log(d))
    return weights, weights * (1 - weights) * grad
    # END SOLUTION
# fmt: on


def _sigmoid_mistakes() -> tuple[Mistake, ...]:
    def unshifted(scores, grad):
        w = torch.sigmoid(scores)
        return w, w * (1 - w) * grad

    def divided(scores, grad):
        d = scores.shape[-1]
        w = torch.sigmoid(scores) / d
        return w, torch.sigmoid(scores) * (1 - torch.sigmoid(scores)) * grad / d

    def plus_log(scores, grad):
        w = torch.sigmoid(scores + math.log(scores.shape[-1]))
        return w, w * (1 - w) * grad

    def no_one_minus(scores, grad):
        w = torch.sigmoid(scores - math.log(scores.shape[-1]))
        return w, w * grad

    return (
        Mistake("no shift: sigmoid(s) puts weight 1/2 on every position at s = 0; the shift is -ln d.", unshifted),
        Mistake("sigmoid(s)/d is a different normaliser; sigmoid attention shifts the scores by -ln d.", divided),
        Mistake("the shift has the wrong sign: sigmoid(s - ln d), not sigmoid(s + ln d).", plus_log),
        Mistake("the derivative of the sigmoid is alpha (1 - alpha), not alpha.", no_one_minus),
    )


SIGMOID_ATTENTION = AutoQuestion(
    id="ch05-q2", title="Sigmoid attention and its pull-back", points=2, level="warm-up", minutes=10,
    prompt=(
        "Sigmoid attention sets $\\alpha_k = \\operatorname{sigm}(s_k - \\ln d)$, so that zero scores give weights "
        "close to $1/d$. For `scores` and `grad`, both of shape `(2, d)`, write "
        "`sigmoid_attention(scores, grad)`: the pair `(weights, pullback)`, the pull-back being "
        "$\\bigl(\\partial\\alpha/\\partial s\\bigr)^\\top G$. It must give finite numbers for scores of $\\pm 10^4$."
    ),
    solution=sigmoid_attention, reference=lambda scores, grad: _autograd_pullback("sigmoid", scores, grad),
    public=cases(_variant_case, ("moderate scores", 8, 1.0, 0, "ch05-q2", "a"),
                 ("scores up to about 30", 40, 10.0, 0, "ch05-q2", "b")),
    hidden=seeded(_variant_case, ("scores near +-10^4", 16, 1e4, 0, "ch05-q2", "c"),
                  ("zero scores (weights 1/(d+1))", 25, 0.0, 0, "ch05-q2", "d"),
                  ("moderate scores, odd d", 11, 2.0, 0, "ch05-q2", "e")),
    outputs=("weights", "pullback"), mistakes=_sigmoid_mistakes(),
    hint="sigm'(x) = sigm(x) (1 - sigm(x)), sigm(x) = 1 / (1 + e^-x); torch.sigmoid is stable for large |x|.",
    nan_hint="exp(-x) overflowed: torch.sigmoid (or a form that never exponentiates a large positive number) is stable.",
    forbidden=("xorlib.attention.attention_weights",),
)  # fmt: skip


ONLY_SOFTMAX_COUPLES = WrittenQuestion(
    id="ch05-w1", title="What only softmax does", level="core", minutes=15,
    prompt=(
        "Raising the two hidden scores of a softmax head lowers every other weight. Explain why no "
        "element-wise normaliser (linear, ReLU, sigmoid, componentwise) can do that, and what an "
        "element-wise head must do instead to make its rest mass small."
    ),
    rubric=(
        Criterion(1, "Softmax divides by the sum, so every weight depends on every score."),
        Criterion(
            1, "An element-wise weight depends only on its own score: raising the pair leaves the rest unchanged."
        ),
        Criterion(
            1, "So each of the $d - 2$ other scores must be pushed down on its own (a step that scales with $d$)."
        ),
    ),
    answer=(
        "Softmax weights $e^{s_k}/\\sum_l e^{s_l}$ share a normaliser: raising $s_u, s_v$ increases the "
        "denominator and lowers every other weight, whatever their scores. An element-wise normaliser "
        "has $\\alpha_k = \\phi(s_k)$: the other weights are unchanged when the pair's scores rise. To "
        "make $\\sum_{k\\ne u,v}\\alpha_k$ small, each of the $d-2$ other weights must itself be made "
        "small, which needs the step to push all those scores down, not only to raise the pair's."
    ),
)  # fmt: skip

QUESTIONS = (RELU_ATTENTION, SIGMOID_ATTENTION, ONLY_SOFTMAX_COUPLES)
