r"""The single-layer, two-head Transformer for sparse XOR.

*Reconstruction* (the paper's exact architecture is not available here).
Token :math:`i` carries its value :math:`x_i` and a fixed code
:math:`p_i \in \mathbb{R}^m` (:mod:`xorlib.codes`). Head :math:`h \in \{1, 2\}`
has one trainable query :math:`q_h \in \mathbb{R}^m` and computes

.. math::

    s_{h,i} = \langle q_h, p_i\rangle, \qquad
    \alpha_h = \mathrm{norm}(s_h), \qquad
    z_h = \sum_{i=1}^d \alpha_{h,i}\, x_i ,

with the normaliser of :mod:`xorlib.attention`. A frozen readout maps the
two head outputs to the prediction:

* ``"xor"``: :math:`f = 1 - 2 z_1 z_2`. If both heads put weight
  :math:`\tfrac12` on each of :math:`i^*, j^*`, then
  :math:`z_1 = z_2 = (x_{i^*} + x_{j^*})/2` and
  :math:`f = 1 - (x_{i^*} + x_{j^*})^2/2 = -x_{i^*}x_{j^*} = y` exactly.
  This is the configuration one gradient step from uniform attention
  reaches, because the population gradient is symmetric in the pair;
* ``"product"``: :math:`f = -z_1 z_2`, exact only if the two heads split the
  pair between them, which one symmetric step cannot do. Kept to show why.

The loss is the squared loss :math:`\ell = \tfrac12 (f - y)^2`. The only
trainable parameters are the two queries: :math:`2m` numbers.
"""

from __future__ import annotations

import torch
from torch import nn

from ._validate import check_choice, check_device, check_float, check_int, check_seed, check_tensor
from .attention import ATTENTION_KINDS, attention_weights
from .codes import CODE_KINDS, positional_codes
from .data import make_generator

__all__ = [
    "INIT_KINDS",
    "READOUTS",
    "TwoHeadTransformer",
    "head_outputs",
    "head_weights",
    "initial_queries",
    "num_trainable_parameters",
    "readout",
    "readout_constants",
    "squared_loss",
]

READOUTS = ("xor", "product")
INIT_KINDS = ("zero", "random")


def readout_constants(kind: str) -> tuple[float, float]:
    r"""The constants :math:`(c_0, c_1)` of the frozen readout :math:`f = c_0 - c_1 z_1 z_2`."""
    kind = check_choice("readout", kind, READOUTS)
    return (1.0, 2.0) if kind == "xor" else (0.0, 1.0)


def readout(z: torch.Tensor, kind: str = "xor") -> torch.Tensor:
    r"""Apply the frozen readout :math:`f = c_0 - c_1 z_1 z_2` to head outputs ``z`` of shape ``(..., 2)``."""
    c0, c1 = readout_constants(kind)
    return c0 - c1 * z[..., 0] * z[..., 1]


def squared_loss(f: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    r"""Per-sample loss :math:`\ell = \tfrac12 (f - y)^2`."""
    return 0.5 * (f - y) ** 2


def head_weights(queries: torch.Tensor, codes: torch.Tensor, attention: str = "softmax") -> torch.Tensor:
    r"""Attention weights :math:`\alpha_{h,i} = \mathrm{norm}(\langle q_h, p_i\rangle)`.

    ``queries`` has shape ``(..., 2, m)`` and ``codes`` shape ``(d, m)``; the
    result has shape ``(..., 2, d)``. Cost :math:`O(dm)` per head.
    """
    queries = check_tensor("queries", queries, ndim=(2, 3))
    codes = check_tensor("codes", codes, ndim=2, last_dim=queries.shape[-1])
    if queries.shape[-2] != 2:
        raise ValueError(f"queries must hold 2 heads in its second-to-last axis, got shape {tuple(queries.shape)}")
    return attention_weights(queries @ codes.T, attention)


def head_outputs(weights: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    r"""Head outputs :math:`z_h = \sum_i \alpha_{h,i} x_i`: shape ``(n, 2)`` from weights ``(2, d)`` and ``x`` ``(n, d)``."""
    weights = check_tensor("weights", weights, ndim=2)
    x = check_tensor("x", x, ndim=2, last_dim=weights.shape[-1])
    return x @ weights.T.to(x.dtype)


def initial_queries(
    m: int,
    *,
    init: str = "zero",
    scale: float = 0.0,
    seed: int = 0,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    r"""Initial queries, shape ``(2, m)``.

    ``"zero"`` gives :math:`q_1 = q_2 = 0`, hence uniform attention, the
    starting point of the one-step theory. ``"random"`` draws
    :math:`q_h \sim \mathcal{N}(0, \text{scale}^2 I_m / m)` independently per
    head, so that each score :math:`\langle q_h, p_i\rangle` has standard
    deviation ``scale`` for unit codes.
    """
    m = check_int("m", m, minimum=1)
    init = check_choice("init", init, INIT_KINDS)
    scale = check_float("scale", scale, minimum=0.0)
    seed = check_seed("seed", seed)
    device = check_device("device", device)
    if init == "zero":
        return torch.zeros(2, m, device=device, dtype=dtype)
    generator = make_generator(seed, device)
    return torch.randn(2, m, generator=generator, device=device, dtype=dtype) * (scale / m**0.5)


class TwoHeadTransformer(nn.Module):
    r"""The two-head, single-layer attention model with a frozen readout.

    Parameters
    ----------
    d
        Number of input positions, ``d >= 2``.
    m
        Code dimension (``None`` for :func:`xorlib.codes.default_code_dim`).
    attention
        Normaliser, one of :data:`xorlib.attention.ATTENTION_KINDS`.
    readout
        ``"xor"`` or ``"product"`` (see the module docstring).
    code_kind, code_seed
        Passed to :func:`xorlib.codes.positional_codes`.
    init, init_scale, init_seed
        Passed to :func:`initial_queries`.
    device, dtype
        Where the codes and queries live.
    """

    def __init__(
        self,
        d: int,
        m: int | None = None,
        *,
        attention: str = "softmax",
        readout: str = "xor",
        code_kind: str = "balanced",
        code_seed: int = 0,
        init: str = "zero",
        init_scale: float = 0.0,
        init_seed: int = 0,
        device: str | torch.device = "cpu",
        dtype: torch.dtype = torch.float64,
    ) -> None:
        super().__init__()
        self.attention = check_choice("attention", attention, ATTENTION_KINDS)
        self.readout_kind = check_choice("readout", readout, READOUTS)
        check_choice("code_kind", code_kind, CODE_KINDS)
        codes = positional_codes(d, m, kind=code_kind, seed=code_seed, device=device, dtype=dtype)
        self.register_buffer("codes", codes)
        queries = initial_queries(
            codes.shape[1], init=init, scale=init_scale, seed=init_seed, device=device, dtype=dtype
        )
        self.queries = nn.Parameter(queries)

    @property
    def d(self) -> int:
        """Number of input positions."""
        return int(self.codes.shape[0])

    @property
    def m(self) -> int:
        """Code dimension."""
        return int(self.codes.shape[1])

    def weights(self) -> torch.Tensor:
        """Attention weights of both heads, shape ``(2, d)``."""
        return head_weights(self.queries, self.codes, self.attention)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Predictions :math:`f(x)` for inputs ``x`` of shape ``(n, d)``."""
        x = check_tensor("x", x, ndim=2, last_dim=self.d)
        return readout(head_outputs(self.weights(), x.to(self.codes.dtype)), self.readout_kind)


def num_trainable_parameters(model: nn.Module) -> int:
    """Number of trainable scalars in ``model`` (``2m`` for :class:`TwoHeadTransformer`)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
