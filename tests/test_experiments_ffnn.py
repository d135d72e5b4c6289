"""Experiment 4 (the FFNN baseline): the claims of chapter 06, on a small grid."""

from __future__ import annotations

import math

import numpy as np
import pytest

from xorlib.baselines import mlp_step_flops
from xorlib.experiments import ffnn
from xorlib.experiments.finite_samples import fit_power_law


@pytest.fixture(scope="module")
def rows() -> dict:
    # the configuration of chapter 06, so that the chapter's claims are the ones tested
    return ffnn.who_pays_what(ffnn.BOOK_DS)


def _model(rows: dict, name: str, key: str) -> np.ndarray:
    return np.array([rows[key][k] for k, model in enumerate(rows["model"]) if model.startswith(name)], dtype=float)


def test_mlp_always_succeeds_within_budget() -> None:
    mlp = ffnn.mlp_scaling((8, 16), seeds=8, max_steps=2000)
    assert mlp["success_fraction"] == [1.0, 1.0]
    assert all(s <= 500 for s in mlp["median_steps"])
    assert all(acc[-1] == 1.0 for acc in mlp["curve_accuracy"])


def test_who_pays_what_the_transformer_pays_samples_the_mlp_pays_parameters(rows) -> None:
    t_params, m_params = _model(rows, "Transformer", "params"), _model(rows, "MLP", "params")
    t_samples, m_samples = _model(rows, "Transformer", "samples"), _model(rows, "MLP", "samples")
    assert np.all(t_params < m_params / 10)
    assert np.all(t_samples > m_samples)  # at every d of the book
    assert np.all(np.diff(t_samples / m_samples) > 0)  # and the gap widens
    assert t_samples[-1] > 3 * m_samples[-1]  # at d = 32
    # the Transformer's samples grow about like d^2, the MLP's much more slowly
    t_exp = fit_power_law([8, 16, 32], t_samples)["exponent"]
    m_exp = fit_power_law([8, 16, 32], m_samples)["exponent"]
    assert 1.5 < t_exp < 2.7 and m_exp < 1.2, (t_exp, m_exp)
    assert np.all(_model(rows, "Transformer", "steps") == 1)


def test_parameters_are_what_the_formulas_say(rows) -> None:
    for k, d in enumerate(rows["d"]):
        if rows["model"][k].startswith("MLP"):
            assert rows["params"][k] == ffnn.DEFAULT_WIDTH * (d + 2) + 1
        else:
            assert rows["params"][k] % 2 == 0 and rows["params"][k] < 10 * math.log2(d) + 20


def test_mlp_parameters_stay_linear_in_d_whatever_the_width() -> None:
    sweep = ffnn.mlp_width_sweep(16, (16, 64), seeds=8, max_steps=3000)
    assert sweep["success_fraction"] == [1.0, 1.0]
    assert all(p >= 16 for p in sweep["params"])  # at least one weight per input position


def test_one_step_neuron_reveals_the_pair_with_about_d_log_d_samples() -> None:
    neuron = ffnn.neuron_one_step((8, 16, 32), factors=(1.0, 64.0), width=256)
    for fractions in neuron["fraction"]:
        assert fractions[0] < 0.15 and fractions[1] > 0.5, fractions


def test_transformer_flop_count() -> None:
    assert ffnn.transformer_step_flops(1000, 16, 16) == 1000 * (3 * 16 + 8) + 4 * 16 * 16


def test_exponents_and_table_helpers(rows) -> None:
    exponents = ffnn.who_pays_what_exponents(rows)
    assert set(exponents) == {(m, k) for m in dict.fromkeys(rows["model"]) for k in ("params", "samples", "flops")}
    html = ffnn.who_pays_what_html(rows)
    assert html.startswith("<table>") and html.count("<tr>") == len(rows["d"]) + 1


def test_mlp_compute_is_counted_per_step(rows) -> None:
    mlp = [k for k, m in enumerate(rows["model"]) if m.startswith("MLP")]
    for k, d in zip(mlp, ffnn.BOOK_DS, strict=True):
        assert rows["flops"][k] == pytest.approx(rows["steps"][k] * mlp_step_flops(d, ffnn.DEFAULT_WIDTH, 32))
