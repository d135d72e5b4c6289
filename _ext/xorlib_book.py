"""Small Sphinx additions for the book (loaded from ``_config.yml``, ``sphinx.local_extensions``).

* Every page made from a notebook gets a visible ``.ipynb`` button in its header that downloads the reader's
  export of the executed notebook (``_ext/xorlib_export.py``: plain Markdown, outputs and glued values in place,
  a first cell that installs xorlib from the wheel this build ships in ``_static/wheels/``), for Jupyter or
  Colab; ``_static/xorlib.js`` makes it save rather than open the file.
* The "Proof" dropdowns hold their proof once (no "Proof. Proof.", one border); an "Exercises" heading over
  nothing (the coursework sync's duplicate, or a chapter without exercises) is dropped.
* The single-page builder (``make pdf``) gets the HTML builder's node handlers.
* The chapters' kernels run the font probe (``_ext/font_probe.py``): figures carry their smallest font size, for
  the browser checks; ``import xorlib`` in a reader's kernel does nothing of the kind.
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


def book_url(app: Sphinx) -> str:
    """The online book's address: ``html_baseurl``, else the GitHub Pages site of ``repository.url``."""
    if app.config.html_baseurl:
        return app.config.html_baseurl.rstrip("/") + "/"
    repository = str((app.config.html_theme_options or {}).get("repository_url", "")).rstrip("/")
    match = re.fullmatch(r"https://github\.com/([^/]+)/([^/]+?)(\.git)?", repository)
    if not match:
        return repository + "/"
    owner, name = match[1], match[2]
    return f"https://{owner.lower()}.github.io/{name}/" if name.lower() != f"{owner.lower()}.github.io" else ""


def wheel_name(app: Sphinx) -> str:
    """The file name of xorlib's wheel (``xorlib-<version>-py3-none-any.whl``).

    The version is written once, as ``__version__`` in ``xorlib/__init__.py`` (``pyproject.toml`` reads it there);
    it is read from the source, not by importing the package.
    """
    import ast

    tree = ast.parse((Path(app.srcdir) / "xorlib" / "__init__.py").read_text())
    version = next(
        node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__version__" for t in node.targets)
    )
    return f"xorlib-{version}-py3-none-any.whl"


def build_wheel(app: Sphinx, exception: Exception | None) -> None:
    """xorlib's wheel into ``_static/wheels/`` of the built site, offline, for the downloads' install cell.

    pip builds it (setuptools, no build isolation, no index) from a copy of the package's files, so that nothing
    is written into the working tree.
    """
    import shutil
    import subprocess
    import sys
    import tempfile

    if exception is not None or app.builder.name != "html":
        return
    root = Path(app.srcdir)
    target = Path(app.outdir) / "_static" / "wheels"
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="xorlib-wheel-") as tmp:
        source = Path(tmp) / "src"
        source.mkdir()
        for name in ("pyproject.toml", "README.md", "LICENSE"):
            shutil.copy(root / name, source / name)
        # a pure wheel: no compiled loops built here for this machine (the package falls back to its tensor calls)
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "*.pyd")
        shutil.copytree(root / "xorlib", source / "xorlib", ignore=ignore)
        command = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index"]
        subprocess.run([*command, "--wheel-dir", str(Path(tmp) / "dist"), str(source)], check=True, timeout=300)
        (wheel,) = (Path(tmp) / "dist").glob("*.whl")
        if wheel.name != wheel_name(app):
            raise RuntimeError(f"pip built {wheel.name}, the downloads install {wheel_name(app)}")
        shutil.copy(wheel, target / wheel.name)


def _reference_resolver(app: Sphinx, docname: str) -> tuple[Any, Any]:
    """``resolve(role, target)`` and ``number(label)`` for :class:`xorlib_export.Book`, from the environment."""
    from xorlib_export import Target

    env = app.env
    base = book_url(app)
    std = env.get_domain("std")
    formats = app.config.numfig_format or {}

    def url(doc: str, anchor: str = "") -> str:
        return f"{base}{doc}.html" + (f"#{anchor}" if anchor else "")

    def number_in(doc: str, label: str) -> tuple[str, str] | None:
        for kind, numbers in env.toc_fignumbers.get(doc, {}).items():
            if label in numbers:
                return kind, ".".join(map(str, numbers[label]))
        return None

    def number(label: str) -> str:
        proof = getattr(env, "proof_list", {}).get(label)
        if proof is not None:
            if proof.get("nonumber"):
                return ""
            found = number_in(proof["docname"], label)
            return found[1] if found else ""
        found = std.anonlabels.get(label)
        if found is not None:
            numbered = number_in(found[0], found[1])
            return numbered[1] if numbered else ""
        return ""

    def resolve(role: str, target: str) -> Target | None:
        if role == "prf:ref":
            proof = getattr(env, "proof_list", {}).get(target)
            if proof is None:
                return None
            kind = proof["realtype"].title()
            return Target(f"{kind} {number(target)}".strip(), url(proof["docname"], target))
        if role == "eq":
            found = env.get_domain("math").equations.get(target)
            return None if found is None else Target(f"({found[1]})", url(found[0], f"equation-{target}"))
        if role == "doc":
            doc = str(Path(docname).parent / target) if not target.startswith("/") else target.lstrip("/")
            doc = str(Path(doc).with_suffix("")) if doc.endswith((".md", ".ipynb")) else doc
            title = env.titles.get(doc)
            return None if title is None else Target(title.astext(), url(doc))
        if role.startswith("py:"):
            entry = env.get_domain("py").objects.get(target)
            return None if entry is None else Target(f"`{target}`", url(entry.docname, entry.node_id))
        if role == "numref":
            found = std.anonlabels.get(target)
            if found is None:
                return None
            numbered = number_in(found[0], found[1])
            if numbered is None:
                return None
            kind, value = numbered
            text = formats.get(kind, "%s").replace("%s", value)
            return Target(text, url(found[0], found[1]))
        found = std.labels.get(target)
        if found is not None:
            return Target(found[2] or target, url(found[0], found[1]))
        proof = getattr(env, "proof_list", {}).get(target)  # {ref} to a statement
        if proof is not None:
            return Target(proof.get("title") or target, url(proof["docname"], target))
        anon = std.anonlabels.get(target)
        return None if anon is None else Target(target, url(anon[0], anon[1]))

    return resolve, number


def _glue_values(folder: Path, pagename: str) -> dict[str, str]:
    """The text of each value a page glued with ``myst_nb.glue`` (``{glue:text}``)."""
    import json

    path = folder / f"{pagename}.glue.json"
    if not path.is_file():
        return {}
    values = {}
    for key, output in json.loads(path.read_text(encoding="utf-8")).items():
        text = output.get("data", {}).get("text/plain")
        if isinstance(text, str):
            values[key] = text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"" else text
    return values


def reader_notebook(app: Sphinx, pagename: str) -> str | None:
    """The reader's export of a page's executed notebook, as JSON text (None for a page that is not a notebook)."""
    import nbformat
    from xorlib_export import Book, export

    folder = Path(app.outdir).parent / "jupyter_execute"
    path = folder / f"{pagename}.ipynb"
    if not path.is_file():
        return None
    notebook = nbformat.read(path, as_version=4)
    if not any(cell.cell_type == "code" for cell in notebook.cells):
        return None
    resolve, number = _reference_resolver(app, pagename)
    macros = ((app.config.mathjax3_config or {}).get("tex", {}) or {}).get("macros", {})
    needs = str(notebook.metadata.get("xorlib", {}).get("needs", ""))
    book = Book(
        base_url=book_url(app),
        resolve=resolve,
        number=number,
        macros=macros,
        source_dir=(Path(app.srcdir) / pagename).parent,
        wheel=wheel_name(app),
        needs=needs,
    )
    return nbformat.writes(nbformat.from_dict(export(notebook, book, _glue_values(folder, pagename))))


def add_notebook_button(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    """A top-level "download the notebook" button for pages built from notebooks: the reader's export."""
    if doctree is None or "header_buttons" not in context or app.builder.name != "html":
        return
    from sphinx.util import logging
    from xorlib_export import ExportError

    try:
        notebook = reader_notebook(app, pagename)
    except ExportError as error:
        logging.getLogger(__name__).warning(f"the reader's notebook of {pagename}: {error}", location=pagename)
        return
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
            "tooltip": "Download this chapter as a notebook that runs anywhere (Jupyter, Colab), with its outputs",
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


def install_font_probe(app: Sphinx, config: Any) -> None:
    """The chapters' kernels (started by this build) tag figures with their smallest font (``_ext/font_probe.py``).

    ``IPYTHONDIR`` of this process, which the kernels inherit, points at a throw-away profile whose startup file
    installs the probe; a reader's kernel never runs it.
    """
    import os
    import tempfile

    from font_probe import profile

    folder = Path(tempfile.mkdtemp(prefix="xorlib-ipython-"))
    os.environ["IPYTHONDIR"] = str(profile(folder))
    app.connect("build-finished", lambda app, exception: _remove(folder))


def _remove(folder: Path) -> None:
    import shutil

    shutil.rmtree(folder, ignore_errors=True)


#: Extensions of the build that do not declare whether they are safe for parallel reading, checked to be so.
#: ``sphinx_multitoc_numbering`` (Jupyter Book adds it to number chapters across parts) only replaces how the table
#: of contents assigns section numbers, which Sphinx does in the main process after every chapter has been read;
#: ``sphinx-mathjax-offline`` only points MathJax at its bundled copy and copies it at the end of the build;
#: ``sphinx_jupyterbook_latex`` only adds per-document transforms (no state shared between documents).
PARALLEL_SAFE_UNDECLARED = ("sphinx_multitoc_numbering", "sphinx-mathjax-offline", "sphinx_jupyterbook_latex")


def declare_parallel_safe(app: Sphinx) -> None:
    """Let Sphinx read (and so execute) chapters in parallel (``tools/jb_build.py``, ``-j``): without a declaration
    Sphinx assumes an extension is unsafe and reads serially."""
    for name in PARALLEL_SAFE_UNDECLARED:
        extension = app.extensions.get(name)
        if extension is not None and extension.parallel_read_safe is None:
            extension.parallel_read_safe = True
    # sphinx-proof declares itself parallel-safe but its domain has no merge_domaindata: its data is the empty
    # default (the statements live in env.proof_list, which sphinx-proof merges on env-merge-info itself).
    domain = app.registry.domains.get("prf")
    if domain is not None and "merge_domaindata" not in vars(domain):
        domain.merge_domaindata = lambda self, docnames, otherdata: None


def setup(app: Sphinx) -> dict[str, Any]:
    import sys

    sys.path.insert(0, str(Path(__file__).parent))  # xorlib_export, xorlib_eval
    app.connect("config-inited", install_font_probe)
    app.connect("builder-inited", html_handlers_for_singlehtml)
    app.connect("builder-inited", declare_parallel_safe)
    app.connect("build-finished", build_wheel)
    app.connect("doctree-read", unfold_folded_proofs, priority=400)  # before the table of contents is collected
    app.connect("doctree-read", drop_empty_exercise_headings, priority=400)
    app.connect("doctree-read", load_mathjax_for_outputs, priority=600)  # after the maths domain's own count
    app.connect("html-page-context", add_notebook_button, priority=502)  # after the theme's buttons (501)
    app.connect("html-page-context", drop_duplicate_scripts, priority=900)
    return {"version": __version__, "parallel_read_safe": True, "parallel_write_safe": True}
