"""The explorer: its pure callback (slider values -> state), its figure, and the widget wiring (no browser)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
import torch

from xorlib.codes import default_code_dim, positional_codes
from xorlib.data import random_pair
from xorlib.gradient import exhaustive_losses, lr_for_sharpness, one_step_from_uniform
from xorlib.model import head_weights
from xorlib.plots import plot_explorer
from xorlib.widgets import D_CHOICES, MAX_SAMPLE_ENTRIES, N_CHOICES, Explorer, explorer, explorer_state


def test_population_state_matches_the_library() -> None:
    state = explorer_state(d=64, m=0, kappa=30.0, n=0, seed=0)
    assert state.m == default_code_dim(64)
    assert state.pair == random_pair(64, seed=0)
    codes = positional_codes(64, state.m, seed=0)
    expected = head_weights(one_step_from_uniform(codes, state.pair, lr_for_sharpness(30.0, 64)), codes)
    torch.testing.assert_close(state.weights_after, expected)
    torch.testing.assert_close(state.weights_before, torch.full((2, 64), 1 / 64, dtype=torch.float64))
    assert state.lr == pytest.approx(30.0 * 64**2 / 2)


def test_worst_case_matches_enumeration_at_small_d() -> None:
    for kwargs in ({"kappa": 30.0}, {"kappa": 3.0}, {"kappa": 30.0, "n": 256}):
        state = explorer_state(d=12, **kwargs)
        exhaustive = float(exhaustive_losses(state.weights_after, state.pair).max())
        assert state.worst_after_lower <= exhaustive * (1 + 1e-9) + 1e-12
        assert exhaustive <= state.worst_after * (1 + 1e-9) + 1e-12
        if state.worst_after_exact:
            assert state.worst_after == pytest.approx(exhaustive, rel=1e-9, abs=1e-15)


def test_chapter_claims() -> None:
    """The three settings that chapter 08 draws, and what its prose says about them."""
    success = explorer_state(d=64, kappa=30.0)
    gentle = explorer_state(d=64, kappa=3.0)
    trap = explorer_state(d=64, kappa=30.0, n=4096)
    assert success.worst_after_exact and success.worst_after < 1e-6 and success.mean_after < 1e-6
    assert gentle.pair_mass < 0.5 and gentle.worst_after > 1.0
    assert trap.pair_mass > 0.99 and trap.worst_after > 1.0
    i, j = trap.pair
    assert max(trap.weights_after[0, i], trap.weights_after[0, j]) > 10 * min(
        trap.weights_after[0, i], trap.weights_after[0, j]
    )
    assert success.weights_after[:, list(success.pair)].sub(0.5).abs().max() < 1e-4  # half on each relevant bit
    for state in (success, gentle, trap):
        assert state.worst_before == pytest.approx(2.0)


def test_empirical_step_keeps_the_heads_tied_and_is_reproducible() -> None:
    first = explorer_state(d=32, n=1024, seed=3)
    second = explorer_state(d=32, n=1024, seed=3)
    torch.testing.assert_close(first.weights_after, second.weights_after)
    torch.testing.assert_close(first.weights_after[0], first.weights_after[1])
    assert not torch.equal(first.weights_after, explorer_state(d=32, n=1024, seed=4).weights_after)


@pytest.mark.parametrize("attention", ["softmax", "linear", "componentwise", "sigmoid"])
def test_every_attention_kind_gives_finite_losses(attention: str) -> None:
    state = explorer_state(d=32, kappa=10.0, attention=attention)
    values = (state.mean_after, state.worst_after, state.worst_after_lower)
    assert all(v == v and abs(v) != float("inf") for v in values)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"d": 2}, "d must be >= 4"),
        ({"kappa": 0.0}, "kappa must be > 0"),
        ({"attention": "relu"}, "attention must be one of"),
        ({"n": -1}, "n must be >= 0"),
        ({"m": 2.5}, "m must be an integer"),
        ({"d": 4096, "n": MAX_SAMPLE_ENTRIES}, "n \\* d must be <="),
    ],
)
def test_bad_values_are_rejected_by_name(kwargs, match) -> None:
    with pytest.raises((ValueError, TypeError), match=match):
        explorer_state(**kwargs)


def test_the_figure_draws_two_panels() -> None:
    for state in (explorer_state(d=16), explorer_state(d=16, kappa=1.0), explorer_state(d=16, attention="linear")):
        fig = plot_explorer(state)
        assert len(fig.axes) == 2
        assert fig.axes[0].get_title().startswith(state.attention)
        plt.close(fig)


def test_widget_builds_and_recomputes_on_change() -> None:
    ex = explorer(d=64, kappa=30.0)
    assert isinstance(ex, Explorer)
    assert set(ex.controls) == {"d", "m", "kappa", "attention", "n", "seed"}
    assert all(c.continuous_update is False for name, c in ex.controls.items() if name != "attention")
    assert ex.state is not None and ex.state.d == 64
    ex.controls["d"].value = 16
    assert ex.state.d == 16 and ex.error == ""
    ex.controls["attention"].value = "sigmoid"
    assert ex.state.attention == "sigmoid"
    ex.controls["n"].value = 256
    assert ex.state.n == 256
    plt.close("all")


def test_widget_shows_a_rejected_setting_instead_of_crashing() -> None:
    ex = Explorer(d=4096, n=0)
    ex.controls["n"].value = max(N_CHOICES)
    if max(N_CHOICES) * 4096 > MAX_SAMPLE_ENTRIES:
        assert "n * d must be" in ex.error and ex.state.n == 0
    plt.close("all")


def test_slider_choices() -> None:
    assert D_CHOICES[0] >= 4 and N_CHOICES[0] == 0
    assert list(D_CHOICES) == sorted(D_CHOICES) and list(N_CHOICES) == sorted(N_CHOICES)
