"""Grading a class of 30 synthetic submissions (correct, wrong, partial, hostile) in the sandbox, with 2 workers.

The class is graded once (a module fixture, through the command line), and each test reads what it needs:
the scores, the feedback, the gradebook, the Gradescope results, and traces of the hostile submissions'
attempts (files they tried to delete or edit, processes they tried to leave behind). The hostile
submissions that try to damage files are generated only where the sandbox has namespaces (as root, with
``unshare``); elsewhere those tests are skipped. Time limits here only bound runaway cells; no test
asserts a duration.
"""

from __future__ import annotations

import copy
import csv
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from xorlib.coursework import ClassReport, Limits, grade_all, grade_notebook, read_marks
from xorlib.coursework.__main__ import main
from xorlib.coursework._launcher import _reachable, parse_mountinfo
from xorlib.coursework.bank import CHAPTERS, get_question
from xorlib.coursework.gradebook import MarksError
from xorlib.coursework.sandbox import _id_is_mapped, _sandbox_ids, probe, run_command, working_isolation
from xorlib.coursework.student import student_notebook

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "fixtures" / "coursework" / "02_fixture_chapter.md"
TIER = probe()
CELL_S = 4.0  # bounds the hanging cells; every honest cell here runs in milliseconds
Q1, Q2, Q3 = (get_question(f"ch02-q{k}") for k in (1, 2, 3))
GUARDED = ROOT / "xorlib" / "population.py"  # a source file a hostile answer tries to edit
MARKER = "98765"  # in the command line of the processes a hostile answer tries to leave behind
# RLIMIT_NPROC binds a fresh uid, or a user, but not root: a fork bomb is only played where it is bounded.
FORKS_BOUNDED = TIER == "namespaces" or os.geteuid() != 0


def _stub(q) -> str:
    return q.student_source()


def _code(q, body: str) -> str:
    """An answer cell: the question's def line and docstring, with ``body`` as its code."""
    head = q.student_source().split("    raise NotImplementedError")[0]
    return head + "\n".join("    " + line if line else "" for line in body.strip("\n").splitlines())


def _answers(**override: str) -> dict[str, str]:
    answers = {q.id: q.answer_source() for q in (Q1, Q2, Q3)}
    answers.update({k.replace("_", "-"): v for k, v in override.items()})
    return answers


def _hostile(prefix: str, q=Q1) -> str:
    """An answer cell that runs ``prefix`` (the attack) at import time, then defines the right function."""
    return prefix.strip("\n") + "\n\n\n" + q.answer_source()


def _class(sentinel: Path) -> dict[str, tuple[dict[str, str], dict, int]]:
    """``{student: (answer sources by question, notebook edits, expected total)}``: 30 students."""
    sign = _code(Q1, "return -tied_gradient_correct(queries, codes, pair)")
    sign = Q1.answer_source().replace("def tied_gradient(", "def tied_gradient_correct(") + "\n\n\n" + sign
    no_centring = _code(
        Q2, "d = codes.shape[0]\nq = (2.0 * lr / d**2) * (codes[pair[0]] + codes[pair[1]])\nreturn torch.stack([q, q])"
    )
    off_by_one = _code(
        Q2,
        "d = codes.shape[0]\ni, j = pair\n"
        "q = (2.0 * lr / (d - 1) ** 2) * (codes[i] + codes[j] - (2.0 / d) * codes.sum(0))\n"
        "return torch.stack([q, q])",
    )
    one_head = _code(
        Q2,
        "d = codes.shape[0]\nreturn (2.0 * lr / d**2) * (codes[pair[0]] + codes[pair[1]] - (2.0 / d) * codes.sum(0))",
    )
    mean = _code(
        Q3,
        "a = weights\nu, v = pair\nm4 = 3 * (a @ a) ** 2 - 2 * (a**4).sum()\n"
        "return float(0.5 * (2 - 4 * (a @ a + 2 * a[u] * a[v]) + 4 * m4))",
    )
    alternative = {
        "ch02-q2": _code(
            Q2,
            "zero = torch.zeros(2, codes.shape[1], dtype=codes.dtype)\nreturn -lr * tied_gradient(zero, codes, pair)",
        ),
        "ch02-q3": _code(
            Q3,
            "u, v = pair\nmask = torch.ones_like(weights, dtype=torch.bool)\nmask[[u, v]] = False\n"
            "s = weights[mask].sum()\ngap = abs(float(weights[u] - weights[v]))\n"
            "return max(32 * float(s) ** 2 * (1 - float(s)) ** 2, 2 * (gap + float(s)) ** 4)",
        ),
    }
    students: dict[str, tuple[dict[str, str], dict, int]] = {
        "s01-correct": (_answers(), {}, 8),
        "s02-correct-another-way": (_answers(**{k.replace("-", "_"): v for k, v in alternative.items()}), {}, 8),
        "s03-correct-lost-tags": (_answers(), {"drop_answer_tags": True}, 8),
        "s04-correct-scratch-cells": (_answers(), {"scratch": True}, 8),
        "s05-memory-bomb": (_answers(ch02_q1=_hostile("hog = bytearray(50 * 2**30)")), {}, 5),
        "s06-sign-error": (_answers(ch02_q1=sign), {}, 5),
        "s07-passes-public-fails-hidden": (_answers(ch02_q2=no_centring), {}, 6),
        "s08-mean-not-max": (_answers(ch02_q3=mean), {}, 5),
        "s09-off-by-one": (_answers(ch02_q2=off_by_one), {}, 6),
        "s10-wrong-shape": (_answers(ch02_q2=one_head), {}, 6),
        "s11-syntax-error": (_answers(ch02_q1="def tied_gradient(queries, codes, pair)\n    return 0"), {}, 5),
        "s12-returns-a-string": (_answers(ch02_q3=_code(Q3, 'return "0.5"')), {}, 5),
        "s13-only-q1": (_answers(ch02_q2=_stub(Q2), ch02_q3=_stub(Q3)), {}, 3),
        "s14-only-q3": (_answers(ch02_q1=_stub(Q1), ch02_q2=_stub(Q2)), {}, 3),
        "s15-q1-and-q2": (_answers(ch02_q3=_stub(Q3)), {}, 5),
        "s16-blank": (_answers(ch02_q1=_stub(Q1), ch02_q2=_stub(Q2), ch02_q3=_stub(Q3)), {}, 0),
        "s17-deleted-an-answer-cell": (_answers(), {"delete_answer": "ch02-q2"}, 6),
        # The four cheats of the issue.
        "s18-imports-the-reference": (
            _answers(
                ch02_q1="from xorlib.population import population_gradient\n\n\ndef tied_gradient(queries, codes, pair):\n"
                '    return population_gradient(queries, codes, pair, heads="tied")',
                ch02_q2=_code(
                    Q2,
                    "from xorlib.population import population_gradient\n"
                    "zero = torch.zeros(2, codes.shape[1], dtype=codes.dtype)\n"
                    'return -lr * population_gradient(zero, codes, pair, heads="tied")',
                ),
                ch02_q3=_code(
                    Q3,
                    "import xorlib.certify\n"
                    "w = torch.stack([weights, weights])\n"
                    'return float(xorlib.certify.worst_case_loss(w, pair, heads="tied").value)',
                ),
            ),
            {},
            0,
        ),
        "s19-patches-the-checks": (
            _answers(
                ch02_q1="import sys\nimport types\n\nfor name in ('xorlib.coursework', 'xorlib.coursework.feedback'):\n"
                "    try:\n        module = __import__(name, fromlist=['check'])\n    except ImportError:\n"
                "        module = sys.modules.setdefault(name, types.ModuleType(name))\n"
                "    setattr(module, 'check', lambda *args, **kwargs: None)\n"
                "    setattr(module, 'judge', lambda *args, **kwargs: True)\n\n\n" + _stub(Q1),
                ch02_q2=_stub(Q2),
                ch02_q3=_stub(Q3),
            ),
            {},
            0,
        ),
        "s20-try-except-around-checks": (
            _answers(ch02_q1=_stub(Q1), ch02_q2=_stub(Q2), ch02_q3=_stub(Q3)),
            {"wrap_checks": True},
            0,
        ),
        "s21-points-1000": (_answers(), {"points_1000": True}, 0),
        # Escapes: each is contained, and the other questions are still graded.
        "s22-hangs-and-ignores-sigint": (
            _answers(
                ch02_q1=_hostile(
                    "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                    "while True:\n    pass"
                )
            ),
            {},
            5,
        ),
        "s23-kills-its-kernel": (_answers(ch02_q1=_hostile("import os\nos.kill(os.getpid(), 9)")), {}, 5),
        "s24-fork-bomb": (
            _answers(
                ch02_q1=_hostile(
                    "import os\nimport time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n"
                    "        time.sleep(0.05)"
                )
            ),
            {},
            5,
        ),
        "s25-fills-the-disk": (
            _answers(
                ch02_q1=_hostile(
                    "with open('fill', 'wb') as handle:\n    while True:\n        handle.write(b'0' * 2**20)"
                )
            ),
            {},
            5,
        ),
        "s26-signals-its-parent": (
            _answers(
                ch02_q1=_hostile(
                    "import os\nimport signal\ntry:\n    os.kill(os.getppid(), signal.SIGKILL)\nexcept OSError:\n    pass"
                )
            ),
            {},
            # Namespaces: the parent is init, owned by root, and the signal is refused. A process group: the parent
            # is the launcher, which dies, and takes the runner with it (that question stops, the rest is graded).
            8 if TIER == "namespaces" else 5,
        ),
    }
    if not FORKS_BOUNDED:
        del students["s24-fork-bomb"]
    if TIER == "namespaces":  # the attacks on files run only where the sandbox can stop them
        students["s27-deletes-files-outside"] = (
            _answers(
                ch02_q1=_hostile(
                    f"import os\nimport shutil\nfor attack in (lambda: os.remove({str(sentinel / 'keep.txt')!r}),\n"
                    f"               lambda: shutil.rmtree({str(sentinel)!r})):\n"
                    "    try:\n        attack()\n    except OSError:\n        pass"
                )
            ),
            {},
            8,
        )
        students["s28-edits-xorlib-sources"] = (
            _answers(
                ch02_q1=_hostile(
                    "import xorlib.task\n"
                    f"for target in ({str(GUARDED)!r}, xorlib.task.__file__):\n"
                    "    try:\n        with open(target, 'a') as handle:\n            handle.write('# edited by a student\\n')\n"
                    "    except OSError:\n        pass\nxorlib.task.all_inputs = None"
                )
            ),
            {},
            8,
        )
        students["s29-leaves-processes-running"] = (
            _answers(
                ch02_q1=_hostile(
                    f"import os\nimport subprocess\nsubprocess.Popen(['sleep', '{MARKER}'], start_new_session=True)\n"
                    f"if os.fork() == 0:\n    os.setsid()\n    os.execvp('sleep', ['sleep', '{MARKER}'])"
                )
            ),
            {},
            8,
        )
        students["s30-reads-the-solutions"] = (
            _answers(
                ch02_q1=f"exec(open({str(ROOT / 'xorlib' / 'coursework' / 'bank' / 'ch02.py')!r}).read())",
                ch02_q2=f"import glob\nfound = glob.glob({str(sentinel.parent)!r} + '/**/*.ipynb', recursive=True)\n"
                + _stub(Q2),
                ch02_q3=_stub(Q3),
            ),
            {},
            0,
        )
    return students


def _submission(base: nbformat.NotebookNode, answers: dict[str, str], edits: dict) -> nbformat.NotebookNode:
    notebook = copy.deepcopy(base)
    cells = []
    for cell in notebook.cells:
        tags = cell.metadata.get("tags", [])
        qid = next((t.split("-", 1)[1] for t in tags if t.startswith(("answer-", "check-"))), None)
        if qid and f"answer-{qid}" in tags:
            if edits.get("delete_answer") == qid:
                continue
            cell.source = answers[qid]
            if edits.get("drop_answer_tags"):
                cell.metadata["tags"] = []
            cells.append(cell)
            if edits.get("scratch"):
                cells.append(nbformat.v4.new_code_cell("print('scratch work')\nraise ValueError('a scratch error')"))
            continue
        if qid and f"check-{qid}" in tags:
            if edits.get("wrap_checks"):
                cell.source = f"try:\n    {cell.source}\nexcept Exception:\n    pass"
            if edits.get("points_1000"):
                cell.source += "  # points: 1000"
        cells.append(cell)
    notebook.cells = cells
    return notebook


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict:
    """Generate the class, grade it once with 2 workers through the command line, and read the outputs back."""
    root = tmp_path_factory.mktemp("class")
    sentinel = root / "sentinel"
    sentinel.mkdir()
    (sentinel / "keep.txt").write_text("a file outside every sandbox")
    guarded_before = GUARDED.read_bytes()
    base = student_notebook(FIXTURE).notebook
    folder, out = root / "submissions", root / "grades"
    folder.mkdir()
    students = _class(sentinel)
    for student, (answers, edits, _) in students.items():
        nbformat.write(_submission(base, answers, edits), folder / f"{student}.ipynb")
    marks = root / "marks.csv"
    marks.write_text("student,ch02-w1\ns01-correct,3\ns06-sign-error,1.5\n")
    start = time.monotonic()
    status = main(["grade-all", str(folder), "--out", str(out), "--marks", str(marks), "--cell-timeout", str(CELL_S)])
    seconds = time.monotonic() - start
    print(f"\ngraded {len(students)} submissions in {seconds:.1f} s on 2 workers (sandbox tier: {TIER})")
    guarded_after = GUARDED.read_bytes()
    if guarded_after != guarded_before:  # never expected; restore so that a broken sandbox cannot damage the repo
        GUARDED.write_bytes(guarded_before)
    results = {r["extra_data"]["student"]: r for r in json.loads((out / "results.json").read_text())}
    with open(out / "gradebook.csv", newline="") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    return {
        "status": status,
        "students": students,
        "results": results,
        "rows": rows,
        "out": out,
        "sentinel": sentinel,
        "guarded_changed": guarded_after != guarded_before,
        "folder": folder,
    }


def _feedback(graded: dict, student: str, qid: str) -> str:
    test = next(t for t in graded["results"][student]["tests"] if t["name"].startswith(qid))
    return f"{test['score']}/{test['max_score']} {test['output']}"


def test_every_student_gets_the_right_total(graded: dict) -> None:
    assert graded["status"] == 0
    wrong = {
        s: (graded["results"][s]["score"], expected)
        for s, (_, _, expected) in graded["students"].items()
        if graded["results"][s]["score"]
        != expected + (3 if s == "s01-correct" else 1.5 if s == "s06-sign-error" else 0)
    }
    assert not wrong, wrong


def test_the_gradebook_has_a_row_per_student_and_a_column_per_question(graded: dict) -> None:
    rows = graded["rows"]
    assert sorted(rows) == sorted(graded["students"])
    first = rows["s01-correct"]
    assert list(first)[:6] == ["student", "ch02-q1", "ch02-q2", "ch02-q3", "ch02-w1", "auto"]
    assert first["auto"] == "8" and first["written"] == "3" and first["total"] == "11" and first["max"] == "11"
    assert rows["s06-sign-error"]["ch02-q1"] == "0" and rows["s06-sign-error"]["written"] == "1.5"
    assert rows["s16-blank"]["ch02-w1"] == "" and rows["s16-blank"]["total"] == "0"
    assert "ch02-q1: check cell was altered" in rows["s21-points-1000"]["notes"]
    assert "ch02-q1: stopped" in rows["s22-hangs-and-ignores-sigint"]["notes"]
    template = (graded["out"] / "written_marks_template.csv").read_text().splitlines()
    assert template[0] == "student,ch02-w1" and "s01-correct,3" in template and "s16-blank," in template


def test_gradescope_results_follow_the_autograder_format(graded: dict) -> None:
    for student, result in graded["results"].items():
        per_student = json.loads((graded["out"] / "results" / f"{student}.json").read_text())
        assert per_student == result
        assert {"score", "tests", "output", "visibility"} <= set(result)
        for test in result["tests"]:
            assert {"name", "score", "max_score", "output", "visibility"} <= set(test)
            assert 0 <= test["score"] <= test["max_score"]
        assert result["score"] == sum(t["score"] for t in result["tests"])


def test_feedback_keeps_the_diagnosis_of_known_mistakes(graded: dict) -> None:
    assert "Diagnosis: wrong sign" in _feedback(graded, "s06-sign-error", "ch02-q1")
    hidden = _feedback(graded, "s07-passes-public-fails-hidden", "ch02-q2")
    assert hidden.startswith("0/2 Failed a hidden case") and "dropped the centring term" in hidden
    assert "(d - 1)^2 where d^2 belongs" in _feedback(graded, "s09-off-by-one", "ch02-q2")
    assert "wrong shape: expected (2, 6), got (6,)" in _feedback(graded, "s10-wrong-shape", "ch02-q2")
    assert "mean loss over the inputs" in _feedback(graded, "s08-mean-not-max", "ch02-q3")
    assert "SyntaxError" in _feedback(graded, "s11-syntax-error", "ch02-q1")
    assert "not numbers" in _feedback(graded, "s12-returns-a-string", "ch02-q3")
    assert "not implemented" in _feedback(graded, "s16-blank", "ch02-q1")
    assert "No answer cell" in _feedback(graded, "s17-deleted-an-answer-cell", "ch02-q2")
    assert "found by its function" in _feedback(graded, "s03-correct-lost-tags", "ch02-q1")


def test_the_four_cheats_of_the_issue_score_zero(graded: dict) -> None:
    for student in (
        "s18-imports-the-reference",
        "s19-patches-the-checks",
        "s20-try-except-around-checks",
        "s21-points-1000",
    ):
        result = graded["results"][student]
        assert result["score"] == 0 and sum(t["max_score"] for t in result["tests"]) == 8, student
    assert "is not available while grading" in _feedback(graded, "s18-imports-the-reference", "ch02-q1")
    assert "check cell was altered" in _feedback(graded, "s20-try-except-around-checks", "ch02-q1")
    points = _feedback(graded, "s21-points-1000", "ch02-q1")
    assert points.startswith("0/3") and "check cell was altered" in points and "Passed all" in points


def test_runaway_cells_are_stopped_and_reported_and_the_rest_is_graded(graded: dict) -> None:
    assert "ran past" in _feedback(graded, "s22-hangs-and-ignores-sigint", "ch02-q1")
    assert "killed by signal 9" in _feedback(graded, "s23-kills-its-kernel", "ch02-q1")
    assert not FORKS_BOUNDED or _feedback(graded, "s24-fork-bomb", "ch02-q1").startswith("0/3 ")
    assert "MemoryError" in _feedback(graded, "s05-memory-bomb", "ch02-q1")
    disk = _feedback(graded, "s25-fills-the-disk", "ch02-q1")
    assert "signal 25" in disk or "No space left" in disk or "File too large" in disk, disk
    for student in ("s22-hangs-and-ignores-sigint", "s23-kills-its-kernel", "s24-fork-bomb", "s25-fills-the-disk"):
        if student not in graded["students"]:
            continue
        assert _feedback(graded, student, "ch02-q2").startswith("2/2 "), student
        assert _feedback(graded, student, "ch02-q3").startswith("3/3 "), student


def test_the_sandbox_is_the_strongest_tier_available(graded: dict) -> None:
    output = graded["results"]["s01-correct"]["output"]
    if os.geteuid() == 0:
        assert TIER == "namespaces" or pytest.skip("namespaces are not available here")
        fresh_ids = _sandbox_ids(0) != (None, None)  # root of a user namespace may have no other uid
        assert ("namespaces, uid 19" if fresh_ids else "namespaces, same user") in output
    else:  # not root: namespaces inside a user namespace where the kernel allows it, else a process group
        assert f"{TIER}, same user" in output


def _needs_namespaces() -> None:
    if TIER != "namespaces":
        pytest.skip("the attacks on files and processes are only generated where the sandbox has namespaces")


def test_files_outside_the_sandbox_survive_and_sources_are_unchanged(graded: dict) -> None:
    _needs_namespaces()
    assert (graded["sentinel"] / "keep.txt").read_text() == "a file outside every sandbox"
    assert not graded["guarded_changed"]
    assert graded["results"]["s27-deletes-files-outside"]["score"] == 8
    assert graded["results"]["s28-edits-xorlib-sources"]["score"] == 8
    assert hashlib.sha256(GUARDED.read_bytes()).hexdigest()  # still readable, and the class after s28 graded right


def test_no_process_outlives_its_sandbox(graded: dict) -> None:
    _needs_namespaces()
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


def test_solutions_and_other_submissions_are_out_of_reach(graded: dict) -> None:
    _needs_namespaces()
    assert graded["results"]["s30-reads-the-solutions"]["score"] == 0
    assert "No such file or directory" in _feedback(graded, "s30-reads-the-solutions", "ch02-q1")


# ----------------------------------------------------------------------------- smaller cases, no class needed
def test_every_chapters_solutions_score_full_marks_in_the_sandbox(tmp_path: Path) -> None:
    template = FIXTURE.read_text()
    folder = tmp_path / "submissions"
    for chapter in CHAPTERS:
        source = tmp_path / f"{chapter[2:]}_chapter.md"
        source.write_text(template)
        notebook = student_notebook(source).notebook
        for cell in notebook.cells:
            for tag in cell.metadata.get("tags", []):
                if tag.startswith("answer-"):
                    cell.source = get_question(tag.removeprefix("answer-")).answer_source()
        (folder / chapter).mkdir(parents=True)
        nbformat.write(notebook, folder / chapter / source.with_suffix(".ipynb").name)
    report = grade_all(folder)
    for chapter in CHAPTERS:
        (graded,) = [r for r in report.reports if r.student == chapter]
        assert graded.max_score > 0 and graded.score == graded.max_score, str(graded)


def test_a_process_group_sandbox_also_survives_a_hang(tmp_path: Path) -> None:
    base = student_notebook(FIXTURE).notebook
    answers = _answers(ch02_q1=_hostile("while True:\n    pass"))
    path = tmp_path / "hang.ipynb"
    nbformat.write(_submission(base, answers, {}), path)
    report = grade_notebook(path, isolation="process", limits=Limits(cell_s=CELL_S))
    if os.geteuid() == 0 and (_sandbox_ids(0) == (None, None) or not _reachable(sys.executable)):
        # Root without a usable fresh uid (none mapped, or none can read Python): a process group would run the
        # answers as root. Refused.
        assert report.error and "refusing to run answers as root" in report.error, report.error
        assert [q.score for q in report.questions] == [0, 0, 0]
        return
    assert report.sandbox.startswith("process") and [q.score for q in report.questions] == [0, 2, 3]
    assert report.questions[0].status == "stopped"


def test_grade_command_writes_gradescope_results(tmp_path: Path, capsys) -> None:
    base = student_notebook(FIXTURE).notebook
    path = tmp_path / "solo.ipynb"
    nbformat.write(_submission(base, _answers(ch02_q3=_stub(Q3)), {}), path)
    assert main(["grade", str(path), "--results", str(tmp_path / "results.json")]) == 0
    assert "Total 5/8" in capsys.readouterr().out
    result = json.loads((tmp_path / "results.json").read_text())
    assert result["score"] == 5 and [t["score"] for t in result["tests"]] == [3, 2, 0]


def test_unreadable_and_unknown_notebooks_are_reported_not_fatal(tmp_path: Path) -> None:
    (tmp_path / "broken.ipynb").write_text("{ not json")
    report = grade_notebook(tmp_path / "broken.ipynb")
    assert report.error and "not a valid notebook" in report.error and report.score == 0
    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "nothing.ipynb")
    assert "no auto-graded questions" in grade_notebook(tmp_path / "nothing.ipynb").error
    report = grade_all(tmp_path, workers=1)
    assert isinstance(report, ClassReport) and len(report.reports) == 2
    assert "not a valid notebook" in report.row("broken")["notes"] and report.row("nothing")["total"] == "0"


def test_marks_are_validated_against_the_rubric(tmp_path: Path) -> None:
    path = tmp_path / "marks.csv"
    path.write_text("student,ch02-w1,ch03-w1\nana,2,\nbo,,3\n")
    assert read_marks(path) == {"ana": {"ch02-w1": 2.0}, "bo": {"ch03-w1": 3.0}}
    for text, message in (
        ("student,ch02-q1\nana,3\n", "unknown written question"),
        ("student,ch02-w1\nana,4\n", r"outside \[0, 3\]"),
        ("student,ch02-w1\nana,good\n", "not a number"),
        ("student,ch02-w1\nana,1\nana,2\n", "appears twice"),
        ("name,ch02-w1\nana,1\n", "'student' column"),
    ):
        path.write_text(text)
        with pytest.raises(MarksError, match=message):
            read_marks(path)


def test_ids_outside_the_user_namespace_map_are_not_used(tmp_path: Path) -> None:
    """Root of a rootless container maps only itself: the fresh uid must then be dropped, not crash chown."""
    only_root = tmp_path / "uid_map"
    only_root.write_text("         0       1000          1\n")
    assert _id_is_mapped(0, str(only_root))
    assert not _id_is_mapped(1_900_000_000, str(only_root))
    wide = tmp_path / "wide_map"
    wide.write_text("0 0 4294967295\n")
    assert _id_is_mapped(1_900_000_000, str(wide))
    assert not _id_is_mapped(5, str(tmp_path / "missing"))


_ROOT_ATTACKS = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
done = 0
def attempt(bit, action):
    global done
    try:
        if action() is not False:
            done |= bit
    except Exception:
        pass
def write(path):
    with open(path, "w") as handle:
        handle.write("x")
attempt(1, lambda: write("scratch.txt"))  # the working folder: must work, or the test proves nothing
attempt(2, lambda: write(os.path.join(sys.prefix, "xorlib-sandbox-probe")))  # the interpreter's folder
attempt(4, lambda: write("/etc/xorlib-sandbox-probe"))  # the root file system
attempt(8, lambda: libc.mount(None, b"/", None, 32 | 4096, None) == 0)  # remount / read-write
attempt(16, lambda: libc.mount(b"tmpfs", b"/mnt", b"tmpfs", 0, None) == 0)  # a new mount
attempt(32, lambda: os.chown(".", 12345, 12345))
if os.getpid() <= 3:  # inside a PID namespace (else never: kill(-1) as root outside would end the machine's jobs)
    attempt(64, lambda: os.kill(-1, 18))  # SIGCONT, harmless: success means it reached a process besides us
os._exit(100 + done)
"""


def test_a_root_runner_without_a_fresh_uid_can_write_only_its_folder() -> None:
    """As in a rootless container (no other uid mapped): read-only mounts and no capabilities must hold."""
    if os.geteuid() != 0 or TIER != "namespaces":
        pytest.skip("only root builds the namespaces sandbox")
    outside = [Path(sys.prefix) / "xorlib-sandbox-probe", Path("/etc/xorlib-sandbox-probe")]
    attempt = run_command([sys.executable, "-I", "-S", "-c", _ROOT_ATTACKS], fresh_uid=False)
    assert attempt.tier == "namespaces" and attempt.uid is None
    assert attempt.status == 101, f"attacks that succeeded (bitmask): {attempt.status - 100}"
    assert not any(path.exists() for path in outside)


def test_a_sandbox_in_its_own_user_namespace_holds_without_any_privilege() -> None:
    """As for a grader that is not root: the namespaces inside a user namespace, root inside mapped to the caller."""
    if os.geteuid() != 0 or working_isolation("auto", user_namespace=True) != "namespaces":
        pytest.skip("needs root asking for a user namespace, and a /proc the kernel lets a user namespace remount")
    attempt = run_command([sys.executable, "-I", "-S", "-c", _ROOT_ATTACKS], fresh_uid=False, user_namespace=True)
    assert attempt.tier == "namespaces" and attempt.uid is None
    assert attempt.status == 101, f"attacks that succeeded (bitmask): {attempt.status - 100}"
    assert not (Path(sys.prefix) / "xorlib-sandbox-probe").exists() and not Path("/etc/xorlib-sandbox-probe").exists()


def test_mountinfo_paths_are_unescaped_and_flags_kept() -> None:
    text = (
        "36 25 0:32 / /mnt/with\\040space rw,nosuid,nodev,relatime shared:1 - tmpfs none rw\n"
        "37 25 0:33 / /srv/données ro,noexec,noatime - ext4 /dev/sda1 ro\n"
    )
    assert parse_mountinfo(text) == [("/mnt/with space", 2 | 4 | (1 << 21)), ("/srv/données", 8 | 1024)]


def test_a_mount_covered_by_the_sandboxs_proc_does_not_stop_the_seal(tmp_path: Path) -> None:
    """As binfmt_misc under /proc on most hosts: the new /proc covers it, so sealing must pass over it."""
    if os.geteuid() != 0 or TIER != "namespaces" or not Path("/proc/driver").is_dir() or not shutil.which("unshare"):
        pytest.skip("needs root, namespaces, unshare(1) and a /proc/driver folder to mount over")
    script = tmp_path / "attacks.py"
    script.write_text(
        "import sys\nfrom xorlib.coursework.sandbox import run_command\n"
        f"attempt = run_command([sys.executable, '-I', '-S', '-c', {_ROOT_ATTACKS!r}], fresh_uid=False)\n"
        "print(attempt.tier, attempt.status)\n"
    )
    shell = f"mount -t tmpfs none /proc/driver && {shlex.quote(sys.executable)} {shlex.quote(str(script))}"
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", shell], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.stdout.split() == ["namespaces", "101"], done.stdout + done.stderr[-2000:]


def test_auto_means_the_process_tier_where_a_user_namespace_cannot_mount_proc(tmp_path: Path) -> None:
    """A mount on /proc makes the kernel refuse a user namespace its own /proc: no such sandbox can be built there."""
    if os.geteuid() != 0 or TIER != "namespaces" or not Path("/proc/driver").is_dir() or not shutil.which("unshare"):
        pytest.skip("needs root, namespaces, unshare(1) and a /proc/driver folder to mount over")
    script = tmp_path / "resolve.py"
    script.write_text(
        "from xorlib.coursework.sandbox import working_isolation\n"
        "print(working_isolation('auto', user_namespace=True), working_isolation('auto'))\n"
    )
    shell = f"mount -t tmpfs none /proc/driver && {shlex.quote(sys.executable)} {shlex.quote(str(script))}"
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", shell], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.stdout.split() == ["process", "namespaces"], done.stdout + done.stderr[-2000:]
