"""The benchmark harness at CI sizes: ratios to the floor asserted loosely (never absolute times), memory bounded.

The targets of issue 14 are at d = 10^6 (one step within 3x of the floor); here d = 2^18, and each bound has
a wide margin over what this machine measures (in brackets), so that a loaded machine does not fail them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.chapter_times import chapter_paths, time_chapter  # noqa: E402
from benchmarks.measure import measure_in_subprocess  # noqa: E402
from benchmarks.suite import SMALL, as_text, codes_benchmark, step_benchmark  # noqa: E402
from benchmarks.workloads import floor, generate_codes  # noqa: E402
from xorlib.codes import Codes  # noqa: E402


def test_the_floor_is_the_product_of_random_signs_with_the_query() -> None:
    d, m = 1000, 13
    q = torch.randn(m, dtype=torch.float64)
    scores = floor(d, m, q, seed=4)
    gen = torch.Generator().manual_seed(4)
    words = torch.randint(-(2**63), 2**63 - 1, (-(-d * 2 // 8),), generator=gen)
    packed = words.view(torch.uint8)[: 2 * d].view(d, 2).long()
    bits = torch.stack([(packed >> b) & 1 for b in range(8)], dim=-1).reshape(d, 16)[:, :m]
    assert torch.allclose(scores, (1 - 2 * bits).double() @ q, rtol=0, atol=1e-12)
    assert generate_codes(Codes(2**17 + 6)) == 2**17 + 6


def test_codes_cost_a_fraction_of_the_floor() -> None:
    (row,) = codes_benchmark(SMALL.codes, repeats=3).rows
    assert row.generate_over_floor < 1.0  # (0.04-0.06)
    assert row.scores_over_floor < 1.5  # (0.07-0.13)


def test_one_step_of_both_models_is_within_a_few_floors() -> None:
    result = step_benchmark(SMALL.step, repeats=3)
    rows = {row.heads: row for row in result.rows}
    assert set(rows) == {"tied", "split"}
    assert all(row.success for row in result.rows)
    assert rows["split"].step_over_floor < 3.0  # (0.4-0.6)
    assert rows["tied"].step_over_floor < 6.0  # (1.6: at d <= 2^18 the tied rule scans 121 step sizes)
    text = as_text(result)
    assert "python -m benchmarks --only step" in text and "| split |" in text.replace("  ", " ")


def test_a_streamed_step_in_a_fresh_process_stays_in_bounded_memory() -> None:
    found = measure_in_subprocess(2**20, "split", seed=1)
    assert found.success and found.split and found.parameters == 2 * found.m
    assert 0 < found.above_start_gb < 1.0  # (0.1: packed codes and a few score rows)
    assert found.command == "python -m benchmarks.measure --d 1048576 --heads split --seed 1"


@pytest.mark.parametrize(("source", "error"), [("x = 1 + 1", None), ("1 / 0", "ZeroDivisionError")])
def test_chapter_times_executes_a_chapter_in_a_fresh_pinned_kernel(tmp_path: Path, source, error) -> None:
    chapter = tmp_path / "tiny.md"
    header = "---\njupytext:\n  text_representation:\n    extension: .md\n    format_name: myst\n"
    kernel = "kernelspec:\n  display_name: Python 3\n  language: python\n  name: python3\n---\n"
    chapter.write_text(f"{header}{kernel}\n# Tiny\n\n```{{code-cell}} ipython3\n{source}\n```\n")
    timed = time_chapter(chapter)
    assert timed.cells == 1 and timed.seconds > 0
    assert (timed.error is None) if error is None else (error in timed.error)
    names = [path.name for path in chapter_paths()]
    assert names[0] == "01_task_and_models.md" and "11_performance.md" in names
