r"""Adam and plain gradient descent, written out: the updates of :mod:`torch.optim`, without its import cost.

*What this is:* the two optimisers the learners use, acting in place on one
parameter tensor whose gradient the learner computed in closed form. Each is
the update of :class:`torch.optim.Adam` and :class:`torch.optim.SGD` (defaults,
one CPU tensor, no weight decay, no momentum) operation for operation, so the
numbers are bit for bit those of :mod:`torch.optim` (tested). *Why:* the first
``torch.optim`` step imports ``torch._dynamo``, about 3 s in a fresh kernel,
longer than a chapter's whole training. *What it is not:* a general optimiser
library (no parameter groups, no state dicts).

Adam (Kingma and Ba, 2015) at step :math:`t = 1, 2, \dots` with gradient :math:`g_t`:

.. math::

    m_t = \beta_1 m_{t-1} + (1 - \beta_1) g_t,\qquad
    v_t = \beta_2 v_{t-1} + (1 - \beta_2) g_t^2,

    \theta_t = \theta_{t-1} - \frac{\eta}{1 - \beta_1^t}\,
    \frac{m_t}{\sqrt{v_t}/\sqrt{1 - \beta_2^t} + \epsilon},

coordinate by coordinate, with :math:`m_0 = v_0 = 0`, :math:`\beta = (0.9, 0.999)`, :math:`\epsilon = 10^{-8}`.
Gradient descent is :math:`\theta_t = \theta_{t-1} - \eta g_t`. Both act coordinate by
coordinate, so a leading batch axis of runs is a set of independent runs.
"""

from __future__ import annotations

import torch


class Adam:
    """Adam on ``param`` (updated in place by :meth:`step`), as :class:`torch.optim.Adam` with its defaults."""

    def __init__(self, param: torch.Tensor, lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        self.param, self.lr, self.betas, self.eps = param, lr, betas, eps
        self.exp_avg = torch.zeros_like(param)
        self.exp_avg_sq = torch.zeros_like(param)
        self.t = 0

    def step(self, grad: torch.Tensor) -> None:
        """One update with gradient ``grad`` (the shape of the parameter)."""
        beta1, beta2 = self.betas
        self.t += 1
        self.exp_avg.lerp_(grad, 1 - beta1)
        self.exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        step = float(self.t)  # torch.optim keeps t as a float32 tensor and reads it back as a float
        bias_correction1 = 1 - beta1**step
        bias_correction2 = 1 - beta2**step
        denom = (self.exp_avg_sq.sqrt() / bias_correction2**0.5).add_(self.eps)
        self.param.addcdiv_(self.exp_avg, denom, value=-(self.lr / bias_correction1))


class SGD:
    """Plain gradient descent on ``param`` (updated in place by :meth:`step`), as :class:`torch.optim.SGD` without momentum."""

    def __init__(self, param: torch.Tensor, lr: float):
        self.param, self.lr = param, lr

    def step(self, grad: torch.Tensor) -> None:
        """One update with gradient ``grad``."""
        self.param.add_(grad, alpha=-self.lr)
