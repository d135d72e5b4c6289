r"""The three benchmarks of issue 14, each returning a frozen result whose rows a table shows.

* :func:`codes_benchmark`: the codes against the floor (:func:`benchmarks.workloads.floor`):
  generating every block, and one streamed pass of scores :math:`Pq`;
* :func:`step_benchmark`: the whole one step (codes, step, attention, certified
  worst case) of both models against the floor, at one :math:`d`;
* :func:`stream_benchmark`: one step at large :math:`d` in a fresh process each,
  its time against a budget and its peak memory.

Times are medians over interleaved rounds and ratios are taken within a round
(:mod:`benchmarks.timing`). Everything runs single-threaded, as
:func:`xorlib.one_step` does (it fixes one thread so that its numbers are
bit-identical on the CPU for any thread setting).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

import xorlib
from xorlib._source import HALVES_FACTOR, KEEP_CODES_BYTES
from xorlib.codes import Codes

from .measure import measure_in_subprocess
from .timing import time_interleaved
from .workloads import floor, generate_codes, score_pass

__all__ = [
    "FULL",
    "SMALL",
    "BenchmarkResult",
    "CodesRow",
    "Sizes",
    "StepRow",
    "StreamRow",
    "as_text",
    "codes_benchmark",
    "step_benchmark",
    "stream_benchmark",
]


@dataclass(frozen=True)
class Sizes:
    """The sizes of one run of the suite."""

    codes: tuple[int, ...]
    step: int
    stream: tuple[int, ...]
    repeats: int
    flag: str  # the command-line flag that selects these sizes


#: ``make benchmarks``: the sizes of the issue.
FULL = Sizes(codes=(10**6, 10**7), step=10**6, stream=(10**7, 10**8), repeats=5, flag="")
#: ``make benchmarks-small`` and the CI test: seconds in all.
SMALL = Sizes(codes=(2**18,), step=2**18, stream=(2**21,), repeats=3, flag=" --small")
#: The size of the step benchmark's warm-up calls (lazy initialisation only).
WARMUP_D = 4096
#: Time budgets of issue 14 for one streamed step, by d (both models).
STREAM_BUDGET_S = {10**7: 10.0, 10**8: 120.0}


@dataclass(frozen=True)
class CodesRow:
    d: int
    m: int
    floor_s: float  # draw d m bits, unpack to float signs, one matrix-vector product
    generate_s: float  # every block of the balanced codes, packed
    scores_s: float  # one streamed pass: the codes generated and the scores P q read off look-up tables
    generate_over_floor: float
    scores_over_floor: float


@dataclass(frozen=True)
class StepRow:
    d: int
    m: int
    heads: str
    floor_s: float
    step_s: float  # xorlib.one_step(d, heads): codes, step, attention, certified worst case
    step_over_floor: float
    success: bool


@dataclass(frozen=True)
class StreamRow:
    d: int
    m: int
    heads: str
    parameters: int
    seconds: float
    budget_s: float | None
    peak_gb: float
    above_start_gb: float
    success: bool
    split: bool
    worst_case: float
    command: str
    floor_s: float  # the honest floor: drawing the d m code bits, timed after the step in the same process
    over_floor: float  # seconds / floor_s
    old_floor_s: float | None  # the issue-14 floor (draw, unpack, multiply), timed once per d
    over_old_floor: float | None


@dataclass(frozen=True)
class BenchmarkResult:
    """One benchmark: its rows, the command that reproduces it, and what to read in it."""

    name: str
    title: str
    command: str
    rows: tuple  # of one row dataclass (CodesRow, StepRow, StreamRow, or benchmarks.book's rows)
    note: str


def codes_benchmark(
    sizes: Sequence[int], *, repeats: int = 5, flag: str = "", seed: int = 0, device: str = "cpu"
) -> BenchmarkResult:
    """Generating the codes, and one pass of scores, against the floor, at each ``d`` of ``sizes``."""
    rows = []
    for d in sizes:
        m = Codes(d).m
        codes = Codes(d, m, seed=seed)
        query = torch.randn(m, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)).to(device)
        with _one_thread():
            timings = time_interleaved(
                {
                    "floor": lambda d=d, m=m, q=query: floor(d, m, q, seed=seed, device=device),
                    "generate": lambda c=codes: generate_codes(c, device=device),
                    "scores": lambda c=codes, q=query: score_pass(c, q),
                },
                repeats=repeats,
            )
        base = timings["floor"]
        rows.append(
            CodesRow(
                d=d,
                m=m,
                floor_s=base.median_s,
                generate_s=timings["generate"].median_s,
                scores_s=timings["scores"].median_s,
                generate_over_floor=timings["generate"].ratio_to(base),
                scores_over_floor=timings["scores"].ratio_to(base),
            )
        )
    return BenchmarkResult(
        name="codes",
        title="The codes against the floor",
        command=f"python -m benchmarks{flag}{_device_flag(device)} --only codes",
        rows=tuple(rows),
        note=(
            "floor: draw the d·m random bits, unpack them to float64 signs, one matrix-vector product (blocks of "
            "2^16 rows). generate: every block of the exactly balanced codes, packed 8 signs per byte. scores: "
            "one streamed pass, the codes generated and P q read off 256-entry look-up tables (never unpacked). "
            f"Medians over {repeats} interleaved rounds, one thread."
        ),
    )


def step_benchmark(d: int, *, repeats: int = 5, flag: str = "", seed: int = 0, device: str = "cpu") -> BenchmarkResult:
    """The whole one step of both models against the floor at ``d``."""
    m = Codes(d).m
    query = torch.randn(m, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    results = {}

    def step(heads: str) -> None:
        results[heads] = xorlib.one_step(d, heads, seed=seed, device=device)

    with _one_thread():
        # The warm-up pays for lazy initialisation, which does not depend on d: one small call each (as
        # benchmarks.measure does), not a whole untimed round at d.
        small = min(d, WARMUP_D)
        floor(small, Codes(small).m, torch.ones(Codes(small).m, dtype=torch.float64), seed=seed, device=device)
        for heads in ("tied", "split"):
            xorlib.one_step(small, heads, seed=seed, device=device)
        timings = time_interleaved(
            {
                "floor": lambda: floor(d, m, query, seed=seed, device=device),
                "tied": lambda: step("tied"),
                "split": lambda: step("split"),
            },
            repeats=repeats,
            warmup=0,
        )
    base = timings["floor"]
    rows = tuple(
        StepRow(
            d=d,
            m=m,
            heads=heads,
            floor_s=base.median_s,
            step_s=timings[heads].median_s,
            step_over_floor=timings[heads].ratio_to(base),
            success=results[heads].success,
        )
        for heads in ("tied", "split")
    )
    return BenchmarkResult(
        name="step",
        title=f"One step at d = {d:,} against the floor",
        command=f"python -m benchmarks{flag}{_device_flag(device)} --only step",
        rows=rows,
        note=(
            f"step: xorlib.one_step(d, heads, seed={seed}): the codes, the population step, the attention after it "
            "and the certified worst case over all 2^d inputs. floor: as in the codes table. Ratios: the median "
            f"over {repeats} interleaved rounds of step / floor within a round."
        ),
    )


def stream_benchmark(
    sizes: Sequence[int],
    *,
    heads: Sequence[str] = ("tied", "split"),
    flag: str = "",
    seed: int = 0,
    device: str = "cpu",
    old_floor: bool = False,
) -> BenchmarkResult:
    """One step at each ``d`` of ``sizes``, each in a fresh process: seconds, peak memory, what it found, floors.

    The honest floor is always timed (a few percent of the step); ``old_floor`` also times the issue-14 floor,
    once per ``d`` (it unpacks every bit: about a minute at :math:`d = 10^8`).
    """
    rows = []
    for d in sizes:
        old_floor_s = None
        for index, head in enumerate(heads):  # the issue-14 floor: timed once per d, in the first model's process
            found = measure_in_subprocess(d, head, seed=seed, device=device, old_floor=old_floor and index == 0)
            old_floor_s = found.old_floor_s if index == 0 else old_floor_s
            rows.append(
                StreamRow(
                    d=d,
                    m=found.m,
                    heads=head,
                    parameters=found.parameters,
                    seconds=found.seconds,
                    budget_s=STREAM_BUDGET_S.get(d),
                    peak_gb=found.peak_gb,
                    above_start_gb=found.above_start_gb,
                    success=found.success,
                    split=found.split,
                    worst_case=found.worst_case,
                    command=found.command,
                    floor_s=found.floor_s,
                    over_floor=found.over_floor,
                    old_floor_s=old_floor_s,
                    over_old_floor=None if old_floor_s is None else found.seconds / old_floor_s,
                )
            )
    return BenchmarkResult(
        name="stream",
        title="Streamed steps at large d, each in a fresh process",
        command=f"python -m benchmarks{flag}{_device_flag(device)} --only stream",
        rows=tuple(rows),
        note=(
            "Each row is one xorlib.one_step in a fresh process (the row's command runs it alone). Peak: the peak "
            "resident memory of the whole process (Linux VmHWM), including torch itself; above start: the part "
            "the step added. The codes are regenerated from their seed in every pass (kept, packed: up to "
            f"{KEEP_CODES_BYTES / 2**20:.0f} MiB whole, {KEEP_CODES_BYTES * HALVES_FACTOR / 2**20:.0f} MiB as halves), "
            "so memory is O(block·m) whatever d. floor: the honest floor, drawing the step's d·m code bits with the "
            "codes' own generator, timed in the same process after the step (over_floor: the step divided by it); "
            "old_floor: the issue-14 floor (draw, unpack to float64, one matrix-vector product), timed once per d in "
            "the first model's process (None where not asked for)."
        ),
    )


def as_text(result: BenchmarkResult) -> str:
    """A benchmark as a plain-text (Markdown) table, headed by its title and the command that reproduces it."""
    fields = [field.name for field in dataclasses.fields(result.rows[0])]
    cells = [[_cell(getattr(row, name)) for name in fields] for row in result.rows]
    widths = [max(len(name), *(len(row[j]) for row in cells)) for j, name in enumerate(fields)]
    lines = [f"## {result.title}", "", f"    {result.command}", ""]
    lines.append("| " + " | ".join(name.ljust(w) for name, w in zip(fields, widths, strict=True)) + " |")
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    lines += ["| " + " | ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) + " |" for row in cells]
    return "\n".join([*lines, "", result.note, ""])


def _device_flag(device: str) -> str:
    return "" if device == "cpu" else f" --device {device}"


def _cell(value: object) -> str:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:.3g}"


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """One torch thread: the floor and the codes are compared with the single-threaded step on equal terms."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
