"""Start the runner in a sandbox: namespaces, a fresh unprivileged uid, resource limits (a standalone script).

Usage (by :mod:`xorlib.coursework.sandbox`, never by hand)::

    python -I -S _launcher.py --serve SOCKET SITE...   # the fork server
    python -I -S _launcher.py CONFIG                   # one sandbox running CONFIG's argv

The fork server imports torch once, then for every request on the Unix socket
``SOCKET`` (a config path, and the write end of the sandbox's event pipe)
forks a fresh process that builds the sandbox and runs the runner in it, so
that a submission costs a fork instead of an interpreter and a torch import.
Nothing of a submission ever enters the server: it holds torch, the runner's
code and nothing else. ``CONFIG`` (JSON) names the runner's arguments and
environment, the working folder, the paths to keep visible and to hide, the
resource limits and the uid to run as. Two tiers, the best one available:

``namespaces`` (run as root, where ``unshare`` is allowed)
    New mount, PID, network, IPC and UTS namespaces. Inside, ``/root``,
    ``/home``, ``/tmp``, ``/work`` and the other hidden paths are empty
    tmpfs; only the interpreter, its packages and the sandbox's own folder (read
    only) are bound back; the working folder is a size-limited tmpfs; ``/proc``
    shows the sandbox's processes only; there is no network. A small init
    process (pid 1, root) starts the runner as the fresh uid and exits when it
    does, and the kernel then kills every process left in the namespace. Where
    no fresh uid is mapped (root of a rootless container's user namespace), the
    runner stays uid 0, but every mount except the working folder is remounted
    read only and every capability is dropped, so it can neither write outside
    its folder nor remount.
``process``
    Elsewhere: a new session and process group, the resource limits, and the
    fresh uid when running as root and the interpreter is readable by it.

The launcher reports ``{"e": "launcher", "tier": ..., "pid": ..., "outer": ...,
"uid": ...}`` on the event pipe (``pid`` is what the grader kills: the init
process, or the runner; ``outer`` leads the sandbox's session) and, at the end,
``{"e": "exit", "status": ...}`` with the runner's status (``128 + signal`` if killed).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import re
import resource
import signal
import socket
import stat
import sys
from collections.abc import Callable

__all__ = ["PR_SET_PDEATHSIG", "launch", "main", "parse_mountinfo"]

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWUSER = 0x20000000, 0x40000000, 0x10000000
_NAMESPACES = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 24, 38
MS_NOATIME, MS_NODIRATIME, MS_RELATIME, MS_STRICTATIME = 1024, 2048, 1 << 21, 1 << 24
_LIBC = ctypes.CDLL(None, use_errno=True)


def _call(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    encode = lambda s: s.encode() if s is not None else None  # noqa: E731
    _call(_LIBC.mount(encode(source), encode(target), encode(fstype), flags, encode(data)), f"mount {target}")


def _inside(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _send(fd: int, **event: object) -> None:
    os.write(fd, (json.dumps(event) + "\n").encode())


def _status(wait_status: int) -> int:
    return 128 + os.WTERMSIG(wait_status) if os.WIFSIGNALED(wait_status) else os.WEXITSTATUS(wait_status)


def _build_view(config: dict) -> None:
    """Inside new namespaces: hide paths behind empty tmpfs, bind back what the runner needs, read only."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    keep = [p for p in config["keep"] if os.path.exists(p)]
    handles = {p: os.open(p, os.O_PATH | os.O_CLOEXEC) for p in keep}
    hide = sorted(config["hide"], key=len)
    for path in hide:  # the big hidden roots first, then (after the binds) the hidden paths inside kept ones
        if not _inside(path, keep) and os.path.isdir(path) and not os.path.islink(path):
            _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755")
    for path, handle in handles.items():
        if not os.path.exists(path):
            os.makedirs(path, mode=0o755, exist_ok=True)
        _mount(f"/proc/self/fd/{handle}", path, None, MS_BIND | MS_REC)
        _mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
        os.close(handle)
    for path in hide:
        if _inside(path, keep) and os.path.isdir(path):
            _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "size=1m,mode=755")
    options = f"size={config['disk_bytes']},mode=700"
    if config.get("uid") is not None:
        options += f",uid={config['uid']},gid={config['gid']}"
    _mount("tmpfs", config["work"], "tmpfs", MS_NOSUID | MS_NODEV, options)
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    if config.get("uid") is None:  # the runner stays root here (of a user namespace, or unreachable interpreter)
        _seal_read_only(config["work"])


_MOUNT_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
                "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME, "strictatime": MS_STRICTATIME}  # fmt: skip


def parse_mountinfo(text: str) -> list[tuple[str, int]]:
    """The mount points of a ``/proc/<pid>/mountinfo`` text, each with the flags a remount must keep.

    Field 5 is the mount point, with space, tab, newline and backslash written as
    octal escapes (``\\040``); field 6 the per-mount options.
    """
    points = []
    for line in text.splitlines():
        fields = line.split()
        path = re.sub(r"\\([0-7]{3})", lambda escape: chr(int(escape[1], 8)), fields[4])
        flags = sum(_MOUNT_FLAGS.get(option, 0) for option in fields[5].split(","))
        points.append((path, flags))
    return points


def _seal_read_only(work: str) -> None:
    """Remount every mount but the working folder read only, so a root runner without capabilities writes nothing.

    A root runner (without a fresh uid) owns most files, so file modes stop
    nothing; read-only mounts do, once :func:`_drop_capabilities` has taken away
    the right to remount. The flags a mount already has are kept: a user
    namespace refuses to clear them. A mount covered by a later one (under the
    hidden folders, or under the old ``/proc``) has no path of its own any more:
    its path is gone, or names a plain folder of what covers it (EINVAL, not a
    mount point), and nothing can reach it.
    """
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        points = parse_mountinfo(handle.read())
    for path, flags in points:
        if path == work or not os.path.lexists(path):
            continue
        try:
            _mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | flags)
        except OSError as err:
            if err.errno != errno.EINVAL or os.path.ismount(path):
                raise


def _enter_user_namespace() -> None:
    """Unshare a user namespace together with the others, and map our own uid and gid to root inside it.

    Unprivileged users may do this where the kernel allows user namespaces: the
    sandbox then has its own mounts, PIDs and network without any privilege
    outside (``kill(-1)`` reaches only the sandbox's own processes). Root inside
    maps to the caller outside, so the view is sealed read only and the runner
    drops every capability (:func:`_seal_read_only`, :func:`_drop_capabilities`).
    """
    outer_uid, outer_gid = os.geteuid(), os.getegid()
    _call(_LIBC.unshare(CLONE_NEWUSER | _NAMESPACES), "unshare(user)")
    try:  # from here on there is no way back to the caller's namespaces: a failure ends this sandbox
        for name, text in (("setgroups", "deny"), ("uid_map", f"0 {outer_uid} 1"), ("gid_map", f"0 {outer_gid} 1")):
            with open(f"/proc/self/{name}", "w", encoding="ascii") as handle:
                handle.write(text)
    except OSError as err:
        raise RuntimeError(f"the user namespace was created but its ids could not be mapped ({err})") from err


def _drop_capabilities() -> None:
    """Give up every capability for good (bounding set, then effective/permitted/inheritable), and new privileges.

    Used when the runner stays uid 0: without capabilities it cannot remount,
    mount, change owners, override file modes or signal other users.
    """
    _call(_LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
    for capability in range(64):
        if _LIBC.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0 and ctypes.get_errno() != errno.EINVAL:  # no such
            _call(-1, f"prctl(CAPBSET_DROP, {capability})")
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    data = (ctypes.c_uint32 * 6)()  # two words of effective, permitted, inheritable: all zero
    _call(_LIBC.capset(header, data), "capset")


def _reachable(path: str) -> bool:
    """Whether a user with no rights but "others" can read ``path`` (every folder above it searchable)."""
    path = os.path.realpath(path)
    parts = path.split("/")
    for k in range(2, len(parts) + 1):
        mode = os.stat("/".join(parts[:k]) or "/").st_mode
        if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
            return False
    return bool(os.stat(path).st_mode & stat.S_IROTH)


def _process_count(uid: int) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                count += os.stat(f"/proc/{entry}").st_uid == uid
            except OSError:
                continue
    return count


def _become_runner(config: dict, uid: int | None, run: Callable[[dict], None]) -> None:
    """In the runner's process: limits, the unprivileged uid, then the runner (never returns)."""
    try:
        os.chdir(config["work"])
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(null)
        limits = dict(config["rlimits"])
        if uid is None:  # the limit counts all the user's processes (root's too, once without capabilities)
            limits["NPROC"] = [n + config["processes_before"] for n in limits["NPROC"]]
        for name, (soft, hard) in limits.items():
            resource.setrlimit(getattr(resource, f"RLIMIT_{name}"), (soft, hard))
        if uid is not None:
            os.setgroups([])
            os.setgid(config["gid"])
            os.setuid(uid)
        elif os.geteuid() == 0:
            _drop_capabilities()
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        os.environ.clear()
        os.environ.update(config["env"])
        run(config)
    except BaseException as err:
        _send(config["fd"], e="launcher-error", error=f"{type(err).__name__}: {err}")
    os._exit(72)


def _exec(config: dict) -> None:
    os.execve(config["argv"][0], config["argv"], config["env"])


def _wait_for(child: int, *, reap_all: bool) -> int:
    """Wait for ``child`` (as pid 1, also reap orphans), return its status."""
    while True:
        pid, status = os.waitpid(-1 if reap_all else child, 0)
        if pid == child:
            return _status(status)


def launch(config: dict, run: Callable[[dict], None]) -> int:
    """Build the sandbox described by ``config`` in this (fresh, session-leading) process and run ``run`` in it.

    Returns the runner's status, after reporting it on the event pipe.
    """
    fd, uid = config["fd"], config.get("uid")
    config["processes_before"] = _process_count(os.geteuid())  # counted while /proc is still the host's
    tier = "process"
    if config["mode"] != "process":
        try:
            if os.geteuid() == 0 and not config.get("user_namespace"):
                _call(_LIBC.unshare(_NAMESPACES), "unshare")
            else:  # not root (or asked to): a user namespace of our own makes the other namespaces ours to create
                _enter_user_namespace()
                uid = config["uid"] = None
            tier = "namespaces"
        except OSError as err:
            if config["mode"] == "namespaces":
                _send(fd, e="launcher-error", error=f"namespaces are required but unavailable ({err})")
                return 70
    if tier == "process" and os.geteuid() != 0:
        uid = None
    elif tier == "process" and uid is not None:
        paths = [sys.executable, *config["keep"]]
        if all(_reachable(p) for p in paths if os.path.exists(p)):
            os.chown(config["work"], uid, config["gid"])
        else:
            uid = None  # the interpreter is out of the fresh uid's reach
    if tier == "process" and uid is None and os.geteuid() == 0:  # root, no namespaces, no fresh uid: no sandbox
        _send(fd, e="launcher-error", error=(
            "refusing to run answers as root without namespaces and without a fresh uid (none is mapped here, or "
            f"none can read the interpreter {sys.executable}): allow namespaces, install Python where other users "
            "can read it, or grade as a normal user"))  # fmt: skip
        return 70
    child = os.fork()
    if child == 0:
        if tier == "namespaces":  # pid 1 of the new namespace: build the view, start the runner, reap
            parent = os.getppid()
            _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # the launcher was killed: end everything
            if os.getppid() != parent:
                os._exit(75)
            try:
                _build_view(config)
            except BaseException as err:
                _send(fd, e="launcher-error", error=f"{type(err).__name__}: {err}")
                os._exit(71)
            runner = os.fork()
            if runner == 0:
                _become_runner(config, uid, run)
            os._exit(_wait_for(runner, reap_all=True))  # pid 1 leaves: the kernel kills whatever was left behind
        _become_runner(config, uid, run)
    _send(fd, e="launcher", tier=tier, pid=child, outer=os.getpid(), uid=uid)
    status = _wait_for(child, reap_all=False)
    _send(fd, e="exit", status=status)
    os.close(fd)
    return status


def _serve(sock_fd: int, site: list[str]) -> int:
    """The fork server: import torch once, then fork one sandbox per request until the socket closes."""
    sys.path.extend(site)
    import torch

    torch.set_num_threads(1)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    import _runner

    sys.path.remove(here)

    def run(config: dict) -> None:
        os._exit(_runner.main(["_runner", config["manifest"], config["plan"], str(config["fd"])]))

    server = socket.socket(fileno=sock_fd)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the sandboxes report their own status; nobody waits here
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(server, 1 << 16, 4)
        except OSError:
            return 0
        if not message:
            return 0
        if len(fds) != 1:
            for fd in fds:
                os.close(fd)
            continue
        if os.fork() == 0:
            code = 73
            try:
                server.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                os.setsid()
                _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # the server went away: so does this
                with open(message.decode(), encoding="utf-8") as handle:
                    config = json.load(handle)
                config["fd"] = fds[0]
                code = launch(config, run)
            except BaseException as err:
                _send(fds[0], e="launcher-error", error=f"{type(err).__name__}: {err}")
            os._exit(code)
        os.close(fds[0])


def main(argv: list[str]) -> int:
    if argv[1] == "--serve":
        return _serve(int(argv[2]), argv[3:])
    with open(argv[1], encoding="utf-8") as handle:
        config = json.load(handle)
    return launch(config, _exec)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
