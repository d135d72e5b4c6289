"""Kinds of bad value, per kind of parameter, for the API fuzz test (``tests/test_fuzz_api.py``).

A *spec* describes what a parameter accepts (an integer in a range, a choice, a tensor of some ranks...) and
produces the **cases** it must refuse: for each category of bad value, a few canonical bad values (always tried)
and a hypothesis strategy of more. A bad value is made from the valid one (:class:`Bad` ``.make``), so that a
tensor of the wrong dtype is the example's tensor converted, and a bad config field is the example's config
with that one field changed. A spec only produces values that are bad whatever the other arguments are; a value
that may be legitimately valid is never produced.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import hypothesis.strategies as st
import numpy as np
import torch

#: The default of a parameter the example does not pass (filled in from the signature).
MISSING = object()

#: Sizes that no function can allocate: they must be refused before any allocation.
HUGE = 10**12


@dataclass(frozen=True)
class Bad:
    """One bad call: ``kwargs[param] = make(valid value)``; an error must name one of ``names``."""

    category: str
    param: str
    text: str
    make: Callable[[object], object]
    names: tuple[str, ...]

    def __repr__(self) -> str:
        return f"{self.param}={self.text} [{self.category}]"


@dataclass(frozen=True)
class Case:
    """One category of bad value for one parameter: canonical values and a strategy of more."""

    category: str
    param: str
    canonical: tuple[Bad, ...]
    strategy: st.SearchStrategy[Bad] | None = None


def _short(value: object) -> str:
    text = repr(value)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**9:
        text = f"{value:.3g}" if abs(value) < 2**62 else str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def const(value: object, text: str | None = None) -> tuple[str, Callable[[object], object]]:
    """A bad value that does not depend on the valid one."""
    return (text or _short(value), lambda _valid, value=value: value)


def _bads(category: str, param: str, names: tuple[str, ...], values) -> tuple[Bad, ...]:
    return tuple(Bad(category, param, text, make, names) for text, make in values)


def _strategy(category: str, param: str, names: tuple[str, ...], strategy: st.SearchStrategy) -> st.SearchStrategy:
    """Constant bad values drawn from ``strategy``."""
    return strategy.map(lambda value: Bad(category, param, _short(value), lambda _valid, v=value: v, names))


def _transforms(category: str, param: str, names: tuple[str, ...], strategy: st.SearchStrategy) -> st.SearchStrategy:
    """Bad values made from the valid one: ``strategy`` draws ``(text, make)``."""
    return strategy.map(lambda pair: Bad(category, param, pair[0], pair[1], names))


class Spec:
    """What a parameter accepts; :meth:`cases` are the values it must refuse."""

    none: bool = False  # None is a valid value

    def cases(self, param: str) -> list[Case]:
        raise NotImplementedError

    def _type_case(self, param: str, values: list, strategy: st.SearchStrategy | None = None) -> Case:
        names = (param,)
        values = [v for v in values if not (v is None and self.none)]
        extra = [] if self.none else [st.none()]
        strategy = (
            st.one_of(*(s for s in [strategy, *extra] if s is not None)) if (strategy is not None or extra) else None
        )
        return Case(
            "type",
            param,
            _bads("type", param, names, [const(v) for v in values]),
            None if strategy is None else _strategy("type", param, names, strategy),
        )


@dataclass(frozen=True)
class Free(Spec):
    """A parameter that accepts anything (say why): no bad values."""

    reason: str

    def cases(self, param: str) -> list[Case]:
        return []


@dataclass(frozen=True)
class Int(Spec):
    """An integer in ``[minimum, maximum]``; ``size``: it sizes an allocation, so 10**12 must be refused at once."""

    minimum: int | None = None
    maximum: int | None = None
    size: bool = False
    none: bool = False

    def cases(self, param: str) -> list[Case]:
        names = (param,)
        fractional = st.floats(-1e6, 1e6).filter(lambda f: not f.is_integer())
        cases = [
            self._type_case(
                param,
                ["8", [8], True, 2.5, None],
                st.one_of(st.text(max_size=4), st.lists(st.integers(), max_size=2), st.booleans(), fractional),
            )
        ]
        low, high, strategies = [], [], []
        if self.minimum is not None:
            low = sorted({self.minimum - 1, *((0, -1) if self.minimum >= 1 else ()), self.minimum - 10**6})
            strategies.append(st.integers(max_value=self.minimum - 1))
        if self.maximum is not None:
            high = [self.maximum + 1]
            strategies.append(st.integers(min_value=self.maximum + 1))
        if low or high:
            cases.append(
                Case(
                    "range",
                    param,
                    _bads("range", param, names, [const(v) for v in low + high]),
                    _strategy("range", param, names, st.one_of(*strategies)),
                )
            )
        if self.size:
            cases.append(
                Case(
                    "size",
                    param,
                    _bads("size", param, names, [const(HUGE, "10**12")]),
                    _strategy("size", param, names, st.integers(HUGE, 10**18)),
                )
            )
        return cases


def Seed(none: bool = False) -> Int:
    """A seed: an integer in ``[0, 2**63 - 1]``."""
    return Int(0, 2**63 - 1, none=none)


@dataclass(frozen=True)
class Float(Spec):
    """A finite real number in ``[minimum, maximum]`` (``strict``: ``> minimum``; ``strict_max``: ``< maximum``)."""

    minimum: float | None = None
    maximum: float | None = None
    strict: bool = False
    strict_max: bool = False
    none: bool = False

    def cases(self, param: str) -> list[Case]:
        names = (param,)
        cases = [
            self._type_case(
                param,
                ["1.0", [1.0], True, 1j, None],
                st.one_of(st.text(max_size=4), st.lists(st.floats(), max_size=2), st.booleans()),
            ),
            Case(
                "nonfinite",
                param,
                _bads("nonfinite", param, names, [const(math.nan), const(math.inf), const(-math.inf)]),
            ),
        ]
        low, high, strategies = [], [], []
        finite = {"allow_nan": False, "allow_infinity": False}
        if self.minimum is not None:
            low = ([self.minimum] if self.strict else []) + [self.minimum - max(1.0, abs(self.minimum))]
            strategies.append(st.floats(max_value=self.minimum, exclude_max=not self.strict, **finite))
        if self.maximum is not None:
            high = ([self.maximum] if self.strict_max else []) + [self.maximum + max(1.0, abs(self.maximum))]
            strategies.append(st.floats(min_value=self.maximum, exclude_min=not self.strict_max, **finite))
        if low or high:
            cases.append(
                Case(
                    "range",
                    param,
                    _bads("range", param, names, [const(float(v)) for v in low + high]),
                    _strategy("range", param, names, st.one_of(*strategies)),
                )
            )
        return cases


@dataclass(frozen=True)
class Choice(Spec):
    """One of a few strings."""

    choices: tuple[str, ...]
    none: bool = False

    def cases(self, param: str) -> list[Case]:
        names = (param,)
        choices = self.choices
        unknown = ["foo", "", choices[0].upper() if choices[0].upper() not in choices else "FOO", choices[0] + " "]
        return [
            self._type_case(param, [3, [choices[0]], None], st.one_of(st.integers(), st.lists(st.text(), max_size=2))),
            Case(
                "choice",
                param,
                _bads("choice", param, names, [const(v) for v in unknown]),
                _strategy("choice", param, names, st.text(max_size=12).filter(lambda s: s not in choices)),
            ),
        ]


@dataclass(frozen=True)
class Bool(Spec):
    """``True`` or ``False``."""

    def cases(self, param: str) -> list[Case]:
        return [self._type_case(param, ["yes", 1, 0.0, None], st.one_of(st.integers(), st.text(max_size=4)))]


@dataclass(frozen=True)
class Str(Spec):
    """Any string (free text)."""

    none: bool = False

    def cases(self, param: str) -> list[Case]:
        return [self._type_case(param, [3, ["x"], None], st.one_of(st.integers(), st.lists(st.text(), max_size=2)))]


@dataclass(frozen=True)
class PathSpec(Spec):
    """A path: a string or a :class:`pathlib.Path`."""

    none: bool = False

    def cases(self, param: str) -> list[Case]:
        return [self._type_case(param, [3, ["notes.ipynb"], 2.5, None], st.one_of(st.integers(), st.floats()))]


@dataclass(frozen=True)
class Number(Spec):
    """Any real number (NaN and infinities included: a result may hold them)."""

    none: bool = False

    def cases(self, param: str) -> list[Case]:
        return [
            self._type_case(param, ["1.0", [1.0], True, None], st.one_of(st.text(max_size=4), st.lists(st.floats())))
        ]


@dataclass(frozen=True)
class Pair(Spec):
    """Two distinct positions in ``[0, d)``."""

    d: int
    none: bool = False

    def cases(self, param: str) -> list[Case]:
        names, d = (param,), self.d
        bad = [(-1, 1), (0, d), (1, 1), (d + 5, 0), (True, 1), (0.5, 1), ("0", 1), (None, 1)]
        ints = st.integers(-(10**6), 10**6)
        return [
            self._type_case(param, ["01", 3, (0, 1, 2), [0], None], st.one_of(st.integers(), st.text(max_size=3))),
            Case(
                "element",
                param,
                _bads("element", param, names, [const(v) for v in bad]),
                _strategy(
                    "element",
                    param,
                    names,
                    st.tuples(ints, ints).filter(lambda p: not (0 <= p[0] < d and 0 <= p[1] < d and p[0] != p[1])),
                ),
            ),
        ]


def _device_available(device: torch.device) -> bool:
    if device.type == "cpu":
        return True
    if device.type == "cuda":
        return torch.cuda.is_available() and (device.index or 0) < torch.cuda.device_count()
    return device.type == "mps" and torch.backends.mps.is_available()


def absent_devices() -> list[object]:
    """Device names and objects that do not exist on this machine."""
    names = ["cuda", "cuda:3", "cuda:7", "tpu", "mps", "banana"]
    out: list[object] = []
    for name in names:
        try:
            if not _device_available(torch.device(name)):
                out.append(name)
        except RuntimeError:  # not a device name at all
            out.append(name)
    for device in (torch.device("cuda", 5), torch.device("meta")):
        if not _device_available(device):
            out.append(device)
    return out


@dataclass(frozen=True)
class Device(Spec):
    """A torch device (or its name) that exists here."""

    def cases(self, param: str) -> list[Case]:
        names = (param,)
        absent = absent_devices()
        return [
            self._type_case(param, [3, ["cpu"], None], st.integers()),
            Case(
                "device",
                param,
                _bads("device", param, names, [const(v, repr(v)) for v in absent]),
                _strategy("device", param, names, st.sampled_from(absent)),
            ),
        ]


BAD_DTYPES = (torch.int64, torch.int8, torch.bool, torch.uint8, torch.complex128, torch.float16, torch.bfloat16)


@dataclass(frozen=True)
class DType(Spec):
    """``torch.float32`` or ``torch.float64``."""

    def cases(self, param: str) -> list[Case]:
        names = (param,)
        return [
            self._type_case(param, ["float64", float, np.float64, None]),
            Case(
                "dtype",
                param,
                _bads("dtype", param, names, [const(v) for v in BAD_DTYPES]),
                _strategy("dtype", param, names, st.sampled_from(BAD_DTYPES)),
            ),
        ]


def _set_entry(tensor: torch.Tensor, index: int, value: float) -> torch.Tensor:
    out = tensor.clone()
    out.view(-1)[index % out.numel()] = value
    return out


def _grow(tensor: torch.Tensor, axis: int, extra: int) -> torch.Tensor:
    """``tensor`` with ``extra`` more entries along ``axis`` (copies of its first slice: the values stay valid)."""
    first = tensor.narrow(axis, 0, 1)
    return torch.cat([tensor, *([first] * extra)], dim=axis)


def _to_rank(tensor: torch.Tensor, rank: int) -> torch.Tensor:
    while tensor.ndim < rank:
        tensor = tensor.unsqueeze(0)
    while tensor.ndim > rank:
        tensor = tensor[0]
    return tensor


@dataclass(frozen=True)
class Tensor(Spec):
    """A float32/float64 tensor with ``ndim`` among the allowed ranks.

    ``fixed``: axes whose size is set by the other arguments (one more entry must be refused); ``values``:
    ``"signs"`` (entries ±1) or ``"bits"`` (entries 0/1); ``group``: the tensor parameters that must share a
    dtype (a float32/float64 mix must be refused) and whose sizes must agree (an error may name any of them).
    """

    ndim: tuple[int, ...]
    fixed: tuple[int, ...] = ()
    values: str | None = None
    group: tuple[str, ...] = ()
    none: bool = False

    def cases(self, param: str) -> list[Case]:
        names, group = (param,), tuple(dict.fromkeys((param, *self.group)))
        cases = [
            Case(
                "type",
                param,
                _bads(
                    "type",
                    param,
                    names,
                    [
                        ("a list", lambda t: t.tolist()),
                        ("a numpy array", lambda t: t.numpy()),
                        const("tensor"),
                        const(1.0),
                        *([] if self.none else [const(None)]),
                    ],
                ),
            ),
            Case(
                "dtype",
                param,
                _bads("dtype", param, names, [(f"as {dt}", lambda t, dt=dt: t.to(dt)) for dt in BAD_DTYPES]),
                _transforms(
                    "dtype", param, names, st.sampled_from(BAD_DTYPES).map(lambda dt: (f"as {dt}", lambda t: t.to(dt)))
                ),
            ),
            Case(
                "nonfinite",
                param,
                _bads(
                    "nonfinite",
                    param,
                    names,
                    [(f"with a {v}", lambda t, v=v: _set_entry(t, 0, v)) for v in (math.nan, math.inf, -math.inf)],
                ),
                _transforms(
                    "nonfinite",
                    param,
                    names,
                    st.tuples(st.integers(0, 10**6), st.sampled_from([math.nan, math.inf, -math.inf])).map(
                        lambda kv: (f"with a {kv[1]} at {kv[0]}", lambda t: _set_entry(t, kv[0], kv[1]))
                    ),
                ),
            ),
        ]
        ranks = [max(self.ndim) + 1, max(self.ndim) + 2] + ([min(self.ndim) - 1] if min(self.ndim) >= 1 else [])
        cases.append(
            Case(
                "rank",
                param,
                _bads("rank", param, names, [(f"of rank {r}", lambda t, r=r: _to_rank(t, r)) for r in ranks]),
            )
        )
        if self.fixed:
            grown = [(f"{k} more along axis {a}", lambda t, a=a, k=k: _grow(t, a, k)) for a in self.fixed for k in (1,)]
            cases.append(
                Case(
                    "shape",
                    param,
                    _bads("shape", param, group, grown),
                    _transforms(
                        "shape",
                        param,
                        group,
                        st.tuples(st.sampled_from(self.fixed), st.integers(1, 3)).map(
                            lambda ak: (f"{ak[1]} more along axis {ak[0]}", lambda t: _grow(t, ak[0], ak[1]))
                        ),
                    ),
                )
            )
        if self.values == "signs":
            cases.append(
                Case(
                    "values",
                    param,
                    _bads(
                        "values",
                        param,
                        names,
                        [("halved", lambda t: t * 0.5), ("with a 0", lambda t: _set_entry(t, 0, 0.0))],
                    ),
                )
            )
        if self.values == "bits":
            cases.append(
                Case(
                    "values",
                    param,
                    _bads(
                        "values",
                        param,
                        names,
                        [("doubled", lambda t: t * 2), ("with a -1", lambda t: _set_entry(t, 0, -1))],
                    ),
                )
            )
        if self.group:
            cases.append(
                Case(
                    "mixed",
                    param,
                    _bads(
                        "mixed",
                        param,
                        group,
                        [("in the other float dtype", lambda t: t.float() if t.dtype == torch.float64 else t.double())],
                    ),
                )
            )
        return [c for c in cases if c.canonical or c.strategy is not None]


def _replace_first(sequence: Sequence, bad: Bad) -> object:
    """``sequence`` with its first item made bad (an empty one gets one bad item)."""
    items = list(sequence) if isinstance(sequence, (list, tuple)) else []
    items = [bad.make(items[0] if items else MISSING), *items[1:]]
    return tuple(items) if isinstance(sequence, tuple) else items


@dataclass(frozen=True)
class Seq(Spec):
    """A sequence (list or tuple, not a string) of items of spec ``of``.

    ``nonempty``: at least one item; ``increasing``: strictly increasing items.
    """

    of: Spec | None = None
    nonempty: bool = True
    increasing: bool = False
    none: bool = False

    def cases(self, param: str) -> list[Case]:
        names = (param,)
        cases = [self._type_case(param, [None, "text", 3], st.integers())]
        if self.nonempty:
            cases.append(Case("empty", param, _bads("empty", param, names, [("()", lambda s: type(s)())])))
        if self.increasing:
            cases.append(
                Case(
                    "order",
                    param,
                    _bads(
                        "order",
                        param,
                        names,
                        [
                            ("reversed", lambda s: type(s)(reversed(s)) if len(s) > 1 else type(s)([*s, *s])),
                            ("repeated", lambda s: type(s)([*s, *s])),
                        ],
                    ),
                )
            )
        if self.of is not None:
            for case in self.of.cases(param):
                canonical = tuple(
                    Bad(
                        f"item {b.category}",
                        param,
                        f"[{b.text}, ...]",
                        lambda s, b=b: _replace_first(s, b),
                        names,
                    )
                    for b in case.canonical
                )
                strategy = None
                if case.strategy is not None:
                    strategy = case.strategy.map(
                        lambda b: Bad(
                            f"item {b.category}", param, f"[{b.text}, ...]", lambda s: _replace_first(s, b), names
                        )
                    )
                cases.append(Case(f"item {case.category}", param, canonical, strategy))
        return cases


@dataclass(frozen=True)
class Tup(Spec):
    """A fixed-length tuple whose items follow ``items`` (``lengths``: the lengths allowed)."""

    items: tuple[Spec, ...]
    lengths: tuple[int, ...] = ()

    def cases(self, param: str) -> list[Case]:
        names = (param,)
        lengths = self.lengths or (len(self.items),)
        cases = [self._type_case(param, [None, "text", 3], st.integers())]
        short = min(lengths) - 1
        if short >= 0:
            cases.append(
                Case("length", param, _bads("length", param, names, [(f"{short} items", lambda s: tuple(s)[:short])]))
            )
        for k, spec in enumerate(self.items):
            for case in spec.cases(param):
                canonical = tuple(
                    Bad(
                        f"item {b.category}",
                        param,
                        f"item {k} {b.text}",
                        lambda s, b=b, k=k: tuple(b.make(v) if j == k else v for j, v in enumerate(s)),
                        names,
                    )
                    for b in case.canonical
                )
                cases.append(Case(f"item {case.category}", param, canonical))
        return cases


@dataclass(frozen=True)
class Instance(Spec):
    """An instance of a class (``what`` names it); ``extra``: more bad values, ``(text, make)``."""

    what: str
    none: bool = False
    extra: tuple[tuple[str, Callable[[object], object]], ...] = ()

    def cases(self, param: str) -> list[Case]:
        case = self._type_case(param, [None, "x", 3, object()], None)
        extra = _bads("type", param, (param,), list(self.extra))
        return [dataclasses.replace(case, canonical=case.canonical + extra)]


@dataclass(frozen=True)
class Either(Spec):
    """A value that follows one of two specs (``step``: a rule's name or a number); bad for both."""

    choice: Choice
    number: Float
    none: bool = False

    def cases(self, param: str) -> list[Case]:
        kept = [c for c in self.choice.cases(param) if c.category == "choice"]
        kept += [c for c in self.number.cases(param) if c.category in ("nonfinite", "range")]
        return [self._type_case(param, [None, [1.0], True, 1j], None), *kept]


@dataclass(frozen=True)
class Config(Spec):
    """A config dataclass (the registry entry ``key`` describes its fields): bad types, and each field bad."""

    key: str
    others: tuple[str, ...] = field(default=())  # registry keys of other configs: instances of them are bad

    def cases(self, param: str) -> list[Case]:  # filled in by the registry, which knows the entries
        raise NotImplementedError("the registry expands Config specs")
