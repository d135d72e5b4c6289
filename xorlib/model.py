r"""The single-layer, two-head Transformer, in its two reconstructions.

*Reconstruction* (the paper's architecture is not available here). Token
:math:`k` carries its bit :math:`x_k` and a fixed code :math:`p_k \in \mathbb{R}^m`
(:mod:`xorlib.codes`). Head :math:`h \in \{1, 2\}` owns one trainable query
:math:`q_h \in \mathbb{R}^m` and computes

.. math::

    s_{h,k} &= \langle q_h, p_k\rangle, \\
    \alpha_h &= \mathrm{norm}(s_h), \\
    z_h &= \sum_{k=1}^d \alpha_{h,k}\, x_k ,

and a frozen readout :math:`f = c_0 - c_1 z_1 z_2` combines the heads. The loss is
:math:`\ell = \tfrac12 (f - y)^2` and the trainable parameters are the two
queries, :math:`2m` numbers. The two models differ in readout and start:

* **tied** (``heads="tied"``): :math:`f = 1 - 2z_1z_2`, exact when both heads put
  :math:`\tfrac12` on each hidden bit; start :math:`q_1 = q_2 = 0`. The step
  from there is the same for both heads, so the heads stay equal: this is a
  *one-head model in disguise* (:math:`m` numbers do the work);
* **split** (``heads="split"``): :math:`f = -z_1 z_2`, exact when head 1 sits on one
  hidden bit and head 2 on the other; antisymmetric random start
  :math:`q_2 = -q_1`, :math:`q_1 \sim \mathcal N(0, \sigma^2 I_m/m)`. Both heads
  are needed; the book regards this as the two-head result.
"""

from __future__ import annotations

import functools
from typing import Annotated

import torch
from torch import nn

from ._checks import check_instance, check_tensor
from ._contract import MAX_D, MAX_M, Array, Between, CodeKind, Heads, Seed, Start, config, public
from ._normalisers import NORMALISERS, AttentionKind
from ._random import generator
from .codes import Codes

__all__ = ["ModelConfig", "TwoHeadModel"]


@config
class ModelConfig:
    r"""Everything that defines one two-head model before training: the one object the core takes.

    The strings are read here, once: :attr:`readout`, :attr:`tied`, :attr:`normaliser`
    and :attr:`codes` are what the formulas use.

    Parameters
    ----------
    d
        Number of positions, ``4 <= d <= 10^9``.
    heads
        ``"split"`` (product readout, antisymmetric start) or ``"tied"`` (xor readout, zero start).
    m
        Code dimension (``None``: the default of :class:`xorlib.codes.Codes`).
    attention
        ``"softmax"``, ``"linear"``, ``"relu"``, ``"sigmoid"`` or ``"componentwise"`` (:mod:`xorlib.attention`).
    code_kind, code_seed
        The codes (:class:`xorlib.codes.Codes`).
    start
        ``"zero"``, ``"antisymmetric"`` (:math:`q_2 = -q_1`) or ``"independent"``;
        ``None`` picks the model's own (zero for tied, antisymmetric for split).
    sigma
        Scale of a random start, from 0 to :math:`10^6`: :math:`q_h \sim \mathcal N(0, \sigma^2 I/m)`,
        so every score has standard deviation :math:`\sigma/\sqrt m` for unit codes.
        The default 1 is the usual variance-:math:`1/\text{fan-in}` initialisation, not tuned.
    init_seed
        Seed of a random start.

    Examples
    --------
    >>> model = ModelConfig(64, "tied")
    >>> model.m, model.readout, model.tied, model.start, model.parameters
    (24, (1.0, 2.0), True, 'zero', 48)
    """

    d: Annotated[int, Between(4, MAX_D)]
    heads: Heads = "split"
    m: Annotated[int | None, Between(1, MAX_M)] = None
    attention: AttentionKind = "softmax"
    code_kind: CodeKind = "balanced"
    code_seed: Seed = 0
    start: Start | None = None
    sigma: Annotated[float, Between(0.0, 1e6)] = 1.0
    init_seed: Seed = 0

    def __post_init__(self) -> None:
        codes = Codes(self.d, self.m, seed=self.code_seed, kind=self.code_kind)
        object.__setattr__(self, "m", codes.m)
        if self.start is None:
            object.__setattr__(self, "start", "zero" if self.heads == "tied" else "antisymmetric")
        self.__dict__["codes"] = codes  # the cached property below, made once

    @functools.cached_property
    def codes(self) -> Codes:
        """The model's positional codes."""
        return Codes(self.d, self.m, seed=self.code_seed, kind=self.code_kind)

    @functools.cached_property
    def tied(self) -> bool:
        """Whether the heads are tied (the xor readout :math:`1 - 2z_1z_2`) rather than split (:math:`-z_1z_2`)."""
        return self.heads == "tied"

    @functools.cached_property
    def readout(self) -> tuple[float, float]:
        r"""The constants :math:`(c_0, c_1)` of the readout :math:`f = c_0 - c_1 z_1 z_2`: ``(1, 2)`` tied, ``(0, 1)`` split."""
        return (1.0, 2.0) if self.tied else (0.0, 1.0)

    @functools.cached_property
    def normaliser(self):  # one of the classes of xorlib._normalisers
        """The attention normaliser: ``weights(scores)`` and ``pullback(scores, weights, grad)``."""
        return NORMALISERS[self.attention]

    @property
    def parameters(self) -> int:
        """Trainable parameters: the two queries, ``2m``."""
        return 2 * self.m

    @public
    def initial_queries(self, *, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """The queries at the start, shape ``(2, m)`` (drawn on the CPU: the same on every device).

        Examples
        --------
        >>> q = ModelConfig(64, "split", init_seed=3).initial_queries()
        >>> q.shape, bool((q[1] == -q[0]).all())
        (torch.Size([2, 24]), True)
        """
        if self.start == "zero" or self.sigma == 0.0:
            return torch.zeros(2, self.m, dtype=dtype)
        gen = generator(self.init_seed, "init", self.m)
        q = torch.randn(2, self.m, generator=gen, dtype=torch.float64) * (self.sigma / self.m**0.5)
        if self.start == "antisymmetric":
            q[1] = -q[0]
        return q.to(dtype)


def head_outputs(weights: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``z = x @ weights.T``: head outputs ``(n, 2)`` from weights ``(2, d)`` and inputs ``(n, d)``."""
    return x @ weights.T


class TwoHeadModel(nn.Module):
    r"""The two-head attention model of a :class:`ModelConfig`, as a torch module (for autograd and training).

    The codes are a buffer (dense, so meant for moderate ``d``); the queries,
    shape ``(2, m)``, are the only parameters.

    Examples
    --------
    >>> module = TwoHeadModel(ModelConfig(8, "tied"))
    >>> module(torch.ones(3, 8, dtype=torch.float64))
    tensor([-1., -1., -1.], dtype=torch.float64, grad_fn=<RsubBackward1>)
    """

    @public
    def __init__(self, config: ModelConfig, *, dtype: torch.dtype = torch.float64) -> None:
        super().__init__()
        self.config = check_instance("config", config, ModelConfig, "a ModelConfig")
        self.register_buffer("codes", config.codes.dense(dtype=dtype))
        self.queries = nn.Parameter(config.initial_queries(dtype=dtype))

    def weights(self) -> torch.Tensor:
        """Attention weights of both heads, shape ``(2, d)``."""
        return self.config.normaliser.weights(self.queries @ self.codes.T)

    @public
    def forward(self, x: Annotated[torch.Tensor, Array(ndim=(2,))]) -> torch.Tensor:
        """Predictions :math:`f(x) = c_0 - c_1 z_1 z_2` for inputs ``x`` of shape ``(n, d)``.

        Examples
        --------
        >>> TwoHeadModel(ModelConfig(8, "tied")).forward(torch.ones(3, 8, dtype=torch.float64)).shape
        torch.Size([3])
        """
        x = check_tensor("x", x, ndim=2, shape={1: self.config.d}, dtype=self.codes.dtype)
        c0, c1 = self.config.readout
        z = head_outputs(self.weights(), x)
        return c0 - c1 * z[..., 0] * z[..., 1]
