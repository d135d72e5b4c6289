"""The chapters' exercise sections (sync) and the student versions, on fixture chapters (no sandbox here)."""

from __future__ import annotations

import shutil
import sys
import types
from pathlib import Path

import jupytext
import nbformat
import pytest

from xorlib.coursework import student_notebooks
from xorlib.coursework.__main__ import main
from xorlib.coursework.bank import CHAPTERS, get_question
from xorlib.coursework.grading import METADATA_KEY, locate, read_notebook, tags
from xorlib.coursework.questions import AutoQuestion, WrittenQuestion
from xorlib.coursework.render import (
    BEGIN,
    END,
    student_notebook,
    student_region,
    sync_chapter,
    sync_text,
    teacher_region,
)

FIXTURES = Path(__file__).parent / "fixtures" / "coursework"
ROOT = Path(__file__).resolve().parents[2]
CH02 = [q for q in CHAPTERS["ch02"]]


@pytest.fixture
def chapters(tmp_path: Path) -> Path:
    folder = tmp_path / "chapters"
    shutil.copytree(FIXTURES, folder)
    return folder


def _outside(text: str) -> tuple[str, str]:
    return text.split(BEGIN)[0], text.split(END)[1]


def test_sync_rewrites_only_the_region_and_is_idempotent(chapters: Path) -> None:
    path = chapters / "02_fixture_chapter.md"
    before = path.read_text()
    first = sync_chapter(path)
    assert first.status == "updated" and "4 exercise(s)" in str(first)
    after = path.read_text()
    assert _outside(after) == _outside(before)
    assert sync_chapter(path).status == "unchanged" and path.read_text() == after


def test_sync_leaves_chapters_without_markers_or_questions_alone(chapters: Path) -> None:
    no_markers = chapters / "03_no_markers.md"
    text = no_markers.read_text()
    result = sync_chapter(no_markers)
    assert result.status == "no markers" and "left untouched" in str(result) and no_markers.read_text() == text
    empty = chapters / "08_no_questions.md"
    text = empty.read_text()
    assert sync_chapter(empty).status == "unchanged" and empty.read_text() == text


def test_sync_refuses_malformed_markers_without_touching_the_file(chapters: Path) -> None:
    path = chapters / "02_fixture_chapter.md"
    broken = path.read_text().replace(END, "") + f"\n{END}\n{END}\n"
    path.write_text(broken)
    result = sync_chapter(path)
    assert result.status == "error" and "expected one" in result.detail and path.read_text() == broken
    with pytest.raises(ValueError, match="expected one"):
        sync_text("a\n" + END + "\n" + BEGIN + "\n", "ch02")


def test_markers_quoted_in_a_code_block_are_not_markers(chapters: Path) -> None:
    path = chapters / "02_fixture_chapter.md"
    text = path.read_text().replace("Some prose", f"Quoted:\n\n```text\n{BEGIN}\n{END}\n```\n\nSome prose")
    path.write_text(text)
    assert sync_chapter(path).status == "updated"
    assert path.read_text().count("::::{exercise}") == 4
    assert "BODY_VALUE" in student_notebook(path).cells[1].source


def test_sync_command_reports_and_check_mode_fails_when_out_of_date(chapters: Path, capsys) -> None:
    files = [str(p) for p in sorted(chapters.glob("*.md"))]
    assert main(["sync", "--check", *files]) == 1
    assert main(["sync", *files]) == 0
    out = capsys.readouterr().out
    assert "02_fixture_chapter.md: updated" in out and "03_no_markers.md: no markers" in out
    assert main(["sync", "--check", *files]) == 0


def test_synced_region_has_titled_labelled_exercises_folded_solutions_and_tagged_cells(chapters: Path) -> None:
    path = chapters / "02_fixture_chapter.md"
    sync_chapter(path)
    text = path.read_text()
    notebook = jupytext.read(path)
    code = {t: c for c in notebook.cells if c.cell_type == "code" for t in tags(c)}
    assert "coursework-setup" in code and "from xorlib.coursework import check" in code["coursework-setup"].source
    for q in CH02:
        assert f"::::{{exercise}} {q.title}\n:label: {q.id}\n\n{_header(q)}\n\n{q.prompt}\n::::" in text
        if isinstance(q, AutoQuestion):
            assert code[f"answer-{q.id}"].source == q.answer_source()
            assert "hide-input" in tags(code[f"answer-{q.id}"])  # the solution is folded in the book
            assert code[f"check-{q.id}"].source == q.check_source()
        else:
            assert f"::::{{solution}} {q.id}\n:class: dropdown" in text
            assert f":::{{admonition}} Rubric ({q.points} points)\n:class: dropdown" in text
    assert "(ch02-exercises)=\n## Exercises" in text


def _header(q) -> str:
    """The header line an exercise must carry: points, level and time, and the id as its grading key."""
    effort = f"{q.level} · about {q.minutes} minutes"
    if isinstance(q, AutoQuestion):
        return f'**{q.points} point{"s" * (q.points != 1)}** · {effort} · checked with `check("{q.id}", …)`'
    return f"**{q.points} points, written** · {effort} · marked as `{q.id}`"


def test_every_exercise_header_gives_points_level_time_and_the_grading_key() -> None:
    """In the book and in the student's notebook, under the title; the id reads as what grades the answer."""
    assert _header(get_question("ch02-q1")).startswith("**3 points** · ")
    for chapter, questions in CHAPTERS.items():
        book, student = teacher_region(chapter), student_region(chapter)
        for q in questions:
            assert f":label: {q.id}\n\n{_header(q)}\n\n{q.prompt}\n::::" in book, q.id
            assert f"### {q.title}\n\n{_header(q)}\n\n{q.prompt}" in student, q.id
            assert f"· `{q.id}`" not in book + student, q.id  # the id is no longer shown as a second name
        synced = next((ROOT / "chapters").glob(f"{chapter[2:]}_*.md")).read_text()
        assert all(_header(q) in synced for q in questions), chapter  # the chapters are in sync


def _secrets() -> list[str]:
    """Text that must never reach a student: solution lines, model answers, rubrics, hidden cases."""
    found = ["BODY-MARKDOWN-SECRET", "BODY-CODE-SECRET", "BEGIN SOLUTION"]
    for questions in CHAPTERS.values():
        for q in questions:
            if isinstance(q, AutoQuestion):
                body = q.answer_source().split("# BEGIN SOLUTION")[1].split("# END SOLUTION")[0]
                found += [line.strip() for line in body.splitlines() if len(line.strip()) > 25]
                found += [c.description for c in q.hidden(0)]
            else:
                found += [q.answer[:60], *(c.text for c in q.rubric)]
    return found


def test_student_versions_hold_stubs_and_checks_and_nothing_secret(chapters: Path, tmp_path: Path) -> None:
    for path in chapters.glob("*.md"):
        sync_chapter(path)
    messages = student_notebooks(sorted(chapters.glob("*.md")), tmp_path / "student")
    assert any("08_no_questions.md: skipped" in m for m in messages)
    assert any("03_no_markers.md" in m and "3 question(s)" in m for m in messages)  # exercises appended
    written = sorted(p.name for p in (tmp_path / "student").iterdir())
    assert written == ["02_fixture_chapter.ipynb", "03_no_markers.ipynb", "README.md"]
    for notebook_path in (tmp_path / "student").glob("*.ipynb"):
        raw = notebook_path.read_text()
        leaked = [s for s in _secrets() if s in raw]
        assert not leaked, f"{notebook_path.name} leaks {leaked[:3]}"
        notebook = read_notebook(notebook_path)
        chapter = notebook.metadata[METADATA_KEY]["chapter"]
        questions = [q for q in CHAPTERS[chapter] if isinstance(q, AutoQuestion)]
        located = locate(notebook, tuple(questions))
        for q in questions:  # every check cell is intact and in place, every answer cell is a stub
            assert located[q.id].check_problem is None and "NotImplementedError" in located[q.id].answer_code
        assert all(c.get("outputs", []) == [] for c in notebook.cells if c.cell_type == "code")
        written_cells = [t for c in notebook.cells for t in tags(c) if t.startswith("written-")]
        assert written_cells == [f"written-{q.id}" for q in CHAPTERS[chapter] if isinstance(q, WrittenQuestion)]


def test_student_version_keeps_the_chapter_around_the_region_and_is_deterministic(chapters: Path) -> None:
    path = chapters / "02_fixture_chapter.md"
    sync_chapter(path)
    first, second = student_notebook(path), student_notebook(path)
    assert nbformat.writes(first) == nbformat.writes(second)
    sources = [c.source for c in first.cells]
    assert sources[1] == "BODY_VALUE = 6 * 7" and sources[-1] == "Text after the exercises stays where it is."
    assert "raise NotImplementedError" in sources[3]  # a solution outside the region is stubbed too


def test_every_bank_chapter_gets_a_student_version(tmp_path: Path) -> None:
    template = (FIXTURES / "02_fixture_chapter.md").read_text()
    paths = []
    for chapter in CHAPTERS:
        path = tmp_path / f"{chapter[2:]}_chapter.md"
        path.write_text(template)
        paths.append(path)
    student_notebooks(paths, tmp_path / "student")
    for chapter, path in zip(CHAPTERS, paths, strict=True):
        notebook = read_notebook(tmp_path / "student" / f"{path.stem}.ipynb")
        ids = [t.removeprefix("answer-") for c in notebook.cells for t in tags(c) if t.startswith("answer-")]
        assert ids == [q.id for q in CHAPTERS[chapter] if isinstance(q, AutoQuestion)]
        assert notebook.metadata[METADATA_KEY]["chapter"] == chapter


def test_the_prompt_names_the_function_and_the_check_cell_calls_it() -> None:
    for questions in CHAPTERS.values():
        for q in questions:
            if isinstance(q, AutoQuestion):
                assert f"`{q.function}(" in q.prompt, q.id
                assert q.check_source() == f'check("{q.id}", {q.function})'
    assert get_question("ch01-q2").imports.startswith("from xorlib.task import")


def _student_edition():
    sys.path.insert(0, str(ROOT / "_ext"))
    try:
        import student_edition
    finally:
        sys.path.remove(str(ROOT / "_ext"))
    return student_edition


def test_the_student_edition_of_the_book_holds_no_solution_and_its_exercises_run(capsys) -> None:
    edition = _student_edition()
    secrets = [s for s in _secrets() if s not in ("BODY-MARKDOWN-SECRET", "BODY-CODE-SECRET")]
    for path in sorted((ROOT / "chapters").glob("*.md")):
        chapter = f"ch{path.name[:2]}"
        text = edition.student_source(f"chapters/{path.stem}", path.read_text())
        if chapter not in CHAPTERS:
            assert "{solution}" not in text, path.name
            continue
        leaked = [s for s in secrets if s in text]
        assert not leaked, f"{path.name} leaks {leaked[:3]}"
        assert all(f":label: {q.id}" in text for q in CHAPTERS[chapter]), path.name  # cross-references still resolve
        notebook = jupytext.reads(text, fmt="md:myst")
        if chapter == "ch02":  # its exercise cells run as the book runs them: every check says "not answered yet"
            namespace: dict = {}
            for cell in notebook.cells:
                if cell.cell_type == "code" and {
                    "coursework-setup",
                    *[t for t in tags(cell) if t.startswith(("answer-", "check-"))],
                } & set(tags(cell)):
                    exec(cell.source, namespace)
            out = capsys.readouterr().out
            assert out.count("not answered yet") == len([q for q in CHAPTERS["ch02"] if isinstance(q, AutoQuestion)])


def test_the_student_edition_switches_off_the_downloads_of_the_full_sources() -> None:
    edition = _student_edition()
    config = types.SimpleNamespace(html_copy_source=True, html_theme_options={"launch_buttons": {"binderhub_url": "x"}})
    edition._config_inited(None, config)
    assert config.html_copy_source is False and config.html_theme_options["launch_buttons"] == {}
    assert config.html_theme_options["use_repository_button"] is False
