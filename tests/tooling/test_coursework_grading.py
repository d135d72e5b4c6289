"""Grading a class through the command line: correct, wrong, copied and hostile submissions, a roster, written
marks and a teacher's config, on 2 workers in the best sandbox tier of the machine.

The class is graded once (a module fixture) and each test reads what it needs: the exit status and the list of
what was not graded, the gradebook, the feedback pages, the Gradescope results, the similarity report, and the
traces the hostile answers tried to leave (files deleted or edited, processes left behind). Time limits only
bound runaway cells; no test asserts a duration.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import time
from dataclasses import asdict
from pathlib import Path

import jupytext
import nbformat
import pytest
from _classroom import FIXTURE, Q1, Q2, Q3, ROOT, answers, code, hostile, submission, write

from xorlib.coursework import grade_notebook
from xorlib.coursework.__main__ import main
from xorlib.coursework.bank import CHAPTERS, chapter_questions, get_question
from xorlib.coursework.gradebook import MarksError, read_marks
from xorlib.coursework.questions import AutoQuestion
from xorlib.coursework.render import student_notebook, sync_chapter
from xorlib.coursework.sandbox import SandboxUnavailable

CELL_S = "5"  # bounds the runaway cells; every honest cell here runs in milliseconds
GUARDED = ROOT / "xorlib" / "population.py"  # a source file a hostile answer tries to edit
MARKER = "98765"  # in the command line of the processes a hostile answer tries to leave behind
CH05 = chapter_questions("ch05", AutoQuestion)
#: An answer that writes its own reply, a 400-digit integer, on every pipe it holds (the runner's channel among them).
FORGED_REPLY = """import gc, os, stat
request = next(o for o in gc.get_objects() if isinstance(o, dict) and o.get("op") == "case" and "id" in o)
line = ('{"id": "%s", "value": {"shape": [], "data": [%s]}}\\n' % (request["id"], "9" * 400)).encode()
for fd in map(int, os.listdir('/proc/self/fd')):
    try:
        if fd > 2 and stat.S_ISFIFO(os.fstat(fd).st_mode):
            os.write(fd, line)
    except OSError:
        pass
return 10**400"""
#: Honest answers that are not the book's solution (a class copying the book is flagged, rightly).
OWN = {
    "ch02-q1": code(Q1, "i, j = pair\nalpha = torch.softmax(queries @ codes.T, dim=-1)\nrows = []\nfor h in range(2):\n"
                    "    a, b = alpha[h], alpha[1 - h]\n    g = 4.0 * (a * (b @ b) + 2.0 * (a @ b) * b - 2.0 * a * b * b) - 2.0 * b\n"
                    "    g[i] = g[i] - 2.0 * b[j]\n    g[j] = g[j] - 2.0 * b[i]\n"
                    "    rows.append((a * (g - torch.dot(a, g))) @ codes)\nreturn torch.stack(rows)"),
    "ch02-q2": code(Q2, "zero = torch.zeros(2, codes.shape[1], dtype=codes.dtype)\nreturn -lr * tied_gradient(zero, codes, pair)"),
    "ch02-q3": code(Q3, "u, v = pair\nmask = torch.ones_like(weights, dtype=torch.bool)\nmask[[u, v]] = False\n"
                    "s = weights[mask].sum()\ngap = abs(float(weights[u] - weights[v]))\n"
                    "return max(32 * float(s) ** 2 * (1 - float(s)) ** 2, 2 * (gap + float(s)) ** 4)"),
}  # fmt: skip


def _tier() -> str:
    try:
        return grade_notebook(FIXTURE.with_suffix(".nothing"), practice=True).tier
    except SandboxUnavailable as err:
        pytest.skip(f"no sandbox tier on this machine: {err}")


def _class(sentinel: Path) -> dict[str, tuple[nbformat.NotebookNode, int]]:
    """``{file name: (notebook, expected auto points)}`` with the config's 4 points for ch02-q1."""
    sign = Q1.answer_source().replace("def tied_gradient(", "def tied_gradient_right(") + "\n\n\n" + code(
        Q1, "return -tied_gradient_right(queries, codes, pair)")  # fmt: skip
    no_centring = code(
        Q2, "d = codes.shape[0]\nq = (2.0 * lr / d**2) * (codes[pair[0]] + codes[pair[1]])\nreturn torch.stack([q, q])"
    )
    mean = code(
        Q3,
        "a = weights\nu, v = pair\nm4 = 3 * (a @ a) ** 2 - 2 * (a**4).sum()\nreturn float(0.5 * (2 - 4 * (a @ a + 2 * a[u] * a[v]) + 4 * m4))",
    )
    copied = {  # s03's answers, renamed, commented and reformatted
        "ch02-q1": sign.replace("tied_gradient_right", "grad_ok")
        .replace("weights", "w_")
        .replace("    ", "    # copied\n    ", 1),
        "ch02-q2": no_centring.replace("q = ", "step_ = ").replace("[q, q]", "[step_, step_]"),
        "ch02-q3": mean.replace("m4", "fourth").replace("a = weights", "a = weights  # the weights"),
    }
    teacher = sync_chapter(_copy(FIXTURE, sentinel.parent / "02_fixture_chapter.md"))  # the book's own chapter
    book_download = jupytext.read(teacher.path)
    ch05 = student_notebook("ch05")
    autograd_q1 = code(CH05[0], "s = scores.clone().requires_grad_(True)\nw = torch.relu(s) / s.shape[-1]\n"
                       "return w.detach(), torch.autograd.grad(w, s, grad)[0]")  # fmt: skip
    spawn = f"import subprocess\nsubprocess.Popen(['sleep', '{MARKER}'], start_new_session=True)"
    vandal = (f"import os, shutil\nfor attack in (lambda: os.remove({str(sentinel / 'keep.txt')!r}), "
              f"lambda: shutil.rmtree({str(sentinel)!r}), lambda: open({str(GUARDED)!r}, 'a').write('# edited')):\n"
              "    try:\n        attack()\n    except OSError:\n        pass\n" + spawn)  # fmt: skip
    return {
        "s01_02_fixture_chapter.md": (submission(OWN), 9),
        "s02_02_fixture_chapter.ipynb": (submission(answers(), move_first="ch02-q3", drop_tag="ch02-q1"), 9),
        "s03_02_fixture_chapter.ipynb": (submission(answers(ch02_q1=sign, ch02_q2=no_centring, ch02_q3=mean)), 0),
        "s04_02_fixture_chapter.ipynb": (submission(copied), 0),
        "s05_02_fixture_chapter.ipynb": (
            submission(
                answers(
                    ch02_q1="def tied_gradient(queries, codes, pair)\n    return 0",
                    ch02_q2=code(Q2, "return (2.0 * lr / codes.shape[0] ** 2) * codes[pair[0]]"),
                    ch02_q3=code(Q3, 'return "0.5"'),
                )
            ),
            0,
        ),
        "s06_02_fixture_chapter.ipynb": (
            submission(
                answers(
                    ch02_q1="from xorlib.population import population_gradient\n\n\ndef tied_gradient(queries, codes, pair):\n"
                    '    return population_gradient(queries, codes, pair, heads="tied")',
                    ch02_q2="import sys, types\nfor name in ('xorlib.coursework', 'xorlib.coursework.feedback'):\n"
                    "    module = sys.modules.setdefault(name, types.ModuleType(name))\n"
                    "    setattr(module, 'check', lambda *args: None)\n\n\n" + Q2.student_source(),
                ),
                wrap_checks=True,
                points_1000=True,
            ),
            0,
        ),
        "s07_02_fixture_chapter.ipynb": (
            submission(
                answers(
                    ch02_q1=hostile(
                        "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True:\n    pass"
                    ),
                    ch02_q2=hostile(
                        "import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n"
                        "        time.sleep(0.05)",
                        Q2,
                    ),
                )
            ),
            3,
        ),
        "s08_02_fixture_chapter.ipynb": (
            submission(
                answers(
                    ch02_q1=hostile("hog = bytearray(50 * 2**30)"),
                    ch02_q3=hostile(
                        "with open('fill', 'wb') as handle:\n    while True:\n        handle.write(b'0' * 2**20)", Q3
                    ),
                )
            ),
            2,
        ),
        "s09_02_fixture_chapter.ipynb": (
            submission(
                answers(
                    ch02_q1=hostile(vandal),
                    ch02_q2=hostile("import os\nos.kill(os.getpid(), 9)", Q2),
                    ch02_q3=f"exec(open({str(ROOT / 'xorlib' / 'coursework' / 'bank' / 'ch02.py')!r}).read())",
                )
            ),
            4,
        ),
        "s10_02_fixture_chapter.ipynb": (
            submission(answers(ch02_q1=code(Q1, FORGED_REPLY), ch02_q3=code(Q3, "return float('nan')"))),
            2,
        ),
        "s11_02_fixture_chapter.ipynb": (submission({}, base=book_download), 9),
        "s12_ch05_exercises.ipynb": (
            submission({CH05[0].id: autograd_q1, CH05[1].id: CH05[1].answer_source()}, base=ch05),
            CH05[1].points,
        ),
    }


def _copy(source: Path, target: Path) -> Path:
    target.write_text(source.read_text())
    return target


ROSTER = [("s01", "Ana", "ana@uni.test"), ("s02", "Ben", "ben@uni.test"), ("s03", "Cam", "cam@uni.test"),
          ("s04", "Dee", "dee@uni.test"), ("s05", "Eve", "eve@uni.test"), ("s06", '=HYPERLINK("http://x")', "f@uni.test"),
          ("s07", "Gus", "gus@uni.test"), ("s08", "Hal", "hal@uni.test"), ("s09", "Ivy", "ivy@uni.test"),
          ("s10", "Jon", "jon@uni.test"), ("s11", "Kim", "kim@uni.test"), ("s12", "Lou", "lou@uni.test"),
          ("s13", "Max", "max@uni.test"), ("s14", "Ned", "ned@uni.test")]  # fmt: skip


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict:
    """Write the class, grade it once through the command line (2 workers), and read the outputs back."""
    tier = _tier()
    root = tmp_path_factory.mktemp("class")
    sentinel = root / "sentinel"
    sentinel.mkdir()
    (sentinel / "keep.txt").write_text("a file outside every sandbox")
    guarded_before = GUARDED.read_bytes()
    folder, out = root / "submissions", root / "grades"
    students = _class(sentinel)
    for name, (notebook, _) in students.items():
        write(notebook, folder / name)
    write(submission(answers(ch02_q1=Q1.student_source())), folder / "s01_LATE_02_fixture_chapter (1).ipynb",
          mtime=time.time() - 3600)  # an older file of s01: not graded  # fmt: skip
    (folder / "s13_02_fixture_chapter.ipynb").symlink_to(folder / "s01_02_fixture_chapter.md")
    write(submission(answers()), folder / "stranger.ipynb")
    with open(root / "roster.csv", "w", newline="") as handle:
        csv.writer(handle).writerows([("id", "name", "email"), *ROSTER])
    (root / "marks.csv").write_text("student,ch02-w1\ns01,3\ns03,1.5\n")
    (root / "grading.toml").write_text('similarity_threshold = 0.8\n[points]\n"ch02-q1" = 4\n[weights]\nch05 = 0.5\n')
    os.environ["XORLIB_HIDDEN_SEED"] = "424242"
    errors = io.StringIO()
    try:
        argv = ["grade-all", str(folder), "--out", str(out), "--roster", str(root / "roster.csv"), "--marks",
                str(root / "marks.csv"), "--config", str(root / "grading.toml"), "--cell-timeout", CELL_S]  # fmt: skip
        with contextlib.redirect_stderr(errors):
            status = main(argv)
    finally:
        del os.environ["XORLIB_HIDDEN_SEED"]
    guarded_after = GUARDED.read_bytes()
    if guarded_after != guarded_before:  # never expected; restore so that a broken sandbox cannot damage the repo
        GUARDED.write_bytes(guarded_before)
    with open(out / "gradebook.csv", newline="") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    results = {p.stem: json.loads(p.read_text()) for p in (out / "results").glob("*.json")}
    return {"status": status, "students": students, "rows": rows, "results": results, "out": out, "tier": tier,
            "sentinel": sentinel, "guarded_changed": guarded_after != guarded_before, "folder": folder, "root": root,
            "argv": argv, "stderr": errors.getvalue()}  # fmt: skip


def _feedback(graded: dict, student: str, qid: str) -> str:
    test = next(t for t in graded["results"][student]["tests"] if t["name"].startswith(qid))
    return f"{test['score']:g}/{test['max_score']} {test['output']}"


def test_every_student_gets_the_right_total_and_the_exit_status_lists_what_was_not_graded(graded, capsys) -> None:
    assert graded["status"] == 1  # the link and the stranger's file were not graded
    wrong = {name[:3]: (graded["rows"][name[:3]]["auto"], expected) for name, (_, expected) in graded["students"].items()
             if float(graded["rows"][name[:3]]["auto"]) != expected}  # fmt: skip
    assert not wrong, wrong
    assert graded["rows"]["s13"]["notes"] == "no submission" and graded["rows"]["s14"]["total"] == "0"


def test_the_gradebook_has_the_roster_the_marks_the_points_and_safe_cells(graded) -> None:
    rows = graded["rows"]
    first = rows["s01"]
    assert list(first)[:8] == ["student", "name", "email", "ch02-q1", "ch02-q2", "ch02-q3", "ch05-q1", "ch05-q2"]
    assert first["name"] == "Ana" and first["email"] == "ana@uni.test"
    ch05 = sum(q.points for q in CHAPTERS["ch05"])
    assert first["ch02-q1"] == "4" and first["ch02-w1"] == "3" and first["total"] == "12"
    assert first["max"] == f"{12 + ch05}" and float(first["grade"]) == pytest.approx(
        100 * 12 / (12 + 0.5 * ch05), abs=0.05
    )
    assert rows["s03"]["written"] == "1.5" and rows["s03"]["ch02-q1"] == "0"
    assert rows["s06"]["name"] == '\'=HYPERLINK("http://x")'  # a formula is shown as text, never evaluated
    assert "2 files for ch02: graded the latest, s01_02_fixture_chapter.md" in first["notes"]
    assert "ch02-q1: check cell was altered" in rows["s06"]["notes"] and "ch02-q1: stopped" in rows["s07"]["notes"]
    template = (graded["out"] / "written_marks_template.csv").read_text().splitlines()
    assert template[0] == "student,ch02-w1,ch05-w1" and "s01,3," in template


def test_what_was_not_graded_is_reported_by_name(graded) -> None:
    err = graded["stderr"]
    assert "2 notebook(s) NOT graded" in err
    assert "s13_02_fixture_chapter.ipynb: a symbolic link: refused" in err
    assert "stranger.ipynb: matches no student of the roster" in err


def test_gradescope_results_follow_the_autograder_format(graded) -> None:
    for result in graded["results"].values():
        assert {"score", "tests", "output", "visibility", "stdout_visibility"} <= set(result)
        for test in result["tests"]:
            assert {"name", "score", "max_score", "output", "visibility"} <= set(test)
            assert 0 <= test["score"] <= test["max_score"]
        assert result["score"] == sum(t["score"] for t in result["tests"])
        assert result["tests"] == [] or "sandbox: " in result["output"]


def test_feedback_pages_hold_every_diagnosis_escaped(graded) -> None:
    page = (graded["out"] / "feedback" / "s03.html").read_text()
    assert ("Diagnosis: wrong sign" in page and "Sandbox: bubblewrap" in page) or "Sandbox: container" in page
    markdown = (graded["out"] / "feedback" / "s05.md").read_text()
    assert "SyntaxError" in markdown and "```text" in markdown and "Sandbox: " in markdown


def test_feedback_keeps_the_diagnosis_of_known_mistakes(graded) -> None:
    assert "Diagnosis: wrong sign" in _feedback(graded, "s03", "ch02-q1")
    hidden = _feedback(graded, "s03", "ch02-q2")
    assert hidden.startswith("0/2 Failed a hidden case") and "dropped the centring term" in hidden
    assert "mean loss over the inputs" in _feedback(graded, "s03", "ch02-q3")
    assert "SyntaxError" in _feedback(graded, "s05", "ch02-q1")
    assert "wrong shape: expected (2, 6), got (6,)" in _feedback(graded, "s05", "ch02-q2")
    assert "not numbers" in _feedback(graded, "s05", "ch02-q3")
    assert "found by its function" in _feedback(graded, "s02", "ch02-q1")  # and the moved block scores
    assert "NaN or infinite" in _feedback(graded, "s10", "ch02-q3")


def test_the_cheats_score_zero(graded) -> None:
    assert graded["results"]["s06"]["score"] == 0
    assert "is not available while grading" in _feedback(graded, "s06", "ch02-q1")
    assert "check cell was altered" in _feedback(graded, "s06", "ch02-q3")
    assert sum(t["max_score"] for t in graded["results"]["s06"]["tests"]) == 9  # the bank's (and config's) points


def test_autograd_where_the_prompt_forbids_it_scores_zero_with_a_reason(graded) -> None:
    feedback = _feedback(graded, "s12", CH05[0].id)
    assert feedback.startswith("0/") and "without autograd, and the answer uses" in feedback
    assert "torch.autograd.grad is disabled here" in feedback


def test_huge_numbers_are_a_malformed_result_not_a_crash(graded) -> None:
    feedback = _feedback(graded, "s10", "ch02-q1")
    assert "malformed result (a number beyond the range of float64)" in feedback
    assert _feedback(graded, "s10", "ch02-q2").startswith("2/2 ")


def test_runaway_cells_are_stopped_and_the_rest_is_graded(graded) -> None:
    assert "ran past its time limit" in _feedback(graded, "s07", "ch02-q1")
    assert _feedback(graded, "s07", "ch02-q2").startswith("0/2 ")  # the fork bomb, held by RLIMIT_NPROC, then stopped
    assert _feedback(graded, "s07", "ch02-q3").startswith("3/3 ")
    assert "MemoryError" in _feedback(graded, "s08", "ch02-q1")
    disk = _feedback(graded, "s08", "ch02-q3")
    assert "No space left" in disk or "File too large" in disk, disk
    assert "killed by signal 9" in _feedback(graded, "s09", "ch02-q2")


def test_files_outside_the_sandbox_survive_and_sources_are_unchanged(graded) -> None:
    assert (graded["sentinel"] / "keep.txt").read_text() == "a file outside every sandbox"
    assert not graded["guarded_changed"]
    assert _feedback(graded, "s09", "ch02-q1").startswith("4/4 ")


def test_no_process_outlives_its_sandbox(graded) -> None:
    for _ in range(50):
        left = []
        for entry in os.listdir("/proc"):
            try:
                if entry.isdigit() and MARKER in Path(f"/proc/{entry}/cmdline").read_text():
                    left.append(entry)
            except OSError:
                continue
        if not left:
            break
        time.sleep(0.1)
    assert not left, f"processes left behind: {left}"


def test_solutions_and_other_submissions_are_out_of_reach(graded) -> None:
    assert "No such file or directory" in _feedback(graded, "s09", "ch02-q3")


def test_copies_and_the_books_own_download_are_flagged(graded) -> None:
    rows = graded["rows"]
    assert all(f"ch02-q{k}: the book's published solution" in rows["s11"]["notes"] for k in (1, 2, 3))
    assert "ch02-q1: like s04 (" in rows["s03"]["notes"] and "like s03 (" in rows["s04"]["notes"]
    assert "like" not in rows["s05"]["notes"] and "published" in rows["s02"]["notes"]
    assert "like" not in rows["s01"]["notes"] and "published" not in rows["s01"]["notes"]  # own work
    report = (graded["out"] / "similarity.md").read_text()
    assert "s03 and s04" in report and "ch02-q1: s11" in report


def test_only_regrades_one_student_and_keeps_the_others(graded) -> None:
    before = (graded["out"] / "gradebook.csv").read_text()
    os.environ["XORLIB_HIDDEN_SEED"] = "424242"
    try:
        status = main([*graded["argv"], "--only", "s10"])
    finally:
        del os.environ["XORLIB_HIDDEN_SEED"]
    assert status == 0  # s10's notebook was graded (the link and the stranger's file are not s10's)
    assert (graded["out"] / "gradebook.csv").read_text() == before


# ----------------------------------------------------------------------------- smaller cases, no class needed
def test_the_seed_rules_and_every_usage_error_get_a_message_not_a_traceback(tmp_path: Path, capsys) -> None:
    path = write(submission(answers()), tmp_path / "solo.ipynb")
    for argv, message in (
        (["grade", str(path), "--cell-timeout", "-1"], "must be > 0"),
        (["grade", str(path), "--memory-mb", "lots"], "expected an integer"),
        (["grade", str(path), "--sandbox", "docker"], "invalid choice"),
        (["grade-all", str(tmp_path), "--workers", "0"], "must be > 0"),
    ):
        with pytest.raises(SystemExit) as stop:
            main(argv)
        err = capsys.readouterr().err
        assert stop.value.code == 2 and message in err and "Traceback" not in err, err
    assert main(["grade", str(path)]) == 2
    assert "summative grading" in capsys.readouterr().err
    assert main(["grade-all", str(tmp_path / "missing"), "--practice"]) == 2
    assert "no such file or folder" in capsys.readouterr().err
    (tmp_path / "seed").write_text("0\n")
    assert main(["grade", str(path), "--seed-file", str(tmp_path / "seed")]) == 2
    assert "seed 0 is public" in capsys.readouterr().err


def test_a_seed_on_the_command_line_is_refused(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every process can read /proc/*/cmdline, so there is no --seed; nor is --seed taken as short for --seed-file."""
    path = write(submission(answers()), tmp_path / "solo.ipynb")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "5").write_text("5\n")  # what an abbreviated --seed-file would read
    for argv in (["grade", str(path), "--seed", "5"], ["grade-all", str(tmp_path), "--seed=5"],
                 ["autograder", "02", "--seed", "5", "--out", str(tmp_path / "a.zip")]):  # fmt: skip
        with pytest.raises(SystemExit) as stop:
            main(argv)
        err = capsys.readouterr().err
        assert stop.value.code == 2 and "unrecognized arguments: --seed" in err, err
    assert not (tmp_path / "a.zip").exists()


def test_grade_command_prints_the_feedback_and_writes_gradescope_results(tmp_path: Path, capsys) -> None:
    _tier()
    path = write(submission(answers(ch02_q3=Q3.student_source())), tmp_path / "solo.ipynb")
    (tmp_path / "seed").write_text("77\n")
    assert main(["grade", str(path), "--seed-file", str(tmp_path / "seed"), "--results", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert "Total 5/8" in out and "not implemented" in out
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["score"] == 5 and [t["score"] for t in result["tests"]] == [3, 2, 0]


def test_unreadable_unknown_and_linked_notebooks_are_reported_not_fatal(tmp_path: Path) -> None:
    _tier()
    (tmp_path / "broken.ipynb").write_text("{ not json")
    report = grade_notebook(tmp_path / "broken.ipynb", practice=True)
    assert report.error and "not a valid notebook" in report.error and report.score == 0
    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "nothing.ipynb")
    assert "no auto-graded questions" in grade_notebook(tmp_path / "nothing.ipynb", practice=True).error
    (tmp_path / "link.ipynb").symlink_to(tmp_path / "nothing.ipynb")
    assert "symbolic link: refused" in grade_notebook(tmp_path / "link.ipynb", practice=True).error


def test_a_runner_that_cannot_be_started_leaves_that_notebook_not_graded(tmp_path: Path, monkeypatch) -> None:
    """A failed fork (or exec) is that notebook's error, listed, never the end of the class's grading."""
    from xorlib.coursework import grading

    def no_fork(*args, **kwargs):
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(grading, "Session", no_fork)
    settings = grading.Grading(5, grading.Limits(), grading.Tier("unsandboxed", False))
    report = grading.grade_path(write(submission(answers()), tmp_path / "ana.ipynb"), "ana", settings)
    assert (
        report.error
        == "the sandbox did not start: its process could not be started ([Errno 11] Resource temporarily unavailable)"
        and report.score == 0
    )


def test_cells_python_cannot_parse_are_that_answers_problem_not_the_graders() -> None:
    """Deep nesting makes ast.parse raise RecursionError or MemoryError (not SyntaxError): one such cell once
    ended grade-all for the whole class, with a traceback and no gradebook."""
    from xorlib.coursework.feedback import autograd_used
    from xorlib.coursework.grading import locate
    from xorlib.coursework.similarity import fingerprint

    for deep in ("_x = 1" + "+1" * 200_000, "_x = " + "-" * 100_000 + "1"):
        notebook = submission(answers(ch02_q2=Q2.answer_source() + "\n\n" + deep), drop_tag="ch02-q1")
        assert locate(notebook, (Q1, Q2, Q3))["ch02-q1"].answer_index is not None  # found by its function
        assert autograd_used(deep) is None and fingerprint(deep)


def test_a_linked_folder_is_reported_not_passed_over(tmp_path: Path) -> None:
    """A student folder that is a link (to another student's, or outside the class) is refused, and listed."""
    from xorlib.coursework.gradebook import find_submissions

    write(submission(answers()), tmp_path / "outside" / "bob" / "02_fixture_chapter.ipynb")
    write(submission(answers()), tmp_path / "class" / "ana" / "02_fixture_chapter.ipynb")
    (tmp_path / "class" / "bob").symlink_to(tmp_path / "outside" / "bob")
    found, refused, _ = find_submissions(tmp_path / "class", None)
    assert [student for student, _ in found] == ["ana"]
    assert refused == [("bob", "a symbolic link: refused")]


def test_a_chapter_named_in_the_notebooks_metadata_is_escaped_in_the_feedback_pages() -> None:
    """The chapter comes from the submission's own metadata when it names one: text to escape, like its file name."""
    from xorlib.coursework.gradebook import html_page, markdown_page
    from xorlib.coursework.grading import GradeReport

    report = GradeReport("a.ipynb", "ana", "<img src=x onerror=alert(1)>", (), "container", error="no questions")
    assert "<img" not in markdown_page("ana", [report]) and "<img" not in html_page("ana", [report])


def test_marks_and_config_are_validated(tmp_path: Path) -> None:
    path = tmp_path / "marks.csv"
    path.write_text("student,ch02-w1,ch03-w1\nana,2,\nbo,,3\n")
    assert read_marks(path) == {"ana": {"ch02-w1": 2.0}, "bo": {"ch03-w1": 3.0}}
    for text, message in (
        ("student,ch02-q1\nana,3\n", "unknown written question"),
        ("student,ch02-w1\nana,4\n", r"'4' must be a number in \[0, 3\]"),
        ("student,ch02-w1\nana,good\n", "'good' must be a number"),
        ("student,ch02-w1\nana,1\nana,2\n", "appears twice"),
        ("name,ch02-w1\nana,1\n", "column"),
    ):
        path.write_text(text)
        with pytest.raises(MarksError, match=message):
            read_marks(path)
    from xorlib.coursework.gradebook import Config

    config = tmp_path / "c.toml"
    for text, message in (('[points]\n"ch99-q1" = 2\n', "unknown question"), ('[points]\n"ch02-q1" = 0\n', r"\[1, 1000\]"),
                          ("[weights]\nch02 = -1\n", ">= 0"), ("colour = 1\n", "unknown setting")):  # fmt: skip
        config.write_text(text)
        with pytest.raises(MarksError, match=message):
            Config.read(config)


def test_every_chapters_solutions_pass_in_the_sandbox() -> None:
    """One runner, every chapter's solutions and cases: what the answers import is in the grading build."""
    from xorlib.coursework.bank import CHAPTERS
    from xorlib.coursework.bank._common import SETUP
    from xorlib.coursework.grading import _cases, _got
    from xorlib.coursework.sandbox import Limits, Session, choose_tier

    _tier()
    session = Session(choose_tier("auto"), Limits(), SETUP)
    failed = []
    try:
        for chapter in CHAPTERS:
            for q in chapter_questions(chapter, AutoQuestion):
                cell = session.ask({"op": "cell", "q": q.id, "code": q.answer_source(), "function": q.function}, 60)
                assert cell["error"] is None and cell["defined"] is True, (q.id, cell)
                for case, expected, public in _cases(q.id, 5):
                    from xorlib.coursework._runner import encode_input
                    from xorlib.coursework.feedback import judge

                    request = {"op": "case", "q": q.id, "args": encode_input(tuple(case.args)),
                               "forbid_autograd": None if q.autograd else "forbidden"}  # fmt: skip
                    verdict = judge(q, case, _got(session.ask(request, 60), q, public), expected)
                    failed += [] if verdict.passed else [verdict.message]
    finally:
        session.close()
    assert not failed, failed[0]
    assert get_question("ch02-q1").points == 3


def test_reports_saved_with_the_former_question_counts_still_load(graded, tmp_path: Path) -> None:
    """Reports written before a question's result lost ``passed`` and ``total`` are read back for ``--only``."""
    from xorlib.coursework.gradebook import load_reports

    saved = sorted((graded["out"] / "reports").glob("*.json"))
    assert saved
    (tmp_path / "reports").mkdir()
    for path in saved:
        reports = json.loads(path.read_text())
        for report in reports:
            for question in report["questions"]:
                question.update(passed=1, total=2)
        (tmp_path / "reports" / path.name).write_text(json.dumps(reports))
    assert [asdict(r) for r in load_reports(tmp_path)] == [asdict(r) for r in load_reports(graded["out"])]
