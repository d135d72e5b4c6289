"""Small Sphinx additions for the book (loaded from ``_config.yml``, ``sphinx.local_extensions``).

* Every page made from a notebook gets a visible ``.ipynb`` button in its header that downloads the executed
  notebook (outputs included) for Jupyter or Colab; ``_static/xorlib.js`` makes it save rather than open the file.
  The notebook is ``_build/jupyter_execute/<page>.ipynb`` with its outputs restored from jupyter-cache when the
  chapter was not re-run (myst-nb 1.4 writes that file without them then, and sphinx-book-theme's own ".ipynb"
  menu entry would offer a notebook with no outputs).
* A page whose only maths sits in cell outputs (the header of an :func:`xorlib.report.html_table`) loads MathJax,
  which Sphinx otherwise leaves out of pages without equations.
* sphinx-thebe 0.3.1 adds its inline configuration script (``const THEBE_JS_URL = ...``) after the builder has
  started, so Sphinx 7 holds it twice, once as a file name ``None`` and once as ``""``, and writes it twice into
  every page: the second ``const`` is a script error on every page (sphinx-togglebutton's inline script is doubled
  the same way, harmlessly). Only the first copy of each inline script is kept.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx

__version__ = "1.0"


def _executed_notebook(app: Sphinx, pagename: str) -> str | None:
    """The executed notebook of a page, as JSON text (None for a page that is not a notebook).

    myst-nb writes ``_build/jupyter_execute/<page>.ipynb``, but when the outputs come from jupyter-cache (an
    unchanged chapter) it writes the notebook it read, without them; the outputs are then merged back from the
    cache, as myst-nb itself does when it renders the page.
    """
    import nbformat

    folder = Path(app.outdir).parent / "jupyter_execute"
    path = folder / f"{pagename}.ipynb"
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8")
    notebook = nbformat.reads(text, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    if not code or any(cell.get("outputs") for cell in code):
        return text
    config = getattr(app.env, "mystnb_config", None)
    cache_path = Path(getattr(config, "execution_cache_path", "") or Path(app.outdir).parent / ".jupyter_cache")
    if getattr(config, "execution_mode", None) != "cache" or not cache_path.is_dir():
        return text
    from jupyter_cache import get_cache

    try:
        _, merged = get_cache(cache_path).merge_match_into_notebook(notebook)
    except KeyError:  # not in the cache (excluded from execution): the notebook as it is
        return text
    return nbformat.writes(merged)


def add_notebook_button(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    """A top-level "download the executed notebook" button for pages built from notebooks."""
    if doctree is None or "header_buttons" not in context:
        return
    notebook = _executed_notebook(app, pagename)
    if notebook is None:
        return
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(notebook, encoding="utf-8")  # also the file of the theme's own ".ipynb" menu entry
    context["ipynb_source"] = f"{pagename}.ipynb"
    url = f"{context['pathto']('_sources', 1)}/{context['ipynb_source']}"
    context["header_buttons"].insert(
        0,
        {
            "type": "link",
            "url": url,
            "text": ".ipynb",
            "icon": "fas fa-download",
            "tooltip": "Download this chapter as a Jupyter notebook, with its outputs",
            "label": "download-ipynb-button",
        },
    )


def drop_duplicate_scripts(
    app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any
) -> None:
    """Keep one copy of each inline script (sphinx-thebe's configuration is added once per read phase)."""
    scripts = context.get("script_files")
    if not scripts:
        return
    seen: set[tuple[object, ...]] = set()
    kept = []
    for script in scripts:
        attributes = getattr(script, "attributes", None)
        if attributes is None:  # an old-style plain file name
            kept.append(script)
            continue
        # The two copies differ only in their file name, None and "" (added to the builder, and by the registry).
        key = (script.filename or "", script.priority, *sorted((k, str(v)) for k, v in attributes.items()))
        if key in seen:
            continue
        seen.add(key)
        kept.append(script)
    context["script_files"] = kept


def load_mathjax_for_outputs(app: Sphinx, doctree: nodes.document) -> None:
    """Pages whose only maths is in cell outputs (an ``html_table`` header, say) load MathJax too."""
    domain = app.env.get_domain("math")
    docname = app.env.docname
    if domain.data["has_equations"].get(docname):
        return
    for raw in doctree.findall(nodes.raw):
        if "html" in raw.get("format", "") and ('class="math' in raw.astext() or "mathjax_process" in raw.astext()):
            domain.data["has_equations"][docname] = True
            return


def unfold_folded_proofs(app: Sphinx, doctree: nodes.document) -> None:
    """A proof folded in a "Proof" dropdown reads "Proof" once, in one box.

    The chapters fold each proof as ``:::{admonition} Proof`` (class ``dropdown``) around ``{prf:proof}``, whose
    directive starts its text with "Proof. " inside a box of its own: unfolded, the reader saw "Proof. Proof." in
    a double border. The inner box is dissolved into the dropdown and its "Proof. " dropped; the dropdown gets the
    class ``xorlib-proof`` (printed unfolded, see ``_static/xorlib.css``).
    """
    try:
        from sphinx_proof.nodes import proof_node
    except ImportError:  # pragma: no cover - sphinx-proof is pinned
        return
    for box in list(doctree.findall(nodes.admonition)):
        if "dropdown" not in box["classes"]:
            continue
        body = [child for child in box.children if not isinstance(child, nodes.title)]
        if len(body) != 1 or not isinstance(body[0], proof_node):
            continue
        inner = body[0].next_node(nodes.admonition)
        if inner is None:
            continue
        first = inner.next_node(nodes.Text)
        if first is not None and str(first).startswith("Proof. "):
            first.parent.replace(first, nodes.Text(str(first)[len("Proof. ") :]))
        box.replace(body[0], list(inner.children))
        box["classes"].append("xorlib-proof")


def _is_empty_section(section: nodes.section) -> bool:
    """A section with nothing but its title, comments (``<!-- ... -->`` too) and link targets."""
    ignorable = (nodes.title, nodes.comment, nodes.target, nodes.substitution_definition)

    def empty(child: nodes.Node) -> bool:
        if isinstance(child, nodes.raw):
            return not re.sub(r"<!--.*?-->", "", child.astext(), flags=re.DOTALL).strip()
        return isinstance(child, ignorable)

    return all(empty(child) for child in section.children)


def drop_empty_exercise_headings(app: Sphinx, doctree: nodes.document) -> None:
    """An "Exercises" section with no content is dropped; its ids (link targets) move to the next section.

    The coursework sync writes its own "Exercises" section after the chapter's hand-written heading, and a chapter
    without exercises keeps an empty one: the reader saw the heading twice, or a heading over nothing.
    """
    for section in list(doctree.findall(nodes.section)):
        title = section.next_node(nodes.title)
        if title is None or title.astext().strip() != "Exercises" or not _is_empty_section(section):
            continue
        parent = section.parent
        following = parent.index(section) + 1
        neighbour = parent[following] if following < len(parent) else None
        if isinstance(neighbour, nodes.section):
            neighbour["ids"] = [*section["ids"], *neighbour["ids"]]
            doctree.ids.update({i: neighbour for i in section["ids"]})
        else:
            for name in section["ids"]:
                doctree.ids.pop(name, None)
        parent.remove(section)


def html_handlers_for_singlehtml(app: Sphinx) -> None:
    """The single-page builder (``make pdf``) renders every node the HTML builder renders.

    Sphinx falls back to the ``html`` handlers only when no extension registered ``singlehtml`` ones; some do
    (sphinx-design), and then sphinx-proof's theorem nodes have no visitor at all.
    """
    if app.builder.name != "singlehtml":
        return
    handlers = app.registry.translation_handlers
    single = handlers.setdefault("singlehtml", {})
    for name, pair in handlers.get("html", {}).items():
        single.setdefault(name, pair)


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("builder-inited", html_handlers_for_singlehtml)
    app.connect("doctree-read", unfold_folded_proofs, priority=400)  # before the table of contents is collected
    app.connect("doctree-read", drop_empty_exercise_headings, priority=400)
    app.connect("doctree-read", load_mathjax_for_outputs, priority=600)  # after the maths domain's own count
    app.connect("html-page-context", add_notebook_button, priority=502)  # after the theme's buttons (501)
    app.connect("html-page-context", drop_duplicate_scripts, priority=900)
    return {"version": __version__, "parallel_read_safe": True, "parallel_write_safe": True}
