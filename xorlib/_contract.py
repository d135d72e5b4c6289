"""The public API's contract, declared once in the annotations, and the one place that checks it.

*What this is:* the ranges and kinds a public argument or config field accepts, written as
``typing.Annotated`` metadata in the signature itself (``d: Annotated[int, Between(4, MAX_D)]``),
and the two ways they are enforced where input enters:

* :func:`public`, a decorator for a public function or method: it binds the call to the signature,
  checks and normalises every annotated argument, then runs the function. A public function called
  *by the package* (inside another public call) trusts its caller and skips the checks, so a value is
  checked once on any path, at the boundary;
* :func:`config`, a decorator that makes a frozen dataclass whose ``__post_init__`` first checks every
  annotated field the same way, then runs the class's own ``__post_init__`` (relations between fields).

The tests read the same annotations (``tests/core/_derived_contract.py``) to fuzz every public callable: the test
contract is derived from the signatures, never kept beside them. *What it is not:* a type checker; a
check raises :class:`TypeError` for a value of the wrong kind and :class:`ValueError` for one outside its
range, naming the argument as the caller spelled it and the allowed range (:mod:`xorlib._checks`).
"""

from __future__ import annotations

import collections.abc
import contextvars
import dataclasses
import functools
import inspect
import itertools
import numbers
import operator
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple, TypeVar, Union

import torch

from ._checks import (
    check_bool,
    check_choice,
    check_device,
    check_dtype,
    check_float,
    check_instance,
    check_int,
    check_path,
    check_sequence,
    check_signs,
    check_tensor,
)

F = TypeVar("F", bound=Callable[..., Any])
C = TypeVar("C", bound=type)

#: The largest number of positions ``d`` anything streams over (one pass costs about 0.2 µs per position).
MAX_D = 10**9
#: The largest ``d`` a closed-form formula of :mod:`xorlib.theory` takes (its float arithmetic stays exact to here).
MAX_FORMULA_D = 10**12
#: The largest number of sample entries ``n * d`` one computation streams through (minutes on one core).
MAX_SAMPLE_ENTRIES = 2**32
#: The largest seed: seeds are hashed with a label into torch's 63-bit generator seeds.
MAX_SEED = 2**63 - 1
#: The largest code dimension ``m`` (codes of other kinds than one-hot).
MAX_M = 4096
#: The largest ``d`` whose ``2**d`` inputs are enumerated (4 million rows).
MAX_ENUMERATION_D = 22

#: The two models (:mod:`xorlib.model`): the tied heads and the split heads.
Heads = Literal["tied", "split"]
#: The kinds of positional codes (:mod:`xorlib.codes`).
CodeKind = Literal["balanced", "iid", "gaussian", "onehot"]
#: The starts of the queries (:class:`xorlib.model.ModelConfig`).
Start = Literal["zero", "antisymmetric", "independent"]


class Between(NamedTuple):
    """A number from ``low`` to ``high`` (either may be ``None``: no bound); ``open_low``: strictly above ``low``.

    A named tuple, not a dataclass, so that the API pages print its own ``repr`` (Sphinx spells out a dataclass's
    fields with their ``repr``: ``1e-12``).
    """

    low: float | None = None
    high: float | None = None
    open_low: bool = False

    def __repr__(self) -> str:
        # The API pages print this for every parameter's range: numbers as a reader writes them (10⁻¹², not 1e-12).
        bounds = ", ".join(_readable(bound) for bound in (self.low, self.high))
        return f"Between({bounds}{', open_low=True' if self.open_low else ''})"


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _readable(number: float | None) -> str:
    """``1e-12`` as ``10⁻¹²``, ``10**12`` as ``10¹²``, ``2.5e-05`` as ``2.5 × 10⁻⁵``; anything else as ``repr``."""
    if isinstance(number, int) and not isinstance(number, bool):
        digits = str(abs(number))
        if abs(number) < 10**5 or digits.rstrip("0") != "1":
            return repr(number)
        return ("-" if number < 0 else "") + "10" + str(len(digits) - 1).translate(_SUPERSCRIPT)
    if not isinstance(number, float):
        return repr(number)
    mantissa, _, exponent = repr(number).partition("e")
    if not exponent:
        return repr(number)
    power = "10" + str(int(exponent)).translate(_SUPERSCRIPT)
    sign, digits = ("-", mantissa[1:]) if mantissa.startswith("-") else ("", mantissa)
    return sign + (power if digits in ("1", "1.0") else f"{digits} × {power}")


@dataclass(frozen=True)
class Items:
    """A sequence (list, tuple or 1-d array) of ``low`` to ``high`` items; ``increasing``: strictly increasing."""

    low: int = 1
    high: int = 10**4
    increasing: bool = False


@dataclass(frozen=True)
class Array:
    """A float32/float64 tensor with data (not ``meta``) of one of the ranks ``ndim``, finite unless ``finite=False``;
    ``signs``: every entry +1 or -1."""

    ndim: tuple[int, ...]
    finite: bool = True
    signs: bool = False


#: A seed: an integer from 0 to 2**63 - 1.
Seed = Annotated[int, Between(0, MAX_SEED)]
#: A hidden pair ``(i, j)``: two distinct positions (checked against ``d`` by the function that knows ``d``).
Pair = tuple[int, int]
#: Where to compute: a torch device (or its name) that exists here and holds data.
Device = Union[str, torch.device]  # noqa: UP007 (a runtime Union: the checks and the tests read it)


def Count(high: int, low: int = 1) -> Any:
    """An integer count from ``low`` (default 1) to its documented maximum ``high``."""
    return Annotated[int, Between(low, high)]


def _pair(name: str, value: object) -> tuple[int, int]:
    if isinstance(value, (str, bytes)) or not isinstance(value, (tuple, list)) or len(value) != 2:
        raise TypeError(f"{name} must be a pair (i, j) of two distinct non-negative integers, got {value!r:.80}")
    i = check_int(f"{name}[0]", value[0], minimum=0, maximum=MAX_D - 1)
    j = check_int(f"{name}[1]", value[1], minimum=0, maximum=MAX_D - 1)
    if i == j:
        raise ValueError(f"{name} must hold two distinct positions, got ({i}, {j})")
    return (i, j) if i < j else (j, i)


def _number(name: str, value: object, kind: type, bounds: Between | None) -> object:
    low, high = (bounds.low, bounds.high) if bounds else (None, None)
    if kind is int:
        return check_int(name, value, minimum=low, maximum=high)
    return check_float(name, value, minimum=low, maximum=high, strict_minimum=bool(bounds and bounds.open_low))


def _device(name: str, value: object) -> torch.device:
    return check_device(name, value)


def _split(hint: object) -> tuple[object, tuple[object, ...]]:
    """``Annotated[T, *meta]`` -> ``(T, meta)``; anything else -> ``(hint, ())``."""
    if typing.get_origin(hint) is Annotated:
        base, *meta = typing.get_args(hint)
        return base, tuple(meta)
    return hint, ()


def _first(meta: tuple[object, ...], kind: type) -> Any:
    return next((item for item in meta if isinstance(item, kind)), None)


def _is_union(hint: object) -> bool:
    return typing.get_origin(hint) in (Union, types.UnionType)


def _is_device(hint: object) -> bool:
    return _is_union(hint) and set(typing.get_args(hint)) == {str, torch.device}


def checker(name: str, hint: object) -> Callable[[object], object]:
    """The check of one argument or field ``name`` annotated ``hint``: a function from a value to the value to use.

    Unannotated parts (``object``, ``Any``, callables) are not checked.
    """
    base, meta = _split(hint)
    if base is Any or base is object or base is inspect.Parameter.empty:
        return lambda value: value
    if _is_device(base):
        return lambda value: _device(name, value)
    if _is_union(base):
        options = typing.get_args(base)
        if type(None) in options:
            rest = [option for option in options if option is not type(None)]
            inner = checker(
                name, Annotated[(rest[0], *meta)] if meta and len(rest) == 1 else functools.reduce(operator.or_, rest)
            )
            return lambda value: None if value is None else inner(value)
        return _union_checker(name, options)
    if base is bool:
        return lambda value: check_bool(name, value)
    if base in (int, float):
        bounds = _first(meta, Between)
        return lambda value: _number(name, value, base, bounds)
    if base is str:
        return lambda value: check_instance(name, value, str, "a str")
    if base is Path:
        return lambda value: check_path(name, value)
    if typing.get_origin(base) is Literal:
        choices = typing.get_args(base)
        return lambda value: check_choice(name, value, choices)
    if base is torch.dtype:
        return lambda value: check_dtype(name, value)
    if base is torch.Tensor:
        spec = _first(meta, Array) or Array(ndim=(0, 1, 2, 3, 4))
        return lambda value: _tensor(name, value, spec)
    if base == Pair:
        return lambda value: _pair(name, value)
    origin = typing.get_origin(base)
    if origin in (tuple, list, collections.abc.Sequence) and origin is not None:
        arguments = typing.get_args(base)
        if origin is tuple and (len(arguments) != 2 or arguments[1] is not Ellipsis):
            return _fixed_tuple(name, arguments)
        item = arguments[0] if arguments else Any
        return _sequence_checker(name, item, _first(meta, Items) or Items(), origin is tuple)
    if isinstance(base, type):
        what = f"a {base.__name__}"
        return lambda value: check_instance(name, value, base, what)
    return lambda value: value


def _tensor(name: str, value: object, spec: Array) -> torch.Tensor:
    tensor = check_tensor(name, value, ndim=spec.ndim, finite=spec.finite)
    return check_signs(name, tensor) if spec.signs else tensor


def _union_checker(name: str, options: tuple[object, ...]) -> Callable[[object], object]:
    """A value of one of several kinds: classes by ``isinstance``; a string choice or a number by its own check."""
    if all(isinstance(option, type) for option in options):
        what = " or ".join(f"a {option.__name__}" for option in options)
        return lambda value: check_instance(name, value, options, what)
    texts = [option for option in options if typing.get_origin(option) is Literal or option is str]
    numbers_ = [option for option in options if _split(option)[0] in (int, float)]
    text_check = checker(name, texts[0]) if len(texts) == 1 else None
    number_check = checker(name, numbers_[0]) if len(numbers_) == 1 else None
    choices = [repr(c) for t in texts for c in typing.get_args(t)]
    bounds = _first(_split(numbers_[0])[1], Between) if numbers_ else None
    number_text = "a number" + (f" in [{bounds.low}, {bounds.high}]" if bounds else "")
    what = " or ".join([*choices, number_text] if numbers_ else choices)

    def check(value: object) -> object:
        if isinstance(value, str) and text_check is not None:
            if value in [c for t in texts for c in typing.get_args(t)]:
                return value
            raise ValueError(f"{name} must be {what}, got {value!r:.80}")
        if is_number(value) and number_check is not None:
            return number_check(value)
        raise TypeError(f"{name} must be {what}, got {type(value).__name__} {value!r:.80}")

    return check


def _fixed_tuple(name: str, arguments: tuple[object, ...]) -> Callable[[object], object]:
    checks = [checker(f"{name}[{k}]", item) for k, item in enumerate(arguments)]

    def check(value: object) -> tuple:
        if isinstance(value, (str, bytes)) or not isinstance(value, (tuple, list)) or len(value) != len(checks):
            raise TypeError(f"{name} must be a tuple of {len(checks)} items, got {value!r:.80}")
        return tuple(c(item) for c, item in zip(checks, value, strict=True))

    return check


def _sequence_checker(name: str, item: object, size: Items, as_tuple: bool) -> Callable[[object], object]:
    def check(value: object) -> Sequence:
        items = check_sequence(name, value, nonempty=False)
        if not size.low <= len(items) <= size.high:
            raise ValueError(f"{name} must hold from {size.low} to {size.high} items, got {len(items)}")
        checked = [checker(f"{name}[{k}]", item)(entry) for k, entry in enumerate(items)]
        if size.increasing and any(b <= a for a, b in itertools.pairwise(checked)):
            raise ValueError(f"{name} must be strictly increasing (no repeats), got {tuple(checked)!r:.80}")
        return tuple(checked) if as_tuple else checked

    return check


#: Whether the current call came in through a public function: calls the package makes inside it trust their caller.
_inside = contextvars.ContextVar("xorlib_inside_public_call", default=False)


def hints(function: Callable[..., Any]) -> dict[str, object]:
    """The resolved annotations of ``function`` (or of a class's fields), ``Annotated`` metadata kept."""
    return typing.get_type_hints(function, include_extras=True)


def public(function: F | None = None, *, options: tuple[type, ...] = (), set_here: tuple[str, ...] = ()) -> Any:
    """Check every annotated argument of ``function`` where a caller outside the package calls it.

    The checked values (an ``int`` for a numpy integer, a sorted pair, a :class:`torch.device` for a name)
    are what the function receives. The wrapper keeps the name, signature and docstring. ``options``: the
    config classes whose fields the function's ``**options`` may name (refused otherwise; the configs check
    the values), as in ``@public(options=(ModelConfig, StepConfig))``, except the fields ``set_here`` (the
    function sets them itself).
    """
    if function is None:
        return lambda f: _public(f, options, set_here)
    return _public(function, options, set_here)


def option_names(function: Callable[..., Any]) -> dict[str, type]:
    """The ``**options`` a public function takes: field name -> the config class that checks it."""
    return dict(getattr(function, "__xorlib_options__", {}))


def _public(function: F, option_classes: tuple[type, ...], set_here: tuple[str, ...] = ()) -> F:
    signature = inspect.signature(function)
    fixed = set(signature.parameters) | set(set_here)
    allowed = {
        field.name: cls
        for cls in option_classes
        for field in dataclasses.fields(cls)
        if field.init and field.name not in fixed
    }
    checks: dict[str, Callable[[object], object]] | None = None

    @functools.wraps(function)
    def boundary(*args: Any, **kwargs: Any) -> Any:
        nonlocal checks
        if _inside.get():
            return function(*args, **kwargs)
        if checks is None:  # resolved at the first call: the annotations may name types defined later
            annotations = hints(function)
            checks = {name: checker(name, annotations[name]) for name in signature.parameters if name in annotations}
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as err:
            raise TypeError(f"{function.__qualname__}(): {err}") from None
        for name, value in bound.arguments.items():
            kind = signature.parameters[name].kind
            if kind is inspect.Parameter.VAR_KEYWORD:
                unknown = sorted(set(value) - set(allowed))
                if unknown:
                    raise TypeError(
                        f"{function.__qualname__}() got unknown option(s) {unknown}; the options are "
                        + ", ".join(f"{option} ({allowed[option].__name__})" for option in allowed)
                    )
            elif name in checks and kind is not inspect.Parameter.VAR_POSITIONAL:
                bound.arguments[name] = checks[name](value)
        token = _inside.set(True)
        try:
            return function(*bound.args, **bound.kwargs)
        finally:
            _inside.reset(token)

    boundary.__xorlib_public__ = True  # type: ignore[attr-defined]
    boundary.__xorlib_options__ = allowed  # type: ignore[attr-defined]
    return boundary  # type: ignore[return-value]


def config(cls: C) -> C:
    """A frozen dataclass whose annotated fields are checked (and normalised) when an instance is made.

    The class's own ``__post_init__``, if any, runs after the field checks: it checks relations between
    fields and fills in derived defaults.
    """
    own = cls.__dict__.get("__post_init__")
    checks: dict[str, Callable[[object], object]] = {}

    def __post_init__(self: Any) -> None:
        if not checks:
            annotations = hints(type(self))
            for field in dataclasses.fields(self):
                if field.init and field.name in annotations:
                    checks[field.name] = checker(field.name, annotations[field.name])
        for name, check in checks.items():
            object.__setattr__(self, name, check(getattr(self, name)))
        if own is not None:
            own(self)

    cls.__post_init__ = __post_init__  # type: ignore[attr-defined]
    made = dataclass(frozen=True)(cls)
    made.__xorlib_config__ = True  # type: ignore[attr-defined]
    return made


def is_number(value: object) -> bool:
    """Whether ``value`` is a real number (not a bool)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)
