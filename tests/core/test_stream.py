"""The streamed passes' kernels against the dense products, and their rounding allowance against exact arithmetic.

Issue 23: the look-ups (real and complex tables, equal, opposite and zero queries), the pull-backs (byte
histograms, two columns at a time), the drawn blocks (the bits of the public packed blocks), the one-pass start
of opposite heads, the zero-query gradient, the candidate summaries after the tied step, and the rigorous
allowance of the log-weights (checked against exact rational scores and 50-digit logarithms).
"""

from __future__ import annotations

import math
from fractions import Fraction
from itertools import islice

import mpmath
import pytest
import torch
from _tolerance import assert_close, gamma

from xorlib import _stream, one_step
from xorlib._candidates import after_from_candidates, direction_pass
from xorlib._gradient import head_stats, population_gradient, start_and_gradient
from xorlib._logsums import UNDERFLOW, clamp_changes_nothing, exp_sums
from xorlib._packed import Lookup, Pull, _byte_index, _pair_columns, half_columns, whole_columns
from xorlib._source import CodeSource
from xorlib._stream import after_step, top_scores
from xorlib.codes import Codes
from xorlib.learners import _one_step
from xorlib.model import ModelConfig
from xorlib.population import population
from xorlib.task import random_pair

BLOCK = Codes.BLOCK
#: Code dimensions with and without a whole number of bytes (odd ones for odd d).
SIZES = [(2 * BLOCK + 10, 16), (2 * BLOCK + 10, 13), (2 * BLOCK + 11, 9), (2 * BLOCK + 11, 37), (5000, 24), (5001, 41)]


def _score_bound(queries: torch.Tensor, dense: torch.Tensor) -> torch.Tensor:
    """The look-up scores' rounding bound, gamma_{m + 3G + 20} sum_r |q_r||P_kr| (xorlib._logsums.log_weight_error)."""
    m = dense.shape[1]
    return gamma(m + 3 * -(-m // 8) + 20) * (queries.abs() @ dense.abs().T)


@pytest.mark.parametrize(("d", "m"), [*SIZES, (1000, 10), (13, 5)])
@pytest.mark.parametrize("kind", ["balanced", "iid"])
def test_drawn_blocks_have_the_bits_of_the_public_packed_blocks(d: int, m: int, kind: str) -> None:
    if kind == "iid" and m % 2 == 1 and d % 2 == 1:
        m += 1
    codes = Codes(d, m, seed=4, kind=kind)
    source = CodeSource(codes, torch.device("cpu"), keep_bytes=0)
    public = list(codes.views())
    for drawn, view in zip(source(), public, strict=True):
        assert (drawn.start, drawn.stop) == (view.start, view.stop)
        if view.packed is not None:
            assert torch.equal(drawn.byte_index(), _byte_index(view.packed))
        else:
            assert torch.equal(drawn.rows, view.rows)


@pytest.mark.parametrize("keep", [0, 2**15, 2**16, 2**17, 2**30])
@pytest.mark.parametrize(("d", "kind"), [(3 * BLOCK + 8, "balanced"), (3 * BLOCK + 9, "balanced"), (3 * BLOCK, "iid")])
def test_kept_and_regenerated_blocks_are_the_same(keep: int, d: int, kind: str) -> None:
    codes = Codes(
        d, 13, seed=2, kind=kind
    )  # 2**15 and 2**16 keep some blocks as halves (balanced), 2**17 one as bytes (iid)
    bulk = codes.num_blocks  # the packed blocks (odd d: the tail's dense rows follow)
    fresh = [view.byte_index().clone() for view in islice(CodeSource(codes, torch.device("cpu"), keep_bytes=0)(), bulk)]
    source = CodeSource(codes, torch.device("cpu"), keep_bytes=keep)
    for _ in range(2):  # the first pass draws (and keeps what fits), the second reads the kept ones
        assert all(torch.equal(a, v.byte_index()) for a, v in zip(fresh, islice(source(), bulk), strict=True))
    for position in (0, BLOCK + 5, codes.bulk - 1):
        block = codes._block_of(position)
        offset = position - codes._block_range(block)[0]
        assert torch.equal(source.row_view(position).byte_index()[:, 0], fresh[block][:, offset])


@pytest.mark.parametrize("keep", [0, 2**16, 2**30])
@pytest.mark.parametrize(("d", "m"), [(3 * BLOCK + 8, 13), (3 * BLOCK + 9, 21), (2 * BLOCK, 16)])
def test_screened_blocks_hold_the_same_bytes(keep: int, d: int, m: int) -> None:
    codes = Codes(d, m, seed=3)
    fresh = [
        view.index.clone() if view.index is not None else None for view in CodeSource(codes, "cpu", keep_bytes=0)()
    ]
    source = CodeSource(codes, "cpu", keep_bytes=keep)
    gen = torch.Generator().manual_seed(d)
    for first in (1, source.groups - 1, 1):  # the first pass draws (and keeps what fits), the others read the kept ones
        for whole, (view, rest) in zip(fresh, source.screened(first), strict=True):
            assert (rest is None) == (whole is None)
            if whole is None:
                continue
            assert torch.equal(view.index, whole[:first])
            columns = torch.unique(torch.randint(0, view.stop - view.start, (300,), generator=gen))
            assert torch.equal(rest(columns), whole[first:, columns])


@pytest.mark.parametrize(("d", "m"), SIZES)
def test_lookup_scores_equal_the_dense_product_within_their_bound(d: int, m: int) -> None:
    codes = Codes(d, m, seed=1)
    dense = codes.dense()
    gen = torch.Generator().manual_seed(d + m)
    q = torch.randn(3, codes.m, dtype=torch.float64, generator=gen)
    cases = {
        "one": q[:1],
        "two (complex table)": q[:2],
        "three": q,
        "equal": torch.stack([q[0], q[0]]),
        "opposite": torch.stack([q[0], -q[0]]),
        "zero and one": torch.stack([torch.zeros_like(q[0]), q[1]]),
    }
    source = CodeSource(codes, torch.device("cpu"))
    for name, queries in cases.items():
        lookup = Lookup(queries)
        got = torch.cat([lookup(view) for view in source()], dim=-1)
        assert_close(got, queries @ dense.T, operations=1, scale=_score_bound(queries, dense) / gamma(1))
        if name == "equal":
            assert torch.equal(got[0], got[1])
        if name == "opposite":
            assert torch.equal(got[0], -got[1])
        if name == "zero and one":
            assert torch.equal(got[0], torch.zeros_like(got[0]))


@pytest.mark.parametrize(("d", "m"), SIZES)
@pytest.mark.parametrize("columns", [1, 2, 3, 4])
def test_pull_equals_the_dense_product(d: int, m: int, columns: int) -> None:
    codes = Codes(d, m, seed=3)
    dense = codes.dense()
    w = torch.randn(columns, d, dtype=torch.float64, generator=torch.Generator().manual_seed(columns))
    pull = Pull(columns, codes.m, w)
    for view in CodeSource(codes, torch.device("cpu"))():
        pull.add(view, w[:, view.start : view.stop])
    # A sum over d positions (histogram bins, then the bins' bits): gamma_{d + 2} of sum |w||P| (tests/TOLERANCES.md).
    assert_close(pull.result(), w @ dense, operations=d + 2, scale=w.abs() @ dense.abs())
    halves = Pull(columns, codes.m, w)  # a running shift: the second half added after scaling the first by 2
    for view in CodeSource(codes, torch.device("cpu"))():
        part = w[:, view.start : view.stop]
        if view.start == 0:
            halves.add(view, part / 2)
            halves.scale_(torch.full((columns,), 2.0, dtype=torch.float64))
        else:
            halves.add(view, part)
    assert_close(halves.result(), w @ dense, operations=d + 4, scale=w.abs() @ dense.abs())


@pytest.mark.parametrize(("d", "m"), SIZES)
def test_pull_of_two_columns_and_their_squares_equals_the_dense_product(d: int, m: int) -> None:
    """Pull.add_squares adds (a, a^2, b, b^2) (compiled where the loops were built) and Pull.totals reads the
    packed blocks' sums off the bins (the dense blocks' are summed as they come): both are the dense sums, within
    the rounding of a sum over d positions."""
    codes = Codes(d, m, seed=5)
    dense = codes.dense()
    base = torch.rand(2, d, dtype=torch.float64, generator=torch.Generator().manual_seed(d))
    four = torch.stack([base[0], base[0] ** 2, base[1], base[1] ** 2])
    pull = Pull(4, codes.m, base)
    for view in CodeSource(codes, torch.device("cpu"))():
        pull.add_squares(view, base[:, view.start : view.stop])
    assert_close(pull.result(), four @ dense, operations=d + 2, scale=four.abs() @ dense.abs())
    assert_close(pull.totals(), four.sum(-1), operations=d + 1, scale=four.abs().sum(-1))  # dense blocks' too


def _dense_gradient(model: ModelConfig, q: torch.Tensor, pair: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor]:
    """The dense closed-form gradient and the size of its terms (|pulled vector| through |P|, plus the parts)."""
    dense = model.codes.dense()
    objective = population(model, q, pair)
    weights = torch.softmax(q @ dense.T, -1)
    scale = objective.score_gradient.abs() @ dense.abs() + 4 * (weights**2 + weights) @ dense.abs()
    return objective.gradient, scale


@pytest.mark.parametrize(("d", "m"), SIZES)
@pytest.mark.parametrize("heads", ["tied", "split"])
@pytest.mark.parametrize("start", ["zero", "antisymmetric", "independent"])
def test_start_and_gradient_equal_the_dense_closed_form(d: int, m: int, heads: str, start: str) -> None:
    """One pass for opposite heads, none at zero queries, two otherwise: all equal the dense step."""
    model = ModelConfig(d, heads, m=m, start=start, sigma=2.0, code_seed=d, init_seed=m)
    pair = random_pair(d, seed=m)
    q = model.initial_queries()
    views = CodeSource(model.codes, torch.device("cpu"))
    at_pair = model.codes.rows(list(pair))
    stats, grad = start_and_gradient(views, q, pair, q @ at_pair.T, *model.readout)
    expected, scale = _dense_gradient(model, q, pair)
    c1 = model.readout[1]
    # Sums over d positions of terms bounded by the pulled vector's size and the fused parts' (c1^2 a^2, C a).
    assert_close(grad, expected, operations=4 * d + 8 * m, scale=(1 + c1) ** 2 * scale)
    lse = torch.logsumexp(q @ model.codes.dense().T, -1)
    assert_close(stats.lse, lse, operations=2 * d + 2 * m, scale=lse.abs() + 1)
    two_pass = population_gradient(views, q, pair, head_stats(views, q, pair, q @ at_pair.T), *model.readout)
    assert_close(grad, two_pass, operations=8 * d + 16 * m, scale=(1 + c1) ** 2 * scale)


def _exact_log_weights(scores_exact: list[list[Fraction]], pair: tuple[int, int]) -> list[tuple]:
    """Per head: log a_u, log a_v, log S (rest) from exact rational scores, with 50-digit logarithms."""
    mpmath.mp.dps = 50
    out = []
    for row in scores_exact:
        x = [mpmath.mpf(value.numerator) / value.denominator for value in row]
        top = max(x)
        total = mpmath.fsum(mpmath.exp(v - top) for v in x)
        rest = mpmath.fsum(mpmath.exp(v - top) for k, v in enumerate(x) if k not in pair)
        log_total = mpmath.log(total) + top
        out.append((x[pair[0]] - log_total, x[pair[1]] - log_total, mpmath.log(rest) + top - log_total))
    return out


def _exact_scores(queries: torch.Tensor, dense: torch.Tensor) -> list[list[Fraction]]:
    """<q_h, p_k> in exact rational arithmetic (the codes' entries are floats: +-scale or 0)."""
    q = [[Fraction(float(v)) for v in row] for row in queries]
    p = [[Fraction(float(v)) for v in row] for row in dense]
    return [[sum((a * b for a, b in zip(row, code, strict=True)), Fraction(0)) for code in p] for row in q]


@pytest.mark.parametrize(("heads", "kappa"), [("split", 40.0), ("split", 4000.0), ("tied", 30.0), ("tied", 1e5)])
@pytest.mark.parametrize("direct", [True, False])
def test_log_weight_allowance_bounds_the_error_against_exact_arithmetic(heads: str, kappa: float, direct: bool) -> None:
    """after_step's log_error is rigorous: exact rational scores of the step's queries, 50-digit logarithms."""
    d, m = 300, 13
    model = ModelConfig(d, heads, m=m, code_seed=5, init_seed=5)
    pair = (17, 251)
    q = model.initial_queries()
    views = CodeSource(model.codes, torch.device("cpu"))
    at_pair = model.codes.rows(list(pair))
    _, grad = start_and_gradient(views, q, pair, q @ at_pair.T, *model.readout)
    direction = -(d**2 / model.readout[1]) * grad
    after = after_step(views, q, direction, torch.tensor([kappa], dtype=torch.float64), pair, d, direct=direct)
    dense = model.codes.dense()
    if direct:  # the scores of the stepped queries as rounded (the queries the step reports)
        exact = _exact_scores(q + kappa * direction, dense)
    else:  # of q + kappa delta in exact arithmetic
        s, t = _exact_scores(q, dense), _exact_scores(direction, dense)
        exact = [[a + Fraction(kappa) * b for a, b in zip(rs, rt, strict=True)] for rs, rt in zip(s, t, strict=True)]
    for head, (log_u, log_v, log_rest) in enumerate(_exact_log_weights(exact, pair)):
        bound = float(after.log_error[0, head])
        assert bound < 1e-9
        for got, want in ((after.log_weight_u, log_u), (after.log_weight_v, log_v), (after.log_rest, log_rest)):
            assert abs(float(got[0, head]) - float(want)) <= bound


@pytest.mark.parametrize(("d", "seed"), [(2**20 + 2, 0), (2**20 + 3, 11), (2**21, 1000)])
def test_tied_candidates_give_the_summaries_of_the_full_pass(d: int, seed: int, monkeypatch) -> None:
    """The tied rule's one-pass path (candidates, forced here where the codes fit) equals the two passes."""
    used = []
    original = _one_step._after_in_direction_pass

    def spy(config, state, keep):
        found = original(config, state, keep)
        used.append(found[0] is not None)
        return found

    monkeypatch.setattr(CodeSource, "keeps_all", property(lambda self: False))
    monkeypatch.setattr(_one_step, "_after_in_direction_pass", spy)
    fast = one_step(d, "tied", seed=seed)
    monkeypatch.setattr(_one_step, "_after_in_direction_pass", lambda config, state, keep: (None, None, None))
    slow = one_step(d, "tied", seed=seed)
    assert used == [True]
    assert fast.kappa == slow.kappa and fast.direction_top == slow.direction_top and fast.success == slow.success
    assert bool(fast.worst_case.exact) == bool(slow.worst_case.exact)
    # The rest mass and the mean loss after the step: sums off the pair, up to rounding (the dropped mass is
    # below 2^-52 of them) and the sums' own rounding.
    assert_close(fast.rest_mass, slow.rest_mass, operations=2 * d, scale=slow.rest_mass)
    assert_close(fast.mean_loss_after, slow.mean_loss_after, operations=2 * d, scale=slow.mean_loss_after)
    # The worst case adds the allowance: the two paths' differ by their combination depths (a few u(B + ln d)),
    # times 8 in the tied formula's slack.
    assert_close(fast.worst_case.upper, slow.worst_case.upper, operations=2 * d, scale=slow.worst_case.upper)


def test_direction_pass_finds_the_top_entries_and_every_candidate() -> None:
    d = 3 * BLOCK + 4
    model = ModelConfig(d, "tied", code_seed=9)
    pair = random_pair(d, seed=9)
    state = _one_step._gradient(_one_step.StepConfig(model, pair))
    views, q, direction = state.views, state.queries, state.direction
    values, index = top_scores(views, direction, 3)
    found = direction_pass(views, q, direction, pair, lambda values: 40.0, d)
    assert torch.equal(found.values, values[:1]) and torch.equal(found.index, index[:1])
    t = torch.cat([Lookup(direction[:1])(view) for view in views()], dim=-1)[0]
    positions, s, kept = found.candidates
    assert s is None and torch.equal(kept[0], t[positions])
    below = torch.ones(d, dtype=torch.bool)
    below[positions] = False
    off_pair = t.clone()
    off_pair[list(pair)] = -torch.inf
    threshold = float(off_pair.max()) - 50.0 / 40.0
    assert bool((t[below] <= threshold).all())  # every dropped position is below the final threshold
    after = after_from_candidates(
        found, q, direction, 40.0, pair, torch.zeros(1, 2, dtype=torch.float64),
        torch.stack([t[list(pair)]]), d, views.scale,
    )  # fmt: skip
    full = after_step(
        views, q, direction, torch.tensor([40.0], dtype=torch.float64), pair, d, off_pair=True, direct=False
    )
    assert_close(after.log_rest, full.log_rest, operations=1, scale=full.log_error / gamma(1))


@pytest.mark.parametrize("heads", ["tied", "split"])
@pytest.mark.parametrize("m", [9, 13, 16, 37])
def test_streamed_step_equals_the_dense_closed_form_for_several_m(heads: str, m: int) -> None:
    d = 2 * BLOCK + 11  # odd: the tail rows of the odd-d layout are a dense block
    if m % 2 == 0:
        d -= 1
    result = one_step(d, heads, seed=2, m=m, step=50.0)
    model = result.config.model
    q = model.initial_queries()
    expected = q - result.lr * population(model, q, result.pair).gradient
    assert_close(result.queries_after, expected, operations=2 * d, scale=float(expected.abs().max()))


def test_the_refusal_names_the_largest_step_the_allowance_certifies() -> None:
    with pytest.raises(ValueError, match=r"kappa = 2\.05e\+28.*beyond the .* that float64 certifies"):
        one_step(1024, "split", seed=1, sigma=1000)
    assert math.isfinite(float(one_step(1024, "split", seed=0, sigma=1000).worst_case.upper))


@pytest.mark.parametrize("rows", [2, 10, 16, 2**14 + 6])
def test_pairing_and_halves_are_the_involution_and_its_inverse(rows: int) -> None:
    """_pair_columns (eight bytes at a time) against the involution written out; whole_columns inverts half_columns."""
    gen = torch.Generator().manual_seed(rows)
    raw = torch.randint(0, 256, (5, rows), dtype=torch.uint8, generator=gen)
    mu = 2 * torch.randint(0, rows // 2, (5,), generator=gen) + 1
    mu[0] = 1
    mu[1] = rows - 1
    index = torch.arange(rows)
    partner = (mu.unsqueeze(1) - index) % rows
    expected = torch.gather(raw, 1, torch.minimum(index, partner)) ^ (255 * (index > partner)).to(torch.uint8)
    paired = _pair_columns(raw.clone(), mu)
    assert torch.equal(paired, expected)
    main = 8 * 5 - 3  # the last group's unused bits cleared, as the codes do
    paired[-1] &= (1 << (main % 8)) - 1
    halves = half_columns(paired, mu, torch.empty(5, rows // 2, dtype=torch.uint8))
    assert torch.equal(whole_columns(halves, mu, main, torch.empty_like(paired)), paired)


def test_log_sums_in_place_and_without_the_floor_are_the_same_numbers() -> None:
    """exp_sums overwriting its argument, and skipping the floor where clamp_changes_nothing says it is not reached,
    gives the default's numbers bit for bit; below the floor the check says so, and the argument is raised to it."""
    gen = torch.Generator().manual_seed(4)
    x = torch.rand(1, 3, 1000, dtype=torch.float64, generator=gen) * -300  # arguments down to -300 > -680 / 2
    top, low = x.amax(-1), x.amin(-1)
    powers = (1, 2)
    assert clamp_changes_nothing(low.view(-1).tolist(), top.view(-1).tolist(), powers)
    default = exp_sums(x, top, powers)
    assert torch.equal(exp_sums(x.clone(), top, powers, in_place=True, raise_low=False), default)
    deep = x.clone()
    deep[0, 1, 7] = -500.0  # below -680 / 2: the floor applies
    low = deep.amin(-1)
    assert not clamp_changes_nothing(low.view(-1).tolist(), top.view(-1).tolist(), powers)
    assert clamp_changes_nothing(low.view(-1).tolist(), top.view(-1).tolist(), (1,))  # -500 > -680
    overwritten = deep.clone()
    assert torch.equal(exp_sums(overwritten, top, powers, in_place=True), exp_sums(deep, top, powers))
    floor = torch.full((8,), -340.0, dtype=torch.float64).exp_()[0]  # torch's exponential of the floor
    assert torch.equal(overwritten[0, 1, 7], floor)  # raised to it (the exponentials are left in x)


@pytest.mark.parametrize(("d", "m"), [(5000, 24), (5001, 41)])  # odd d: the tail rows are a dense block
def test_scores_written_into_a_given_tensor_are_the_fresh_ones(d: int, m: int) -> None:
    codes = Codes(d, m, seed=2)
    queries = torch.randn(3, m, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    queries[2] = -queries[0]  # a negated head: assembled into out
    dense_seen = False
    for rows in (queries[:2], queries, torch.zeros(2, m, dtype=torch.float64)):  # distinct, assembled, all zero
        lookup = Lookup(rows)
        for view in CodeSource(codes, torch.device("cpu"))():
            dense_seen |= view.rows is not None
            out = torch.full((rows.shape[0], view.stop - view.start), torch.nan, dtype=torch.float64)
            assert lookup(view, out=out) is out
            assert torch.equal(out, lookup(view))
    assert dense_seen == bool(d % 2)


@pytest.mark.parametrize("kappa", [30.0, 3000.0])  # scores well within the exponentials' floor, and beyond it
def test_the_floor_skipped_where_it_is_not_reached_changes_no_bit_of_the_step(kappa: float, monkeypatch) -> None:
    """after_step skips the floor of exp_sums where each row's least entry (the third row: the sum of the heads'
    least) shows it is not reached: forcing the floor everywhere gives the same summaries, bit for bit."""
    d, m = 2 * BLOCK + 10, 16
    model = ModelConfig(d, "split", m=m, code_seed=3, init_seed=3)
    pair = (5, BLOCK + 7)  # in two different blocks
    q = model.initial_queries()
    views = CodeSource(model.codes, torch.device("cpu"))
    at_pair = model.codes.rows(list(pair))
    _, grad = start_and_gradient(views, q, pair, q @ at_pair.T, *model.readout)
    direction = -(d**2 / model.readout[1]) * grad
    kappas = [torch.tensor([kappa], dtype=torch.float64), torch.tensor([kappa, kappa / 2], dtype=torch.float64)]

    def summaries() -> list:
        steps = [after_step(views, q, direction, k, pair, d, off_pair=True) for k in kappas]
        return [[getattr(s, f) for f in ("lse", "log_weight_u", "log_weight_v", "log_rest", "biggest")] for s in steps]

    answers = []
    check = _stream.clamp_changes_nothing
    monkeypatch.setattr(_stream, "clamp_changes_nothing", lambda *args: answers.append(check(*args)) or answers[-1])
    skipped = summaries()
    assert all(answers) if kappa < 1000 else not all(answers)  # skipped at the small step, not where it is reached
    monkeypatch.setattr(_stream, "clamp_changes_nothing", lambda *args: False)
    forced = summaries()
    for got, want in zip(skipped, forced, strict=True):
        assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
    reaches = float(skipped[0][4].max()) * 2 > -UNDERFLOW / 2  # a head's range exceeds the floor at kappa = 3000
    assert reaches == (kappa > 1000)
