"""A downloaded chapter run as a reader runs it: a fresh virtual environment, the notebook's own install cell.

The fresh environment has pip and nothing of the book: third-party packages (torch, numpy, Matplotlib, the Jupyter
kernel, pip itself) are borrowed from ``.venv`` through a ``.pth`` file pointing at a folder of links that leaves out
xorlib (its files, metadata and editable hook), so that ``import xorlib`` works only once the notebook's first cell
has installed the wheel from the served site (pip installs into the environment that runs it, the fresh one). The
environment is made without pip of its own (``venv --without-pip``): installing pip and setuptools into it, then
taking setuptools out again, was most of the fixture's 4 s. pip runs with ``PIP_NO_INDEX=1``: nothing can come from
a package index.
The notebook runs in an empty folder, so nothing from the repository is at hand either.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

# Entries of .venv's site-packages that are the book's own package, never borrowed.
OWN = ("xorlib", "__editable__", "_xorlib", "xorlib.egg-link")

RUNNER = """
import sys
import nbformat
from nbclient import NotebookClient

notebook = nbformat.read(sys.argv[1], as_version=4)
client = NotebookClient(notebook, timeout=600, kernel_name="xorlib-fresh", resources={"metadata": {"path": "."}})
try:
    client.execute()
finally:
    nbformat.write(notebook, sys.argv[2])
"""


def fresh_environment(folder: Path) -> Path:
    """A virtual environment in ``folder/env`` that borrows .venv's third-party packages; returns its Python."""
    env = folder / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=300)
    python = env / "bin" / "python"
    purelib = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    borrowed = folder / "borrowed"
    borrowed.mkdir()
    source = Path(sysconfig.get_paths()["purelib"])
    for entry in source.iterdir():
        if entry.name.startswith(OWN) or entry.suffix == ".pth":
            continue
        (borrowed / entry.name).symlink_to(entry)
    (purelib / "xorlib-book-borrowed.pth").write_text(f"{borrowed}\n")
    subprocess.run(
        [str(python), "-m", "ipykernel", "install", "--prefix", str(env), "--name", "xorlib-fresh"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    check = subprocess.run(
        [str(python), "-c", "import importlib.util; print(importlib.util.find_spec('xorlib') is None)"],
        cwd=folder,
        capture_output=True,
        text=True,
        check=True,
    )
    assert check.stdout.strip() == "True", "the fresh environment already sees xorlib"
    pip = subprocess.run([str(python), "-m", "pip", "--version"], capture_output=True, text=True, check=True)
    assert f"python {sys.version_info.major}.{sys.version_info.minor}" in pip.stdout, pip.stdout
    return python


def run_downloaded(python: Path, notebook: Path, site_url: str, folder: Path) -> dict:
    """Execute ``notebook`` with ``python``'s kernel in an empty ``folder``; return the executed notebook.

    Raises ``AssertionError`` (with the end of the runner's output) when a cell fails.
    """
    folder.mkdir(parents=True, exist_ok=True)
    executed = folder / f"executed-{notebook.name}"
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTHON", "VIRTUAL_ENV", "JUPYTER", "XORLIB_", "PIP_"))
    }
    env.update(
        XORLIB_BOOK_URL=site_url,
        PIP_NO_INDEX="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        XORLIB_CACHE=str(folder / "cache"),
        MPLBACKEND="Agg",
        PATH=f"{python.parent}{os.pathsep}{env.get('PATH', '')}",
    )
    result = subprocess.run(
        [str(python), "-c", RUNNER, str(notebook), str(executed)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    if result.returncode != 0:
        raise AssertionError(f"{notebook.name} failed in the fresh environment:\n{result.stderr[-3000:]}")
    return json.loads(executed.read_text())


def installed_from(python: Path) -> str | None:
    """Where the environment's xorlib was installed from (pip's ``direct_url.json``), or None (run elsewhere than
    the repository, whose ``xorlib.egg-info`` would answer)."""
    result = subprocess.run(
        [
            str(python),
            "-c",
            "from importlib import metadata; d = metadata.distribution('xorlib'); print(d.read_text('direct_url.json'))",
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=python.parents[2],
    )
    if result.returncode != 0 or result.stdout.strip() == "None":
        return None
    return json.loads(result.stdout)["url"]
