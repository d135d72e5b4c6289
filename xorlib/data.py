r"""The sparse XOR task: inputs, labels and exhaustive enumeration.

An input is :math:`x \in \{\pm 1\}^d`, drawn uniformly, and its label is

.. math:: y = -x_{i^*} x_{j^*}

for one unknown pair of distinct positions :math:`(i^*, j^*)`. The label is
:math:`+1` when the two relevant bits differ and :math:`-1` when they agree,
so it is uncorrelated with every single bit and with every other pair: only
the Walsh coefficient on :math:`\{i^*, j^*\}` is non-zero.
"""

from __future__ import annotations

import torch

from ._validate import check_device, check_int, check_pair, check_seed, check_tensor

__all__ = [
    "MAX_ENUMERATION_D",
    "all_inputs",
    "make_generator",
    "random_pair",
    "sample_inputs",
    "sample_xor",
    "xor_labels",
]

#: Largest ``d`` for which :func:`all_inputs` enumerates the ``2**d`` inputs.
MAX_ENUMERATION_D = 22


def make_generator(seed: int, device: str | torch.device = "cpu") -> torch.Generator:
    """Return a :class:`torch.Generator` on ``device`` seeded with ``seed``."""
    seed = check_seed("seed", seed)
    generator = torch.Generator(device=check_device("device", device))
    generator.manual_seed(seed)
    return generator


def sample_inputs(
    n: int,
    d: int,
    *,
    seed: int = 0,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    r"""Draw ``n`` inputs uniformly from :math:`\{\pm 1\}^d`.

    Returns
    -------
    torch.Tensor
        Shape ``(n, d)``, entries :math:`\pm 1` of type ``dtype``.
    """
    n = check_int("n", n, minimum=1)
    d = check_int("d", d, minimum=2)
    device = check_device("device", device)
    generator = make_generator(seed, device)
    bits = torch.randint(0, 2, (n, d), generator=generator, device=device, dtype=torch.int8)
    return (2 * bits - 1).to(dtype)


def xor_labels(x: torch.Tensor, pair: tuple[int, int]) -> torch.Tensor:
    r"""Labels :math:`y = -x_{i^*} x_{j^*}` for the rows of ``x`` (shape ``(n, d)``)."""
    x = check_tensor("x", x, ndim=2)
    i, j = check_pair("pair", pair, x.shape[1])
    return -x[:, i] * x[:, j]


def sample_xor(
    n: int,
    d: int,
    pair: tuple[int, int],
    *,
    seed: int = 0,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw ``n`` labelled samples ``(x, y)`` of the sparse XOR task."""
    d = check_int("d", d, minimum=2)
    check_pair("pair", pair, d)
    x = sample_inputs(n, d, seed=seed, device=device, dtype=dtype)
    return x, xor_labels(x, pair)


def all_inputs(d: int, *, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float64) -> torch.Tensor:
    r"""All :math:`2^d` points of :math:`\{\pm 1\}^d`, one per row, in binary order.

    Row ``r`` has :math:`x_i = +1` where bit ``i`` of ``r`` is 0. Only for
    ``d <= MAX_ENUMERATION_D`` (:math:`2^{22}` rows is already 4 million).
    """
    d = check_int("d", d, minimum=2, maximum=MAX_ENUMERATION_D)
    device = check_device("device", device)
    rows = torch.arange(2**d, device=device).unsqueeze(1)
    bits = (rows >> torch.arange(d, device=device)) & 1
    return (1 - 2 * bits).to(dtype)


def random_pair(d: int, *, seed: int = 0) -> tuple[int, int]:
    """Draw the hidden pair ``(i, j)``, ``i < j``, uniformly among the ``C(d, 2)`` pairs."""
    d = check_int("d", d, minimum=2)
    generator = make_generator(seed)
    i, j = torch.randperm(d, generator=generator)[:2].tolist()
    return (min(i, j), max(i, j))


# Row v of this table holds the eight bits of the byte v as signs +-1.
_BYTE_SIGNS = torch.tensor([[1.0 if (v >> k) & 1 else -1.0 for k in range(8)] for v in range(256)])


def random_signs(
    generator: torch.Generator, shape: tuple[int, int, int], *, device: str | torch.device = "cpu"
) -> torch.Tensor:
    r"""Uniform :math:`\pm1` entries of the given ``(trials, rows, d)`` shape, as float32.

    Draws 64 random bits per int64 word and expands each byte through a
    :math:`256 \times 8` sign table: several times faster than drawing one
    ``int8`` per entry. Uniform up to one word value in :math:`2^{64}`
    (``torch.randint`` excludes its upper bound, :math:`2^{63} - 1`).
    """
    trials, rows, d = (check_int(name, v, minimum=1) for name, v in zip(("trials", "rows", "d"), shape, strict=True))
    device = check_device("device", device)
    per_row = (d + 7) // 8
    n_bytes = rows * per_row
    words = torch.randint(
        -(2**63), 2**63 - 1, (trials, (n_bytes + 7) // 8), generator=generator, device=device, dtype=torch.int64
    )
    as_bytes = words.view(torch.uint8)[:, :n_bytes].to(torch.int32)
    signs = _BYTE_SIGNS.to(device)[as_bytes].view(trials, rows, per_row * 8)
    return signs[..., :d]
