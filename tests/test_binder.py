"""The Binder configuration: it agrees with requirements.txt, and it installs offline in a fresh venv.

Binder installs ``binder/requirements.txt``. Its PyTorch-CPU index line is
removed here (that index is not reachable from the test machines); everything
else, the ``torch==...+cpu`` pin included, must resolve from the registries
configured for pip. The test is a real ``pip install --report`` into a fresh
virtual environment (about a minute here): every pin exists for this Python,
the pins are mutually consistent, and the result imports torch (the CPU build),
jupytext, ipywidgets and xorlib.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
BINDER = ROOT / "binder"
INDEX_LINE = re.compile(r"^\s*--(extra-)?index-url\s+https://download\.pytorch\.org/whl/cpu\s*$")


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
    for name in ("jupytext", "ipywidgets", "ipykernel", "torch", "jupyter-book"):
        assert canonicalize_name(name) in root, f"{name} is not pinned in requirements.txt"


def test_runtime_matches_the_project_python() -> None:
    (runtime,) = _lines(BINDER / "runtime.txt")
    match = re.fullmatch(r"python-(\d+)\.(\d+)", runtime)
    assert match, f"binder/runtime.txt must read python-X.Y, got {runtime!r}"
    version = Version(f"{match[1]}.{match[2]}")
    declared = re.search(r'^requires-python\s*=\s*"([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.MULTILINE)
    assert declared, "pyproject.toml declares requires-python"
    requires = SpecifierSet(declared[1])
    assert version in requires
    assert (version.major, version.minor) == sys.version_info[:2], "the pins are tested on the Binder Python version"


@pytest.mark.slow
def test_binder_requirements_install_offline_in_a_fresh_venv(tmp_path: Path) -> None:
    # The same file minus the CPU-index line, placed so that "-r ../requirements.txt" still finds the root pins.
    (tmp_path / "binder").mkdir()
    kept = [line for line in (BINDER / "requirements.txt").read_text().splitlines() if not INDEX_LINE.match(line)]
    (tmp_path / "binder" / "requirements.txt").write_text("\n".join(kept) + "\n")
    (tmp_path / "requirements.txt").write_text((ROOT / "requirements.txt").read_text())
    env = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env)
    report = tmp_path / "report.json"
    result = subprocess.run(
        [
            str(env / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--report",
            str(report),
            "-r",
            str(tmp_path / "binder" / "requirements.txt"),
        ],
        cwd=ROOT,  # "-e ." is the repository, as on Binder
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    chosen = {
        canonicalize_name(item["metadata"]["name"]): Version(item["metadata"]["version"])
        for item in json.loads(report.read_text())["install"]
    }
    expected = _pins(ROOT / "requirements.txt") | _pins(BINDER / "requirements.txt")
    wrong = {
        name: (str(version), str(chosen.get(name))) for name, version in expected.items() if chosen.get(name) != version
    }
    assert not wrong, f"resolved versions differ from the pins (pin, resolved): {wrong}"
    assert "xorlib" in chosen
    # The installed environment imports what a Binder user needs, with CPU torch.
    probe = subprocess.run(
        [
            str(env / "bin" / "python"),
            "-c",
            "import torch, jupytext, ipywidgets, xorlib.model; print(torch.__version__, torch.cuda.is_available())",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert probe.returncode == 0, probe.stderr[-3000:]
    assert probe.stdout.split() == ["2.13.0+cpu", "False"]
