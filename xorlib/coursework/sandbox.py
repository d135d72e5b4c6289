"""Where answers run, and the grader's side of the conversation: a fresh runner process
(:mod:`~xorlib.coursework._runner`) per submission, in the best tier this machine offers (every report names it):

``bwrap``
    `bubblewrap <https://github.com/containers/bubblewrap>`_ (Flatpak's sandbox): new PID, network, IPC, UTS and
    mount namespaces; read-only binds of ``/usr``, the interpreter, its ``site-packages`` (any installed ``xorlib``
    covered) and the grading build; a size-limited ``/tmp``. As root, the runner keeps only ``CAP_SETUID``/
    ``CAP_SETGID`` and drops to a fresh uid first; otherwise it runs in a user namespace as the grader's user.
``container``
    Where bubblewrap cannot run (Docker, Gradescope), the container is the sandbox: a fresh unprivileged uid, its
    own session, the same limits, and only if that uid can read none of the teacher's files and the hidden seed is
    on no command line (:func:`check_private`).
``unsandboxed``
    The grader's own user in a separate process: only for code the caller trusts (``trusted=True``).

Answers see a *grading build* of xorlib (:func:`grading_build`), never the package: :mod:`xorlib.task` (``all_inputs``
and friends) and what it imports, found by reading its relative imports; any other module is absent, and importing
one says why. A build that would hold a module a question forbids (its reference) is refused.

The grader trusts only what it observes: its process (pid, exit status), its clock, its tier, and replies checked
against a schema. It signals only the process group it created, before reaping its leader; in the container tier,
processes that left the group are ended by ``kill(-1)`` sent as the sandbox's uid, which can reach nothing else.
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import functools
import itertools
import json
import math
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, fields
from pathlib import Path

from ._runner import Malformed
from .bank import CHAPTERS

__all__ = []  # internal to xorlib.coursework

#: The sandbox choices of the command line and of :func:`~xorlib.coursework.grade_all`.
SANDBOXES = ("auto", "bwrap", "container", "unsandboxed")
_UID_BASE = 2_000_000_000


class SandboxUnavailable(RuntimeError):
    """No tier can hold the answers here; the message says what to install or change."""


class Stopped(Exception):
    """The runner did not answer a request: it ran out of time, died, or broke the framing."""


@dataclass(frozen=True)
class Limits:
    """Limits of one submission: seconds (grader's clock), megabytes, a process count.

    ``cell_s`` bounds one question (its answer cell and every call on its cases), ``setup_s`` the start
    (interpreter, torch, the teacher's setup), ``total_s`` the whole notebook, restarts included. ``memory_mb``,
    ``cpu_s``, ``file_mb`` and ``processes`` are the runner's ``RLIMIT_AS``, ``RLIMIT_CPU``, ``RLIMIT_FSIZE`` and
    ``RLIMIT_NPROC``; ``disk_mb`` sizes its ``/tmp`` (bubblewrap); ``reply_mb`` bounds one reply.
    """

    cell_s: float = 30.0
    setup_s: float = 120.0
    total_s: float = 600.0
    memory_mb: int = 4096
    cpu_s: int = 300
    file_mb: int = 32
    disk_mb: int = 64
    processes: int = 64
    reply_mb: int = 16

    def __post_init__(self) -> None:
        for f in fields(self):
            value, integer = getattr(self, f.name), f.type == "int"
            kind = (int,) if integer else (int, float)
            if isinstance(value, bool) or not isinstance(value, kind):
                raise TypeError(f"{f.name} must be {'an int' if integer else 'a number'}, got {type(value).__name__}")
            if not (math.isfinite(value) and 0 < value <= 10**6):
                raise ValueError(f"{f.name} must be > 0 and <= 1e6, got {value!r}")


@dataclass(frozen=True)
class Tier:
    """How answers are isolated: ``name`` (one of :data:`SANDBOXES` but ``auto``), and whether each runner gets a
    fresh uid (root) or keeps the grader's (inside a user namespace, or unsandboxed)."""

    name: str
    fresh_uid: bool

    def describe(self) -> str:
        """What every report says about the isolation."""
        uid = "a fresh uid" if self.fresh_uid else "a user namespace of the grader's user"
        return {"bwrap": f"bubblewrap: namespaces, {uid}", "container": "container: a fresh uid, no namespaces",
                "unsandboxed": "unsandboxed: the grader's own user (trusted code only)"}[self.name]  # fmt: skip


def site_dirs() -> list[str]:
    """The interpreter's package folders (``site-packages``/``dist-packages``, including ones added by ``.pth``)."""
    found = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages") and Path(p).is_dir()]
    return sorted({os.path.realpath(p) for p in found})


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


def build_modules() -> list[str]:
    """:data:`ALLOWED` and everything they import from xorlib (modules or subpackages), sorted."""
    todo, found = list(ALLOWED), set()
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
    forbidden = {name.split(".")[1] for qs in CHAPTERS.values() for q in qs for name in getattr(q, "forbidden", ())}
    folder = tempfile.mkdtemp(prefix="xorlib-build-")
    atexit.register(shutil.rmtree, folder, True)
    return str(write_build(Path(folder), forbidden))


def covered(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _bwrap_argv(uid: int | None, build: str, limits: Limits) -> list[str]:
    """The bubblewrap command line: namespaces, read-only binds of what the runner needs, nothing else."""
    argv = ["bwrap", "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup-try", "--cap-drop", "ALL"]  # fmt: skip
    argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"] if uid is not None else ["--unshare-user"]
    argv, bound = [*argv, "--ro-bind", "/usr", "/usr"], ["/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
            bound.append(top)
    argv += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", str(limits.disk_mb * 2**20), "--tmpfs",
             "/tmp"]  # fmt: skip
    made: set[str] = set()
    for path in sorted({os.path.realpath(sys.base_prefix), *site_dirs()}):
        if covered(path, bound):
            continue
        for parent in reversed(Path(path).parents[:-1]):  # bubblewrap would make missing parents mode 0700
            if str(parent) not in made and not covered(str(parent), bound):
                argv += ["--perms", "0755", "--dir", str(parent)]
                made.add(str(parent))
        argv += ["--ro-bind", path, path]
        bound.append(path)
    for site in site_dirs():  # an installed xorlib holds the bank: covered by an empty folder
        if (Path(site) / "xorlib").is_dir():
            argv += ["--tmpfs", str(Path(site) / "xorlib")]
    argv += ["--ro-bind", build, "/grader", "--chdir", "/tmp", "--clearenv"]
    for key, value in _environment("/tmp").items():
        argv += ["--setenv", key, value]
    return [*argv, os.path.realpath(sys.executable), "-I", "-S", "/grader/_runner.py"]


def _environment(home: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}  # fmt: skip


_uid_lock, _uid_counter = threading.Lock(), itertools.count()


def _owners() -> list[int]:
    """The uid of every process of the machine (but those that end meanwhile)."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            found.append(os.stat(f"/proc/{entry}").st_uid)
    return found


def _fresh_uid() -> int:
    """A uid no process has, from a range of this grader's own (its pid picks the range)."""
    with _uid_lock:
        busy = set(_owners())
        while True:
            uid = _UID_BASE + (os.getpid() % 100_000) * 1000 + next(_uid_counter) % 1000
            if uid not in busy:
                return uid


class Session:
    """One runner process in a tier, driven in lockstep: :meth:`ask` sends a request and waits for its reply, or
    raises :class:`Stopped` (the constructor too) and closes the session."""

    def __init__(self, tier: Tier, limits: Limits, setup: str, readable: tuple[str, ...] = ()) -> None:
        self.tier, self.limits = tier, limits
        self.uid, build = (_fresh_uid() if tier.fresh_uid else None), grading_build()
        self.workdir, self.stderr, self.buffer = None, b"", b""
        options: dict = {}
        if tier.name == "bwrap":
            argv, drop, path = _bwrap_argv(self.uid, build, limits), self.uid, ["/grader", *site_dirs()]
        else:
            self.workdir = tempfile.mkdtemp(prefix="xorlib-answers-")
            if self.uid is not None:
                os.chown(self.workdir, self.uid, self.uid)
                options = {"user": self.uid, "group": self.uid, "extra_groups": []}
            argv = [os.path.realpath(sys.executable), "-I", "-S", f"{build}/_runner.py"]
            drop, path = None, [build, *site_dirs()]
            options.update(cwd=self.workdir, env=_environment(self.workdir))
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         start_new_session=True, close_fds=True, **options)  # fmt: skip
        except OSError:  # e.g. that uid cannot enter the interpreter's folder
            if self.workdir:
                shutil.rmtree(self.workdir, ignore_errors=True)
            raise
        extra = _owners().count(os.getuid()) if self.uid is None else 0  # NPROC counts the grader's own processes
        rlimits = {"AS": limits.memory_mb * 2**20, "CPU": limits.cpu_s, "FSIZE": limits.file_mb * 2**20,
                   "NPROC": limits.processes + extra, "NOFILE": 256, "CORE": 0}  # fmt: skip
        start = {"op": "start", "uid": drop, "limits": rlimits, "path": path, "setup": setup, "readable": readable}
        try:
            self.started = self.ask(start, limits.setup_s)
        except Stopped as stop:
            detail = self.stderr.decode(errors="replace").strip()[-400:]  # written before any answer ran
            raise Stopped(f"{stop}" + (f": {detail}" if detail else "")) from None

    def ask(self, request: dict, timeout: float) -> dict:
        """Send one request; return its reply (a dict), or raise :class:`Stopped` when the runner does not answer in
        time, dies, or sends more than ``limits.reply_mb``. Each request carries a fresh random id, which its reply
        must echo: lines with another id (a stale reply, or one the answer wrote) are skipped. A line that is not a
        JSON object raises :class:`~xorlib.coursework._runner.Malformed` (the session stays usable)."""
        deadline, token = time.monotonic() + max(timeout, 0.0), secrets.token_hex(8)
        try:
            self._write((json.dumps({**request, "id": token}) + "\n").encode(), deadline)
            consumed = 0
            while True:
                line = self._read_line(deadline)
                consumed += len(line) + 1
                if consumed > self.limits.reply_mb * 2**20:
                    raise Stopped(f"it sent more than {self.limits.reply_mb} MB back")
                try:
                    reply = json.loads(line)
                except (ValueError, RecursionError):
                    raise Malformed("a reply that is not JSON") from None
                if not isinstance(reply, dict):
                    raise Malformed("a reply that is not a JSON object")
                if reply.get("id") == token:
                    return reply
        except Stopped:
            self.close()
            raise

    def _write(self, data: bytes, deadline: float) -> None:
        fd = self.proc.stdin.fileno()
        os.set_blocking(fd, False)
        while data:
            if not select.select([], [fd], [], max(0.0, deadline - time.monotonic()))[1]:
                raise Stopped("it ran past its time limit")
            try:
                data = data[os.write(fd, data) :]
            except BlockingIOError:
                continue
            except BrokenPipeError:
                raise Stopped(self._ended()) from None

    def _read_line(self, deadline: float) -> bytes:
        out, err = self.proc.stdout.fileno(), self.proc.stderr.fileno()
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            ready = select.select([out, err], [], [], max(0.0, remaining))[0] if remaining > 0 else []
            if not ready:
                raise Stopped("it ran past its time limit")
            if err in ready:
                self.stderr = (self.stderr + os.read(err, 1 << 16))[-4096:]
            if out in ready:
                chunk = os.read(out, 1 << 16)
                if not chunk:
                    raise Stopped(self._ended())
                self.buffer += chunk
                if len(self.buffer) > self.limits.reply_mb * 2**20:
                    raise Stopped(f"it sent more than {self.limits.reply_mb} MB back")
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line

    def _ended(self) -> str:
        """The runner's end, as the grader observes it (its exit status, without reaping it)."""
        for _ in range(50):
            info = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            if info is not None:
                code = info.si_status if info.si_code == os.CLD_EXITED else 128 + info.si_status  # bwrap: 128 + n
                ended = f"exit status {code}" if code <= 128 else f"killed by signal {code - 128}"
                return f"its process ended ({ended})"
            time.sleep(0.02)
        return "its process closed its channel"

    def close(self) -> None:
        """End the runner: its process group (the leader is not reaped yet), then, in the container tier, every
        process of its uid, from a process of that uid; then reap and clean up."""
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            os.set_blocking(self.proc.stderr.fileno(), False)  # what is left of its messages, never waiting for more
            with contextlib.suppress(BlockingIOError):
                self.stderr = (self.stderr + os.read(self.proc.stderr.fileno(), 4096))[-4096:]
            for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                stream.close()
            if self.tier.name == "container" and self.uid is not None:
                kill_all = "import os, signal\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError:\n    pass"
                subprocess.run([os.path.realpath(sys.executable), "-I", "-S", "-c", kill_all], user=self.uid,
                               group=self.uid, extra_groups=[], cwd="/", env={}, check=False, timeout=30)  # fmt: skip
                for shared in ("/tmp", "/var/tmp", "/dev/shm"):  # what it left for a later sandbox to read
                    for entry in os.scandir(shared) if os.path.isdir(shared) else ():
                        with contextlib.suppress(FileNotFoundError):  # other processes delete their files meanwhile
                            if entry.stat(follow_symlinks=False).st_uid != self.uid:
                                continue
                            if entry.is_dir(follow_symlinks=False):
                                shutil.rmtree(entry.path, ignore_errors=True)
                            else:
                                os.unlink(entry.path)
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None


def _probe(tier: Tier) -> str | None:
    """``None`` if an empty runner starts and answers in this tier, else what went wrong."""
    if tier.name == "bwrap" and not shutil.which("bwrap"):
        return "bwrap is not installed"
    try:
        session = Session(tier, Limits(setup_s=30), "")
    except (Stopped, OSError) as err:
        return str(err)
    try:
        if not session.started.get("ok") or (session.uid is not None and session.started.get("uid") != session.uid):
            return f"the runner did not start as uid {session.uid}"
        return None
    finally:
        session.close()


_probe_lock = threading.Lock()


@functools.cache
def _tiers(euid: int) -> tuple[dict[str, Tier], dict[str, str]]:
    """The tiers that work here ``{name: tier}``, and why the others do not (probed once per process)."""
    candidates = [Tier("bwrap", True), Tier("bwrap", False), Tier("container", True)] if euid == 0 else [
        Tier("bwrap", False)]  # fmt: skip
    working, failures = {}, {}
    for tier in (t for t in candidates if t.name not in working):
        if (problem := _probe(tier)) is None:
            working[tier.name] = tier
        else:
            failures.setdefault(tier.name, problem)
    if euid != 0:
        failures["container"] = f"it needs root, to run answers as another user (this grader runs as uid {euid})"
    return working, failures


def choose_tier(sandbox: str, *, trusted: bool = False) -> Tier:
    """The tier for ``sandbox`` (one of :data:`SANDBOXES`), or :class:`SandboxUnavailable` saying what to do."""
    if sandbox == "unsandboxed":
        if not trusted:
            raise ValueError(
                "sandbox='unsandboxed' runs answers as you, unisolated: pass trusted=True (only for code you trust)"
            )
        return Tier("unsandboxed", False)
    with _probe_lock:
        working, failures = _tiers(os.geteuid())
    for name in ("bwrap", "container") if sandbox == "auto" else (sandbox,):
        if name in working:
            return working[name]
    if sandbox == "auto" and trusted:
        return Tier("unsandboxed", False)
    reasons = "; ".join(f"{name}: {why}" for name, why in failures.items() if sandbox in ("auto", name))
    raise SandboxUnavailable(
        f"no sandbox tier can hold the answers here ({reasons}). Install bubblewrap (apt-get install bubblewrap) "
        "where user namespaces are allowed (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 also "
        "kernel.apparmor_restrict_unprivileged_userns=0), or grade as root inside a container (Docker, Gradescope)."
    )


def check_private(tier: Tier, paths: list[str], seed: int) -> None:
    """In the container tier: refuse unless the sandbox's uid can read none of ``paths`` and ``seed`` is on no
    command line (:class:`SandboxUnavailable` naming what to fix). Other tiers see none of the machine."""
    if tier.name != "container":
        return
    wanted = tuple(sorted({os.path.realpath(p) for p in paths if os.path.exists(p)}))
    session = Session(tier, Limits(setup_s=30), "", readable=wanted)
    readable = [p for p in session.started.get("readable", []) if p in wanted]
    session.close()
    if readable:
        raise SandboxUnavailable(
            f"in the container tier the answers' uid could read {', '.join(readable)}: make these private "
            f"(chmod -R go-rwx {' '.join(readable)}) or install bubblewrap"
        )
    for entry in filter(str.isdigit, os.listdir("/proc")):
        words = []
        with contextlib.suppress(OSError):  # it ended meanwhile
            words = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        if any(w.split(b"=")[-1] == str(seed).encode() for w in words):
            raise SandboxUnavailable(
                f"the hidden seed is visible in the command line of process {entry} (/proc/{entry}/cmdline), which "
                "the answers could read in the container tier: pass it in a file (--seed-file) or in XORLIB_HIDDEN_SEED"
            )
