r"""The sparse XOR task: inputs, labels, the hidden pair, and all :math:`2^d` inputs.

An input is :math:`x \in \{\pm 1\}^d`, drawn uniformly, and its label is

.. math:: y = -x_{i^*} x_{j^*}

for one unknown pair of distinct positions :math:`i^* < j^*`. The label is
:math:`+1` when the two hidden bits differ and :math:`-1` when they agree. It is
uncorrelated with every single bit and with every other pair: in the Walsh
basis :math:`\chi_S(x) = \prod_{i \in S} x_i` it is :math:`-\chi_{\{i^*, j^*\}}`.
"""

from __future__ import annotations

import torch

from . import _random
from ._checks import (
    check_device,
    check_dtype,
    check_int,
    check_pair,
    check_seed,
    check_signs,
    check_size,
    check_tensor,
)

__all__ = ["all_inputs", "random_pair", "sample_xor", "xor_labels"]

#: Largest ``d`` for which :func:`all_inputs` enumerates the ``2**d`` inputs (4 million rows).
MAX_ENUMERATION_D = 22


def random_pair(d: int, *, seed: int = 0) -> tuple[int, int]:
    """The hidden pair ``(i, j)``, ``i < j``, uniform among the :math:`\\binom d2` pairs (``d >= 2``)."""
    d = check_int("d", d, minimum=2)
    seed = check_seed("seed", seed)
    gen = _random.generator(seed, "pair", d)
    i = int(torch.randint(0, d, (1,), generator=gen))
    j = int(torch.randint(0, d - 1, (1,), generator=gen))
    j += j >= i  # uniform over the d - 1 positions other than i
    return (min(i, j), max(i, j))


def _sample_signs(n: int, d: int, seed: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """``(n, d)`` uniform signs from the "data" stream of ``seed`` (no checks)."""
    per_row = (d + 7) // 8
    packed = _random.random_bytes(_random.generator(seed, "data", n, d), n * per_row).view(n, per_row)
    return _random.bytes_to_signs(packed.to(device), d, dtype)


def sample_xor(
    n: int,
    d: int,
    pair: tuple[int, int],
    *,
    seed: int = 0,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw ``n`` labelled samples: inputs ``x`` of shape ``(n, d)`` and labels ``y`` of shape ``(n,)``.

    The bits come from the CPU stream of ``seed`` and are then moved to
    ``device``, so a seed gives the same samples on every device.
    """
    n = check_int("n", n, minimum=1)
    d = check_int("d", d, minimum=2)
    i, j = check_pair("pair", pair, d)
    seed = check_seed("seed", seed)
    device, dtype = check_device("device", device), check_dtype("dtype", dtype)
    check_size(f"sample_xor(n={n}, d={d})", n * d, dtype.itemsize + 1)
    x = _sample_signs(n, d, seed, device, dtype)
    return x, -x[:, i] * x[:, j]


def xor_labels(x: torch.Tensor, pair: tuple[int, int]) -> torch.Tensor:
    r"""Labels :math:`y = -x_{i^*} x_{j^*}` for the rows of ``x`` (shape ``(n, d)``, entries :math:`\pm1`)."""
    x = check_signs("x", check_tensor("x", x, ndim=2))
    i, j = check_pair("pair", pair, x.shape[1])
    return -x[:, i] * x[:, j]


def all_inputs(d: int, *, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float64) -> torch.Tensor:
    r"""All :math:`2^d` points of :math:`\{\pm 1\}^d`, one per row (``2 <= d <= 22``).

    Row ``r`` has :math:`x_i = -1` exactly where bit ``i`` of ``r`` is 1.
    """
    d = check_int("d", d, minimum=2, maximum=MAX_ENUMERATION_D)
    device, dtype = check_device("device", device), check_dtype("dtype", dtype)
    rows = torch.arange(2**d, device=device).unsqueeze(1)
    bits = (rows >> torch.arange(d, device=device)) & 1
    return (1 - 2 * bits).to(dtype)
