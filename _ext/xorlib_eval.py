"""Glued numbers as MyST inline expressions: ``{eval}`name``` in the prose, the same in the book and in JupyterLab.

The book runs with myst-nb's ``inline`` execution mode, which executes a chapter cell by cell while it is parsed and
evaluates each ``{eval}`name``` role in the chapter's kernel; jupyterlab-myst evaluates the same roles when a reader
runs the markdown cell. This extension makes the two agree and keeps what was evaluated:

* **Order.** myst-nb evaluates a role once the last *rendered* code cell before it has run, so a name assigned in a
  ``remove-cell`` cell just above the prose would be undefined. Here every cell before a markdown cell runs before
  the cell is rendered: the value is the one a reader gets by running the notebook from the top, as in JupyterLab.
* **Record.** Each value evaluated is stored in its markdown cell's metadata as ``user_expressions``, the format of
  jupyterlab-myst, so the executed notebook (``_build/jupyter_execute/<page>.ipynb``) carries every glued value:
  the reader's export (``_ext/xorlib_export.py``) writes them into the text.
* **Replay.** With ``XORLIB_BOOK_REPLAY=<folder of executed notebooks>`` (``make pdf``), no chapter runs again: each
  notebook's outputs and recorded values are taken from the HTML build's executed notebooks, which must match the
  sources cell for cell (else the build stops and says to run ``make book``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import nbformat
from sphinx.application import Sphinx
from sphinx.config import Config

__version__ = "1.0"

RECORD_KEY = "user_expressions"  # jupyterlab-myst's metadata key for evaluated inline expressions
REPLAY_ENV = "XORLIB_BOOK_REPLAY"


class ReplayError(RuntimeError):
    """The executed notebook to replay is missing or does not match its source."""


def _result(outputs: list[Any]) -> dict[str, Any]:
    """jupyterlab-myst's ``result`` of one expression, from the outputs of its evaluation."""
    for output in outputs:
        if output.get("output_type") == "error":
            return {"status": "error", "ename": output.get("ename", ""), "evalue": output.get("evalue", "")}
    for output in outputs:
        if output.get("output_type") in ("execute_result", "display_data"):
            return {"status": "ok", "data": dict(output.get("data", {})), "metadata": dict(output.get("metadata", {}))}
    return {"status": "ok", "data": {}, "metadata": {}}


def _outputs(result: dict[str, Any]) -> list[Any]:
    """The outputs myst-nb's eval role expects, from a recorded ``result``."""
    if result.get("status") != "ok":
        return [nbformat.v4.new_output("error", ename=result.get("ename", ""), evalue=result.get("evalue", ""))]
    return [nbformat.v4.new_output("execute_result", data=result.get("data", {}), metadata=result.get("metadata", {}))]


def recorded_values(cell: Any) -> dict[str, str]:
    """``{expression: text}`` of a markdown cell's recorded values (text/plain, string quotes stripped)."""
    values = {}
    for item in cell.get("metadata", {}).get(RECORD_KEY, []) or []:
        data = item.get("result", {}).get("data", {})
        text = data.get("text/plain")
        if isinstance(text, list):
            text = "".join(text)
        if text is not None:
            if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
                text = text[1:-1]
            values[item["expression"]] = text
    return values


def _patch_myst_nb() -> None:
    """Run the cells above each markdown cell before it renders; record each evaluated value in its cell."""
    from myst_nb.core.execute.inline import NotebookClientInline
    from myst_nb.core.render import MditRenderMixin

    if getattr(MditRenderMixin, "_xorlib_patched", False):
        return
    render_markdown = MditRenderMixin.render_nb_cell_markdown

    def render_nb_cell_markdown(self: Any, token: Any) -> None:
        client = self.nb_client
        index = token.meta.get("index")
        if index is not None:
            client._xorlib_cell = index
            if isinstance(client, NotebookClientInline) and index > 0:
                client.code_cell_outputs(index - 1)  # executes every cell up to the one above
        try:
            render_markdown(self, token)
        finally:
            client._xorlib_cell = None

    def eval_variable(self: Any, name: str) -> list[Any]:
        outputs = eval_inline(self, name)
        index = getattr(self, "_xorlib_cell", None)
        if index is not None:
            cell = self.notebook.cells[index]
            record = [item for item in cell.metadata.get(RECORD_KEY, []) if item.get("expression") != name]
            record.append({"expression": name, "result": _result(outputs)})
            cell.metadata[RECORD_KEY] = record
        return outputs

    eval_inline = NotebookClientInline.eval_variable
    MditRenderMixin.render_nb_cell_markdown = render_nb_cell_markdown
    NotebookClientInline.eval_variable = eval_variable
    _glue_reads_ahead()
    MditRenderMixin._xorlib_patched = True


def _glue_reads_ahead() -> None:
    """``{glue:text}`` may name a value glued further down the chapter, as it may in the other execution modes.

    In the inline mode a value is glued only when its cell has run; a key not glued yet runs the rest of the chapter
    first. (Only for chapters that still glue: the convention is ``{eval}``, see ``tools/CONVENTIONS.md``.)
    """
    from myst_nb.core.execute.inline import NotebookClientInline
    from myst_nb.ext.glue import directives, roles, utils

    retrieve = utils.retrieve_glue_data

    def retrieve_glue_data(document: Any, key: str) -> Any:
        renderer = document.attributes.get("nb_renderer")
        client = getattr(getattr(renderer, "renderer", None), "nb_client", None)
        if isinstance(client, NotebookClientInline) and key not in client.glue_data:
            client.code_cell_outputs(len(client.notebook.cells) - 1)
        return retrieve(document, key)

    for module in (utils, roles, directives):
        if getattr(module, "retrieve_glue_data", None) is retrieve:
            module.retrieve_glue_data = retrieve_glue_data


def _replay_client_class() -> type:
    from myst_nb.core.execute.base import EvalNameError, NotebookClientBase

    class NotebookClientReplay(NotebookClientBase):
        """Outputs and evaluated values from the HTML build's executed notebook: nothing is executed."""

        def start_client(self) -> None:
            folder = Path(self._kwargs["replay_folder"])
            docname = self._kwargs["docname"]
            path = folder / f"{docname}.ipynb"
            if not path.is_file():
                raise ReplayError(f"{path} is missing: run `make book` before `make pdf`")
            executed = nbformat.read(path, as_version=4)
            cells, done = self.notebook.cells, executed.cells
            mismatch = len(cells) != len(done) or any(
                a.cell_type != b.cell_type or a.source != b.source for a, b in zip(cells, done, strict=False)
            )
            if mismatch:
                raise ReplayError(f"{path} was executed from another version of {docname}: run `make book` again")
            for cell, ran in zip(cells, done, strict=True):
                if cell.cell_type == "code":
                    cell.outputs = ran.get("outputs", [])
                    cell.execution_count = ran.get("execution_count")
                elif RECORD_KEY in ran.get("metadata", {}):
                    cell.metadata[RECORD_KEY] = ran.metadata[RECORD_KEY]
            for key in ("language_info", "widgets"):
                if key in executed.metadata:
                    self.notebook.metadata[key] = executed.metadata[key]
            # myst-nb takes glued outputs out of the cells it writes; they are in <page>.glue.json beside them.
            glued = folder / f"{docname}.glue.json"
            self._replayed_glue = json.loads(glued.read_text(encoding="utf-8")) if glued.is_file() else {}

        @property
        def glue_data(self) -> dict[str, Any]:
            return {**getattr(self, "_replayed_glue", {}), **self._glue_data}

        def eval_variable(self, name: str) -> list[Any]:
            import re

            if not re.match(self.nb_config.eval_name_regex, name):
                raise EvalNameError(name)
            index = getattr(self, "_xorlib_cell", None)
            cell = self.notebook.cells[index] if index is not None else {"metadata": {}}
            for item in cell.get("metadata", {}).get(RECORD_KEY, []):
                if item.get("expression") == name:
                    return _outputs(item["result"])
            raise ReplayError(f"{name!r} was not evaluated in this cell by the HTML build: run `make book` again")

    return NotebookClientReplay


def _use_replay(app: Sphinx, config: Config) -> None:
    folder = os.environ.get(REPLAY_ENV)
    if not folder:
        return
    folder = str(Path(folder).resolve())
    import myst_nb.sphinx_ as sphinx_module

    replay = _replay_client_class()
    create_client = sphinx_module.create_client

    def create(notebook: Any, source: str, nb_config: Any, logger: Any, read_fmt: Any = None) -> Any:
        try:
            path = Path(source).resolve()
            docname = path.relative_to(Path(app.srcdir).resolve()).with_suffix("").as_posix()
        except (OSError, ValueError):
            return create_client(notebook, source, nb_config, logger, read_fmt)
        if not any(cell.cell_type == "code" for cell in notebook.cells):
            return create_client(notebook, source, nb_config, logger, read_fmt)
        return replay(notebook, path, nb_config, logger, replay_folder=folder, docname=docname)

    sphinx_module.create_client = create


def setup(app: Sphinx) -> dict[str, Any]:
    _patch_myst_nb()
    app.connect("config-inited", _use_replay)
    return {"version": __version__, "parallel_read_safe": True, "parallel_write_safe": True}
