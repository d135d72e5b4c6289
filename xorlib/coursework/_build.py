"""The grading build: what the sandbox sees of xorlib (:mod:`xorlib.task` and what it imports) and the runner.

It holds :mod:`xorlib.task` (``all_inputs`` and friends) and what it imports, found by reading its relative imports,
whatever the core comes to import; any other module is absent, and importing one says why. A build that would hold
a module a question forbids (its reference) is refused.
"""

from __future__ import annotations

import ast
import atexit
import functools
import shutil
import tempfile
import threading
from pathlib import Path

__all__ = []  # internal to xorlib.coursework

#: Modules of xorlib that answers may import (with whatever they import from xorlib).
ALLOWED = ("task",)
_PACKAGE = Path(__file__).resolve().parents[1]

_INIT = '''"""The grading build of xorlib: only {allowed}."""

import importlib.abc
import sys


class _Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.startswith("xorlib.") and name.split(".")[1] not in {present!r}:
            raise ModuleNotFoundError(
                f"{{name}} is not available while grading: answers run without the book's reference code, so write "
                "the computation yourself (the grading build holds only {allowed}).", name=name)


sys.meta_path.insert(0, _Absent())


def __getattr__(name):
    raise AttributeError(f"module 'xorlib' has no attribute {{name!r}} while grading (only {allowed} is available)")
'''


# CPython 3.11 keeps the AST constructor's recursion depth per interpreter, not per thread: two threads
# parsing at once (``grade_all``'s workers) can fail with "AST constructor recursion depth mismatch".
_PARSING = threading.Lock()


def _imports(path: Path) -> set[str]:
    """The sibling modules a module (or every module of a subpackage) imports with ``from . import x``/``from .x``."""
    names: set[str] = set()
    for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
        depth = len(file.relative_to(_PACKAGE).parts)  # the level of a relative import that reaches xorlib's top
        with _PARSING:
            tree = ast.parse(file.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == depth:
                names |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
    return names


def build_modules(allowed: tuple[str, ...] = ALLOWED) -> list[str]:
    """``allowed`` and everything they import from xorlib (modules or subpackages), sorted."""
    todo, found = list(allowed), set()
    while todo:
        name = todo.pop()
        if name not in found:
            found.add(name)
            path = _PACKAGE / name if (_PACKAGE / name).is_dir() else _PACKAGE / f"{name}.py"
            todo.extend(_imports(path) - found)
    return sorted(found)


def write_build(dest: Path, forbidden: set[str] = frozenset()) -> Path:
    """Write the runner and the build of xorlib into ``dest``; refuse a build holding a ``forbidden`` module."""
    modules = build_modules()
    if leaked := set(modules) & forbidden:
        raise RuntimeError(f"the grading build would hold xorlib.{', '.join(sorted(leaked))}, a reference of the bank")
    package = Path(dest) / "xorlib"
    package.mkdir(parents=True, exist_ok=True)
    for name in modules:
        if (_PACKAGE / name).is_dir():
            shutil.copytree(_PACKAGE / name, package / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copyfile(_PACKAGE / f"{name}.py", package / f"{name}.py")
    allowed = ", ".join(f"xorlib.{a}" for a in ALLOWED)
    (package / "__init__.py").write_text(_INIT.format(allowed=allowed, present=tuple(modules)))
    shutil.copyfile(Path(__file__).with_name("_runner.py"), Path(dest) / "_runner.py")
    for path in [Path(dest), *Path(dest).rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)  # readable by the sandbox's uid; nothing secret in it
    return Path(dest)


@functools.cache
def grading_build() -> str:
    """This process's build, in a temporary folder removed at exit."""
    from .bank import CHAPTERS

    forbidden = {name.split(".")[1] for qs in CHAPTERS.values() for q in qs for name in getattr(q, "forbidden", ())}
    folder = tempfile.mkdtemp(prefix="xorlib-build-")
    atexit.register(shutil.rmtree, folder, True)
    return str(write_build(Path(folder), forbidden))
