"""Chapter 1, the task and the two models: a numerically stable softmax head; the loss on every input."""

from __future__ import annotations

import torch

from ...attention import attention_weights
from ...model import ModelConfig
from ...task import all_inputs, xor_labels
from ..questions import AutoQuestion, Case, Criterion, Mistake, WrittenQuestion
from ._common import cases, codes, gaussian, pair, samples, seeded


# fmt: off
def softmax_head(query, codes, x):
    """Softmax weights alpha = softmax(codes @ query), shape (d,), and outputs z = x
    @ alpha, shape (n,).
    """
    # BEGIN SOLUTION
    scores = codes @ query
    e = torch.exp(
        scores - scores.max()
    )  # the largest exponent is 0: no overflow, whatever the scale
    weights = e / e.sum()
    return weights, x @ weights
    # END SOLUTION
# fmt: on


def _head_reference(query: torch.Tensor, codes: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    weights = attention_weights(ModelConfig(codes.shape[0]), codes @ query)
    return weights, x @ weights


def _head_case(description: str, d: int, m: int, scale: float, kind: str, *labels: object) -> Case:
    query = gaussian((m,), scale, "ch01-q1", *labels)
    x, _ = samples(5, d, pair(d, "ch01-q1", *labels), "ch01-q1", *labels)
    return Case(description, (query, codes(d, m, kind, "ch01-q1", *labels), x), d=d)


def _weights_sum(args: tuple, got: tuple, expected: tuple) -> str | None:
    total = float(got[0].sum())
    if abs(total - 1.0) > 1e-6:
        return f"your weights sum to {total:.6g}, but softmax weights sum to 1: a wrong normalisation."
    return None


def _head_mistakes() -> tuple[Mistake, ...]:
    def flipped(query, codes, x):
        w = torch.softmax(-(codes @ query), -1)
        return w, x @ w

    def uniform(query, codes, x):
        w = torch.full((codes.shape[0],), 1.0 / codes.shape[0], dtype=torch.float64)
        return w, x @ w

    def unnormalised(query, codes, x):
        w = torch.exp((codes @ query).clamp(max=700)) / codes.shape[0]
        return w, x @ w

    def plain_mean(query, codes, x):
        w = torch.softmax(codes @ query, -1)
        return w, x.mean(-1)

    return (
        Mistake("wrong sign: your weights are largest where the score is smallest (softmax of -s).", flipped),
        Mistake("uniform weights: the scores never entered (did you use s = 0?).", uniform),
        Mistake("no normaliser: exp(s)/d is componentwise attention, not softmax.", unnormalised),
        Mistake("z is the plain average of the bits: the weights were not used.", plain_mean),
    )


SOFTMAX_HEAD = AutoQuestion(
    id="ch01-q1", title="A softmax head that never overflows", points=2, level="warm-up", minutes=10,
    prompt=(
        "A head scores position $k$ by $s_k = \\langle q, p_k\\rangle$, attends with "
        "$\\alpha = \\operatorname{softmax}(s)$ and outputs $z = \\sum_k \\alpha_k x_k$.\n\n"
        "Write `softmax_head(query, codes, x)`: `query` has shape `(m,)`, `codes` shape `(d, m)` "
        "(row $k$ is $p_k$) and `x` shape `(n, d)` (one input per row). Return the pair "
        "`(weights, z)` of shapes `(d,)` and `(n,)`. It must stay exact for very sharp heads "
        "(scores of $10^4$), where $e^{s}$ overflows; do not call `torch.softmax`."
    ),
    solution=softmax_head, reference=_head_reference,
    public=cases(_head_case, ("small: d=6, m=4, n=5", 6, 4, 1.0, "iid", "small"),
                 ("medium: d=50, m=12, n=5", 50, 12, 3.0, "iid", "medium"),
                 ("a very sharp head: scores up to about 2000, d=20", 20, 8, 2000.0, "iid", "sharp")),
    hidden=seeded(_head_case, ("scores of about 10^4, d=33", 33, 9, 1e4, "iid", "huge"),
                  ("zero query (uniform attention), d=64", 64, 16, 0.0, "balanced", "zero"),
                  ("balanced codes, d=40", 40, 12, 1.5, "balanced", "balanced")),
    outputs=("weights", "z"), mistakes=_head_mistakes(),
    hint="s = codes @ query, then alpha_k = exp(s_k - max s) / sum_l exp(s_l - max s); z = x @ alpha.",
    diagnose=_weights_sum,
    nan_hint="an exponential overflowed: softmax is unchanged by subtracting the largest score first.",
    forbidden=("xorlib.attention.attention_weights",),
)  # fmt: skip


# fmt: off
def loss_on_every_input(weights, pair, heads):
    """The loss (f(x) - y)^2 / 2 on each of the 2^d inputs, in the order of
    all_inputs(d), shape (2^d,).
    """
    # BEGIN SOLUTION
    d = weights.shape[-1]
    x = all_inputs(d)  # (2^d, d): row r has x_k = -1 exactly where bit k of r is 1
    i, j = pair
    y = -x[:, i] * x[:, j]
    z = x @ weights.T  # (2^d, 2): the outputs of the two heads
    c0, c1 = (1.0, 2.0) if heads == "tied" else (0.0, 1.0)
    f = c0 - c1 * z[:, 0] * z[:, 1]
    return 0.5 * (f - y) ** 2
    # END SOLUTION
# fmt: on


def _losses_reference(weights: torch.Tensor, pair: tuple[int, int], heads: str) -> torch.Tensor:
    x = all_inputs(weights.shape[-1])
    c0, c1 = ModelConfig(weights.shape[-1], heads).readout
    z = x @ weights.T
    return 0.5 * (c0 - c1 * z[:, 0] * z[:, 1] - xor_labels(x, pair)) ** 2


def _losses_case(description: str, d: int, heads: str, kind: str, *labels: object) -> Case:
    if kind == "uniform":
        weights = torch.full((2, d), 1.0 / d, dtype=torch.float64)
    elif kind == "softmax":
        weights = torch.softmax(gaussian((2, d), 2.0, "ch01-q2", *labels), -1)
    else:  # any real weights, of either sign
        weights = gaussian((2, d), 0.5, "ch01-q2", *labels)
    return Case(description, (weights, pair(d, "ch01-q2", *labels), heads), d=d)


def _losses_mistakes() -> tuple[Mistake, ...]:
    def other_readout(weights, pair, heads):
        return _losses_reference(weights, pair, "split" if heads == "tied" else "tied")

    def label_sign(weights, pair, heads):
        x = all_inputs(weights.shape[-1])
        c0, c1 = ModelConfig(weights.shape[-1], heads).readout
        z = x @ weights.T
        return 0.5 * (c0 - c1 * z[:, 0] * z[:, 1] + xor_labels(x, pair)) ** 2

    return (
        Mistake("you used the other model's readout: tied is f = 1 - 2 z1 z2, split is f = -z1 z2.", other_readout),
        Mistake("the label has the wrong sign: y = -x_i x_j (+1 when the two hidden bits differ).", label_sign),
    )


LOSS_ON_EVERY_INPUT = AutoQuestion(
    id="ch01-q2", title="The loss on every input", points=2, level="core", minutes=15,
    prompt=(
        "For head weights `weights` of shape `(2, d)` (row $h$ is $\\alpha_h$, any real numbers), "
        'the hidden `pair` $(i, j)$ and `heads` (`"tied"` or `"split"`), write '
        "`loss_on_every_input(weights, pair, heads)`: the loss $\\tfrac12 (f(x) - y)^2$ with "
        "$z_h = \\langle \\alpha_h, x\\rangle$, $y = -x_i x_j$, and the readout $f = 1 - 2 z_1 z_2$ "
        "(tied) or $f = -z_1 z_2$ (split), on each of the $2^d$ inputs. Return shape `(2**d,)`, in "
        "the order of `xorlib.task.all_inputs(d)` (row $r$ has $x_k = -1$ exactly where bit $k$ of "
        "$r$ is 1), which you may use. No loops over inputs."
    ),
    solution=loss_on_every_input, reference=_losses_reference,
    public=cases(_losses_case, ("tied readout, uniform weights, d=4", 4, "tied", "uniform", "a"),
                 ("split readout, softmax weights, d=6", 6, "split", "softmax", "b"),
                 ("tied readout, softmax weights of two different heads, d=8", 8, "tied", "softmax", "c")),
    hidden=seeded(_losses_case, ("split readout, weights of both signs, d=10", 10, "split", "signed", "d"),
                  ("tied readout, weights of both signs, d=5", 5, "tied", "signed", "e"),
                  ("split readout, softmax weights, d=9", 9, "split", "softmax", "f")),
    outputs=("the losses",), imports="from xorlib.task import all_inputs", mistakes=_losses_mistakes(),
    hint="x = all_inputs(d); z = x @ weights.T gives both heads for every input at once.",
)  # fmt: skip


NO_SINGLE_BIT = WrittenQuestion(
    id="ch01-w1", title="Why no single bit helps", level="core", minutes=15,
    prompt=(
        "Show that the label $y = -x_{i^*} x_{j^*}$ is uncorrelated with every single bit $x_k$ and "
        "with every product $x_k x_l$ except the hidden one. What does this say about a model that "
        "looks at one position at a time?"
    ),
    rubric=(
        Criterion(1, "Computes $\\mathbb E[y x_k] = 0$ for every $k$ (an odd number of independent signs)."),
        Criterion(1, "Shows $\\mathbb E[y x_k x_l] = -1$ only for $\\{k, l\\} = \\{i^*, j^*\\}$, else 0."),
        Criterion(1, "Concludes: no single position (and no linear function of $x$) predicts $y$ better than chance."),
    ),
    answer=(
        "$\\mathbb E[y x_k] = -\\mathbb E[x_{i^*} x_{j^*} x_k]$ is the mean of a product of an odd "
        "number of independent uniform signs (or of $x_{j^*}$ alone when $k = i^*$), which is 0. "
        "Likewise $\\mathbb E[y x_k x_l] = -\\mathbb E[\\chi_{\\{i^*, j^*\\}}\\chi_{\\{k,l\\}}]$ is "
        "$-1$ when the two sets agree and 0 otherwise (Walsh functions are orthonormal). So every "
        "linear statistic of the input is independent of the label in mean: a model must combine "
        "the two hidden positions, which is what the product of two heads does."
    ),
)  # fmt: skip

QUESTIONS = (SOFTMAX_HEAD, LOSS_ON_EVERY_INPUT, NO_SINGLE_BIT)
