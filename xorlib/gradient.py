r"""Closed-form population loss and gradient, the one-step update, and the exact worst case.

Everything here uses one fact: the head outputs :math:`z_h = \sum_i \alpha_{h,i} x_i`
are linear in :math:`x`, and the prediction :math:`f = c_0 - c_1 z_1 z_2` is a
polynomial of degree two in them. Expectations over uniform
:math:`x \in \{\pm1\}^d` therefore reduce to the moments

.. math::

    \mathbb{E}[x_k x_l] = \delta_{kl}, \qquad
    \mathbb{E}[x_k x_l x_r x_s] = \delta_{kl}\delta_{rs} + \delta_{kr}\delta_{ls}
        + \delta_{ks}\delta_{lr} - 2\,\delta_{klrs},

where the last term corrects Isserlis' rule for :math:`x_k^4 = 1`. Writing
:math:`a = \alpha_1`, :math:`b = \alpha_2` and :math:`(u, v) = (i^*, j^*)`,

.. math::

    \mathbb{E}[z_1 z_2] &= \langle a, b\rangle, \qquad
    \mathbb{E}[y\, z_1 z_2] = -(a_u b_v + a_v b_u), \\
    M_4 := \mathbb{E}[z_1^2 z_2^2] &= \|a\|^2\|b\|^2 + 2\langle a,b\rangle^2 - 2\textstyle\sum_i a_i^2 b_i^2 ,

so the population loss :math:`L = \tfrac12\mathbb{E}[(f-y)^2]` is

.. math::

    L(a, b) = \tfrac12\bigl[c_0^2 + 1 - 2c_1\bigl(c_0\langle a,b\rangle + a_u b_v + a_v b_u\bigr) + c_1^2 M_4\bigr],

and its gradient with respect to the weights of head 1 is

.. math::

    \frac{\partial L}{\partial a_j} = -c_1\bigl(c_0 b_j + \delta_{ju} b_v + \delta_{jv} b_u\bigr)
        + c_1^2\bigl(a_j\|b\|^2 + 2\langle a,b\rangle b_j - 2 a_j b_j^2\bigr)

(swap :math:`a` and :math:`b` for head 2). The chain rule through the
normaliser (:func:`xorlib.attention.scores_vjp`) and the codes
(:math:`\partial s_{h,i}/\partial q_h = p_i`) gives the gradient with respect to the
queries in :math:`O(dm)` time, with no sampling and no :math:`d \times d` matrix.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ._validate import _all_finite, check_choice, check_float, check_int, check_pair, check_tensor
from .attention import ATTENTION_KINDS, attention_weights, scores_vjp
from .data import MAX_ENUMERATION_D, all_inputs, xor_labels
from .model import head_outputs, readout, readout_constants, squared_loss

__all__ = [
    "WorstCaseLoss",
    "empirical_gradient",
    "empirical_loss",
    "empirical_score_gradient",
    "exhaustive_losses",
    "lr_for_sharpness",
    "one_step",
    "one_step_from_uniform",
    "population_grad_weights",
    "population_gradient",
    "population_loss",
    "population_loss_weights",
    "population_score_gradient",
    "sharpness",
    "worst_case_loss",
]

# phi'(0) / phi(0) for the element-wise normalisers alpha_i = phi(s_i) / (d phi(0)).
_ELEMENTWISE_SLOPE = {"linear": 1.0, "componentwise": 1.0, "sigmoid": 0.5}


def _check_weights(weights: object) -> torch.Tensor:
    weights = check_tensor("weights", weights, ndim=(2, 3))
    if weights.shape[-2] != 2:
        raise ValueError(f"weights must have shape (..., 2, d) for the two heads, got {tuple(weights.shape)}")
    return weights


def _moments(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return <a,b>, |a|^2, |b|^2 and sum_i a_i^2 b_i^2 along the last axis."""
    return (a * b).sum(-1), (a * a).sum(-1), (b * b).sum(-1), (a * a * b * b).sum(-1)


def population_loss_weights(weights: torch.Tensor, pair: tuple[int, int], readout_kind: str = "xor") -> torch.Tensor:
    r"""Population loss :math:`L(a, b)` for head weights of shape ``(..., 2, d)`` (formula in the module docstring)."""
    weights = _check_weights(weights)
    u, v = check_pair("pair", pair, weights.shape[-1])
    c0, c1 = readout_constants(readout_kind)
    a, b = weights[..., 0, :], weights[..., 1, :]
    ab, aa, bb, a2b2 = _moments(a, b)
    m4 = aa * bb + 2 * ab**2 - 2 * a2b2
    cross = a[..., u] * b[..., v] + a[..., v] * b[..., u]
    return 0.5 * (c0**2 + 1 - 2 * c1 * (c0 * ab + cross) + c1**2 * m4)


def population_grad_weights(weights: torch.Tensor, pair: tuple[int, int], readout_kind: str = "xor") -> torch.Tensor:
    r"""Gradient :math:`\partial L/\partial \alpha_{h,j}` of the population loss, shape ``(..., 2, d)``."""
    weights = _check_weights(weights)
    u, v = check_pair("pair", pair, weights.shape[-1])
    c0, c1 = readout_constants(readout_kind)

    def head_gradient(own: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
        ab, _, other_sq, _ = _moments(own, other)
        grad = c1**2 * (own * other_sq.unsqueeze(-1) + 2 * ab.unsqueeze(-1) * other - 2 * own * other**2)
        grad = grad - c1 * c0 * other
        grad[..., u] -= c1 * other[..., v]
        grad[..., v] -= c1 * other[..., u]
        return grad

    a, b = weights[..., 0, :], weights[..., 1, :]
    return torch.stack([head_gradient(a, b), head_gradient(b, a)], dim=-2)


def _check_queries_codes(
    queries: object, codes: object, *, batched: bool = True, finite_codes: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """Queries ``(..., 2, m)`` (``(2, m)`` only if not ``batched``) and codes ``(d, m)``."""
    queries = check_tensor("queries", queries, ndim=(2, 3) if batched else 2)
    if queries.shape[-2] != 2:
        raise ValueError(f"queries must have shape (..., 2, m) for the two heads, got {tuple(queries.shape)}")
    codes = check_tensor("codes", codes, ndim=2, last_dim=queries.shape[-1], finite=finite_codes)
    return queries, codes


def population_loss(
    queries: torch.Tensor,
    codes: torch.Tensor,
    pair: tuple[int, int],
    *,
    attention: str = "softmax",
    readout_kind: str = "xor",
) -> torch.Tensor:
    r"""Population loss :math:`\mathbb{E}_x[\ell]` at queries ``(..., 2, m)``, exactly, in :math:`O(dm)`."""
    queries, codes = _check_queries_codes(queries, codes)
    weights = attention_weights(queries @ codes.T, attention)
    return population_loss_weights(weights, pair, readout_kind)


def _population_score_gradient(
    queries: torch.Tensor, codes: torch.Tensor, pair: tuple[int, int], attention: str, readout_kind: str
) -> torch.Tensor:
    """The computation of :func:`population_score_gradient`, on validated queries and codes."""
    check_choice("attention", attention, ATTENTION_KINDS)
    scores = queries @ codes.T
    weights = attention_weights(scores, attention)
    grad_weights = population_grad_weights(weights, pair, readout_kind)
    return scores_vjp(scores, weights, grad_weights, attention)


def population_score_gradient(
    queries: torch.Tensor,
    codes: torch.Tensor,
    pair: tuple[int, int],
    *,
    attention: str = "softmax",
    readout_kind: str = "xor",
) -> torch.Tensor:
    r"""Exact gradient of the population loss with respect to the scores, :math:`\partial L/\partial s_{h,k}`, shape ``(..., 2, d)``.

    :math:`\partial L/\partial s_h = (\partial\alpha_h/\partial s_h)^\top \partial L/\partial\alpha_h`. At uniform
    attention with softmax this is :math:`-\tfrac{c_1}{d^2}(\mathbb 1[k \in \{i^*, j^*\}] - \tfrac2d)`.
    """
    queries, codes = _check_queries_codes(queries, codes)
    return _population_score_gradient(queries, codes, pair, attention, readout_kind)


def population_gradient(
    queries: torch.Tensor,
    codes: torch.Tensor,
    pair: tuple[int, int],
    *,
    attention: str = "softmax",
    readout_kind: str = "xor",
) -> torch.Tensor:
    r"""Exact population gradient :math:`\nabla_{q} L`, shape ``(..., 2, m)``, in :math:`O(dm)`.

    :math:`\nabla_{q_h} L = P^\top \partial L/\partial s_h` (:func:`population_score_gradient`),
    since :math:`\partial s_{h,k}/\partial q_h = p_k`.
    """
    queries, codes = _check_queries_codes(queries, codes)
    return _population_score_gradient(queries, codes, pair, attention, readout_kind) @ codes


def one_step(
    queries: torch.Tensor,
    codes: torch.Tensor,
    pair: tuple[int, int],
    lr: float,
    *,
    attention: str = "softmax",
    readout_kind: str = "xor",
) -> torch.Tensor:
    r"""One step of population gradient descent, :math:`q^+ = q - \eta \nabla_q L(q)`."""
    lr = check_float("lr", lr, minimum=0.0, strict_minimum=True)
    return queries - lr * population_gradient(queries, codes, pair, attention=attention, readout_kind=readout_kind)


def sharpness(lr: float, d: int, *, attention: str = "softmax", readout_kind: str = "xor") -> float:
    r"""The sharpness :math:`\kappa` reached by one step of size :math:`\eta` from uniform attention.

    After the step, position :math:`k` scores :math:`\kappa\langle p_k, p_{i^*} + p_{j^*}\rangle`
    plus a label-independent term that balanced codes remove. For softmax
    :math:`\kappa = c_1\eta/d^2`; for element-wise normalisers
    :math:`\kappa = r c_1 \eta / d^2` with :math:`r = \varphi'(0)/\varphi(0)`.
    """
    lr = check_float("lr", lr, minimum=0.0)
    d = check_int("d", d, minimum=2)
    check_choice("attention", attention, ATTENTION_KINDS)
    _, c1 = readout_constants(readout_kind)
    slope = 1.0 if attention == "softmax" else _ELEMENTWISE_SLOPE[attention]
    return slope * c1 * lr / d**2


def lr_for_sharpness(kappa: float, d: int, *, attention: str = "softmax", readout_kind: str = "xor") -> float:
    r"""The step size :math:`\eta` whose single step from uniform attention has sharpness :math:`\kappa`."""
    kappa = check_float("kappa", kappa, minimum=0.0)
    return kappa / sharpness(1.0, d, attention=attention, readout_kind=readout_kind)


def one_step_from_uniform(
    codes: torch.Tensor,
    pair: tuple[int, int],
    lr: float,
    *,
    attention: str = "softmax",
    readout_kind: str = "xor",
) -> torch.Tensor:
    r"""The queries after one population step from :math:`q_1 = q_2 = 0`, in closed form.

    With :math:`\Sigma = \sum_k p_k` (zero for balanced codes and even ``d``):

    * softmax: :math:`q_h^+ = \frac{c_1\eta}{d^2}\bigl(p_{i^*} + p_{j^*} - \tfrac{2}{d}\Sigma\bigr)`;
    * element-wise: :math:`q_h^+ = \frac{r\eta}{d}\bigl(\tfrac{c_1}{d}(p_{i^*} + p_{j^*}) - K\Sigma\bigr)`
      with :math:`K = -\tfrac{c_0 c_1}{d} + \tfrac{c_1^2}{2}\bigl(\tfrac{6}{d^2} - \tfrac{4}{d^3}\bigr)`.

    Both heads receive the same update: the heads stay tied. Returns shape ``(2, m)``.
    """
    codes = check_tensor("codes", codes, ndim=2)
    d = codes.shape[0]
    u, v = check_pair("pair", pair, d)
    lr = check_float("lr", lr, minimum=0.0, strict_minimum=True)
    attention = check_choice("attention", attention, ATTENTION_KINDS)
    c0, c1 = readout_constants(readout_kind)
    total = codes.sum(0)
    relevant = codes[u] + codes[v]
    if attention == "softmax":
        query = (c1 * lr / d**2) * (relevant - (2.0 / d) * total)
    else:
        k = -c0 * c1 / d + 0.5 * c1**2 * (6.0 / d**2 - 4.0 / d**3)
        query = (_ELEMENTWISE_SLOPE[attention] * lr / d) * ((c1 / d) * relevant - k * total)
    return torch.stack([query, query])


def _check_samples(x: object, y: object, d: int, *, finite: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    x = check_tensor("x", x, ndim=2, last_dim=d, finite=finite)
    y = check_tensor("y", y, ndim=1, finite=finite)
    if y.shape[0] != x.shape[0]:
        raise ValueError(f"y must have one label per row of x ({x.shape[0]}), got {y.shape[0]}")
    return x, y


def empirical_loss(
    queries: torch.Tensor,
    codes: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    attention: str = "softmax",
    readout_kind: str = "xor",
) -> torch.Tensor:
    r"""Mean loss :math:`\frac1n\sum_s \ell(x_s, y_s)` on a batch (queries of shape ``(2, m)``)."""
    queries, codes = _check_queries_codes(queries, codes, batched=False)
    x, y = _check_samples(x, y, codes.shape[0])
    weights = attention_weights(queries @ codes.T, attention)
    f = readout(x @ weights.T.to(x.dtype), readout_kind)  # head_outputs without checking x again
    return squared_loss(f, y.to(f.dtype)).mean()


def _empirical_score_gradient(
    queries: torch.Tensor, codes: torch.Tensor, x: torch.Tensor, y: torch.Tensor, attention: str, readout_kind: str
) -> torch.Tensor:
    """The computation of :func:`empirical_score_gradient`, on validated shapes."""
    c0, c1 = readout_constants(readout_kind)
    n = x.shape[0]
    scores = queries @ codes.T if bool(queries.any()) else queries.new_zeros(2, codes.shape[0])
    weights = attention_weights(scores, attention)
    data_weights, labels = weights.to(x.dtype), y.to(x.dtype)
    if torch.equal(data_weights[0], data_weights[1]):
        z = x @ data_weights[0]
        pull = (-c1 / n) * (c0 - c1 * z * z - labels) * z
        grad_weights = (pull @ x).expand(2, -1)
    else:
        z = data_weights @ x.T
        pull = (-c1 / n) * (c0 - c1 * z[0] * z[1] - labels) * z.flip(0)
        grad_weights = pull @ x
    return scores_vjp(scores, weights, grad_weights.to(codes.dtype), attention)


def _finite_or_explain(result: torch.Tensor, codes: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Return ``result`` if finite; else name the input that holds a NaN or infinity."""
    if _all_finite(result):
        return result
    check_tensor("codes", codes, ndim=2)
    _check_samples(x, y, codes.shape[0])
    raise ValueError("the empirical gradient overflowed for finite inputs: rescale x or the queries")


def empirical_score_gradient(
    queries: torch.Tensor,
    codes: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    attention: str = "softmax",
    readout_kind: str = "xor",
) -> torch.Tensor:
    r"""Gradient of the mean batch loss with respect to the scores, shape ``(2, d)``, in two passes over ``x``.

    With :math:`z = \alpha X^\top` and residuals :math:`r_s = f(x_s) - y_s`,
    :math:`\partial \hat L/\partial\alpha_1 = -\tfrac{c_1}{n}\sum_s r_s z_{2,s} x_s`
    (and symmetrically for head 2); then the normaliser's VJP. The two passes
    over the data are the forward product and the backward product. They are
    taken as ``(2, d) @ (d, n)`` and ``(2, n) @ (n, d)`` products, which BLAS runs
    at nearly the speed of a matrix-vector product (the ``(n, d) @ (d, 2)``
    layout is about 2.5 times slower on CPU). When the heads are tied, as they
    are from zero initialisation, each pass is a single matrix-vector product.
    At zero queries the scores need no pass over the codes.

    The data and codes are checked for NaN and infinity only if the result is
    not finite (IEEE arithmetic carries them into it), which saves a pass over
    the two largest tensors; the error still names the culprit.
    """
    check_choice("attention", attention, ATTENTION_KINDS)
    queries, codes = _check_queries_codes(queries, codes, batched=False, finite_codes=False)
    x, y = _check_samples(x, y, codes.shape[0], finite=False)
    grad_scores = _empirical_score_gradient(queries, codes, x, y, attention, readout_kind)
    return _finite_or_explain(grad_scores, codes, x, y)


def empirical_gradient(
    queries: torch.Tensor,
    codes: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    attention: str = "softmax",
    readout_kind: str = "xor",
) -> torch.Tensor:
    r"""Gradient of the mean batch loss with respect to the queries, in closed form, shape ``(2, m)``.

    :math:`P^\top` times :func:`empirical_score_gradient`. Total cost
    :math:`O(nd + dm)`; the :math:`n \times d \times m` tensor of per-sample
    gradients is never formed.
    """
    check_choice("attention", attention, ATTENTION_KINDS)
    queries, codes = _check_queries_codes(queries, codes, batched=False, finite_codes=False)
    x, y = _check_samples(x, y, codes.shape[0], finite=False)
    grad = _empirical_score_gradient(queries, codes, x, y, attention, readout_kind) @ codes
    return _finite_or_explain(grad, codes, x, y)


def exhaustive_losses(weights: torch.Tensor, pair: tuple[int, int], readout_kind: str = "xor") -> torch.Tensor:
    r"""The loss on every one of the :math:`2^d` inputs (reference for small ``d`` only), shape ``(2**d,)``."""
    weights = _check_weights(weights)
    if weights.ndim != 2:
        raise ValueError("exhaustive_losses takes the weights of one model, shape (2, d)")
    d = check_int("d", weights.shape[-1], minimum=2, maximum=MAX_ENUMERATION_D)
    x = all_inputs(d, device=weights.device, dtype=weights.dtype)
    f = readout(head_outputs(weights, x), readout_kind)
    return squared_loss(f, xor_labels(x, pair))


@dataclass(frozen=True)
class WorstCaseLoss:
    r"""A certified bracket on :math:`\max_{x \in \{\pm1\}^d} \ell(x)`.

    ``lower`` is the loss of an input that is actually attained; ``upper`` is
    a bound no input exceeds. ``exact`` marks where the two agree.
    """

    lower: torch.Tensor
    upper: torch.Tensor

    @property
    def exact(self) -> torch.Tensor:
        """Where ``lower == upper`` up to rounding."""
        return (self.upper - self.lower) <= 1e-9 * torch.clamp(self.upper.abs(), min=1.0)

    @property
    def value(self) -> torch.Tensor:
        """The worst-case loss where exact, else the (conservative) upper bound."""
        return self.upper


def worst_case_loss(weights: torch.Tensor, pair: tuple[int, int], readout_kind: str = "xor") -> WorstCaseLoss:
    r"""The largest loss over all :math:`2^d` inputs, without enumerating them, in :math:`O(d)`.

    The loss is :math:`\tfrac12(c_0 - y - c_1 t)^2` with :math:`t = z_1 z_2`, a
    convex function of :math:`t`, so for each of the four values of
    :math:`(x_{i^*}, x_{j^*})` only the extremes of :math:`t` matter. Write
    :math:`c_h = \alpha_{h,i^*}x_{i^*} + \alpha_{h,j^*}x_{j^*}` and
    :math:`S_h = \sum_{k \notin\{i^*,j^*\}}|\alpha_{h,k}|`, so that
    :math:`z_h \in [c_h - S_h, c_h + S_h]`.

    * **Tied heads** (:math:`\alpha_1 = \alpha_2`, as after one step from
      uniform attention): :math:`t = z^2` and
      :math:`|z| \le |c| + S` (attained by aligning every other bit with
      :math:`c`), :math:`|z| \ge |c| - S` (attained by opposing them). The
      bracket is exact whenever :math:`|c| \ge S`: the relevant pair carries
      more attention than all other positions together. Otherwise the
      minimum of :math:`|z|` is a subset-sum problem, and we bound it by 0.
    * **Untied heads**: the box :math:`[c_1 \pm S_1]\times[c_2 \pm S_2]`
      bounds :math:`t` from both sides; the four inputs that align the other
      bits with either head's signs give attained values. (Maximising a
      product of two linear forms over the cube is a product-knapsack
      problem, so no exact near-linear method is expected in general.)

    Parameters
    ----------
    weights
        Head weights, shape ``(2, d)`` or ``(batch, 2, d)``.
    pair
        The relevant positions.
    readout_kind
        ``"xor"`` or ``"product"``.
    """
    weights = _check_weights(weights)
    u, v = check_pair("pair", pair, weights.shape[-1])
    c0, c1 = readout_constants(readout_kind)
    dtype, device = torch.float64, weights.device
    signs = torch.tensor([[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0]], dtype=dtype, device=device)
    labels = -signs[:, 0] * signs[:, 1]  # (4,)

    def loss_of(t: torch.Tensor) -> torch.Tensor:
        return 0.5 * (c0 - labels - c1 * t) ** 2

    # float64 and a masked sum (not a difference of sums): the rest mass can be
    # far below the rounding error of the total.
    weights = weights.to(torch.float64)
    w_u, w_v = weights[..., u], weights[..., v]  # (..., 2)
    centre = signs[:, 0, None] * w_u.unsqueeze(-2) + signs[:, 1, None] * w_v.unsqueeze(-2)  # (..., 4, 2)
    others = weights.clone()
    others[..., [u, v]] = 0.0
    rest = others.abs().sum(-1).unsqueeze(-2)  # (..., 1, 2)

    # Untied: box bounds on t, and four attained inputs.
    corners = torch.stack(
        [
            (centre[..., 0] + s1 * rest[..., 0]) * (centre[..., 1] + s2 * rest[..., 1])
            for s1 in (1, -1)
            for s2 in (1, -1)
        ],
        dim=-1,
    )
    upper_box = torch.maximum(loss_of(corners.amin(-1)), loss_of(corners.amax(-1)))
    # aligned[g, h] = sum over other positions k of sign(alpha_gk) alpha_hk.
    aligned = torch.where(others >= 0, 1.0, -1.0).to(dtype) @ others.transpose(-1, -2)
    candidates = [centre + s * aligned[..., g, :].unsqueeze(-2) for g in (0, 1) for s in (1.0, -1.0)]
    attained = torch.stack([loss_of(z[..., 0] * z[..., 1]) for z in candidates], dim=-1).amax(-1)

    # Tied: exact one-dimensional extremes.
    c_abs, s_tied = centre[..., 0].abs(), rest[..., 0]
    high = loss_of((c_abs + s_tied) ** 2)
    upper_tied = torch.maximum(high, loss_of((c_abs - s_tied).clamp(min=0.0) ** 2))
    lower_tied = torch.maximum(high, loss_of((c_abs - s_tied) ** 2))

    tied = (weights[..., 0, :] == weights[..., 1, :]).all(-1).unsqueeze(-1)
    upper = torch.where(tied, upper_tied, upper_box).amax(-1)
    lower = torch.where(tied, lower_tied, attained).amax(-1)
    return WorstCaseLoss(lower=lower, upper=upper)
