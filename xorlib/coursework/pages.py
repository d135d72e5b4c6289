"""Each student's feedback page, as a self-contained HTML file and as Markdown: points, status and diagnosis of
every question, the total and the sandbox tier. Every text is escaped (it may quote the student's own code); a
hidden case appears only by its description and a fixed diagnosis, as in the report."""

from __future__ import annotations

import html
import re
from pathlib import Path

from .grading import GradeReport

__all__ = []  # internal to xorlib.coursework

_STYLE = """body{font:16px/1.5 system-ui,sans-serif;max-width:48rem;margin:2rem auto;padding:0 1rem;color:#222}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:1.6rem}pre{background:#f5f5f5;padding:.8rem;overflow-x:auto;
white-space:pre-wrap}.passed{color:#1a7f37}.lost{color:#b35900}table{border-collapse:collapse}td,th{padding:.2rem .6rem;
border-bottom:1px solid #ddd;text-align:left}"""


def html_page(student: str, reports: list[GradeReport]) -> str:
    """The feedback of ``student`` (all their graded notebooks) as one HTML page."""
    e = html.escape
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Feedback: {e(student)}</title>"
             f"<meta name='viewport' content='width=device-width,initial-scale=1'><style>{_STYLE}</style></head><body>",
             f"<h1>Feedback for {e(student)}</h1>"]  # fmt: skip
    for r in reports:
        parts.append(f"<p><b>{e(Path(r.notebook).name)}</b> ({e(r.chapter or 'unknown chapter')}): "
                     f"<b>{r.score}/{r.max_score}</b> points. Sandbox: {e(r.tier)}.</p>")  # fmt: skip
        if r.error:
            parts.append(f"<p class='lost'>Not graded: {e(r.error)}</p>")
        rows = "".join(f"<tr><td>{e(q.id)}</td><td>{e(q.title)}</td><td>{q.score}/{q.points}</td>"
                       f"<td class='{'passed' if q.status == 'passed' else 'lost'}'>{e(q.status)}</td></tr>"
                       for q in r.questions)  # fmt: skip
        parts.append(f"<table><tr><th>question</th><th>title</th><th>points</th><th>status</th></tr>{rows}</table>")
        for q in r.questions:
            parts.append(f"<h2>{e(q.id)}: {e(q.title)} ({q.score}/{q.points})</h2><pre>{e(q.feedback)}</pre>")
    if not reports:
        parts.append("<p>No submission was graded.</p>")
    return "\n".join([*parts, "</body></html>"]) + "\n"


def _fence(text: str) -> str:
    ticks = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    return f"{ticks}text\n{text}\n{ticks}"


def markdown_page(student: str, reports: list[GradeReport]) -> str:
    """The same page in Markdown (the feedback in fences longer than any run of backticks it holds)."""

    def plain(text: str) -> str:  # no Markdown or HTML from a student's file name
        return html.escape(text).replace("*", "\\*").replace("_", "\\_").replace("[", "\\[").replace("`", "\\`")

    lines = [f"# Feedback for {plain(student)}", ""] + ([] if reports else ["No submission was graded."])
    for r in reports:
        lines += [f"**{plain(Path(r.notebook).name)}** ({plain(r.chapter or 'unknown chapter')}): "
                  f"**{r.score}/{r.max_score}** points. Sandbox: {r.tier}.", ""]  # fmt: skip
        lines += [f"Not graded: {plain(r.error)}", ""] if r.error else []
        lines += ["| question | points | status |", "| --- | --- | --- |"]
        lines += [f"| {q.id} {plain(q.title)} | {q.score}/{q.points} | {q.status} |" for q in r.questions]
        for q in r.questions:
            lines += ["", f"## {q.id}: {plain(q.title)} ({q.score}/{q.points})", "", _fence(q.feedback)]
        lines.append("")
    return "\n".join(lines) + "\n"
