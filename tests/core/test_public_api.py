"""The public face, checked once: its size, its privacy, its floors, its pages, and every bad call refused clearly.

The contract the fuzzing uses is derived from the package (``_derived_contract``): the public names from the
modules' ``__all__``, the kinds and ranges of each argument from its annotation, one valid call from each
callable's docstring. Each bad call must

* raise :class:`TypeError` or :class:`ValueError` (or a subclass) within :data:`LIMIT_S` seconds (a refusal, not a
  computation: sizes and counts are refused before any work);
* name the argument as the caller spelled it, and say what is allowed, with no impossible range.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.util
import math
import random
import re
import time
from collections.abc import Iterator
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import _derived_contract as contract
import matplotlib.pyplot as plt
import pytest

import xorlib
from xorlib._contract import Between

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "xorlib"
#: A bad call must be refused within this many seconds (it is a check, not a computation).
LIMIT_S = 10.0
#: The most public names the package may have, across all public modules' __all__ (issue 19).
MAX_PUBLIC_NAMES = 60

CALLABLES = contract.callables()
BY_WHERE = {entry.where: entry for entry in CALLABLES}
_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_IMPOSSIBLE = (
    (re.compile(rf"\bin\s*\[\s*({_NUMBER})\s*,\s*({_NUMBER})\s*\]"), lambda a, b: a > b),
    (re.compile(rf"\bfrom\s*({_NUMBER})\s*to\s*({_NUMBER})"), lambda a, b: a > b),
)
_STATES = re.compile(
    r"\b(must|should|expect(?:s|ed)?|needs?|requires?|only|at most|at least|one of|allowed|cannot|use|choose|"
    r"not available|unknown|no (?:row|column|such))\b",
    re.IGNORECASE,
)


# --------------------------------------------------------------------------------------------- the face
#: The coursework's share of the 60: the package's seven functions and classes, the bank's two names.
COURSEWORK_BUDGET = 9


def _count(predicate) -> tuple[int, dict[str, list[str]]]:
    names = {module: entries for module, entries in contract.public_names().items() if predicate(module) and entries}
    return sum(map(len, names.values())), names


def test_the_public_face_outside_the_coursework_leaves_the_coursework_its_budget() -> None:
    total, names = _count(lambda module: not module.startswith("xorlib.coursework"))
    assert total <= MAX_PUBLIC_NAMES - COURSEWORK_BUDGET, names


def test_the_public_face_is_at_most_60_names() -> None:
    total, names = _count(lambda module: True)
    assert total <= MAX_PUBLIC_NAMES, names


def test_every_public_name_exists_and_the_api_pages_list_exactly_them() -> None:
    """Each public module with public names has one ``automodule :members:`` (which documents its ``__all__``)."""
    pages = "\n".join(path.read_text() for path in (ROOT / "chapters" / "api").glob("*.md"))
    documented = re.findall(r"\.\. automodule:: (xorlib[\w.]*)\n\s+:members:", pages)
    assert len(documented) == len(set(documented)), "a module documented twice"
    public = {}
    for module, entries in contract.public_names().items():
        for name in entries:
            assert hasattr(importlib.import_module(module), name), f"{module}.{name} is in __all__ but missing"
        if entries:
            public[module] = entries
    assert set(documented) == set(public), {"not on a page": sorted(set(public) - set(documented))}
    assert not re.search(r"\.\. auto(?:function|class|data)::", pages), "only whole modules: their __all__"


def _imports(path: Path) -> Iterator[tuple[str, str, int]]:
    """``(module, name, line)`` for every name a package module imports from another module of the package."""
    here = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("xorlib")):
            base = package.split(".")
            base = base[: len(base) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            for alias in node.names:
                yield module, alias.name, node.lineno


def _is_private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split("."))


def test_no_module_imports_a_private_name_or_a_name_a_public_module_keeps_to_itself() -> None:
    """A name crosses modules only if it is public (in ``__all__``), or lives in a private module of the package."""
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        theirs = "coursework" in path.relative_to(PACKAGE).parts  # the grader track's modules: private names only
        for module, name, line in _imports(path):
            target = importlib.import_module(module)
            if hasattr(target, "__path__") and importlib.util.find_spec(f"{module}.{name}") is not None:
                continue  # a module of the package itself (a package importing its private modules registers them)
            dunder = name.startswith("__") and name.endswith("__")
            if name.startswith("_") and not dunder:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports the private name {name} from {module}")
            elif not theirs and not dunder and not _is_private(module) and name not in getattr(target, "__all__", []):
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {name}, which {module} does not make public")
    assert not wrong, "\n".join(wrong)


def test_no_private_attribute_of_another_module_is_read() -> None:
    """No ``module._name``: what two modules share lives in a private module under a plain name."""
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        imported = {  # the names bound to modules of the package
            alias.asname or alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("xorlib"))
            for alias in node.names
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in imported:
                if node.attr.startswith("_") and not node.attr.startswith("__"):
                    wrong.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value.id}.{node.attr}")
    assert not wrong, "\n".join(wrong)


#: The floors (DESIGN.md): a module imports only from its own floor or below, or from the side (checks, cache...).
FLOORS = {
    "core": 1, "learners": 2, "experiments": 3, "presentation": 4, "tooling": 5,
}  # fmt: skip
SIDE = ("xorlib._contract", "xorlib._checks", "xorlib._random", "xorlib._runtime", "xorlib._cache", "xorlib")


def _floor(module: str) -> int:
    if module.startswith("xorlib.coursework"):
        return FLOORS["tooling"]
    if module.startswith(("xorlib.plots", "xorlib.explorer", "xorlib.claims", "xorlib.report")):
        return FLOORS["presentation"]
    if module.startswith("xorlib.experiments"):
        return FLOORS["experiments"]
    if module.startswith("xorlib.learners"):
        return FLOORS["learners"]
    return FLOORS["core"]


def test_floors_only_look_down_and_nothing_imports_in_a_cycle() -> None:
    edges: dict[str, set[str]] = {}
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        here = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for module, name, line in _imports(path):
            if (
                importlib.util.find_spec(f"{module}.{name}") is not None
                if hasattr(importlib.import_module(module), "__path__")
                else False
            ):
                module = f"{module}.{name}"  # the dependency is the submodule, not its package
            if module in SIDE or module == here:
                continue
            edges.setdefault(here, set()).add(module)
            if _floor(module) > _floor(here) and here != "xorlib":
                wrong.append(f"{here}:{line} (floor {_floor(here)}) imports {module} (floor {_floor(module)})")
    assert not wrong, "\n".join(wrong)
    state: dict[str, int] = {}

    def visit(node: str, trail: tuple[str, ...]) -> None:
        state[node] = 1
        for nxt in edges.get(node, ()):
            if state.get(nxt) == 1:
                raise AssertionError(f"import cycle: {' -> '.join((*trail, node, nxt))}")
            if nxt not in state:
                visit(nxt, (*trail, node))
        state[node] = 2

    for node in list(edges):
        if node not in state:
            visit(node, ())


def test_the_core_reads_heads_and_attention_strings_only_in_the_config() -> None:
    core = [
        p for p in PACKAGE.glob("*.py") if _floor(f"xorlib.{p.stem}") <= FLOORS["learners"] and p.name != "model.py"
    ]
    core += list((PACKAGE / "learners").glob("*.py"))
    for path in core:
        text = path.read_text()
        assert text.count("heads: str") == 0, path
        assert not re.search(r"heads\s*==\s*[\"']", text), path
        assert not re.search(r"attention\s*==\s*[\"'](?!softmax)", text), path


def test_one_version_read_from_one_place() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject and 'version = {attr = "xorlib.__version__"}' in pyproject
    assert re.search(r'^__version__ = "\d+\.\d+\.\d+"$', (PACKAGE / "__init__.py").read_text(), re.M)
    from xorlib._cache import _environment

    assert _environment()["xorlib"] == xorlib.__version__


def test_every_public_callable_has_an_example_in_its_docstring() -> None:
    missing = [entry.where for entry in CALLABLES if contract.example(entry) is None]  # (constants are not called)
    assert not missing, f"no example call in the docstring of: {missing}"


# --------------------------------------------------------------------------------------------- the fuzzing
def problem(entry: contract.Callable_, bad: contract.Bad) -> str | None:
    """What is wrong with how ``entry`` refuses ``bad`` (``None``: a clear, quick error).

    The call is timed, not interrupted (a signal raised inside the interpreter's compiler can corrupt it): a call
    that computes instead of refusing fails here after it returns, and one that never returns meets pytest-timeout.
    """
    owner, kwargs = contract.example(entry)  # fresh values each time: a call may not change the example's
    start = time.perf_counter()
    try:
        kwargs[bad.param] = bad.make(kwargs.get(bad.param))
        if entry.owner is not None:
            entry.target(owner if owner is not None else object.__new__(entry.owner), **kwargs)
        else:
            entry.target(**kwargs)
    except (TypeError, ValueError) as err:
        if time.perf_counter() - start > LIMIT_S:
            return f"refused only after {time.perf_counter() - start:.1f} s: it computed first"
        message = str(err)
        if not contract.names_it(message, bad.names):
            return f"{type(err).__name__} does not name {bad.names[0]!r}: {message}"
        if not _STATES.search(message):
            return f"{type(err).__name__} does not say what is allowed: {message}"
        for pattern, contradicts in _IMPOSSIBLE:
            for match in pattern.finditer(message):
                a, b = float(match[1]), float(match[2])
                if math.isfinite(a) and math.isfinite(b) and contradicts(a, b):
                    return f"an impossible range {match[0]!r}: {message}"
        return None
    except Exception as err:
        return f"{type(err).__name__} instead of TypeError/ValueError: {err}"
    finally:
        plt.close("all")
    return "accepted silently"


def _cases() -> list[tuple[str, contract.Bad]]:
    cases = []
    for entry in CALLABLES:
        found = contract.example(entry)
        if found is None:
            continue
        _, valid = found
        for param, hint in contract.parameters(entry).items():
            for bad in contract.bad_values(param, hint):
                if bad.text == "None" and valid.get(param, "missing") is None:
                    continue  # None is this call's own (valid) value
                if param not in valid and not bad.constant:
                    continue  # made from a valid value the example does not pass
                cases.append((entry.where, bad))
        for option, hint in contract.options(entry).items():
            for bad in contract.bad_values(option, hint):
                if bad.constant and not (bad.text == "None" and contract.optional_hint(hint)[1]):
                    cases.append((entry.where, bad))  # an option is not in the example: constant values only
    return cases


CASES = _cases()


@pytest.mark.parametrize(("where", "bad"), CASES, ids=[f"{w}-{b!r}" for w, b in CASES])
def test_a_bad_argument_is_refused_clearly(where: str, bad: contract.Bad) -> None:
    assert problem(BY_WHERE[where], bad) is None


def test_the_derived_contract_covers_every_callable_and_is_small() -> None:
    fuzzed = {where for where, _ in CASES}
    assert len(fuzzed) >= 0.9 * len(CALLABLES), sorted(set(BY_WHERE) - fuzzed)
    lines = sum(len(Path(p).read_text().splitlines()) for p in (contract.__file__, __file__))
    assert lines < 700  # the hand-kept examples and specs it replaced were 1,809 lines


NUMERIC = [
    (entry.where, param, bounds)
    for entry in CALLABLES
    if contract.example(entry) is not None
    for param, hint in contract.parameters(entry).items()
    for bounds in [contract.first_meta(contract.split_hint(contract.optional_hint(hint)[0])[1], Between)]
    if bounds is not None and contract.split_hint(contract.optional_hint(hint)[0])[0] in (int, float)
]


def _outside(bounds: Between, integer: bool, rng: random.Random) -> float | int:
    """A value beyond one end of ``bounds``, by a log-uniform distance from 1 to 10^12 (or the end itself if open)."""
    ends = [end for end in ("low", "high") if getattr(bounds, end) is not None]
    end = rng.choice(ends)
    edge = float(getattr(bounds, end))
    if end == "low" and bounds.open_low and rng.random() < 0.2:
        return edge
    distance = 10 ** rng.uniform(0, 12) * (1 if integer else rng.choice((1e-9, 1.0)))
    value = edge - distance if end == "low" else edge + max(distance, abs(edge) * 1e-9)
    return (math.floor(value) if end == "low" else math.ceil(value)) if integer else value


def test_numbers_outside_their_declared_range_are_refused() -> None:
    """Random values beyond the ends of every declared range (seeded: the same draws in every run)."""
    rng = random.Random(0)
    for _ in range(150):
        where, param, bounds = rng.choice(NUMERIC)
        integer = isinstance(contract.example(BY_WHERE[where])[1].get(param, 1.0), int)
        value = _outside(bounds, integer, rng)
        bad = contract.Bad(param, repr(value), lambda _valid, v=value: v, (param,))
        assert problem(BY_WHERE[where], bad) is None, (where, bad)


def test_results_are_frozen_dataclasses_with_named_fields() -> None:
    for cls in contract.result_types():
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, cls
