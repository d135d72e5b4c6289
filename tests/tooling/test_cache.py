"""Tests of xorlib._cache: exact round trips, entries that cannot run code, keys that follow the source, bypass.

The fingerprint reads a small temporary package (``_PACKAGE``) that the tests edit; edits elsewhere change no key.
No ``from __future__ import annotations``: the annotations are objects, and nested result types register through them.
"""

import collections
import contextlib
import dataclasses
import hashlib
import hmac
import json
import math
import os
import pickle
import re
import shutil
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from xorlib import _cache as cache
from xorlib._cache import CacheWarning, cache_dir, cached, clear_cache, result_type

XORLIB_MODULE = "xorlib._cache_tests"  # any frozen dataclass a cached function declares is rebuilt; a module name
CALLS: collections.Counter = collections.Counter()


@dataclasses.dataclass(frozen=True)
class Inner:
    __module__ = XORLIB_MODULE
    values: torch.Tensor
    label: str


@dataclasses.dataclass(frozen=True)
class Everything:
    __module__ = XORLIB_MODULE
    count: int
    scalars: tuple[float, float, float, float, bool, str, None]  # ratio, nan, inf, -inf, True, str, None
    pairs: tuple[tuple[int, int], ...]
    series: list[float]
    table: dict[str, list[int]]
    keyed: dict[tuple[int, int], float]
    arrays: tuple[np.ndarray, ...]
    tensors: dict[str, torch.Tensor]
    dtype: torch.dtype
    numpy_scalar: float
    inner: Inner
    inners: tuple[Inner, ...]


@dataclasses.dataclass(frozen=True)
class Config:
    d: int
    kappa: float = 1.0


@dataclasses.dataclass(frozen=True)
class Inner2:
    d: int


@dataclasses.dataclass
class MutableConfig:
    d: int


class Payload:
    """Unpickling this creates ``marker``: the proof that a loader ran code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (open, (str(self.marker), "w"))


def build(n: int, scale: float) -> Everything:
    rows = torch.arange(n, dtype=torch.float64) * scale
    tensors = {"f32": (rows / 7).float(), "f64": rows / 7, "i64": torch.arange(n) - 2**40, "mask": rows > 1}
    return Everything(
        count=n,
        scalars=(scale / 3, math.nan, math.inf, -math.inf, True, "tied \u2013 split", None),
        pairs=((0, 1), (2, 3)),
        series=[0.1, -0.0, 1e-300],
        table={"b": [1, 2], "a": []},
        keyed={(1, 2): 0.5},
        arrays=(np.linspace(0.0, 1.0, n), np.arange(n, dtype=np.int32).reshape(1, n), np.zeros((0, 3), np.uint8)),
        tensors=tensors
        | {"bf16": torch.ones(2, dtype=torch.bfloat16) / 3, "c64": torch.ones(1, dtype=torch.complex64)},
        dtype=torch.float32,
        numpy_scalar=np.float64(0.25),
        inner=Inner(values=torch.ones(2, 2, dtype=torch.float32), label="x"),
        inners=(Inner(values=torch.zeros(0), label="empty"),),
    )


@cached
def everything(n: int, scale: float = 1.0) -> Everything:
    CALLS["everything"] += 1
    return build(n, scale)


@cached
def echo(value: object, *rest: object, **options: object) -> tuple:
    CALLS["echo"] += 1
    return (CALLS["echo"],)


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh cache folder, a small package to fingerprint, no warnings given yet."""
    package = tmp_path / "package"
    package.mkdir()
    (package / "core.py").write_text("STEP = 1\n")
    monkeypatch.setattr(cache, "_PACKAGE", package)
    monkeypatch.setattr(cache, "_warned", set())
    monkeypatch.setenv("XORLIB_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("XORLIB_NO_CACHE", raising=False)
    CALLS.clear()
    return package


@contextlib.contextmanager
def recorded():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


def cache_warnings(caught: list) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]


def only_entry() -> Path:
    (entry,) = cache_dir().glob("v1/*/*.json")
    return entry


def resign(entry: Path, payload: dict) -> None:
    """Write ``payload`` at ``entry`` signed with the user's real key: only the decoder stands in the way."""
    secret = (cache_dir() / "key").read_bytes()
    signature = hmac.new(secret, cache._canonical(payload), hashlib.sha256).hexdigest()
    entry.write_text(json.dumps({"hmac": signature, "payload": payload}, allow_nan=True))


def same(a: object, b: object) -> bool:
    """Equal values of the same types, tensors and arrays with the same dtype, NaN equal to NaN, -0.0 not 0.0."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (torch.Tensor, np.ndarray)):
        return a.dtype == b.dtype and a.shape == b.shape and bool((a == b).all())  # type: ignore[union-attr]
    if dataclasses.is_dataclass(a):
        return same(vars(a), vars(b))
    if isinstance(a, dict):
        return same(list(a.items()), list(b.items()))  # type: ignore[union-attr]
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(map(same, a, b))  # type: ignore[arg-type]
    return (a == b and repr(a) == repr(b)) or (a != a and b != b)


def test_round_trip_of_every_field_type() -> None:
    first = everything(5, 0.5)
    with recorded() as caught:
        second = everything(5, 0.5)
    assert CALLS["everything"] == 1 and not cache_warnings(caught)
    assert same(first, build(5, 0.5)) and not same(second, first)  # the numpy scalar comes back as a Python float
    assert same(second, dataclasses.replace(first, numpy_scalar=0.25))
    assert [t.dtype for t in second.tensors.values()] == [t.dtype for t in first.tensors.values()]
    assert same(second.scalars[1:4], (math.nan, math.inf, -math.inf)) and math.copysign(1, second.series[1]) < 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        second.count = 3  # type: ignore[misc]


def test_nested_types_register_through_the_return_annotation(monkeypatch: pytest.MonkeyPatch) -> None:
    everything(3)
    monkeypatch.setattr(cache, "_registry", {})  # a fresh process: nothing registered until the first call
    restored = everything(3)
    assert CALLS["everything"] == 1 and isinstance(restored.inner, Inner)
    assert cache._registry[f"{XORLIB_MODULE}.Inner"] is Inner


def test_the_key_follows_the_source_at_each_call_and_the_library_versions(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    everything(2)
    (isolated / "core.py").write_text("STEP = 2\n")  # same size, same second: still seen
    everything(2)
    (isolated / "new.py").write_text("")
    everything(2)
    assert CALLS["everything"] == 3
    (isolated / "new.py").unlink()
    (isolated / "core.py").write_text("STEP = 1\n")
    everything(2)  # back to the first source: its entry is served
    assert CALLS["everything"] == 3
    monkeypatch.setattr(torch, "__version__", "0.0-test")
    everything(2)
    monkeypatch.setattr(np, "__version__", "0.0-test")
    everything(2)
    assert CALLS["everything"] == 5 and len(list(cache_dir().glob("v1/*/*.json"))) == 5


def test_an_entry_under_the_wrong_key_is_refused() -> None:
    everything(2)
    right = only_entry()
    everything(3)
    wrong = next(path for path in right.parent.glob("*.json") if path != right)
    wrong.write_bytes(right.read_bytes())  # a valid, signed entry, but for other arguments
    with recorded() as caught:
        assert everything(3).count == 3
    assert CALLS["everything"] == 3 and "key material" in cache_warnings(caught)[0]


def flip_a_byte(path: Path) -> None:
    blob = bytearray(path.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    path.write_bytes(bytes(blob))


def sign_with_someone_elses_key(entry: Path, marker: Path) -> None:
    document = json.loads(entry.read_text())
    document["hmac"] = hmac.new(b"someone else" * 3, cache._canonical(document["payload"]), "sha256").hexdigest()
    entry.write_text(json.dumps(document, allow_nan=True))


def plant_pickles(entry: Path, marker: Path) -> None:  # the entry, and what joblib or a pickle cache would read
    for path in (entry, entry.with_suffix(".pkl"), entry.parent / "output.pkl", entry.with_suffix(".npz")):
        path.write_bytes(pickle.dumps(Payload(marker)))


def plant_an_object_array(entry: Path, marker: Path) -> None:  # with a matching digest and a valid signature
    payload = json.loads(entry.read_text())["payload"]
    np.savez(entry.with_suffix(".npz"), **{f"a{i}": np.array([Payload(marker)], dtype=object) for i in range(20)})
    payload["arrays"] = hashlib.sha256(entry.with_suffix(".npz").read_bytes()).hexdigest()
    resign(entry, payload)


def name_a_type(named: str) -> Callable[[Path, Path], None]:
    def plant(entry: Path, marker: Path) -> None:  # a valid signature: only the decoder stands in the way
        (marker.parent / "evil_plant.py").write_text(f"open({str(marker)!r}, 'w')\nclass Thing:\n    pass\n")
        payload = json.loads(entry.read_text())["payload"]
        payload["result"] = {"$": "result", "type": named, "fields": {"command": f"touch {marker}", "args": ["ls"]}}
        resign(entry, payload)

    return plant


FOREIGN_TYPES = ("os.system", "subprocess.Popen", "evil_plant.Thing", "xorlib.model.TwoHeadModel", f"{__name__}.Config")
TAMPERING = [
    ("truncate", lambda entry, marker: entry.write_bytes(entry.read_bytes()[:100]), "corrupt"),
    ("garbage", lambda entry, marker: entry.write_bytes(b"\x00\xff not json"), "corrupt"),
    ("flip a byte of the arrays", lambda entry, marker: flip_a_byte(entry.with_suffix(".npz")), "SHA-256"),
    ("delete the arrays", lambda entry, marker: entry.with_suffix(".npz").unlink(), "corrupt"),
    ("a wrong number", lambda entry, marker: entry.write_text(entry.read_text().replace(": 4,", ": 5,")), "signature"),
    ("sign with someone else's key", sign_with_someone_elses_key, "signature"),
    ("plant pickles", plant_pickles, "corrupt"),
    ("plant an object array", plant_an_object_array, "allow_pickle"),
] + [
    (f"name {named}", name_a_type(named), "not a registered xorlib result type|not the declared")
    for named in FOREIGN_TYPES
]


def test_the_payload_used_below_does_run_code_when_unpickled(tmp_path: Path) -> None:
    marker = tmp_path / "control"
    pickle.loads(pickle.dumps(Payload(marker))).close()
    assert marker.exists()  # so its absence below means that nothing was unpickled


@pytest.mark.parametrize(("tamper", "expected"), [pytest.param(*case[1:], id=case[0]) for case in TAMPERING])
def test_a_tampered_entry_runs_nothing_and_is_recomputed_with_one_warning_and_overwritten(
    tamper: Callable[[Path, Path], None], expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))  # evil_plant.py would be importable from here
    everything(4)
    marker = tmp_path / "pwned"
    tamper(only_entry(), marker)
    with recorded() as caught:
        assert everything(4).count == 4
    assert not marker.exists() and "evil_plant" not in sys.modules
    assert CALLS["everything"] == 2 and len(cache_warnings(caught)) == 1
    assert re.search(expected, cache_warnings(caught)[0])
    with recorded() as caught:
        assert same(everything(4), dataclasses.replace(build(4, 1.0), numpy_scalar=0.25))
    assert CALLS["everything"] == 2 and not cache_warnings(caught)  # overwritten: served again


def test_only_frozen_dataclasses_can_be_registered() -> None:
    for bad in (MutableConfig, dict, 3):
        with pytest.raises(TypeError, match="frozen dataclass"):
            result_type(bad)  # type: ignore[type-var]
    assert result_type(Config) is Config  # a frozen dataclass of any module: the type rule is the declaration


def test_a_value_the_cache_cannot_store_is_a_type_error() -> None:
    @cached
    def foreign() -> object:  # declares no dataclass: a Config it returns is not one the cache may rebuild
        return Inner2(1)

    @cached
    def odd() -> tuple:
        return (1, {2, 3})

    with pytest.raises(TypeError, match="result_type"):
        foreign()
    with pytest.raises(TypeError, match=r"the result\[1\] is a set"):
        odd()


def test_a_file_at_the_cache_path_is_bypassed_with_one_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for path in (tmp_path / "a file", tmp_path / "a file" / "below"):
        monkeypatch.setattr(cache, "_warned", set())
        (tmp_path / "a file").write_text("not a folder")
        monkeypatch.setenv("XORLIB_CACHE", str(path))
        CALLS.clear()
        with recorded() as caught:
            assert everything(2).count == everything(2).count == 2
        assert CALLS["everything"] == 2 and len(cache_warnings(caught)) == 1


@pytest.mark.parametrize("failing", ["_write_atomic", "_load", "_secret"])
def test_a_folder_that_cannot_be_read_or_written_is_bypassed_with_one_warning(
    failing: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    everything(2)  # a key and an entry, to read
    CALLS.clear()

    def refuse(*args: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(cache, failing, refuse)
    n = 3 if failing == "_write_atomic" else 2  # a new entry to write, or the stored one to read
    with recorded() as caught:
        assert [everything(n).count for _ in range(3)] == [n, n, n]
    assert CALLS["everything"] == 3 and len(cache_warnings(caught)) == 1


@pytest.mark.skipif(os.name == "nt" or os.geteuid() == 0, reason="permissions do not bind root")
def test_a_read_only_folder_is_bypassed_with_one_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "read-only"
    folder.mkdir(mode=0o500)
    monkeypatch.setenv("XORLIB_CACHE", str(folder / "cache"))
    with recorded() as caught:
        everything(2), everything(2)
    assert CALLS["everything"] == 2 and len(cache_warnings(caught)) == 1


def test_a_key_file_others_may_read_is_refused() -> None:
    everything(2)
    key = cache_dir() / "key"
    assert key.stat().st_mode & 0o777 == 0o600 and len(key.read_bytes()) == 32
    key.chmod(0o644)
    with recorded() as caught:
        everything(2), everything(2)
    assert CALLS["everything"] == 3 and "mode 0600" in cache_warnings(caught)[0]


def test_writes_are_atomic_and_leave_no_temporary_files(monkeypatch: pytest.MonkeyPatch) -> None:
    everything(2)
    assert not list(cache_dir().rglob(".tmp-*"))

    def crash(source: str, target: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cache.os, "replace", crash)
    with recorded():
        everything(3)
    assert len(list(cache_dir().glob("v1/*/*.json"))) == 1 and not list(cache_dir().rglob(".tmp-*"))


def test_no_cache_environment_variable_recomputes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XORLIB_NO_CACHE", "1")
    everything(2), everything(2)
    assert CALLS["everything"] == 2 and not cache_dir().exists()


def test_cache_dir_location(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert cache_dir() == tmp_path / "cache"
    monkeypatch.delenv("XORLIB_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "xorlib"  # no checkout around the package
    (tmp_path / "pyproject.toml").write_text("")
    assert cache_dir() == tmp_path / ".cache" / "xorlib"  # a source checkout


def test_clear_cache_removes_entries_of_one_or_all_functions() -> None:
    everything(2), echo(1)
    clear_cache(echo)
    everything(2), echo(1)
    assert CALLS == {"everything": 1, "echo": 2}
    clear_cache()
    everything(2), echo(1)
    assert CALLS == {"everything": 2, "echo": 3} and (cache_dir() / "key").exists()


def test_equal_values_write_equal_bytes_so_concurrent_writers_agree() -> None:
    everything(3)
    entry = only_entry()
    before = entry.read_bytes(), entry.with_suffix(".npz").read_bytes()
    clear_cache()
    everything(3)
    assert CALLS["everything"] == 2 and (entry.read_bytes(), entry.with_suffix(".npz").read_bytes()) == before


# ------------------------------------------------------------------------------------------- issue 19, finding 2
def test_a_folder_others_can_write_is_bypassed_with_one_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o777)  # world-writable: anyone could swap v1 for their own folder
    monkeypatch.setenv("XORLIB_CACHE", str(folder))
    with recorded() as caught:
        everything(2), everything(2)
    assert CALLS["everything"] == 2 and not (folder / "v1").exists()
    (message,) = cache_warnings(caught)
    assert "can be written by others" in message


def test_a_folder_owned_by_someone_else_is_bypassed_with_one_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    everything(2)  # the folder exists, owned by this process's user
    CALLS.clear()
    me = os.getuid()
    monkeypatch.setattr(cache.os, "getuid", lambda: me + 4242)  # now it is another user's
    with recorded() as caught:
        everything(2), everything(2)
    assert CALLS["everything"] == 2 and "owned by another user" in cache_warnings(caught)[0]


def test_a_swapped_function_folder_is_never_followed(tmp_path: Path) -> None:
    """``mv $C/v1 $C/v1.old; mkdir $C/v1; ln -s /dir $C/v1/<function>``: the next entry must not land in /dir."""
    everything(2)
    folder = only_entry().parent
    target = tmp_path / "elsewhere"
    target.mkdir()
    (cache_dir() / "v1").rename(cache_dir() / "v1.old")
    (cache_dir() / "v1").mkdir(mode=0o700)
    (cache_dir() / "v1" / folder.name).symlink_to(target)
    with recorded() as caught:
        everything(3)
    assert not list(target.iterdir()) and "symbolic link" in cache_warnings(caught)[0]


def test_an_entry_that_is_a_link_is_not_followed_and_is_replaced(tmp_path: Path) -> None:
    everything(2)
    entry = only_entry()
    decoy = tmp_path / "decoy.json"
    decoy.write_bytes(entry.read_bytes())  # even a valid entry is not read through a link
    entry.unlink()
    entry.symlink_to(decoy)
    with recorded() as caught:
        assert everything(2).count == 2
    assert CALLS["everything"] == 2 and "link" in cache_warnings(caught)[0]
    assert not entry.is_symlink() and decoy.read_bytes() != b""  # the link was replaced, its target untouched


@pytest.mark.parametrize(
    ("result", "kind"),
    [({"$": "device", "name": "cpu"}, "device"), ({"$": "dtype", "name": "torch.float64"}, "dtype"), (3, "int")],
)
def test_the_decoder_serves_only_the_declared_type(result: object, kind: str) -> None:
    """A signed entry (a valid key) that decodes to a device, a dtype or an int is not served as an Everything."""
    everything(2)
    entry = only_entry()
    payload = json.loads(entry.read_text())["payload"]
    payload["result"], payload["arrays"] = result, None
    resign(entry, payload)
    with recorded() as caught:
        value = everything(2)
    assert isinstance(value, Everything) and CALLS["everything"] == 2
    assert f"holds a {kind}, not the declared Everything" in cache_warnings(caught)[0]


def test_clear_cache_removes_a_link_instead_of_following_it(tmp_path: Path) -> None:
    everything(2)
    target = tmp_path / "not the cache"
    target.mkdir()
    (target / "precious").write_text("keep me")
    shutil.rmtree(cache_dir() / "v1")
    (cache_dir() / "v1").symlink_to(target)
    clear_cache()
    assert (target / "precious").read_text() == "keep me" and not (cache_dir() / "v1").exists()
    everything(2)  # and the cache works again
