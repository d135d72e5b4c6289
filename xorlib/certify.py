r"""Certified worst-case loss over all :math:`2^d` inputs, in :math:`O(d)`, without enumerating them.

For a fixed pair of hidden bits :math:`(x_u, x_v)` every other bit enters head
:math:`h` only through :math:`r_h = \sum_{k \notin\{u,v\}} \alpha_{h,k} x_k \in [-S_h, S_h]`,
:math:`S_h = \sum_{k\notin\{u,v\}} |\alpha_{h,k}|`, and the loss
:math:`\tfrac12(c_0 - y - c_1 z_1 z_2)^2` is a convex function of :math:`t = z_1 z_2`.

* **Tied heads** (:math:`\alpha_1 = \alpha_2`): :math:`t = z^2` with
  :math:`|z| \in [\,|c| - S, |c| + S\,]`, both ends attained when :math:`|c| \ge S`,
  so the worst case is **exact**. For softmax weights with rest mass
  :math:`S \le \tfrac12` it is :math:`\max\bigl(32S^2(1-S)^2,\; 2(|\alpha_u - \alpha_v| + S)^4\bigr)`.
* **Untied heads**: :math:`(r_1, r_2)` ranges over (a subset of) a box, so the
  corners bound :math:`t` from both sides and the loss from above: a **sound**
  upper bound, always :math:`\ge` the true maximum. Inputs whose other bits are
  all equal give attained values, a lower bound. (Maximising a product of two
  linear forms over the cube is a product-knapsack problem; no exact
  near-linear method is expected.)

Rounding. :func:`certify_scores` works from the scores in float64 and the log
domain: the rest mass :math:`S_h = e^{\operatorname{lse}(s_{\text{rest}}) - \operatorname{lse}(s)}` and the deviation
of each head from its target bit are computed without cancellation, so the
certificate stays sound when :math:`S_h` is far below the rounding error of 1
(where the two pair weights round to exactly :math:`\tfrac12`). Every bound
carries an explicit allowance for the rounding of its own arithmetic.
"""

from __future__ import annotations

from typing import Annotated

import torch

from ._certificate import WorstCase, certificate, log_weights, of_weights
from ._checks import check_pair, check_tensor
from ._contract import Array, Pair, public
from .model import ModelConfig

__all__ = ["certify_scores", "worst_case_loss"]

#: The largest weight :func:`worst_case_loss` takes: the loss, of degree four in the weights, stays finite in float64.
MAX_WEIGHT = 1e75


@public
def certify_scores(model: ModelConfig, scores: Annotated[torch.Tensor, Array(ndim=(2, 3))], pair: Pair) -> WorstCase:
    r"""Certified worst-case loss of a **softmax** model from its scores ``(..., 2, d)``: sound at every :math:`d`.

    Works in float64 from log-weights: for each head, the log-weights of the two
    hidden positions and of the rest, :math:`\log S_h`, so nothing is lost when
    the rest mass is below :math:`10^{-16}`. Exact for tied heads with
    :math:`S \le \tfrac12`, unless the rounding of the pair's weights (each known to a relative
    :math:`16\epsilon(\max|s| + \ln d + 1)`) moves their gap by more than a part in :math:`10^9` of the
    worst case (worst cases below about :math:`10^{-40}` after a large step); a sound bracket otherwise.
    An upper bound below float64's smallest normal number, :math:`2.2\times10^{-308}`, is reported as that
    number and never flagged exact. Cost :math:`O(d)` per head.

    Returns
    -------
    WorstCase
        ``lower <= max_x loss(x) <= upper`` (``lower`` is, up to an explicit rounding allowance, the loss of
        an input that is attained), ``exact`` where the two agree to nine digits, and ``margin``, a lower
        bound on :math:`\min_x y f(x)` (every sign is right where it is positive; ``all_signs_correct``).
        Fields are tensors of the batch shape (0-d for one model).

    Examples
    --------
    >>> scores = torch.zeros(2, 8, dtype=torch.float64)
    >>> scores[:, [1, 5]] = 30.0
    >>> worst = certify_scores(ModelConfig(8, "tied"), scores, (1, 5))
    >>> bool(worst.exact), float(worst.upper) < 1e-20, bool(worst.all_signs_correct)
    (True, True, True)
    """
    if model.attention != "softmax":
        raise ValueError(
            f"model.attention must be 'softmax' for certify_scores, got {model.attention!r}; "
            "use worst_case_loss(model, weights, pair) for other normalisers"
        )
    scores = check_tensor("scores", scores, ndim=(2, 3), shape={-2: 2, -1: model.d})
    pair = check_pair("pair", pair, model.d)
    tied = (scores[..., 0, :] == scores[..., 1, :]).all(-1)
    return certificate(*log_weights(scores, pair), tied, model)


@public
def worst_case_loss(model: ModelConfig, weights: Annotated[torch.Tensor, Array(ndim=(2, 3))], pair: Pair) -> WorstCase:
    r"""Certified worst-case loss for arbitrary head weights ``(..., 2, d)`` (any normaliser, any sign).

    Uses the weights as given, in float64, with an allowance for the rounding
    of the inputs (weights given in float32 are never flagged exact, since they
    are themselves rounded) and of the arithmetic. Exact for tied heads whose
    pair carries at least the rest's absolute weight; a sound upper bound with an
    attained lower bound otherwise. For softmax models prefer
    :func:`certify_scores`, which keeps the precision that rounded weights lose.
    Weights above :math:`10^{75}` in magnitude are refused (the loss would overflow).

    Examples
    --------
    >>> weights = torch.full((2, 8), 0.1 / 6, dtype=torch.float64)
    >>> weights[:, [1, 5]] = 0.45  # rest mass 0.1 on the other six positions
    >>> worst = worst_case_loss(ModelConfig(8, "tied"), weights, (1, 5))
    >>> round(float(worst.upper), 4), bool(worst.exact)
    (0.2592, True)
    """
    weights = check_tensor("weights", weights, ndim=(2, 3), shape={-2: 2, -1: model.d})
    pair = check_pair("pair", pair, model.d)
    largest = float(weights.detach().abs().max()) if weights.numel() else 0.0
    if largest > MAX_WEIGHT:
        raise ValueError(
            f"weights must be at most {MAX_WEIGHT:g} in magnitude (the loss, of degree 4 in them, overflows "
            f"float64 beyond), got {largest:.3g}"
        )
    return of_weights(weights, pair, model)
