"""``python -m xorlib.coursework``: sync, student, grade, grade-all, list (see ``--help``)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from .bank import CHAPTERS
from .gradebook import MarksError, grade_all
from .grading import grade_notebook
from .questions import AutoQuestion
from .sandbox import Limits
from .student import write_student_versions
from .sync import sync_chapter

__all__ = ["main"]


def _limits(args: argparse.Namespace) -> Limits:
    return Limits(cell_s=args.cell_timeout, total_s=args.total_timeout, memory_mb=args.memory_mb)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m xorlib.coursework", description="Coursework for the book.")
    commands = parser.add_subparsers(dest="command", required=True)
    sync = commands.add_parser("sync", help="rewrite the exercise section of chapters from the bank")
    sync.add_argument("chapters", nargs="+", type=Path)
    sync.add_argument("--check", action="store_true", help="change nothing; exit 1 if a chapter is out of date")
    student = commands.add_parser("student", help="write student notebooks (no solutions, rubrics, hidden tests)")
    student.add_argument("chapters", nargs="+", type=Path)
    student.add_argument("--out", type=Path, default=Path("student"))
    for name, help_text in (("grade", "grade one notebook"), ("grade-all", "grade a folder of submissions")):
        command = commands.add_parser(name, help=help_text)
        command.add_argument("path", type=Path, help="the notebook" if name == "grade" else "the folder")
        command.add_argument("--hidden-seed", type=int, default=0, help="the teacher's seed for the hidden cases")
        command.add_argument("--cell-timeout", type=float, default=30.0, help="seconds per answer cell (30)")
        command.add_argument("--total-timeout", type=float, default=600.0, help="seconds per notebook (600)")
        command.add_argument("--memory-mb", type=int, default=4096, help="address-space limit (4096 MB)")
        command.add_argument("--isolation", choices=("auto", "namespaces", "process"), default="auto")
    commands.choices["grade"].add_argument("--results", type=Path, help="write a Gradescope results.json here")
    commands.choices["grade-all"].add_argument("--out", type=Path, default=Path("grades"))
    commands.choices["grade-all"].add_argument("--marks", type=Path, help="CSV of marks for written questions")
    commands.choices["grade-all"].add_argument("--workers", type=int, default=2)
    commands.add_parser("list", help="list the questions of the bank")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command; return the exit status (0 ok, 1 out of date / not graded, 2 bad input)."""
    args = _parser().parse_args(argv)
    if args.command == "sync":
        results = [sync_chapter(path, check=args.check) for path in args.chapters]
        print("\n".join(map(str, results)))
        if any(r.status == "error" for r in results):
            return 2
        return int(any(r.status == "out of date" for r in results))
    if args.command == "student":
        print("\n".join(write_student_versions(args.chapters, args.out)))
        return 0
    if args.command == "list":
        for questions in CHAPTERS.values():
            for q in questions:
                kind = f"def {q.signature}" if isinstance(q, AutoQuestion) else "written"
                print(f"{q.id}  {q.points:>2} pts  {q.title}  [{kind}]")
        return 0
    options = dict(hidden_seed=args.hidden_seed, limits=_limits(args), isolation=args.isolation)
    if args.command == "grade":
        report = grade_notebook(args.path, **options)
        print(report)
        if args.results:
            args.results.parent.mkdir(parents=True, exist_ok=True)
            args.results.write_text(json.dumps(report.gradescope(), indent=1) + "\n")
        return 1 if report.error else 0
    try:
        result = grade_all(args.path, marks=args.marks, workers=args.workers, hide=(str(args.out),), **options)
    except (MarksError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    written = result.write(args.out)
    print(result)
    print(f"wrote {written[0]}, {written[2]} and {len(written) - 3} per-student results in {args.out}/results")
    return 0


if __name__ == "__main__":
    sys.exit(main())
