"""The Gradescope autograder: a zip laid out as Gradescope's specification asks, and what runs inside it.

`Gradescope's format <https://gradescope-autograders.readthedocs.io/en/latest/specs/>`_ (otter-grader's too):
``setup.sh`` (run once, as root) and ``run_autograder`` (per submission) at the root; the zip lands in
``/autograder/source``, the submission in ``/autograder/submission``, the result goes to
``/autograder/results/results.json``. Ours also holds ``requirements.txt`` (pinned), ``config.json`` (chapter,
hidden seed, points) and ``xorlib/``; ``setup.sh`` makes the source private to root, out of the answers' reach.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import zipfile
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

from .bank import CHAPTERS, chapter_questions
from .gradebook import find_submissions
from .grading import grade_path, gradescope_result, grading_settings
from .questions import AutoQuestion
from .sandbox import SandboxUnavailable

__all__ = []  # xorlib.coursework exports autograder_zip

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, to build the autograder's image.
set -euo pipefail
ROOT="${XORLIB_AUTOGRADER_ROOT:-/autograder}"
PYTHON="${PYTHON:-python3}"
if ! command -v "$PYTHON" >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv
fi
if [ -z "${XORLIB_BORROW_SITE:-}" ]; then
  # bubblewrap is optional: where the container allows no namespaces, the container itself is the sandbox.
  command -v bwrap >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap || true
  "$PYTHON" -m venv "$ROOT/venv"
  "$ROOT/venv/bin/python" -m pip install --quiet -r "$ROOT/source/requirements.txt"
else  # offline (the tests): a fresh environment that borrows the packages of an existing one
  "$PYTHON" -m venv --without-pip "$ROOT/venv"
  SITE="$("$ROOT/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "$XORLIB_BORROW_SITE" > "$SITE/xorlib-borrowed.pth"
fi
chmod -R go-rwx "$ROOT/source"  # the bank and the hidden seed: nothing the answers may read
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission, as root, in /autograder.
set -uo pipefail
ROOT="${XORLIB_AUTOGRADER_ROOT:-/autograder}"
mkdir -p "$ROOT/results"
chmod -R go-rwx "$ROOT/source" "$ROOT/submission" "$ROOT/results"
cd "$ROOT"
PYTHONPATH="$ROOT/source" exec "$ROOT/venv/bin/python" -m xorlib.coursework gradescope --root "$ROOT"
"""


def pinned_requirements() -> list[str]:
    """``name==version`` for every distribution the grader (this package, imported) imports, and everything they
    require (markers honoured)."""
    owners = metadata.packages_distributions()
    imported = {d for m in list(sys.modules) if "." not in m for d in owners.get(m, ()) if d.lower() != "xorlib"}
    todo, found = sorted(imported), {}
    while todo:
        name = todo.pop()
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        key = dist.metadata["Name"].lower().replace("_", "-")
        if key in found:
            continue
        found[key] = f"{dist.metadata['Name']}=={dist.version}"
        for line in dist.requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return [found[k] for k in sorted(found)]


def write_zip(chapter: object, out: Path, seed: int | None, practice: bool, points: dict) -> Path:
    """Write the autograder zip for ``chapter``; without a seed (and not ``practice``), draw a private one at random
    (:mod:`secrets`), stored in the zip's ``config.json``."""
    valid = isinstance(chapter, (str, int)) and not isinstance(chapter, bool)
    name = f"ch{str(chapter).removeprefix('ch').zfill(2)}" if valid else ""
    if name not in CHAPTERS or not chapter_questions(name, AutoQuestion):
        raise ValueError(
            f"chapter must be a chapter of the bank with auto-graded questions ({', '.join(CHAPTERS)}), got {chapter!r}"
        )
    seed = (0 if practice else secrets.randbelow(2**62) + 1) if seed is None else seed
    package = Path(__file__).resolve().parents[1]
    requirements = ["--extra-index-url https://download.pytorch.org/whl/cpu", *pinned_requirements()]
    config = {"chapter": name, "seed": seed, "practice": practice, "points": points}
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for script, text in (("setup.sh", SETUP_SH), ("run_autograder", RUN_AUTOGRADER)):
            info = zipfile.ZipInfo(script)
            info.external_attr = 0o100755 << 16  # executable, as Gradescope runs them
            archive.writestr(info, text)
        archive.writestr("requirements.txt", "\n".join(requirements) + "\n")
        archive.writestr("config.json", json.dumps(config, indent=1) + "\n")
        for path in sorted(package.rglob("*.py")):
            if "__pycache__" not in path.parts:
                archive.write(path, Path("xorlib") / path.relative_to(package))
    return out


def run(root: Path) -> int:
    """Inside Gradescope: grade ``root/submission``, write ``root/results/results.json``; 1 if it was not graded.

    Whatever stops the grading, ``results.json`` is written: Gradescope shows a student nothing without it.
    """
    try:
        result = _grade(root)
    except Exception as err:  # the type only: a message could carry a hidden case's inputs
        result = gradescope_result([], f"Not graded: the grader stopped ({type(err).__name__}); your teacher can "
                                   "regrade it.")  # fmt: skip
    (root / "results").mkdir(parents=True, exist_ok=True)
    (root / "results" / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    print(result["output"])
    return 0 if result["tests"] and "not graded" not in result["output"].lower() else 1


def _grade(root: Path) -> dict:
    config = json.loads((root / "source" / "config.json").read_text())
    found, refused, _ = find_submissions(root / "submission", None)
    paths = sorted((p for ps in found.values() for p in ps), key=lambda p: p.lstat().st_mtime, reverse=True)
    if not paths:
        why = "; ".join(f"{f}: {w}" for f, w in refused) or "no .ipynb or .md notebook"
        return gradescope_result([], f"Not graded: the submission holds no notebook that can be graded ({why}).")
    private = [root / "source", root / "submission", root / "results"]
    try:
        grading = grading_settings(config["seed"], config["practice"], None, os.environ.get("XORLIB_SANDBOX", "auto"),
                                   False, config["points"], private)  # fmt: skip
    except SandboxUnavailable as err:
        return gradescope_result([], f"Not graded: {err}")
    report = grade_path(paths[0], "submission", grading)
    print(f"{report}\nxorlib from {Path(__file__).parent.parent}")
    if report.chapter not in (None, config["chapter"]):
        return gradescope_result([], f"Not graded: this assignment is {config['chapter']}, the notebook is "
                                 f"{report.chapter}.")  # fmt: skip
    result = report.gradescope()
    if len(paths) > 1:
        result["output"] += f"; {len(paths)} notebooks submitted: graded the latest, {paths[0].name}"
    return result
