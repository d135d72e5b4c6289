r"""The authors' model's trainer on packed bits: attention, readout, soft counts by table look-up, loss and gradient.

Internal to :mod:`xorlib.learners._authors` (which documents the model and checks
arguments); these functions trust their callers. Inputs are stored as packed bytes
and every soft count is :math:`\lceil d/8\rceil` look-ups of 256-entry tables, so a
full-batch epoch costs a few passes over :math:`N\lceil d/8\rceil` bytes; the counts of
all :math:`2^d` inputs (the exact sign test) are outer sums of the same tables, and the
readout's linear pieces come from comparisons, not a search. Each shortcut gives the
numbers of the plain formula bit for bit (tested), so the recorded runs do not depend on it.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import torch

from .. import _kernels as kernels
from .._packed import used_bits
from .._random import BYTE_BITS


def attention(a: torch.Tensor, d: int) -> torch.Tensor:
    angle = 2 * math.pi * torch.arange(d, dtype=a.dtype, device=a.device) / d
    scores = (a[..., 0:1] * angle.cos() + a[..., 1:2] * angle.sin()) / (d / 4)
    return torch.softmax(scores, dim=-1)


def readout(count: torch.Tensor, k: int) -> torch.Tensor:
    r""":math:`-1 + \sum_{i<k} (-1)^i (4 + 8i)\,\mathrm{ReLU}(c - i - \tfrac12)`, the sum taken in the order of ``i``."""
    total = torch.relu(count - 0.5) * 4
    for i in range(1, k):  # k passes over the counts, no (..., k) temporary
        total = total + torch.relu(count - i - 0.5) * ((-1) ** i * (4 + 8 * i))
    return -1 + total


class _Packed(NamedTuple):
    """Inputs as packed bits, group-major: ``index[r, g, s] = 256 (G r + g) + byte_g(s)`` (a flat table index), and
    the bytes themselves, ``bytes_[r, g, s] = byte_g(s)``, which the compiled loops read (:mod:`xorlib._kernels`)."""

    index: torch.Tensor  # (R, G, N) long
    groups: int
    n: int
    bytes_: torch.Tensor  # (R, G, N) uint8


def pack(raw: torch.Tensor, d: int) -> _Packed:
    """Packed inputs from bytes ``(R, N, G)`` (bit ``b`` of byte ``g`` is :math:`b_{8g+b}`); unused high bits are cleared."""
    raw = raw.clone()
    if d % 8:
        raw[..., -1] &= used_bits(d)
    runs, n, groups = raw.shape
    offset = 256 * torch.arange(runs * groups).view(runs, groups, 1)
    bytes_ = raw.transpose(1, 2).contiguous()
    return _Packed(bytes_.long() + offset, groups, n, bytes_)


def _uses_loops(packed: _Packed, dtype: torch.dtype) -> bool:
    """Whether the counts and their histogram go to the compiled loops: float32 on the CPU (the same numbers)."""
    return kernels.AVAILABLE and dtype == torch.float32 and packed.bytes_.device.type == "cpu"


def parity_labels(raw: torch.Tensor, supports: list[list[int]], dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Labels :math:`y = +1` for odd parity of the hidden bits, from bytes ``(R, N, G)``: ``(R, N)``."""
    rows = []
    for r, support in enumerate(supports):
        bits = sum(((raw[r, :, s // 8] >> (s % 8)) & 1).long() for s in support)
        rows.append(2.0 * (bits % 2) - 1)
    return torch.stack(rows).to(dtype)


def counts(beta: torch.Tensor, packed: _Packed, dtype: torch.dtype) -> torch.Tensor:
    r"""Soft counts :math:`c_s = \langle\beta, b_s\rangle` ``(R, N)`` by table look-up: :math:`G` look-ups per input."""
    runs, d = beta.shape
    padded = beta.new_zeros(runs, 8 * packed.groups)
    padded[:, :d] = beta
    tables = torch.einsum("vb,rgb->rgv", BYTE_BITS.to(beta), padded.view(runs, packed.groups, 8))
    if _uses_loops(packed, dtype):  # the same look-ups and additions, in group order
        return kernels.count_sums(tables.to(dtype).contiguous(), packed.bytes_)
    looked_up = tables.to(dtype).take(packed.index)  # (R, G, N)
    return looked_up.sum(1) if packed.groups > 1 else looked_up[:, 0]


def all_counts(beta: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    r"""Soft counts of **all** :math:`2^d` inputs, ``(R, 2^d)``; input ``v`` has :math:`b_i` = bit ``i`` of ``v``.

    The byte tables of :func:`counts` added as outer sums, group 0 first as :func:`counts` adds them: the
    same numbers bit for bit, with :math:`2^d` additions per run and no look-up.
    """
    runs, d = beta.shape
    groups = (d + 7) // 8
    padded = beta.new_zeros(runs, 8 * groups)
    padded[:, :d] = beta
    tables = torch.einsum("vb,rgb->rgv", BYTE_BITS.to(beta), padded.view(runs, groups, 8)).to(dtype)
    total = tables[:, 0, : 2 ** min(d, 8)]
    for g in range(1, groups):
        total = (total.unsqueeze(1) + tables[:, g, : 2 ** min(d - 8 * g, 8), None]).reshape(runs, -1)
    return total


def pieces(k: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """The readout as :math:`k + 1` linear pieces: slope and intercept on :math:`(i - \\tfrac12, i + \\tfrac12]`."""
    knots = torch.arange(k + 1, dtype=torch.float64) - 0.5
    slopes = torch.cumsum(torch.tensor([0.0] + [(-1) ** i * (4 + 8 * i) for i in range(k)], dtype=torch.float64), 0)
    values = readout(knots.clamp(min=0), k)  # the readout at each piece's left end
    return slopes.to(dtype), (values - slopes * knots.clamp(min=0)).to(dtype)


def _piece_of(count: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Slope and intercept of the readout's linear piece at each count.

    The piece is the number of kinks :math:`i + \tfrac12` below the count (as ``torch.bucketize`` numbers it);
    slopes and intercepts are small integers, so adding up their increments piece by piece is exact.
    """
    slopes, intercepts = _piece_values(k)
    slope = torch.full_like(count, slopes[0])
    intercept = torch.full_like(count, intercepts[0])
    for i in range(k):  # k is the parity order: k passes, no search and no look-up
        above = (count - (i + 0.5)).clamp_(0, 1).ceil_()  # 1[count > i + 1/2] (the difference is exact in sign)
        slope.add_(above, alpha=slopes[i + 1] - slopes[i])
        intercept.add_(above, alpha=intercepts[i + 1] - intercepts[i])
    return slope, intercept


@functools.cache
def _piece_values(k: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """:func:`pieces` as Python numbers (small integers, exact in any float type), computed once per ``k``."""
    slopes, intercepts = pieces(k, torch.float64)
    return tuple(slopes.tolist()), tuple(intercepts.tolist())


def loss_and_grad(a: torch.Tensor, d: int, packed: _Packed, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The loss ``(R,)`` and its gradient in ``a`` ``(R, k, 2)`` in closed form, one pass each way over the data.

    With :math:`\bar h` the mean hinge and :math:`\hat y'(c) = \sum_i w_i \mathbb 1[c > i + \tfrac12]`:
    :math:`\partial L/\partial c_s = -2\bar h\, y_s \mathbb 1[h_s > 0]\, \hat y'(c_s)/N`; then
    :math:`\partial L/\partial\beta_j = \sum_s b_{sj}\,\partial L/\partial c_s` (the same for every head, here a
    histogram of the bytes), the softmax pull-back :math:`\alpha_h \odot (g - \langle\alpha_h, g\rangle)`, and the
    scores' :math:`(\cos, \sin)/(n/4)`. Checked against autograd of :func:`authors_loss` in the tests.
    """
    runs, k, _ = a.shape
    alpha = attention(a, d)  # (R, k, d)
    count = counts(alpha.sum(-2), packed, y.dtype)  # (R, N), in the dtype of the labels
    slope, intercept = _piece_of(count, k)
    y_slope = y * slope
    margin = y * intercept + y_slope * count  # y = +-1, so this is y (intercept + slope c) bit for bit
    hinge = (1 - margin).clamp_(min=0)
    mean_hinge = hinge.mean(-1)  # (R,)
    # 1[h_s > 0] is sign(h_s), as h >= 0; an entry so zeroed may be -0.0, which the histogram adds as +0.0
    grad_count = y_slope.mul_(torch.sign(hinge)).mul_((-2 / packed.n) * mean_hinge.unsqueeze(-1))
    if _uses_loops(packed, count.dtype):  # each bin adds in the order of the inputs, as the scatter does
        histogram = kernels.count_histogram(packed.bytes_, grad_count)
    else:
        spread = grad_count.unsqueeze(1).expand(-1, packed.groups, -1)
        flat = count.new_zeros(256 * runs * packed.groups)
        histogram = flat.scatter_add_(0, packed.index.view(-1), spread.reshape(-1)).view(runs, packed.groups, 256)
    histogram = histogram.to(a.dtype)
    grad_beta = torch.einsum("rgv,vb->rgb", histogram, BYTE_BITS.to(a))
    grad_beta = grad_beta.reshape(runs, -1)[:, :d]
    grad_scores = alpha * (grad_beta.unsqueeze(-2) - (alpha * grad_beta.unsqueeze(-2)).sum(-1, keepdim=True))
    angle = 2 * math.pi * torch.arange(d, dtype=a.dtype) / d
    grad = torch.stack([grad_scores @ angle.cos(), grad_scores @ angle.sin()], dim=-1) / (d / 4)
    return mean_hinge.to(a.dtype) ** 2, grad


def margins(a: torch.Tensor, d: int, packed: _Packed | None, y: torch.Tensor) -> torch.Tensor:
    """Smallest margin :math:`\\min_s y_s\\hat y_s` over packed inputs, or over all :math:`2^d` (``packed=None``), ``(R,)``."""
    beta = attention(a, d).sum(-2)
    count = all_counts(beta, y.dtype) if packed is None else counts(beta, packed, y.dtype)
    return (y * readout(count, a.shape[-2])).amin(-1).to(a.dtype)
