"""What a reader of the chapters' sources and pages is promised (issues 11, 21 and 22), checked statically.

* bookkeeping is hidden: every code cell that glues a number into the prose (``glue(...)``, or the variables that
  ``{eval}`` reads) is a ``remove-cell`` or ``remove-input`` cell, so the reader sees the story and the calls;
* code wraps at the book's width: no visible code line is longer than 88 columns;
* the API reference is split by module: one page per floor, each module under its own heading;
* the computation is shown (issue 21): in each of chapters 1-8 the visible code lines are at least the hidden
  ones; chapters 1 and 2 show ``TwoHeadModel``'s code (``{literalinclude}`` with ``:pyobject: TwoHeadModel``, or
  a visible cell that displays its source) and call ``backward()`` in a visible cell;
* no revision history in a chapter (issue 22): "first version", "earlier version", "previous version", "used to
  present", "the old argument";
* the convention of ``tools/CONVENTIONS.md``: a chapter that uses ``{eval}`` defines the book's maths macros in
  its hidden first cell, for JupyterLab;
* a chapter is stored as JupyterLab saves it (jupytext with ``jupytext.toml``), so opening, running and saving it
  leaves the working tree clean (issue 21).

The checks that today's chapters still fail are judged against ``tests/book/allowlist.yml``.
"""

from __future__ import annotations

import re
from pathlib import Path

import _allowlist
import jupytext
import pytest
import yaml
from jupytext.config import load_jupytext_configuration_file

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted(p for p in (ROOT / "chapters").glob("*.md") if p.read_text().startswith("---\njupytext"))
HIDDEN = {"remove-cell", "remove-input"}


def _visible_code_cells(path: Path) -> list[tuple[int, str]]:
    cells = jupytext.read(path).cells
    return [
        (k, cell.source)
        for k, cell in enumerate(cells)
        if cell.cell_type == "code" and not HIDDEN & set(cell.metadata.get("tags", []))
    ]


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_bookkeeping_is_hidden_and_code_fits_the_column(path: Path) -> None:
    for k, source in _visible_code_cells(path):
        assert "glue(" not in source, f"{path.name}, cell {k}: a visible cell glues numbers (tag it remove-cell)"
        wide = [line for line in source.splitlines() if len(line) > 88]
        assert not wide, f"{path.name}, cell {k}: lines over 88 columns: {wide[:2]}"


def test_the_api_reference_is_split_by_module_with_headings() -> None:
    pages = sorted(p for p in (ROOT / "chapters" / "api").glob("*.md") if p.stem != "index")
    assert len(pages) >= 4, pages
    index = (ROOT / "chapters" / "api" / "index.md").read_text()
    for page in pages:
        text = page.read_text()
        modules = re.findall(r"^\.\. automodule:: (\S+)", text, flags=re.M)
        assert modules, f"{page.name} documents no module"
        for module in modules:  # a heading names the module, or the package that groups it (xorlib.plots)
            parts = module.split(".")
            names = "|".join(re.escape(".".join(parts[:k])) for k in range(2, len(parts) + 1))
            assert re.search(rf"^## `({names})`: \S", text, flags=re.M), f"{page.name}: {module} has no heading"
        assert page.stem in index, f"the API index does not list {page.name}"


SHOWN = re.compile(r"getsource|show_source|show_code|\?\?|display_source")
REVISION = re.compile(r"first version|earlier version|previous version|used to present|the old argument", re.I)


def _code_lines(path: Path) -> tuple[int, int]:
    """Lines of code (non-blank) in visible and in hidden cells (``remove-cell``, ``remove-input``)."""
    visible = hidden = 0
    for cell in jupytext.read(path).cells:
        if cell.cell_type != "code":
            continue
        lines = sum(1 for line in cell.source.splitlines() if line.strip())
        if HIDDEN & set(cell.metadata.get("tags", [])):
            hidden += lines
        else:
            visible += lines
    return visible, hidden


def _numbered(prefix: str) -> list[Path]:
    return [p for p in CHAPTERS if re.match(rf"{prefix}_", p.name)]


MAIN = [p for k in range(1, 9) for p in _numbered(f"{k:02d}")]


@pytest.mark.parametrize("path", MAIN, ids=[p.stem for p in MAIN])
def test_the_computation_is_visible(path: Path) -> None:
    visible, hidden = _code_lines(path)
    found = [] if visible >= hidden else ["visible code lines below hidden ones"]
    _allowlist.judge(f"chapters/{path.stem}", "visible code", found)


def _shows_the_model_and_backward(path: Path) -> list[str]:
    text = path.read_text()
    cells = jupytext.read(path).cells
    visible = [c.source for c in cells if c.cell_type == "code" and not HIDDEN & set(c.metadata.get("tags", []))]
    include = re.search(
        r"^```\{literalinclude\}[^\n]*model\.py\s*\n(?::[\w-]+:.*\n)*?:pyobject: TwoHeadModel", text, re.M
    )
    displayed = any("TwoHeadModel" in source and SHOWN.search(source) for source in visible)
    found = []
    if not (include or displayed):
        found.append("TwoHeadModel's code is not shown")
    if not any(re.search(r"\.backward\(", source) for source in visible):
        found.append("no visible backward()")
    return found


@pytest.mark.parametrize("path", MAIN[:2], ids=[p.stem for p in MAIN[:2]])
def test_chapters_1_and_2_show_the_transformer_and_its_backward_pass(path: Path) -> None:
    _allowlist.judge(f"chapters/{path.stem}", "model and backward shown", _shows_the_model_and_backward(path))


def test_the_model_check_sees_a_literalinclude_and_a_visible_backward(tmp_path: Path) -> None:
    chapter = tmp_path / "01_x.md"
    header = "---\njupytext:\n  text_representation:\n    extension: .md\n    format_name: myst\n---\n\n"
    chapter.write_text(
        header + "```{literalinclude} ../xorlib/model.py\n:language: python\n:pyobject: TwoHeadModel\n```\n\n"
        "```{code-cell} ipython3\nloss.backward()\n```\n"
    )
    assert _shows_the_model_and_backward(chapter) == []
    chapter.write_text(header + "```{code-cell} ipython3\n:tags: [remove-cell]\n\nloss.backward()\n```\n")
    assert _shows_the_model_and_backward(chapter) == ["TwoHeadModel's code is not shown", "no visible backward()"]


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_no_revision_history_in_a_chapter(path: Path) -> None:
    text = re.sub(r"^```\{code-cell\}.*?^```", "", path.read_text(), flags=re.M | re.S)
    found = [m.group(0).lower() for m in REVISION.finditer(text)]
    _allowlist.judge(f"chapters/{path.stem}", "revision history", found)


def _macros() -> dict[str, str]:
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    return config["sphinx"]["config"]["mathjax3_config"]["tex"]["macros"]


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_a_chapter_with_eval_defines_the_macros_for_jupyterlab(path: Path) -> None:
    cells = jupytext.read(path).cells
    if not any("{eval}`" in c.source for c in cells if c.cell_type == "markdown"):
        pytest.skip("no {eval} yet")
    first = next(c for c in cells if c.cell_type == "markdown")
    assert "remove-cell" in first.metadata.get("tags", []), f"{path.name}: the first markdown cell is not the macros"
    front = yaml.safe_load(first.source.strip().strip("-"))
    assert front == {"math": {f"\\{k}": v for k, v in _macros().items()}}, f"{path.name}: macros differ: {front}"


NOTEBOOKS = sorted(p for p in (ROOT / "chapters").rglob("*.md") if p.read_text().startswith("---\njupytext"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.relative_to(ROOT / "chapters").as_posix() for p in NOTEBOOKS])
def test_a_chapter_is_stored_as_jupyterlab_saves_it(path: Path) -> None:
    """JupyterLab saves a chapter through jupytext with the repository's settings: the file must already be that text."""
    config = load_jupytext_configuration_file(str(ROOT / "jupytext.toml"))
    text = path.read_text()
    saved = jupytext.writes(jupytext.reads(text, fmt="md:myst", config=config), fmt="md:myst", config=config)
    assert saved == text, f"{path.name}: saving it in JupyterLab would rewrite it; run it through jupytext once"


def test_every_experiments_command_the_book_shows_names_registered_experiments() -> None:
    """``python -m xorlib.experiments NAME ... --full``: one CLI over the registry (the per-module CLIs are gone)."""
    from xorlib.experiments._registry import REGISTRY

    command = re.compile(r"python -m xorlib\.experiments(?P<module>\.\w+)?(?P<words>(?: [\w-]+)*)")
    found = 0
    for path in [*CHAPTERS, ROOT / "README.md"]:
        for match in command.finditer(path.read_text()):
            found += 1
            assert match["module"] is None, f"{path.name}: {match[0]!r} is a per-module CLI that no longer exists"
            names = [w for w in match["words"].split() if re.fullmatch(r"[a-z_]+", w)]
            assert set(names) <= set(REGISTRY), f"{path.name}: {match[0]!r} names an unregistered experiment"
    assert found, "no experiments command found: the pattern is wrong"
