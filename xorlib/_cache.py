"""A disk cache for slow results, in a format that cannot run code.

*What this is:* memoisation on disk (:func:`cached`; experiments get it from
``@experiment``), a side concern of the tooling floor that the experiments use. *What it is not:* an object store: it keeps the values a result
is made of and rebuilds only the result types that :mod:`xorlib` declares.

Format
    ``<cache_dir>/v1/<module.function>/<key>.json`` holds ``{"hmac", "payload":
    {"format", "key", "result", "arrays"}}``: the key material, a JSON tree of the
    value (NaN and infinities as Python's :mod:`json` writes them), and the SHA-256
    of ``<key>.npz`` beside it, which holds the arrays and tensors and is read with
    ``allow_pickle=False``. A dataclass is rebuilt field by field (``object.__new__``:
    none of its code runs) only if its type is registered: a cached function's
    declared return type and the frozen dataclasses its fields name (or
    :func:`result_type`); a type an entry names is looked up there, never imported.
    The value an entry decodes to must be of the function's declared return type,
    or the entry is refused. Tensors come back on the CPU, dense, with their dtype;
    numpy scalars as Python scalars.
Key
    SHA-256 of canonical JSON of the function's qualified name; its arguments
    bound to its signature with defaults (floats by ``repr``, frozen dataclasses
    by type and fields, anything else a :class:`TypeError`); the SHA-256 of every
    file of the package as it is on disk at the call; the versions of Python,
    numpy, torch, xorlib; torch's default dtype. Not the progress switch or the
    thread count. An entry carries its key material, checked on load.
Trust
    Entries are signed (HMAC-SHA-256) with a per-user secret ``<cache_dir>/key``,
    32 random bytes created with mode 0600, refused unless a regular file of the
    user with no group or other permissions: the format cannot run code, and the
    signature refuses a well-formed entry that someone else wrote or altered.
    A refused, corrupt, truncated or mismatching entry is a miss with one
    :class:`CacheWarning`: the value is recomputed and overwritten.
Location
    ``$XORLIB_CACHE``, else ``.cache/xorlib`` in a writable source checkout, else
    ``~/.cache/xorlib``; ``XORLIB_NO_CACHE=1`` turns caching off. A folder that
    cannot be read or written (or a file at its path) is bypassed with one warning
    per process, and so is one that someone else could change: the cache folder,
    its ``v1`` and each function's folder must be real directories (not symbolic
    links) owned by the user, with no group or other write permission (they are
    made with mode 0700). Entries are opened without following symbolic links. Writes go through a temporary file and :func:`os.replace`: no
    reader sees half an entry. If a module of the package changed on disk after
    this process imported the cache, the running code may be older than the key
    says: new values are then not stored (one warning; restart the kernel).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import hmac
import inspect
import io
import json
import os
import platform
import re
import secrets
import shutil
import stat
import sys
import tempfile
import time
import typing
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch

F = TypeVar("F", bound=Callable[..., Any])
C = TypeVar("C", bound=type)

_FORMAT = "xorlib-cache/1"
_PACKAGE = Path(__file__).absolute().parent
_IMPORTED_AT_NS = time.time_ns()
_ARRAY_KINDS = "biufc"  # bool, int, uint, float, complex: never object, structured or void
_DTYPE_NAMES = "bool uint8 int8 int16 int32 int64 float16 bfloat16 float32 float64 complex64 complex128".split()
_TORCH_DTYPES = {f"torch.{name}": getattr(torch, name) for name in _DTYPE_NAMES}
_registry: dict[str, type] = {}
_warned: set[str] = set()


class CacheWarning(UserWarning):
    """The cache refused an entry or could not use its folder; the value was computed instead."""


class _Refused(Exception):
    """An entry that must not be served (the message says why)."""


def _name(obj: Any) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


def _is_result_class(obj: object) -> bool:
    return isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__dataclass_params__.frozen  # type: ignore[attr-defined]


def _register_declared(hint: object, seen: set[object]) -> None:
    """Register the frozen dataclasses a declared type hint names, and those their fields name."""
    if _is_result_class(hint) and hint not in seen:
        seen.add(hint)
        _registry[_name(hint)] = hint  # type: ignore[assignment]
        with contextlib.suppress(Exception):  # unresolvable annotations: nested types need @result_type
            for field_hint in typing.get_type_hints(hint).values():
                _register_declared(field_hint, seen)
    for argument in typing.get_args(hint):
        _register_declared(argument, seen)


def result_type(cls: C) -> C:
    """Declare ``cls``, a frozen dataclass (and the dataclasses its fields name), one the cache rebuilds.

    A cached function's declared return type is declared automatically; use this for
    a type its annotations do not name or that cannot be resolved from them.
    """
    if not _is_result_class(cls):
        raise TypeError(f"result_type expects a frozen dataclass (the cache rebuilds no other), got {cls!r}")
    _register_declared(cls, set())
    return cls


def _source_fingerprint(root: Path) -> str:
    """SHA-256 of the relative paths and contents of the package's files (not bytecode, not hidden), as they are now."""
    digest = hashlib.sha256()
    for folder, folders, names in os.walk(root):
        folders[:] = sorted(name for name in folders if not name.startswith(".") and name != "__pycache__")
        for name in sorted(name for name in names if not name.startswith(".") and not name.endswith(".pyc")):
            path = Path(folder, name)
            with contextlib.suppress(FileNotFoundError):  # deleted since the walk: the fingerprint changes anyway
                content = hashlib.sha256(path.read_bytes()).hexdigest()
                digest.update(f"{path.relative_to(root).as_posix()}\0{content}\0".encode())
    return digest.hexdigest()


def _environment() -> dict[str, str]:
    """The library versions and the torch default dtype that a result may depend on."""
    from . import __version__ as xorlib_version  # the package's one version (xorlib/__init__.py)

    versions = {"python": platform.python_version(), "numpy": np.__version__, "torch": torch.__version__}
    return {**versions, "xorlib": xorlib_version, "default_dtype": str(torch.get_default_dtype())}


def _canonical(tree: object) -> bytes:
    return json.dumps(tree, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=True).encode()


def _encode(value: object, arrays: list[np.ndarray] | None, where: str) -> object:
    """Canonical JSON tree of a value; its arrays go to ``arrays`` (``None`` for a key, which holds none).

    A :class:`TypeError` names ``where`` for a value the cache cannot hold.
    """
    if value is None or type(value) in (bool, str, int, float):
        return value
    if isinstance(value, (np.bool_, np.integer, np.floating)):
        return value.item()
    if type(value) in (list, tuple):
        items = [_encode(item, arrays, f"{where}[{i}]") for i, item in enumerate(value)]  # type: ignore[arg-type]
        return items if type(value) is list else {"$": "tuple", "items": items}
    if type(value) is dict:
        pairs = [[_encode(k, arrays, where), _encode(v, arrays, f"{where}[{k!r}]")] for k, v in value.items()]  # type: ignore[attr-defined]
        return {"$": "dict", "items": pairs}
    if (isinstance(value, torch.dtype) and str(value) in _TORCH_DTYPES) or isinstance(value, torch.device):
        return {"$": type(value).__name__, "name": str(value)}
    if arrays is not None and isinstance(value, torch.Tensor) and str(value.dtype) in _TORCH_DTYPES:
        tensor = value.detach().cpu().resolve_conj().resolve_neg().to_dense()
        arrays.append((tensor.float() if tensor.dtype == torch.bfloat16 else tensor).numpy())
        return {"$": "tensor", "name": f"a{len(arrays) - 1}", "dtype": str(value.dtype)}
    if arrays is not None and type(value) is np.ndarray and value.dtype.kind in _ARRAY_KINDS:
        arrays.append(value)
        return {"$": "ndarray", "name": f"a{len(arrays) - 1}"}
    if _is_result_class(type(value)):
        if arrays is not None and _registry.get(_name(type(value))) is not type(value):
            raise TypeError(
                f"{where} is a {_name(type(value))}: declare it with @xorlib._cache.result_type to cache it"
            )
        fields = dataclasses.fields(value)  # type: ignore[arg-type]
        encoded = {f.name: _encode(getattr(value, f.name), arrays, f"{where}.{f.name}") for f in fields}
        return {"$": "result", "type": _name(type(value)), "fields": encoded}
    raise TypeError(
        f"{where} is a {type(value).__name__}, which the cache cannot {'store' if arrays is not None else 'key by'}: "
        "use None, bool, int, float, str, a torch dtype or device, lists, tuples and dicts of those, a frozen "
        "dataclass of those" + (", numpy arrays of numbers or torch tensors" if arrays is not None else "")
    )


def _decode(tree: Any, arrays: dict[str, np.ndarray]) -> object:
    """The value a JSON tree of :func:`_encode` describes; refuses a node or a type it does not know."""
    if tree is None or isinstance(tree, (bool, int, float, str)):
        return tree
    if isinstance(tree, list):
        return [_decode(item, arrays) for item in tree]
    tag = tree["$"]
    if tag in ("tuple", "dict"):
        items = [_decode(item, arrays) for item in tree["items"]]
        return tuple(items) if tag == "tuple" else dict(items)
    if tag in ("dtype", "device"):
        return _TORCH_DTYPES[tree["name"]] if tag == "dtype" else torch.device(tree["name"])
    if tag in ("ndarray", "tensor"):
        array = arrays[tree["name"]]
        return array if tag == "ndarray" else torch.from_numpy(array).to(_TORCH_DTYPES[tree["dtype"]])
    if tag != "result":
        raise _Refused(f"it holds an unknown node {tag!r}")
    cls = _registry.get(tree["type"]) if isinstance(tree["type"], str) else None
    if cls is None:
        raise _Refused(f"it names the type {tree['type']!r}, which is not a registered xorlib result type")
    names, fields = [f.name for f in dataclasses.fields(cls)], tree["fields"]
    if sorted(fields) != sorted(names):
        raise _Refused(f"its fields {sorted(fields)} are not those of {tree['type']}")
    instance = object.__new__(cls)  # no __init__ or __post_init__: no code of the type runs
    for name in names:
        object.__setattr__(instance, name, _decode(fields[name], arrays))
    return instance


def cache_dir() -> Path:
    """The cache folder: ``$XORLIB_CACHE``, else ``.cache/xorlib`` in a writable source checkout, else ``~/.cache/xorlib``."""
    if env := os.environ.get("XORLIB_CACHE"):
        return Path(env).expanduser()
    checkout = _PACKAGE.parent
    if (checkout / "pyproject.toml").is_file() and os.access(checkout, os.W_OK):
        return checkout / ".cache" / "xorlib"
    return Path.home() / ".cache" / "xorlib"


def _write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in its folder and :func:`os.replace`."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


def _private_folder(path: Path) -> None:
    """Make ``path`` (mode 0700) if it is missing; refuse (``PermissionError``) a folder someone else could change.

    It must be a real directory, not a symbolic link, owned by this user, with no group or other write permission.
    """
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700, parents=True)
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise PermissionError(f"{path} is a symbolic link or not a directory")
    if os.name != "nt" and info.st_uid != os.getuid():
        raise PermissionError(f"{path} is owned by another user (uid {info.st_uid})")
    if os.name != "nt" and info.st_mode & 0o022:
        raise PermissionError(f"{path} can be written by others (mode {stat.S_IMODE(info.st_mode):o}); chmod go-w it")


def _secret(directory: Path) -> bytes:
    """The per-user signing key ``<directory>/key``, made on first use; refused unless private to this user."""
    _private_folder(directory)
    path = directory / "key"
    if not path.exists():  # a concurrent first use may replace it: entries signed with the loser's key are refused
        _write_atomic(path, secrets.token_bytes(32))  # mkstemp makes it 0600
    with _open_no_follow(path) as file:
        info, secret = os.fstat(file.fileno()), file.read(33)
    foreign = os.name != "nt" and (info.st_uid != os.getuid() or info.st_mode & 0o077 or not stat.S_ISREG(info.st_mode))
    if foreign or len(secret) != 32:
        raise PermissionError(f"{path} is not a 32-byte file of yours with mode 0600; delete it to make a new key")
    return secret


def _signature(secret: bytes, payload: object) -> str:
    return hmac.new(secret, _canonical(payload), hashlib.sha256).hexdigest()


def _npz_bytes(arrays: list[np.ndarray]) -> bytes:
    """An .npz of ``arrays`` (``a0``, ``a1``, ...) whose bytes depend on the arrays only (no time stamps)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for i, array in enumerate(arrays):
            with archive.open(zipfile.ZipInfo(f"a{i}.npy", date_time=(1980, 1, 1, 0, 0, 0)), "w") as member:
                np.lib.format.write_array(member, array, allow_pickle=False)
    return buffer.getvalue()


def _open_no_follow(path: Path) -> Any:
    """``path`` opened for reading, refusing (``OSError``) a symbolic link instead of following it."""
    return os.fdopen(os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)), "rb")


def _read(path: Path) -> bytes:
    with _open_no_follow(path) as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            raise _Refused(f"{path.name} is not a regular file")
        return file.read()


def _declared(expected: object) -> type | None:
    """The class a declared return type requires of a value (``None``: no requirement)."""
    origin = typing.get_origin(expected) or expected
    return origin if isinstance(origin, type) and origin is not typing.Any else None


def _load(entry: Path, material: dict[str, object], secret: bytes, expected: object = None) -> object:
    """The value stored at ``entry``; :class:`_Refused` if it must not be served."""
    try:
        document = json.loads(_read(entry))
        payload = document["payload"]
        if not hmac.compare_digest(str(document["hmac"]), _signature(secret, payload)):
            raise _Refused("its signature does not match your key: it was planted, altered or written by someone else")
        if payload["format"] != _FORMAT or _canonical(payload["key"]) != _canonical(material):
            raise _Refused("its key material does not match this call")
        arrays = {}
        if payload["arrays"] is not None:
            blob = _read(entry.with_suffix(".npz"))
            if hashlib.sha256(blob).hexdigest() != payload["arrays"]:
                raise _Refused("its arrays file does not match the SHA-256 the entry records")
            with np.load(io.BytesIO(blob), allow_pickle=False) as archive:  # an .npz of plain arrays, never pickles
                arrays = {name: archive[name] for name in archive.files}
        value = _decode(payload["result"], arrays)
    except (OSError, KeyError, TypeError, ValueError, IndexError, AttributeError, RecursionError) as err:
        raise _Refused(f"it is corrupt, truncated or a link ({type(err).__name__}: {err})") from None
    kind = _declared(expected)
    if kind is not None and not isinstance(value, kind):
        raise _Refused(f"it holds a {type(value).__name__}, not the declared {kind.__name__}")
    return value


def _store(entry: Path, material: dict[str, object], value: object, secret: bytes) -> None:
    """Write ``value`` at ``entry``: the arrays first, then the signed JSON that names them."""
    arrays: list[np.ndarray] = []
    payload = {"format": _FORMAT, "key": material, "result": _encode(value, arrays, "the result"), "arrays": None}
    if arrays:  # equal values make equal bytes: concurrent writers of one entry cannot mismatch its two files
        blob = _npz_bytes(arrays)
        payload["arrays"] = hashlib.sha256(blob).hexdigest()
        _write_atomic(entry.with_suffix(".npz"), blob)
    document = {"hmac": _signature(secret, payload), "payload": payload}
    _write_atomic(entry, json.dumps(document, sort_keys=True, indent=1, allow_nan=True).encode())


def _loaded_code_is_stale(root: Path) -> bool:
    """Whether a module of the package that this process imported changed on disk after the cache was imported."""
    files = [getattr(module, "__file__", None) for module in list(sys.modules.values())]
    ours = [file for file in files if isinstance(file, str) and file.startswith(f"{root}{os.sep}")]
    return any(not os.path.isfile(file) or os.stat(file).st_mtime_ns > _IMPORTED_AT_NS for file in ours)


def _warn_once(topic: str, message: str) -> None:
    if topic not in _warned:
        _warned.add(topic)
        warnings.warn(message, CacheWarning, stacklevel=4)


def _folder(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def _cached_call(name: str, arguments: list[list[object]], compute: Callable[[], Any], expected: object = None) -> Any:
    """Serve the entry of this call if one may be served, else ``compute()`` the value and store it."""
    root, directory = _PACKAGE, cache_dir()
    material = {"function": name, "arguments": arguments, "source": _source_fingerprint(root), **_environment()}
    entry = directory / "v1" / _folder(name) / f"{hashlib.sha256(_canonical(material)).hexdigest()}.json"
    unusable = f"the cache folder {directory} cannot be used; results are computed and not stored"
    try:
        secret = _secret(directory)
        _private_folder(directory / "v1")
        _private_folder(entry.parent)
        if os.path.lexists(entry):
            return _load(entry, material, secret, expected)
    except _Refused as why:
        warnings.warn(f"cache entry {entry} refused, recomputing: {why}", CacheWarning, stacklevel=3)
    except OSError as err:
        _warn_once(str(directory), f"{unusable} ({type(err).__name__}: {err})")
        return compute()
    value = compute()
    if _loaded_code_is_stale(root):
        _warn_once("stale", f"{root} changed after this process imported it; new results are not cached (restart)")
        return value
    try:
        _store(entry, material, value, secret)
    except OSError as err:
        _warn_once(str(directory), f"{unusable} ({type(err).__name__}: {err})")
    return value


def cached(function: F) -> F:
    """Cache the results of ``function`` on disk, keyed by its arguments, the source and the library versions.

    Parameters
    ----------
    function
        Returns a value the cache can store (module docstring); its declared
        return type is registered (:func:`result_type`). It checks its own
        arguments; the wrapper refuses, with a :class:`TypeError` naming it, only
        an argument that a key cannot hold.

    Returns
    -------
    callable
        ``function`` with its name, signature and docstring; ``.uncached`` is ``function``.
    """
    signature, name = inspect.signature(function), _name(function)

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = [[key, _encode(value, None, f"{name}: argument {key}")] for key, value in bound.arguments.items()]
        if os.environ.get("XORLIB_NO_CACHE") == "1":
            return function(*args, **kwargs)
        expected = None
        with contextlib.suppress(Exception):  # annotations that cannot be resolved register nothing
            expected = typing.get_type_hints(inspect.unwrap(function)).get("return")
            _register_declared(expected, set())
        return _cached_call(name, arguments, lambda: function(*args, **kwargs), expected)

    wrapper.uncached = function  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


def clear_cache(function: Callable[..., Any] | None = None) -> None:
    """Delete the cached results of ``function`` (a cached function), or all of them if ``None``; the key stays."""
    if function is not None and not callable(getattr(function, "uncached", None)):
        raise TypeError(
            "function must be a cached function (made by @cached or @experiment) or None, "
            f"got {type(function).__name__} {getattr(function, '__name__', function)!r}"
        )
    folder = cache_dir() / "v1" / ("" if function is None else _folder(_name(function)))
    for level in (folder.parent, folder) if function is not None else (folder,):
        if os.path.islink(level):  # never follow a link out of the cache: remove the link itself
            os.unlink(level)
            return
    if folder.is_dir():
        shutil.rmtree(folder)
