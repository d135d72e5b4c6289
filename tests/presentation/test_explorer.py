"""The explorer: its pure function (controls -> state), its figure at every extreme the controls allow, the widget."""

from __future__ import annotations

import functools
import itertools
import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from _tolerance import gamma
from matplotlib.collections import Collection
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

import xorlib
from xorlib.codes import Codes
from xorlib.experiments._attention_variants import variant_step
from xorlib.explorer import Explorer, explorer_state, plot_explorer
from xorlib.model import ModelConfig
from xorlib.plots._explorer import ExplorerState
from xorlib.task import all_inputs, random_pair, xor_labels
from xorlib.theory import tied_margin

D_CHOICES, KAPPA_RANGE, N_CHOICES, SIGMA_RANGE = (
    Explorer.D_CHOICES, Explorer.KAPPA_RANGE, Explorer.N_CHOICES, Explorer.SIGMA_RANGE,
)  # fmt: skip
MAX_SAMPLE_ENTRIES, LOSS_RANGE, readable = Explorer.MAX_SAMPLE_ENTRIES, Explorer.LOSS_RANGE, Explorer.readable
ATTENTION_KINDS = ("softmax", "linear", "relu", "sigmoid", "componentwise")
HEADS = ("tied", "split")

KAPPAS = (KAPPA_RANGE[0], math.sqrt(KAPPA_RANGE[0] * KAPPA_RANGE[1]), KAPPA_RANGE[1])  # both ends and the middle
GRID = list(
    itertools.product(ATTENTION_KINDS, HEADS, KAPPAS, (0, N_CHOICES[-1]), (D_CHOICES[0], D_CHOICES[-1]), (0, 1))
)


@pytest.fixture(scope="module", autouse=True)
def _codes_once():
    """Generate each code matrix once in this module (they are a pure function of d, m, seed and kind).

    The dense balanced codes of d = 4096 take a noticeable fraction of a second; the grid below asks for the same
    few matrices many times.
    """
    original = Codes.dense

    @functools.cache
    def cached(d, m, seed, kind, dtype, device):
        return original(Codes(d, m, seed=seed, kind=kind), dtype=dtype, device=device)

    def dense(self, *, dtype=torch.float64, device="cpu"):
        return cached(self.d, self.m, self.seed, self.kind, dtype, str(device)).clone()

    Codes.dense = dense
    yield
    Codes.dense = original


def _rejection(attention: str, n: int, d: int) -> str | None:
    """The message fragment a setting of the grid must be rejected with, or None if it is valid."""
    if n and attention != "softmax":
        return "n must be 0"
    if n * d > MAX_SAMPLE_ENTRIES:
        return "n \\* d must be at most"
    return None


@functools.cache
def _state(attention: str, heads: str, kappa: float, n: int, d: int, seed: int) -> ExplorerState:
    return explorer_state(d=d, heads=heads, attention=attention, kappa=kappa, n=n, seed=seed)


def _inside(inner, outer, slack: float = 1.5) -> bool:
    return (
        inner.x0 >= outer.x0 - slack
        and inner.x1 <= outer.x1 + slack
        and inner.y0 >= outer.y0 - slack
        and inner.y1 <= outer.y1 + slack
    )


def _display_points(artist) -> np.ndarray:
    """The vertices an artist draws, in display (pixel) coordinates."""
    if isinstance(artist, Line2D):
        return artist.get_transform().transform(artist.get_xydata())
    if isinstance(artist, Patch):
        return artist.get_path().transformed(artist.get_transform()).vertices
    if isinstance(artist, Collection):
        paths = [artist.get_transform().transform(path.vertices) for path in artist.get_paths()]
        return np.concatenate(paths) if paths else np.empty((0, 2))
    raise AssertionError(f"unexpected artist {artist!r}")


def _drawn_tick_labels(ax) -> list:
    """The tick labels Matplotlib draws: those of ticks inside the view limits."""
    labels = []
    if not ax.axison:  # an axis turned off draws no tick label
        return labels
    for axis, limits in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        low, high = min(limits), max(limits)
        for tick in axis.get_major_ticks():
            if low <= tick.get_loc() <= high and tick.label1.get_visible():
                labels.append(tick.label1)
    return labels


def check_figure_clamps(fig) -> None:
    """After drawing: every text lies inside its axes (ax.text) or the figure; every drawn datum inside its axes."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    figure_box = fig.bbox
    for ax in fig.axes:
        box = ax.bbox
        for text in ax.texts:
            if text.get_text().strip():
                extent = text.get_window_extent(renderer)
                assert _inside(extent, box), f"{text.get_text()!r} leaves its panel: {extent} not in {box}"
                assert text.get_fontsize() >= 9
        for text in [ax.title, ax.xaxis.label, ax.yaxis.label, *_drawn_tick_labels(ax)]:
            if text.get_visible() and text.get_text().strip():
                extent = text.get_window_extent(renderer)
                assert _inside(extent, figure_box), f"{text.get_text()!r} leaves the figure: {extent}"
        for artist in [*ax.lines, *ax.patches, *ax.collections]:
            points = _display_points(artist)
            finite = points[np.isfinite(points).all(axis=1)]
            assert len(finite) == len(points), f"{artist!r} draws non-finite points"
            assert (finite[:, 1] >= box.y0 - 1.5).all() and (finite[:, 1] <= box.y1 + 1.5).all(), f"{artist!r} leaves y"
            assert (finite[:, 0] >= box.x0 - 1.5).all() and (finite[:, 0] <= box.x1 + 1.5).all(), f"{artist!r} leaves x"
    for text in fig.texts:
        assert _inside(text.get_window_extent(renderer), figure_box)


# ----------------------------------------------------------------------------------------------------------------
# Every setting the controls allow, at the extremes: the state computes or is rejected with a clear message.


@pytest.mark.parametrize(("attention", "heads", "kappa", "n", "d", "seed"), GRID)
def test_every_extreme_setting_computes_or_is_rejected_clearly(attention, heads, kappa, n, d, seed) -> None:
    rejection = _rejection(attention, n, d)
    if rejection is not None:
        with pytest.raises(ValueError, match=rejection):
            explorer_state(d=d, heads=heads, attention=attention, kappa=kappa, n=n, seed=seed)
        return
    state = _state(attention, heads, kappa, n, d, seed)
    assert (state.d, state.heads, state.attention, state.kappa, state.n, state.seed) == (
        d, heads, attention, kappa, n, seed
    )  # fmt: skip
    assert state.pair == random_pair(d, seed=seed)
    assert state.weights_before.shape == state.weights_after.shape == (2, d)
    assert state.lr == pytest.approx(kappa * d**2 / (2.0 if heads == "tied" else 1.0))
    for value in (state.mean_loss_before, state.mean_loss_after, state.worst_before, state.worst_after):
        assert value >= 0 and not math.isnan(value)
    # The certified worst case bounds the loss of every input, hence the mean; the attained one is below it.
    assert state.worst_before >= state.mean_loss_before * (1 - 1e-9)
    assert state.worst_after >= state.mean_loss_after * (1 - 1e-9) or math.isinf(state.worst_after)
    assert state.worst_after_lower <= state.worst_after
    assert not state.worst_after_exact or state.worst_after_lower == pytest.approx(state.worst_after, rel=1e-8)


FIGURE_GRID = [s for s in GRID if s[-1] == 0 and s[2] != KAPPAS[1] and _rejection(s[0], s[3], s[4]) is None]


def _small_figure_grid(grid: list[tuple]) -> set[tuple]:
    """``make test``'s part of the figure grid (``make sweeps`` draws all of it): in each group of one attention
    kind and one n, two settings at opposite ends of every other control (heads, κ, d); the pair turns from group to
    group, so that the groups together draw every combination of those controls' ends, and so every pair of them."""
    ends = (lambda s: s[1] == "split", lambda s: s[2] == KAPPAS[-1], lambda s: s[4] == D_CHOICES[-1])
    turns = ((0, 0, 0), (0, 1, 1), (0, 0, 1), (0, 1, 0))
    groups: dict[tuple, list[tuple]] = {}
    for setting in grid:
        groups.setdefault((setting[0], setting[3]), []).append(setting)
    small = set()
    for number, members in enumerate(groups.values()):
        varying = [k for k, end in enumerate(ends) if len({end(s) for s in members}) == 2]
        first = tuple(turns[number % len(turns)][k] for k in varying)
        for setting in members:
            at = tuple(int(ends[k](setting)) for k in varying)
            if at == first or at == tuple(1 - v for v in first):
                small.add(setting)
    return small


SMALL_FIGURE_GRID = _small_figure_grid(FIGURE_GRID)


def test_the_small_figure_grid_draws_every_end_of_every_control_in_every_kind() -> None:
    assert len(SMALL_FIGURE_GRID) < len(FIGURE_GRID) / 2
    for kind, n in {(s[0], s[3]) for s in FIGURE_GRID}:
        group = [s for s in FIGURE_GRID if (s[0], s[3]) == (kind, n)]
        small = [s for s in SMALL_FIGURE_GRID if (s[0], s[3]) == (kind, n)]
        for k in (1, 2, 4):  # heads, κ, d: both ends wherever the group has both
            assert {s[k] for s in small} == {s[k] for s in group}, (kind, n, k)
    for k, j in itertools.combinations((1, 2, 4), 2):  # and every pair of two controls' ends, over the kinds
        assert {(s[k], s[j]) for s in SMALL_FIGURE_GRID} == {(s[k], s[j]) for s in FIGURE_GRID}, (k, j)


@pytest.mark.parametrize(
    ("attention", "heads", "kappa", "n", "d", "seed"),
    [pytest.param(*s, marks=() if s in SMALL_FIGURE_GRID else pytest.mark.sweep) for s in FIGURE_GRID],
)
def test_the_figure_clamps_at_every_extreme(attention, heads, kappa, n, d, seed) -> None:
    """The figure at both ends of every control, seed 0 (``make test`` draws the small grid above, a fourth of
    them; ``make sweeps`` draws them all).

    A figure costs a fifth of a second, so the grid of figures is thinner than the grid of states above: the
    layout depends on the seed and on a middle κ only through the numbers it prints, whose widest forms are drawn
    by the tests below (seed 1 and the largest seed, κ in the middle and at 30, both ends of σ).
    """
    state = _state(attention, heads, kappa, n, d, seed)
    fig = plot_explorer(state)
    try:
        check_figure_clamps(fig)
        texts = [t.get_text() for ax in fig.axes for t in ax.texts]
        low, high = state.weight_range
        assert any("clipped" in t for t in texts) == (low < -1e-12 or high > 1 + 1e-12)
        values = (state.mean_loss_before, state.mean_loss_after, state.worst_before, state.worst_after)
        off_scale = sum(not LOSS_RANGE[0] <= v <= LOSS_RANGE[1] for v in values if math.isfinite(v))
        assert sum("(off scale)" in t for t in texts) == off_scale
    finally:
        plt.close(fig)


def test_the_widest_texts_still_fit() -> None:
    """The largest seed the control offers, the largest n at d = 4096, the start scale at both ends."""
    settings = [
        {"d": 4096, "heads": "split", "kappa": KAPPA_RANGE[1], "n": MAX_SAMPLE_ENTRIES // 4096, "seed": 10**6},
        {"d": 4096, "heads": "split", "attention": "sigmoid", "kappa": KAPPAS[1], "sigma": SIGMA_RANGE[1], "seed": 1},
        {"d": 4096, "heads": "tied", "attention": "componentwise", "kappa": KAPPAS[1], "seed": 1},
        {"d": 8, "heads": "split", "attention": "linear", "kappa": KAPPA_RANGE[0], "sigma": SIGMA_RANGE[0]},
    ]
    for setting in settings:
        fig = plot_explorer(explorer_state(**setting))
        try:
            check_figure_clamps(fig)
        finally:
            plt.close(fig)


def test_finding_8_componentwise_and_linear_at_kappa_30() -> None:
    """Issue 11, finding 8: at κ = 30 component-wise weights reach 10¹¹; the note and the loss bars stay inside."""
    for attention, clipped_max in (("componentwise", True), ("linear", False)):
        state = explorer_state(d=64, attention=attention, kappa=30.0)
        low, high = state.weight_range
        assert (high > 1e10) == clipped_max and (low < 0) == (attention == "linear")
        fig = plot_explorer(state)
        try:
            check_figure_clamps(fig)
            note = fig.axes[0].texts[0].get_text()
            assert note.startswith("weights outside [0, 1] clipped")
            assert f"max {readable(float(state.weights_after[0].max()))}" in note
            for ax in fig.axes[:2]:
                for bar in ax.patches[2:]:  # the first two patches shade the hidden positions
                    assert 0.0 <= bar.get_height() <= 1.0
        finally:
            plt.close(fig)


# ----------------------------------------------------------------------------------------------------------------
# The figure's numbers against the state that made them; the state against the library and against enumeration.


def test_the_figure_draws_the_states_numbers() -> None:
    state = explorer_state(d=32, heads="tied", kappa=30.0, seed=3)
    fig = plot_explorer(state)
    try:
        for head, ax in enumerate(fig.axes[:2]):
            heights = np.array([bar.get_height() for bar in ax.patches[2:]])
            np.testing.assert_allclose(heights, state.weights_after[head].clamp(0, 1).numpy())
            assert ax.get_ylim()[0] == 0.0 and ax.get_ylim()[1] > 1.0
        loss_ax = fig.axes[2]
        ends = [bar.get_x() + bar.get_width() for bar in loss_ax.patches]
        expected = [state.mean_loss_before, state.mean_loss_after, state.worst_before, state.worst_after]
        np.testing.assert_allclose(ends, [min(max(v, LOSS_RANGE[0]), LOSS_RANGE[1]) for v in expected], rtol=1e-12)
        labels = [t.get_text() for t in loss_ax.texts]
        for value, label in zip(expected, labels, strict=True):
            assert readable(value) in label
        summary = fig.axes[3].texts[0].get_text()
        assert f"hidden bits u = {state.pair[0]}, v = {state.pair[1]}" in summary
        assert readable(state.kappa) in summary and readable(state.worst_after) in summary
    finally:
        plt.close(fig)


@pytest.mark.parametrize("heads", HEADS)
def test_softmax_state_is_one_step_and_agrees_with_the_dense_step(heads) -> None:
    """The explorer's two paths give the same softmax step: the streamed one_step and the dense variant_step."""
    state = explorer_state(d=64, heads=heads, kappa=30.0, sigma=0.7, seed=5)
    result = xorlib.one_step(64, heads, seed=5, sigma=0.7, step=30.0)
    torch.testing.assert_close(state.weights_after, result.weights_after)
    assert state.worst_after == float(result.worst_case.upper)
    config = ModelConfig(64, heads, attention="softmax", code_seed=5, sigma=0.7, init_seed=5)
    dense = variant_step(config, state.pair, 30.0)
    torch.testing.assert_close(state.weights_after, dense.weights_after, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(state.weights_before, dense.weights_before, rtol=1e-12, atol=1e-15)
    # The dense loss is a sum of terms of size up to 1 + c0^2 + 2 c1 (|c0| + 2) + 3 c1^2 that cancel to a tiny loss:
    # its rounding is about gamma_{4d} times that; the streamed one is computed from the deviations, without it.
    c0, c1 = config.readout
    floor = 2 * gamma(4 * 64) * (1 + c0**2 + 2 * c1 * (abs(c0) + 2) + 3 * c1**2)
    assert state.mean_loss_after == pytest.approx(dense.mean_loss_after, rel=1e-7, abs=floor)


@pytest.mark.parametrize("attention", ATTENTION_KINDS)
@pytest.mark.parametrize("heads", HEADS)
def test_losses_match_enumeration_over_all_inputs(attention, heads) -> None:
    """At d = 8 (the control's smallest) the mean and the worst case against all 256 inputs, at every κ tried."""
    x = all_inputs(8)
    for kappa in KAPPAS:
        state = _state(attention, heads, kappa, 0, 8, 0)
        if not math.isfinite(state.worst_after):
            continue  # component-wise attention at the largest steps: the losses overflow float64
        y = xor_labels(x, state.pair)
        c0, c1 = (1.0, 2.0) if heads == "tied" else (0.0, 1.0)
        for weights, mean, worst in (
            (state.weights_before, state.mean_loss_before, state.worst_before),
            (state.weights_after, state.mean_loss_after, state.worst_after),
        ):
            z = x @ weights.T
            losses = 0.5 * (c0 - c1 * z[:, 0] * z[:, 1] - y) ** 2
            assert float(losses.mean()) == pytest.approx(mean, rel=1e-6, abs=1e-12)  # scores of size κ round
            assert float(losses.max()) <= worst * (1 + 1e-9) + 1e-12
        assert state.worst_after_lower <= float(losses.max()) * (1 + 1e-9) + 1e-12
        margin = (y * (c0 - c1 * z[:, 0] * z[:, 1])).min()
        assert not state.signs_correct or float(margin) > 0


def test_same_setting_same_state_and_seeds_differ() -> None:
    first, again = explorer_state(d=64, n=256, seed=7), explorer_state(d=64, n=256, seed=7)
    assert torch.equal(first.weights_after, again.weights_after) and first.worst_after == again.worst_after
    other = explorer_state(d=64, n=256, seed=8)
    assert not torch.equal(first.weights_after, other.weights_after)
    tied = [explorer_state(d=64, heads="tied", sigma=sigma) for sigma in SIGMA_RANGE]
    assert torch.equal(tied[0].weights_after, tied[1].weights_after)  # the tied model starts at 0 whatever sigma


def test_the_chapters_things_to_try() -> None:
    """What chapter 10 tells the reader to expect (seed 0, kappa = 100 unless stated); its hidden cell asserts these."""
    small, medium = explorer_state(d=8), explorer_state(d=64)
    assert not small.split and small.worst_after > 1 and medium.split and medium.worst_after < 1e-6
    assert tied_margin(Codes(8, seed=0).dense(), random_pair(8, seed=0)) == 0  # why d = 8 fails
    tied = explorer_state(d=1024, heads="tied")
    assert torch.allclose(tied.weights_after[:, list(tied.pair)], torch.tensor(0.5, dtype=torch.float64), atol=1e-6)
    for d in (64, 1024):
        assert explorer_state(d=d, heads="tied", kappa=10.0).worst_after > 0.1
        assert explorer_state(d=d, heads="tied", kappa=30.0).worst_after < 1e-3
    exploded = explorer_state(d=64, attention="componentwise", kappa=30.0)
    assert exploded.weight_range[1] > 1e10 and exploded.worst_after > LOSS_RANGE[1]
    assert explorer_state(d=64, attention="linear", kappa=30.0).weight_range[0] < 0
    stuck = explorer_state(d=64, heads="tied", attention="linear", kappa=30.0)
    assert torch.equal(stuck.weights_after, stuck.weights_before)
    few, enough = explorer_state(d=64, n=16384), explorer_state(d=64, n=65536)
    assert len(set(few.found)) == 1 and few.worst_after > 1 and enough.split and enough.worst_after < 1e-6
    assert explorer_state(d=64, heads="tied", n=262144).worst_after > 1e-2
    assert not explorer_state(d=64, sigma=0.0).split


# ----------------------------------------------------------------------------------------------------------------
# Formatting, bad inputs, the widget.


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (2.4e-7, "2.4 × 10⁻⁷"), (3.34e11, "3.3 × 10¹¹"), (1e8, "10⁸"), (1e-30, "10⁻³⁰"), (1.04e-8, "1.0 × 10⁻⁸"), (0.0, "0"), (0.718, "0.72"), (30.0, "30"),
        (1234.0, "1,234"), (-3600.0, "−3,600"), (-1.1e-4, "−1.1 × 10⁻⁴"), (math.inf, "overflow"),
        (math.nan, "undefined"),
    ],
)  # fmt: skip
def test_numbers_read_well(value, text) -> None:
    assert readable(value) == text


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"d": 3}, ValueError, "d"), ({"d": 8192}, ValueError, "d"), ({"d": 8.0}, TypeError, "d"),
        ({"heads": "both"}, ValueError, "heads"), ({"attention": "soft"}, ValueError, "attention"),
        ({"kappa": 0.0}, ValueError, "kappa"), ({"kappa": 1e9}, ValueError, "kappa"),
        ({"kappa": 1e-3}, ValueError, "kappa"), ({"kappa": math.nan}, ValueError, "kappa"),
        ({"kappa": "30"}, TypeError, "kappa"), ({"n": -1}, ValueError, "n"), ({"n": 2**21}, ValueError, "n"),
        ({"n": 16.0}, TypeError, "n"), ({"n": 64, "attention": "relu"}, ValueError, "n"),
        ({"n": 2**20, "d": 128}, ValueError, "n \\* d"), ({"sigma": -0.1}, ValueError, "sigma"),
        ({"sigma": 5.0}, ValueError, "sigma"), ({"seed": -1}, ValueError, "seed"), ({"seed": 1.5}, TypeError, "seed"),
    ],
)  # fmt: skip
def test_bad_inputs_are_refused_by_name(kwargs, error, name) -> None:
    with pytest.raises(error, match=f"^{name}"):
        explorer_state(**kwargs)


def test_plot_explorer_refuses_other_objects() -> None:
    with pytest.raises(TypeError, match="state must be an ExplorerState"):
        plot_explorer(xorlib.one_step(16, step=30.0))


def test_the_controls_offer_what_the_function_accepts() -> None:
    explorer = Explorer(d=8)
    controls = explorer.controls
    assert tuple(controls["d"].options) == D_CHOICES and tuple(controls["n"].options) == N_CHOICES
    assert (10 ** controls["kappa"].min, 10 ** controls["kappa"].max) == pytest.approx(KAPPA_RANGE)
    assert (controls["sigma"].min, controls["sigma"].max) == SIGMA_RANGE
    assert tuple(controls["attention"].options) == ATTENTION_KINDS and tuple(controls["heads"].options) == HEADS
    for end in (controls["kappa"].min, controls["kappa"].max):  # the log slider's own ends are accepted
        controls["kappa"].value = 10**end
        assert explorer.state is not None and explorer.error == ""
    plt.close("all")


def test_the_widget_recomputes_and_explains_a_rejected_setting() -> None:
    explorer = Explorer(d=64, kappa=100.0, seed=1)
    assert explorer.state is not None and explorer.error == "" and explorer.message.value == ""
    assert explorer.values() == {
        "d": 64, "heads": "split", "attention": "softmax", "kappa": 100.0, "n": 0, "sigma": 1.0, "seed": 1
    }  # fmt: skip
    assert explorer.state.split and explorer.state.worst_after < 1e-6

    explorer.controls["kappa"].value = 3.0  # a control's change runs the callback
    assert explorer.state.kappa == pytest.approx(3.0) and explorer.state.worst_after > 0.1

    state = explorer.set(d=4096, n=N_CHOICES[-1])  # n * d is too large: a message, not a traceback
    assert state is None and explorer.state is None
    assert "n * d must be at most" in explorer.error and "not available" in explorer.message.value

    explorer.set(n=MAX_SAMPLE_ENTRIES // 4096, kappa=1e-2)  # the largest n allowed at d = 4096
    assert explorer.state is not None and explorer.state.n == 16384 and explorer.error == ""
    assert explorer.message.value == ""

    explorer.controls["attention"].value = "componentwise"  # samples are softmax-only: n goes to 0, disabled
    assert explorer.controls["n"].value == 0 and explorer.controls["n"].disabled
    assert "softmax only" in explorer.controls["n"].description
    assert explorer.state is not None and explorer.state.attention == "componentwise"

    explorer.controls["heads"].value = "tied"  # the tied model ignores sigma
    assert explorer.controls["sigma"].disabled and explorer.state.heads == "tied"
    explorer.set(attention="softmax", heads="split")
    assert not explorer.controls["n"].disabled and not explorer.controls["sigma"].disabled
    plt.close("all")


def test_the_widget_refuses_bad_initial_values() -> None:
    with pytest.raises(ValueError, match="^d must be one of"):
        Explorer(d=100)
    with pytest.raises(ValueError, match="^n must be one of"):
        Explorer(n=5)
    with pytest.raises(ValueError, match="^kappa"):
        Explorer(kappa=1e9)
    with pytest.raises(TypeError, match="unknown control"):
        Explorer(d=8).set(eta=1.0)
    plt.close("all")


@pytest.mark.parametrize(
    ("values", "error", "words"),
    [
        ({"kappa": 1e9}, ValueError, "^kappa must be in"),
        ({"seed": 1.5}, TypeError, "^seed must be an integer"),
        ({"seed": 10**7}, ValueError, "^seed must be an integer in"),
        ({"d": 5}, ValueError, "^d must be one of"),
        ({"n": 3}, ValueError, "^n must be one of"),
        ({"sigma": 9.0}, ValueError, "^sigma must be"),
        ({"heads": "both"}, ValueError, "^heads must be one of"),
        ({"kappa": 10.0, "d": 5}, ValueError, "^d must be one of"),
    ],
)
def test_finding_6_set_refuses_what_the_controls_cannot_show_and_changes_nothing(values, error, words) -> None:
    """Issue 19, finding 6: set(kappa=1e9) silently set 1e8, set(seed=1.5) set 1, set(d=5) raised TraitError, and a
    failed set left the controls out of step with the figure."""
    explorer = Explorer(d=8, kappa=100.0)
    before, state = explorer.values(), explorer.state
    with pytest.raises(error, match=words):
        explorer.set(**values)
    assert explorer.values() == before and explorer.state is state  # controls and figure still in step
    plt.close("all")
