"""The runner: answer cells and test cases run here, inside the sandbox, one request at a time.

Started by :mod:`~xorlib.coursework.sandbox` as ``python -I -S _runner.py``. The grader writes one JSON request per
line on stdin and reads exactly one JSON reply per line; it sends the next request only after the reply, so
nothing of a later request (a hidden case's inputs) is in this process before it is needed. Requests:

``start``  drop to the sandbox's uid (where the grader asked), set the resource limits and ``sys.path``, run the
           teacher's setup, report which of the given paths this process can read;
``cell``   run an answer cell in the shared namespace, keep the function it defines;
``case``   call a kept function on decoded arguments (autograd disabled where the question forbids it).

Before the first answer runs, file descriptors 1 and 2 point to ``/dev/null``: nothing an answer prints goes
anywhere. Nothing here is trusted: the grader checks each reply against a schema and keeps its own clock.
Only the standard library, ``_wire`` and (after the setup) torch are imported.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import sys
import traceback

if __package__:
    from . import _wire
else:  # run as a script (python -I puts no folder on sys.path): the sibling module, then nothing of ours
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _wire

    sys.path.pop(0)

__all__ = []  # internal to xorlib.coursework

_AUTOGRAD = {
    "Tensor": ("backward",),
    "autograd": ("grad", "backward"),
    "autograd.functional": ("jacobian", "hessian", "vjp", "jvp", "hvp", "vhp"),
    "func": ("grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian"),
}


class AutogradGuard:
    """Autograd's entry points, wrapped once so that they raise, saying why, inside :meth:`forbid`.

    Installed before any answer cell runs, so that ``from torch.autograd import grad`` in a cell binds the
    wrapper; :meth:`forbid` also turns gradient recording off.
    """

    def __init__(self, torch) -> None:
        self.torch, self.reason = torch, None
        for path, names in _AUTOGRAD.items():
            owner = torch
            for part in filter(None, path.split(".")):
                owner = getattr(owner, part)
            for name in names:
                if hasattr(owner, name) and not getattr(getattr(owner, name), "_guarded", False):
                    setattr(owner, name, self._wrap(getattr(owner, name), f"torch.{path + '.' if path else ''}{name}"))

    def _wrap(self, original, label: str):
        def guarded(*args, **kwargs):
            if self.reason:
                raise RuntimeError(f"{label} is disabled here: {self.reason}")
            return original(*args, **kwargs)

        guarded._guarded = True
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


def _error(err: BaseException, filename: str) -> dict:
    """``{"type", "message", "line"}``: the line from the answer's own frames."""
    line = next((f.lineno for f in reversed(traceback.extract_tb(err.__traceback__)) if f.filename == filename), None)
    return {"type": type(err).__name__[:60], "message": str(err)[:300], "line": line}


def _readable(path: str) -> bool:
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            os.close(os.open(path, os.O_RDONLY))
        return True
    except OSError:
        return False


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
                reply = {"ok": True, "uid": os.getuid(), "readable": [p for p in request["readable"] if _readable(p)]}
            except BaseException as err:
                reply = {"ok": False, "error": _error(err, "<setup>")}
        elif op == "cell":
            filename = f"<answer {request['q']}>"
            try:
                exec(compile(request["code"], filename, "exec"), namespace)
                reply["error"] = None
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
                    value = fn(*_wire.decode_inputs(request["args"]))
                reply["value"] = _wire.encode_output(value)
            except NotImplementedError as err:
                reply = {"error": _error(err, filename), "stub": True}
            except BaseException as err:
                reply = {"error": _error(err, filename)}
        channel.write(json.dumps({**reply, "id": request.get("id")}) + "\n")
        channel.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
