"""Values across the sandbox boundary, as JSON: test inputs go in, an answer's outputs come out.

Standalone (the standard library; torch only inside :func:`decode_inputs`,
NumPy only inside :func:`decode_output`): the grader imports it, and so does
the runner, as a sibling module, inside the sandbox. JSON carries numbers, lists and
strings only, so nothing the sandbox writes can become code or an object in
the grader; floats round-trip exactly (``repr``), NaN and infinities as
``NaN``/``Infinity``. A tensor is ``{"tensor": [flat entries], "shape": [...],
"dtype": "float64"}``; a tuple is ``{"tuple": [...]}``.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["MAX_ENTRIES", "Unsupported", "decode_inputs", "decode_output", "encode_input", "encode_output"]

#: Largest number of entries an output may have (larger ones are reported, not sent).
MAX_ENTRIES = 10**6
_DTYPES = ("float64", "float32", "int64", "bool")


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
    """The inverse of :func:`encode_input`, building torch tensors (used inside the sandbox)."""
    import torch

    if isinstance(data, dict) and "tensor" in data:
        dtype = getattr(torch, data["dtype"])
        return torch.tensor(data["tensor"], dtype=dtype).reshape(data["shape"])
    if isinstance(data, dict) and "tuple" in data:
        return tuple(decode_inputs(v) for v in data["tuple"])
    return data


def encode_output(value: Any, depth: int = 0) -> Any:
    """What an answer returned, as JSON-ready data: arrays of floats, tuples, or a description of the type.

    Never raises: a value that cannot be sent becomes ``{"unsupported": ...}``.
    """
    try:
        if depth > 3:
            return {"unsupported": "a deeply nested value"}
        if isinstance(value, (tuple, list)):
            if value and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
                return {"array": [float(v) for v in value][:MAX_ENTRIES], "shape": [len(value)]}
            return {"tuple": [encode_output(v, depth + 1) for v in value[:16]]}
        if isinstance(value, bool) or value is None or isinstance(value, str):
            return {"unsupported": f"{type(value).__name__} {str(value)[:60]!r}"}
        if isinstance(value, (int, float)):
            return {"array": [float(value)], "shape": []}
        if hasattr(value, "detach") and hasattr(value, "numel"):
            if value.is_complex():
                return {"unsupported": "a complex tensor"}
            if value.numel() > MAX_ENTRIES:
                return {"unsupported": f"a tensor with {value.numel()} entries"}
            flat = value.detach().cpu().double().reshape(-1).tolist()
            return {"array": flat, "shape": list(value.shape)}
        if hasattr(value, "dtype") and hasattr(value, "shape") and hasattr(value, "tolist"):  # a NumPy array
            if value.size > MAX_ENTRIES:
                return {"unsupported": f"an array with {value.size} entries"}
            flat = value.astype("float64").reshape(-1).tolist()
            return {"array": flat, "shape": list(value.shape)}
        return {"array": [float(value)], "shape": []}  # numpy scalars and other numbers
    except Exception as err:  # anything odd the answer returned is described, never fatal
        return {"unsupported": f"{type(value).__name__} ({type(err).__name__}: {str(err)[:80]})"}


def decode_output(data: Any, depth: int = 0) -> Any:
    """Rebuild an encoded output as NumPy arrays and tuples (in the grader).

    Raises
    ------
    ValueError
        For data that is not a well-formed encoding (the sandbox may write anything).
    """
    import numpy as np

    if depth > 4 or not isinstance(data, dict):
        raise ValueError("malformed output")
    if "array" in data:
        flat, shape = data["array"], data.get("shape")
        if not isinstance(flat, list) or not isinstance(shape, list) or not all(isinstance(s, int) for s in shape):
            raise ValueError("malformed array")
        if math.prod(shape) != len(flat) or len(flat) > MAX_ENTRIES:
            raise ValueError("array of the wrong size")
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in flat):
            raise ValueError("array of non-numbers")
        return np.asarray(flat, dtype=np.float64).reshape(shape)
    if "tuple" in data and isinstance(data["tuple"], list):
        return tuple(decode_output(v, depth + 1) for v in data["tuple"])
    if "unsupported" in data:
        return Unsupported(str(data["unsupported"])[:200])
    raise ValueError("malformed output")


class Unsupported(str):
    """An output the sandbox could not send as numbers (its description)."""
