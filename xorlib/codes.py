r"""Fixed positional codes :math:`p_1, \dots, p_d \in \mathbb{R}^m`.

*Reconstruction.* The paper's embedding is not available here. We use what a
one-step analysis needs and justify each property in the book:

* **unit norm**, :math:`\|p_i\| = 1`, so that after the step the two relevant
  positions receive exactly the same score (no position is favoured by its
  code alone);
* **low coherence**, :math:`\mu = \max_{i \ne j} |\langle p_i, p_j\rangle|`
  small, so that the direction :math:`p_{i^*} + p_{j^*}` scores the two
  relevant positions above every other one. Random sign codes give
  :math:`\mu \approx \sqrt{2\ln(d^2)/m}`, so :math:`m = O(\log d)` suffices;
* **balance**, :math:`\sum_i p_i = 0`, which removes the label-independent
  part of the population gradient exactly (see :mod:`xorlib.gradient`).

``"balanced"`` codes have entries :math:`\pm 1/\sqrt{m}` with each coordinate
taking each sign on exactly half of the positions (one more ``+`` for odd
``d``). ``"iid"`` codes have independent uniform signs. ``"onehot"`` codes are
the standard basis (:math:`m = d`), the orthogonal reference that costs
:math:`\Theta(d)` parameters.
"""

from __future__ import annotations

import math

import torch

from ._validate import check_choice, check_device, check_int, check_pair, check_tensor
from .data import make_generator

__all__ = ["CODE_KINDS", "coherence", "default_code_dim", "pair_margin", "positional_codes"]

CODE_KINDS = ("balanced", "iid", "onehot")


def default_code_dim(d: int, *, factor: float = 4.0) -> int:
    r"""The code dimension :math:`m = \lceil \text{factor} \cdot \log_2 d \rceil`, at least 8.

    With ``factor = 4`` the trainable parameter count :math:`2m` stays
    polylogarithmic, and the pair margin of :func:`pair_margin` is positive for
    most draws of codes and pair, increasingly so as ``d`` grows. Not for all:
    a sign code can tie exactly with the pair (probability at most
    :math:`(d-2)(3/4)^m \approx d^{-0.66}`; measured about 1 draw in 15 at
    ``d = 16`` and under 1 % at ``d = 1024``, see the book). Use
    :func:`xorlib.theory.code_dim_for_margin` for a stated confidence, or check
    one draw with :func:`pair_margin`.
    """
    d = check_int("d", d, minimum=2)
    if not factor > 0:
        raise ValueError(f"factor must be > 0, got {factor}")
    return max(8, math.ceil(factor * math.log2(d)))


def positional_codes(
    d: int,
    m: int | None = None,
    *,
    kind: str = "balanced",
    seed: int = 0,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    r"""The code matrix :math:`P \in \mathbb{R}^{d \times m}` whose row ``i`` is :math:`p_i`.

    Parameters
    ----------
    d
        Number of positions, ``d >= 2``.
    m
        Code dimension, ``m >= 1``; defaults to :func:`default_code_dim`. Must be
        ``d`` for ``kind="onehot"``.
    kind
        ``"balanced"``, ``"iid"`` or ``"onehot"`` (see the module docstring).
    seed
        Seed of the code draw; the same seed gives the same codes.
    """
    d = check_int("d", d, minimum=2)
    kind = check_choice("kind", kind, CODE_KINDS)
    device = check_device("device", device)
    if kind == "onehot":
        m = d if m is None else check_int("m", m, minimum=d, maximum=d)
        return torch.eye(d, device=device, dtype=dtype)
    m = default_code_dim(d) if m is None else check_int("m", m, minimum=1)
    # Drawn on the CPU and then moved, so that a seed gives the same codes on every device.
    generator = make_generator(seed, "cpu")
    if kind == "iid":
        signs = torch.randint(0, 2, (d, m), generator=generator, dtype=torch.int8).mul_(2).sub_(1)
    else:
        # One random permutation per coordinate (a loop over the m columns,
        # never over positions): ceil(d/2) plus signs and floor(d/2) minus signs.
        # Written into one preallocated int8 matrix: no d x m temporaries.
        template = torch.ones(d, dtype=torch.int8)
        template[(d + 1) // 2 :] = -1
        rows = torch.empty(m, d, dtype=torch.int8)
        for column in range(m):
            torch.index_select(template, 0, torch.randperm(d, generator=generator), out=rows[column])
        signs = rows.T
    codes = signs.to(device=device).to(dtype, memory_format=torch.contiguous_format)
    return codes.div_(math.sqrt(m))


def coherence(codes: torch.Tensor, *, block: int = 4096) -> float:
    r"""The coherence :math:`\mu = \max_{i \ne j} |\langle p_i, p_j \rangle|` of unit codes.

    Computed blockwise in :math:`O(d^2 m)` time and :math:`O(\text{block} \cdot d)`
    memory; meant for ``d`` up to a few times :math:`10^4`.
    """
    codes = check_tensor("codes", codes, ndim=2)
    block = check_int("block", block, minimum=1)
    d = codes.shape[0]
    worst = 0.0
    for start in range(0, d, block):
        gram = codes[start : start + block] @ codes.T
        rows = torch.arange(gram.shape[0], device=codes.device)
        gram[rows, rows + start] = 0.0
        worst = max(worst, float(gram.abs().max()))
    return worst


def pair_margin(codes: torch.Tensor, pair: tuple[int, int]) -> float:
    r"""The margin :math:`\gamma = \langle p_{i^*}, p_{i^*} + p_{j^*}\rangle - \max_{k \notin \{i^*, j^*\}} \langle p_k, p_{i^*} + p_{j^*}\rangle`.

    After the population step every score is proportional to
    :math:`\langle p_k, p_{i^*} + p_{j^*}\rangle`; a positive margin is what
    lets a large enough step put all attention on the relevant pair. Uses the
    score of :math:`i^*`; for unit codes it equals that of :math:`j^*`.
    """
    codes = check_tensor("codes", codes, ndim=2)
    i, j = check_pair("pair", pair, codes.shape[0])
    direction = codes[i] + codes[j]
    scores = codes @ direction
    top = float(scores[i])
    scores[[i, j]] = -torch.inf
    return top - float(scores.max())
