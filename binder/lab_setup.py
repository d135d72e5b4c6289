"""Set up JupyterLab to show the book's chapters as the book (run by ``make lab`` and by ``binder/postBuild``).

1. ``binder/overrides.json`` into JupyterLab's settings (``<app dir>/settings/overrides.d/``): jupytext's notebook
   view is the default viewer of Markdown, so ``chapters/NN.md`` opens as a runnable notebook, and jupyterlab-myst
   (pinned in ``requirements.txt``) renders its MyST. Every cell is rendered (``windowingMode: none``): with
   JupyterLab's default windowing a markdown cell out of view has no MyST tree when "Run All" reaches it, and
   jupyterlab-myst then evaluates none of its ``{eval}`` roles (the reader sees the variables' names).
2. The Python kernel's display name as the chapters' front matter has it ("Python 3"): JupyterLab writes the
   running kernel's name into the notebook's metadata, and jupytext would write "Python 3 (ipykernel)" into the
   chapter on the first save.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from jupyter_client.kernelspec import KernelSpecManager
from jupyterlab.commands import get_app_dir

HERE = Path(__file__).resolve().parent
DISPLAY_NAME = "Python 3"


def install_overrides() -> Path:
    folder = Path(get_app_dir(), "settings", "overrides.d")
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "xorlib-book.json"
    shutil.copy(HERE / "overrides.json", target)
    return target


def name_the_kernel() -> Path:
    """The environment's ``python3`` kernel spec, named "Python 3", running this Python (left alone when it is).

    Rewriting a spec removes it for a moment: a kernel started meanwhile (a book build beside the tests) would fail.
    """
    from ipykernel.kernelspec import install

    current = Path(sys.prefix) / "share" / "jupyter" / "kernels" / "python3"
    if (current / "kernel.json").is_file():
        spec = json.loads((current / "kernel.json").read_text())
        if spec.get("display_name") == DISPLAY_NAME and spec.get("argv", [""])[0] == sys.executable:
            return current
    folder = Path(install(kernel_name="python3", display_name=DISPLAY_NAME, prefix=sys.prefix))
    spec = json.loads((folder / "kernel.json").read_text())
    assert spec["display_name"] == DISPLAY_NAME, spec
    assert KernelSpecManager().get_kernel_spec("python3").display_name == DISPLAY_NAME
    return folder


if __name__ == "__main__":
    print(install_overrides())
    print(name_the_kernel())
