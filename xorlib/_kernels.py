r"""The package's compiled inner loops (``xorlib/_loops.c``), called through :mod:`ctypes`, and whether they were built.

Written in :mod:`xorlib._packed`, :mod:`xorlib._stream` and :mod:`xorlib.learners._authors_core` as tensor
calls (a gather and an addition per group, a scatter per block, a Python loop per column), each is here one C loop
that reads the bytes ``(groups, rows)`` (uint8) directly. The arithmetic is the same, in the same order, so the
results are the same bit for bit (``tests/core/test_kernels.py``):

* a score is :math:`S_{g_0}[b_{g_0}] + S_{g_0+1}[b_{g_0+1}] + \dots`, added in group order, as
  :meth:`xorlib._packed.Lookup.distinct_scores` adds it (the authors' soft counts likewise, in float32);
* a histogram bin adds its weights one at a time in the order of the rows, as ``scatter_add_`` and
  ``torch.bincount`` add them (:class:`xorlib._packed.Pull`, the authors' gradient); the four-column histogram
  of the split start (:meth:`xorlib._packed.Pull.add_squares`) squares two of its columns itself, each square
  one rounded product, stored before it is added, as ``torch.mul`` then ``scatter_add_`` take them;
* two distinct queries' tables are read side by side on blocks of 256 rows or more, one 16-byte load and
  addition for both, each part's addition the scalar one;
* the screen of partial scores (:func:`xorlib._stream.top_scores`) does, row by row, the additions and
  comparisons of its tensor calls, and keeps the rows in order as ``nonzero`` does;
* the codes' transposition, pairing, halves and wholes are byte copies and flips
  (:func:`xorlib._packed.paired_columns`, :func:`xorlib._packed.whole_columns`...).

The loops are an optional extension module, built with the package (``setup.py``) wherever a C compiler is at
hand; :data:`AVAILABLE` says whether it was built, and the callers use the tensor calls where it was not (and on
other devices). It records the digest of the ``_loops.c`` it was built from (``setup.py``): a library built from
another one (a pull without a rebuild, whose loops may take other arguments) is not called, and a warning says so.
Callers pass arrays on the CPU, contiguous but for byte indices (rows of any stride, each row contiguous); the
wrappers check dtypes and layout (and the histogram of squares its shapes), not sizes.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import warnings
from pathlib import Path

import torch

__all__ = [
    "AVAILABLE", "count_histogram", "count_sums", "half_column_bytes", "half_columns", "histogram",
    "histogram_squares", "lookup_sums",
    "pair_columns", "screen", "takes_bytes", "transpose", "whole_columns",
]  # fmt: skip


_I64, _POINTER, _DOUBLE, _FLAG, _BYTE = ctypes.c_int64, ctypes.c_void_p, ctypes.c_double, ctypes.c_int, ctypes.c_uint8
#: Each loop of ``_loops.c``: its argument types and result type.
_SIGNATURES = {
    "xorlib_lookup_sums": ([_POINTER, _I64, _I64, _POINTER, _I64, _I64, _I64, _POINTER, _I64, _I64, _FLAG], None),
    "xorlib_screen": ([_POINTER, _I64, _I64, _I64, _I64, _FLAG, _FLAG, *[_DOUBLE] * 4, _POINTER], _I64),
    "xorlib_histogram": ([_POINTER, _I64, _I64, _I64, _POINTER, _I64, _I64, _POINTER, _I64], None),
    "xorlib_histogram_rows": ([], _I64),
    "xorlib_histogram_squares": ([_POINTER, _I64, _POINTER, _I64, _I64, _POINTER, _I64], None),
    "xorlib_squares_rows": ([], _I64),
    "xorlib_transpose": ([_POINTER, _I64, _I64, _I64, _POINTER, _I64], None),
    "xorlib_pair_columns": ([_POINTER, _I64, _I64, _I64, _POINTER], None),
    "xorlib_half_columns": ([_POINTER, _I64, _POINTER, _I64, _I64, _POINTER, _I64], None),
    "xorlib_whole_columns": ([_POINTER, _I64, _POINTER, _I64, _I64, _BYTE, _I64, _POINTER, _I64], None),
    "xorlib_half_column_bytes": ([_POINTER, _I64, _POINTER, _I64, _I64, _I64, _BYTE, _I64, _POINTER, _I64, _POINTER], None),
    "xorlib_count_sums": ([_POINTER, _I64, _I64, _POINTER, _I64, _POINTER], None),
    "xorlib_count_histogram": ([_POINTER, _I64, _I64, _POINTER, _I64, _POINTER], None),
}  # fmt: skip


def _load() -> ctypes.CDLL | None:
    """The compiled loops, from the extension module built beside this file (``None`` where it was not built)."""
    spec = importlib.util.find_spec("xorlib._loops")
    if spec is None or not spec.origin or not spec.has_location:
        return None
    try:
        library = ctypes.CDLL(spec.origin)
    except OSError as err:  # a file that does not load here (another build): the tensor calls, and say so
        warnings.warn(f"xorlib's compiled loops did not load ({err}); reinstall xorlib to rebuild them", stacklevel=2)
        return None
    try:  # a library built from another _loops.c (a pull without a rebuild): the tensor calls, and say so
        built_from = library.xorlib_source
        built_from.argtypes, built_from.restype = [], ctypes.c_char_p
        stale = _source_digest() not in (None, built_from().decode())
        for name, (arguments, result) in _SIGNATURES.items():
            function = getattr(library, name)
            function.argtypes, function.restype = arguments, result
    except AttributeError:  # older still: a loop, or the digest, is missing
        stale = True
    if stale:
        warnings.warn(
            "xorlib's compiled loops were built from another _loops.c; reinstall xorlib (make env) to rebuild them",
            stacklevel=2,
        )
        return None
    return library


def _source_digest() -> str | None:
    """What setup.py records of the ``_loops.c`` beside this file (``None`` where the source is not installed)."""
    source = Path(__file__).with_name("_loops.c")
    return hashlib.sha256(source.read_bytes()).hexdigest()[:16] if source.is_file() else None


#: Rows of weights the compiled histogram takes at a time (``HISTOGRAM_ROWS`` in ``_loops.c``): two columns of
#: doubles, 32 KiB, stay in the first-level cache while every group's bins take them.
HISTOGRAM_ROWS = 2048
#: Rows the four-column histogram takes at a time (``SQUARES_ROWS`` in ``_loops.c``): four columns of doubles,
#: 16 KiB, stay in the first-level cache beside one group's bins (8 KiB).
SQUARES_ROWS = 512

_LIBRARY = _load()
#: Whether the compiled loops were built (else the passes use the tensor calls, with the same results).
AVAILABLE = _LIBRARY is not None


def takes_bytes(*arrays: torch.Tensor) -> bool:
    """Whether the byte loops read these arrays as they are: built, and each array uint8 on the CPU, rows contiguous."""
    return AVAILABLE and all(_is_bytes(a) for a in arrays)


def lookup_sums(tables: torch.Tensor, index: torch.Tensor, out: torch.Tensor, first_group: int, fresh: bool) -> None:
    r"""Scores from byte look-ups, into ``out`` ``(slots, rows)``.

    ``tables`` ``(slots, all groups, 256)``; ``index`` ``(groups, rows)`` uint8, its row ``j`` the bytes of
    group ``first_group + j``. With ``fresh``, ``out[s, r]`` becomes
    :math:`\sum_j S_{s, g_0 + j}[\text{index}_{j r}]`, else that sum is added to it, term by term in group order.
    """
    slots, table_groups = tables.shape[0], tables.shape[1]
    index = _rows_contiguous(index)
    _check_bytes(index)
    groups, rows = index.shape
    if not (tables.is_contiguous() and out.stride(-1) == 1 and tables.dtype == out.dtype == torch.float64):
        raise ValueError("lookup_sums takes contiguous float64 tables and rows of out")
    _LIBRARY.xorlib_lookup_sums(
        tables.data_ptr(), slots, table_groups, index.data_ptr(), groups, rows, index.stride(0),
        out.data_ptr(), out.stride(0), first_group, int(fresh),
    )  # fmt: skip


def screen(
    partial: torch.Tensor,
    slots: list[int],
    negate: list[bool],
    offsets: list[float],
    thresholds: list[float],
    out: torch.Tensor,
) -> torch.Tensor:
    r"""The rows that a partial score can still take to the top, in order: a view of ``out`` (int64).

    Row :math:`r` is found where some head :math:`h` (one or two) has :math:`b_h \ge \text{thresholds}_h`, with
    :math:`b_h = p_{s_h r} + \text{offsets}_h`, or :math:`\text{offsets}_h - p_{s_h r}` for a negated head
    (``partial`` ``(slots, rows)`` float64, rows contiguous): the additions and comparisons of the tensor calls
    of :func:`xorlib._stream.top_scores`.
    """
    heads, rows = len(slots), partial.shape[1]
    if not (heads in (1, 2) and len(negate) == len(offsets) == len(thresholds) == heads):
        raise ValueError("screen takes one or two heads, each with a slot, a sign, an offset and a threshold")
    if not (partial.dtype == torch.float64 and partial.stride(-1) == 1 and partial.device.type == "cpu"):
        raise ValueError("screen takes float64 partial scores on the CPU, each row contiguous")
    if not (out.dtype == torch.int64 and out.is_contiguous() and out.numel() >= rows):
        raise ValueError(f"screen writes up to {rows} rows into a contiguous int64 out")
    two = [0, heads - 1]  # one head: its test twice
    found = _LIBRARY.xorlib_screen(
        partial.data_ptr(), partial.stride(0), rows, *(slots[h] for h in two), *(int(negate[h]) for h in two),
        *(float(offsets[h]) for h in two), *(float(thresholds[h]) for h in two), out.data_ptr(),
    )  # fmt: skip
    return out[:found]


def histogram(bins: torch.Tensor, index: torch.Tensor, weights: torch.Tensor) -> None:
    r"""Add the weights to their bytes' bins: ``bins[c, g, index[g, r], p] += weights[c * width + p, r]``.

    ``bins`` ``(columns, groups, 256, width)`` (``width`` 2: complex bins seen as real pairs, or 1), ``index``
    ``(groups, rows)`` uint8, ``weights`` ``(columns * width, rows)``; each bin adds in the order of the rows.
    """
    columns, groups, _, width = bins.shape
    index, weights = _rows_contiguous(index), _rows_contiguous(weights)
    _check_bytes(index)
    rows = index.shape[1]
    if not (bins.is_contiguous() and bins.dtype == weights.dtype == torch.float64):
        raise ValueError("histogram takes contiguous float64 bins and float64 weights")
    _LIBRARY.xorlib_histogram(
        bins.data_ptr(), columns, groups, width, index.data_ptr(), rows, index.stride(0), weights.data_ptr(),
        weights.stride(0),
    )  # fmt: skip


def histogram_squares(bins: torch.Tensor, index: torch.Tensor, weights: torch.Tensor) -> None:
    r"""Add two columns and their squares to their bytes' bins: ``bins[g, index[g, r]] += (a_r, a_r^2, b_r, b_r^2)``.

    ``bins`` ``(groups, 256, 4)`` float64, ``index`` ``(groups, rows)`` uint8, ``weights`` ``(2, rows)`` float64
    (``a``, ``b``); each square is one rounded product and each bin adds in the order of the rows, as
    ``torch.mul`` and ``scatter_add_`` do (:meth:`xorlib._packed.Pull.add_squares`).
    """
    index, weights = _rows_contiguous(index), _rows_contiguous(weights)
    _check_bytes(index)
    groups, rows = index.shape
    if not (
        bins.is_contiguous() and bins.shape == (groups, 256, 4) and bins.dtype == weights.dtype == torch.float64
        and bins.device.type == weights.device.type == "cpu"
    ):  # fmt: skip
        raise ValueError(
            f"histogram_squares takes contiguous float64 bins ({groups}, 256, 4) and float64 weights, on the CPU"
        )
    if weights.shape != (2, rows):
        raise ValueError(f"histogram_squares takes weights (2, {rows}), got {tuple(weights.shape)}")
    _LIBRARY.xorlib_histogram_squares(
        bins.data_ptr(), groups, index.data_ptr(), rows, index.stride(0), weights.data_ptr(), weights.stride(0)
    )


def transpose(raw: torch.Tensor, written: int, out: torch.Tensor) -> None:
    """The first ``written`` columns of uint8 ``raw`` ``(rows, groups)`` (contiguous) as rows of ``out`` ``(at least written, rows)``."""
    _check_bytes(raw, out)
    if not raw.is_contiguous():
        raise ValueError("transpose takes contiguous bytes")
    rows, groups = raw.shape
    if not (0 <= written <= min(groups, out.shape[0]) and out.shape[1] >= rows):
        raise ValueError(f"transpose writes 0 to {min(groups, out.shape[0])} columns of {rows} rows, not {written}")
    _LIBRARY.xorlib_transpose(raw.data_ptr(), rows, groups, written, out.data_ptr(), out.stride(0))


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


def half_column_bytes(
    halves: torch.Tensor, mu: torch.Tensor, first: int, last_flip: int, rows: int, columns: torch.Tensor
) -> torch.Tensor:
    """:func:`xorlib._packed.half_column_bytes`: the bytes ``(groups - first, n)`` at rows ``columns`` (int64).

    ``halves`` ``(groups, rows / 2)``; its last group flips by ``last_flip``, the others by 255.
    """
    _check_bytes(halves)
    mu, columns = _int64(mu), _int64(columns)
    groups, n = halves.shape[0], columns.numel()
    out = torch.empty(max(groups - first, 0), n, dtype=torch.uint8)
    _LIBRARY.xorlib_half_column_bytes(
        halves.data_ptr(), halves.stride(0), mu.data_ptr(), first, groups, groups - 1, last_flip, rows,
        columns.data_ptr(), n, out.data_ptr(),
    )  # fmt: skip
    return out


def count_sums(tables: torch.Tensor, bytes_: torch.Tensor) -> torch.Tensor:
    r"""The authors' model's soft counts ``(runs, n)``: :math:`\sum_g T_{rg}[b_{rgs}]` in group order (float32).

    ``tables`` ``(runs, groups, 256)`` float32, ``bytes_`` ``(runs, groups, n)`` uint8, both contiguous.
    """
    runs, groups, n = bytes_.shape
    _check_float32(tables, bytes_)
    out = torch.empty(runs, n, dtype=torch.float32)
    _LIBRARY.xorlib_count_sums(tables.data_ptr(), runs, groups, bytes_.data_ptr(), n, out.data_ptr())
    return out


def count_histogram(bytes_: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """The weights ``(runs, n)`` float32 added to their bytes' bins ``(runs, groups, 256)``, in the order of ``n``."""
    runs, groups, n = bytes_.shape
    weights = weights.contiguous()
    _check_float32(weights, bytes_)
    bins = torch.zeros(runs, groups, 256, dtype=torch.float32)
    _LIBRARY.xorlib_count_histogram(bins.data_ptr(), runs, groups, bytes_.data_ptr(), n, weights.data_ptr())
    return bins


def _check_float32(values: torch.Tensor, bytes_: torch.Tensor) -> None:
    if not (values.dtype == torch.float32 and bytes_.dtype == torch.uint8 and values.is_contiguous()):
        raise ValueError("the count loops take contiguous float32 values and uint8 bytes")
    if not (bytes_.is_contiguous() and values.device.type == bytes_.device.type == "cpu"):
        raise ValueError("the count loops take contiguous bytes on the CPU")


def _is_bytes(a: torch.Tensor) -> bool:
    return a.dtype == torch.uint8 and a.device.type == "cpu" and (a.stride(-1) == 1 or a.shape[-1] <= 1)


def _check_bytes(*arrays: torch.Tensor) -> None:
    if not all(_is_bytes(a) for a in arrays):
        raise ValueError("the byte loops take uint8 arrays on the CPU, each row contiguous")


def _int64(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.int64).contiguous()


def _rows_contiguous(x: torch.Tensor) -> torch.Tensor:
    """``x`` ``(n, rows)`` with each row contiguous (the loops take a row stride)."""
    return x if x.stride(-1) == 1 or x.shape[-1] <= 1 else x.contiguous()
