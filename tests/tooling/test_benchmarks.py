"""The benchmark harness at CI sizes: ratios to the floor asserted loosely (never absolute times), memory bounded.

The targets of issue 14 are at d = 10^6 (one step within 3x of the floor); here d = 2^18, and each bound has
a wide margin over what this machine measures (in brackets), so that a loaded machine does not fail them.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from _tolerance import assert_close  # noqa: E402

from benchmarks.__main__ import main as benchmarks_main  # noqa: E402
from benchmarks.book import (  # noqa: E402
    GRIDS_BUDGET_S,
    chapters_table,
    grid_command,
    grids_benchmark,
)
from benchmarks.chapter_times import ChapterTime, chapter_paths, time_chapter  # noqa: E402
from benchmarks.empirical import SMALL_SIZE, draw_samples, empirical_benchmark, sample_floor  # noqa: E402
from benchmarks.measure import measure_in_subprocess  # noqa: E402
from benchmarks.suite import SMALL, as_text, codes_benchmark, step_benchmark  # noqa: E402
from benchmarks.workloads import code_bits, floor, generate_codes  # noqa: E402
from xorlib import _kernels  # noqa: E402
from xorlib._random import generator, random_bytes  # noqa: E402
from xorlib.codes import Codes  # noqa: E402


def test_the_floor_is_the_product_of_random_signs_with_the_query() -> None:
    d, m = 1000, 13
    q = torch.randn(m, dtype=torch.float64)
    scores = floor(d, m, q, seed=4)
    gen = torch.Generator().manual_seed(4)
    words = torch.randint(-(2**63), 2**63 - 1, (-(-d * 2 // 8),), generator=gen)
    packed = words.view(torch.uint8)[: 2 * d].view(d, 2).long()
    bits = torch.stack([(packed >> b) & 1 for b in range(8)], dim=-1).reshape(d, 16)[:, :m]
    # A sum of m signed entries of q, in any order: within 2 gamma_m sum|q| of each other (tests/_tolerance.py).
    assert_close(scores, (1 - 2 * bits).double() @ q, operations=m, scale=float(q.abs().sum()))
    assert generate_codes(Codes(2**17 + 6)) == 2**17 + 6


def test_the_honest_floor_draws_the_codes_bits_with_their_generator() -> None:
    """code_bits draws what the codes draw, block by block, and nothing else (issue 23)."""
    codes = Codes(2**17 + 7, seed=3)  # odd: the tail rows are not drawn in blocks
    assert code_bits(codes) == codes.bulk * ((codes.main + 7) // 8)
    block = 1
    start, stop = codes._block_range(block)
    groups = (codes.main + 7) // 8
    words = torch.empty(-(-(stop - start) * groups // 8), dtype=torch.int64)
    drawn = codes._paired_columns(block, words, torch.empty(groups, stop - start, dtype=torch.uint8))
    gen = generator(codes.seed, "codes", codes.kind, codes.d, codes.m, block)
    raw = random_bytes(gen, (stop - start) * groups).view(stop - start, groups)
    assert torch.equal(words.view(torch.uint8)[: raw.numel()].view_as(raw), raw)  # the codes drew these bytes
    assert torch.equal(
        drawn.t()[0],
        raw[0] & torch.tensor([255] * (groups - 1) + [(1 << (codes.main % 8 or 8)) - 1], dtype=torch.uint8),
    )


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


def test_the_sample_floor_is_one_product_of_random_signs_with_the_weights() -> None:
    d, n = 21, 3000
    w = torch.randn(d, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    got = sample_floor(d, n, w, seed=2)
    gen = torch.Generator().manual_seed(2)
    words = torch.randint(-(2**63), 2**63 - 1, (-(-n * 3 // 8),), generator=gen)
    packed = words.view(torch.uint8)[: 3 * n].view(n, 3).long()
    bits = torch.stack([(packed >> b) & 1 for b in range(8)], dim=-1).reshape(n, 24)[:, :d]
    # float32 table entries (sums of 8 weights) summed in float32 over 3 bytes: within gamma_11 sum|w| (float32)
    assert_close(got, (1 - 2 * bits).double() @ w, operations=11, scale=float(w.abs().sum()), dtype=torch.float32)
    assert draw_samples(d, n, seed=2) == n


def test_the_empirical_step_is_within_a_few_floors() -> None:
    result = empirical_benchmark(SMALL_SIZE, repeats=3)
    rows = {row.heads: row for row in result.rows}
    assert set(rows) == {"tied", "split"} and all(row.n == SMALL_SIZE[1] for row in result.rows)
    assert rows["split"].success  # (the tied model's step at n = 2^17, d = 256 is short of its n*)
    for row in result.rows:
        assert row.draw_s < row.floor_s  # the floor draws and then passes over the bits
        assert row.step_over_floor < 6.0  # (2.3-2.9 at d = 256; 1.9-2.2 at d = 1024, n = 10^6, the size)
    assert "python -m benchmarks --only empirical" in as_text(result)


def test_a_streamed_step_in_a_fresh_process_stays_in_bounded_memory() -> None:
    found = measure_in_subprocess(2**20, "split", seed=1)
    assert found.success and found.split and found.parameters == 2 * found.m
    assert 0 < found.above_start_gb < 1.0  # (0.1: packed codes and a few score rows)
    assert found.floor_s > 0 and found.over_floor == found.seconds / found.floor_s and found.old_floor_s is None
    assert found.command == "python -m benchmarks.measure --d 1048576 --heads split --seed 1"
    assert found.loops == _kernels.AVAILABLE


def test_without_the_compiled_loops_the_step_finds_the_same_numbers() -> None:
    found = measure_in_subprocess(2**18, "split", seed=2, loops=False)
    assert not found.loops and found.command.endswith(" --without-loops")
    assert found.worst_case == measure_in_subprocess(2**18, "split", seed=2).worst_case  # bit for bit


@pytest.fixture(scope="module")
def tiny_chapters(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ChapterTime]:
    """A chapter that runs and one that fails, each executed once in a fresh pinned kernel (two kernels in all)."""
    sources = {"good": "x = 1 + 1", "bad": "1 / 0"}
    return {
        kind: time_chapter(_tiny_chapter(tmp_path_factory.mktemp(kind), source)) for kind, source in sources.items()
    }


@pytest.mark.parametrize(("kind", "error"), [("good", None), ("bad", "ZeroDivisionError")])
def test_chapter_times_executes_a_chapter_in_a_fresh_pinned_kernel(tiny_chapters: dict, kind, error) -> None:
    timed = tiny_chapters[kind]
    assert timed.cells == 1 and timed.seconds > 0
    assert (timed.error is None) if error is None else (error in timed.error)
    names = [path.name for path in chapter_paths()]
    assert names[0] == "01_task_and_models.md" and "11_performance.md" in names


def _tiny_chapter(folder: Path, source: str) -> Path:
    chapter = folder / "tiny.md"
    header = "---\njupytext:\n  text_representation:\n    extension: .md\n    format_name: myst\n"
    kernel = "kernelspec:\n  display_name: Python 3\n  language: python\n  name: python3\n---\n"
    chapter.write_text(f"{header}{kernel}\n# Tiny\n\n```{{code-cell}} ipython3\n{source}\n```\n")
    return chapter


def test_the_chapter_table_marks_a_failing_or_slow_chapter_as_over_budget(tiny_chapters: dict) -> None:
    good = chapters_table([tiny_chapters["good"]])
    bad = chapters_table([tiny_chapters["bad"]])
    slow = chapters_table([tiny_chapters["good"]], limit_s=0.0)
    assert good.rows[0].within_budget and not bad.rows[0].within_budget and not slow.rows[0].within_budget
    assert "ZeroDivisionError" in bad.rows[0].error
    assert "python -m benchmarks.chapter_times" in as_text(good) and "1 of 1 chapters within budget" in good.note


def test_the_grid_table_reads_the_times_make_experiments_prints() -> None:
    assert grid_command(2)[1:] == ["-m", "xorlib.experiments", "--full", "--jobs", "2"]
    stand_in = (
        "print('2 experiments (full plans), 2 at a time'); print('=== authors (full plan): 250 s ==='); "
        "print('=== lr_grid (full plan): 150 s ==='); print('all 2 experiments: 260 s wall clock with 2 at a time')"
    )
    result = grids_benchmark(command=[sys.executable, "-c", stand_in])
    assert [(row.experiment, row.seconds) for row in result.rows] == [
        ("authors", 250), ("lr_grid", 150), ("all (wall clock)", 260)
    ]  # fmt: skip
    assert GRIDS_BUDGET_S == 600 and result.rows[-1].share_of_budget == 260 / 600
    assert "python -m xorlib.experiments --full" in as_text(result) and "2 experiments at a time" in result.note


def test_the_experiments_command_runs_the_book_grids_in_parallel_and_reports_failures(capsys) -> None:
    from xorlib.experiments.__main__ import main as experiments_main

    assert experiments_main(["enumeration_check", "one_head", "--jobs", "2"]) == 0
    out = capsys.readouterr().out
    assert "=== one_head (book plan):" in out and "=== enumeration_check (book plan):" in out
    assert "wall clock with 2 at a time" in out
    with pytest.raises(SystemExit):
        experiments_main(["--jobs", "0"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is here: the flag is valid")
def test_an_absent_device_is_refused_before_anything_runs(capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        benchmarks_main(["--small", "--device", "cuda", "--only", "codes"])
    assert stop.value.code == 2 and "CUDA is not available" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        benchmarks_main(["--device", "tpu9", "--only", "codes"])


@pytest.mark.parametrize(
    ("module", "args", "words"),
    [
        ("benchmarks.measure", ["--d", "3"], "d must be an integer in [4, 1000000000]"),
        ("benchmarks.measure", ["--d", "64", "--device", "meta"], "device is 'meta'"),
        ("benchmarks.chapter_times", ["--limit", "-1"], "must be above 0"),
        ("benchmarks.chapter_times", ["no_such_chapter.md"], "must be an existing chapter file"),
        ("benchmarks", ["--only", "nothing"], "invalid choice"),
    ],
)
def test_finding_5_every_benchmark_cli_gives_a_usage_error_never_a_traceback(module, args, words, capsys) -> None:
    """Issue 19, finding 5: ``python -m benchmarks.measure --d 3`` printed a traceback; ``--limit -1`` ran everything."""
    main = importlib.import_module(module if module != "benchmarks" else "benchmarks.__main__").main
    with pytest.raises(SystemExit) as stop:
        main(args)
    error = capsys.readouterr().err
    assert stop.value.code == 2 and "usage:" in error and words in error


def test_finding_5_the_process_exits_with_the_usage_error_and_no_traceback() -> None:
    import subprocess

    command = [sys.executable, "-m", "benchmarks.measure", "--d", "3"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2 and "usage:" in done.stderr and "Traceback" not in done.stderr
