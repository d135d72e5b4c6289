"""Chapter 6, finite samples: the empirical score gradient in two passes; the 50% threshold of a logistic fit."""

from __future__ import annotations

import math

import torch

from ...empirical import empirical
from ...model import ModelConfig
from ..questions import AutoQuestion, Case, Criterion, Mistake, WrittenQuestion
from ._common import cases, gaussian, generator, pair, samples, seeded


# fmt: off
def sample_score_gradient(scores, x, y, heads):
    """The gradient of the mean loss over the samples in the scores (softmax), shape
    (2, d), in two passes.
    """
    # BEGIN SOLUTION
    c0, c1 = (1.0, 2.0) if heads == "tied" else (0.0, 1.0)
    n = x.shape[0]
    weights = torch.softmax(scores, dim=-1)  # (2, d)
    z = weights @ x.T  # (2, n): the forward pass
    residual = c0 - c1 * z[0] * z[1] - y
    # head 1 is pulled by z_2, head 2 by z_1
    pull = (-c1 / n) * residual * z.flip(0)
    g = pull @ x  # (2, d): the backward pass, dL/dalpha
    return weights * (g - (weights * g).sum(-1, keepdim=True))
    # END SOLUTION
# fmt: on


def _empirical_reference(scores: torch.Tensor, x: torch.Tensor, y: torch.Tensor, heads: str) -> torch.Tensor:
    identity = torch.eye(scores.shape[-1], dtype=scores.dtype)  # codes = I makes the queries the scores
    model = ModelConfig(scores.shape[-1], heads, code_kind="onehot")  # one-hot codes: the identity
    return empirical(model, scores, x, y, codes=identity).score_gradient


def _empirical_case(description: str, n: int, d: int, heads: str, scale: float, *labels: object) -> Case:
    hidden = pair(d, "ch06-q1", *labels)
    x, y = samples(n, d, hidden, "ch06-q1", *labels)
    scores = gaussian((2, d), scale, "ch06-q1", *labels)
    return Case(f"{description}: {heads} heads, n={n}, d={d}", (scores, x, y, heads), d=d)


def _empirical_mistakes() -> tuple[Mistake, ...]:
    def summed(scores, x, y, heads):
        return x.shape[0] * _empirical_reference(scores, x, y, heads)

    def other_heads(scores, x, y, heads):
        return _empirical_reference(scores, x, y, "split" if heads == "tied" else "tied")

    def uncentred(scores, x, y, heads):
        c0, c1 = (1.0, 2.0) if heads == "tied" else (0.0, 1.0)
        w = torch.softmax(scores, -1)
        z = w @ x.T
        g = ((-c1 / x.shape[0]) * (c0 - c1 * z[0] * z[1] - y) * z.flip(0)) @ x
        return w * g

    return (
        Mistake("you summed over the samples; the loss is the mean, so divide by n.", summed),
        Mistake("you used the other model's readout (tied: c0 = 1, c1 = 2; split: c0 = 0, c1 = 1).", other_heads),
        Mistake("missing softmax centring: alpha * (g - <alpha, g>), not alpha * g.", uncentred),
    )


SAMPLE_GRADIENT = AutoQuestion(
    id="ch06-q1", title="The empirical gradient in two passes", points=3, level="core", minutes=40,
    prompt=(
        "On samples `x` `(n, d)` and `y` `(n,)`, the mean loss is "
        "$\\hat L = \\frac1n\\sum_s \\tfrac12(f(x_s) - y_s)^2$ with softmax heads "
        "$\\alpha_h = \\operatorname{softmax}(s_h)$, $z_{h,s} = \\langle\\alpha_h, x_s\\rangle$ and "
        '$f = c_0 - c_1 z_1 z_2$ (`heads` is `"tied"`: $(1, 2)$, or `"split"`: $(0, 1)$). Write '
        "`sample_score_gradient(scores, x, y, heads)`: $\\partial\\hat L/\\partial s$, shape `(2, d)`, "
        "in two matrix products over the data (one forward, one backward), never forming the "
        "`(n, d)` per-sample gradients, and without autograd."
    ),
    solution=sample_score_gradient, reference=_empirical_reference,
    public=cases(_empirical_case, ("a few samples", 16, 6, "split", 1.0, "a"),
                 ("uniform attention", 200, 20, "tied", 0.0, "b"), ("sharp heads", 50, 10, "split", 4.0, "c")),
    hidden=seeded(_empirical_case, ("more samples", 1000, 50, "tied", 1.0, "d"),
                  ("fewer samples than positions", 7, 12, "split", 1.0, "e"), ("odd d", 300, 33, "split", 2.0, "f")),
    outputs=("the score gradient",), mistakes=_empirical_mistakes(),
    hint="dL/dalpha_1 = -(c1/n) sum_s r_s z_{2,s} x_s with r_s = f(x_s) - y_s; then the softmax pull-back.",
    forbidden=("xorlib.empirical.empirical",), autograd=False,
)  # fmt: skip


# fmt: off
def threshold_from_fit(n_values, successes, trials):
    """The n at which a logistic fit of successes/trials against ln n crosses 1/2
    (maximum likelihood).
    """
    # BEGIN SOLUTION
    t = torch.log(n_values.double())
    k, m = successes.double(), trials.double()
    design = torch.stack(
        [torch.ones_like(t), t], dim=1
    )  # P(success) = sigmoid(a + b ln n)
    theta = torch.zeros(2, dtype=torch.float64)
    for _ in range(100):  # Newton's method on the binomial log-likelihood
        p = torch.sigmoid(design @ theta)
        gradient = design.T @ (k - m * p)
        hessian = design.T @ (design * (m * p * (1 - p)).unsqueeze(1))
        step = torch.linalg.solve(hessian, gradient)
        theta = theta + step
        if float(step.abs().max()) < 1e-13:
            break
    a, b = float(theta[0]), float(theta[1])
    return math.exp(-a / b)
    # END SOLUTION
# fmt: on


def _log_likelihood(theta: torch.Tensor, design: torch.Tensor, k: torch.Tensor, m: torch.Tensor) -> float:
    eta = design @ theta
    return float((k * eta - m * torch.nn.functional.softplus(eta)).sum())


def _fit(t: torch.Tensor, k: torch.Tensor, m: torch.Tensor) -> tuple[float, float]:
    """Maximum-likelihood (a, b) of P = sigmoid(a + b t): Newton's method with step
    halving, float64.
    """
    theta = torch.zeros(2, dtype=torch.float64)
    design = torch.stack([torch.ones_like(t), t], dim=1)
    for _ in range(200):
        p = torch.sigmoid(design @ theta)
        hessian = design.T @ (design * (m * p * (1 - p))[:, None])
        step = torch.linalg.solve(hessian, design.T @ (k - m * p))
        current = _log_likelihood(theta, design, k, m)
        scale = 1.0
        while _log_likelihood(theta + scale * step, design, k, m) < current - 1e-12 and scale > 1e-6:
            scale /= 2
        theta = theta + scale * step
        if float(step.abs().max()) < 1e-13 * (1 + float(theta.abs().max())):
            break
    return float(theta[0]), float(theta[1])


def _threshold_reference(n_values: torch.Tensor, successes: torch.Tensor, trials: torch.Tensor) -> float:
    a, b = _fit(torch.log(n_values.double()), successes.double(), trials.double())
    return math.exp(-a / b)


def _threshold_case(
    description: str, n_values: list[int], center: float, width: float, trials: int, *labels: object
) -> Case:
    """Success counts drawn from a logistic curve in ln n (seeded), never all-or-
    nothing at every point.
    """
    n = torch.tensor(n_values, dtype=torch.float64)
    p = torch.sigmoid((torch.log(n) - math.log(center)) / width)
    counts = torch.binomial(torch.full_like(p, float(trials)), p, generator=generator("ch06-q2", *labels))
    counts[0], counts[-1] = (max(float(counts[0]), 1.0), min(float(counts[-1]), trials - 1.0))  # not separable
    return Case(
        f"{description}: {len(n_values)} sample sizes, {trials} runs each",
        (n, counts.to(torch.int64), torch.full_like(counts, trials, dtype=torch.int64)),
    )


def _threshold_mistakes() -> tuple[Mistake, ...]:
    def log_threshold(n_values, successes, trials):
        return math.log(_threshold_reference(n_values, successes, trials))

    def against_n(n_values, successes, trials):
        a, b = _fit(n_values.double() / 1000, successes.double(), trials.double())
        return -1000 * a / b

    def interpolated(n_values, successes, trials):
        frac = (successes.double() / trials.double()).tolist()
        t = torch.log(n_values.double()).tolist()
        for k in range(len(frac) - 1):
            if (frac[k] - 0.5) * (frac[k + 1] - 0.5) <= 0 and frac[k] != frac[k + 1]:
                return math.exp(t[k] + (0.5 - frac[k]) * (t[k + 1] - t[k]) / (frac[k + 1] - frac[k]))
        return math.nan

    return (
        Mistake("you returned ln n*, the threshold on the log scale; return n* itself.", log_threshold),
        Mistake("you fitted against n; the fit is against ln n.", against_n),
        Mistake("you interpolated the raw success fractions; the threshold comes from the fitted curve.", interpolated),
    )


THRESHOLD = AutoQuestion(
    id="ch06-q2", title="The 50% threshold of a logistic fit", points=2, level="challenge", minutes=45,
    prompt=(
        "At each sample size `n_values[i]`, `successes[i]` of `trials[i]` runs succeeded. Fit "
        "$\\Pr(\\text{success}) = \\operatorname{sigm}(a + b\\ln n)$, $\\operatorname{sigm}(t) = 1/(1 + e^{-t})$, by maximum likelihood (binomial counts) and write "
        "`threshold_from_fit(n_values, successes, trials)`: the $n^*$ where the fit crosses $\\tfrac12$, "
        "$n^* = e^{-a/b}$, as a float. Converge well: the answer is compared to 5 digits."
    ),
    solution=threshold_from_fit, reference=_threshold_reference,
    public=cases(_threshold_case, ("a clear transition", [100, 200, 400, 800, 1600], 400.0, 0.5, 20, "a"),
                 ("a gradual transition", [50, 100, 200, 400, 800, 1600, 3200], 500.0, 1.0, 10, "b")),
    hidden=seeded(_threshold_case, ("a sharp transition", [1000, 1500, 2250, 3375, 5062], 2000.0, 0.3, 40, "c"),
                  ("few runs", [10, 30, 90, 270, 810, 2430], 150.0, 0.8, 5, "d")),
    outputs=("the threshold n*",), mistakes=_threshold_mistakes(),
    hint="Newton's method (iteratively reweighted least squares) converges in a few steps from a = b = 0.", rtol=1e-5,
)  # fmt: skip


HOW_N_STAR_GROWS = WrittenQuestion(
    id="ch06-w1", title="Reading a threshold curve", level="core", minutes=20,
    prompt=(
        "You have estimated $n^*(d)$ for $d = 16, 32, \\dots, 1024$. Explain how you would test "
        "whether $n^*$ grows like $d^2$ rather than like $d \\log d$, and what uncertainty each "
        "$n^*$ carries."
    ),
    rubric=(
        Criterion(1, "Plot $\\log n^*$ against $\\log d$: a power law is a line, its slope the exponent."),
        Criterion(1, "Compare with the slopes (or the ratios $n^*/d^2$, $n^*/(d \\log d)$) of both candidates."),
        Criterion(1, "Each $n^*$ has sampling error from the finite number of runs (e.g. a bootstrap interval)."),
    ),
    answer=(
        "On log-log axes a power law in $d$ is a straight line whose slope is the exponent: fit the slope, "
        "or plot $n^*/d^2$ and $n^*/(d\\log d)$ against $d$ and see which stays flat. Each estimate "
        "comes from a logistic fit to a finite number of runs, so it has an error bar (a bootstrap "
        "over runs, or the fit's standard error propagated to $e^{-a/b}$); the slope is only "
        "meaningful when the differences exceed those bars."
    ),
)  # fmt: skip

QUESTIONS = (SAMPLE_GRADIENT, THRESHOLD, HOW_N_STAR_GROWS)
