"""Turn a chapter's ``glue(...)`` + ``{glue:text}`` into the book's convention: a variable + ``{eval}``.

``glue("tied_worst", as_power(x), display=False)`` in a hidden cell becomes ``tied_worst = as_power(x)``, and
every ``{glue:text}`tied_worst``` in the prose becomes ``{eval}`tied_worst```: the book shows the value (myst-nb's
inline execution, ``_ext/xorlib_eval.py``), and so does JupyterLab once the cell has run (jupyterlab-myst). See
``tools/CONVENTIONS.md``.

* A key that is already a Python name in the chapter (``glue("d_e", f"{d_e:,}")``) becomes ``<key>_text``.
* ``from myst_nb import glue`` goes once no ``glue(`` is left.
* ``--macros`` also puts the book's maths macros (``_config.yml``) in a hidden first markdown cell, where
  jupyterlab-myst reads them (``math:`` front matter).
* Not converted, and reported (exit status 1): a ``glue`` whose key is not a literal (a loop over a dict), a
  ``{glue:text}`` with a format spec, and any use of a value *before* the cell that computes it (glue allowed
  that; ``{eval}`` reads the kernel as it is at that point of the chapter, so move the cell up).

Usage: ``python tools/glue_to_eval.py chapters/NN_name.md [...] [--write] [--macros]``
(without ``--write`` it prints what it would do).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import keyword
import re
import sys
from pathlib import Path

CODE_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)
GLUE_ROLE = re.compile(r"\{glue(?::text|:|)\}`(?P<key>[^`]*)`")
GLUE_IMPORT = re.compile(r"^from myst_nb import glue[ \t]*\n(?:[ \t]*\n)?", re.M)
MACROS_CELL = '+++ {{"tags": ["remove-cell"]}}\n\n---\nmath:\n{entries}---\n\n+++\n\n'


@dataclasses.dataclass
class Report:
    """What a conversion did and what it left for a person."""

    names: dict[str, str] = dataclasses.field(default_factory=dict)  # key -> variable
    manual: list[str] = dataclasses.field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.manual


def _cell_source(body: str) -> tuple[str, str]:
    """A code cell's option lines (``:tags:`` or a ``---`` block) and its source."""
    lines = body.splitlines(keepends=True)
    k = 0
    if lines and lines[0].strip() == "---":
        k = next((j for j in range(1, len(lines)) if lines[j].strip() == "---"), 0) + 1
    else:
        while k < len(lines) and re.match(r"^:[\w-]+:", lines[k]):
            k += 1
    return "".join(lines[:k]), "".join(lines[k:])


def _names(source: str) -> set[str]:
    """Every Python name a cell binds or reads (empty when it is not plain Python: magics)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            found.add(node.name)
        elif isinstance(node, ast.arg):
            found.add(node.arg)
        elif isinstance(node, ast.alias):
            found.add((node.asname or node.name).split(".")[0])
    return found


def _identifier(key: str, taken: set[str]) -> str:
    name = re.sub(r"\W", "_", key)
    if not name.isidentifier() or keyword.iskeyword(name):
        name = f"glued_{name}"
    if name in taken:
        name = f"{name}_text"
    base, k = name, 2
    while name in taken:
        name, k = f"{base}{k}", k + 1
    return name


def _glue_calls(source: str) -> list[ast.Expr] | None:
    """The statements ``glue(...)`` of a cell, or None when the cell does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    calls = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id == "glue"
        ):
            calls.append(node)
    return calls


def convert(text: str, macros: dict[str, str] | None = None) -> tuple[str, Report]:
    """The chapter ``text`` with glue turned into variables and ``{eval}``, and what was done or left."""
    report = Report()
    cells = list(CODE_CELL.finditer(text))
    taken: set[str] = set()
    for cell in cells:
        taken |= _names(_cell_source(cell["body"])[1])
    taken.discard("glue")
    defined_at: dict[str, int] = {}
    pieces, last = [], 0
    for cell in cells:
        options, source = _cell_source(cell["body"])
        calls = _glue_calls(source)
        if calls is None:
            if "glue(" in source:
                report.manual.append(f"a cell at offset {cell.start()} calls glue but is not plain Python")
            continue
        if not calls:
            continue
        lines = source.splitlines(keepends=True)
        for call in sorted(calls, key=lambda c: c.lineno, reverse=True):
            arguments = call.value.args
            if not arguments or not isinstance(arguments[0], ast.Constant) or not isinstance(arguments[0].value, str):
                report.manual.append(
                    f"line {_line(text, cell.start(), call.lineno)}: glue with a key that is not a literal"
                )
                continue
            if len(arguments) < 2:
                report.manual.append(f"line {_line(text, cell.start(), call.lineno)}: glue without a value")
                continue
            key = arguments[0].value
            name = report.names.get(key) or _identifier(key, taken)
            taken.add(name)
            report.names[key] = name
            defined_at[key] = cell.start()
            value = ast.get_source_segment(source, arguments[1])
            indent = re.match(r"[ \t]*", lines[call.lineno - 1])[0]
            lines[call.lineno - 1 : call.end_lineno] = [f"{indent}{name} = {value}\n"]
        new_body = options + "".join(lines)
        body_start = cell.start("body")
        pieces.append(text[last:body_start])
        pieces.append(new_body)
        last = cell.end("body")
    pieces.append(text[last:])
    text = "".join(pieces)

    def role(match: re.Match[str]) -> str:
        key = match["key"]
        if ":" in key:
            report.manual.append(f"line {text.count(chr(10), 0, match.start()) + 1}: {match[0]} has a format spec")
            return match[0]
        if key not in report.names:
            report.manual.append(f"line {text.count(chr(10), 0, match.start()) + 1}: {match[0]} is glued nowhere here")
            return match[0]
        if match.start() < defined_at[key]:
            report.manual.append(
                f"line {text.count(chr(10), 0, match.start()) + 1}: {match[0]} is used before the cell that computes"
                " it: move that cell above the first use"
            )
        return f"{{eval}}`{report.names[key]}`"

    text = GLUE_ROLE.sub(role, text)
    code = "".join(_cell_source(c["body"])[1] for c in CODE_CELL.finditer(text))
    if "glue(" not in code:
        text = GLUE_IMPORT.sub("", text)
    if macros is not None and "\nmath:\n" not in text.split("\n+++\n", 2)[0]:
        text = _with_macros(text, macros)
    return text, report


def _line(text: str, cell_start: int, line_in_cell: int) -> int:
    return text.count("\n", 0, cell_start) + 1 + line_in_cell  # the fence line, then the cell's lines


def _with_macros(text: str, macros: dict[str, str]) -> str:
    """The macros cell, right after the front matter."""
    entries = "".join(f"  '\\{name}': '{definition}'\n" for name, definition in macros.items())
    cell = MACROS_CELL.format(entries=entries)
    if text.startswith("---\n"):
        end = text.index("\n---\n", 4) + len("\n---\n")
        return text[:end] + "\n" + cell + text[end:].lstrip("\n")
    return cell + text


def book_macros(config: Path) -> dict[str, str]:
    """The MathJax macros of ``_config.yml`` (``{"E": "\\mathbb{E}"}``)."""
    import yaml

    data = yaml.safe_load(config.read_text())
    return dict(data["sphinx"]["config"]["mathjax3_config"]["tex"]["macros"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="+", type=Path, help="chapter files (MyST Markdown notebooks)")
    parser.add_argument("--write", action="store_true", help="rewrite the files (default: report only)")
    parser.add_argument("--macros", action="store_true", help="add the hidden macros cell for JupyterLab")
    args = parser.parse_args(argv)
    macros = book_macros(Path(__file__).resolve().parents[1] / "_config.yml") if args.macros else None
    status = 0
    for path in args.chapters:
        converted, report = convert(path.read_text(encoding="utf-8"), macros)
        renamed = {k: v for k, v in report.names.items() if k != v}
        print(f"{path}: {len(report.names)} glued values" + (f", renamed {renamed}" if renamed else ""))
        for item in report.manual:
            print(f"  to do by hand: {item}")
        if args.write:
            path.write_text(converted, encoding="utf-8")
        status |= 0 if report.complete else 1
    return status


if __name__ == "__main__":
    sys.exit(main())
