"""The grading build of xorlib: the few helpers an answer may import, and nothing that answers a question.

Answers run against this build, never against the package itself. It holds
:mod:`xorlib.task` (``all_inputs`` and friends, which some answers use) and the
private modules it imports, found by reading their relative imports. Every
other module, :mod:`xorlib.population`, :mod:`xorlib.attention`,
:mod:`xorlib.certify` and :mod:`xorlib.coursework` among them, is absent, and
importing one says so.
"""

from __future__ import annotations

import ast
import shutil
import threading
from pathlib import Path

__all__ = ["ALLOWED", "build_modules", "write_build"]

#: Modules of xorlib that answers may import (with whatever they import from xorlib).
ALLOWED = ("task",)

_PACKAGE = Path(__file__).resolve().parents[1]

_INIT = '''"""The grading build of xorlib: only {allowed}. The rest of the package is not available to answers."""

import importlib.abc
import sys

_PRESENT = {present!r}


class _Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.startswith("xorlib.") and name.split(".")[1] not in _PRESENT:
            raise ModuleNotFoundError(
                f"{{name}} is not available while grading: answers run without the book's reference code, "
                "so write the computation yourself (the grading build holds only {allowed}).",
                name=name,
            )
        return None


sys.meta_path.insert(0, _Absent())


def __getattr__(name):
    raise AttributeError(f"module 'xorlib' has no attribute {{name!r}} while grading (only {allowed} is available)")
'''


# CPython 3.11.7 keeps the AST constructor's recursion depth per interpreter, not per thread: two threads
# parsing at once (``grade_all``'s workers) can fail with "AST constructor recursion depth mismatch".
_PARSING = threading.Lock()


def _relative_imports(path: Path) -> set[str]:
    """The sibling modules a module imports with ``from . import x`` or ``from .x import y``."""
    names = set()
    with _PARSING:
        tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                names.add(node.module.split(".")[0])
            else:
                names.update(alias.name for alias in node.names)
    return names


def build_modules(allowed: tuple[str, ...] = ALLOWED) -> list[str]:
    """The modules of the build: ``allowed`` and everything they import from xorlib, sorted.

    Raises
    ------
    ValueError
        If that closure would include a subpackage (the build copies single modules only).
    """
    todo, found = list(allowed), set()
    while todo:
        name = todo.pop()
        if name in found:
            continue
        path = _PACKAGE / f"{name}.py"
        if not path.is_file():
            raise ValueError(f"the grading build needs xorlib/{name}.py, which is missing or a package")
        found.add(name)
        todo.extend(_relative_imports(path) - found)
    return sorted(found)


def write_build(dest: Path, allowed: tuple[str, ...] = ALLOWED) -> Path:
    """Write the grading build as ``dest/xorlib`` and return that folder."""
    package = Path(dest) / "xorlib"
    package.mkdir(parents=True, exist_ok=True)
    modules = build_modules(allowed)
    for name in modules:
        shutil.copyfile(_PACKAGE / f"{name}.py", package / f"{name}.py")
    described = ", ".join(f"xorlib.{a}" for a in allowed)
    (package / "__init__.py").write_text(_INIT.format(allowed=described, present=tuple(modules)))
    return package
