"""JupyterLab as a reader gets it: `make lab`, then a chapter by the launch button's link, as a runnable notebook.

The test starts JupyterLab exactly as the README says (``make lab``, options in ``LAB_ARGS``: a free port on
127.0.0.1, a token, no browser; user settings, data and runtime folders isolated in a temporary directory), opens a
chapter in headless Chromium at the URL path the book's launch button builds (``lab/tree/chapters/NN.md``, read from
the built page when there is one), and checks that a notebook panel with code cells appears, not the text editor.
Then it runs that chapter's code cells, in order, in the kernel that JupyterLab started for it, over the Jupyter
server's kernel websocket, and checks that none fails.

The chapter is the one of ``_toc.yml`` with the fewest lines of code (``XORLIB_LAB_CHAPTER=chapters/NN.md`` picks
another). Marked ``lab``: ``make test`` runs it; ``pytest -m lab`` runs it alone.

Then, as a reader does, it opens chapters 1-3 in that JupyterLab, runs all their cells from the menu's command
(``notebook:run-all-cells``), saves them, and reads the rendered markdown (jupyterlab-myst): no raw MyST
(``{prf:``, ``:label:``, ``{ref}``, ``{glue:text}``, ``(label)=``, ``:::{``), no maths error, and every value that
the book glues with ``{eval}`` shown as the book shows it (the values recorded in the book's executed notebooks);
a ``{glue:text}`` (which jupyterlab-myst cannot evaluate: it shows the key) and a reference that JupyterLab cannot
resolve (another chapter's label: it shows the label) are reported too.
Saving leaves the working tree as it was (``git status``). What today's chapters still fail is judged against
``tests/book/allowlist.yml``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import unquote

import _allowlist
import _chromium
import pytest
import yaml
from conftest import labels_of

ROOT = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT = 60.0
RUN_TIMEOUT = 120.0

pytestmark = [pytest.mark.lab, pytest.mark.timeout(300)]


def _toc_chapters() -> list[str]:
    data = yaml.safe_load((ROOT / "_toc.yml").read_text())
    found: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if "file" in node:
                found.append(node["file"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk({k: v for k, v in data.items() if k != "root"})
    paths = [ROOT / (f if f.endswith((".md", ".ipynb")) else f + ".md") for f in found]
    return [p.relative_to(ROOT).as_posix() for p in paths if p.is_file() and p.suffix == ".md"]


def _code_lines(path: Path) -> int:
    cells = re.findall(r"^```\{code-cell\}[^\n]*\n(.*?)^```", path.read_text(), flags=re.MULTILINE | re.DOTALL)
    return sum(len(cell.splitlines()) for cell in cells) if cells else 10**9


def _chapter() -> str:
    if chosen := os.environ.get("XORLIB_LAB_CHAPTER"):
        return chosen
    chapters = [c for c in _toc_chapters() if _code_lines(ROOT / c) < 10**9]
    if not chapters:
        pytest.skip("no chapter with code cells in _toc.yml")
    return min(chapters, key=lambda c: _code_lines(ROOT / c))


def launch_urlpath(chapter: str) -> str:
    """The ``urlpath`` of the chapter's Binder launch link: from the built page, else as sphinx-book-theme builds it."""
    page = ROOT / "_build" / "html" / Path(chapter).with_suffix(".html")
    if page.is_file() and (match := re.search(r"mybinder[^\"']*[?&]urlpath=([^\"'&]+)", page.read_text())):
        return unquote(match[1])
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    interface = {"classic": "tree", "jupyterlab": "lab/tree"}[config["launch_buttons"]["notebook_interface"]]
    book = str(config.get("repository", {}).get("path_to_book", "")).strip("/")
    return f"{interface}/{book + '/' if book else ''}{chapter}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    """A JupyterLab server started by ``make lab``: its URL, token and REST API."""

    def __init__(self, tmp: Path) -> None:
        self.port = _free_port()
        self.token = uuid.uuid4().hex
        self.url = f"http://127.0.0.1:{self.port}"
        args = [
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={ROOT}",
            "--LabApp.news_url=None",
            "--LabApp.expose_app_in_browser=True",  # window.jupyterapp: the test runs JupyterLab's own commands
            "--LabApp.check_for_updates_class=jupyterlab.handlers.announcements.NeverCheckForUpdate",
            *(["--allow-root"] if os.geteuid() == 0 else []),  # CI runs as root
            # Saving a chapter writes a checkpoint: into this folder, not an .ipynb_checkpoints/ beside each chapter
            # (in the checkout, where the unit tests would take it for a chapter).
            f"--FileCheckpoints.checkpoint_dir={tmp / 'checkpoints'}",
        ]
        env = dict(os.environ)
        for name, folder in (
            ("JUPYTERLAB_SETTINGS_DIR", "user-settings"),
            ("JUPYTERLAB_WORKSPACES_DIR", "workspaces"),
            ("JUPYTER_CONFIG_DIR", "config"),
            ("JUPYTER_DATA_DIR", "data"),
            ("JUPYTER_RUNTIME_DIR", "runtime"),
            ("IPYTHONDIR", "ipython"),
        ):
            env[name] = str(tmp / folder)
        env.pop("JUPYTERLAB_DIR", None)
        self.log = tmp / "lab.log"
        # `-o STAMP`: never reinstall the environment from here (the test runs inside it, offline).
        command = ["make", "-s", "-o", ".venv/.installed-stamp", "lab", "LAB_ARGS=" + " ".join(args)]
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
            )
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            try:
                self.api("status")
                return
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    pytest.fail(f"JupyterLab did not start: {self.log.read_text()[-3000:]}")
                time.sleep(0.1)

    def api(self, path: str, method: str = "GET", body: dict | None = None) -> object:
        request = urllib.request.Request(
            f"{self.url}/api/{path}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as reply:
            text = reply.read()
        return json.loads(text) if text else None

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, 15)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, 9)
                self.process.wait(timeout=10)


def _loopback_works() -> bool:
    """Whether a server on 127.0.0.1 can be reached (not in a bare ``unshare -n``, where lo is down)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        try:
            socket.create_connection(server.getsockname(), timeout=2).close()
        except OSError:
            return False
    return True


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    if not _loopback_works():
        pytest.skip("127.0.0.1 is unreachable (a bare `unshare -n`: run `ip link set lo up` in it first)")
    if not (ROOT / ".venv" / "bin" / "jupyter-lab").exists():
        pytest.fail("jupyterlab is not installed in .venv (it is pinned in requirements.txt: make env)")
    server = Lab(tmp_path_factory.mktemp("lab"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def tab(lab: Lab) -> Iterator[_chromium.Page]:
    """One browser tab for the module's tests: JupyterLab's page loads once (by the launch link, or by the first
    chapter opened), and later notebooks open in it as a reader opens them from the file browser."""
    with _chromium.launch() as browser, browser.page(1280, 900) as page:
        yield page


def test_the_launch_link_is_a_lab_tree_path() -> None:
    chapter = _chapter()
    assert launch_urlpath(chapter) == f"lab/tree/{chapter}", launch_urlpath(chapter)


# Runs in JupyterLab's page: the widget in the main area, and the cells of its notebook if it is one.
PANEL = """
(() => {
  const tab = document.querySelector('.lm-DockPanel-tabBar .lm-TabBar-tab.jp-mod-current .lm-TabBar-tabLabel');
  const panel = document.querySelector('#jp-main-dock-panel .jp-NotebookPanel:not(.lm-mod-hidden)');
  const editor = document.querySelector('#jp-main-dock-panel .jp-FileEditor:not(.lm-mod-hidden)');
  return {
    tab: tab ? tab.textContent : null,
    notebook: !!panel,
    editor: !!editor,
    codeCells: panel ? panel.querySelectorAll('.jp-CodeCell').length : 0,
    markdownCells: panel ? panel.querySelectorAll('.jp-MarkdownCell').length : 0,
    kernel: panel ? ((panel.querySelector('[data-jp-item-name="kernelName"]') || {}).textContent || '').trim() : '',
  };
})()
"""


def test_the_launch_link_opens_a_notebook_with_code_cells(lab: Lab, tab: _chromium.Page) -> None:
    chapter = _chapter()
    tab.navigate(f"{lab.url}/{launch_urlpath(chapter)}?token={lab.token}", timeout=90.0)
    try:
        state = tab.wait_until(
            f"(() => {{ const s = {PANEL}; return (s.notebook && s.codeCells) || s.editor ? s : null; }})()",
            timeout=60.0,
        )
    except TimeoutError:
        pytest.fail(f"neither a notebook nor an editor opened for {chapter}: {tab.evaluate(PANEL)}")
    assert not state["editor"], f"{chapter} opened in the text editor, not as a notebook: {state}"
    assert state["notebook"] and state["codeCells"] > 0, state
    assert state["tab"] == Path(chapter).name, state
    try:  # runnable: JupyterLab starts the chapter's kernel
        state = tab.wait_until(
            f"(() => {{ const s = {PANEL}; return /python/i.test(s.kernel) ? s : null; }})()", timeout=60.0
        )
    except TimeoutError:
        pytest.fail(f"no kernel started for {chapter}: {tab.evaluate(PANEL)}")
    tab.screenshot(ROOT / "_build" / "screenshots" / "jupyterlab.png", max_height=900)
    # JupyterLab 4 may name a notebook's session ``<folder>/<uuid>`` with the file in ``name``. The panel may show
    # the kernel before the server lists its session (a busy host): the list is read until it does, or 30 s pass.
    deadline = time.monotonic() + 30.0
    sessions = lab.api("sessions")
    while not any(_session_is_for(s, chapter) for s in sessions) and time.monotonic() < deadline:
        time.sleep(0.25)
        sessions = lab.api("sessions")
    assert any(_session_is_for(s, chapter) for s in sessions), sessions


def _session_is_for(session: dict, chapter: str) -> bool:
    """Whether a Jupyter session belongs to ``chapter`` (by path, or by folder and file name)."""
    path = str(session.get("path", ""))
    if path == chapter:
        return True
    return session.get("name") == Path(chapter).name and Path(path).parent == Path(chapter).parent


async def _run_cells(lab: Lab, kernel_id: str, cells: list[str]) -> list[str]:
    """Execute ``cells`` in order in the kernel; return the errors (``ename: evalue``) of the cells that failed."""
    from tornado.websocket import websocket_connect

    url = f"ws://127.0.0.1:{lab.port}/api/kernels/{kernel_id}/channels?token={lab.token}"
    connection = await websocket_connect(url)
    session = uuid.uuid4().hex
    errors: list[str] = []
    try:
        for number, code in enumerate(cells, start=1):
            msg_id = uuid.uuid4().hex
            request = {
                "header": {
                    "msg_id": msg_id,
                    "username": "test",
                    "session": session,
                    "msg_type": "execute_request",
                    "version": "5.3",
                },
                "parent_header": {},
                "metadata": {},
                "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {}},
                "channel": "shell",
                "buffers": [],
            }
            await connection.write_message(json.dumps(request))
            deadline = time.monotonic() + RUN_TIMEOUT
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return [*errors, f"cell {number} did not finish in {RUN_TIMEOUT:.0f} s"]
                raw = await asyncio.wait_for(connection.read_message(), timeout=left)
                if raw is None:
                    return [*errors, "the kernel websocket closed"]
                if isinstance(raw, bytes):
                    continue
                message = json.loads(raw)
                if message.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                if message["channel"] == "shell" and message["header"]["msg_type"] == "execute_reply":
                    content = message["content"]
                    if content["status"] != "ok":
                        errors.append(f"cell {number}: {content.get('ename')}: {content.get('evalue')}")
                    break
            if errors:
                break
    finally:
        connection.close()
    return errors


def test_the_chapter_runs_to_the_end_in_the_labs_kernel(lab: Lab) -> None:
    import jupytext

    chapter = _chapter()
    sessions = [s for s in lab.api("sessions") if _session_is_for(s, chapter)]
    if sessions:  # the kernel JupyterLab started when the notebook opened
        kernel_id = sessions[0]["kernel"]["id"]
    else:  # this test alone: start one for the chapter, as opening it does
        session = lab.api(
            "sessions", "POST", {"path": chapter, "type": "notebook", "name": chapter, "kernel": {"name": "python3"}}
        )
        kernel_id = session["kernel"]["id"]
    notebook = jupytext.read(ROOT / chapter)
    cells = [
        cell.source
        for cell in notebook.cells
        if cell.cell_type == "code" and "skip-execution" not in cell.metadata.get("tags", [])
    ]
    assert cells, f"{chapter} has no code cells"
    errors = asyncio.run(_run_cells(lab, kernel_id, cells))
    assert not errors, f"{chapter} in JupyterLab's kernel: {errors}"
    kernel = lab.api(f"kernels/{kernel_id}")
    assert kernel["execution_state"] in ("idle", "busy"), kernel


RENDERED_CHAPTERS = ("chapters/01_task_and_models.md", "chapters/02_tied_one_step.md", "chapters/03_split_heads.md")
RAW = {
    "{prf:": re.compile(r"\{prf:"),
    ":label:": re.compile(r":label:"),
    "{ref}": re.compile(r"\{(?:ref|numref|prf:ref)\}"),
    "{glue:text}": re.compile(r"\{glue:?\w*\}"),
    "(label)=": re.compile(r"^\s*\([\w.:-]+\)=\s*$", re.M),
    ":::{": re.compile(r":::+\{"),
    "{eval}": re.compile(r"\{eval\}"),
}

# In JupyterLab's page: run every cell of the current notebook, then save it; resolves when the kernel is idle.
RUN_ALL = """
(async (limit) => {
  const app = window.jupyterapp;
  const panel = app.shell.currentWidget;
  await panel.context.ready;
  await panel.sessionContext.ready;
  await app.commands.execute('notebook:run-all-cells');
  const busy = () => panel.sessionContext.session && panel.sessionContext.session.kernel
    && panel.sessionContext.session.kernel.status !== 'idle';
  const start = Date.now();
  while (Date.now() - start < 600000) {
    await new Promise(r => setTimeout(r, 100));
    const cells = panel.content.widgets;
    const pending = cells.filter(c => c.model.type === 'code' && c.model.executionCount === null
      && c.model.sharedModel.getSource().trim()  // an empty cell is never sent to the kernel
      && !(c.model.getMetadata('tags') || []).includes('skip-execution'));
    if (!busy() && pending.length === 0) break;
    if (Date.now() - start > limit) return {finished: false, pending: pending.length};
  }
  // The markdown cells' inline expressions are evaluated after the code, one request each: wait (on a loaded
  // machine this takes seconds) until every markdown cell with an {eval} role holds its evaluated expressions.
  const evaluated = () => panel.content.widgets.filter(c => c.model.type === 'markdown'
    && c.model.sharedModel.getSource().includes('{eval}')).every(c => {
      const values = c.model.getMetadata('user_expressions');
      return Array.isArray(values) && values.length > 0;
    });
  const evalStart = Date.now();
  while (!(evaluated() && !busy()) && Date.now() - evalStart < 60000) {
    await new Promise(r => setTimeout(r, 250));
  }
  await new Promise(r => setTimeout(r, 500));  // the rendered markdown follows its metadata
  await app.commands.execute('docmanager:save');
  return {finished: true, pending: 0};
})
"""


# In JupyterLab's page: close every document (shutting its kernel down, unsaved changes dropped), then open ``path``.
OPEN_ALONE = """
(async (path) => {
  const app = window.jupyterapp;
  for (const widget of [...app.shell.widgets('main')]) {
    if (widget.sessionContext && widget.sessionContext.session) await widget.sessionContext.shutdown();
    if (widget.context) widget.context.model.dirty = false;
    widget.dispose();
  }
  await app.commands.execute('docmanager:open', {path});
  return 1;
})
"""


def _read_when_shown(tab: _chromium.Page, shown: Callable[[str], bool], wait_s: float = 30.0) -> dict:
    """:data:`READ`, once ``shown(text)`` holds for the rendered text (or after ``wait_s``: the rendered markdown
    follows the evaluated expressions, later on a loaded machine). The caller's assertions then judge it."""
    deadline = time.monotonic() + wait_s
    state = tab.evaluate(READ)
    while not shown(state["text"]) and time.monotonic() < deadline:
        time.sleep(0.5)
        state = tab.evaluate(READ)
    return state


def _open_and_run(tab: _chromium.Page, lab: Lab, path: str, limit_s: float) -> dict:
    """Open ``path`` as the current notebook, run it all, save it.

    Where the tab shows this JupyterLab already, the file opens there with its default viewer (``docmanager:open``,
    as a double click in the file browser opens it: the launch-link test checks that viewer is the notebook), after
    the notebooks open before it are closed and their kernels shut down, as in a fresh workspace; otherwise by its
    URL, in a fresh workspace. Loading JupyterLab's page once saves seconds of CPU per chapter.
    """
    here = tab.evaluate(f"!!window.jupyterapp && location.origin === {json.dumps(lab.url)}")
    if here:
        tab.evaluate(f"{OPEN_ALONE}({json.dumps(path)})", timeout=90.0)
    else:
        tab.navigate(f"{lab.url}/lab/tree/{path}?reset&token={lab.token}", timeout=90.0)
    tab.wait_until(
        "(() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
        f" return !!(w && w.context && w.context.path === {json.dumps(path)} && w.content"
        " && w.content.widgets.length); })()",
        timeout=90.0,
    )
    return tab.evaluate(f"{RUN_ALL}({int(limit_s * 1000)})", timeout=limit_s + 60)


# In JupyterLab's page: the text of every rendered markdown cell, maths errors, and the code cells that failed.
READ = """
(() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const cells = panel.content.widgets;
  const markdown = cells.filter(c => c.model.type === 'markdown');
  return {
    text: markdown.map(c => {
      const shown = c.node.querySelector('.myst, .jp-RenderedMarkdown, .jp-MarkdownOutput');
      if (!shown) return '';
      const copy = shown.cloneNode(true);  // without the maths' hidden source (KaTeX's MathML and annotation)
      copy.querySelectorAll('.katex-mathml, annotation, mjx-assistive-mml').forEach(e => e.remove());
      const blocks = [...copy.querySelectorAll('p, li, h1, h2, h3, h4, h5, h6, td, th, pre, dt, dd, '
        + '.myst-proof-title, .myst-admonition-header-text, .myst-exercise-title')];
      return blocks.length ? blocks.map(e => e.textContent).join('\\n') : copy.textContent;
    }).join('\\n\\n'),
    mathErrors: [...panel.node.querySelectorAll(
        '.jp-MarkdownCell .katex-error, .jp-MarkdownCell [title*="control sequence"], .jp-MarkdownCell [title*="arse error"]')]
      .map(e => (e.getAttribute('title') || e.textContent || '').slice(0, 80)),
    unresolved: [...new Set([...panel.node.querySelectorAll('.jp-MarkdownCell [title="Cross Reference Not Found"]')]
      .map(e => e.textContent.trim()))],
    errors: cells.filter(c => c.model.type === 'code')
      .flatMap(c => [...c.node.querySelectorAll('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"] pre')]
        .filter(e => /Traceback|Error/.test(e.textContent)).map(e => e.textContent.slice(0, 200))),
    dirty: panel.context.model.dirty,
  };
})()
"""


def _book_values(chapter: str) -> list[str]:
    """The values the built book shows for the chapter's ``{eval}`` roles (recorded in its executed notebook)."""
    import sys

    sys.path.insert(0, str(ROOT / "_ext"))
    from xorlib_eval import recorded_values

    path = ROOT / "_build" / "jupyter_execute" / Path(chapter).with_suffix(".ipynb")
    if not path.is_file():
        return []
    notebook = json.loads(path.read_text())
    return sorted(
        {v for cell in notebook["cells"] if cell["cell_type"] == "markdown" for v in recorded_values(cell).values()}
    )


def _git_status(paths: list[str]) -> str:
    result = subprocess.run(["git", "status", "--porcelain", "--", *paths], cwd=ROOT, capture_output=True, text=True)
    return result.stdout.strip() if result.returncode == 0 else ""


def _checkpoint_folders() -> set[Path]:
    return {path for base in ("chapters", "tests/book/fixtures") for path in (ROOT / base).rglob(".ipynb_checkpoints")}


@pytest.mark.timeout(1500)
def test_chapters_render_as_the_book_in_jupyterlab_and_stay_unchanged(lab: Lab, tab: _chromium.Page) -> None:
    before = _git_status(list(RENDERED_CHAPTERS))
    folders = _checkpoint_folders()
    for chapter in RENDERED_CHAPTERS:
        run = _open_and_run(tab, lab, chapter, limit_s=420.0)
        values = _book_values(chapter)
        state = _read_when_shown(tab, lambda text, values=values: all(v in text for v in values))
        shot = ROOT / "_build" / "screenshots" / "jupyterlab" / f"{Path(chapter).stem}.png"
        tab.screenshot(shot, max_height=900)
        assert not state["errors"], f"{chapter}: cells failed in JupyterLab: {state['errors'][:2]}"
        assert run["finished"], f"{chapter}: {run['pending']} cells never ran in JupyterLab"
        found = [name for name, pattern in RAW.items() if pattern.search(state["text"])]
        found += ["maths errors"] if state["mathErrors"] else []
        # jupyterlab-myst resolves a reference within its notebook only, and knows no myst-nb figure name (a
        # cell's metadata): those show their label's text and link online. A label of this chapter must resolve.
        own = labels_of((ROOT / chapter).read_text())
        found += [f"reference not found: {label}" for label in state["unresolved"] if label in own]
        if re.search(r"\{glue:?\w*\}`", (ROOT / chapter).read_text()):  # jupyterlab-myst shows glue's key
            found.append("glued values not shown ({glue:text})")
        missing = [v for v in values if v not in state["text"]]
        found += [f"glued value not shown: {v}" for v in missing]
        _allowlist.judge(chapter.removesuffix(".md"), "jupyterlab rendering", found)
    after = _git_status(list(RENDERED_CHAPTERS))
    assert after == before, f"running and saving the chapters in JupyterLab changed them:\n{after}"
    assert _checkpoint_folders() == folders, "saving a chapter left an .ipynb_checkpoints folder in the checkout"


FIXTURE_CHAPTER = "tests/book/fixtures/book/chapters/fixture_theory.md"


@pytest.mark.timeout(600)
def test_the_conventions_render_in_jupyterlab(lab: Lab, tab: _chromium.Page) -> None:
    """The fixture chapter (``{eval}``, the macros cell, a theorem and its folded proof, references, a label):
    rendered by jupyterlab-myst with its values, no raw MyST and no maths error, and saved unchanged."""
    before = _git_status([FIXTURE_CHAPTER])
    run = _open_and_run(tab, lab, FIXTURE_CHAPTER, limit_s=300.0)
    state = _read_when_shown(tab, lambda text: "fx_worst" not in text and "fx_d" not in text)
    tab.screenshot(ROOT / "_build" / "screenshots" / "jupyterlab" / "fixture_theory.png", max_height=1800)
    assert run["finished"] and not state["errors"], (run, state["errors"])
    text = " ".join(state["text"].split())
    assert [name for name, pattern in RAW.items() if pattern.search(state["text"])] == [], text[:2000]
    assert state["mathErrors"] == [], state["mathErrors"]
    # Another page's label, and a figure captioned in its cell's metadata (myst-nb's): jupyterlab-myst knows neither.
    assert sorted(state["unresolved"]) == ["fx-figure", "fx-plain"], state["unresolved"]
    assert "Atd=8theworstlossafteronestepis" in text.replace(" ", ""), text[:2000]
    assert "fx_worst" not in text and "fx_d" not in text, "an {eval} value is not shown"
    assert "A fixture theorem" in text and "Linearity of" in text
    assert _git_status([FIXTURE_CHAPTER]) == before, "saving the fixture chapter changed it"
