"""``python -m xorlib.coursework``: sync, student, grade, grade-all, autograder, gradescope (see ``--help``).

Every mistake in the arguments gets a usage message (exit 2), never a traceback. The hidden seed comes from
``--seed-file FILE`` or the environment variable ``XORLIB_HIDDEN_SEED`` (what ``make grade SEED=...`` sets), so
that it is on no command line, where every process of the machine could read it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from . import autograder_zip, grade_all, grade_notebook, student_notebooks
from .autograder import run
from .render import sync_chapter
from .sandbox import SANDBOXES, Limits, SandboxUnavailable

__all__ = ["main"]


def _positive(kind: type, top: float):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {'an integer' if kind is int else 'a number'}, got {text!r}"
            ) from None
        if not (math.isfinite(value) and 0 < value <= top):
            raise argparse.ArgumentTypeError(f"must be > 0 and <= {top:g}, got {text}")
        return value

    return parse


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m xorlib.coursework", description="Coursework for the book.")
    commands = parser.add_subparsers(dest="command", required=True)
    sync = commands.add_parser("sync", help="rewrite the exercise section of chapters from the bank")
    sync.add_argument("chapters", nargs="+", type=Path)
    sync.add_argument("--check", action="store_true", help="change nothing; exit 1 if a chapter is out of date")
    student = commands.add_parser("student", help="write student notebooks (no solutions, rubrics, hidden tests)")
    student.add_argument("chapters", nargs="+", help="chapter files, or bank chapter ids such as ch02")
    student.add_argument("--out", type=Path, default=Path("student"))
    helps = {"grade": "grade one notebook", "grade-all": "grade a folder of submissions",
             "autograder": "write a Gradescope autograder zip for a chapter (no seed: one drawn at random)"}  # fmt: skip
    for name, help_text in helps.items():
        command = commands.add_parser(name, help=help_text, allow_abbrev=False)  # --seed is no --seed-file
        command.add_argument("--seed-file", type=Path, help="file holding the private seed (else $XORLIB_HIDDEN_SEED)")
        command.add_argument("--practice", action="store_true", help="allow the public seed 0 (formative work)")
        command.add_argument("--config", type=Path, help="a .toml/.json file: points, weights, similarity_threshold")
    for name in ("grade", "grade-all"):
        command = commands.choices[name]
        command.add_argument("path", type=Path, help="the notebook" if name == "grade" else "the folder")
        command.add_argument("--sandbox", choices=SANDBOXES[:3], default="auto")
        command.add_argument("--cell-timeout", type=_positive(float, 3600), default=30.0, help="seconds per question")
        command.add_argument("--total-timeout", type=_positive(float, 86400), default=600.0, help="per notebook")
        command.add_argument("--memory-mb", type=_positive(int, 10**6), default=4096, help="address-space limit")
    commands.choices["grade"].add_argument("--results", type=Path, help="write Gradescope's results.json here")
    every = commands.choices["grade-all"]
    every.add_argument("--out", type=Path, default=Path("grades"))
    every.add_argument("--roster", type=Path, help="CSV id,name,email")
    every.add_argument("--marks", type=Path, help="CSV of marks for written questions")
    every.add_argument("--only", help="regrade this student only (the others' grades stay as in --out)")
    every.add_argument("--workers", type=_positive(int, 64), default=2)
    commands.choices["autograder"].add_argument("chapter", help="ch02, 02 or 2")
    commands.choices["autograder"].add_argument("--out", type=Path, help="default: autograder-<chapter>.zip")
    scope = commands.add_parser("gradescope", help="inside Gradescope: grade /autograder/submission")
    scope.add_argument("--root", type=Path, default=Path("/autograder"))
    return parser


def _seed(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int | None:
    text = args.seed_file.read_text().strip() if args.seed_file else os.environ.get("XORLIB_HIDDEN_SEED", "").strip()
    if not text:
        return None
    if not text.isdigit() or not 0 <= int(text) < 2**63:
        parser.error(f"the hidden seed must be an integer in [0, 2**63), got {text[:40]!r}")
    return int(text)


def _run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.command == "sync":
        results = [sync_chapter(path, check=args.check) for path in args.chapters]
        print("\n".join(map(str, results)))
        return 2 if any(r.status == "error" for r in results) else int(any(r.status == "out of date" for r in results))
    if args.command == "student":
        print("\n".join(student_notebooks(args.chapters, args.out)))
        return 0
    if args.command == "gradescope":
        return run(args.root)
    if args.command == "autograder":
        out = args.out or Path(f"autograder-ch{args.chapter.removeprefix('ch').zfill(2)}.zip")
        seed = _seed(args, parser)
        path = autograder_zip(args.chapter, out, seed=seed, practice=args.practice, config=args.config)
        print(f"wrote {path}" + ("" if seed is not None or args.practice else " (hidden seed drawn at random, in it)"))
        return 0
    limits = Limits(cell_s=args.cell_timeout, total_s=args.total_timeout, memory_mb=args.memory_mb)
    options = {"seed": _seed(args, parser), "practice": args.practice, "config": args.config, "limits": limits,
               "sandbox": args.sandbox}  # fmt: skip
    if args.command == "grade":
        report = grade_notebook(args.path, **options)
        print(report)
        if args.results:
            args.results.parent.mkdir(parents=True, exist_ok=True)
            args.results.write_text(json.dumps(report.gradescope(), indent=1) + "\n")
        return 1 if report.error else 0
    if args.only and not (args.out / "reports").is_dir():
        parser.error(f"--only needs the grades of a previous run in --out ({args.out}/reports is missing)")
    result = grade_all(args.path, roster=args.roster, marks=args.marks, only=args.only, previous=args.out,
                       workers=args.workers, **options)  # fmt: skip
    result.write(args.out)
    print(result)
    print(f"wrote {args.out}/gradebook.csv, feedback/, results/ and similarity.md")
    if result.not_graded:
        print(f"{len(result.not_graded)} notebook(s) NOT graded:\n  " + "\n  ".join(result.not_graded), file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command; return the exit status (0 ok, 1 out of date or not everything graded, 2 bad input)."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return _run(args, parser)
    except (ValueError, TypeError, OSError, SandboxUnavailable) as err:  # MarksError is a ValueError
        print(f"{parser.prog} {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
