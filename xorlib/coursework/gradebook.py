"""A class at once: find the submissions, grade them in parallel, merge the written marks, flag copies, export.

Submissions are the ``.ipynb`` and MyST ``.md`` files under a folder (hidden folders and checkpoints skipped;
symbolic links refused, never followed). With a roster (CSV ``id,name,email``) a file belongs to the student whose
id or email is a word of its path; without one, to its first folder, or to its file name without the chapter's
name, copy numbers and "late". Several files of one student for one chapter: the latest by modification time is
graded, and the gradebook says which. :meth:`ClassReport.write` writes into ``OUT``:

``gradebook.csv``               a row per student: a column per question, totals, the weighted grade, notes;
``feedback/<id>.html``, ``.md`` each student's feedback page (every text escaped: it may quote the student's code);
``results/<id>.json``           each student's Gradescope ``results.json``;
``similarity.md``               the pairs of similar answers and the matches with the book's solutions;
``written_marks_template.csv``  a sheet for the written questions (fill it in, pass it back with ``--marks``);
``reports/<id>.json``           the reports themselves, for ``--only ID`` to regrade one student.
"""

from __future__ import annotations

import csv
import html
import io
import json
import math
import os
import re
import time
from collections import Counter
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from ..report import html_table
from .bank import CHAPTERS, chapter_questions
from .grading import (
    GradeReport,
    Grading,
    NotebookError,
    grade_path,
    gradescope_result,
    locate,
    notebook_chapter,
    read_notebook,
)
from .questions import AutoQuestion, WrittenQuestion
from .similarity import THRESHOLD, Similarity, compare_class

__all__ = []  # ClassReport is what grade_all returns; xorlib.coursework exports the functions

_SAFE = re.compile(r"[^A-Za-z0-9._@-]+")
_WORDS = re.compile(r"[\s/_()\[\],;-]+")


class MarksError(ValueError):
    """A marks, roster or config file names an unknown question or student, or a value out of range."""


def _csv_text(rows: list) -> str:
    """CSV text a spreadsheet shows as text: a leading ``= + - @``, tab or CR is quoted with ``'`` (no formulas)."""
    out = io.StringIO()
    safe = [["'" + v if isinstance(v, str) and v[:1] in "=+-@\t\r" and v else v for v in r] for r in rows]
    csv.writer(out, lineterminator="\n").writerows(safe)
    return out.getvalue()


@dataclass(frozen=True)
class Config:
    """A teacher's settings: ``points`` per question id, ``weights`` per chapter, the similarity ``threshold``."""

    points: dict = field(default_factory=dict)
    weights: dict = field(default_factory=dict)
    threshold: float = THRESHOLD

    @classmethod
    def read(cls, path: str | Path | None) -> Config:
        """Read a ``.toml`` or ``.json`` file: ``[points] "ch02-q1" = 4``, ``[weights] ch02 = 2``,
        ``similarity_threshold = 0.8`` (:class:`MarksError` naming the key for anything else)."""
        if path is None:
            return cls()
        path = Path(path)
        try:
            if path.suffix == ".toml":
                import tomllib
            data = (tomllib.loads if path.suffix == ".toml" else json.loads)(path.read_text(encoding="utf-8"))
        except ImportError:  # Python 3.10
            raise MarksError(f"{path}: reading TOML needs Python 3.11 or later; write the settings as .json") from None
        except ValueError as err:  # TOMLDecodeError and JSONDecodeError are ValueErrors
            raise MarksError(f"{path}: not a valid {path.suffix.lstrip('.') or 'JSON'} file ({err})") from None
        if not isinstance(data, dict) or not all(isinstance(data.get(k, {}), dict) for k in ("points", "weights")):
            raise MarksError(f"{path}: expected a table of settings, with points and weights as tables")
        points, weights = dict(data.get("points", {})), dict(data.get("weights", {}))
        threshold, known = data.get("similarity_threshold", THRESHOLD), {q.id for qs in CHAPTERS.values() for q in qs}
        problems = [f"unknown setting {k} (use points, weights, similarity_threshold)" for k in sorted(data)
                    if k not in ("points", "weights", "similarity_threshold")]  # fmt: skip
        problems += [f"points names an unknown question {q!r}" if q not in known else
                     f"points.{q} must be an integer in [1, 1000], got {v!r}" for q, v in points.items()
                     if q not in known or type(v) is not int or not 0 < v <= 1000]  # fmt: skip
        problems += [f"weights.{c} must be a chapter of the bank and a number >= 0, got {v!r}" for c, v in weights.items()
                     if c not in CHAPTERS or type(v) not in (int, float) or not (math.isfinite(v) and v >= 0)]  # fmt: skip
        if type(threshold) not in (int, float) or not 0 < threshold <= 1:
            problems.append(f"similarity_threshold must be in (0, 1], got {threshold!r}")
        if problems:
            raise MarksError(f"{path}: {'; '.join(problems)}")
        return cls(points, weights, float(threshold))

    def points_of(self, question) -> int:
        return self.points.get(question.id, question.points)


def _csv_rows(path: str | Path, required: tuple[str, ...]) -> tuple[list[str], list[tuple[int, dict]]]:
    with open(path, newline="", encoding="utf-8-sig") as handle:  # -sig: spreadsheets often add a byte-order mark
        reader = csv.DictReader(handle)
        columns = list(reader.fieldnames or [])
        missing = [c for c in required if c not in columns]
        if missing:
            raise MarksError(f"{path}: the first row must name the column(s) {', '.join(missing)}")
        return columns, [(line, row) for line, row in enumerate(reader, start=2)]


def read_marks(path: str | Path, config: Config = Config()) -> dict[str, dict[str, float]]:
    """The teacher's marks for written questions: ``{student: {question id: marks}}`` (empty cells: not marked)."""
    allowed = {q.id: q for qs in CHAPTERS.values() for q in qs if isinstance(q, WrittenQuestion)}
    columns, rows = _csv_rows(path, ("student",))
    columns = [c for c in columns if c and c != "student"]
    if unknown := [c for c in columns if c not in allowed]:
        raise MarksError(f"{path}: unknown written question(s) {', '.join(unknown)}; known: {', '.join(allowed)}")
    marks: dict[str, dict[str, float]] = {}
    for line, row in rows:
        student = (row.get("student") or "").strip()
        if not student:
            continue
        if student in marks:
            raise MarksError(f"{path}, line {line}: student {student!r} appears twice")
        marks[student] = {}
        for column in columns:
            text, top = (row.get(column) or "").strip(), config.points_of(allowed[column])
            value = float(text) if re.fullmatch(r"\d+\.?\d*|\.\d+", text) else math.nan
            if text and not 0 <= value <= top:
                raise MarksError(f"{path}, line {line}, {column}: {text!r} must be a number in [0, {top}]")
            if text:
                marks[student][column] = value
    return marks


def read_roster(path: str | Path) -> dict[str, tuple[str, str]]:
    """``{id: (name, email)}`` from a CSV with ``id``, ``name`` and ``email`` columns (ids unique, not empty)."""
    _, rows = _csv_rows(path, ("id", "name", "email"))
    roster: dict[str, tuple[str, str]] = {}
    for line, row in rows:
        sid = (row["id"] or "").strip()
        if not sid or sid in roster or _SAFE.sub("_", sid) != sid:
            raise MarksError(f"{path}, line {line}: id {sid!r} must be unique and made of letters, digits, . _ @ -")
        roster[sid] = ((row["name"] or "").strip(), (row["email"] or "").strip())
    return roster


def _stem_student(relative: Path) -> str:
    """The student of a file without a roster: its first folder, or its name without the chapter's name and copies."""
    if len(relative.parts) > 1:
        return relative.parts[0]
    words = [w for w in _WORDS.split(relative.stem) if w]
    chapter = next((k for k, w in enumerate(words) if re.fullmatch(r"\d\d", w)), len(words))  # 02_tied_one_step
    kept = [w for w in words[:chapter] if w.lower() != "late" and not w.isdigit()]
    return "_".join(kept) or relative.stem


def find_submissions(folder: Path, roster: Mapping[str, tuple[str, str]] | None) -> tuple[dict, list, list]:
    """``({(student, chapter): [files, newest first]}, [(file, why not graded)], {student: [notes]})``."""
    by_student: dict[tuple[str, str | None], list[Path]] = {}
    refused: list[tuple[str, str]] = []
    for root, dirs, files in os.walk(folder):  # os.walk never follows a link to a folder
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        links = [d for d in dirs if Path(root, d).is_symlink()]  # reported, not silently passed over
        dirs[:] = [d for d in dirs if d not in links]
        for name in [*links, *sorted(files)]:
            path = Path(root, name)
            relative = path.relative_to(folder)
            if name not in links and (name.startswith(".") or path.suffix not in (".ipynb", ".md")):
                continue
            if path.is_symlink():  # (os.walk enters no linked folder: a file's folders are none)
                refused.append((str(relative), "a symbolic link: refused"))
                continue
            if roster is None:
                student = _stem_student(relative)
            else:
                words = {w.lower() for w in _WORDS.split(str(relative.with_suffix("")))}
                found = [
                    s for s, (_, email) in roster.items() if s.lower() in words or (email and email.lower() in words)
                ]
                if len(found) != 1:
                    refused.append((str(relative), "matches no student of the roster" if not found
                                    else f"matches several students of the roster ({', '.join(found)})"))  # fmt: skip
                    continue
                student = found[0]
            try:
                chapter = notebook_chapter(read_notebook(path), path)
            except NotebookError:
                chapter = None  # graded anyway, so that the report says why it is unreadable
            by_student.setdefault((student, chapter), []).append(path)
    notes: dict[str, list[str]] = {}
    for (student, chapter), paths in by_student.items():
        paths.sort(key=lambda p: (p.lstat().st_mtime, str(p)), reverse=True)
        if len(paths) > 1:
            stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime(paths[0].lstat().st_mtime))
            notes.setdefault(student, []).append(f"{len(paths)} files for {chapter}: graded the latest, {paths[0].name} "
                                                 f"({stamp}); not graded: {', '.join(p.name for p in paths[1:])}")  # fmt: skip
    return by_student, refused, notes


@dataclass(frozen=True, repr=False)
class ClassReport:
    """The grades of a class: every graded notebook's report, the written marks, the copies flagged."""

    reports: tuple[GradeReport, ...]
    marks: dict = field(default_factory=dict)
    roster: dict = field(default_factory=dict)
    config: Config = Config()
    refused: tuple[tuple[str, str], ...] = ()
    similarity: Similarity | None = None
    seconds: float = 0.0

    @property
    def not_graded(self) -> list[str]:
        """``"file: why"`` for every notebook that was not graded (the command line then exits 1)."""
        return [f"{r.notebook}: {r.error}" for r in self.reports if r.error] + [f"{f}: {w}" for f, w in self.refused]

    def students(self) -> list[str]:
        return sorted({r.student for r in self.reports} | set(self.marks) | set(self.roster))

    def columns(self) -> list:
        """The gradebook's questions: auto-graded ones, then written ones, of the chapters present."""
        seen = {r.chapter for r in self.reports} | {q.split("-")[0] for m in self.marks.values() for q in m}
        chapters = [c for c in CHAPTERS if c in seen]
        return [q for kind in (AutoQuestion, WrittenQuestion) for c in chapters for q in chapter_questions(c, kind)]

    def row(self, student: str) -> dict[str, object]:
        """One student's gradebook row: a score per question (blank: nothing to grade), totals, grade, notes."""
        reports = [r for r in self.reports if r.student == student]
        scores = {q.id: q.score for r in reports for q in r.questions}
        written = self.marks.get(student, {})
        name, email = self.roster.get(student, ("", ""))
        row: dict[str, object] = {"student": student, "name": name, "email": email}
        earned, possible = Counter(), Counter()
        for q in self.columns():
            value = scores.get(q.id) if isinstance(q, AutoQuestion) else written.get(q.id)
            row[q.id] = "" if value is None else f"{value:g}"
            earned[q.chapter] += value or 0
            possible[q.chapter] += self.config.points_of(q)
        auto = sum(scores.values())
        weight = {c: self.config.weights.get(c, 1.0) for c in possible}
        top = sum(weight[c] * possible[c] for c in possible)
        grade = 100 * sum(weight[c] * earned[c] for c in possible) / top if top else 0.0
        notes = [n for r in reports for n in r.notes]
        notes += [f"{Path(r.notebook).name}: not graded: {r.error}" for r in reports if r.error]
        notes += [f"{q.id}: {q.status}" for r in reports for q in r.questions
                  if q.status not in ("passed", "failed", "not implemented")]  # fmt: skip
        notes += self.similarity.notes(student) if self.similarity else []
        notes += [] if reports else ["no submission"]
        row.update(auto=f"{auto:g}", written=f"{sum(written.values()):g}", total=f"{auto + sum(written.values()):g}",
                   max=f"{sum(possible.values()):g}", grade=f"{grade:.1f}", notes="; ".join(notes))  # fmt: skip
        return row

    def csv(self) -> str:
        fields = ["student", "name", "email", *(q.id for q in self.columns()), "auto", "written", "total", "max",
                  "grade", "notes"]  # fmt: skip
        return _csv_text([fields, *([self.row(s)[f] for f in fields] for s in self.students())])

    def marks_template(self) -> str:
        written = [q for q in self.columns() if isinstance(q, WrittenQuestion)]
        marks = [(s, self.marks.get(s, {})) for s in self.students()]
        return _csv_text([["student", *(q.id for q in written)],
                          *([s, *(f"{m[q.id]:g}" if q.id in m else "" for q in written)] for s, m in marks)])  # fmt: skip

    def gradescope(self, student: str) -> dict:
        """One student's Gradescope ``results.json``: every auto-graded question, and the written marks entered."""
        reports = [r for r in self.reports if r.student == student]
        tests = [t for r in reports for t in r.gradescope()["tests"]]
        for q in self.columns():
            if isinstance(q, WrittenQuestion) and q.id in self.marks.get(student, {}):
                tests.append({"name": f"{q.id} {q.title} (written)", "score": self.marks[student][q.id],
                              "max_score": self.config.points_of(q), "visibility": "visible",
                              "output": "Marked by your teacher against the rubric."})  # fmt: skip
        output = "; ".join(f"{Path(r.notebook).name}: {r.gradescope()['output']}" for r in reports)
        return gradescope_result(tests, output or "no submission", sum(r.seconds for r in reports),
                                 extra_data={"student": student})  # fmt: skip

    def write(self, out: str | Path) -> list[Path]:
        """Write everything listed in the module's docstring into ``out``; return the paths."""
        out = Path(out)
        for sub in ("results", "feedback", "reports"):
            (out / sub).mkdir(parents=True, exist_ok=True)
        files = {out / "gradebook.csv": self.csv(), out / "written_marks_template.csv": self.marks_template()}
        if self.similarity:
            files[out / "similarity.md"] = self.similarity.markdown()
        for student in self.students():
            name = _SAFE.sub("_", student)
            reports = [r for r in self.reports if r.student == student]
            files[out / "results" / f"{name}.json"] = json.dumps(self.gradescope(student), indent=1) + "\n"
            files[out / "feedback" / f"{name}.html"] = html_page(student, reports)
            files[out / "feedback" / f"{name}.md"] = markdown_page(student, reports)
            files[out / "reports" / f"{name}.json"] = json.dumps([asdict(r) for r in reports])
        for path, text in files.items():
            path.write_text(text, encoding="utf-8")
        return list(files)

    def __repr__(self) -> str:
        return f"<ClassReport: {len(self.reports)} notebook(s), {len(self.students())} student(s)>"

    def __str__(self) -> str:
        lines = [f"{len(self.reports)} notebook(s), {len(self.students())} student(s), graded in {self.seconds:.1f} s"]
        width = max([len(s) for s in self.students()] + [8])
        for student in self.students():
            row = self.row(student)
            lines.append(f"  {student:<{width}} {row['total']:>6} / {row['max']}  {row['notes']}".rstrip())
        lines += [f"NOT GRADED: {line}" for line in self.not_graded]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        fields = ["student", *(q.id for q in self.columns()), "total", "max", "notes"]
        return html_table([[self.row(s)[f] for f in fields] for s in self.students()], fields)._repr_html_()


def load_reports(out: str | Path) -> tuple[GradeReport, ...]:
    """The reports :meth:`ClassReport.write` left in ``out/reports`` (to keep them when regrading one student)."""
    texts = [p.read_text() for p in sorted((Path(out) / "reports").glob("*.json"))]  # none without the folder
    return tuple(GradeReport.from_dict(r) for text in texts for r in json.loads(text))


def grade_class(folder: Path, grading: Grading, *, roster=None, marks=None, config: Config = Config(),
                only: str | None = None, workers: int = 2, previous: tuple[GradeReport, ...] = ()) -> ClassReport:  # fmt: skip
    """Grade a folder with resolved settings (see :func:`xorlib.coursework.grade_all`)."""
    start = time.monotonic()
    by_student, refused, notes = find_submissions(folder, roster)
    chosen = {key: paths[0] for key, paths in by_student.items()}
    todo = [(s, p) for (s, _), p in sorted(chosen.items(), key=lambda kv: str(kv[0])) if only in (None, s)]
    if only is not None and not todo:
        raise ValueError(f"only: no submission of a student {only!r} in {folder}")
    with ThreadPoolExecutor(max_workers=workers) as pool:
        reports = list(pool.map(lambda sp: grade_path(sp[1], sp[0], grading), todo))
    reports = [replace(r, notes=(*r.notes, *notes.get(r.student, ()))) for r in reports]
    if only is not None:
        reports = [r for r in previous if r.student != only] + reports
        refused = [(f, w) for f, w in refused if only in f]
    answers: dict[str, dict[str, str]] = {}
    for (student, chapter), path in chosen.items():
        try:
            found = locate(read_notebook(path), chapter_questions(chapter, AutoQuestion))
        except NotebookError:
            continue
        answers.setdefault(student, {}).update(
            {q: s.answer_code for q, s in found.items() if s.answer_index is not None}
        )
    questions = [q for c in sorted({c for _, c in chosen if c}) for q in chapter_questions(c, AutoQuestion)]
    similarity = compare_class(answers, questions, config.threshold)
    return ClassReport(tuple(reports), marks or {}, roster or {}, config, tuple(refused), similarity,
                       time.monotonic() - start)  # fmt: skip


_STYLE = """body{font:16px/1.5 system-ui,sans-serif;max-width:48rem;margin:2rem auto;padding:0 1rem;color:#222}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:1.6rem}pre{background:#f5f5f5;padding:.8rem;overflow-x:auto;
white-space:pre-wrap}.passed{color:#1a7f37}.lost{color:#b35900}table{border-collapse:collapse}td,th{padding:.2rem .6rem;
border-bottom:1px solid #ddd;text-align:left}"""


def _page(student: str, reports: list[GradeReport]) -> list[tuple[str, object]]:
    """A feedback page as blocks ``(kind, content)`` (h1, p, lost, table, h2, pre), its texts not yet escaped."""
    blocks: list[tuple[str, object]] = [("h1", f"Feedback for {student}")]
    for r in reports:
        blocks.append(("p", f"{Path(r.notebook).name} ({r.chapter or 'unknown chapter'}): {r.score}/{r.max_score} "
                            f"points. Sandbox: {r.tier}."))  # fmt: skip
        blocks += [("lost", f"Not graded: {r.error}")] if r.error else []
        blocks.append(("table", [(q.id, q.title, f"{q.score}/{q.points}", q.status) for q in r.questions]))
        for q in r.questions:
            blocks += [("h2", f"{q.id}: {q.title} ({q.score}/{q.points})"), ("pre", q.feedback)]
    return blocks if reports else [*blocks, ("p", "No submission was graded.")]


def html_page(student: str, reports: list[GradeReport]) -> str:
    """The feedback of ``student`` (all their graded notebooks) as one HTML page, every text escaped."""
    e = html.escape
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Feedback: {e(student)}</title>"
             f"<meta name='viewport' content='width=device-width,initial-scale=1'><style>{_STYLE}</style></head><body>"]  # fmt: skip
    for kind, content in _page(student, reports):
        if kind == "table":
            rows = "".join(f"<tr><td>{e(i)}</td><td>{e(t)}</td><td>{p}</td><td class='{'lost' * (s != 'passed')}"
                           f"{'passed' * (s == 'passed')}'>{e(s)}</td></tr>" for i, t, p, s in content)  # fmt: skip
            parts.append(f"<table><tr><th>question</th><th>title</th><th>points</th><th>status</th></tr>{rows}</table>")
        else:
            opening, closing = ("p class='lost'", "p") if kind == "lost" else (kind, kind)
            parts.append(f"<{opening}>{e(content)}</{closing}>")
    return "\n".join([*parts, "</body></html>"]) + "\n"


def markdown_page(student: str, reports: list[GradeReport]) -> str:
    """The same page in Markdown: no Markdown or HTML from a student's text; the feedback in fences longer than any
    run of backticks it holds."""

    def plain(text: str) -> str:
        return html.escape(text).replace("*", "\\*").replace("_", "\\_").replace("[", "\\[").replace("`", "\\`")

    lines = []
    for kind, content in _page(student, reports):
        if kind == "table":
            lines.append("\n".join(["| question | title | points | status |", "| --- | --- | --- | --- |",
                                    *(f"| {' | '.join(map(plain, row))} |" for row in content)]))  # fmt: skip
        elif kind == "pre":
            ticks = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", content)), default=0))
            lines.append(f"{ticks}text\n{content}\n{ticks}")
        else:
            lines.append({"h1": "# ", "h2": "## "}.get(kind, "") + plain(content))
    return "\n\n".join(lines) + "\n"
