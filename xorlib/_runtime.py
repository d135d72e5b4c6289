"""Side concerns, in one place: the progress switch and the thread count (the public face is :mod:`xorlib.runtime`).

*What this is:* the one switch that shows or hides progress bars for the whole
package, and the context that fixes torch's CPU thread count. *What it is not:*
a place for any computation. Functions never take a ``progress`` flag; they
call :func:`progress` and the switch decides.

``XORLIB_PROGRESS=1`` (or :func:`set_progress`) turns bars on; they are off by
default so that the built book stays free of bar output.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from typing import TypeVar

import torch
from tqdm.auto import tqdm

from ._checks import check_bool

T = TypeVar("T")
_state = {"progress": os.environ.get("XORLIB_PROGRESS") == "1"}


def set_progress(show: bool) -> None:
    """Show (``True``) or hide (``False``) progress bars in every long computation of the package.

    Examples
    --------
    >>> set_progress(False)
    """
    _state["progress"] = check_bool("show", show)


def progress(items: Iterable[T], desc: str, total: int | None = None) -> Iterable[T]:
    """Wrap ``items`` in a tqdm bar if the switch is on, else return them unchanged."""
    if not _state["progress"]:
        return items
    return tqdm(items, desc=desc, total=total, leave=False)


@contextlib.contextmanager
def threads(count: int = 1) -> Iterator[None]:
    """Run the block with ``count`` torch CPU threads, then restore the previous setting.

    The experiments run single-threaded: their results are then bit-identical
    whatever thread count the caller's process uses (a multi-threaded
    reduction may sum in a different order), and on a shared two-core machine
    intra-op threads would spin against each other on the many small
    operations anyway.
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
