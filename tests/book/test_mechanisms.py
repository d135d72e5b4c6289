"""The book's mechanisms, proved on the fixture book (``tests/book/fixtures/``), built with the book's configuration.

* ``{eval}`name``` shows the value the chapter computed, even from a ``remove-cell`` cell just above the prose, and
  the value is recorded in the executed notebook (jupyterlab-myst's ``user_expressions``);
* ``tools/glue_to_eval.py`` turns glue into that convention (its output is a page of the fixture book);
* a folded proof reads "Proof" once, and an empty "Exercises" heading is dropped;
* the reader's export is plain Markdown (no MyST left), with links into the online book, values in place and an
  install cell; downloaded from the served site, it runs in a fresh environment that gets xorlib only from the
  site's wheel;
* the single-page build replays the executed notebooks (nothing runs twice) and refuses stale ones; printed, it
  is a PDF with every page, proofs unfolded and nothing past the margin.

The last two run in ``make notebooks`` (marker ``notebooks``), not in ``make test``: there the real book proves the
same mechanisms (``test_downloads.py`` runs chapter 1's download in a fresh environment from the served site;
``make pdf`` replays the executed notebooks and ``test_pdf.py`` reads the printed pages), and the fixture's copies
would cost about two minutes of the suite's CPU time.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT, build, make_fixture_book

import xorlib

sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "_ext"))

import glue_to_eval
import xorlib_export

pytestmark = pytest.mark.timeout(900)


# --- the converter, without a build -------------------------------------------------------------------------------


def test_the_converter_turns_glue_into_variables_and_eval_roles() -> None:
    before = (FIXTURES / "glue" / "before.md").read_text()
    after, report = glue_to_eval.convert(before, glue_to_eval.book_macros(ROOT / "_config.yml"))
    assert after == (FIXTURES / "glue" / "after.md").read_text()
    assert report.names == {"d_e": "d_e_text", "fx_loss": "fx_loss"} and report.complete
    assert "glue(" not in after and "{glue" not in after and after.count("{eval}`fx_loss`") == 2
    again, report = glue_to_eval.convert(after, glue_to_eval.book_macros(ROOT / "_config.yml"))
    assert again == after and not report.names  # idempotent


def test_the_converter_reports_what_it_cannot_convert() -> None:
    text = (
        "Early: {glue:text}`late`.\n\n```{code-cell} ipython3\nfor k, v in {'a': 1}.items():\n"
        "    glue(k, v, display=False)\nglue('late', 2, display=False)\n```\n\n{glue:text}`late:.2f`\n"
    )
    converted, report = glue_to_eval.convert(text)
    assert not report.complete
    found = " | ".join(report.manual)
    assert "not a literal" in found and "used before the cell" in found and "format spec" in found, found
    assert "late = 2" in converted and "{eval}`late`" in converted


# --- the built fixture book ---------------------------------------------------------------------------------------


def _page(book: Path, name: str) -> str:
    return (book / "_build" / "html" / "chapters" / f"{name}.html").read_text()


def test_eval_roles_show_the_values_the_chapter_computed(fixture_book: Path) -> None:
    page = _page(fixture_book, "fixture_theory")
    assert "{eval}" not in page and "NameError" not in page
    assert re.search(r"At <span[^>]*>\\\(d =\\\)</span> <span[^>]*>8</span>", page), "the value of fx_d"
    glued = _page(fixture_book, "fixture_glue")
    assert "12,345" in glued and "5.7 × 10⁻⁷" in glued
    executed = json.loads(
        (fixture_book / "_build" / "jupyter_execute" / "chapters" / "fixture_theory.ipynb").read_text()
    )
    records = [c["metadata"]["user_expressions"] for c in executed["cells"] if "user_expressions" in c["metadata"]]
    assert records and records[0][0] == {
        "expression": "fx_d",
        "result": {"status": "ok", "data": {"text/plain": "'8'"}, "metadata": {}},
    }


def test_a_folded_proof_reads_proof_once_and_empty_exercise_headings_go(fixture_book: Path) -> None:
    page = _page(fixture_book, "fixture_theory")
    fold = page[page.index("xorlib-proof") :][:600]
    assert '<p class="admonition-title">Proof</p>' in fold and "Proof. " not in fold
    assert 'class="proof' not in fold, "the proof keeps its own box inside the dropdown"
    headings = re.findall(r"<h2>Exercises<", page)
    assert len(headings) == 1, headings
    assert 'id="exercises"' in page, "the dropped heading's anchor moves to the one kept"
    assert "<h2>Exercises<" not in _page(fixture_book, "fixture_plain")


def test_the_reader_export_is_plain_markdown_that_links_into_the_book(fixture_book: Path) -> None:
    path = fixture_book / "_build" / "html" / "_sources" / "chapters" / "fixture_theory.ipynb"
    notebook = json.loads(path.read_text())
    assert xorlib_export.raw_myst(notebook) == []
    first = notebook["cells"][0]
    assert first["cell_type"] == "code" and "pip" in "".join(first["source"])
    text = "\n".join("".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "markdown")
    base = "https://sparse-xor-book.github.io/sparse-xor-book/"
    assert f"[Theorem 1]({base}chapters/fixture_theory.html#fx-thm)" in text
    assert f"[Fig. 1]({base}chapters/fixture_theory.html#fx-figure)" in text
    assert "> **Theorem 1** (A fixture theorem)." in text and "*Proof.* Linearity" in text
    assert "At $d =$ 8 the worst loss" in text and r"\E" not in text and r"\mathbb{E}" in text
    assert "still\nglues: forty-two." in text
    assert text.count("## Exercises") == 1
    code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    shown = [c for c in code if "print(" in "".join(c["source"]) or "subplots()" in "".join(c["source"])]
    assert len(shown) == 2 and all(c.get("outputs") for c in shown), "the export keeps the outputs"
    assert (
        fixture_book / "_build" / "html" / "_static" / "wheels" / f"xorlib-{xorlib.__version__}-py3-none-any.whl"
    ).is_file()


def test_the_export_converts_every_construct_the_chapters_use() -> None:
    targets = {("ref", "sec"): xorlib_export.Target("Setting", "B/ch.html#sec")}
    book = xorlib_export.Book(
        base_url="B/",
        resolve=lambda role, target: (
            targets.get((role, target))
            or (xorlib_export.Target(f"`{target}`", f"B/api.html#{target}") if role.startswith("py:") else None)
        ),
        number=lambda label: "4" if label == "ex" else "",
        macros={"E": r"\mathbb{E}"},
        source_dir=ROOT / "chapters",
        wheel="w.whl",
    )
    text = (
        "(sec)=\n## A\n\nSee {ref}`the setting <sec>` and {py:func}`xorlib.one_step`; `{ref}` in code stays;"
        " {cite}`a2020,b2021`; $\\E x$, $\\Eta$.\n\n::::{exercise} Title\n:label: ex\n\nDo it.\n::::\n\n"
        "```{literalinclude} ../xorlib/report.py\n:pyobject: in_words\n```\n\n"
        "$$\nx = 1\n$$ (eq-one)\n\n:::{admonition} Proof\n:class: dropdown\n```{prf:proof}\nBy $x$.\n```\n:::\n"
    )
    out = xorlib_export.convert_markdown(text, book, {}, {})
    assert '<a id="sec"></a>' in out and "[the setting](B/ch.html#sec)" in out
    assert "[`xorlib.one_step`](B/api.html#xorlib.one_step)" in out and "`{ref}`" in out
    assert "[a2020, b2021]" in out and r"$\mathbb{E} x$, $\Eta$" in out
    assert "> **Exercise 4** (Title)." in out and "> Do it." in out
    assert "```python\ndef in_words(count: int) -> str:" in out
    assert "$$ (eq-one)" not in out and "*Proof.* By $x$. ∎" in out and "Proof." not in out.replace("*Proof.*", "")
    with pytest.raises(xorlib_export.ExportError, match="no such target"):
        xorlib_export.convert_markdown("{ref}`nowhere`", book, {}, {})


def test_the_export_includes_what_the_book_shows_of_a_file() -> None:
    book = xorlib_export.Book("B/", lambda role, target: None, lambda _: "", {}, ROOT / "chapters", "w.whl")

    def export(options: str, path: str = "../xorlib/_loops.c") -> str:
        return xorlib_export.convert_markdown(f"```{{literalinclude}} {path}\n{options}```\n", book, {}, {})

    # chapter 11: the one-slot look-up and the split start's four-column histogram only, between their markers
    lookup = export(":language: c\n:start-at: /* One slot\n:end-before: /* Two slots\n")
    assert lookup.startswith("```c\n/* One slot") and "static void lookup_one(" in lookup
    assert "lookup_two" not in lookup and "#include" not in lookup
    histogram = export(":language: c\n:start-at: /* Built by GCC for glibc\n:end-before: /* The codes' bytes\n")
    assert "void xorlib_histogram_squares(" in histogram and "void xorlib_histogram(" not in histogram
    assert "#define BOTH_WIDTHS" in histogram  # the macro the loop is built with, shown with it
    assert "xorlib_transpose" not in histogram and "#ifdef __SSE2__" not in histogram
    chapter = (ROOT / "chapters" / "11_performance.md").read_text()
    assert ":start-at: /* One slot" in chapter and ":start-at: /* Built by GCC for glibc" in chapter
    # chapter 2: a method, dedented as the book shows it
    method = export(":language: python\n:pyobject: TwoHeadModel.forward\n:dedent:\n", "../xorlib/model.py")
    assert method.startswith("```python\n@public\ndef forward(")
    with pytest.raises(xorlib_export.ExportError, match="does not apply"):
        export(":emphasize-lines: 2\n")
    with pytest.raises(xorlib_export.ExportError, match="is in no line"):
        export(":start-at: no such marker\n")


def test_a_figures_caption_becomes_a_visible_converted_cell_below_it() -> None:
    """Plain Jupyter never shows ``mystnb.figure``: the download puts the caption under the figure, roles resolved."""
    targets = {("prf:ref", "thm"): xorlib_export.Target("Theorem 5", "B/ch.html#thm")}
    targets[("numref", "fig-x")] = xorlib_export.Target("Fig. 3", "B/ch.html#fig-x")
    book = xorlib_export.Book("B/", lambda role, target: targets.get((role, target)), lambda _: "", {}, ROOT, "w.whl")
    figure = {"name": "fig-x", "caption": "The floor that {prf:ref}`thm`\n  proves."}
    notebook = {
        "cells": [{"cell_type": "code", "metadata": {"mystnb": {"figure": figure}}, "source": "plot()", "outputs": []}],
        "metadata": {},
    }
    out = xorlib_export.export(notebook, book)
    caption = out["cells"][2]
    assert (
        caption["cell_type"] == "markdown"
        and caption["source"] == "*Fig. 3. The floor that [Theorem 5](B/ch.html#thm) proves.*"
    )
    assert (
        out["cells"][1]["metadata"]["mystnb"]["figure"]["caption"]
        == "The floor that [Theorem 5](B/ch.html#thm) proves."
    )
    assert "{prf:" in figure["caption"], "the executed notebook itself is not changed"
    assert xorlib_export.raw_myst(out) == []


@pytest.mark.slow
@pytest.mark.notebooks
def test_a_downloaded_chapter_runs_in_a_fresh_environment_from_the_served_site(
    fixture_book: Path, serve: object, tmp_path: Path
) -> None:
    from _downloads import fresh_environment, installed_from, run_downloaded

    site = serve(fixture_book / "_build" / "html")
    python = fresh_environment(tmp_path)
    download = tmp_path / "fixture_theory.ipynb"
    import urllib.request

    with urllib.request.urlopen(f"{site.url}_sources/chapters/fixture_theory.ipynb", timeout=30) as reply:
        download.write_bytes(reply.read())
    executed = run_downloaded(python, download, site.url, tmp_path / "run")
    assert xorlib_export.raw_myst(executed) == []
    errors = [
        o for c in executed["cells"] if c["cell_type"] == "code" for o in c["outputs"] if o["output_type"] == "error"
    ]
    assert not errors, errors
    assert installed_from(python) == f"{site.url}_static/wheels/xorlib-{xorlib.__version__}-py3-none-any.whl"


@pytest.mark.slow
@pytest.mark.notebooks
def test_the_single_page_build_replays_the_executed_notebooks_and_prints(fixture_book: Path, tmp_path: Path) -> None:
    import _pdf_checks

    replay = {"XORLIB_BOOK_REPLAY": str(fixture_book / "_build" / "jupyter_execute"), "XORLIB_CACHE": "/nonexistent"}
    build(fixture_book, "--builder", "custom", "--custom-builder", "singlehtml", env=replay)
    single = fixture_book / "_build" / "singlehtml" / "intro.html"
    text = single.read_text()
    assert "the worst loss after one step is" in text and "12,345" in text
    assert "still glues: forty-two" in re.sub(r"<[^>]+>|\s+", lambda m: " " if m[0].isspace() else "", text)
    assert "Starting inline execution client" not in text
    pdf = _pdf_checks.print_book(single, tmp_path / "book.pdf")
    report = _pdf_checks.inspect(pdf)
    assert report.missing(["A fixture chapter", "A page without code", "Glue, before the conversion"]) == []
    assert report.click_to_show == [] and report.past_margin == [] and report.grey_images == [], report
    assert "Linearity of" in report.text, "the folded proof is printed unfolded"

    stale = make_fixture_book(tmp_path / "stale")
    shutil.copytree(fixture_book / "_build" / "jupyter_execute", tmp_path / "executed")
    page = stale / "chapters" / "fixture_theory.md"
    page.write_text(page.read_text().replace("seed=0", "seed=1"))
    with pytest.raises(pytest.fail.Exception, match="run `make book` again"):
        build(stale, "--builder", "custom", "--custom-builder", "singlehtml",
              env={"XORLIB_BOOK_REPLAY": str(tmp_path / "executed")})  # fmt: skip
