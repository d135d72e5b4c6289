"""The Binder configuration, checked offline: what Binder installs, and that chapters open there as notebooks.

Binder (repo2docker) installs ``binder/requirements.txt`` (the book's pins of ``../requirements.txt``, CPU torch,
and xorlib) for the Python of ``binder/runtime.txt``, then runs ``binder/postBuild``, which installs
``binder/overrides.json``: jupytext's notebook view as JupyterLab's default viewer of Markdown, so that the launch
button's ``?urlpath=lab/tree/chapters/NN.md`` opens a runnable notebook. No test here needs the network: the pins
are checked against each other through the metadata of the environment they were installed into (every pin is the
installed version, and every requirement of every pinned package is pinned, at a version it accepts), and
``postBuild`` is run for real into a temporary JupyterLab application folder.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
BINDER = ROOT / "binder"
INDEX_LINE = re.compile(r"^\s*--(extra-)?index-url\s+https://download\.pytorch\.org/whl/cpu\s*$")
JUPYTEXT_VIEWER = "Jupytext Notebook"
# Build tools that pip provides itself and a frozen environment does not pin.
UNPINNED_OK = {"pip", "setuptools", "wheel"}
# Pinned, installed by pip for jupyter-events (jsonschema[format-nongpl]), then removed again by `make env` and by
# binder/postBuild: jsonschema's IRI checker, 0.8 s at each import of jsonschema, for formats no Jupyter schema uses.
REMOVED = {"rfc3987-syntax": "rfc3987_syntax", "lark": "lark"}
REMOVE_COMMAND = "pip uninstall --quiet --yes rfc3987-syntax lark"


def _lines(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


def _pins(path: Path) -> dict[str, Version]:
    """``{name: version}`` for the ``name==version`` lines of a requirements file."""
    pins = {}
    for line in _lines(path):
        if line.startswith("-"):
            continue
        requirement = Requirement(line)
        (spec,) = requirement.specifier
        assert spec.operator == "==", f"{path.name}: {line} is not an exact pin"
        pins[canonicalize_name(requirement.name)] = Version(spec.version)
    return pins


def test_binder_uses_the_root_pins() -> None:
    lines = _lines(BINDER / "requirements.txt")
    assert "-r ../requirements.txt" in lines, "binder/requirements.txt must include the book's pins"
    assert "-e ." in lines or "." in lines, "binder/requirements.txt must install xorlib"
    assert any(INDEX_LINE.match(line) for line in lines), "torch must come from the PyTorch CPU index on Binder"
    root, binder = _pins(ROOT / "requirements.txt"), _pins(BINDER / "requirements.txt")
    assert set(binder) <= {"torch"}, f"only torch may be pinned in binder/ (the rest comes from -r): {set(binder)}"
    torch_pin = binder["torch"]
    assert torch_pin.local == "cpu", "Binder's torch must be the CPU build"
    assert Version(torch_pin.public) == root["torch"], (
        f"torch {torch_pin} on Binder, {root['torch']} in requirements.txt"
    )


def test_the_root_pins_hold_what_binder_needs() -> None:
    root = _pins(ROOT / "requirements.txt")
    for name in (
        "jupytext",
        "jupyterlab",
        "jupyterlab-myst",
        "jupyter-server",
        "ipywidgets",
        "ipykernel",
        "torch",
        "jupyter-book",
    ):
        assert canonicalize_name(name) in root, f"{name} is not pinned in requirements.txt"


def test_runtime_matches_the_project_python() -> None:
    (runtime,) = _lines(BINDER / "runtime.txt")
    match = re.fullmatch(r"python-(\d+)\.(\d+)", runtime)
    assert match, f"binder/runtime.txt must read python-X.Y, got {runtime!r}"
    version = Version(f"{match[1]}.{match[2]}")
    declared = re.search(r'^requires-python\s*=\s*"([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.MULTILINE)
    assert declared, "pyproject.toml declares requires-python"
    assert version in SpecifierSet(declared[1])
    assert (version.major, version.minor) == sys.version_info[:2], "the pins are tested on the Binder Python version"


def test_the_pins_are_complete_and_consistent() -> None:
    """Offline `pip check` of requirements.txt: each pin installed here, each dependency pinned and satisfied."""
    pins = _pins(ROOT / "requirements.txt")
    environment = default_environment() | {"extra": ""}
    wrong, missing, unsatisfied = [], [], []
    for name, version in sorted(pins.items()):
        if name in REMOVED:
            continue
        try:
            installed = Version(metadata.version(name))
        except metadata.PackageNotFoundError:
            wrong.append(f"{name}=={version} is not installed (make env)")
            continue
        if Version(installed.public) != Version(version.public):
            wrong.append(f"{name}: pinned {version}, installed {installed}")
        for text in metadata.requires(name) or []:
            requirement = Requirement(text)
            if requirement.marker is not None and not requirement.marker.evaluate(environment):
                continue
            dependency = canonicalize_name(requirement.name)
            if dependency in UNPINNED_OK:
                continue
            if dependency not in pins:
                missing.append(f"{dependency} (needed by {name})")
            elif not requirement.specifier.contains(pins[dependency], prereleases=True):
                unsatisfied.append(f"{name} needs {requirement}, pinned {pins[dependency]}")
    assert not wrong, f"requirements.txt and the environment disagree: {wrong}"
    assert not missing, f"dependencies missing from requirements.txt: {sorted(set(missing))}"
    assert not unsatisfied, f"pins that break a dependency: {unsatisfied}"


def test_jsonschemas_iri_checker_is_removed_where_the_book_runs() -> None:
    """Importing jsonschema (Jupyter Book, JupyterLab, nbformat, the grader) builds no parser: the IRI checker that
    pip installs for jupyter-events is gone here, and `make env` and Binder's postBuild both remove it."""
    for module in REMOVED.values():
        assert importlib.util.find_spec(module) is None, (
            f"{module} is installed (an environment made before make env removed it): .venv/bin/python -m {REMOVE_COMMAND}"
        )
    probe = "import sys, jsonschema; print(sorted(m for m in sys.modules if m.startswith(('rfc3987', 'lark'))))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]", loaded
    for script in (ROOT / "Makefile", BINDER / "postBuild"):
        assert REMOVE_COMMAND in script.read_text(), f"{script.name} does not remove the IRI checker"
    pins = _pins(ROOT / "requirements.txt")
    assert set(REMOVED) <= set(pins), "pip installs them for jupyter-events: pinned, so that what it installs is fixed"


def test_overrides_make_jupytext_the_default_viewer_of_markdown() -> None:
    overrides = json.loads((BINDER / "overrides.json").read_text())
    viewers = overrides["@jupyterlab/docmanager-extension:plugin"]["defaultViewers"]
    assert viewers.get("markdown") == JUPYTEXT_VIEWER and viewers.get("myst") == JUPYTEXT_VIEWER, viewers
    # The name is the one jupytext's JupyterLab extension registers its notebook view under.
    extension = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "jupyterlab-jupytext"
    if not extension.is_dir():
        pytest.skip("jupytext's JupyterLab extension is not installed here")
    bundles = "".join(path.read_text(errors="replace") for path in (extension / "static").glob("*.js"))
    assert f'"{JUPYTEXT_VIEWER}"' in bundles or f"'{JUPYTEXT_VIEWER}'" in bundles, "jupytext names its view otherwise"


def test_post_build_installs_the_overrides_where_jupyterlab_reads_them(tmp_path: Path) -> None:
    post_build = BINDER / "postBuild"
    assert os.access(post_build, os.X_OK), "binder/postBuild must be executable (repo2docker runs it directly)"
    assert post_build.read_text().startswith("#!/bin/bash"), "binder/postBuild is a bash script"
    app_dir = tmp_path / "lab"
    env = dict(
        os.environ, JUPYTERLAB_DIR=str(app_dir), PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    )
    result = subprocess.run(
        ["./binder/postBuild"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    from jupyterlab_server.settings_utils import _get_overrides

    overrides, error = _get_overrides(str(app_dir / "settings"))
    assert not error, error
    assert overrides == json.loads((BINDER / "overrides.json").read_text())


def test_make_lab_sets_up_jupyterlab_as_binder_does() -> None:
    recipe = subprocess.run(
        ["make", "-n", "-o", ".venv/.installed-stamp", "lab"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert recipe.returncode == 0, recipe.stderr
    assert "binder/lab_setup.py" in recipe.stdout and "jupyter lab" in recipe.stdout, recipe.stdout
    assert "lab_setup.py" in (BINDER / "postBuild").read_text()


def test_jupyterlab_myst_renders_the_chapters_in_the_lab() -> None:
    extension = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "jupyterlab-myst" / "package.json"
    assert extension.is_file(), "jupyterlab-myst's JupyterLab extension is not installed (make env)"
    version = json.loads(extension.read_text())["version"]
    assert Version(version) == _pins(ROOT / "requirements.txt")["jupyterlab-myst"]


def test_saving_a_chapter_keeps_its_file(tmp_path: Path) -> None:
    """What JupyterLab adds to a chapter when it runs (the kernel's name, the values of {eval}) is not saved."""
    import jupytext

    chapter = ROOT / "tests" / "book" / "fixtures" / "glue" / "after.md"
    notebook = jupytext.read(chapter)
    notebook.metadata["kernelspec"]["display_name"] = "Python 3"  # as lab_setup.py names the kernel
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            cell.metadata["user_expressions"] = [{"expression": "x", "result": {"status": "ok", "data": {}}}]
    config = jupytext.config.load_jupytext_configuration_file(str(ROOT / "jupytext.toml"))
    saved = jupytext.writes(notebook, fmt="md:myst", config=config)
    assert saved == chapter.read_text()


def test_lab_setup_names_the_kernel_as_the_chapters_do() -> None:
    sys.path.insert(0, str(BINDER))
    import lab_setup

    assert lab_setup.DISPLAY_NAME == "Python 3"
    for path in sorted((ROOT / "chapters").glob("*.md")):
        head = path.read_text().split("\n---\n", 1)[0]
        if "kernelspec:" in head:
            assert f"display_name: {lab_setup.DISPLAY_NAME}\n" in head, f"{path.name} names its kernel otherwise"
