r"""The sparse XOR task: inputs, labels, the hidden pair, and all :math:`2^d` inputs.

An input is :math:`x \in \{\pm 1\}^d`, drawn uniformly, and its label is

.. math:: y = -x_{i^*} x_{j^*}

for one unknown pair of distinct positions :math:`i^* < j^*`. The label is
:math:`+1` when the two hidden bits differ and :math:`-1` when they agree. It is
uncorrelated with every single bit and with every other pair: in the Walsh
basis :math:`\chi_S(x) = \prod_{i \in S} x_i` it is :math:`-\chi_{\{i^*, j^*\}}`.
"""

from __future__ import annotations

from typing import Annotated

import torch

from ._checks import check_pair, check_size
from ._contract import MAX_D, MAX_ENUMERATION_D, MAX_SAMPLE_ENTRIES, Array, Between, Device, Pair, Seed, public
from ._random import bytes_to_signs, generator, random_bytes

__all__ = ["all_inputs", "random_pair", "sample_xor", "xor_labels"]


@public
def random_pair(d: Annotated[int, Between(2, MAX_D)], *, seed: Seed = 0) -> tuple[int, int]:
    """The hidden pair ``(i, j)``, ``i < j``, uniform among the :math:`\\binom d2` pairs (``2 <= d <= 10^9``).

    Examples
    --------
    >>> random_pair(8, seed=3)
    (1, 4)
    """
    gen = generator(seed, "pair", d)
    i = int(torch.randint(0, d, (1,), generator=gen))
    j = int(torch.randint(0, d - 1, (1,), generator=gen))
    j += j >= i  # uniform over the d - 1 positions other than i
    return (min(i, j), max(i, j))


def sample_signs(n: int, d: int, seed: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """``(n, d)`` uniform signs from the "data" stream of ``seed`` (the bits of :func:`sample_xor`)."""
    per_row = (d + 7) // 8
    packed = random_bytes(generator(seed, "data", n, d), n * per_row).view(n, per_row)
    return bytes_to_signs(packed.to(device), d, dtype)


@public
def sample_xor(
    n: Annotated[int, Between(1, MAX_SAMPLE_ENTRIES)],
    d: Annotated[int, Between(2, MAX_D)],
    pair: Pair,
    *,
    seed: Seed = 0,
    device: Device = "cpu",
    dtype: torch.dtype = torch.float64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw ``n`` labelled samples: inputs ``x`` of shape ``(n, d)`` and labels ``y`` of shape ``(n,)``.

    The bits come from the CPU stream of ``seed`` and are then moved to
    ``device``, so a seed gives the same samples on every device. At most
    ``n * d <= 2**32`` entries (and the allocation limit).

    Examples
    --------
    >>> x, y = sample_xor(4, 8, (1, 5), seed=0)
    >>> x.shape, y.shape
    (torch.Size([4, 8]), torch.Size([4]))
    """
    i, j = check_pair("pair", pair, d)
    if n * d > MAX_SAMPLE_ENTRIES:
        raise ValueError(f"n * d must be at most {MAX_SAMPLE_ENTRIES:,} entries, got n * d = {n * d:,}")
    check_size(f"sample_xor(n={n}, d={d})", n * d, dtype.itemsize + 1)
    x = sample_signs(n, d, seed, device, dtype)
    return x, -x[:, i] * x[:, j]


@public
def xor_labels(x: Annotated[torch.Tensor, Array(ndim=(2,), signs=True)], pair: Pair) -> torch.Tensor:
    r"""Labels :math:`y = -x_{i^*} x_{j^*}` for the rows of ``x`` (shape ``(n, d)``, entries :math:`\pm1`).

    Examples
    --------
    >>> xor_labels(all_inputs(3), (0, 2))
    tensor([-1.,  1., -1.,  1.,  1., -1.,  1., -1.], dtype=torch.float64)
    """
    i, j = check_pair("pair", pair, x.shape[1])
    return -x[:, i] * x[:, j]


@public
def all_inputs(
    d: Annotated[int, Between(2, MAX_ENUMERATION_D)], *, device: Device = "cpu", dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    r"""All :math:`2^d` points of :math:`\{\pm 1\}^d`, one per row (``2 <= d <= 22``).

    Row ``r`` has :math:`x_i = -1` exactly where bit ``i`` of ``r`` is 1.

    Examples
    --------
    >>> all_inputs(2)
    tensor([[ 1.,  1.],
            [-1.,  1.],
            [ 1., -1.],
            [-1., -1.]], dtype=torch.float64)
    """
    rows = torch.arange(2**d, device=device).unsqueeze(1)
    bits = (rows >> torch.arange(d, device=device)) & 1
    return (1 - 2 * bits).to(dtype)
