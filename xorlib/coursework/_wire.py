"""Values across the sandbox boundary as JSON: test inputs go in, an answer's outputs come back as bounded data.

The runner imports this module as a sibling (the standard library, and torch inside :func:`decode_inputs`); the
grader imports it for :func:`encode_input` and :func:`decode_output`. JSON carries numbers, lists and strings only,
so nothing the sandbox writes can become code or an object in the grader. A tensor is ``{"shape": [...], "data":
[flat entries]}`` (floats round-trip exactly; NaN and infinities as ``NaN``/``Infinity``), a tuple ``{"tuple":
[...]}``, anything else ``{"type": "<its type name>"}``.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = []  # internal to xorlib.coursework

#: Largest number of entries of one output (the bank's largest is a few thousand).
MAX_ENTRIES = 10**6
#: Most dimensions of one output (NumPy refuses more than 32 or 64, with a ValueError; the bank's have at most 2).
MAX_DIMS = 32
_DTYPES = ("float64", "float32", "int64", "bool")


class Malformed(ValueError):
    """What came back is not a well-formed encoding (the sandbox may write anything)."""


def encode_input(value: Any) -> Any:
    """A test argument (tensor, number, string, tuple of those) as JSON-ready data."""
    if hasattr(value, "detach") and hasattr(value, "tolist"):
        dtype = str(value.dtype).removeprefix("torch.")
        if dtype not in _DTYPES:
            raise TypeError(f"cannot send a tensor of dtype {dtype}")
        return {"tensor": value.detach().reshape(-1).tolist(), "shape": list(value.shape), "dtype": dtype}
    if isinstance(value, tuple):
        return {"tuple": [encode_input(v) for v in value]}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"cannot send a {type(value).__name__} to the sandbox")


def decode_inputs(data: Any) -> Any:
    """The inverse of :func:`encode_input`, building torch tensors (inside the sandbox)."""
    import torch

    if isinstance(data, dict) and "tensor" in data:
        return torch.tensor(data["tensor"], dtype=getattr(torch, data["dtype"])).reshape(data["shape"])
    if isinstance(data, dict) and "tuple" in data:
        return tuple(decode_inputs(v) for v in data["tuple"])
    return data


def encode_output(value: Any, depth: int = 0) -> Any:
    """What an answer returned, as JSON-ready data; never raises (an odd value becomes ``{"type": ...}``)."""
    try:
        if isinstance(value, (tuple, list)) and depth < 3:
            if value and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
                return {"shape": [len(value)], "data": [float(v) for v in value[:MAX_ENTRIES]]}
            return {"tuple": [encode_output(v, depth + 1) for v in value[:16]]}
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return {"shape": [], "data": [float(value)]}
        if hasattr(value, "detach") and hasattr(value, "numel") and not value.is_complex():
            if value.numel() > MAX_ENTRIES:
                return {"type": f"tensor of {value.numel()} entries"}
            return {"shape": list(value.shape), "data": value.detach().cpu().double().reshape(-1).tolist()}
        if type(value).__module__ == "numpy" and hasattr(value, "astype") and value.size <= MAX_ENTRIES:
            return {"shape": list(value.shape), "data": value.astype("float64").reshape(-1).tolist()}
    except Exception:  # anything odd the answer returned is described below, never fatal
        pass
    return {"type": type(value).__name__}


def decode_output(data: Any, depth: int = 0) -> Any:
    """Rebuild an encoded output as float64 NumPy arrays and tuples; a ``str`` names the type of a non-numeric value.

    Raises
    ------
    Malformed
        For anything but a well-formed encoding: wrong keys or types, sizes that disagree, more than
        :data:`MAX_ENTRIES` entries or :data:`MAX_DIMS` dimensions, numbers beyond float64 (a 400-digit integer),
        nesting deeper than 4.
    """
    import numpy as np

    if depth > 4 or not isinstance(data, dict):
        raise Malformed("not an encoded value")
    if set(data) == {"shape", "data"}:
        shape, flat = data["shape"], data["data"]
        if (
            not isinstance(shape, list)
            or len(shape) > MAX_DIMS
            or not all(type(s) is int and 0 <= s <= MAX_ENTRIES for s in shape)
        ):
            raise Malformed("a malformed shape")
        if not isinstance(flat, list) or len(flat) > MAX_ENTRIES or math.prod(shape) != len(flat):
            raise Malformed("entries that do not fill the shape")
        if not all(type(v) in (int, float) for v in flat):
            raise Malformed("entries that are not numbers")
        try:
            return np.array([float(v) for v in flat], dtype=np.float64).reshape(shape)
        except OverflowError:
            raise Malformed("a number beyond the range of float64") from None
    if set(data) == {"tuple"} and isinstance(data["tuple"], list) and len(data["tuple"]) <= 16:
        return tuple(decode_output(v, depth + 1) for v in data["tuple"])
    if set(data) == {"type"} and isinstance(data["type"], str):
        return "".join(c for c in data["type"][:40] if c.isalnum() or c in " _.")
    raise Malformed("not an encoded value")
