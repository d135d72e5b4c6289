"""Shared test setup: deterministic, float64, and gentle on a 2-core machine."""

from __future__ import annotations

import os

import pytest
import torch

os.environ.setdefault("XORLIB_CACHE", os.path.join(os.path.dirname(__file__), "..", ".cache", "xorlib-tests"))
torch.set_num_threads(min(2, torch.get_num_threads()))


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)
