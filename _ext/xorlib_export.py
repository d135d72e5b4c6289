"""The reader's notebook: a chapter's executed notebook, in Markdown that plain Jupyter and Colab render.

A chapter is MyST Markdown; Jupyter without jupyterlab-myst, and Colab, show MyST's directives and roles as
source. :func:`export` turns the executed notebook (``_build/jupyter_execute/<page>.ipynb``, outputs and the values
of its ``{eval}`` roles included) into one that reads as the book does:

* statements (``{prf:theorem}``, ``{prf:lemma}``, ..., exercises, admonitions) become titled blocks, numbered as in
  the book ("**Theorem 3** (Title)."), and proofs are unfolded ("*Proof.* ... ∎");
* ``{ref}``, ``{numref}``, ``{prf:ref}``, ``{eq}``, ``{doc}`` and the Python roles become links into the online book,
  with the text the book shows; ``(label)=`` becomes an anchor; ``{cite}`` becomes "[key]";
* ``{eval}`name``` and ``{glue:text}`name``` become the value the book shows; the book's maths macros are expanded;
* ``{literalinclude}`` becomes the code it includes (``:pyobject:``, the start and end options, ``:lines:``,
  ``:dedent:``; any other option is refused), so it needs no repository;
* a first cell installs ``xorlib`` from the wheel the online book ships, unless it is already installed.

Everything the conversion needs from the book (where a label points, its number, the base URL) comes through a
:class:`Book`; ``_ext/xorlib_book.py`` builds one from the Sphinx environment.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import re
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

#: Constructs of MyST that plain Markdown shows as source: none may remain in an export.
RAW_MYST = re.compile(r"\{prf:|:label:|\{ref\}|\{numref\}|\{glue:|\{eval\}|^\s*\([\w.:-]+\)=\s*$|^\s*:::+\{", re.M)

ADMONITIONS = {
    "note",
    "tip",
    "hint",
    "important",
    "warning",
    "caution",
    "attention",
    "danger",
    "error",
    "seealso",
    "admonition",
}


@dataclasses.dataclass(frozen=True)
class Target:
    """Where a cross-reference points and what the book writes for it."""

    text: str
    url: str


@dataclasses.dataclass
class Book:
    """What the export needs from the built book.

    Attributes
    ----------
    base_url
        The online book, ending in ``/`` (``https://owner.github.io/repo/``).
    resolve
        ``resolve(role, target)`` gives the :class:`Target` of a reference (role ``ref``, ``numref``, ``prf:ref``,
        ``eq``, ``doc``, ``py:func``, ...), or None when the book has no such label.
    number
        ``number(label)`` gives the number the book shows for a labelled statement or exercise ("3"), or "".
    macros
        Maths macros, ``{"E": r"\\mathbb{E}"}``.
    source_dir
        The chapter's folder, for ``{literalinclude}`` paths.
    wheel
        The wheel's file name under ``<base_url>_static/wheels/``.
    needs
        What the chapter needs beyond ``xorlib`` (said plainly in the first cell), or "".
    """

    base_url: str
    resolve: Callable[[str, str], Target | None]
    number: Callable[[str], str]
    macros: Mapping[str, str]
    source_dir: Path
    wheel: str
    needs: str = ""


class ExportError(ValueError):
    """A construct the export cannot turn into plain Markdown (an unknown label, say)."""


# --- inline roles -------------------------------------------------------------------------------------------------

ROLE = re.compile(r"\{(?P<role>[a-zA-Z][\w:.-]*)\}`(?P<body>[^`]*)`")
TITLED = re.compile(r"^(?P<text>.*?)\s*<(?P<target>[^<>]+)>$", re.S)


def _link(text: str, url: str) -> str:
    return f"[{text}]({url})"


def _role(match: re.Match[str], book: Book, values: Mapping[str, str], glue: Mapping[str, str]) -> str:
    role, body = match["role"], match["body"]
    if role == "eval":
        if body not in values:
            raise ExportError(f"{{eval}}`{body}` has no recorded value (was the chapter executed?)")
        return values[body]
    if role.startswith("glue"):
        name = body.split(":", 1)[0]
        if name not in glue:
            raise ExportError(f"{{glue}}`{name}` has no glued value")
        return glue[name]
    if role == "math":
        return f"${body}$"
    if role == "cite" or role.startswith("cite:"):
        return "[" + ", ".join(key.strip() for key in body.split(",")) + "]"
    if role in ("ref", "numref", "prf:ref", "eq", "doc", "any") or role.startswith("py:"):
        titled = TITLED.match(body)
        text, target = (titled["text"], titled["target"]) if titled else (None, body)
        if role.startswith("py:"):
            target = target.lstrip("~")
        found = book.resolve(role, target)
        if found is None and role.startswith("py:"):  # not documented: the book shows it as code, unlinked
            return f"`{text or target}`"
        if found is None:
            raise ExportError(f"{{{role}}}`{body}`: the book has no such target")
        shown = text or found.text
        if role == "numref" and text and "{number}" in text:
            shown = text.replace("{number}", found.text.split()[-1])
        if role.startswith("py:") and not text:
            shown = f"`{target.split('.')[-1] if body.startswith('~') else target}`"
        return _link(shown, found.url)
    if role in ("term", "abbr", "kbd", "guilabel", "sub", "sup", "code", "samp", "file"):
        return f"`{body}`" if role in ("kbd", "code", "samp", "file") else re.sub(r"\s*<[^<>]+>$", "", body)
    return body


INLINE = re.compile(r"\{(?P<role>[a-zA-Z][\w:.-]*)\}`(?P<body>[^`]*)`|(?P<code>(?P<ticks>`+)[^`].*?(?P=ticks))")


def _inline(text: str, book: Book, values: Mapping[str, str], glue: Mapping[str, str]) -> str:
    """Roles converted, left to right; inline code (a role's name inside backticks, say) left alone."""
    return INLINE.sub(lambda m: m["code"] if m["code"] else _role(m, book, values, glue), text)


def expand_macros(text: str, macros: Mapping[str, str]) -> str:
    r"""Every ``\NAME`` of ``macros`` replaced by its definition (``\E`` by ``\mathbb{E}``, not ``\Eta``)."""
    for name, definition in macros.items():
        text = re.sub(rf"\\{re.escape(name)}(?![A-Za-z])", lambda _m, d=definition: d, text)
    return text


# --- block directives ---------------------------------------------------------------------------------------------

FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|:{3,})\{(?P<name>[^}]+)\}[ \t]*(?P<argument>.*)$")


@dataclasses.dataclass
class Directive:
    name: str
    argument: str
    options: dict[str, str]
    body: list[str]


def _options(lines: list[str]) -> tuple[dict[str, str], list[str]]:
    """The ``:key: value`` lines (or a ``---`` YAML block) at the top of a directive, and the rest."""
    options: dict[str, str] = {}
    if lines and lines[0].strip() == "---":
        end = next((k for k in range(1, len(lines)) if lines[k].strip() == "---"), None)
        if end is not None:
            for line in lines[1:end]:
                key, _, value = line.partition(":")
                options[key.strip()] = value.strip()
            return options, lines[end + 1 :]
    k = 0
    while k < len(lines) and (match := re.match(r"^\s*:([\w-]+):\s*(.*)$", lines[k])):
        options[match[1]] = match[2].strip()
        k += 1
    return options, lines[k:]


def _blocks(lines: list[str]) -> list[str | Directive]:
    """Lines and the directives among them (their bodies still raw), at the top level."""
    out: list[str | Directive] = []
    k = 0
    while k < len(lines):
        match = FENCE.match(lines[k])
        if not match:
            out.append(lines[k])
            k += 1
            continue
        fence = match["fence"]
        close = re.compile(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        end = k + 1
        depth = 0
        while end < len(lines):
            inner = FENCE.match(lines[end])
            if inner and inner["fence"][0] == fence[0] and len(inner["fence"]) == len(fence):
                depth += 1
            elif close.match(lines[end]):
                if depth == 0:
                    break
                depth -= 1
            end += 1
        options, body = _options(lines[k + 1 : end])
        out.append(Directive(match["name"].strip(), match["argument"].strip(), options, body))
        k = end + 1
    return out


def _quote(lines: list[str]) -> list[str]:
    return [f"> {line}" if line.strip() else ">" for line in lines]


def _pyobject(source: str, name: str) -> str:
    """The source of ``name`` (``Class``, ``function``, ``Class.method``) in a module's text."""
    tree = ast.parse(source)
    scope: list[ast.stmt] = tree.body
    node: ast.AST | None = None
    for part in name.split("."):
        node = next(
            (
                n
                for n in scope
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == part
            ),
            None,
        )
        if node is None:
            raise ExportError(f"literalinclude: no {name!r} in the file")
        scope = getattr(node, "body", [])
    assert node is not None
    lines = source.splitlines()
    start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    return "\n".join(lines[start - 1 : node.end_lineno])


#: The options of ``{literalinclude}`` the export applies (in Sphinx's order: object, start, end, lines, dedent); any
#: other is refused rather than ignored, so that the reader's notebook never shows other code than the book.
LITERALINCLUDE_OPTIONS = (
    "pyobject", "start-after", "start-at", "end-before", "end-at", "lines", "dedent", "language", "caption",
)  # fmt: skip


def _cut(lines: list[str], marker: str, option: str, argument: str) -> int:
    """The index of the first line of ``lines`` that contains ``marker`` (Sphinx's start and end options)."""
    found = next((k for k, line in enumerate(lines) if marker in line), None)
    if found is None:
        raise ExportError(f"literalinclude {argument}: :{option}: {marker!r} is in no line")
    return found


def _literalinclude(directive: Directive, book: Book) -> list[str]:
    path = (book.source_dir / directive.argument).resolve()
    if not path.is_file():
        raise ExportError(f"literalinclude: {directive.argument} does not exist")
    options, argument = directive.options, directive.argument
    unknown = sorted(set(options) - set(LITERALINCLUDE_OPTIONS))
    if unknown:
        raise ExportError(f"literalinclude {argument}: the export does not apply {unknown}")
    text = path.read_text(encoding="utf-8")
    if "pyobject" in options:
        text = _pyobject(text, options["pyobject"])
    lines = text.splitlines()
    if "start-after" in options:
        lines = lines[_cut(lines, options["start-after"], "start-after", argument) + 1 :]
    if "start-at" in options:
        lines = lines[_cut(lines, options["start-at"], "start-at", argument) :]
    if "end-before" in options:
        lines = lines[: _cut(lines, options["end-before"], "end-before", argument)]
    if "end-at" in options:
        lines = lines[: _cut(lines, options["end-at"], "end-at", argument) + 1]
    if "lines" in options:
        chosen = []
        for part in options["lines"].split(","):
            first, _, last = part.strip().partition("-")
            chosen += lines[int(first) - 1 : int(last or first)]
        lines = chosen
    if "dedent" in options:  # a number of characters, or (no value) the common indentation, as Sphinx reads it
        width = options["dedent"].strip()
        lines = [line[int(width) :] for line in lines] if width else textwrap.dedent("\n".join(lines)).splitlines()
    text = "\n".join(lines)
    language = options.get("language", "python")
    caption = options.get("caption")
    head = [f"*{caption}*", ""] if caption else []
    return [*head, f"```{language}", *text.rstrip("\n").splitlines(), "```"]


def _title(kind: str, number: str, argument: str) -> str:
    head = f"**{kind}{' ' + number if number else ''}**"
    return f"{head} ({argument})." if argument else f"{head}."


def _directive(directive: Directive, book: Book, convert: Callable[[list[str]], list[str]]) -> list[str]:
    name, argument, options = directive.name, directive.argument, directive.options
    label = options.get("label") or options.get("name", "")
    anchor = [f'<a id="{label}"></a>', ""] if label else []
    if name in ("code-block", "code", "sourcecode"):
        return [f"```{argument}", *directive.body, "```"]
    if name == "literalinclude":
        return _literalinclude(directive, book)
    if name in ("math", "prf:equation"):
        return ["$$", *expand_macros("\n".join(directive.body), book.macros).splitlines(), "$$"]
    body = _strip_blank(convert(directive.body))
    if name == "prf:proof":
        return _proof(body)
    if name.startswith("prf:"):
        kind = name.split(":", 1)[1].title()
        return [*anchor, *_quote([_title(kind, book.number(label) if label else "", argument), "", *body])]
    if name in ("exercise", "solution"):
        if name == "solution":
            return [*anchor, *_quote(["**Solution.**", "", *body])]
        return [*anchor, *_quote([_title("Exercise", book.number(label) if label else "", argument), "", *body])]
    if name in ADMONITIONS:
        title = argument if name == "admonition" else name.title()
        if name == "admonition" and argument.strip().lower() == "proof":
            inner = _strip_blank(body)
            if inner[:1] and inner[0].startswith("*Proof.*"):
                return inner  # a folded {prf:proof}: unfolded, titled once
            return _proof(body)
        return [*anchor, *_quote([f"**{title}.**", "", *body])]
    if name == "figure":
        caption = " ".join(line.strip() for line in body if line.strip())
        return [*anchor, f"![{caption}]({book.base_url}{argument.lstrip('./')})", "", f"*{caption}*"]
    if name in ("tab-set", "tab-item", "card", "div", "container", "only", "margin", "sidebar", "epigraph"):
        return body
    if name in ("bibliography", "toctree", "contents", "tableofcontents", "glossary"):
        return [f"*See the online book: {book.base_url}*"] if name == "bibliography" else []
    return [*anchor, *([f"**{argument}**", ""] if argument else []), *body]


def _strip_blank(lines: list[str]) -> list[str]:
    while lines and not lines[0].strip():
        lines = lines[1:]
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


def _proof(body: list[str]) -> list[str]:
    """A proof, unfolded: "*Proof.* ... ∎"."""
    body = _strip_blank(body)
    if not body:
        return ["*Proof.* ∎"]
    body = [f"*Proof.* {body[0]}", *body[1:]]
    if re.match(r"^\s*(\$\$|```|>|\||<)", body[-1]):
        return [*body, "", "∎"]
    body[-1] += " ∎"
    return body


def convert_markdown(text: str, book: Book, values: Mapping[str, str], glue: Mapping[str, str]) -> str:
    """One markdown cell of MyST, as plain (CommonMark + maths) Markdown."""

    def convert(lines: list[str]) -> list[str]:
        out: list[str] = []
        for block in _blocks(lines):
            if isinstance(block, Directive):
                out += _directive(block, book, convert)
                continue
            line = block
            if match := re.match(r"^\s*\((?P<label>[\w.:-]+)\)=\s*$", line):
                out.append(f'<a id="{match["label"]}"></a>')
                continue
            if match := re.match(r"^(\$\$.*\$\$)\s*\([\w.:-]+\)\s*$", line):  # $$ ... $$ (label)
                line = match[1]
            elif match := re.match(r"^\$\$\s*\([\w.:-]+\)\s*$", line):  # closing $$ (label)
                line = "$$"
            out.append(_inline(line, book, values, glue))
        return out

    converted = "\n".join(convert(text.splitlines()))
    return _drop_empty_exercises(expand_macros(converted, book.macros))


EMPTY_EXERCISES = re.compile(
    r"^(#+) Exercises[ \t]*\n(?P<keep>(?:[ \t]*(?:<!--.*?-->|<a id=\"[^\"]*\"></a>)?[ \t]*\n)*?)"
    r"(?=[ \t]*(?:\1 |\Z))",
    re.M | re.S,
)


def _drop_empty_exercises(text: str) -> str:
    """An "Exercises" heading over nothing but comments and anchors (the book drops it too)."""
    return EMPTY_EXERCISES.sub(lambda m: m["keep"], text).rstrip() + ("\n" if text.endswith("\n") else "")


def install_cell(book: Book) -> dict[str, Any]:
    """The first cell: ``pip install`` the book's wheel from the online book, unless ``xorlib`` is importable."""
    lines = [
        "# This notebook needs xorlib, the book's package: installed here from the wheel the online book ships.",
        "# (Set XORLIB_BOOK_URL to install from another copy of the book.)",
        "import importlib.util",
        "import os",
        "import subprocess",
        "import sys",
        "",
        'if importlib.util.find_spec("xorlib") is None:',
        f'    book = os.environ.get("XORLIB_BOOK_URL", "{book.base_url}").rstrip("/")',
        f'    wheel = f"{{book}}/_static/wheels/{book.wheel}"',
        '    subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", wheel])',
    ]
    if book.needs:
        lines.insert(2, f"# This chapter also needs: {book.needs}")
    return {
        "cell_type": "code",
        "execution_count": None,
        "id": "xorlib-install",
        "metadata": {"tags": ["xorlib-install"]},
        "outputs": [],
        "source": "\n".join(lines),
    }


def export(notebook: dict[str, Any], book: Book, glue: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The reader's edition of an executed chapter notebook (a new notebook; ``notebook`` is not changed)."""
    from xorlib_eval import RECORD_KEY, recorded_values

    result = copy.deepcopy(notebook)
    cells = []
    for cell in result["cells"]:
        tags = cell.get("metadata", {}).get("tags", [])
        if cell["cell_type"] == "markdown":
            if "remove-cell" in tags:
                continue
            source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            cell["source"] = convert_markdown(source, book, recorded_values(cell), glue or {})
            cell["metadata"].pop(RECORD_KEY, None)
        cells.append(cell)
        caption = _figure_caption(cell, book, glue or {})
        if caption is not None:
            cells.append(caption)
    result["cells"] = [install_cell(book), *cells]
    result.setdefault("metadata", {}).pop("jupytext", None)
    return result


def _figure_caption(cell: dict[str, Any], book: Book, glue: Mapping[str, str]) -> dict[str, Any] | None:
    """A figure cell's caption (MyST in ``mystnb.figure``, which plain Jupyter never shows) as a markdown cell below
    it, numbered as the book numbers it; the metadata keeps the converted text, never raw roles."""
    figure = cell.get("metadata", {}).get("mystnb", {}).get("figure") if cell["cell_type"] == "code" else None
    if not isinstance(figure, dict) or not figure.get("caption"):
        return None
    figure["caption"] = _inline(" ".join(str(figure["caption"]).split()), book, {}, glue)
    number = book.resolve("numref", figure["name"]) if figure.get("name") else None
    return {
        "cell_type": "markdown",
        "metadata": {},
        "source": f"*{number.text + '. ' if number else ''}{figure['caption']}*",
    }


def raw_myst(notebook: Mapping[str, Any]) -> list[str]:
    """The raw MyST constructs left in a notebook's markdown cells (``[]`` for a clean export)."""
    found = []
    for k, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        text = re.sub(r"```.*?```|`[^`\n]*`", "", source, flags=re.S)  # not inside code
        found += [f"cell {k}: {m.group(0).strip()!r}" for m in RAW_MYST.finditer(text)]
    return found
