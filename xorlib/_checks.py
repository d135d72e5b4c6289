"""Argument checks for the public API of :mod:`xorlib`.

Every public function checks its arguments here, once, where they enter, and
internal functions trust their callers. Each checker raises :class:`TypeError`
for a value of the wrong kind and :class:`ValueError` for a value outside its
allowed range. The message names the argument as the caller spelled it and
states the allowed range, so that bad input never surfaces as a NaN, a silently
wrong number, or a stack trace from deep inside torch.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

#: Floating dtypes the package computes in.
FLOAT_DTYPES = (torch.float32, torch.float64)

#: Default ceiling on a single allocation, in bytes (``XORLIB_MAX_BYTES`` overrides it).
DEFAULT_MAX_BYTES = 8 * 2**30


def _brief(value: object) -> str:
    """``repr(value)``, cut to a line."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _range(minimum: float | None, maximum: float | None, *, strict: bool = False) -> str:
    low = "" if minimum is None else (f"> {minimum}" if strict else f">= {minimum}")
    if maximum is None:
        return low
    return f"in ({minimum}, {maximum}]" if strict else (f"in [{minimum}, {maximum}]" if low else f"<= {maximum}")


def check_int(name: str, value: object, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """Return ``value`` as an ``int`` if it is an integer in ``[minimum, maximum]``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        bounds = _range(minimum, maximum)
        raise TypeError(
            f"{name} must be an integer{' ' + bounds if bounds else ''}, got {type(value).__name__} {value!r}"
        )
    value = int(value)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ValueError(f"{name} must be an integer {_range(minimum, maximum)}, got {value}")
    return value


def check_float(
    name: str,
    value: object,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    strict_minimum: bool = False,
) -> float:
    """Return ``value`` as a finite ``float`` within the bounds (``strict_minimum`` excludes the minimum)."""
    bounds = _range(minimum, maximum, strict=strict_minimum)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"{name} must be a real number{' ' + bounds if bounds else ''}, got {type(value).__name__} {value!r}"
        )
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number{' ' + bounds if bounds else ''}, got {value}")
    too_low = minimum is not None and (value <= minimum if strict_minimum else value < minimum)
    if too_low or (maximum is not None and value > maximum):
        raise ValueError(f"{name} must be {bounds}, got {value}")
    return value


def check_bool(name: str, value: object) -> bool:
    """Return ``value`` if it is a ``bool``."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}")
    return value


def check_instance(name: str, value: object, types: type | tuple[type, ...], what: str) -> object:
    """Return ``value`` if it is an instance of ``types`` (``what`` names them); a bool is not taken for a number."""
    allowed = types if isinstance(types, tuple) else (types,)
    if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
        raise TypeError(f"{name} must be {what}, got {type(value).__name__}")
    return value


def check_choice(name: str, value: object, choices: Sequence[str]) -> str:
    """Return ``value`` if it is one of the strings in ``choices``."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be one of {list(choices)}, got {type(value).__name__} {value!r}")
    if value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")
    return value


def check_path(name: str, value: object) -> Path:
    """Return ``value`` as a :class:`~pathlib.Path` if it is a string or a path-like object."""
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path (a str or a pathlib.Path), got {type(value).__name__} {_brief(value)}")
    return Path(value)


def check_seed(name: str, value: object) -> int:
    """Return a seed: an integer in ``[0, 2**63 - 1]``."""
    return check_int(name, value, minimum=0, maximum=2**63 - 1)


def check_pair(name: str, pair: object, d: int) -> tuple[int, int]:
    """Return the hidden pair as ``(i, j)`` with ``i < j``: two distinct positions in ``[0, d)``."""
    if d < 2:
        raise ValueError(f"{name} needs at least 2 positions to choose from, but there are d = {d}")
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        raise TypeError(f"{name} must be a pair (i, j) of two distinct integers in [0, {d - 1}], got {pair!r}")
    i = check_int(f"{name}[0]", pair[0], minimum=0, maximum=d - 1)
    j = check_int(f"{name}[1]", pair[1], minimum=0, maximum=d - 1)
    if i == j:
        raise ValueError(f"{name} must hold two distinct positions in [0, {d - 1}], got ({i}, {j})")
    return (i, j) if i < j else (j, i)


def check_sequence(name: str, value: object, *, nonempty: bool = True) -> Sequence:
    """Return ``value`` if it is a list, a tuple or a 1-d array (not a string); ``nonempty``: with an item at least."""
    is_array = isinstance(value, np.ndarray) and value.ndim == 1
    if not is_array and (isinstance(value, (str, bytes)) or not isinstance(value, Sequence)):
        raise TypeError(f"{name} must be a list, a tuple or a 1-d array, got {type(value).__name__} {_brief(value)}")
    if nonempty and len(value) == 0:
        raise ValueError(f"{name} must hold at least one item, got an empty {type(value).__name__}")
    return value


def check_members(name: str, values: object, allowed: Sequence[object]) -> list:
    """The items of a non-empty sequence, each one of ``allowed`` (e.g. the dimensions a result holds)."""
    items = list(check_sequence(name, values))
    for k, value in enumerate(items):
        if isinstance(value, bool) or value not in allowed:
            raise ValueError(f"{name}[{k}] must be one of {list(allowed)}, got {_brief(value)}")
    return items


def check_numbers(
    name: str,
    values: object,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    strict_minimum: bool = False,
    finite: bool = True,
    nonempty: bool = True,
) -> list[float]:
    """The items of a sequence of real numbers as floats, each checked like :func:`check_float` (``finite=False``:
    any real number, NaN and infinities included)."""
    items = check_sequence(name, values, nonempty=nonempty)
    if finite:
        return [
            check_float(f"{name}[{k}]", v, minimum=minimum, maximum=maximum, strict_minimum=strict_minimum)
            for k, v in enumerate(items)
        ]
    out = []
    for k, v in enumerate(items):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
            raise TypeError(f"{name}[{k}] must be a real number, got {type(v).__name__} {v!r}")
        out.append(float(v))
    return out


def check_device(name: str, device: object) -> torch.device:
    """Return a :class:`torch.device` that exists on this machine."""
    if isinstance(device, str):
        try:
            device = torch.device(device)
        except RuntimeError as err:
            raise ValueError(f"{name} must name a torch device such as 'cpu' or 'cuda:0', got {device!r}") from err
    if not isinstance(device, torch.device):
        raise TypeError(f"{name} must be a torch.device or a string such as 'cpu' or 'cuda', got {device!r:.80}")
    if device.type == "meta":
        raise ValueError(f"{name} is 'meta', a device that holds no data; use 'cpu' or an available 'cuda' device")
    if device.type == "cpu":
        return device
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"{name} is {str(device)!r}, but CUDA is not available on this machine; use 'cpu'")
        index = 0 if device.index is None else device.index
        if index >= torch.cuda.device_count():
            raise ValueError(f"{name} is {str(device)!r}, but only {torch.cuda.device_count()} CUDA device(s) exist")
        return device
    if device.type == "mps" and torch.backends.mps.is_available():
        return device
    raise ValueError(f"{name} is {str(device)!r}, which is not available here; use 'cpu' or an available 'cuda' device")


def check_dtype(name: str, dtype: object) -> torch.dtype:
    """Return ``dtype`` if it is ``torch.float32`` or ``torch.float64``."""
    if dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name} must be torch.float32 or torch.float64, got {dtype!r}")
    return dtype  # type: ignore[return-value]


def max_bytes() -> int:
    """The allocation ceiling: ``$XORLIB_MAX_BYTES`` if set, else 8 GiB."""
    env = os.environ.get("XORLIB_MAX_BYTES")
    return int(env) if env and env.isdigit() else DEFAULT_MAX_BYTES


def check_size(what: str, entries: int, bytes_per_entry: int) -> None:
    """Refuse, before allocating, an array of ``entries`` entries above the allocation ceiling."""
    need = entries * bytes_per_entry
    if need > max_bytes():
        raise ValueError(
            f"{what} would need {need / 2**30:.3g} GiB ({entries:.3g} entries), above the limit of "
            f"{max_bytes() / 2**30:.3g} GiB; choose smaller sizes (or raise XORLIB_MAX_BYTES)"
        )


def check_tensor(
    name: str,
    value: object,
    *,
    ndim: int | tuple[int, ...],
    shape: dict[int, int] | None = None,
    finite: bool = True,
    dtype: torch.dtype | None = None,
    device: torch.device | None = None,
) -> torch.Tensor:
    """Return ``value`` if it is a float32/float64 tensor of the given rank.

    Parameters
    ----------
    ndim
        Allowed number of dimensions (one value, or a tuple of allowed values).
    shape
        Required sizes of some axes, ``{axis: size}`` (negative axes count from the end).
    finite
        Reject NaN and infinite entries.
    dtype, device
        If given, the tensor must have this dtype / live on this device (to
        refuse mixed arguments with a clear message instead of torch's error).
    """
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if value.dtype not in FLOAT_DTYPES:
        raise TypeError(
            f"{name} must be a floating tensor (torch.float32 or torch.float64), got {value.dtype}; "
            f"convert it first, e.g. {name.split(' ')[0]}.double()"
        )
    if value.device.type == "meta" or value.layout != torch.strided:
        where = "on the meta device (it holds no data)" if value.device.type == "meta" else f"of layout {value.layout}"
        raise ValueError(f"{name} must be a dense tensor with data, got a tensor {where}")
    allowed = (ndim,) if isinstance(ndim, int) else ndim
    if value.ndim not in allowed:
        raise ValueError(
            f"{name} must have {' or '.join(map(str, allowed))} dimensions, got shape {tuple(value.shape)}"
        )
    for axis, size in (shape or {}).items():
        if value.shape[axis] != size:
            raise ValueError(f"{name} must have size {size} along axis {axis}, got shape {tuple(value.shape)}")
    if dtype is not None and value.dtype != dtype:
        raise TypeError(f"{name} must have dtype {dtype} like the other tensors, got {value.dtype}")
    if device is not None and value.device != device:
        raise ValueError(f"{name} must be on {device} like the other tensors, got {value.device}")
    if finite and value.numel() > 0 and not all_finite(value):
        raise ValueError(f"{name} must contain only finite values (it holds NaN or infinity)")
    return value


def check_signs(name: str, x: torch.Tensor) -> torch.Tensor:
    """Return ``x`` if every entry is +1 or -1 (inputs of the sparse XOR task)."""
    if x.numel() > 0 and not bool((x.abs() == 1).all()):
        raise ValueError(f"{name} must hold inputs in {{-1, +1}}, but some entries are neither")
    return x


def all_finite(value: torch.Tensor) -> bool:
    """Whether every entry is finite, at the cost of one reduction in the common case.

    A NaN or infinite entry makes the sum non-finite whatever the order of
    summation, so a finite sum proves every entry finite; only a non-finite sum
    (possibly an overflow of huge finite entries) needs the entry-wise check.
    """
    value = value.detach()
    return bool(torch.isfinite(value.sum())) or bool(torch.isfinite(value).all())
