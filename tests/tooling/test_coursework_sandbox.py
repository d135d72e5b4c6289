"""The sandbox tiers and the attacks on the grader itself: forged control messages, deadline resets, forged tiers,
kills aimed at other processes (played against canaries inside a PID namespace of the test's own), leaks of hidden
cases, and graders that are not root or have no bubblewrap."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from _classroom import FIXTURE, Q2, Q3, ROOT, answers, code, other_python, run_as, submission, write

from xorlib.coursework import _runner
from xorlib.coursework.grading import _cases
from xorlib.coursework.sandbox import SandboxUnavailable, Tier, choose_tier, site_dirs

SEED = 31337
SHARED = Path("/tmp")  # what an unprivileged user can reach (pytest's own folders are private to root)


def _bwrap_tier() -> Tier:
    try:
        tier = choose_tier("auto")
    except SandboxUnavailable as err:
        pytest.skip(f"no sandbox tier here: {err}")
    if tier.name != "bwrap":
        pytest.skip(f"these attacks are played in the bubblewrap tier, not {tier.name}")
    return tier


@pytest.fixture
def shared_dir():
    folder = Path(__import__("tempfile").mkdtemp(prefix="xorlib-test-", dir=SHARED))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


# ----------------------------------------------------------------------------- the reply schema
def test_every_malformed_output_is_refused_as_data() -> None:
    for bad, why in (
        ({"shape": [], "data": [10**400]}, "beyond the range"),
        ({"shape": [2], "data": [1.0]}, "do not fill"),
        ({"shape": [1], "data": [True]}, "not numbers"),
        ({"shape": [-1], "data": []}, "malformed shape"),
        ({"shape": [1] * 100, "data": [1.0]}, "malformed shape"),  # NumPy's own ValueError once aborted grade-all
        ({"shape": [1], "data": ["1"]}, "not numbers"),
        ({"tuple": [{"tuple": [{"tuple": [{"tuple": [{"tuple": [{"tuple": []}]}]}]}]}]}, "not an encoded value"),
        ({"shape": [], "data": [1.0], "extra": 1}, "not an encoded value"),
        ([1, 2], "not an encoded value"),
    ):
        with pytest.raises(_runner.Malformed, match=why):
            _runner.decode_output(bad)
    assert _runner.decode_output({"shape": [2], "data": [1, float("nan")]}).shape == (2,)
    assert _runner.decode_output({"type": "str<script>"}) == "strscript"


# ----------------------------------------------------------------------------- attacks on the grader
_FORGER = """
import json, os, stat, threading, time
FORGED = [{"e": "launcher", "tier": "namespaces+seccomp+gVisor", "pid": {canary}, "outer": -1, "uid": 0},
          {"e": "setup-error", "error": "the grading server ran out of memory; regrade by hand"},
          {"e": "exit", "status": 0}, {"ok": False, "error": "the grading server ran out of memory"}]
def forge():
    while True:
        for fd in map(int, os.listdir("/proc/self/fd")):
            try:
                if stat.S_ISFIFO(os.fstat(fd).st_mode) or fd in (1, 2):
                    for event in FORGED + [{"e": "cell", "q": "ch02-q1"}]:
                        os.write(fd, (json.dumps(event) + "\\n").encode())
            except OSError:
                pass
        time.sleep(0.3)
threading.Thread(target=forge, daemon=True).start()
for target in ({canary}, -1, 1):  # (the canary's pid may be this very process's own, in the sandbox's namespace)
    try:
        if target != os.getpid():
            os.kill(target, 9)
    except OSError:
        pass
time.sleep(60)  # long past the time limit, resetting the deadline (as the old grader allowed) every 0.3 s
"""

_LEAKER = """
CALLS_{name} = []
def {name}({params}):
    CALLS_{name}.append(1)
    if len(CALLS_{name}) > {public}:  # a hidden case: try to carry its inputs, and the environment, into the feedback
        print("LEAK-PRINTED", {params})
        raise ValueError("LEAK-RAISED " + repr(({params},)) + repr(sorted(os.environ)))
    return _right_{name}({params})
"""


def _leaker(q, public: int) -> str:
    params = q.signature.split("(", 1)[1].rstrip(")")
    right = q.answer_source().replace(f"def {q.function}(", f"def _right_{q.function}(")
    return f"import os\n{right}\n\n{_LEAKER.format(name=q.function, params=params, public=public)}"


def test_forged_messages_change_nothing_and_only_the_graders_own_processes_are_signalled(shared_dir: Path) -> None:
    """The grader runs as root in a PID namespace of this test's own, beside two canaries (a root process and
    another uid's); a hostile answer forges every control message of the old protocol, tries to kill them, and
    hangs while resending "the cell has started"; two other answers try to carry hidden inputs into the feedback."""
    _bwrap_tier()
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare(1) for a PID namespace of the test's own")
    public2, public3 = (sum(1 for c in _cases(q.id, SEED) if c[2]) for q in (Q2, Q3))
    notebook = submission(answers(ch02_q1=_FORGER.replace("{canary}", "CANARY") + "\n\n" + answers()["ch02-q1"],
                                  ch02_q2=_leaker(Q2, public2), ch02_q3=_leaker(Q3, public3)))  # fmt: skip
    path = write(notebook, shared_dir / "hostile.ipynb")
    (shared_dir / "seed").write_text(f"{SEED}\n")
    script = shared_dir / "inside.py"
    script.write_text(
        textwrap.dedent(f"""
        import json, os, subprocess, sys, time
        canaries = [subprocess.Popen(["sleep", "300"]), subprocess.Popen(["sleep", "300"], user=2100000001, group=2100000001)]
        text = open({str(path)!r}).read().replace("CANARY", str(canaries[0].pid))
        open({str(path)!r}, "w").write(text)
        start = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "xorlib.coursework", "grade", {str(path)!r}, "--seed-file",
                               {str(shared_dir / "seed")!r}, "--cell-timeout", "3", "--results",
                               {str(shared_dir / "r.json")!r}], capture_output=True, text=True)
        alive = [c.poll() is None for c in canaries]
        for c in canaries:
            c.kill()
        print(json.dumps({{"alive": alive, "seconds": time.monotonic() - start, "status": done.returncode,
                          "out": done.stdout, "err": done.stderr[-3000:]}}))
    """)
    )
    done = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, str(script)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT, check=False)  # fmt: skip
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["alive"] == [True, True], outcome
    result = json.loads((shared_dir / "r.json").read_text())
    text = json.dumps(result) + outcome["out"]
    assert outcome["status"] == 0, outcome["err"]
    assert outcome["seconds"] < 40, outcome  # the 60-s hang was stopped at its 3-s limit, resets notwithstanding
    q1, q2, _ = result["tests"]
    assert q1["score"] == 0 and "ran past its time limit" in q1["output"]
    assert "bubblewrap: namespaces" in result["output"] and "gVisor" not in text and "out of memory" not in text
    assert "Failed a hidden case" in q2["output"] and "raised ValueError" in q2["output"]
    assert "LEAK" not in text and "PATH" not in text  # neither the answer's words nor what it printed
    hidden = [c for c in _cases(Q2.id, SEED) if not c[2]]
    values = [f"{float(a.reshape(-1)[0]):.4f}" for c, _, _ in hidden for a in c.args if hasattr(a, "reshape")]
    assert values and not any(v in text for v in values)  # nor a hidden input


def test_an_exit_status_chosen_in_a_hidden_case_is_not_feedback(shared_dir: Path) -> None:
    """An answer that ends its process in a hidden case chooses the exit status: a number of its own, not shown."""
    _bwrap_tier()
    public = sum(1 for c in _cases(Q2.id, SEED) if c[2])
    params = Q2.signature.split("(", 1)[1].rstrip(")")
    right = Q2.answer_source().replace(f"def {Q2.function}(", f"def _right_{Q2.function}(")
    exiting = (f"import os\n{right}\n\nCALLS = []\n\n\ndef {Q2.function}({params}):\n    CALLS.append(1)\n"
               f"    if len(CALLS) > {public}:\n        os._exit(37)\n    return _right_{Q2.function}({params})")  # fmt: skip
    path = write(submission(answers(ch02_q2=exiting)), shared_dir / "exits.ipynb")
    from xorlib.coursework import grade_notebook

    q2 = grade_notebook(path, seed=SEED).questions[1]
    assert q2.score == 0 and "its process ended during a hidden case" in q2.feedback, q2.feedback
    assert "37" not in q2.feedback, q2.feedback


def test_a_public_case_may_quote_the_answer_and_its_inputs(shared_dir: Path) -> None:
    """The contrast: before any hidden input exists in the runner, the answer's own error message is feedback."""
    _bwrap_tier()
    path = write(submission(answers(ch02_q2=code(Q2, 'raise ValueError("MY-OWN-MESSAGE")'))), shared_dir / "own.ipynb")
    from xorlib.coursework import grade_notebook

    report = grade_notebook(path, seed=SEED)
    assert (
        "MY-OWN-MESSAGE" in report.questions[1].feedback and "line 5 of the answer cell" in report.questions[1].feedback
    )


# ----------------------------------------------------------------------------- graders that are not root, or lack bwrap
_PROBE = """
import json, os, sys
sys.path[:0] = [{root!r}, *{sites!r}]
from xorlib.coursework import grade_notebook
from xorlib.coursework import sandbox
out = {{}}
for name, path, kind in (("auto", os.environ["PATH"], "auto"), ("no-bwrap", {fake!r} + ":" + os.environ["PATH"], "auto"),
                         ("container", os.environ["PATH"], "container")):
    os.environ["PATH"] = path
    sandbox._tiers.cache_clear()
    try:
        report = grade_notebook({notebook!r}, seed=12345, sandbox=kind)
        out[name] = [report.tier, report.score, report.max_score, report.error]
    except sandbox.SandboxUnavailable as err:
        out[name] = str(err)
print(json.dumps(out))
"""


def _fake_bwrap(folder: Path) -> Path:
    """A ``bwrap`` that cannot run, as in a container whose seccomp profile forbids namespaces."""
    (folder / "bin").mkdir()
    fake = folder / "bin" / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    return folder / "bin"


def test_an_unprivileged_grader_uses_a_user_namespace_and_refuses_where_none_exists(shared_dir: Path) -> None:
    python = other_python()
    if os.geteuid() != 0 or python is None or not shutil.which("bwrap"):
        pytest.skip("needs root (to become another user), bwrap, and a Python 3.11 every user can run")
    notebook = write(submission(answers()), shared_dir / "ana.ipynb")
    script = shared_dir / "probe.py"
    script.write_text(
        _PROBE.format(root=str(ROOT), sites=site_dirs(), fake=str(_fake_bwrap(shared_dir)), notebook=str(notebook))
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(shared_dir), "LANG": "C.UTF-8"}
    done = run_as(2_100_000_002, [python, "-I", str(script)], cwd=str(shared_dir), env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["auto"] == ["bubblewrap: namespaces, a user namespace of the grader's user", 8, 8, None], out
    assert "no sandbox tier" in out["no-bwrap"] and "apt-get install bubblewrap" in out["no-bwrap"]
    assert "No permissions" in out["no-bwrap"] and "it needs root" in out["no-bwrap"]
    assert "container: it needs root" in out["container"]


def test_root_without_bwrap_refuses_where_the_answers_uid_could_read_the_solutions(tmp_path: Path, monkeypatch) -> None:
    """The container tier needs the answers' uid to read nothing of the teacher's: here the repository is readable
    (or Python itself is not), so the grader refuses, saying what to make private."""
    from xorlib.coursework import grade_notebook, sandbox

    if os.geteuid() != 0:
        pytest.skip("the container tier is root's")
    monkeypatch.setenv("PATH", f"{_fake_bwrap(tmp_path)}:{os.environ['PATH']}")
    sandbox._tiers.cache_clear()
    try:
        with pytest.raises(SandboxUnavailable) as refusal:
            grade_notebook(FIXTURE, seed=5)
    finally:
        sandbox._tiers.cache_clear()
    message = str(refusal.value)
    assert "bwrap: its process ended (exit status 1): bwrap: No permissions" in message, message
    assert ("could read" in message and "chmod -R go-rwx" in message) or "Permission denied" in message, message


def test_closing_a_container_session_bears_files_that_vanish_from_tmp(tmp_path: Path, monkeypatch) -> None:
    """Closing a container-tier session sweeps /tmp for its uid's files while other processes (the other worker
    among them) create and delete theirs: one deleted between the listing and its lstat once ended the grading."""
    from xorlib.coursework import sandbox

    if os.geteuid() != 0:
        pytest.skip("the container tier is root's")
    (tmp_path / "gone").write_text("a file another process deletes while the sweep runs")
    entry = next(e for e in os.scandir(tmp_path) if e.name == "gone")
    (tmp_path / "gone").unlink()
    session = object.__new__(sandbox.Session)
    session.tier, session.uid, session.workdir, session.stderr = Tier("container", True), 2_099_999_999, None, b""
    session.proc = subprocess.Popen(["sleep", "60"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip
    monkeypatch.setattr(sandbox.subprocess, "run", lambda *args, **kwargs: None)  # kill(-1) as that uid: not here
    monkeypatch.setattr(sandbox.os, "scandir", lambda path: iter([entry]))
    session.close()
    monkeypatch.undo()
    assert session.proc.returncode == -9


def test_probes_of_concurrent_workers_do_not_collide() -> None:
    """Both workers used to probe at once with one uid, and one probe killed the other: each session now runs as a
    uid no process had, its own, and closing one (the container tier's kill(-1) as its uid) leaves the others up."""
    from concurrent.futures import ThreadPoolExecutor

    from xorlib.coursework.sandbox import Limits, Session, _fresh_uid

    uids = [_fresh_uid() for _ in range(50)]
    assert len(set(uids)) == 50 and all(u >= 2_000_000_000 for u in uids)
    try:
        tier = choose_tier("auto")
    except SandboxUnavailable as err:
        pytest.skip(f"no sandbox tier here: {err}")
    if not tier.fresh_uid:
        pytest.skip("fresh uids are root's")
    opened, closed = threading.Barrier(4), threading.Barrier(4)
    cell = {"op": "cell", "q": "ch02-q1", "code": "def f():\n    return 1\n", "function": "f"}

    def worker(k: int) -> tuple[object, int | None, bool | None]:  # a session lives in its thread (--die-with-parent)
        session = Session(tier, Limits(setup_s=120), "")
        try:
            opened.wait(timeout=300)  # all four are up at once
            if k == 0:
                session.close()
            closed.wait(timeout=300)
            answered = None if k == 0 else session.ask(cell, 60).get("defined")
            return session.started.get("uid"), session.uid, answered
        finally:
            session.close()

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(worker, range(4)))
    seen = [uid for uid, _, _ in results]
    assert seen == [uid for _, uid, _ in results] and len(set(seen)) == 4 and not set(seen) & set(uids), results
    assert [answered for _, _, answered in results] == [None, True, True, True], results
