"""Run-time settings shared by the experiments."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

__all__ = ["single_threaded"]


@contextlib.contextmanager
def single_threaded() -> Iterator[None]:
    """Run the block with one torch CPU thread, then restore the previous setting.

    The experiments issue many small tensor operations; on a busy two-core
    machine intra-op threads spin against each other and make them 10 to 30
    times slower, not faster.
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
