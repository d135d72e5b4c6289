"""The public API's test contract, derived from the package itself: nothing here repeats a range or a type.

* :func:`public_names` reads every public module's ``__all__`` (a module is public when no part of its dotted
  name starts with an underscore);
* :func:`callables` lists what a reader can call: each public function, each public class (its constructor and
  its public methods), and the public methods of the results those return (found from their annotations and the
  experiments' registry);
* :func:`example` finds one valid call of a callable in its own docstring's ``Examples`` (which the doctests run);
* :func:`bad_values` turns a parameter's annotation (``Annotated[int, Between(4, MAX_D)]``, ``Literal``, a tensor
  spec, a config class...) into values it must refuse, each made from the valid one where it needs to be.

``tests/core/test_public_api.py`` calls every callable with each bad value in place of the valid one.
"""

from __future__ import annotations

import ast
import dataclasses
import doctest
import importlib
import inspect
import math
import pkgutil
import re
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import torch

import xorlib
from xorlib import _contract
from xorlib._contract import Array, Between, Items

#: Modules whose public callables other tracks own: counted in the public face, fuzzed by their own tests.
OTHER_TRACKS = ("xorlib.coursework", "xorlib.report", "xorlib.plots.style")


def public_modules() -> list[str]:
    """Every module of the package whose dotted name has no part starting with an underscore."""
    names = ["xorlib"]
    for info in pkgutil.walk_packages(xorlib.__path__, "xorlib."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            names.append(info.name)
    return sorted(names)


def public_names() -> dict[str, list[str]]:
    """``{module: its __all__}`` for every public module."""
    return {name: list(getattr(importlib.import_module(name), "__all__", [])) for name in public_modules()}


@dataclass(frozen=True)
class Callable_:
    """One public callable: where it lives, the object to call, and the function whose annotations check it."""

    where: str  # "module:name" or "module:Class.method"
    target: Callable[..., Any]  # what a caller calls (a function, a class, or a function taking self first)
    annotated: Callable[..., Any]  # whose signature and annotations describe the parameters
    skip: tuple[str, ...] = ()  # parameters not fuzzed (self)
    owner: type | None = None  # the class of a method


def _is_public(obj: object) -> bool:
    return getattr(obj, "__xorlib_public__", False) or getattr(obj, "__xorlib_config__", False)


def _methods(cls: type, where: str) -> Iterator[Callable_]:
    for name, member in vars(cls).items():
        if name.startswith("_") or isinstance(member, (property, staticmethod, classmethod)):
            continue
        if callable(member) and getattr(member, "__xorlib_public__", False):
            yield Callable_(f"{where}.{name}", member, member, ("self",), cls)


def result_types() -> set[type]:
    """Frozen dataclasses a public callable returns (from annotations and the experiments' registry)."""
    from xorlib.experiments._registry import REGISTRY

    found: set[type] = {entry.result_type for entry in REGISTRY.values()} | {
        entry.plan_type for entry in REGISTRY.values()
    }
    todo = list(found)
    while todo:
        cls = todo.pop()
        for hint in typing.get_type_hints(cls).values():
            for inner in (hint, *typing.get_args(hint)):
                for item in (inner, *typing.get_args(inner)):
                    if dataclasses.is_dataclass(item) and isinstance(item, type) and item not in found:
                        found.add(item)
                        todo.append(item)
    return found


def callables() -> list[Callable_]:
    """Every public callable this track owns (see :data:`OTHER_TRACKS`), including methods of returned results."""
    out: list[Callable_] = []
    seen: set[object] = set()
    for module, names in public_names().items():
        if module.startswith(OTHER_TRACKS):
            continue
        for name in names:
            obj = getattr(importlib.import_module(module), name)
            if obj in seen:
                continue
            seen.add(obj)
            where = f"{module}:{name}"
            if isinstance(obj, type):
                init = obj.__init__ if "__init__" in vars(obj) and not dataclasses.is_dataclass(obj) else obj
                out.append(Callable_(where, obj, init, ("self",) if init is not obj else ()))
                out.extend(_methods(obj, where))
            elif callable(obj):
                out.append(Callable_(where, obj, obj))
    for cls in sorted(result_types(), key=lambda c: c.__qualname__):
        out.extend(_methods(cls, f"{cls.__module__}:{cls.__qualname__}"))
    return out


# --------------------------------------------------------------------------------------------- valid examples
def _namespace(entry: Callable_) -> dict[str, Any]:
    target = entry.owner or entry.target
    module = importlib.import_module(getattr(target, "__module__", "xorlib"))
    return {**vars(module), "torch": torch, "xorlib": xorlib}


def example(entry: Callable_) -> tuple[Any, dict[str, Any]] | None:
    """``(self or None, keyword arguments)`` of the first call of ``entry`` in its docstring's examples."""
    doc = inspect.getdoc(entry.annotated if entry.owner else entry.target) or ""
    name = entry.where.rsplit(":", 1)[1].rsplit(".", 1)[-1]
    if entry.owner is None and isinstance(entry.target, type):
        name = entry.target.__name__
    globs = _namespace(entry)
    for ex in doctest.DocTestParser().get_examples(doc):
        tree = ast.parse(ex.source)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            matches = (isinstance(func, ast.Name) and func.id == name) or (
                isinstance(func, ast.Attribute) and func.attr == name
            )
            if not matches:
                continue
            evaluate = lambda expr: eval(compile(ast.Expression(expr), "<example>", "eval"), globs)  # noqa: E731
            owner = evaluate(func.value) if entry.owner is not None and isinstance(func, ast.Attribute) else None
            args = [evaluate(a) for a in node.args]
            kwargs = {k.arg: evaluate(k.value) for k in node.keywords}
            signature = inspect.signature(entry.annotated)
            positional = list(signature.parameters)[len(entry.skip) :]
            bound = dict(zip(positional, args, strict=False))
            return owner, {**bound, **kwargs}
        if not ex.options.get(doctest.SKIP):  # a skipped example may still name the call; it is not run
            exec(compile(tree, "<example>", "exec"), globs)
    return None


# --------------------------------------------------------------------------------------------- bad values
@dataclass(frozen=True)
class Bad:
    """One bad value for one parameter: made from the valid value; the error must name one of ``names``."""

    param: str
    text: str
    make: Callable[[Any], Any]
    names: tuple[str, ...]
    constant: bool = False  # the value does not depend on the valid one

    def __repr__(self) -> str:
        return f"{self.param}={self.text}"


def _const(value: object) -> Callable[[Any], Any]:
    return lambda _valid: value


def split_hint(hint: object) -> tuple[object, tuple[object, ...]]:
    if typing.get_origin(hint) is typing.Annotated:
        base, *meta = typing.get_args(hint)
        return base, tuple(meta)
    return hint, ()


def optional_hint(hint: object) -> tuple[object, bool]:
    base, meta = split_hint(hint)
    if typing.get_origin(base) in (typing.Union, __import__("types").UnionType):
        options = [o for o in typing.get_args(base) if o is not type(None)]
        if len(options) < len(typing.get_args(base)):
            inner = options[0] if len(options) == 1 else typing.Union[tuple(options)]  # noqa: UP007
            return (typing.Annotated[(inner, *meta)] if meta else inner), True
    return hint, False


def first_meta(meta: tuple[object, ...], kind: type) -> Any:
    return next((m for m in meta if isinstance(m, kind)), None)


def _number_bads(kind: type, bounds: Between | None) -> list[tuple[str, Any]]:
    values: list[tuple[str, Any]] = [("'1'", "1"), ("True", True)]
    if kind is int:
        values.append(("1.5", 1.5))
    else:
        values += [("nan", math.nan), ("inf", math.inf), ("-inf", -math.inf)]
    if bounds is not None and bounds.low is not None:
        low = bounds.low if bounds.open_low else bounds.low - (1 if kind is int else max(1.0, abs(bounds.low)))
        values.append((repr(low), kind(low) if kind is int else float(low)))
    if bounds is not None and bounds.high is not None:
        high = bounds.high + 1 if kind is int else bounds.high * 2 + 1
        values.append((repr(high), high))
        if kind is int:
            values.append(("10**30", 10**30))
    return values


def _tensor_bads(spec: Array) -> list[tuple[str, Callable[[Any], Any]]]:
    def rank(valid: torch.Tensor) -> torch.Tensor:
        wrong = max(spec.ndim) + 2
        return torch.zeros((2,) * wrong, dtype=valid.dtype)

    out = [
        ("a list", lambda valid: valid.tolist()),
        ("an int tensor", lambda valid: valid.long()),
        ("a float16 tensor", lambda valid: valid.half()),
        (f"rank {max(spec.ndim) + 2}", rank),
        ("a meta tensor", lambda valid: torch.empty(valid.shape, dtype=valid.dtype, device="meta")),
    ]
    if spec.finite:
        out.append(("NaN entries", lambda valid: torch.full_like(valid, math.nan)))
    if spec.signs:
        out.append(("entries 0.5", lambda valid: torch.full_like(valid, 0.5)))
    return out


def bad_values(param: str, hint: object, names: tuple[str, ...] | None = None) -> list[Bad]:
    """Values ``param`` (annotated ``hint``) must refuse, whatever the other arguments are."""
    names = names or (param,)
    hint, optional = optional_hint(hint)
    base, meta = split_hint(hint)
    consts: list[tuple[str, Any]] = []
    makers: list[tuple[str, Callable[[Any], Any]]] = []
    if not optional and base not in (object, Any):
        consts.append(("None", None))
    if base is bool:
        consts += [("1", 1), ("'yes'", "yes")]
    elif base in (int, float):
        consts += _number_bads(base, first_meta(meta, Between))
    elif base is str:
        consts += [("3", 3)]
    elif typing.get_origin(base) is Literal:
        consts += [("'nonsense'", "nonsense"), ("3", 3)]
    elif base == _contract.Pair:
        consts += [("'ab'", "ab"), ("(1,)", (1,)), ("(1, 1)", (1, 1)), ("(-1, 2)", (-1, 2)), ("(0.5, 2)", (0.5, 2))]
        consts.append(("(0, 10**12)", (0, 10**12)))
    elif base is torch.Tensor:
        makers += _tensor_bads(first_meta(meta, Array) or Array(ndim=(0, 1, 2, 3, 4)))
    elif base is torch.dtype:
        consts += [("torch.int64", torch.int64), ("'float64'", "float64")]
    elif base == _contract.Device:
        consts += [("'meta'", "meta"), ("'tpu'", "tpu"), ("3", 3)]
        if not torch.cuda.is_available():
            consts.append(("'cuda'", "cuda"))
    elif typing.get_origin(base) in (tuple, list) and typing.get_args(base)[1:] == (Ellipsis,):
        size = first_meta(meta, Items) or Items()
        item = typing.get_args(base)[0]
        consts.append(("'abc'", "abc"))
        if size.low >= 1:
            consts.append(("()", ()))
        if size.high <= 10**5:
            makers.append((f"{size.high + 1} items", lambda valid, n=size.high + 1: tuple(valid[:1]) * n))
        for bad in bad_values(f"{param}[0]", item)[:3]:
            if bad.text != "None" or not optional_hint(item)[1]:
                makers.append((f"({bad.text},)", lambda valid, b=bad: (b.make(valid[0]), *valid[1:])))
    elif isinstance(base, type) and dataclasses.is_dataclass(base):
        consts += [("'a config'", "a config"), ("3", 3)]
    elif isinstance(base, type) and base not in (object,):
        consts += [("3.5j", 3.5j)]
    out = [Bad(param, text, _const(value), names, constant=True) for text, value in consts]
    out += [Bad(param, text, make, names) for text, make in makers]
    return out


def parameters(entry: Callable_) -> dict[str, object]:
    """The annotated parameters of a callable: name -> annotation (configs: their init fields)."""
    hints = _contract.hints(entry.annotated)
    signature = inspect.signature(entry.annotated)
    out = {}
    for name, parameter in signature.parameters.items():
        if name in entry.skip or parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        out[name] = hints.get(name, Any)
    if dataclasses.is_dataclass(entry.annotated):
        out = {f.name: hints.get(f.name, Any) for f in dataclasses.fields(entry.annotated) if f.init}
    return out


def options(entry: Callable_) -> dict[str, object]:
    """The ``**options`` of a public function: name -> the annotation of the config field that checks it."""
    return {name: _contract.hints(cls)[name] for name, cls in _contract.option_names(entry.target).items()}


def names_it(message: str, names: tuple[str, ...]) -> bool:
    """Whether ``message`` names one of ``names`` as a word (``n`` in "n must be ..." but not in "an")."""
    return any(re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", message) for name in names)
