r"""The loss and its gradient on a finite sample, in closed form: two passes over the data.

With head outputs :math:`z_{h,s} = \langle \alpha_h, x_s\rangle` and residuals
:math:`r_s = f(x_s) - y_s`, the gradient of the mean loss in the weights of head 1 is

.. math:: \frac{\partial \hat L}{\partial \alpha_1} = -\frac{c_1}{n}\sum_{s=1}^n r_s\, z_{2,s}\, x_s

(swap the heads for head 2), then the normaliser's pull-back and :math:`P^\top`.
The forward pass is a ``(2, d) @ (d, n)`` product and the backward pass a
``(2, n) @ (n, d)`` product: the :math:`n \times d \times m` tensor of
per-sample gradients is never formed.
"""

from __future__ import annotations

from typing import Annotated

import torch

from ._checks import check_tensor
from ._contract import Array, public
from ._moments import Objective, dense_codes, empirical_objective
from .model import ModelConfig

__all__ = ["empirical"]


@public
def empirical(
    model: ModelConfig,
    queries: Annotated[torch.Tensor, Array(ndim=(2,))],
    x: Annotated[torch.Tensor, Array(ndim=(2,), signs=True)],
    y: Annotated[torch.Tensor, Array(ndim=(1,), signs=True)],
    *,
    codes: Annotated[torch.Tensor, Array(ndim=(2,))] | None = None,
) -> Objective:
    r"""The mean loss :math:`\frac1n\sum_s \tfrac12 (f(x_s) - y_s)^2` on samples ``x`` ``(n, d)``, ``y`` ``(n,)`` and its gradients.

    Queries ``(2, m)``; ``codes`` as in :func:`xorlib.population.population`. Cost :math:`O(nd + dm)`.

    Returns
    -------
    Objective
        ``loss`` (a 0-d tensor), ``score_gradient`` :math:`\partial \hat L/\partial s_{h,k}` ``(2, d)`` and
        ``gradient`` :math:`P^\top\,\partial\hat L/\partial s` ``(2, m)``.

    Examples
    --------
    >>> from xorlib.task import sample_xor
    >>> model = ModelConfig(40, "tied")
    >>> x, y = sample_xor(2000, 40, (4, 9), seed=1)
    >>> step = empirical(model, torch.zeros(2, model.m, dtype=torch.float64), x, y)
    >>> round(float(step.loss), 6), step.score_gradient.shape
    (0.912286, torch.Size([2, 40]))
    """
    queries = check_tensor("queries", queries, ndim=2, shape={0: 2, 1: model.m})
    dense = dense_codes(model, codes, queries)
    kw = {"dtype": queries.dtype, "device": queries.device}
    x = check_tensor("x", x, ndim=2, shape={1: model.d}, **kw)
    y = check_tensor("y", y, ndim=1, shape={0: x.shape[0]}, **kw)
    loss, score_gradient = empirical_objective(queries @ dense.T, x, y, model.readout, model.normaliser)
    return Objective(loss=loss, score_gradient=score_gradient, gradient=score_gradient @ dense)
