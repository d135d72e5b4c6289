"""Argument checks shared by every public function of :mod:`xorlib`.

Each checker raises :class:`TypeError` for a value of the wrong kind and
:class:`ValueError` for a value outside its allowed range, always naming the
argument, so that bad input never surfaces as a NaN or a stack trace from
deep inside torch.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import torch

__all__ = [
    "check_choice",
    "check_device",
    "check_float",
    "check_int",
    "check_pair",
    "check_seed",
    "check_tensor",
]


def check_int(name: str, value: object, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """Return ``value`` as an ``int`` if it is an integer within ``[minimum, maximum]``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}{_upto(maximum)}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum} (and >= {minimum}), got {value}")
    return value


def _upto(maximum: int | float | None) -> str:
    return "" if maximum is None else f" and <= {maximum}"


def check_float(
    name: str,
    value: object,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    strict_minimum: bool = False,
) -> float:
    """Return ``value`` as a finite ``float`` within the given bounds.

    ``strict_minimum=True`` excludes the minimum itself (for step sizes that
    must be positive, say).
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    value = float(value)
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"{name} must be finite, got {value}")
    if minimum is not None:
        if strict_minimum and value <= minimum:
            raise ValueError(f"{name} must be > {minimum}{_upto(maximum)}, got {value}")
        if not strict_minimum and value < minimum:
            raise ValueError(f"{name} must be >= {minimum}{_upto(maximum)}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return value


def check_choice(name: str, value: object, choices: Sequence[str]) -> str:
    """Return ``value`` if it is one of the strings in ``choices``."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, one of {list(choices)}, got {type(value).__name__}")
    if value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")
    return value


def check_seed(name: str, value: object) -> int:
    """Return a seed: a non-negative integer below 2**63."""
    return check_int(name, value, minimum=0, maximum=2**63 - 1)


def check_pair(name: str, pair: object, d: int) -> tuple[int, int]:
    """Return the relevant pair ``(i, j)`` as two distinct positions in ``[0, d)``."""
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        raise TypeError(f"{name} must be a pair (i, j) of two distinct positions in [0, {d}), got {pair!r}")
    i = check_int(f"{name}[0]", pair[0], minimum=0, maximum=d - 1)
    j = check_int(f"{name}[1]", pair[1], minimum=0, maximum=d - 1)
    if i == j:
        raise ValueError(f"{name} must hold two distinct positions, got ({i}, {j})")
    return i, j


def check_device(name: str, device: object) -> torch.device:
    """Return a :class:`torch.device` for ``device`` (a string or a device)."""
    if isinstance(device, torch.device):
        return device
    if not isinstance(device, str):
        raise TypeError(f"{name} must be a torch.device or a string such as 'cpu' or 'cuda', got {device!r}")
    try:
        return torch.device(device)
    except RuntimeError as err:
        raise ValueError(f"{name} must name a torch device such as 'cpu' or 'cuda:0', got {device!r}") from err


def check_tensor(
    name: str,
    value: object,
    *,
    ndim: int | tuple[int, ...],
    last_dim: int | None = None,
    finite: bool = True,
) -> torch.Tensor:
    """Return ``value`` if it is a floating or integer tensor of the given rank.

    Parameters
    ----------
    ndim
        Allowed number of dimensions (one, or a tuple of allowed values).
    last_dim
        Required size of the last dimension, if any.
    finite
        Reject NaN and infinite entries.
    """
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    allowed = (ndim,) if isinstance(ndim, int) else ndim
    if value.ndim not in allowed:
        raise ValueError(
            f"{name} must have {' or '.join(map(str, allowed))} dimensions, got shape {tuple(value.shape)}"
        )
    if last_dim is not None and value.shape[-1] != last_dim:
        raise ValueError(f"{name} must have last dimension {last_dim}, got shape {tuple(value.shape)}")
    if value.is_complex() or value.dtype == torch.bool:
        raise TypeError(f"{name} must be a real tensor, got dtype {value.dtype}")
    if finite and value.is_floating_point() and value.numel() > 0 and not _all_finite(value):
        raise ValueError(f"{name} must contain only finite values")
    return value


def _all_finite(value: torch.Tensor) -> bool:
    """Whether every entry is finite, at the cost of one reduction in the common case.

    A NaN or infinite entry makes the sum non-finite, whatever the order of
    summation, so a finite sum proves every entry finite. Only a non-finite sum
    (possibly an overflow of huge finite entries) needs the entry-wise check.
    """
    value = value.detach()
    return bool(torch.isfinite(value.sum())) or bool(torch.isfinite(value).all())
