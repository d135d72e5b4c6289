"""Student versions and grading: no solution leaks, the reference scores full marks, stubs score 0."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from xorlib.coursework import (
    STUB,
    MalformedNotebook,
    find_check_cells,
    grade_notebook,
    main,
    read_notebook,
    strip_code_solutions,
    strip_markdown_solutions,
    student_notebook,
    write_student_version,
)

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "chapters").glob("*.md"))

FRONT_MATTER = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
    format_version: 0.13
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---
"""

# Two questions: a softmax head (worth 2 points) and one step (1 point), plus markdown solutions.
ASSIGNMENT = (
    FRONT_MATTER
    + """
# A tiny assignment

```{code-cell} ipython3
import torch
```

```{exercise} Softmax head
:label: ex-head

Write the head.
```

```{solution} ex-head
:class: dropdown

SECRET-MARKDOWN-SOLUTION
```

```{code-cell} ipython3
:tags: [hide-input]

def head(query, codes, x):
    # BEGIN SOLUTION
    scores = codes @ query
    weights = torch.softmax(scores, -1)  # SECRET-CODE-1
    return weights, x @ weights
    # END SOLUTION
```

```{code-cell} ipython3
from xorlib.checks import check_softmax_head

check_softmax_head(head)  # points: 2
```

## One step

<!-- BEGIN SOLUTION -->
SECRET-COMMENT-SOLUTION
<!-- END SOLUTION -->

```{code-cell} ipython3
def step(codes, pair, lr):
    d = codes.shape[0]
    # BEGIN SOLUTION
    q = (2.0 * lr / d**2) * (codes[pair[0]] + codes[pair[1]] - 2.0 / d * codes.sum(0))  # SECRET-CODE-2
    return torch.stack([q, q])
    # END SOLUTION
```

```{code-cell} ipython3
import xorlib.checks as checks

checks.check_one_step(step)
```
"""
)


@pytest.fixture
def assignment(tmp_path: Path) -> Path:
    path = tmp_path / "assignment.md"
    path.write_text(ASSIGNMENT)
    return path


@pytest.fixture
def student_ipynb(assignment: Path, tmp_path: Path) -> Path:
    written, removed, checks = write_student_version(assignment, tmp_path / "student")
    assert (removed, checks) == (4, 2)
    return next(p for p in written if p.suffix == ".ipynb")


# ----------------------------------------------------------------------------- stripping


def test_code_solution_becomes_an_indented_stub() -> None:
    source = "def f(x):\n    y = 1\n    # BEGIN SOLUTION\n    return x + y\n    # END SOLUTION\n"
    stripped, count = strip_code_solutions(source)
    assert count == 1
    assert stripped == f"def f(x):\n    y = 1\n    {STUB}"


@pytest.mark.parametrize(
    "source",
    ["# BEGIN SOLUTION\nx = 1\n", "x = 1\n# END SOLUTION\n", "# BEGIN SOLUTION\n# BEGIN SOLUTION\n# END SOLUTION\n"],
    ids=["unclosed", "unopened", "nested"],
)
def test_unbalanced_code_markers_are_malformed(source: str) -> None:
    with pytest.raises(MalformedNotebook):
        strip_code_solutions(source)


def test_markdown_solution_directive_respects_nested_fences() -> None:
    source = "Before.\n\n````{solution} ex\n```python\ncode\n```\nSECRET\n````\n\nAfter."
    stripped, count = strip_markdown_solutions(source)
    assert count == 1 and "SECRET" not in stripped and "code" not in stripped
    assert stripped == "Before.\n\nAfter."


def test_colon_fenced_solution_and_comment_blocks_are_removed() -> None:
    source = ":::{solution} ex\nSECRET\n:::\nkeep\n<!-- BEGIN SOLUTION -->\nSECRET\n<!-- END SOLUTION -->"
    stripped, count = strip_markdown_solutions(source)
    assert (stripped, count) == ("keep", 2)


def test_unclosed_markdown_solution_is_malformed() -> None:
    with pytest.raises(MalformedNotebook):
        strip_markdown_solutions("```{solution} ex\nnever closed")


def test_tagged_and_gated_cells() -> None:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_markdown_cell("SECRET tagged", metadata={"tags": ["solution"]}),
        nbformat.v4.new_code_cell("SECRET = 1", metadata={"tags": ["solution"]}),
        nbformat.v4.new_markdown_cell("```{solution-start} ex\n:class: dropdown\n```\nSECRET text"),
        nbformat.v4.new_code_cell("SECRET_CODE = 2"),
        nbformat.v4.new_markdown_cell("```{solution-end}\n```"),
        nbformat.v4.new_markdown_cell("kept"),
    ]
    student, removed = student_notebook(notebook)
    text = "\n".join(c.source for c in student.cells)
    assert "SECRET" not in text and [c.source for c in student.cells] == [STUB, "kept"]
    assert removed == 3  # the tagged markdown cell, the tagged code cell, the gated block
    assert len(notebook.cells) == 6, "the source notebook is left unchanged"


def test_student_version_has_no_solution_and_keeps_checks(assignment: Path, student_ipynb: Path) -> None:
    for path in (student_ipynb, student_ipynb.with_suffix(".md")):
        text = path.read_text()
        assert "SECRET" not in text, path
        assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text
        assert "check_softmax_head(head)  # points: 2" in text and "checks.check_one_step(step)" in text
        assert text.count("raise NotImplementedError") == 2
        assert "hide-input" not in text, "the stub must be visible to the student"
    notebook = nbformat.read(student_ipynb, as_version=4)
    nbformat.validate(notebook)
    assert all(c.outputs == [] for c in notebook.cells if c.cell_type == "code")
    assert "kernelspec" in notebook.metadata


def test_check_cells_are_grouped_by_question(assignment: Path) -> None:
    cells = find_check_cells(read_notebook(assignment))
    assert [(c.question, c.check, c.points) for c in cells] == [
        ("Softmax head", "check_softmax_head", 2),
        ("One step", "check_one_step", 1),
    ]


def test_only_top_level_check_calls_are_graded() -> None:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell("try:\n    check_one_step(wrong)\nexcept AssertionError as e:\n    print(e)"),
        nbformat.v4.new_code_cell("def demo():\n    check_one_step(f)"),
        nbformat.v4.new_code_cell("%time check_one_step(f)"),  # a magic: not valid Python, not a top-level call
        nbformat.v4.new_code_cell("%load_ext foo\nchecks.check_one_step(f)"),
    ]
    assert [c.index for c in find_check_cells(notebook)] == [3]


def test_two_checks_in_one_cell_are_malformed() -> None:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell("check_one_step(f)\ncheck_softmax_head(g)")]
    with pytest.raises(MalformedNotebook, match="one per cell"):
        find_check_cells(notebook)


# ----------------------------------------------------------------------------- grading (executes kernels)


@pytest.mark.slow
def test_reference_scores_full_marks(assignment: Path) -> None:
    report = grade_notebook(assignment)
    assert (report.earned, report.total) == (3, 3)
    assert report.by_question() == {"Softmax head": (2, 2), "One step": (1, 1)}


@pytest.mark.slow
def test_unmodified_student_version_scores_zero(student_ipynb: Path) -> None:
    report = grade_notebook(student_ipynb)
    assert (report.earned, report.total) == (0, 3)
    assert all("not implemented yet" in r.message for r in report.results)


@pytest.mark.slow
def test_partially_solved_scores_partially(student_ipynb: Path) -> None:
    notebook = nbformat.read(student_ipynb, as_version=4)
    for cell in notebook.cells:
        if cell.source.startswith("def step("):
            cell.source = cell.source.replace(
                STUB,
                "q = (2.0 * lr / d**2) * (codes[pair[0]] + codes[pair[1]] - 2.0 / d * codes.sum(0))\n"
                "    return torch.stack([q, q])",
            )
        if cell.source.startswith("def head("):  # a classic mistake: wrong sign
            cell.source = cell.source.replace(STUB, "w = torch.softmax(-(codes @ query), -1)\n    return w, x @ w")
    nbformat.write(notebook, student_ipynb)
    report = grade_notebook(student_ipynb)
    assert report.by_question() == {"Softmax head": (0, 2), "One step": (1, 1)}
    assert "wrong sign" in str(report)


@pytest.mark.slow
def test_cell_timeout_fails_only_its_question(student_ipynb: Path) -> None:
    notebook = nbformat.read(student_ipynb, as_version=4)
    for cell in notebook.cells:
        if cell.source.startswith("def head("):
            cell.source = "import time\n" + cell.source.replace(STUB, "time.sleep(60)")
        if cell.source.startswith("def step("):
            cell.source = cell.source.replace(
                STUB,
                "q = (2.0 * lr / d**2) * (codes[pair[0]] + codes[pair[1]] - 2.0 / d * codes.sum(0))\n"
                "    return torch.stack([q, q])",
            )
    nbformat.write(notebook, student_ipynb)
    report = grade_notebook(student_ipynb, timeout=3)
    assert report.by_question() == {"Softmax head": (0, 2), "One step": (1, 1)}


@pytest.mark.slow
def test_command_line_grade_and_json(assignment: Path, tmp_path: Path) -> None:
    score = tmp_path / "score.json"
    result = subprocess.run(
        [sys.executable, "-m", "xorlib.coursework", "grade", str(assignment), "--json", str(score)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert re.search(r"Total\s+3/3", result.stdout)
    assert json.loads(score.read_text())["questions"]["Softmax head"] == {"earned": 2, "total": 2}


def test_malformed_notebooks_exit_2(tmp_path: Path, capsys) -> None:
    broken = tmp_path / "broken.ipynb"
    broken.write_text("{ not json")
    assert main(["grade", str(broken)]) == 2
    no_checks = tmp_path / "plain.md"
    no_checks.write_text(FRONT_MATTER + "\n# Nothing to grade\n\n```{code-cell} ipython3\nx = 1\n```\n")
    assert main(["grade", str(no_checks)]) == 2
    assert main(["grade", str(tmp_path / "missing.ipynb")]) == 2
    unbalanced = tmp_path / "unbalanced.md"
    unbalanced.write_text(FRONT_MATTER + "\n```{code-cell} ipython3\n# BEGIN SOLUTION\nx = 1\n```\n")
    assert main(["student", str(unbalanced), "--out", str(tmp_path / "out")]) == 2
    assert "error:" in capsys.readouterr().err


def test_student_command_skips_sources_without_exercises(tmp_path: Path, capsys) -> None:
    plain = tmp_path / "plain.md"
    plain.write_text(FRONT_MATTER + "\n# No exercises\n")
    assert main(["student", str(plain), "--out", str(tmp_path / "out")]) == 0
    assert "skipped (no exercises)" in capsys.readouterr().out
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------- the book's own exercises


def _solution_lines(path: Path) -> list[str]:
    """The non-blank lines inside BEGIN/END SOLUTION blocks of the code cells of a source."""
    lines = []
    for cell in read_notebook(path).cells:
        if cell.cell_type != "code":
            continue
        inside = False
        for line in cell.source.splitlines():
            if "BEGIN SOLUTION" in line:
                inside = True
            elif "END SOLUTION" in line:
                inside = False
            elif inside and line.strip():
                lines.append(line.strip())
    return lines


@pytest.mark.parametrize("source", SOURCES, ids=[p.stem for p in SOURCES])
def test_book_sources_give_solution_free_student_versions(source: Path, tmp_path: Path) -> None:
    written, _, _ = write_student_version(source, tmp_path)
    secret = [line for line in _solution_lines(source) if len(line) > 12 and not line.startswith("#")]
    for path in written:
        text = path.read_text()
        leaked = [line for line in secret if line in text]
        assert not leaked, f"{path.name} shows solution code: {leaked[:3]}"
        assert not re.search(r"^[ \t]*(`{3,}|:{3,})\{solution", text, re.MULTILINE), f"{path.name} has a solution block"


@pytest.mark.slow
def test_a_real_chapter_scores_full_marks() -> None:
    # The book build runs every chapter's reference solutions; this grades one through the grader itself.
    report = grade_notebook(ROOT / "chapters" / "01_task_and_model.md")
    assert report.total > 0 and report.earned == report.total, str(report)
