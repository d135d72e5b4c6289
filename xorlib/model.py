r"""The single-layer, two-head Transformer, in its two reconstructions.

*Reconstruction* (the paper's architecture is not available here). Token
:math:`k` carries its bit :math:`x_k` and a fixed code :math:`p_k \in \mathbb{R}^m`
(:mod:`xorlib.codes`). Head :math:`h \in \{1, 2\}` owns one trainable query
:math:`q_h \in \mathbb{R}^m` and computes

.. math::

    s_{h,k} = \langle q_h, p_k\rangle, \qquad \alpha_h = \mathrm{norm}(s_h), \qquad
    z_h = \sum_{k=1}^d \alpha_{h,k}\, x_k ,

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

from dataclasses import dataclass

import torch
from torch import nn

from . import _random
from ._checks import check_choice, check_dtype, check_float, check_seed, check_tensor
from .attention import ATTENTION_KINDS, _weights
from .codes import CODE_KINDS, Codes

__all__ = ["ModelConfig", "TwoHeadModel", "readout_constants"]

HEADS = ("tied", "split")
STARTS = ("zero", "antisymmetric", "independent")


def readout_constants(heads: str) -> tuple[float, float]:
    r"""The constants :math:`(c_0, c_1)` of the readout :math:`f = c_0 - c_1 z_1 z_2`: ``(1, 2)`` tied, ``(0, 1)`` split."""
    heads = check_choice("heads", heads, HEADS)
    return (1.0, 2.0) if heads == "tied" else (0.0, 1.0)


@dataclass(frozen=True)
class ModelConfig:
    r"""Everything that defines one two-head model before training.

    Parameters
    ----------
    d
        Number of positions, ``d >= 4``.
    heads
        ``"split"`` (product readout, antisymmetric start) or ``"tied"`` (xor readout, zero start).
    m
        Code dimension (``None``: :func:`xorlib.codes.default_code_dim`).
    attention
        One of :data:`xorlib.attention.ATTENTION_KINDS`.
    code_kind, code_seed
        The codes (:class:`xorlib.codes.Codes`).
    start
        ``"zero"``, ``"antisymmetric"`` (:math:`q_2 = -q_1`) or ``"independent"``;
        ``None`` picks the model's own (zero for tied, antisymmetric for split).
    sigma
        Scale of a random start: :math:`q_h \sim \mathcal N(0, \sigma^2 I/m)`, so
        every score has standard deviation :math:`\sigma/\sqrt m` for unit codes.
        The default 1 is the usual variance-:math:`1/\text{fan-in}` initialisation, not tuned.
    init_seed
        Seed of a random start.
    """

    d: int
    heads: str = "split"
    m: int | None = None
    attention: str = "softmax"
    code_kind: str = "balanced"
    code_seed: int = 0
    start: str | None = None
    sigma: float = 1.0
    init_seed: int = 0

    def __post_init__(self) -> None:
        check_choice("heads", self.heads, HEADS)
        check_choice("attention", self.attention, ATTENTION_KINDS)
        check_choice("code_kind", self.code_kind, CODE_KINDS)
        check_seed("code_seed", self.code_seed)
        codes = Codes(self.d, self.m, seed=self.code_seed, kind=self.code_kind)
        object.__setattr__(self, "m", codes.m)
        start = self.start if self.start is not None else ("zero" if self.heads == "tied" else "antisymmetric")
        object.__setattr__(self, "start", check_choice("start", start, STARTS))
        object.__setattr__(self, "sigma", check_float("sigma", self.sigma, minimum=0.0, maximum=1e6))
        check_seed("init_seed", self.init_seed)

    @property
    def codes(self) -> Codes:
        """The model's positional codes."""
        return Codes(self.d, self.m, seed=self.code_seed, kind=self.code_kind)

    @property
    def readout(self) -> tuple[float, float]:
        r"""The readout constants :math:`(c_0, c_1)`."""
        return readout_constants(self.heads)

    @property
    def parameters(self) -> int:
        """Trainable parameters: the two queries, ``2m``."""
        return 2 * self.m

    def initial_queries(self, *, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """The queries at the start, shape ``(2, m)`` (drawn on the CPU: the same on every device)."""
        dtype = check_dtype("dtype", dtype)
        if self.start == "zero" or self.sigma == 0.0:
            return torch.zeros(2, self.m, dtype=dtype)
        gen = _random.generator(self.init_seed, "init", self.m)
        q = torch.randn(2, self.m, generator=gen, dtype=torch.float64) * (self.sigma / self.m**0.5)
        if self.start == "antisymmetric":
            q[1] = -q[0]
        return q.to(dtype)


def _head_outputs(weights: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``z = x @ weights.T``: head outputs ``(n, 2)`` from weights ``(2, d)`` and inputs ``(n, d)``."""
    return x @ weights.T


def _predict(z: torch.Tensor, heads: str) -> torch.Tensor:
    c0, c1 = readout_constants(heads)
    return c0 - c1 * z[..., 0] * z[..., 1]


class TwoHeadModel(nn.Module):
    r"""The two-head attention model of a :class:`ModelConfig`, as a torch module (for autograd and training).

    The codes are a buffer (dense, so meant for moderate ``d``); the queries,
    shape ``(2, m)``, are the only parameters.
    """

    def __init__(self, config: ModelConfig, *, dtype: torch.dtype = torch.float64) -> None:
        super().__init__()
        if not isinstance(config, ModelConfig):
            raise TypeError(f"config must be a ModelConfig, got {type(config).__name__}")
        self.config = config
        dtype = check_dtype("dtype", dtype)
        self.register_buffer("codes", config.codes.dense(dtype=dtype))
        self.queries = nn.Parameter(config.initial_queries(dtype=dtype))

    def weights(self) -> torch.Tensor:
        """Attention weights of both heads, shape ``(2, d)``."""
        return _weights(self.queries @ self.codes.T, self.config.attention)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Predictions :math:`f(x)` for inputs ``x`` of shape ``(n, d)``."""
        x = check_tensor("x", x, ndim=2, shape={1: self.config.d}, dtype=self.codes.dtype)
        return _predict(_head_outputs(self.weights(), x), self.config.heads)
