"""The runner: answer cells and test cases run here, inside the sandbox, one request at a time; and the values
that cross the boundary, as JSON.

Started by :mod:`~xorlib.coursework.sandbox` as ``python -I -S _runner.py``. The grader writes one JSON request per
line on stdin and reads exactly one JSON reply per line; it sends the next request only after the reply, so
nothing of a later request (a hidden case's inputs) is in this process before it is needed. Requests:

``start``  drop to the sandbox's uid (where the grader asked), set the resource limits and ``sys.path``, run the
           teacher's setup, report which of the given paths this process can read;
``cell``   run an answer cell in the shared namespace, keep the function it defines;
``case``   call a kept function on decoded arguments (autograd disabled where the question forbids it).

Before the first answer runs, file descriptors 1 and 2 point to ``/dev/null``: nothing an answer prints goes
anywhere. Nothing here is trusted: the grader checks each reply (:func:`decode_output`) and keeps its own clock.
JSON carries numbers, lists and strings only: a tensor is ``{"shape": [...], "data": [flat entries]}``, a tuple
``{"tuple": [...]}``, anything else ``{"type": "<its type name>"}``. Only the standard library and torch are imported.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import resource
import sys
import traceback
from typing import Any

__all__ = []  # internal to xorlib.coursework

_AUTOGRAD = {"Tensor": ("backward",), "autograd": ("grad", "backward"),
             "autograd.functional": ("jacobian", "hessian", "vjp", "jvp", "hvp", "vhp"),
             "func": ("grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian")}  # fmt: skip


class AutogradGuard:
    """Autograd's entry points, wrapped so that they raise, saying why, inside :meth:`forbid` (which also turns
    gradient recording off). Installed before any answer runs, so that a cell's ``from torch.autograd import grad``
    binds the wrapper."""

    def __init__(self, torch) -> None:
        self.torch, self.reason = torch, None
        for path, names in _AUTOGRAD.items():
            owner = functools.reduce(getattr, path.split("."), torch)
            for name in (n for n in names if hasattr(owner, n)):
                setattr(owner, name, self._wrap(getattr(owner, name), f"torch.{path}.{name}"))

    def _wrap(self, original, label: str):
        def guarded(*args, **kwargs):
            if self.reason:
                raise RuntimeError(f"{label} is disabled here: {self.reason}")
            return original(*args, **kwargs)

        return guarded

    @contextlib.contextmanager
    def forbid(self, reason: str | None):
        previous = self.torch.is_grad_enabled()
        if reason:
            self.torch.set_grad_enabled(False)  # (torch's own no_grad calls it: it is not wrapped)
        self.reason = reason
        try:
            yield
        finally:
            self.reason = None
            self.torch.set_grad_enabled(previous)


def autograd_guard(torch) -> AutogradGuard:
    """The process's guard (one per process: wrapping twice would stack)."""
    guard = getattr(torch, "_xorlib_autograd_guard", None)
    if guard is None:
        guard = torch._xorlib_autograd_guard = AutogradGuard(torch)
    return guard


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
    import numpy as np  # the grader's side only

    if depth > 4 or not isinstance(data, dict):
        raise Malformed("not an encoded value")
    if set(data) == {"shape", "data"}:
        shape, flat = data["shape"], data["data"]
        sizes = isinstance(shape, list) and all(type(s) is int and 0 <= s <= MAX_ENTRIES for s in shape)
        if not sizes or len(shape) > MAX_DIMS:
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


def _error(err: BaseException, filename: str) -> dict:
    """``{"type", "message", "line"}``: the line from the answer's own frames."""
    line = next((f.lineno for f in reversed(traceback.extract_tb(err.__traceback__)) if f.filename == filename), None)
    return {"type": type(err).__name__[:60], "message": str(err)[:300], "line": line}


def main() -> int:
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (1, 2):
        os.dup2(null, fd)
    namespace: dict = {"__name__": "__main__"}
    functions: dict = {}
    guard = None
    for line in sys.stdin.buffer:
        request = json.loads(line)
        op, reply = request.get("op"), {}
        if op == "start":
            if request["uid"] is not None:  # root (with only CAP_SETUID/SETGID) inside bubblewrap: the fresh uid
                uid = request["uid"]
                os.setgroups([])
                os.setresgid(uid, uid, uid)
                os.setresuid(uid, uid, uid)
            for name, value in request["limits"].items():
                resource.setrlimit(getattr(resource, f"RLIMIT_{name}"), (value, value))
            sys.path[:0] = request["path"]
            try:
                exec(compile(request["setup"], "<setup>", "exec"), namespace)
                if "torch" in sys.modules:
                    sys.modules["torch"].set_num_threads(1)
                    guard = autograd_guard(sys.modules["torch"])
                readable = [p for p in request["readable"] if os.access(p, os.R_OK)]  # as this process's (real) uid
                reply = {"ok": True, "uid": os.getuid(), "readable": readable}
            except BaseException as err:
                reply = {"ok": False, "error": _error(err, "<setup>")}
        elif op == "cell":
            filename, reply["error"] = f"<answer {request['q']}>", None
            try:
                exec(compile(request["code"], filename, "exec"), namespace)
            except BaseException as err:  # the answer's error (even SystemExit) is reported, and the next cell runs
                reply["error"] = _error(err, filename)
            fn = namespace.get(request["function"])
            reply["defined"] = callable(fn)
            if callable(fn):
                functions[request["q"]] = (fn, filename)
        elif op == "case":
            fn, filename = functions[request["q"]]
            reason = request.get("forbid_autograd")
            try:
                with guard.forbid(reason) if guard else contextlib.nullcontext():
                    value = fn(*decode_inputs(request["args"]))
                reply["value"] = encode_output(value)
            except NotImplementedError as err:
                reply = {"error": _error(err, filename), "stub": True}
            except BaseException as err:
                reply = {"error": _error(err, filename)}
        channel.write(json.dumps({**reply, "id": request.get("id")}) + "\n")
        channel.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
