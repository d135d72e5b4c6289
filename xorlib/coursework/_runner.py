"""Run a submission's answer cells inside the sandbox and report what they return.

The fork server (``_launcher.py --serve``) imports this module, with torch,
before any sandbox exists; :func:`main` then runs in each sandbox's process,
after the launcher has built the sandbox and dropped privileges. Its arguments
are ``[_, MANIFEST, PLAN, FD]``. ``MANIFEST`` (JSON, written by the grader)
holds the teacher's setup code, the answer cells in the bank's order, the
function each must define and the encoded test arguments. ``PLAN`` (JSON)
lists the questions to skip (their cell hung or crashed in an earlier attempt)
and those already evaluated (their cells still run, for the names later cells
use). Events go to file descriptor ``FD`` as JSON lines; the grader compares
the outputs with references computed on its side, so nothing here decides a
score. Only the standard library and ``_wire`` are imported here.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

_here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _here)
import _wire  # noqa: E402  (a sibling module, imported without the package)

sys.path.remove(_here)

__all__ = ["main"]

_PRINT_LIMIT = 2000


class _Sink:
    """Stands in for stdout/stderr while answers run: keeps the first characters, drops the rest."""

    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> int:
        if len(self.text) < _PRINT_LIMIT:
            self.text += str(text)[: _PRINT_LIMIT - len(self.text)]
        return len(text)

    def flush(self) -> None:
        pass


def _describe(err: BaseException, filename: str) -> str:
    """``Type: message (line N of the answer cell)``, the line taken from the answer's own frames."""
    line = next((f.lineno for f in reversed(traceback.extract_tb(err.__traceback__)) if f.filename == filename), None)
    where = f" (line {line} of the answer cell)" if line else ""
    text = "".join(traceback.format_exception_only(type(err), err)).strip().splitlines()
    return (text[-1] if text else type(err).__name__)[:500] + where


def main(argv: list[str]) -> int:
    manifest_path, plan, fd = argv[1], json.loads(argv[2]), int(argv[3])
    channel = os.fdopen(fd, "w", buffering=1, encoding="utf-8")

    def send(**event: object) -> None:
        channel.write(json.dumps(event) + "\n")
        channel.flush()

    with open(manifest_path, encoding="utf-8") as handle:
        manifest = json.load(handle)
    sys.path[:0] = [manifest["build"]]
    sys.path.extend(manifest["site"])
    namespace: dict[str, object] = {"__name__": "__main__"}
    try:
        exec(compile(manifest["setup"], "<setup>", "exec"), namespace)
        import torch

        torch.set_num_threads(1)
    except BaseException as err:
        send(e="setup-error", error=_describe(err, "<setup>"))
        return 1
    send(e="ready")
    sink = _Sink()
    for question in manifest["questions"]:
        qid = question["id"]
        if qid in plan["skip"]:
            continue
        send(e="cell", q=qid)
        filename = f"<answer {qid}>"
        sink.text = ""
        sys.stdout = sys.stderr = sink
        try:
            exec(compile(question["code"], filename, "exec"), namespace)
        except BaseException as err:  # the answer's error (even SystemExit) is reported, and the next cell runs
            send(e="cell-error", q=qid, error=_describe(err, filename), printed=sink.text)
        if qid in plan["evaluated"]:
            send(e="end", q=qid)
            continue
        fn = namespace.get(question["function"])
        if not callable(fn):
            send(e="missing", q=qid)
            send(e="end", q=qid)
            continue
        for k, encoded in enumerate(question["cases"]):
            send(e="case", q=qid, k=k)
            try:
                value = fn(*_wire.decode_inputs(encoded))
            except NotImplementedError:
                send(e="raise", q=qid, k=k, error="NotImplementedError", stub=True)
            except BaseException as err:
                send(e="raise", q=qid, k=k, error=_describe(err, filename))
            else:
                send(e="out", q=qid, k=k, value=_wire.encode_output(value))
        send(e="end", q=qid)
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    send(e="done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
