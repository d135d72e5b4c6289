r"""Which answers of a class look copied: from each other, or from the book's published solutions.

Each answer cell is normalised before it is compared: parsed, docstrings dropped, every name the cell binds (functions,
arguments, variables, imports) renamed in order of first use, and printed again (``ast.unparse``), so renaming,
reformatting and comments change nothing. Two answers are compared by the Jaccard index of their sets of token 5-grams,
:math:`|A \cap B| / |A \cup B|` (MOSS's idea, without its winnowing): 1 for the same program. A pair at or above the
threshold is flagged, and so is an answer that matches the bank's own solution, which the full book publishes.
Unanswered cells (the stub) and very short answers are left out: short correct answers agree by necessity.
"""

from __future__ import annotations

import ast
import io
import tokenize
from dataclasses import dataclass
from itertools import combinations

from .questions import AutoQuestion

__all__ = []  # internal to xorlib.coursework; its results reach the gradebook's notes and the class report

#: Default threshold of the Jaccard index above which two answers are flagged.
THRESHOLD = 0.8
_MIN_TOKENS = 40
_N = 5


class _Renamer(ast.NodeTransformer):
    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def _new(self, name: str) -> str:
        return self.names.setdefault(name, f"v{len(self.names)}")

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.name = self._new(node.name)
        skip = 1 if ast.get_docstring(node, clean=False) is not None else 0  # the docstring
        node.body = node.body[skip:] or [ast.Pass()]
        return self.generic_visit(node)

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg, node.annotation = self._new(node.arg), None
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Store) or node.id in self.names:
            node.id = self._new(node.id)
        return node

    def visit_alias(self, node: ast.alias) -> ast.AST:
        node.asname = self._new(node.asname or node.name.split(".")[0])
        return node


def fingerprint(source: str) -> frozenset[tuple[str, ...]]:
    """The set of token 5-grams of the normalised answer (empty when too short to compare)."""
    try:
        tree = ast.parse(source)
        renamer = _Renamer()
        renamer.visit(ast.parse(source))  # first pass: every bound name, so that uses before binding rename too
        text = ast.unparse(renamer.visit(tree))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        text = source
    try:
        tokens = [t.string for t in tokenize.generate_tokens(io.StringIO(text).readline)
                  if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)]  # fmt: skip
    except (tokenize.TokenError, IndentationError, SyntaxError):
        tokens = text.split()
    if len(tokens) < _MIN_TOKENS:
        return frozenset()
    return frozenset(tuple(tokens[k : k + _N]) for k in range(len(tokens) - _N + 1))


def jaccard(a: frozenset, b: frozenset) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


@dataclass(frozen=True)
class Similarity:
    """The flags of a class: ``pairs`` ``(question, student, student, index)`` and ``book`` ``(question, student,
    index)`` (matches with the published solution), each at or above ``threshold``."""

    pairs: tuple[tuple[str, str, str, float], ...]
    book: tuple[tuple[str, str, float], ...]
    threshold: float

    def notes(self, student: str) -> list[str]:
        """The gradebook notes of one student."""
        found = [f"{q}: the book's published solution ({s:.2f})" for q, who, s in self.book if who == student]
        partners: dict[str, list[tuple[float, str]]] = {}
        for q, a, b, s in self.pairs:
            if student in (a, b):
                partners.setdefault(q, []).append((s, b if a == student else a))
        for q, alike in partners.items():
            alike.sort(reverse=True)
            names = ", ".join(f"{who} ({s:.2f})" for s, who in alike[:3])
            found.append(f"{q}: like {names}" + (f" and {len(alike) - 3} more" if len(alike) > 3 else ""))
        return found

    def markdown(self) -> str:
        """The class report, in Markdown."""
        lines = ["# Similar answers", "", f"Answers compared after normalising names, formatting and comments; "
                 f"flagged at a Jaccard index of token 5-grams of {self.threshold:g} or more.", ""]  # fmt: skip
        lines += ["## Matches with the book's published solutions", ""]
        lines += [f"- {q}: {who} ({s:.2f})" for q, who, s in self.book] or ["- none"]
        lines += ["", "## Pairs of students", ""]
        lines += [f"- {q}: {a} and {b} ({s:.2f})" for q, a, b, s in self.pairs] or ["- none"]
        return "\n".join(lines) + "\n"


def compare_class(answers: dict[str, dict[str, str]], questions: list[AutoQuestion], threshold: float) -> Similarity:
    """Flag the pairs of ``answers`` (``{student: {question id: answer cell}}``) and the matches with the solutions."""
    pairs, book = [], []
    for q in questions:
        stub = fingerprint(q.student_source())
        prints = {s: f for s, a in answers.items() if q.id in a and (f := fingerprint(a[q.id])) and f != stub}
        solution = fingerprint(q.answer_source())
        book += [(q.id, s, round(j, 3)) for s, f in prints.items() if (j := jaccard(f, solution)) >= threshold]
        pairs += [(q.id, a, b, round(j, 3)) for a, b in combinations(sorted(prints), 2)
                  if (j := jaccard(prints[a], prints[b])) >= threshold]  # fmt: skip
    return Similarity(tuple(pairs), tuple(book), threshold)
