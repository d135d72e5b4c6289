r"""Compiled loops for the streamed passes' two inner operations on packed codes: look-up sums and byte histograms.

Both are written in :mod:`xorlib._packed` as tensor calls (one gather and one addition per group, one scatter per
block); ``xorlib/_loops.c`` writes each as one loop over the rows that reads the bytes ``(groups, rows)`` (uint8)
directly. The arithmetic is the same, in the same order, so the results are the same bit for bit
(``tests/core/test_kernels.py``):

* a score is :math:`S_{g_0}[b_{g_0}] + S_{g_0+1}[b_{g_0+1}] + \dots`, added in group order, as
  :meth:`xorlib._packed.Lookup.distinct_scores` adds it;
* a histogram bin adds its weights one at a time in the order of the rows, as ``scatter_add_`` and
  ``torch.bincount`` add them in :class:`xorlib._packed.Pull`.

The loops are an optional extension module, built with the package (``setup.py``) and called through
:mod:`ctypes`; :data:`AVAILABLE` says whether it was built. Callers pass float64 arrays, C-contiguous but for the
byte indices (rows of any stride, each row contiguous), on the CPU; nothing is checked here.
"""

from __future__ import annotations

import ctypes
import importlib.util

import torch

__all__ = ["AVAILABLE", "half_columns", "histogram", "lookup_sums", "pair_columns", "whole_columns"]


def _load() -> ctypes.CDLL | None:
    """The compiled loops, from the extension module built beside this file (``None`` where it was not built)."""
    spec = importlib.util.find_spec("xorlib._loops")
    if spec is None or not spec.origin or not spec.has_location:
        return None
    library = ctypes.CDLL(spec.origin)
    i64, pointer = ctypes.c_int64, ctypes.c_void_p
    library.xorlib_lookup_sums.argtypes = [pointer, i64, i64, pointer, i64, i64, i64, pointer, i64, i64, ctypes.c_int]
    library.xorlib_lookup_sums.restype = None
    library.xorlib_histogram.argtypes = [pointer, i64, i64, i64, pointer, i64, i64, pointer, i64]
    library.xorlib_histogram.restype = None
    library.xorlib_pair_columns.argtypes = [pointer, i64, i64, i64, pointer]
    library.xorlib_half_columns.argtypes = [pointer, i64, pointer, i64, i64, pointer, i64]
    library.xorlib_whole_columns.argtypes = [pointer, i64, pointer, i64, i64, ctypes.c_uint8, i64, pointer, i64]
    for name in ("xorlib_pair_columns", "xorlib_half_columns", "xorlib_whole_columns"):
        getattr(library, name).restype = None
    return library


_LIBRARY = _load()
#: Whether the compiled loops were built (else the passes use the tensor calls, with the same results).
AVAILABLE = _LIBRARY is not None


def lookup_sums(tables: torch.Tensor, index: torch.Tensor, out: torch.Tensor, first_group: int, fresh: bool) -> None:
    r"""Scores from byte look-ups, into ``out`` ``(slots, rows)``.

    ``tables`` ``(slots, all groups, 256)``; ``index`` ``(groups, rows)`` uint8, its row ``j`` the bytes of
    group ``first_group + j``. With ``fresh``, ``out[s, r]`` becomes
    :math:`\sum_j S_{s, g_0 + j}[\text{index}_{j r}]`, else that sum is added to it, term by term in group order.
    """
    slots, table_groups = tables.shape[0], tables.shape[1]
    index = _rows_contiguous(index)
    groups, rows = index.shape
    if not (tables.is_contiguous() and out.stride(-1) == 1 and tables.dtype == out.dtype == torch.float64):
        raise ValueError("lookup_sums takes contiguous float64 tables and rows of out")
    _LIBRARY.xorlib_lookup_sums(
        tables.data_ptr(), slots, table_groups, index.data_ptr(), groups, rows, index.stride(0),
        out.data_ptr(), out.stride(0), first_group, int(fresh),
    )  # fmt: skip


def histogram(bins: torch.Tensor, index: torch.Tensor, weights: torch.Tensor) -> None:
    r"""Add the weights to their bytes' bins: ``bins[c, g, index[g, r], p] += weights[c * width + p, r]``.

    ``bins`` ``(columns, groups, 256, width)`` (``width`` 2: complex bins seen as real pairs, or 1), ``index``
    ``(groups, rows)`` uint8, ``weights`` ``(columns * width, rows)``; each bin adds in the order of the rows.
    """
    columns, groups, _, width = bins.shape
    index, weights = _rows_contiguous(index), _rows_contiguous(weights)
    rows = index.shape[1]
    if not (bins.is_contiguous() and bins.dtype == weights.dtype == torch.float64):
        raise ValueError("histogram takes contiguous float64 bins and float64 weights")
    _LIBRARY.xorlib_histogram(
        bins.data_ptr(), columns, groups, width, index.data_ptr(), rows, index.stride(0), weights.data_ptr(),
        weights.stride(0),
    )  # fmt: skip


def pair_columns(columns: torch.Tensor, mu: torch.Tensor) -> None:
    """:func:`xorlib._packed._pair_columns` of uint8 ``columns`` ``(groups, rows)``, in place (``mu`` ``(groups,)`` int64)."""
    _check_bytes(columns)
    groups, rows = columns.shape
    mu = _int64(mu)
    _LIBRARY.xorlib_pair_columns(columns.data_ptr(), groups, rows, columns.stride(0), mu.data_ptr())


def half_columns(columns: torch.Tensor, mu: torch.Tensor, out: torch.Tensor) -> None:
    """:func:`xorlib._packed.half_columns` of uint8 ``columns`` ``(groups, rows)``, into ``out`` ``(groups, rows / 2)``."""
    _check_bytes(columns, out)
    groups, rows = columns.shape
    mu = _int64(mu)
    _LIBRARY.xorlib_half_columns(
        columns.data_ptr(), columns.stride(0), mu.data_ptr(), groups, rows, out.data_ptr(), out.stride(0)
    )


def whole_columns(halves: torch.Tensor, mu: torch.Tensor, groups: int, last_flip: int, out: torch.Tensor) -> None:
    """:func:`xorlib._packed.whole_columns`: the first ``groups`` paired columns, into ``out`` ``(at least groups, rows)``.

    ``halves`` ``(all groups, rows / 2)``; its last group flips by ``last_flip``, the others by 255.
    """
    _check_bytes(halves, out)
    mu = _int64(mu)
    _LIBRARY.xorlib_whole_columns(
        halves.data_ptr(), halves.stride(0), mu.data_ptr(), groups, halves.shape[0] - 1, last_flip, out.shape[1],
        out.data_ptr(), out.stride(0),
    )  # fmt: skip


def _check_bytes(*arrays: torch.Tensor) -> None:
    if any(a.dtype != torch.uint8 or a.stride(-1) != 1 or a.device.type != "cpu" for a in arrays):
        raise ValueError("the byte loops take uint8 arrays on the CPU, each row contiguous")


def _int64(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.int64).contiguous()


def _rows_contiguous(x: torch.Tensor) -> torch.Tensor:
    """``x`` ``(n, rows)`` with each row contiguous (the loops take a row stride)."""
    return x if x.stride(-1) == 1 or x.shape[-1] <= 1 else x.contiguous()
