"""Static audit: which xorlib functions create tensors without a ``device``?

Usage::

    python benchmarks/audit_device.py

Walks every module of :mod:`xorlib`, finds each call to a torch tensor factory
(``torch.zeros``, ``torch.tensor``, ``torch.randperm``, ...) that is not given
``device=``, and prints the enclosing function, whether that function takes a
``device`` argument, and the call. A factory without ``device=`` is fine when
the result is meant to live on the CPU (a returned history, a Python number) or
is moved with ``.to(other.device)`` right after; the list is for a human to
judge. The standard: every function that creates tensors takes
``device: str | torch.device = "cpu"``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil

import xorlib

FACTORIES = {
    "arange", "as_tensor", "empty", "eye", "full", "linspace", "logspace", "ones", "rand", "randint",
    "randn", "randperm", "tensor", "zeros", "Generator", "normal", "bernoulli", "multinomial",
}  # fmt: skip


def audit() -> list[tuple[str, bool, bool, int, str]]:
    """Rows ``(function, public, takes_device, line, call)`` for every factory call without ``device=``."""
    rows = []
    for info in pkgutil.walk_packages(xorlib.__path__, "xorlib."):
        module = importlib.import_module(info.name)
        source = inspect.getsource(module)
        public = set(getattr(module, "__all__", ()))
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.FunctionDef):
                continue
            params = {a.arg for a in node.args.args + node.args.kwonlyargs}
            for call in ast.walk(node):
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
                    continue
                base = call.func.value
                if not (isinstance(base, ast.Name) and base.id == "torch" and call.func.attr in FACTORIES):
                    continue
                if any(keyword.arg == "device" for keyword in call.keywords):
                    continue
                text = (ast.get_source_segment(source, call) or "").replace("\n", " ")
                rows.append((f"{info.name}.{node.name}", node.name in public, "device" in params, call.lineno, text))
    return rows


def main() -> int:
    rows = audit()
    print("| function | public | takes device | line | factory call without device= |")
    print("|---|---|---|---:|---|")
    for function, public, takes_device, line, text in rows:
        print(f"| {function} | {public} | {takes_device} | {line} | `{text[:80]}` |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
