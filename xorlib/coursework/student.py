"""Student versions: the notebooks (``python -m xorlib.coursework student chapters/*.md --out student``) and the
book's student edition (``_ext/student_edition.py``), from one transformation of a chapter's MyST text.

:func:`student_text` replaces the chapter's exercise region by the student's section
(:func:`~xorlib.coursework.render.student_region`, built from the bank, so nothing of the teacher's region can
leak through) and, as a second line of defence, removes every other solution: ``{solution}`` directives,
everything from ``{solution-start}`` to ``{solution-end}``, ``<!-- BEGIN SOLUTION -->`` blocks, code cells tagged
``solution``, and the bodies of ``# BEGIN SOLUTION`` blocks in code. A chapter without the markers gets the
exercises appended. A bank chapter id (``"ch02"``) in place of a file gives the exercises alone: what a teacher
needs outside the repository.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

from .bank import CHAPTERS, chapter_of, chapter_questions
from .notebooks import METADATA_KEY
from .questions import stub_source
from .render import MarkerError, markers, student_region

__all__ = []  # xorlib.coursework exports student_notebooks

_FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|:{3,})\{(?P<name>[\w-]+)\}")
_TAGS = re.compile(r"^:tags:\s*\[(?P<tags>[^\]]*)\]")

README = """# Exercises

One notebook per chapter of the book. Open them in the book's environment (the Binder button of the book, or
`make env` in its repository), so that `from xorlib.coursework import check` works.

For each code question: write the function in its **answer cell**, replacing `raise NotImplementedError`, and keep
every helper and import it needs inside that cell; then run the **check cell** below it, which runs the public
test cases and explains a failure. Do not edit, move or delete the check cells or the cells' tags: a question whose
check cell was changed scores 0. Answer the written questions in the Markdown cell under each of them.

Submit the notebook (`.ipynb`, or the MyST `.md` file). Grading runs your answer cells only, in a fresh sandboxed
process without the book's reference functions, on the public test cases and on hidden ones.
"""


def _block_end(lines: list[str], k: int, fence: str) -> int:
    """The index after the closing fence of the block opened at line ``k``."""
    for j in range(k + 1, len(lines)):
        line = lines[j].strip()
        if line and set(line) == {fence[0]} and len(line) >= len(fence):
            return j + 1
    return len(lines)


def strip_solutions(text: str) -> str:
    """MyST text without solutions (see the module's docstring)."""
    lines, out, k, gated = text.splitlines(), [], 0, False
    while k < len(lines):
        opening = _FENCE.match(lines[k])
        name = opening.group("name") if opening else ""
        tags = [m.group("tags") for line in lines[k + 1 : k + 4] if opening and (m := _TAGS.match(line))]
        tagged = name == "code-cell" and "solution" in re.split(r"[\s,]+", tags[0] if tags else "")
        if gated or name in ("solution", "solution-start") or tagged:
            gated = (gated and name != "solution-end") or name == "solution-start"
            k = _block_end(lines, k, opening.group("fence")) if opening else k + 1
        elif re.match(r"^\s*<!--\s*BEGIN SOLUTION\s*-->", lines[k]):
            while k < len(lines) and not re.match(r"^\s*<!--\s*END SOLUTION\s*-->", lines[k]):
                k += 1
            k += 1
        else:
            out.append(lines[k])
            k += 1
    return re.sub(r"\n{3,}", "\n\n", stub_source("\n".join(out))).strip("\n") + "\n"


def student_text(text: str, chapter: str, *, book: bool = False) -> str:
    """A chapter's MyST text as the student sees it: its region rebuilt from the bank, every solution removed."""
    lines = text.splitlines()
    try:
        found = markers(lines)
    except MarkerError:
        found = None
    region = student_region(chapter, book=book)
    lines = [*lines[: found[0]], region, *lines[found[1] + 1 :]] if found else [*lines, "", region]
    return strip_solutions("\n".join(lines))


def student_notebook(source: str | Path) -> nbformat.NotebookNode:
    """The student notebook of a chapter file, or of a bank chapter id such as ``"ch02"`` (the exercises alone).

    Raises
    ------
    ValueError
        If the bank has no questions for that chapter.
    """
    import jupytext

    if isinstance(source, str) and source in CHAPTERS:
        chapter, name = source, f"{source}_exercises.md"
        text = f"# Exercises of chapter {int(source[2:])}\n\n{student_region(source)}\n"
    else:
        path = Path(source)
        chapter, name = chapter_of(path), path.name
        if not chapter_questions(chapter):
            raise ValueError(
                f"source {path}: the bank has no questions for this chapter (a file NN_name.md or one of {', '.join(CHAPTERS)})"
            )
        text = student_text(path.read_text(encoding="utf-8"), chapter)
    notebook = jupytext.reads(text, fmt="md:myst")
    for k, cell in enumerate(notebook.cells):
        cell["id"] = f"cell-{k}"  # deterministic: the same chapter gives the same file
    notebook.metadata.pop("jupytext", None)
    questions = [q.id for q in chapter_questions(chapter)]
    notebook.metadata[METADATA_KEY] = {"chapter": chapter, "source": name, "questions": questions}
    notebook.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    notebook.nbformat, notebook.nbformat_minor = 4, 5
    nbformat.validate(notebook)
    return notebook


def write_student_notebooks(sources: list, out: Path) -> list[str]:
    """Write ``out/<stem>.ipynb`` for each source with questions, and ``out/README.md``; one line per source."""
    out.mkdir(parents=True, exist_ok=True)
    messages = []
    for source in sources:
        stem = source if isinstance(source, str) and source in CHAPTERS else Path(source).stem
        if not (isinstance(source, str) and source in CHAPTERS) and not chapter_questions(chapter_of(source)):
            messages.append(f"{source}: skipped (no questions in the bank for this chapter)")
            continue
        notebook = student_notebook(source)
        target = out / f"{stem}.ipynb"
        nbformat.write(notebook, target)
        messages.append(f"{source} -> {target}: {len(notebook.metadata[METADATA_KEY]['questions'])} question(s)")
    (out / "README.md").write_text(README)
    return messages
