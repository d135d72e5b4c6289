"""Supervising one sandbox from the grader: its limits, the fork server, its events, its deadlines, its end.

The grader reads a sandbox's JSON events from a pipe with :func:`select.select`
and enforces the wall-clock limits itself, so a submission cannot slow or stop
the grader by ignoring signals, blocking or flooding the pipe; when a deadline
passes it kills the sandbox (the namespace's init, the session, and every
process of the sandbox's uid).
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .._checks import check_float, check_int

__all__ = ["DEFAULT_LIMITS", "Attempt", "Limits", "environment", "fork_server", "run_attempt", "site_dirs"]

_HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Limits:
    """Resource limits of one submission's sandbox (seconds, megabytes, a process count).

    ``cell_s`` bounds one answer cell (its code and every call on its cases),
    ``setup_s`` the start (the interpreter, torch and the teacher's setup), and
    ``total_s`` the whole submission, restarts included. ``cpu_s``,
    ``memory_mb``, ``file_mb`` and ``processes`` are ``RLIMIT_CPU``, ``RLIMIT_AS``,
    ``RLIMIT_FSIZE`` and ``RLIMIT_NPROC`` of the runner; ``disk_mb`` is the size
    of its working folder (a tmpfs, in the namespaces tier); ``output_mb``
    caps what it may send back.
    """

    cell_s: float = 30.0
    setup_s: float = 120.0
    total_s: float = 600.0
    cpu_s: int = 300
    memory_mb: int = 4096
    file_mb: int = 32
    disk_mb: int = 64
    processes: int = 64
    output_mb: int = 32

    def __post_init__(self) -> None:
        for name in ("cell_s", "setup_s", "total_s"):
            check_float(name, getattr(self, name), minimum=0.0, strict_minimum=True)
        for name in ("cpu_s", "memory_mb", "file_mb", "disk_mb", "processes", "output_mb"):
            check_int(name, getattr(self, name), minimum=1)

    def rlimits(self) -> dict[str, list[int]]:
        mb = 2**20
        return {
            "CPU": [int(self.cpu_s), int(self.cpu_s) + 5],
            "AS": [self.memory_mb * mb] * 2,
            "FSIZE": [self.file_mb * mb] * 2,
            "NPROC": [self.processes] * 2,
            "NOFILE": [256, 256],
            "CORE": [0, 0],
        }


#: The default limits.
DEFAULT_LIMITS = Limits()


def site_dirs() -> list[str]:
    paths = sysconfig.get_paths()
    return sorted({paths["purelib"], paths["platlib"]})


def environment(work: Path) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(work),
        "TMPDIR": str(work),
        "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
    }


@dataclass
class Attempt:
    """What one start of a sandbox reported: its events, pids and tier, where it stopped and why."""

    events: list[dict] = field(default_factory=list)
    tier: str = "unknown"
    uid: int | None = None
    pid: int | None = None
    outer: int | None = None
    status: int | None = None
    current: str | None = None
    done: bool = False
    reason: str | None = None
    fatal: str | None = None


class _ForkServer:
    """The launcher's fork server (torch imported once); sandboxes are requested over a Unix socket."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        command = [sys.executable, "-I", "-S", str(_HERE / "_launcher.py"), "--serve", str(theirs.fileno())]
        self.proc = subprocess.Popen(
            [*command, *site_dirs()], pass_fds=(theirs.fileno(),), start_new_session=True,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env=environment(Path(tempfile.gettempdir())),
        )  # fmt: skip
        theirs.close()
        self.sock, self.lock = ours, threading.Lock()

    def request(self, config_path: Path, fd: int) -> None:
        with self.lock:
            socket.send_fds(self.sock, [str(config_path).encode()], [fd])

    def close(self) -> None:
        self.sock.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            self.proc.kill()


_SERVER: _ForkServer | None = None
_SERVER_LOCK = threading.Lock()


def fork_server() -> _ForkServer:
    """The process's fork server, started on first use (and again if it died)."""
    global _SERVER
    with _SERVER_LOCK:
        if _SERVER is None or _SERVER.proc.poll() is not None:
            _SERVER = _ForkServer()
            atexit.register(_SERVER.close)
        return _SERVER


def _kill_uid(uid: int) -> None:
    """SIGKILL every process of ``uid`` and wait until none is left (a fresh uid: only the sandbox's have it).

    Waiting matters: the uid is used again by the next sandbox of its slot, and a process left over (or a
    zombie not yet reaped) still counts against that sandbox's ``RLIMIT_NPROC``.
    """
    for _ in range(200):
        found = False
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    if os.stat(f"/proc/{entry}").st_uid == uid:
                        found = True
                        os.kill(int(entry), signal.SIGKILL)
                except (OSError, ProcessLookupError):
                    continue
        if not found:
            return
        time.sleep(0.05)


def _terminate(attempt: Attempt) -> None:
    """Kill what is left of a sandbox: its init or runner and its session (unless it reported its exit), then
    every process of its uid, waiting until none is left.

    A sandbox that reported its exit is gone (its pids were reaped): its pids are not signalled, since
    they could have been reused.
    """
    if attempt.status is None:
        for kill, target in ((os.kill, attempt.pid), (os.killpg, attempt.outer)):
            if target is not None:
                try:
                    kill(target, signal.SIGKILL)  # in the namespaces tier, killing init ends the whole namespace
                except (ProcessLookupError, PermissionError):
                    pass
    if attempt.uid is not None:
        _kill_uid(attempt.uid)


def _handle(event: dict, attempt: Attempt, now: float, limits: Limits) -> float | None:
    """Update the attempt with one event; return a new deadline for the current phase, if it changes."""
    kind = event.get("e")
    if kind == "launcher":
        attempt.tier, attempt.uid = str(event.get("tier")), event.get("uid")
        attempt.pid = event.get("pid") if isinstance(event.get("pid"), int) else None
        attempt.outer = event.get("outer") if isinstance(event.get("outer"), int) else None
        return None
    if kind == "exit" and isinstance(event.get("status"), int):
        attempt.status = event["status"]
        return None
    if kind in ("launcher-error", "setup-error") and attempt.current is None:
        attempt.fatal = f"{kind}: {event.get('error')}"
        return None
    if kind == "ready":
        return float("inf")
    if kind == "cell" and isinstance(event.get("q"), str):
        attempt.current = event["q"]
        return now + limits.cell_s
    if kind == "end":
        attempt.current = None
        return float("inf")
    if kind == "done":
        attempt.done = True
    return None


def run_attempt(start: Callable[[int], None], pipe: tuple[int, int], limits: Limits, total_deadline: float) -> Attempt:
    """Start a sandbox (``start(fd)`` hands it the pipe's write end) and follow its events to its exit.

    The attempt ends when the launcher reports the runner's exit, when the pipe closes, or when a
    deadline passes: the setup's, the current answer cell's, or the submission's.
    """
    attempt, buffer, received = Attempt(), b"", 0
    fd_read, fd_write = pipe
    try:
        start(fd_write)
    finally:
        os.close(fd_write)
    deadline = time.monotonic() + limits.setup_s
    try:
        while attempt.status is None:
            now = time.monotonic()
            if attempt.done:
                deadline = min(deadline, now + 10)  # the runner is done: give it a moment to exit
            if now >= min(deadline, total_deadline):
                phase = (
                    f"its answer cell ran past {limits.cell_s:g} s" if attempt.current else "the sandbox did not start"
                )
                attempt.reason = "the total time limit was reached" if total_deadline <= deadline else phase
                break
            ready, _, _ = select.select([fd_read], [], [], min(0.5, min(deadline, total_deadline) - now))
            if not ready:
                continue
            chunk = os.read(fd_read, 1 << 16)
            received += len(chunk)
            if not chunk:
                break
            if received > limits.output_mb * 2**20:
                attempt.reason = f"it sent more than {limits.output_mb} MB back"
                break
            *lines, buffer = (buffer + chunk).split(b"\n")
            for line in lines:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # the sandbox may write anything on the channel; only well-formed events count
                if not isinstance(event, dict):
                    continue
                attempt.events.append(event)
                changed = _handle(event, attempt, time.monotonic(), limits)
                deadline = changed if changed is not None else deadline
    finally:
        _terminate(attempt)
        os.close(fd_read)
    if not attempt.done and attempt.reason is None:
        code = attempt.status
        if code is None:
            attempt.reason = "its process ended (the sandbox closed its channel)"
        else:
            attempt.reason = (
                f"its process ended ({f'killed by signal {code - 128}' if code > 128 else f'exit status {code}'})"
            )
    return attempt
