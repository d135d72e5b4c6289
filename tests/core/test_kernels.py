"""The compiled loops (xorlib/_loops.c through xorlib._kernels) give the tensor calls' results bit for bit.

Issue 23: the look-up sums and the byte histograms of the streamed passes run as C loops where the extension
was built. Their arithmetic is the tensor calls' own (additions in the same order, and the squares torch.mul
takes), so equality is exact: on the operations themselves (strided bytes, partial sums continued, one and two
columns per bin, two columns and their squares), and on whole steps that read the codes kept whole, kept as
halves and drawn again.
"""

from __future__ import annotations

import dataclasses
import shutil
import sysconfig

import numpy as np
import pytest
import torch

from xorlib import _kernels, one_step
from xorlib._packed import BlockView, Lookup, Pull

needs_loops = pytest.mark.skipif(not _kernels.AVAILABLE, reason="the compiled loops were not built (no C compiler)")


def test_the_loops_are_built_wherever_a_c_compiler_is_at_hand() -> None:
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler}): the tensor calls run instead")
    assert _kernels.AVAILABLE, (
        "xorlib._loops is missing or built from another _loops.c: reinstall the package (make env)"
    )


@needs_loops
def test_the_histograms_tiles_are_the_ones_the_book_quotes() -> None:
    assert _kernels._LIBRARY.xorlib_histogram_rows() == _kernels.HISTOGRAM_ROWS
    assert _kernels._LIBRARY.xorlib_squares_rows() == _kernels.SQUARES_ROWS


def _bytes(groups: int, rows: int, seed: int, stride: int | None = None) -> torch.Tensor:
    """Random bytes ``(groups, rows)``, optionally as a slice of wider rows (row stride ``stride``)."""
    gen = torch.Generator().manual_seed(seed)
    wide = torch.randint(0, 256, (groups, stride or rows), dtype=torch.uint8, generator=gen)
    return wide[:, :rows]


def _view(index: torch.Tensor, m: int) -> BlockView:
    return BlockView(0, index.shape[1], m, m, 0.1, index=index)


@needs_loops
@pytest.mark.parametrize(
    ("m", "rows", "stride"), [(107, 5000, None), (107, 4099, 4101), (13, 1, None), (8, 300, 301), (21, 255, None)]
)
@pytest.mark.parametrize("heads", [1, 2, 3])
def test_lookup_scores_and_their_continuation_equal_the_tensor_calls(m: int, rows: int, stride, heads: int) -> None:
    groups = -(-m // 8)
    index = _bytes(groups, rows, seed=m + rows, stride=stride)
    queries = torch.randn(heads, m, dtype=torch.float64, generator=torch.Generator().manual_seed(rows))
    lookup = Lookup(queries)
    compiled, tensors = lookup.distinct_scores(_view(index, m)), lookup.distinct_scores(_view(index.to(torch.int32), m))
    assert torch.equal(compiled, tensors)
    first = max(1, groups // 2)  # partial sums over the first groups, continued at some rows
    columns = torch.arange(0, rows, 3)
    compiled_partial = lookup.distinct_scores(_view(index, m), first)[:, columns]
    tensor_partial = lookup.distinct_scores(_view(index.to(torch.int32), m), first)[:, columns]
    assert torch.equal(compiled_partial, tensor_partial)
    rest = index[first:].index_select(1, columns)
    done = lookup.finish(compiled_partial, _view(index, m), columns, first, rest)
    assert torch.equal(done, lookup.finish(tensor_partial, _view(index, m), columns, first, rest.to(torch.int32)))
    assert torch.equal(done, tensors[:, columns])


@needs_loops
@pytest.mark.parametrize("columns", [1, 2, 3, 4])
@pytest.mark.parametrize(("m", "rows", "stride"), [(107, 5000, None), (21, 777, 800)])
def test_histograms_over_several_blocks_equal_the_tensor_calls(columns: int, m: int, rows: int, stride) -> None:
    groups = -(-m // 8)
    gen = torch.Generator().manual_seed(columns)
    compiled, tensors = (
        Pull(columns, m, torch.zeros(1, dtype=torch.float64)),
        Pull(columns, m, torch.zeros(1, dtype=torch.float64)),
    )
    for block in range(3):  # the bins accumulate across blocks, in the order of the rows
        index = _bytes(groups, rows, seed=10 * block + columns, stride=stride)
        weights = torch.randn(columns, rows, dtype=torch.float64, generator=gen).exp()
        compiled.add(_view(index, m), weights)
        tensors.add(_view(index.to(torch.int32), m), weights)
    assert torch.equal(compiled.pairs, tensors.pairs)
    assert torch.equal(compiled.single, tensors.single)
    assert torch.equal(compiled.result(), tensors.result())


@needs_loops
@pytest.mark.parametrize(("m", "rows", "stride"), [(107, 5000, None), (21, 777, 800), (8, 5, None), (45, 512, None)])
def test_two_columns_and_their_squares_histogrammed_in_c_equal_the_tensor_calls(m: int, rows: int, stride) -> None:
    """Pull.add_squares on bytes (one compiled call: the squares taken in C, four columns per bin) gives the bins, the
    totals and the result of the tensor calls (torch.mul, then the complex scatter) bit for bit, over several
    blocks, after a running shift; rows below, at and above the C tile, weights with a row stride."""
    groups = -(-m // 8)
    gen = torch.Generator().manual_seed(m + rows)
    like = torch.zeros(1, dtype=torch.float64)
    compiled, tensors = Pull(4, m, like), Pull(4, m, like)
    for block in range(3):
        index = _bytes(groups, rows, seed=block + rows, stride=stride)
        wide = torch.randn(2, rows + 3, dtype=torch.float64, generator=gen).exp()
        base = wide[:, :rows]  # a row stride of rows + 3
        compiled.add_squares(_view(index, m), base)
        tensors.add_squares(_view(index.to(torch.int32), m), base)
        if block == 1:
            factors = torch.tensor([0.5, 0.25, 2.0, 4.0], dtype=torch.float64)
            compiled.scale_(factors)
            tensors.scale_(factors)
    assert compiled.quads is not None and tensors.quads is None  # the two paths were taken
    with pytest.raises(ValueError, match="either as bytes through add_squares or through add"):
        compiled.add(_view(index, m), torch.rand(4, rows, dtype=torch.float64))  # one kind of bins per Pull
    with pytest.raises(ValueError, match="either as bytes through add_squares or through add"):
        tensors.add_squares(_view(index, m), base)
    with pytest.raises(ValueError, match="a Pull of four, not 2"):
        Pull(2, m, like).add_squares(_view(index, m), base)
    assert torch.equal(compiled._histograms(), tensors._histograms())
    assert torch.equal(compiled.totals(), tensors.totals())
    assert torch.equal(compiled.result(), tensors.result())


def test_the_histogram_of_squares_refuses_arrays_it_cannot_read() -> None:
    index = _bytes(2, 10, seed=0)
    weights = torch.rand(2, 10, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"bins \(2, 256, 4\)"):
        _kernels.histogram_squares(torch.zeros(2, 256, 2, dtype=torch.float64), index, weights)
    with pytest.raises(ValueError, match=r"weights \(2, 10\)"):
        _kernels.histogram_squares(torch.zeros(2, 256, 4, dtype=torch.float64), index, weights[:1])
    with pytest.raises(ValueError, match="float64"):
        _kernels.histogram_squares(torch.zeros(2, 256, 4, dtype=torch.float64), index, weights.float())


@pytest.mark.parametrize("compiled", [True, False])
def test_two_columns_as_one_complex_histogram_are_the_separate_histograms(compiled: bool, monkeypatch) -> None:
    """Chapter 11: a pair of weight columns histogrammed as complex weights gives each column's bins bit for bit as
    a real scatter of that column alone, over several blocks (each bin adds its weights in row order)."""
    if compiled and not _kernels.AVAILABLE:
        pytest.skip("the compiled loops were not built")
    monkeypatch.setattr(_kernels, "AVAILABLE", compiled and _kernels.AVAILABLE)
    m, rows = 45, 3000
    groups = -(-m // 8)
    gen = torch.Generator().manual_seed(7)
    pull = Pull(2, m, torch.zeros(1, dtype=torch.float64))
    alone = torch.zeros(2, groups, 256, dtype=torch.float64)
    for block in range(3):
        index = _bytes(groups, rows, seed=block)
        weights = torch.randn(2, rows, dtype=torch.float64, generator=gen).exp()
        pull.add(_view(index if compiled else index.to(torch.int32), m), weights)
        for column in range(2):
            alone[column].scatter_add_(1, index.long(), weights[column].expand(groups, -1))
    assert torch.equal(pull.pairs[0].real, alone[0]) and torch.equal(pull.pairs[0].imag, alone[1])


def _same(a, b) -> bool:
    """Exact equality of results: tensors, floats (as their bits), dataclasses and tuples of them."""
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and torch.equal(a, b)
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return all(_same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, float):
        return a.hex() == b.hex()
    if isinstance(a, tuple | list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


@needs_loops
@pytest.mark.parametrize("keep", [2**30, 2**21, 2**19])  # codes kept whole, partly as halves, mostly drawn again
@pytest.mark.parametrize(
    ("d", "heads", "options"),
    [
        (150_000, "split", {}),
        (150_001, "split", {"sigma": 3.0}),
        (150_000, "tied", {}),
        (90_000, "split", {"code_kind": "iid"}),
    ],
)
def test_a_step_with_the_loops_is_the_step_without_them(
    d: int, heads: str, options: dict, keep: int, monkeypatch
) -> None:
    from xorlib import _source

    monkeypatch.setattr(_source, "KEEP_CODES_BYTES", keep)
    with_loops = one_step(d, heads, **options)
    monkeypatch.setattr(_kernels, "AVAILABLE", False)
    assert _same(with_loops, one_step(d, heads, **options))


@needs_loops
@pytest.mark.parametrize("rows", [2, 10, 16, 18, 1000, 2**14 + 6])
@pytest.mark.parametrize("main", [16, 13])
def test_pairing_halves_and_wholes_are_the_bytes_of_the_python_loops(rows: int, main: int, monkeypatch) -> None:
    from xorlib import _packed

    groups = -(-main // 8)
    gen = torch.Generator().manual_seed(rows + main)
    raw = torch.randint(0, 256, (groups, rows + 3), dtype=torch.uint8, generator=gen)[:, :rows]  # strided rows
    raw[-1] &= _packed.used_bits(main)
    mu = 2 * torch.randint(0, rows // 2, (groups,), generator=gen) + 1

    def run() -> tuple[torch.Tensor, ...]:
        paired = _packed._pair_columns(raw.clone(), mu)
        paired[-1] &= _packed.used_bits(main)
        halves = _packed.half_columns(paired, mu, torch.empty(groups, rows // 2, dtype=torch.uint8))
        whole = _packed.whole_columns(halves, mu, main, torch.zeros(groups, rows, dtype=torch.uint8))
        first = _packed.whole_columns(halves, mu, main, torch.zeros(groups, rows, dtype=torch.uint8), 1)
        return paired, halves, whole, first

    compiled = run()
    monkeypatch.setattr(_kernels, "AVAILABLE", False)
    assert all(torch.equal(a, b) for a, b in zip(compiled, run(), strict=True))
    assert torch.equal(compiled[2], compiled[0])  # the halves determine the paired columns


@needs_loops
@pytest.mark.parametrize(
    ("rows", "groups", "written"),
    [(65532, 14, 14), (65530, 14, 8), (4099, 17, 17), (1000, 33, 30), (48, 16, 16), (31, 2, 1), (17, 3, 3), (5, 1, 1)],
)
def test_the_transpose_writes_the_columns_asked_for_and_nothing_else(rows: int, groups: int, written: int) -> None:
    """Sixteen-by-sixteen tiles, groups beyond sixteen, the last rows byte by byte, and no byte outside the columns."""
    raw = _bytes(rows, groups, seed=rows + groups)
    out = torch.zeros(groups + 1, rows + 7, dtype=torch.uint8)
    _kernels.transpose(raw.contiguous(), written, out[:, :rows])
    assert torch.equal(out[:written, :rows], raw.t()[:written])
    assert not out[written:].any() and not out[:, rows:].any()
    with pytest.raises(ValueError, match="columns"):
        _kernels.transpose(raw.contiguous(), groups + 2, out)


@needs_loops
@pytest.mark.parametrize(("rows", "main", "first"), [(2**14 + 6, 107, 8), (1000, 13, 0), (18, 16, 1), (2, 8, 0)])
def test_bytes_read_off_the_halves_are_those_of_the_tensor_calls(rows: int, main: int, first: int, monkeypatch) -> None:
    """The bytes at some rows of paired columns, read off their halves: every row of a small block, partners on
    both sides of each run, the last group's mask of used bits."""
    from xorlib import _packed

    groups = -(-main // 8)
    gen = torch.Generator().manual_seed(rows + main)
    halves = _bytes(groups, rows // 2, seed=rows + first, stride=rows // 2 + 3)
    mu = 2 * torch.randint(0, rows // 2, (groups,), generator=gen) + 1
    mu[0] = rows - 1  # one run covers the column
    columns = torch.randperm(rows, generator=gen)[: min(rows, 777)]
    compiled = _packed.half_column_bytes(halves, mu, main, rows, columns, first)
    with monkeypatch.context() as patch:
        patch.setattr(_kernels, "AVAILABLE", False)
        tensors = _packed.half_column_bytes(halves, mu, main, rows, columns, first)
    assert compiled.dtype == tensors.dtype == torch.uint8 and torch.equal(compiled, tensors)


@needs_loops
@pytest.mark.parametrize(
    "plan", [[(0, 1)], [(0, -1)], [(0, 1), (1, 1)], [(0, 1), (1, -1)], [(1, -1), (0, 1)], [(0, -1), (0, -1)]]
)
@pytest.mark.parametrize("rows", [1, 7, 4099])
def test_the_screen_finds_the_rows_of_the_tensor_calls(plan: list[tuple[int, int]], rows: int, monkeypatch) -> None:
    """One loop for the additions, comparisons, or and nonzero of top_scores's screen: the same rows, also where a
    bound equals its threshold exactly, and with thresholds that take every row or none."""
    from xorlib._stream import _Screen

    gen = torch.Generator().manual_seed(rows + len(plan))
    partial = torch.randint(-40, 40, (2, rows), generator=gen).double() / 8  # exact sums: ties with the thresholds
    offsets = [0.5 if sign > 0 else 1.25 for _, sign in plan]
    for thresholds in ([2.5, 1.0], [0.0, 6.0], [-torch.inf, torch.inf], [torch.inf, torch.inf], [-3.75, -torch.inf]):
        screen = _Screen(rows, torch.float64, torch.device("cpu"))
        compiled = screen.reaching(partial, plan, offsets, thresholds[: len(plan)]).clone()
        with monkeypatch.context() as patch:
            patch.setattr(_kernels, "AVAILABLE", False)
            tensors = screen.reaching(partial, plan, offsets, thresholds[: len(plan)])
        assert torch.equal(compiled, tensors), (plan, thresholds)
    assert 0 < tensors.numel() or rows == 1
    with pytest.raises(ValueError, match="one or two heads"):
        _kernels.screen(partial, [0, 1, 1], [False] * 3, [0.0] * 3, [0.0] * 3, screen.found)


@needs_loops
@pytest.mark.parametrize(("d", "k", "epochs"), [(8, 2, 30), (16, 2, 20), (21, 3, 10), (32, 2, 5)])
def test_the_authors_model_trains_the_same_with_the_loops(d: int, k: int, epochs: int, monkeypatch) -> None:
    from xorlib.learners._authors import AuthorsConfig, train_authors

    supports = [list(range(k)), list(range(d - k, d))]
    config = AuthorsConfig(d, k=k, epochs=epochs)
    with_loops = dataclasses.replace(train_authors(config, supports, seed=3), seconds=0.0)
    monkeypatch.setattr(_kernels, "AVAILABLE", False)
    without = dataclasses.replace(train_authors(config, supports, seed=3), seconds=0.0)
    for field in dataclasses.fields(with_loops):
        a, b = getattr(with_loops, field.name), getattr(without, field.name)
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and np.array_equal(a, b), field.name
        else:
            assert a == b, field.name


def test_a_library_that_does_not_load_leaves_the_tensor_calls_with_a_warning(tmp_path, monkeypatch) -> None:
    import importlib.util

    broken = tmp_path / "_loops.so"
    broken.write_bytes(b"not a shared library")
    spec = importlib.util.spec_from_file_location("xorlib._loops", broken)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: spec)
    with pytest.warns(UserWarning, match="compiled loops did not load"):
        assert _kernels._load() is None


@needs_loops
def test_a_library_built_from_an_older_file_leaves_the_tensor_calls_with_a_warning(monkeypatch) -> None:
    """A reader who pulls a newer _loops.c without rebuilding: the old library lacks a loop, and xorlib says so and
    uses the tensor calls rather than failing at import."""
    real = _kernels.ctypes.CDLL

    class Older:
        def __init__(self, path: str) -> None:
            self.library = real(path)

        def __getattr__(self, name: str):
            if name == "xorlib_screen":
                raise AttributeError(f"undefined symbol: {name}")
            return getattr(self.library, name)

    monkeypatch.setattr(_kernels.ctypes, "CDLL", Older)
    with pytest.warns(UserWarning, match="built from another _loops.c.*make env"):
        assert _kernels._load() is None


@needs_loops
def test_a_library_built_from_another_source_is_not_called(monkeypatch) -> None:
    """Every loop present but the source changed since the build (a signature may have changed): not called."""
    assert _kernels._LIBRARY.xorlib_source().decode() == _kernels._source_digest()
    monkeypatch.setattr(_kernels, "_source_digest", lambda: "0" * 16)
    with pytest.warns(UserWarning, match="built from another _loops.c"):
        assert _kernels._load() is None
    monkeypatch.setattr(_kernels, "_source_digest", lambda: None)  # no source beside the package (a wheel)
    assert _kernels._load() is not None
