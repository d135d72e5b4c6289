r"""The book's formulas, each in one place: step rules, rest-mass targets, bounds and reference lines.

Every formula the chapters show is a function here, and the tests check each
one against :mod:`xorlib.population`, :mod:`xorlib.certify` or brute force,
which compute the same quantities without it. Notation: :math:`d` positions,
code dimension :math:`m`, hidden pair :math:`(u, v)`, target worst-case loss
:math:`\varepsilon`, rest mass :math:`E` (attention off the hidden position(s)).
"""

from __future__ import annotations

import math
from typing import Annotated, Literal, NamedTuple

import torch

from ._certificate import log_weights, split_step
from ._certificate import tied_worst_case as _tied_worst_case
from ._checks import check_float, check_int, check_pair, check_tensor
from ._contract import MAX_FORMULA_D, MAX_M, Array, Between, Pair, public

__all__ = [
    "REMAINDER_CONSTANT",
    "first_order_split_vector",
    "rest_mass",
    "rest_mass_bound",
    "split_direction_first_order",
    "split_probability_first_order",
    "split_rest_target",
    "split_sample_bound",
    "split_step_from_gaps",
    "tie_probability_bound",
    "tied_margin",
    "tied_rest_target",
    "tied_sharpness",
    "tied_worst_case",
    "typical_rest_mass",
]

#: The constant of the second-order remainder of the split direction (``lem-split-direction``, chapter 3):
#: ``||t_h - t_h^lin||_inf <= REMAINDER_CONSTANT * r^2 / d^2`` for ``r = ||s - mean(s)||_inf <= 1/4``.
REMAINDER_CONSTANT = 100.0

#: Positions: a formula takes any ``d`` from 4 to 10^12 (its float arithmetic is exact to there).
D = Annotated[int, Between(4, MAX_FORMULA_D)]
#: A worst-case loss target: every loss of these models is at most 2.
Epsilon = Annotated[float, Between(0.0, 2.0, open_low=True)]
#: A tied margin of unit codes: :math:`|\langle p_u - p_k, p_u + p_v\rangle| \le 4`.
Margin = Annotated[float, Between(-4.0, 4.0)]
#: A sharpness :math:`\kappa` (scores move by :math:`\kappa t`).
Sharpness = Annotated[float, Between(0.0, 1e12)]
Codes2d = Annotated[torch.Tensor, Array(ndim=(2,))]


# ----------------------------------------------------------------------------- the tied model
@public
def tied_worst_case(rest: Annotated[float, Between(0.0, 0.5)], gap: Annotated[float, Between(0.0, 1.0)] = 0.0) -> float:
    r"""The exact worst-case loss of tied xor heads: :math:`\max\bigl(32E^2(1-E)^2,\ 2(g + E)^4\bigr)`.

    Both heads put :math:`\alpha_u + \alpha_v = 1 - E` on the pair, with
    :math:`g = |\alpha_u - \alpha_v|`, and :math:`E \le \tfrac12`. If the hidden bits
    agree (:math:`y = -1`) the other bits can pull :math:`|z|` down to :math:`1 - 2E`;
    if they differ (:math:`y = 1`) they can push :math:`|z|` up to :math:`g + E`. The certificate of
    :mod:`xorlib.certify` uses this same function for tied heads.

    Examples
    --------
    >>> tied_worst_case(0.01)
    0.00313632
    """
    return float(_tied_worst_case(rest, gap))


@public
def tied_margin(codes: Codes2d, pair: Pair) -> float:
    r"""The tied margin :math:`\gamma = \min_{k\notin\{u,v\}}\langle p_u - p_k, p_u + p_v\rangle` of dense codes ``(d, m)``; 0 for a tie.

    Examples
    --------
    >>> codes = torch.eye(4, dtype=torch.float64)
    >>> tied_margin(codes, (0, 1))
    1.0
    """
    u, v = check_pair("pair", pair, codes.shape[0])
    if codes.shape[0] < 3:
        raise ValueError(f"codes must have at least 3 rows (positions), got shape {tuple(codes.shape)}")
    g = codes @ (codes[u] + codes[v])
    others = torch.ones(codes.shape[0], dtype=torch.bool)
    others[[u, v]] = False
    return float(g[u] - g[others].max())


@public
def rest_mass(scores: Annotated[torch.Tensor, Array(ndim=(1,))], pair: Pair) -> float:
    r"""The softmax weight off the pair, :math:`E = e^{\operatorname{lse}(s_{k\notin\{u,v\}}) - \operatorname{lse}(s)}`, for scores ``(d,)``.

    In the log domain (the certificate's :func:`~xorlib.certify.certify_scores` computes it the same way):
    exact below :math:`10^{-300}`.

    Examples
    --------
    >>> rest_mass(torch.tensor([0.0, 50.0, 50.0, 0.0], dtype=torch.float64), (1, 2))
    1.9287498479639178e-22
    """
    check_pair("pair", pair, scores.shape[0])
    return float(torch.exp(log_weights(scores, pair)[2]))


@public
def rest_mass_bound(d: D, margin: Margin, kappa: Sharpness) -> float:
    r"""The margin bound on the tied step's rest mass: :math:`E(\kappa) \le \min\bigl(1, \tfrac{d-2}2e^{-\kappa\gamma}\bigr)`.

    Examples
    --------
    >>> rest_mass_bound(1000, 0.1, 200.0) < 1e-5
    True
    """
    exponent = math.log((d - 2) / 2) - kappa * margin
    return 1.0 if exponent >= 0 else math.exp(exponent)


@public
def typical_rest_mass(
    d: D, m: Annotated[int, Between(1, MAX_M)], kappa: Sharpness, rho: Annotated[float, Between(-1.0, 1.0)] = 0.0
) -> float:
    r"""**Heuristic** typical rest mass of the tied step: :math:`R/(R + 2e^{\kappa(1+\rho)})` with :math:`R = (d-2)e^{\kappa^2/m}`.

    Treats each score :math:`g_k` as :math:`\mathcal N(0, 2/m)` and the sum over positions
    by its mean: a law of large numbers, valid while :math:`\kappa \lesssim \sqrt{m\ln d}`.

    Examples
    --------
    >>> round(typical_rest_mass(1000, 40, 0.0), 3)
    0.998
    """
    log_ratio = math.log((d - 2) / 2) + kappa**2 / m - kappa * (1 + rho)
    return 1 / (1 + math.exp(-log_ratio)) if log_ratio > -700 else math.exp(log_ratio)


@public
def tied_rest_target(epsilon: Epsilon) -> float:
    r"""The largest balanced rest mass with worst case :math:`\le\varepsilon`: :math:`E_\varepsilon = \tfrac12(1 - \sqrt{1-\sqrt{\varepsilon/2}})`.

    Inverts :math:`32E^2(1-E)^2 = \varepsilon`; :math:`E_\varepsilon \approx \sqrt{\varepsilon/32}`.

    Examples
    --------
    >>> tied_rest_target(1e-6)
    0.00017680795635006556
    """
    root = math.sqrt(epsilon / 2)
    return 0.5 * root / (1 + math.sqrt(1 - root))  # = (1 - sqrt(1 - root)) / 2, without cancellation


@public
def tied_sharpness(d: D, margin: Annotated[float, Between(1e-12, 4.0)], epsilon: Epsilon) -> float:
    r"""The sharpness that certifies worst case :math:`\le\varepsilon` for a margin :math:`\gamma > 0`: :math:`\kappa_\varepsilon = \gamma^{-1}\ln\frac{d-2}{2E_\varepsilon}`.

    From the margin bound :math:`E(\kappa) \le \tfrac{d-2}{2}e^{-\kappa\gamma}` of the
    balanced tied step. The step size is :math:`\eta = \kappa d^2/2`. At the codes'
    lattice step (:attr:`xorlib.codes.Codes.margin_step`, :math:`4/m` for even :math:`d`) it is
    chosen **without the pair**: for sign codes every positive margin is at least the
    lattice step, so this one sharpness certifies every draw whose margin is positive
    (the *lattice rule*).

    Examples
    --------
    >>> round(tied_sharpness(16, 4 / 16, 1e-6))  # the lattice rule at d = 16, m = 16
    42
    """
    return max(0.0, math.log((d - 2) / (2 * tied_rest_target(epsilon)))) / margin


@public
def tie_probability_bound(d: D, m: Annotated[int, Between(1, MAX_M)]) -> float:
    r"""An upper bound on the probability that balanced sign codes leave the pair unseparated (margin 0).

    Position :math:`k` ties with the pair iff :math:`p_k` agrees with :math:`p_u` or
    :math:`p_v` on every coordinate. Coordinates are independent across columns,
    and under the cyclic pairing :math:`i \leftrightarrow (\mu - i) \bmod c` of a block of
    :math:`c` rows (:math:`\mu` odd and uniform) each is tied with probability at most
    :math:`\tfrac34`: exactly :math:`\tfrac34`, or :math:`\tfrac34 - \tfrac1c` when :math:`u, v` have
    one parity and :math:`k` the other (``lem-ties``, chapter 2; larger blocks pair whole groups
    of eight coordinates, which costs a factor :math:`1 + O(m/c)`), so a union
    bound over the :math:`d - 2` positions gives
    :math:`(d-2)(3/4)^m`; with :math:`m = 4\log_2 d` that is about :math:`d^{-0.66}`.

    Examples
    --------
    >>> round(tie_probability_bound(256, 32), 4)
    0.0255
    """
    return min(1.0, (d - 2) * 0.75**m)


# ----------------------------------------------------------------------------- the split model
@public
def split_rest_target(epsilon: Epsilon) -> float:
    r"""The rest mass per head that certifies worst case :math:`\le\varepsilon` for split heads.

    A head on its bit with rest mass :math:`E_h` has :math:`z_h = x_{\tau_h} + \delta_h`,
    :math:`|\delta_h| \le 2E_h`, so every input has loss at most
    :math:`2(E_1 + E_2 + 2E_1E_2)^2`; with :math:`E_1 = E_2 = E` this is
    :math:`\le\varepsilon` iff :math:`E \le \tfrac12(\sqrt{1 + 2\sqrt{\varepsilon/2}} - 1) \approx \sqrt{\varepsilon/8}`.

    Examples
    --------
    >>> split_rest_target(1e-6)
    0.0003534284789035737
    """
    root = math.sqrt(epsilon / 2)
    return root / (1 + math.sqrt(1 + 2 * root))  # = (sqrt(1 + 2 root) - 1) / 2, without cancellation


@public
def split_step_from_gaps(
    d: D,
    gaps: Annotated[torch.Tensor, Array(ndim=(1,))],
    spreads: Annotated[torch.Tensor, Array(ndim=(1,))],
    epsilon: Epsilon,
) -> float:
    r"""The self-certified step of the split model: :math:`\eta = \max_h \bigl(R_h + \ln\frac{d-1}{E}\bigr)/\gamma_h`.

    ``gaps`` are :math:`\gamma_h = t_{h,(1)} - t_{h,(2)}`, the gap between the
    largest and second largest entry of head :math:`h`'s score direction
    :math:`t_h` (scores move by :math:`\eta t_h`), and ``spreads`` are
    :math:`R_h = \max_k s_{h,k} - \min_k s_{h,k}` at the start. Then
    :math:`E_h \le (d-1)e^{R_h - \eta\gamma_h} \le E` (:func:`split_rest_target`):
    if the two heads' largest entries are the two hidden bits, every input has
    loss at most :math:`\varepsilon`. Uses no knowledge of the pair. ``inf`` if a gap is not positive.

    Examples
    --------
    >>> two = torch.tensor([0.5, 0.25], dtype=torch.float64)
    >>> round(split_step_from_gaps(1000, two, torch.zeros(2, dtype=torch.float64), 1e-6), 2)
    59.42
    """
    gaps = check_tensor("gaps", gaps, ndim=1, shape={0: 2})
    spreads = check_tensor("spreads", spreads, ndim=1, shape={0: 2}, dtype=gaps.dtype)
    if bool((gaps <= 0).any()):
        return math.inf
    return float(split_step(gaps, spreads, math.log((d - 1) / split_rest_target(epsilon))))


@public
def split_direction_first_order(
    codes: Codes2d, pair: Pair, query: Annotated[torch.Tensor, Array(ndim=(1,))]
) -> torch.Tensor:
    r"""The first-order score directions :math:`t_h^{\text{lin}}` of the split model at the antisymmetric start :math:`(q, -q)`.

    With :math:`g = P(p_u + p_v)`, :math:`h = P(p_u - p_v)`, :math:`\epsilon = s - \bar s` (:math:`s = Pq`)
    and :math:`\Delta = s_u - s_v`,

    .. math:: t_{1,2}^{\text{lin}} = \frac1{d^2}\Bigl[g \pm \Delta\, h \mp \frac{1 + 2/d}{d}\, P P^\top \epsilon\Bigr],

    and the exact directions :math:`t_h = -PP^\top\,\partial L/\partial s_h` differ from these by at most
    :data:`REMAINDER_CONSTANT` :math:`\cdot r^2/d^2` in every entry, :math:`r = \|\epsilon\|_\infty \le \tfrac14`
    (``lem-split-direction``, chapter 3). Returns shape ``(2, d)``.

    Examples
    --------
    >>> codes = torch.eye(4, dtype=torch.float64)
    >>> split_direction_first_order(codes, (0, 1), torch.zeros(4, dtype=torch.float64))[0]
    tensor([0.0625, 0.0625, 0.0000, 0.0000], dtype=torch.float64)
    """
    query = check_tensor("query", query, ndim=1, shape={0: codes.shape[1]}, dtype=codes.dtype)
    d = codes.shape[0]
    u, v = check_pair("pair", pair, d)
    s = codes @ query
    eps = s - s.mean()
    g = codes @ (codes[u] + codes[v])
    h = codes @ (codes[u] - codes[v])
    self_term = ((1 + 2 / d) / d) * (codes @ (codes.T @ eps))
    delta = s[u] - s[v]
    return torch.stack([g + delta * h - self_term, g - delta * h + self_term]) / d**2


@public
def first_order_split_vector(codes: Codes2d, pair: Pair) -> torch.Tensor:
    r"""The vector :math:`c` with :math:`d^2(t_{1,u} - t_{1,v}) = \langle q_1, c\rangle + O(r^2)` at an antisymmetric start.

    :math:`c = \bigl[2(1-\rho) I - \tfrac{1 + 2/d}{d} P^\top P\bigr](p_u - p_v)`, with
    :math:`\rho = \langle p_u, p_v\rangle` (``lem-split-direction``, chapter 3); head 2 gets :math:`-\langle q_1, c\rangle`.

    Examples
    --------
    >>> first_order_split_vector(torch.eye(4, dtype=torch.float64), (0, 1))
    tensor([ 1.6250, -1.6250,  0.0000,  0.0000], dtype=torch.float64)
    """
    d = codes.shape[0]
    u, v = check_pair("pair", pair, d)
    e = codes[u] - codes[v]
    rho = codes[u] @ codes[v]
    return 2 * (1 - rho) * e - ((1 + 2 / d) / d) * (codes.T @ (codes @ e))


@public
def split_probability_first_order(
    codes: Codes2d, pair: Pair, start: Literal["independent", "antisymmetric"] = "independent"
) -> float:
    r"""The limit :math:`\sigma \to 0` of the probability that one step splits the heads, from the first-order direction.

    To first order :math:`d^2 D_1 = \langle q_1, c_a\rangle + \langle q_2, c_b\rangle` and
    :math:`d^2 D_2 = \langle q_2, c_a\rangle + \langle q_1, c_b\rangle`, with
    :math:`D_h = t_{h,u} - t_{h,v}`, :math:`e = p_u - p_v`,
    :math:`c_a = (1-\rho)e - \tfrac{3 - 2/d}{d}P^\top Pe` and
    :math:`c_b = -(1-\rho)e - \tfrac{2 - 4/d}{d}P^\top Pe`. The heads split iff
    :math:`D_1D_2 < 0`. For independent Gaussian starts :math:`(D_1, D_2)` is a
    centred Gaussian pair with correlation :math:`r = 2\langle c_a, c_b\rangle/(|c_a|^2 + |c_b|^2)`,
    so the probability is :math:`\arccos(r)/\pi`; the antisymmetric start
    :math:`q_2 = -q_1` gives :math:`D_2 = -D_1`, probability 1.

    Examples
    --------
    >>> split_probability_first_order(torch.eye(4, dtype=torch.float64), (0, 1), "antisymmetric")
    1.0
    """
    u, v = check_pair("pair", pair, codes.shape[0])
    if start == "antisymmetric":
        return 1.0
    d = codes.shape[0]
    e = codes[u] - codes[v]
    rho = float(codes[u] @ codes[v])
    gram_e = codes.T @ (codes @ e)
    c_a = (1 - rho) * e - ((3 - 2 / d) / d) * gram_e
    c_b = -(1 - rho) * e - ((2 - 4 / d) / d) * gram_e
    r = float(2 * (c_a @ c_b) / (c_a @ c_a + c_b @ c_b))
    return math.acos(max(-1.0, min(1.0, r))) / math.pi


@public
def split_sample_bound(
    d: D,
    gram_norm: Annotated[float, Between(0.0, 1e15, open_low=True)],
    gap: Annotated[float, Between(0.0, 1e15, open_low=True)],
    delta: Annotated[float, Between(0.0, 1.0, open_low=True)],
    theta: Annotated[float, Between(0.0, 1e3)] = 0.65,
) -> float:
    r"""The closed-form sample bound of chapter 6 (``cor-samples-closed-form``), from worst-case constants.

    If both heads' population directions have their largest entries at the two
    hidden bits with gaps at least :math:`\Gamma/d^2` (``gap`` is :math:`\Gamma`), and the
    start's weights are within a factor :math:`1 + \theta` of uniform, then with
    probability :math:`1 - \delta` over :math:`n` samples every one of the :math:`2(d-1)` gaps
    of the empirical direction stays positive (so the self-certified step keeps the heads' targets), provided

    .. math::

        n &\ge \Bigl(\frac{96\,(1+\theta)^3\,\lambda\, d}{\Gamma^2} + \frac{32\, d^2}{3\,\Gamma}\Bigr) \\
          &\qquad \times \ln\frac{2(d-1)}{\delta},

    with :math:`\lambda = \|P^\top P\|` (``gram_norm``): ``thm-samples`` with each gap's variance bounded by
    :math:`48(1+\theta)^3\lambda/d^3`, its one-sided range by 16 and its mean below by :math:`\Gamma/d^2`.
    The default :math:`\theta = e^{1/2} - 1` covers every start with :math:`\|s\|_\infty \le \tfrac14`.
    The draw-by-draw bound of ``thm-samples`` itself uses each gap's exact mean and variance (``xorlib._gaps``).

    Raises
    ------
    ValueError
        If the bound exceeds the float range (a tiny ``gap``: it grows as :math:`1/\Gamma^2`).

    Examples
    --------
    >>> round(split_sample_bound(16, 4.0, 1.0, 0.1))
    172997
    """
    try:
        variance_term = 96 * (1 + theta) ** 3 * gram_norm * d / gap**2
        range_term = 32 * d**2 / (3 * gap)
        ratio = 2 * (d - 1) / delta
        union = math.log(ratio) if math.isfinite(ratio) else math.log(2 * (d - 1)) - math.log(delta)
        bound = (variance_term + range_term) * union
    except (OverflowError, ZeroDivisionError):
        bound = math.inf
    if not math.isfinite(bound):
        raise ValueError(
            f"split_sample_bound exceeds the float range for gap = {gap:g}, gram_norm = {gram_norm:g}, d = {d:,}: "
            "gap must be larger (the bound grows as 1 / gap**2)"
        )
    return bound


# ----------------------------------------------------------------------------- the split model at any start scale
def _split_direction_exact(codes: torch.Tensor, pair: tuple[int, int], query: torch.Tensor) -> torch.Tensor:
    r"""The exact score directions :math:`t_h` of the split model at the antisymmetric start :math:`(q, -q)`, in closed form.

    With :math:`s = Pq`, :math:`A_k = e^{s_k}/M_+`, :math:`B_k = e^{-s_k}/M_-`
    (:math:`M_\pm = \tfrac1d\sum_j e^{\pm s_j}`, so the weights are :math:`A/d` and :math:`B/d`),
    :math:`K = 1/(M_+M_-)`, :math:`\hat\alpha = \tfrac1d\sum A_k^2`, :math:`\hat\beta = \tfrac1d\sum B_k^2`,
    :math:`\Delta = s_u - s_v` and :math:`\Lambda = \hat\alpha\hat\beta + 2K^2(1 - \tfrac1d) - 2K\cosh\Delta`,

    .. math::

        d^2 t_1 &= K\bigl(e^{\Delta}Pp_u + e^{-\Delta}Pp_v\bigr) + \tfrac1d PP^\top\bigl(\Lambda A - \hat\beta A^2\bigr), \\
        d^2 t_2 &= K\bigl(e^{-\Delta}Pp_u + e^{\Delta}Pp_v\bigr) + \tfrac1d PP^\top\bigl(\Lambda B - \hat\alpha B^2\bigr)

    (squares entrywise; ``lem-split-exact``, chapter 3), for balanced codes (:math:`P^\top\mathbb 1 = 0`).
    No remainder: the identity :math:`A_kB_k = K` for every :math:`k` makes the gradient linear in
    :math:`A`, :math:`A^2` and the two label entries. Returns shape ``(2, d)``.
    """
    d = codes.shape[0]
    u, v = pair
    s = codes @ query
    big_a, big_b = torch.softmax(s, 0) * d, torch.softmax(-s, 0) * d
    k = float(big_a[0] * big_b[0])  # A_k B_k = K for every k
    alpha, beta = float((big_a**2).mean()), float((big_b**2).mean())
    delta = float(s[u] - s[v])
    lam = alpha * beta + 2 * k**2 * (1 - 1 / d) - 2 * k * math.cosh(delta)
    g_u, g_v = codes @ codes[u], codes @ codes[v]

    def pulled(x: torch.Tensor) -> torch.Tensor:
        return codes @ (codes.T @ x) / d

    t1 = k * (math.exp(delta) * g_u + math.exp(-delta) * g_v) + pulled(lam * big_a - beta * big_a**2)
    t2 = k * (math.exp(-delta) * g_u + math.exp(delta) * g_v) + pulled(lam * big_b - alpha * big_b**2)
    return torch.stack([t1, t2]) / d**2


def _cexp(x: float) -> float:
    r""":math:`(e^x - 1 - x)/x^2`, increasing in :math:`x`; so :math:`0 \le e^y - 1 - y \le` this :math:`\cdot\, y^2` for :math:`|y| \le x`."""
    return 0.5 if x == 0 else math.expm1(x) / x**2 - 1 / x


def _csinh(x: float) -> float:
    r""":math:`(\sinh x - x)/x^3`, increasing in :math:`x \ge 0`; so :math:`|\sinh y - y| \le` this :math:`\cdot\,|y|^3` for :math:`|y| \le x`."""
    return 1 / 6 if x == 0 else (math.sinh(x) - x) / x**3


class _GramLevels(NamedTuple):
    r"""The entries of :math:`g = PP^\top` grouped by value: each distinct ``value``, how many entries take it
    (``count``) and :math:`\sum a_ja_l` over those entries (``weight``), all ``(L,)``."""

    value: torch.Tensor
    count: torch.Tensor
    weight: torch.Tensor


def _gram_levels(codes: torch.Tensor, a: torch.Tensor, block: int = 1024) -> _GramLevels:
    r"""One pass over :math:`g = PP^\top` in row blocks: its entries grouped by value, with :math:`\sum a_ja_l` per group.

    For sign codes (every entry :math:`\pm1/\sqrt m`) :math:`g_{jl} = 1 - 2H_{jl}/m` with :math:`H_{jl}` the
    Hamming distance of rows :math:`j` and :math:`l`, so there are :math:`m + 1` groups and every sum over
    :math:`(j, l)` of a function of :math:`g_{jl}` costs :math:`m + 1` evaluations. Other codes keep one group
    per entry.
    """
    d, m = codes.shape
    signs = bool(((codes.abs() * math.sqrt(m) - 1).abs() < 1e-12).all())
    unit = codes.sign().float()  # for sign codes, products of +-1 sum exactly in float32 (m < 2^24)
    count, weight = torch.zeros(m + 1, dtype=codes.dtype), torch.zeros(m + 1, dtype=codes.dtype)
    values, counts, weights = [], [], []
    for start in range(0, d, block):
        stop = min(start + block, d)
        rows = slice(start, stop)
        if signs:  # g is symmetric: the block on the diagonal once, the rows right of it twice (for those left of it)
            hamming = (unit[rows] @ unit[start:].T).sub_(m).mul_(-0.5).to(torch.int32)  # (m - m g) / 2
            own, later = hamming[:, : stop - start].flatten(), hamming[:, stop - start :].flatten()
            count += torch.bincount(own, minlength=m + 1) + 2 * torch.bincount(later, minlength=m + 1)
            own_pairs = (a[rows, None] * a[None, rows]).flatten()
            later_pairs = (a[rows, None] * a[None, stop:]).flatten()
            weight += torch.bincount(own, weights=own_pairs, minlength=m + 1)
            weight += 2 * torch.bincount(later, weights=later_pairs, minlength=m + 1)
        else:
            pairs = (a[rows, None] * a[None, :]).flatten()
            values.append((codes[rows] @ codes.T).flatten())
            counts.append(torch.ones_like(pairs))
            weights.append(pairs)
    if signs:
        return _GramLevels(1 - 2 * torch.arange(m + 1, dtype=codes.dtype) / m, count, weight)
    return _GramLevels(torch.cat(values), torch.cat(counts), torch.cat(weights))


def _exp_form_variance(levels: _GramLevels, kappa: float) -> float:
    r"""The exact variance of :math:`S^{(2)} = \sum_j a_j\bigl(e^{cs_j} - e^{\kappa/2}(1 + cs_j)\bigr)`, :math:`s = Pq`, :math:`q \sim \mathcal N(0, \tau^2 I_m)`.

    ``kappa`` is :math:`\kappa = c^2\tau^2`; ``levels`` are :func:`_gram_levels` of the codes and :math:`a = Pe`.
    For unit rows each :math:`s_j` is :math:`\mathcal N(0, \tau^2)`, :math:`e^{\kappa/2}(1 + cs_j)` is the part of
    :math:`e^{cs_j}` of Hermite degree at most 1, and if :math:`\sum_j a_j = 0` then :math:`\mathbb E S^{(2)} = 0`
    and, by Mehler's formula (:math:`g = PP^\top`),

    .. math:: \operatorname{Var}S^{(2)} = e^{\kappa}\sum_{j,l}a_ja_l\bigl(e^{\kappa g_{jl}} - 1 - \kappa g_{jl}\bigr).
    """
    g = levels.value
    return math.exp(kappa) * float(levels.weight @ (torch.expm1(kappa * g) - kappa * g))


def _fourth_power_variance(levels: _GramLevels) -> float:
    r"""The variance of :math:`\sum_j s_j^4/\tau^8` for :math:`s = Pq`, :math:`q \sim \mathcal N(0, \tau^2 I_m)`, unit rows: :math:`\sum_{j,l}(72g_{jl}^2 + 24g_{jl}^4)`.

    For standard Gaussians with correlation :math:`g`, :math:`\mathbb E[X^4Y^4] = 9 + 72g^2 + 24g^4` (Hermite:
    :math:`x^4 = He_4 + 6He_2 + 3`), and :math:`\mathbb E\sum_j s_j^4 = 3d\tau^4`.
    """
    g2 = levels.value**2
    return float(levels.count @ (72 * g2 + 24 * g2**2))


class _SplitBounds(NamedTuple):
    r"""The quantities of ``thm-split`` (chapter 3) for given codes, pair, :math:`\sigma`, :math:`\delta`, :math:`\varepsilon`.

    ``r`` bounds :math:`\|s\|_\infty`, ``mean_square`` bounds :math:`\tfrac1d|s|^2`, ``lean`` is
    :math:`x_\delta`, ``slope`` the factor of :math:`|\Delta|` in the gap between the two hidden bits, ``tilt`` the
    factor of :math:`|\langle w_\perp, q\rangle|` and ``chaos`` the rest of that gap's error; ``pair_noise`` is
    ``chaos`` plus ``tilt`` times the mean of :math:`|\langle w_\perp, q\rangle|`; ``margin`` and ``margin_noise``
    bound the margin against the other positions, ``even`` bounds the even part of the gap, ``gap`` is
    :math:`\Gamma` (positive iff the theorem applies) and ``kappa`` the sharpness :math:`\kappa_\delta` (``inf`` if not).
    """

    r: float
    mean_square: float
    lean: float
    slope: float
    tilt: float
    chaos: float
    pair_noise: float
    margin: float
    margin_noise: float
    even: float
    gap: float
    kappa: float


def _code_terms(codes: torch.Tensor, pair: tuple[int, int]) -> dict[str, float | torch.Tensor]:
    r"""The codes' quantities the theorem uses: :math:`\lambda = \|P\|^2`, :math:`\rho`, :math:`|e|`, :math:`c_\parallel`, :math:`|w_\perp|`, ...

    With :math:`e = p_u - p_v`, :math:`w = P^\top Pe = c_\parallel e + w_\perp` (:math:`w_\perp \perp e`),
    :math:`\pi = \max_{\tau\in\{u,v\},k\notin\{u,v\}}|P(p_\tau - p_k)|`,
    :math:`\omega = \max_{\tau, k\notin\{u,v\}}|P^\top P(p_\tau - p_k)|`, the tied margin :math:`\gamma` and
    :math:`\nu = \min\bigl(0, \min_{\tau, k\notin\{u,v\}}\langle p_\tau - p_k, p_\tau - p_{\tau'}\rangle\bigr)`
    (:math:`\nu = 0` for sign codes). In the proof of ``thm-split`` :math:`\pi` is :math:`\varpi`, :math:`\omega` is
    :math:`\varpi'` and :math:`\nu` is :math:`\iota`.
    """
    d = codes.shape[0]
    u, v = pair
    gram = codes.T @ codes  # P^T P, (m, m)
    e = codes[u] - codes[v]
    w = gram @ e
    c_par = float(w @ e / (e @ e))
    others = torch.ones(d, dtype=torch.bool)
    others[[u, v]] = False
    spread, pull, nu = 0.0, 0.0, 0.0
    for tau, other in ((u, v), (v, u)):
        diff = (codes[tau] - codes)[others]  # (d - 2, m): p_tau - p_k
        spread = max(spread, float(((diff @ gram) * diff).sum(1).max()))
        pull = max(pull, float((diff @ gram).norm(dim=1).max()))
        nu = min(nu, float((diff @ (codes[tau] - codes[other])).min()))
    return {
        "lam": float(torch.linalg.matrix_norm(codes, 2) ** 2),
        "rho": float(codes[u] @ codes[v]),
        "e_norm": float(e.norm()),
        "c_par": c_par,
        "w_perp": float((w - c_par * e).norm()),
        "levels": _gram_levels(codes, codes @ e),  # the entries of P P^T grouped by value, with a = P e
        "spread": math.sqrt(spread),
        "pull": pull,
        "gamma": tied_margin(codes, pair),
        "nu": nu,
    }


class _StartScalars(NamedTuple):
    r"""The scalars of the proof of ``thm-split`` that depend on the codes only through :math:`\lambda` and
    :math:`\min(2, |e|)`: :math:`\tau`, :math:`r_\delta`, :math:`\bar v`, :math:`\bar M`, :math:`\underline K`,
    :math:`\bar h`, the ends of :math:`\Lambda`, and the Gaussian factors :math:`e^{\tau^2/2}`, :math:`e^{2\tau^2}`."""

    tau: float
    r: float
    vbar: float
    m_max: float
    k_min: float
    hat_max: float
    lam_lo: float
    lam_hi: float
    grow: float
    grow_2: float


def _start_scalars(d: int, m: int, sigma: float, delta: float, lam: float, e_cap: float) -> _StartScalars:
    r"""The proof's events (a)-(b) and the intervals of the scalars :math:`M_\pm`, :math:`K`, :math:`\hat\alpha`,
    :math:`\hat\beta`, :math:`\Lambda` on them, for :math:`\|P\|^2 \le` ``lam`` and :math:`\min(2, |e|) \le` ``e_cap``.

    One place for both :func:`_split_bounds` (measured :math:`\lambda`, :math:`|e|`) and :func:`_split_apriori`
    (their bounds).
    """
    tau = sigma / math.sqrt(m)
    # Shares of delta: (a) 3d - 2 Gaussian tails 1/8, (b) |q|^2 1/16, (c) 4 Chebyshev 1/16 each,
    # (d) sum s^4 1/16, (e) the lean 1/2.
    r = tau * math.sqrt(2 * math.log(8 * (3 * d - 2) / delta))  # r_delta
    ell = math.log(16 / delta)
    q_sq = sigma**2 * (1 + 2 * math.sqrt(ell / m) + 2 * ell / m)  # |q|^2 (Laurent and Massart)
    vbar = min(r**2, lam * q_sq / d)  # bounds the mean of s_k^2
    m_max = 1 + _cexp(r) * vbar  # M-bar
    k_min = 1 / m_max**2  # K-underbar
    hat_max = 1 + 4 * _cexp(2 * r) * vbar  # h-bar
    lam_lo = 1 + 2 * k_min**2 * (1 - 1 / d) - 2 * math.cosh(e_cap * r)
    lam_hi = hat_max**2 + 2 * (1 - 1 / d) - 2 * k_min
    return _StartScalars(
        tau, r, vbar, m_max, k_min, hat_max, lam_lo, lam_hi, math.exp(tau**2 / 2), math.exp(2 * tau**2)
    )


def _split_bounds(
    codes: torch.Tensor, pair: tuple[int, int], sigma: float, delta: float, epsilon: float, *, terms: dict | None = None
) -> _SplitBounds:
    r"""The quantities of ``thm-split`` (chapter 3) for balanced codes with unit rows: the theorem applies iff ``gap`` > 0.

    Then, with probability :math:`\ge 1 - \delta` over the start :math:`q \sim \mathcal N(0, \sigma^2 I_m/m)`, the
    two heads' largest entries are the two hidden bits, one each, with gaps :math:`\ge \Gamma/d^2`, and a step of
    sharpness :math:`\kappa \ge \kappa_\delta` leaves every input's loss :math:`\le \varepsilon`. Each line is one
    line of the proof (its symbol in the comment); the bounds hold for the exact direction
    (:func:`_split_direction_exact`), with no expansion in :math:`\sigma`.
    """
    d, m = codes.shape
    u, v = check_pair("pair", pair, d)
    c = _code_terms(codes, (u, v)) if terms is None else terms  # terms: _code_terms of these codes and pair
    # The events (a)-(b) and the scalars M_+-, K, alpha, beta, Lambda in intervals.
    e_cap = min(2.0, c["e_norm"])
    tau, r, vbar, m_max, k_min, hat_max, lam_lo, lam_hi, grow, grow_2 = _start_scalars(
        d, m, sigma, delta, c["lam"], e_cap
    )
    lean = (delta / 2) * math.sqrt(math.pi / 2) * tau * c["e_norm"]  # x_delta
    lam_abs = max(abs(lam_lo), abs(lam_hi))  # Lambda*
    # The gap between the hidden bits: slope (vartheta) and noise (epsilon-pair).
    phi = max(abs(lam_lo * grow - 2 * grow_2 * hat_max), abs(lam_hi * grow - 2 * grow_2 / m_max))  # Phi
    levels = c["levels"]
    cheb = [math.sqrt(16 * _exp_form_variance(levels, k**2 * tau**2) / delta) for k in (1.0, 2.0)]  # T_1, T_2
    chaos = (lam_abs * cheb[0] + hat_max * cheb[1]) / d  # C
    slope = 2 * k_min * (1 - c["rho"]) - phi * c["c_par"] / d
    pair_noise = chaos + phi * tau * c["w_perp"] * math.sqrt(2 / math.pi) / d  # E|Y| = tau |w_perp| sqrt(2/pi)
    # The other positions: margin (gamma_delta) and noise (epsilon-marg).
    margin = k_min * c["gamma"] + c["nu"] * math.sinh(e_cap * r)
    phi_0 = max(abs(lam_lo - 2 * hat_max), abs(lam_hi - 2 / m_max))  # Phi_0
    rem = lam_abs * _cexp(r) + 4 * hat_max * _cexp(2 * r)  # rho_2
    fourth = min(r**2 * d * vbar, tau**4 * (3 * d + math.sqrt(16 * _fourth_power_variance(levels) / delta)))  # F
    margin_noise = (phi_0 * c["pull"] * r + c["spread"] * rem * math.sqrt(fourth)) / d
    # The even part.
    psi = (2 * lam_abs * grow * _csinh(r) + 32 * grow_2 * _csinh(2 * r)) * r * vbar  # Psi
    even = (psi * (e_cap * c["c_par"] + c["w_perp"]) * r) / (2 * d) + chaos
    gap = min(slope * lean - pair_noise, margin - margin_noise)  # Gamma
    kappa = (2 * r + math.log((d - 1) / split_rest_target(epsilon))) / gap if gap > 0 else math.inf
    return _SplitBounds(r, vbar, lean, slope, phi / d, chaos, pair_noise, margin, margin_noise, even, gap, kappa)


class _SplitApriori(NamedTuple):
    r"""A-priori bounds on the lines of :class:`_SplitBounds` (``cor-split-apriori``, chapter 3), from
    :math:`(d, m, \sigma, \delta)` and three code statistics.

    ``slope`` bounds :math:`\vartheta` below; ``lean`` is :math:`x_\delta/|e|` and ``pair_noise`` bounds
    :math:`\epsilon^{\text{pair}}_\delta/|e|` above, so ``pair`` :math:`=` ``slope * lean - pair_noise`` bounds
    :math:`(\vartheta x_\delta - \epsilon^{\text{pair}}_\delta)/|e|` below; ``margin`` bounds :math:`\gamma_\delta`
    below and ``margin_noise`` bounds :math:`\epsilon^{\text{marg}}_\delta` above; ``gap`` bounds :math:`\Gamma` below.
    """

    r: float
    slope: float
    lean: float
    pair_noise: float
    pair: float
    margin: float
    margin_noise: float
    gap: float


def _split_apriori(d: int, m: int, sigma: float, delta: float, lam: float, rho: float, gamma: float) -> _SplitApriori:
    r"""Lower bounds on :math:`\Gamma` of ``thm-split`` from :math:`(d, m, \sigma, \delta)` and three code statistics.

    For balanced sign codes (entries :math:`\pm1/\sqrt m`) with :math:`\|P\|^2 \le` ``lam``,
    :math:`\langle p_u, p_v\rangle \le` ``rho`` :math:`< 1` and tied margin :math:`\ge` ``gamma``
    :math:`> 0`, every line of :func:`_split_bounds` is bounded by the same line with the code terms
    replaced by (``cor-split-apriori``, chapter 3; :math:`\kappa = c^2\tau^2`)

    .. math::

        c_\parallel \le \lambda, \quad |w_\perp| \le \tfrac\lambda2|e|, \quad
        V_{|c|} \le e^{\kappa}(e^{\kappa} - 1 - \kappa)\lambda^2|e|^2, \quad V_4 \le 96\lambda d, \quad
        \varpi \le 2\sqrt\lambda, \quad \varpi' \le 2\lambda, \quad \iota = 0,

    and :math:`\min(2, |e|) \le 2`, :math:`|e|^2 = 2 - 2\rho \ge 2 - 2\bar\rho`. The pair lines scale with
    :math:`|e|`, so they are bounded per unit :math:`|e|`; ``gap`` is then a lower bound on :math:`\Gamma`.
    """
    # The same events and scalars as _split_bounds, at the largest lambda and min(2, |e|) <= 2.
    tau, r, vbar, m_max, k_min, hat_max, lam_lo, lam_hi, grow, grow_2 = _start_scalars(d, m, sigma, delta, lam, 2.0)
    lam_abs = max(abs(lam_lo), abs(lam_hi), 1 - 2 / d)  # Lambda* (every Lambda lies in [lam_lo, lam_hi])
    # |phi_1|: the end at h-bar is negative and falls with vbar; the other end lies between its value at
    # vbar = 0 and at the largest vbar (Lambda-bar >= 1 - 2/d, M-bar >= 1).
    low_end = (1 - 2 / d) * grow - 2 * grow_2
    phi = max(2 * grow_2 * hat_max - lam_lo * grow, abs(low_end), abs(lam_hi * grow - 2 * grow_2 / m_max))
    phi_0 = max(2 * hat_max - lam_lo, abs(1 - 2 / d - 2), abs(lam_hi - 2 / m_max))
    cheb = [  # T_1/|e|, T_2/|e|: V <= e^kappa (e^kappa - 1 - kappa) lam^2 |e|^2
        math.sqrt(16 * math.exp(k) * (math.expm1(k) - k) * lam**2 / delta) for k in (tau**2, 4 * tau**2)
    ]
    chaos = (lam_abs * cheb[0] + hat_max * cheb[1]) / d
    slope = 2 * k_min * (1 - rho) - phi * lam / d  # c_par <= lam
    lean = (delta / 2) * math.sqrt(math.pi / 2) * tau  # x_delta / |e|
    pair_noise = chaos + phi * tau * (lam / 2) * math.sqrt(2 / math.pi) / d  # |w_perp| <= lam |e| / 2
    pair = slope * lean - pair_noise
    margin = k_min * gamma
    rem = lam_abs * _cexp(r) + 4 * hat_max * _cexp(2 * r)
    fourth = min(r**2 * d * vbar, tau**4 * (3 * d + math.sqrt(16 * 96 * lam * d / delta)))
    margin_noise = (phi_0 * 2 * lam * r + 2 * math.sqrt(lam) * rem * math.sqrt(fourth)) / d
    pair_gap = pair * (math.sqrt(2 - 2 * rho) if pair > 0 else 2.0)  # |e| in [sqrt(2 - 2 rho), 2]
    gap = min(pair_gap, margin - margin_noise)
    return _SplitApriori(r, slope, lean, pair_noise, pair, margin, margin_noise, gap)


def _split_apriori_closed_form(d: int, delta: float, lam_ratio: float = 2.0) -> int:
    r"""The code dimension from which ``cor-split-apriori`` proves :math:`\Gamma > 0` in closed form.

    With :math:`\bar a = \max(a, 2)` for :math:`\lambda \le a\,d/m`:
    :math:`\max\bigl(\lceil 16\bar a^2\ln(8(3d-2)/\delta)\rceil, \lceil 8\bar a/\delta\rceil\bigr)`, that is
    :math:`m \ge 64\ln(8(3d-2)/\delta)` and :math:`m\delta \ge 16` for :math:`a \le 2` (and :math:`\sigma \le 1`,
    :math:`\rho \le \tfrac12`, :math:`\gamma > 0`).
    """
    a = max(lam_ratio, 2.0)
    return max(math.ceil(16 * a**2 * math.log(8 * (3 * d - 2) / delta)), math.ceil(8 * a / delta))


def _split_apriori_threshold(
    d: int, sigma: float = 1.0, delta: float = 0.1, lam_ratio: float = 2.0, margin: float = 0.0
) -> int:
    r"""The least code dimension :math:`m_0` such that ``cor-split-apriori`` gives :math:`\Gamma > 0` at every :math:`m \ge m_0`.

    For balanced sign codes with :math:`\lambda = \|P\|^2 \le a\,d/m` (``lam_ratio`` :math:`= a \in [1, 8]`;
    :math:`\lambda \ge d/m` always), :math:`\rho = \langle p_u, p_v\rangle \le \tfrac12` and a positive tied margin
    (so :math:`\gamma \ge 4/m`, ``lem-lattice``), :func:`_split_apriori` with these worst cases is a lower bound
    on the computed :math:`\Gamma` of ``thm-split``. The closed form of the corollary proves it positive for
    every :math:`m \ge` :func:`_split_apriori_closed_form` (for :math:`\sigma \le 1`);
    below that this function checks each :math:`m` and returns one more than the largest :math:`m` at
    which the bound is not positive. ``sigma`` in :math:`(0, 1]`, ``delta`` in :math:`[10^{-3}, 1)`.
    ``margin`` :math:`\in [0, 4]` assumes :math:`\gamma \ge \max(4/m, \text{margin})` instead of the lattice step
    alone (the bound only grows with :math:`\gamma`, so the closed form still caps the search).

    Examples
    --------
    >>> _split_apriori_threshold(1000) <= _split_apriori_closed_form(1000, 0.1)
    True
    """
    d = check_int("d", d, minimum=4, maximum=MAX_FORMULA_D)
    sigma = check_float("sigma", sigma, minimum=0.0, maximum=1.0, strict_minimum=True)
    delta = check_float("delta", delta, minimum=1e-3, maximum=1.0)
    if delta == 1.0:
        raise ValueError(f"delta must be in [0.001, 1), got {delta}")
    lam_ratio = check_float("lam_ratio", lam_ratio, minimum=1.0, maximum=8.0)
    margin = check_float("margin", margin, minimum=0.0, maximum=4.0)
    top = _split_apriori_closed_form(d, delta, lam_ratio)
    for m in range(top - 1, 0, -1):
        if _split_apriori(d, m, sigma, delta, lam_ratio * d / m, 0.5, max(4 / m, margin)).gap <= 0:
            return m + 1
    return 1


def _code_spectrum_bound(d: int, m: int, delta_codes: float) -> float:
    r"""A bound on :math:`\lambda = \|P\|^2` of balanced sign codes (even :math:`d`) that holds with probability :math:`\ge 1 - \delta_c`.

    ``lem-code-spectrum`` (chapter 3): with probability at least :math:`1 - \delta_c` over the codes every
    off-diagonal entry of :math:`P^\top P` is at most :math:`t/m` in size, with
    :math:`t = 2\sqrt{d\ln(m(m-1)/\delta_c)}` (Hoeffding, given the pairings), and then, by Gershgorin,

    .. math::

        \lambda \le \frac dm + \frac{m-1}m\,t .

    So :math:`\lambda \le 2d/m` once :math:`d \ge 4m^2\ln(m(m-1)/\delta_c)`. ``d`` even in
    :math:`[4, 10^{12}]`, ``m`` in :math:`[2, 4096]`, ``delta_codes`` in :math:`(0, 1)`.

    Examples
    --------
    >>> _code_spectrum_bound(10**8, 369, 0.01) <= 2 * 10**8 / 369
    True
    """
    d = check_int("d", d, minimum=4, maximum=MAX_FORMULA_D)
    if d % 2:
        raise ValueError(f"d must be even (the lemma is for balanced codes of even d), got {d}")
    m = check_int("m", m, minimum=2, maximum=MAX_M)
    delta_codes = check_float("delta_codes", delta_codes)
    if not 0.0 < delta_codes < 1.0:
        raise ValueError(f"delta_codes must be in (0, 1), got {delta_codes}")
    entry = 2 * math.sqrt(d * math.log(m * (m - 1) / delta_codes))  # t: m times the largest off-diagonal entry
    return d / m + (m - 1) / m * entry


class _SplitMeasured(NamedTuple):
    r"""The measured counterparts of :class:`_SplitBounds` at one start: :math:`\|s\|_\infty`, :math:`\tfrac1d|s|^2`,
    :math:`|\Delta|`, :math:`|\langle w_\perp, q\rangle|`, the smaller gap of the two heads between their target and the other hidden bit, the smaller
    margin against the other positions, the even part :math:`|E|` of the gap and the smaller of the two
    (all :math:`d^2`-scaled; the target of head 1 is :math:`u` if :math:`\Delta > 0`, else :math:`v`)."""

    r: float
    mean_square: float
    lean: float
    tilt: float
    pair_gap: float
    margin_gap: float
    even: float
    gap: float


def _split_measured(codes: torch.Tensor, pair: tuple[int, int], query: torch.Tensor) -> _SplitMeasured:
    r"""The quantities :class:`_SplitMeasured` at the start :math:`(q, -q)`, from the exact direction (:func:`_split_direction_exact`)."""
    d = codes.shape[0]
    u, v = pair
    s = codes @ query
    delta = float(s[u] - s[v])
    t = _split_direction_exact(codes, (u, v), query) * d**2
    gap_1, gap_2 = float(t[0, u] - t[0, v]), float(t[1, u] - t[1, v])
    first, second = (u, v) if delta > 0 else (v, u)
    others = torch.ones(d, dtype=torch.bool)
    others[[u, v]] = False
    margin = min(float(t[0, first] - t[0, others].max()), float(t[1, second] - t[1, others].max()))
    pair_gap = min(gap_1, -gap_2) if delta > 0 else min(-gap_1, gap_2)
    e = codes[u] - codes[v]
    w = codes.T @ (codes @ e)  # w = P^T P e = c e + w_perp
    return _SplitMeasured(
        float(s.abs().max()),
        float((s**2).mean()),
        abs(delta),
        abs(float((w - (w @ e) / (e @ e) * e) @ query)),
        pair_gap,
        margin,
        abs(gap_1 + gap_2) / 2,
        min(pair_gap, margin),
    )
