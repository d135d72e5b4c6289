"""Experiment 3 (finite samples): the streamed step, the exact noise, the window, and the claims of chapter 05."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from xorlib.codes import positional_codes
from xorlib.data import all_inputs, make_generator, random_signs, sample_xor, xor_labels
from xorlib.experiments import finite_samples as fs
from xorlib.gradient import empirical_gradient
from xorlib.theory import one_step_curve, rest_mass_for_loss

D, PAIR = 16, (3, 11)


@pytest.fixture(scope="module")
def codes() -> torch.Tensor:
    return positional_codes(D, seed=0)


@pytest.fixture(scope="module")
def samples() -> tuple[torch.Tensor, torch.Tensor]:
    return sample_xor(3000, D, PAIR, seed=1, dtype=torch.float64)


# --------------------------------------------------------------------------- the step


def test_random_signs_are_fair_independent_coins() -> None:
    x = random_signs(make_generator(0), (4, 20_000, 13))
    assert x.shape == (4, 20_000, 13)
    assert set(torch.unique(x).tolist()) == {-1.0, 1.0}
    flat = x.reshape(-1, 13)
    # each position and each product of two positions has mean ~ 0 (5 standard errors)
    tol = 5 / math.sqrt(flat.shape[0])
    assert float(flat.mean(0).abs().max()) < tol
    assert float((flat.T @ flat / flat.shape[0] - torch.eye(13)).abs().max()) < tol


def test_random_signs_reproducible() -> None:
    a = random_signs(make_generator(5), (2, 100, 9))
    b = random_signs(make_generator(5), (2, 100, 9))
    assert torch.equal(a, b)


def test_query_gradient_matches_empirical_gradient(codes, samples) -> None:
    x, y = samples
    coefficients = fs.coefficients_from_samples(x, PAIR)
    ours = fs.query_gradient_from_coefficients(coefficients, codes)
    reference = empirical_gradient(torch.zeros(2, codes.shape[1], dtype=torch.float64), codes, x, y)
    assert torch.allclose(ours, reference, atol=1e-14, rtol=1e-10)


def test_worst_case_over_kappas_matches_theory_curve(codes, samples) -> None:
    x, y = samples
    kappas = [3.0, 10.0, 30.0, 100.0]
    scores = fs.unit_scores(fs.coefficients_from_samples(x, PAIR), codes)
    ours = fs.worst_case_over_kappas(scores.unsqueeze(0), [PAIR], kappas)[0]
    reference = one_step_curve(codes, PAIR, kappas, samples=(x, y))["worst"]
    assert np.allclose(ours.numpy(), reference, rtol=1e-9, atol=1e-12)


def test_unit_scores_of_population_coefficients_are_the_population_step(codes) -> None:
    moments = fs.coefficient_moments(D)
    mean = torch.full((D,), moments.mean_o, dtype=torch.float64)
    mean[list(PAIR)] = moments.mean_p
    expected = codes @ (codes[PAIR[0]] + codes[PAIR[1]])
    assert torch.allclose(fs.unit_scores(mean, codes), expected, atol=1e-12)


def test_streamed_coefficients_shape_and_prefix_property(codes) -> None:
    out = fs.streamed_coefficients(D, [PAIR, (0, 1)], [100, 300], seed=2)
    assert out.shape == (2, 2, D) and out.dtype == torch.float64
    # the reading at n = 100 is the same whether or not more samples follow (one stream per trial)
    prefix = fs.streamed_coefficients(D, [PAIR, (0, 1)], [100], seed=2)
    assert torch.equal(out[:, :1], prefix)
    assert torch.equal(out, fs.streamed_coefficients(D, [PAIR, (0, 1)], [100, 300], seed=2))


def test_streamed_coefficients_mean_and_variance_match_exact_moments(codes) -> None:
    n, trials = 256, 3000
    out = fs.streamed_coefficients(D, [PAIR] * trials, [n], seed=3)[:, 0]
    moments = fs.coefficient_moments(D)
    se = math.sqrt(moments.second / n / trials)
    assert abs(float(out[:, PAIR[0]].mean()) - moments.mean_p) < 5 * se
    assert abs(float(out[:, 0].mean()) - moments.mean_o) < 5 * se
    delta = fs.unit_scores(out, codes)
    delta = delta[:, PAIR[0]] - delta[:, PAIR[1]]
    exact = fs.balance_noise_variance(codes, PAIR)
    # sample variance of 3000 draws: relative standard error ~ sqrt(2/3000) ~ 2.6 %
    assert float(delta.var()) * n == pytest.approx(exact, rel=0.12)


def test_coefficient_moments_match_enumeration() -> None:
    d, pair = 8, (2, 5)
    x = all_inputs(d)
    y = xor_labels(x, pair)
    z = x.mean(1)
    v = ((1 - 2 * z * z - y) * z)[:, None] * x
    covariance = v.T @ v / len(x) - torch.outer(v.mean(0), v.mean(0))
    moments = fs.coefficient_moments(d)
    assert torch.allclose(moments.covariance(pair), covariance, atol=1e-14)
    a = torch.randn(d, dtype=torch.float64)
    assert float(moments.quadratic_form(a, pair)) == pytest.approx(float(a @ covariance @ a), rel=1e-12)


def test_leading_order_variance_is_close_at_large_d() -> None:
    d = 2048
    codes = positional_codes(d, seed=0)
    ratios = [
        fs.balance_noise_variance(codes, p) / (4 * d * d * (1 - float(codes[p[0]] @ codes[p[1]])) / codes.shape[1])
        for p in ((0, 1), (5, 900), (17, 2000))
    ]
    assert all(0.8 < r < 1.25 for r in ratios), ratios


def test_balance_tolerance_is_the_quartic_condition() -> None:
    eps = 1e-2
    b = fs.balance_tolerance(eps)
    # perfectly suppressed, imbalance tanh(kappa Delta / 2): loss 2 z^4 hits eps exactly at the tolerance
    assert 2 * math.tanh(b / 2) ** 4 == pytest.approx(eps, rel=1e-12)
    assert b > math.sqrt(eps)  # far more forgiving than a sqrt(eps) rule


def test_suppression_edge_reaches_the_rest_target(codes) -> None:
    pair = tuple(fs.learnable_pairs(codes)[0].tolist())
    edge = float(fs.suppression_edge(codes, [pair], 1e-2)[0])
    scores = codes @ (codes[pair[0]] + codes[pair[1]])
    weights = torch.softmax(edge * scores, 0)
    rest = 1 - float(weights[list(pair)].sum())
    assert rest == pytest.approx(rest_mass_for_loss(1e-2), rel=1e-6)


def test_self_calibrated_kappa_is_the_smallest_suppressing_kappa() -> None:
    scores = torch.tensor([[1.0, 0.9, 0.2, 0.1, 0.0]], dtype=torch.float64)
    kappas = (1.0, 10.0, 20.0, 40.0)
    target = 1e-3
    chosen = int(fs.self_calibrated_kappa(scores, kappas, target)[0])
    for k, kappa in enumerate(kappas):
        weights = torch.softmax(kappa * scores[0], 0)
        ok = 1 - float(weights.topk(2).values.sum()) <= target
        assert ok == (k >= chosen)


def test_window_probability_is_increasing_and_in_range(codes) -> None:
    pairs = [tuple(p) for p in fs.learnable_pairs(codes)[:20].tolist()]
    p = fs.window_success_probability(codes, pairs, [10, 100, 1000, 10_000, 100_000])
    assert np.all(np.diff(p) > 0) and 0 < p[0] and p[-1] < 1


def test_reference_lines() -> None:
    assert fs.sq_frontier(64, 24) == pytest.approx(2016 / 48)
    assert fs.information_floor(64) == pytest.approx(math.log2(2016))


def test_fits_recover_known_curves() -> None:
    n = np.geomspace(10, 1e6, 30)
    curve = 1 / (1 + np.exp(-(np.log(n) - np.log(3000.0)) / 0.7))
    fit = fs.fit_threshold(n, curve, 10_000)
    assert fit["n_star"] == pytest.approx(3000, rel=0.05)
    assert fit["width"] == pytest.approx(0.7, rel=0.1)
    assert fs.fit_power_law([2, 4, 8, 16], [3 * 2**2.3, 3 * 4**2.3, 3 * 8**2.3, 3 * 16**2.3])[
        "exponent"
    ] == pytest.approx(2.3)


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: fs.streamed_coefficients(3, [(0, 1)], [10]), ValueError),
        (lambda: fs.streamed_coefficients(8, [(0, 0)], [10]), ValueError),
        (lambda: fs.streamed_coefficients(8, [(0, 1)], [10, 5]), ValueError),
        (lambda: fs.streamed_coefficients(8, [(0, 1)], []), ValueError),
        (lambda: fs.streamed_coefficients(8, [(0, 1)], [2.5]), TypeError),
        (lambda: fs.finite_sample_experiment(()), ValueError),
        (lambda: fs.finite_sample_run(16, trials=0), ValueError),
        (lambda: fs.finite_sample_run(16, epsilon=0.0), ValueError),
        (lambda: fs.balance_tolerance(3.0), ValueError),
        (lambda: fs.n_grid_for(8, low=10.0, high=1.0), ValueError),
        (lambda: fs.unit_scores(torch.zeros(5), positional_codes(8)), ValueError),
        (lambda: fs.self_calibrated_kappa(torch.zeros(1, 4), (2.0, 1.0), 0.1), ValueError),
    ],
)
def test_bad_input_is_rejected(call, error) -> None:
    with pytest.raises(error):
        call()


# --------------------------------------------------------------------------- the claims of the chapter


@pytest.fixture(scope="module")
def experiment() -> dict:
    return fs.finite_sample_experiment((8, 16, 32), trials=32)


@pytest.fixture(scope="module")
def table(experiment) -> dict:
    return fs.success_table(experiment)


def test_enough_samples_succeed_and_too_few_fail(experiment) -> None:
    for k, d in enumerate(experiment["d"]):
        n = np.asarray(experiment["n"][k])
        oracle = np.asarray(experiment["oracle"][k])
        assert oracle[n >= 256 * d * d].min() >= 0.9, d
        assert oracle[n <= d * d].max() <= 0.2, d


def test_oracle_dominates_the_pair_free_rule_which_beats_the_fixed_step(experiment, table) -> None:
    for k in range(len(experiment["d"])):
        assert np.all(np.asarray(experiment["oracle"][k]) >= np.asarray(experiment["rule"][k]))
    # the rule needs at most twice the oracle's samples; kappa = 30 needs at least three times the rule's
    assert np.all(np.asarray(table["n_rule"]) <= 2 * np.asarray(table["n_oracle"]))
    assert np.all(np.asarray(table["n_fixed"]) >= 3 * np.asarray(table["n_rule"]))


def test_window_estimate_tracks_the_measured_threshold(table) -> None:
    ratio = np.asarray(table["n_window"]) / np.asarray(table["n_oracle"])
    assert np.all((ratio > 0.3) & (ratio < 3.0)), ratio


def test_fitted_exponent_is_about_two(table) -> None:
    exponent = fs.fit_power_law(table["d"], table["n_oracle"])["exponent"]
    assert 1.6 < exponent < 2.7, exponent


def test_threshold_is_far_above_the_sq_frontier_and_the_information_floor(table) -> None:
    n = np.asarray(table["n_oracle"])
    assert np.all(n > 20 * np.asarray(table["sq_frontier"]))
    assert np.all(n > 100 * np.asarray(table["info_floor"]))


def test_too_large_a_step_collapses_onto_one_position() -> None:
    d = 32
    codes = positional_codes(d, seed=0)
    pair = tuple(fs.learnable_pairs(codes)[7].tolist())
    profile = fs.kappa_profile(d, [4096], pair=pair, kappas=(10.0, 1e4), seed=1)
    assert profile["worst"][0][1] == pytest.approx(2.0, abs=1e-3)  # f = -1 on every input
    weights = torch.softmax(1e4 * profile["scores"][0], 0)
    assert float(weights.max()) > 0.999 and int(weights.argmax()) in pair


def test_trial_successes_reproduce_the_curves(experiment) -> None:
    for k in range(len(experiment["d"])):
        for key in ("oracle", "rule"):
            assert np.allclose(fs.trial_successes(experiment, k, key).mean(0), experiment[key][k])


def test_bootstrap_interval_brackets_the_fit(experiment) -> None:
    interval = fs.bootstrap_exponent(experiment, resamples=100)
    assert interval["low"] < interval["exponent"] < interval["high"]
    assert 1.4 < interval["low"] and interval["high"] < 3.0


def test_window_threshold_matches_the_experiment_and_tends_to_d_squared(table) -> None:
    at_32 = fs.window_threshold(32)["n_star"]
    assert 0.5 < at_32 / table["n_window"][-1] < 2.0
    far = [fs.window_threshold(d)["n_star"] for d in (512, 1024, 2048)]
    exponent = fs.fit_power_law([512, 1024, 2048], far)["exponent"]
    assert 1.8 < exponent < 2.3, exponent


def test_plots_draw_the_experiment(experiment, table) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from xorlib.plots import plot_kappa_window, plot_sample_thresholds, plot_success_curves

    ax = plot_success_curves(experiment, key="rule")
    assert len(ax.lines) == 2 * len(experiment["d"])  # measured and window estimate per d
    with pytest.raises(ValueError):
        plot_success_curves(experiment, key="best")
    plot_sample_thresholds(table)
    profile = fs.kappa_profile(16, [500, 5000], pair=(0, 1), kappas=(5.0, 50.0))
    assert len(plot_kappa_window(profile, epsilon=1e-2).lines) == 4  # two n, the population, the epsilon line
    plt.close("all")
