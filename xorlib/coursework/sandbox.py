"""Run a submission's answer cells in a sandbox and collect what they return.

The grader never runs student code in its own process, and never uses a
Jupyter kernel. For each submission it writes a private folder holding the
grading build of xorlib (:mod:`~xorlib.coursework._build`) and a manifest
(the teacher's setup, the answer cells, the encoded test arguments), and asks
the fork server of ``_launcher.py`` for a sandbox (see its docstring for the two
tiers: namespaces with a fresh uid, or a process group). The sandbox runs
``_runner.py``; events come back as JSON lines on a pipe, and nothing else
crosses. The grader enforces the wall-clock limits from outside
(:mod:`~xorlib.coursework._supervise`): the setup, each answer cell (its code
and all its cases) and the whole submission. A cell that hangs or kills its process is recorded
against its question, and a fresh process runs the remaining ones; at the end
the whole sandbox is killed (the namespace's init, the process group, and every
process of the sandbox's uid).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ._build import write_build
from ._supervise import DEFAULT_LIMITS, Attempt, Limits, environment, fork_server, run_attempt, site_dirs

__all__ = ["Limits"]  # the rest is internal to xorlib.coursework

_HERE = Path(__file__).resolve().parent
_PACKAGE_ROOT = _HERE.parents[1]
#: Paths hidden from the sandbox (besides the repository, the working folder and the submissions).
HIDDEN = ("/root", "/home", "/work", "/tmp", "/var/tmp", "/mnt", "/srv", "/media", "/opt", "/run", "/dev/shm")
_SYSTEM = ("/", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/etc", "/proc", "/sys", "/dev", "/var")
_UID_BASE = 1_900_000_000
#: ``"auto"``: namespaces where available, else a process group; ``"namespaces"``: refuse to run without them.
ISOLATIONS = ("auto", "namespaces", "process")


@dataclass(frozen=True)
class Job:
    """One question's part of a submission: its answer cell and the encoded arguments of its cases."""

    id: str
    function: str
    code: str
    cases: tuple[object, ...]


@dataclass(frozen=True)
class SandboxResult:
    """What came back from a submission's sandbox.

    ``events`` are the runner's JSON events in order, over all attempts;
    ``stopped`` maps a question to why the sandbox stopped it (it hung or its
    process died); ``fatal`` is set when the grading environment itself
    failed (not the student's doing); ``tier`` and ``uid`` say how the answers
    were isolated.
    """

    events: tuple[dict, ...]
    stopped: dict[str, str] = field(default_factory=dict)
    tier: str = "unknown"
    uid: int | None = None
    attempts: int = 0
    fatal: str | None = None
    seconds: float = 0.0


def _outermost(paths: Sequence[str]) -> list[str]:
    """The paths not inside another one of them."""
    unique = sorted({os.path.realpath(p) for p in paths if p and os.path.exists(p)}, key=len)
    kept: list[str] = []
    for p in unique:
        if not any(p == k or p.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(p)
    return kept


def _view(control: Path, extra_hidden: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(keep, hide)``: what the sandbox sees (read only) and what it must not."""
    interpreter = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    interpreter.append(str(Path(os.path.realpath(sys.executable)).parents[1]))
    keep = _outermost([*interpreter, *site_dirs(), str(control)])
    hide = {os.path.realpath(h) for h in (*HIDDEN, str(_PACKAGE_ROOT), os.getcwd(), *map(str, extra_hidden))}
    hide = {h for h in hide - set(_SYSTEM) if not any(h.startswith(s + "/") for s in ("/proc", "/sys", "/dev/pts"))}
    hide = {h for h in hide if not any(h == k or h.startswith(k + "/") for k in keep)}  # never inside what it needs
    # ... except a copy of xorlib installed among the packages, which is hidden inside them.
    hide |= {os.path.realpath(Path(s) / "xorlib") for s in site_dirs() if (Path(s) / "xorlib").is_dir()}
    return keep, sorted(hide)


def _write_control(control: Path, jobs: Sequence[Job], setup: str, gid: int | None) -> None:
    """The sandbox's read-only folder: the grading build and the manifest; readable by the sandbox's group only."""
    write_build(control / "build")
    manifest = {
        "setup": setup,
        "site": site_dirs(),
        "build": str(control / "build"),
        "questions": [{"id": j.id, "function": j.function, "code": j.code, "cases": list(j.cases)} for j in jobs],
    }
    (control / "manifest.json").write_text(json.dumps(manifest))
    (control / "work").mkdir()
    if gid is not None:
        for path in [control, *control.rglob("*")]:
            os.chown(path, 0, gid)
            os.chmod(path, 0o750 if path.is_dir() else 0o640)


def _id_is_mapped(value: int, map_file: str) -> bool:
    """Whether ``value`` lies in one of the ranges of ``map_file`` (``/proc/self/uid_map`` or ``gid_map``).

    Each line reads ``inside outside count``; an id outside every range cannot be
    used here (``chown``/``setuid`` fail with EINVAL), as in a rootless container,
    where root of a user namespace maps only itself.
    """
    try:
        lines = Path(map_file).read_text().splitlines()
    except OSError:
        return False
    for line in lines:
        fields = line.split()
        if len(fields) == 3 and int(fields[0]) <= value < int(fields[0]) + int(fields[2]):
            return True
    return False


def _sandbox_ids(slot: int) -> tuple[int, int] | tuple[None, None]:
    """The fresh uid (= gid) for sandbox ``slot``, or ``(None, None)`` where none can be used."""
    if os.geteuid() != 0:
        return None, None
    uid = _UID_BASE + (os.getpid() % 100_000) * 64 + slot % 64
    if not (_id_is_mapped(uid, "/proc/self/uid_map") and _id_is_mapped(uid, "/proc/self/gid_map")):
        return None, None  # root of a user namespace without that id: run as we are (the tier is reported)
    return uid, uid


def run_jobs(
    jobs: Sequence[Job],
    setup: str,
    *,
    limits: Limits = DEFAULT_LIMITS,
    isolation: str = "auto",
    slot: int = 0,
    hide: Sequence[str] = (),
) -> SandboxResult:
    """Run answer cells in a sandbox, restarting past any cell that hangs or kills its process.

    Parameters
    ----------
    jobs
        The questions, in the order their cells run (they share one namespace).
    setup
        The teacher's setup code, run first.
    limits
        Resource limits.
    isolation
        ``"auto"`` (namespaces where possible), ``"namespaces"`` (refuse
        otherwise) or ``"process"`` (a process group only, for comparison).
    slot
        Which of the concurrent sandboxes this is (each gets its own uid).
    hide
        Extra paths to hide (the submissions' folder, the output folder).
    """
    if isolation not in ISOLATIONS:
        raise ValueError(f"isolation must be one of {', '.join(ISOLATIONS)}, got {isolation!r}")
    start = time.monotonic()
    uid, gid = _sandbox_ids(slot)
    control = Path(tempfile.mkdtemp(prefix="xorlib-grade-"))
    skip: set[str] = set()
    evaluated: set[str] = set()
    events: list[dict] = []
    stopped: dict[str, str] = {}
    result_tier, result_uid, fatal, attempts = "unknown", None, None, 0
    try:
        _write_control(control, jobs, setup, gid)
        keep, hidden = _view(control, hide)
        total_deadline = start + limits.total_s
        while attempts <= len(jobs):
            attempts += 1
            plan = json.dumps({"skip": sorted(skip), "evaluated": sorted(evaluated)})
            config = {
                "mode": working_isolation(isolation), "uid": uid, "gid": gid, "keep": keep, "hide": hidden,
                "work": str(control / "work"), "disk_bytes": limits.disk_mb * 2**20, "rlimits": limits.rlimits(),
                "manifest": str(control / "manifest.json"), "plan": plan, "env": environment(control / "work"),
            }  # fmt: skip
            config_path = control / f"launch-{attempts}.json"
            config_path.write_text(json.dumps(config))
            server = fork_server()
            start_sandbox = functools.partial(server.request, config_path)
            attempt = run_attempt(start_sandbox, os.pipe(), limits, total_deadline)
            events.extend(attempt.events)
            result_tier, result_uid = attempt.tier, attempt.uid
            evaluated |= {e["q"] for e in attempt.events if e.get("e") == "end" and isinstance(e.get("q"), str)}
            if attempt.done or attempt.fatal:
                fatal = attempt.fatal
                break
            if attempt.current is None:
                if not any(e.get("e") == "ready" for e in attempt.events):
                    fatal = f"the grading sandbox did not start: {attempt.reason}"
                for job in jobs:  # it died between cells (a thread of an earlier answer?): the rest is not run
                    if job.id not in evaluated and job.id not in skip:
                        stopped[job.id] = f"not run: the process ended before this cell ({attempt.reason})"
                break
            stopped[attempt.current] = attempt.reason or "stopped"
            skip.add(attempt.current)
            if time.monotonic() >= total_deadline:
                break
    finally:
        shutil.rmtree(control, ignore_errors=True)
    return SandboxResult(
        events=tuple(events), stopped=stopped, tier=result_tier, uid=result_uid, attempts=attempts,
        fatal=fatal, seconds=time.monotonic() - start,
    )  # fmt: skip


def probe(isolation: str = "auto") -> str:
    """The tier a sandbox gets here (``"namespaces"`` or ``"process"``), found by starting an empty one."""
    return run_command(_EMPTY, isolation=working_isolation(isolation)).tier


_EMPTY = (sys.executable, "-I", "-S", "-c", "pass")


@functools.cache
def working_isolation(isolation: str, *, user_namespace: bool = False) -> str:
    """``"auto"`` made concrete, once per process: ``"namespaces"`` where an empty sandbox of that tier runs here.

    Creating the namespaces can succeed while building the view inside them fails:
    in a user namespace the kernel refuses a fresh ``/proc`` when the old one has
    mounts on it (``binfmt_misc`` on most hosts, the masked paths of a container).
    Then the sandbox cannot be built, and ``"auto"`` means the process tier.
    ``user_namespace`` is for tests: probe as a grader that is not root would.
    """
    if isolation != "auto":
        return isolation
    attempt = run_command(_EMPTY, isolation="namespaces", user_namespace=user_namespace)
    return "namespaces" if attempt.tier == "namespaces" and attempt.status == 0 else "process"


def run_command(
    argv: Sequence[str],
    *,
    isolation: str = "auto",
    fresh_uid: bool = True,
    user_namespace: bool = False,
    timeout_s: float = 60,
) -> Attempt:
    """Run ``argv`` alone in a sandbox built as for a submission; return the :class:`Attempt` (tier, uid, status).

    ``fresh_uid=False`` keeps the caller's uid, as where no other uid is mapped
    (a rootless container): the sandbox must then hold without one.
    ``user_namespace=True`` builds the namespaces inside a user namespace of the
    sandbox's own, as for a grader that is not root, even when run as root.
    """
    control = Path(tempfile.mkdtemp(prefix="xorlib-probe-"))
    try:
        (control / "work").mkdir()
        uid, gid = _sandbox_ids(63) if fresh_uid else (None, None)
        if gid is not None:
            for path in (control, control / "work"):
                os.chown(path, 0, gid)
                os.chmod(path, 0o750)
        keep, hidden = _view(control, ())
        config = {
            "mode": isolation, "uid": uid, "gid": gid, "keep": keep, "hide": hidden,
            "work": str(control / "work"), "disk_bytes": 2**20, "rlimits": Limits().rlimits(),
            "argv": list(argv), "env": environment(control / "work"), "user_namespace": user_namespace,
        }  # fmt: skip

        def start(fd: int) -> None:
            (control / "probe.json").write_text(json.dumps({**config, "fd": fd}))
            command = [sys.executable, "-I", "-S", str(_HERE / "_launcher.py"), str(control / "probe.json")]
            subprocess.run(command, pass_fds=(fd,), start_new_session=True, timeout=timeout_s, check=False,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip

        return run_attempt(start, os.pipe(), Limits(setup_s=timeout_s), time.monotonic() + timeout_s)
    finally:
        shutil.rmtree(control, ignore_errors=True)
