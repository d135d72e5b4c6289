"""The gap functionals of the split model's direction (``thm-samples``): exact moments against all 2^d inputs,
autograd and Monte Carlo; the learner's empirical gaps are their means; the failure bound and its inverse."""

from __future__ import annotations

import math

import pytest
import torch

from xorlib._gaps import (
    GapMoments,
    bernstein_rates,
    even_partitions,
    failure_bound,
    gap_moments,
    gaussian_success,
    gaussian_threshold,
    sample_bound,
    sign_moment,
)
from xorlib.empirical import empirical
from xorlib.model import ModelConfig, TwoHeadModel
from xorlib.task import all_inputs, random_pair, sample_xor, xor_labels


def _values(codes, q, pair, targets, x) -> torch.Tensor:
    """Every gap functional X_i on every row of ``x``, from its definition: ``(2(d - 1), rows)``."""
    d = codes.shape[0]
    u, v = pair
    a, b = torch.softmax(q @ codes.T, dim=-1)
    residual = x[:, u] * x[:, v] - (x @ a) * (x @ b)  # f - y
    gram = codes @ codes.T
    out = []
    for own, other, target in ((a, x @ b, targets[0]), (b, x @ a, targets[1])):
        for k in range(d):
            if k != target:
                psi = gram[:, target] - gram[:, k]
                out.append(residual * other * (x @ (own * (psi - own @ psi))))
    return torch.stack(out)


def _draw(d: int, seed: int, sigma: float = 1.0):
    model = ModelConfig(d, "split", code_seed=seed, init_seed=seed + 1, sigma=sigma)
    return model, model.codes.dense(), model.initial_queries(), random_pair(d, seed=seed + 2)


def test_even_partitions_are_counted_right() -> None:
    # the partitions of 2k labelled factors into blocks of even size: 1, 1, 4, 31, 379 (OEIS A005046)
    assert [len(even_partitions(k)) for k in (0, 2, 4, 6, 8)] == [1, 1, 4, 31, 379]
    for partition in even_partitions(6):
        assert sorted(i for block in partition for i in block) == list(range(6))


@pytest.mark.parametrize("names", ["ab", "aabb", "abcw", "aabbccww", "abbbbcww", "aaaaaaaa"])
def test_sign_moment_against_all_inputs(names: str) -> None:
    d = 9
    gen = torch.Generator().manual_seed(len(names))
    factors = {key: torch.randn(d, generator=gen, dtype=torch.float64) for key in "abcw"}
    x = all_inputs(d)
    product = torch.ones(x.shape[0], dtype=torch.float64)
    scale = torch.ones((), dtype=torch.float64)
    for name in names:
        product = product * (x @ factors[name])
        scale = scale * factors[name].abs().sum()
    # the sum over partitions cancels terms of the size of prod |c_k|_1: the tolerance follows that size
    assert float(sign_moment(factors, names)) == pytest.approx(float(product.mean()), abs=1e-13 * float(scale))


@pytest.mark.parametrize(("d", "seed"), [(8, 1), (10, 7), (12, 21)])
def test_gap_moments_against_all_inputs(d: int, seed: int) -> None:
    _, codes, q, pair = _draw(d, seed)
    gaps = gap_moments(codes, q, pair)
    values = _values(codes, q, pair, gaps.targets, all_inputs(d))
    assert gaps.mean.shape == (2 * (d - 1),) and set(gaps.targets) == set(pair)
    scale = float(values.abs().max())
    torch.testing.assert_close(gaps.mean, values.mean(1), rtol=0, atol=1e-13 * scale)
    torch.testing.assert_close(gaps.variance, values.var(1, unbiased=False), rtol=1e-11, atol=1e-13 * scale**2)
    # the one-sided range: mean - X <= 2 |omega|_1 + mean, on every input
    assert bool(((gaps.mean[:, None] - values) <= gaps.range[:, None] * (1 + 1e-12)).all())


def test_gap_means_are_autograds_population_gaps() -> None:
    d = 10
    model, codes, q, pair = _draw(d, 3)
    gaps = gap_moments(codes, q, pair)
    net = TwoHeadModel(model)
    x = all_inputs(d)
    loss = 0.5 * ((net(x) - xor_labels(x, pair)) ** 2).mean()
    loss.backward()
    t = -(net.queries.grad @ codes.T)  # t_h = -P grad_{q_h} L, (2, d)
    population = torch.cat([t[h, gaps.targets[h]] - t[h, torch.arange(d) != gaps.targets[h]] for h in (0, 1)])
    torch.testing.assert_close(gaps.mean, population, rtol=0, atol=1e-12 * float(population.abs().max()))
    # the targets are where each head's population direction is larger among the hidden bits
    assert t[0, gaps.targets[0]] >= t[0, gaps.targets[1]]


def test_the_learners_empirical_gaps_are_means_of_the_gap_functionals() -> None:
    d, n = 48, 3000
    model, codes, q, pair = _draw(d, 11)
    gaps = gap_moments(codes, q, pair)
    x, y = sample_xor(n, d, pair, seed=5)
    step = empirical(model, q, x, y)
    t = -(step.score_gradient @ codes) @ codes.T  # the empirical directions, (2, d)
    empirical_gaps = torch.cat([t[h, gaps.targets[h]] - t[h, torch.arange(d) != gaps.targets[h]] for h in (0, 1)])
    values = _values(codes, q, pair, gaps.targets, x)
    scale = float(values.abs().max())
    torch.testing.assert_close(empirical_gaps, values.mean(1), rtol=0, atol=1e-13 * scale)


def test_gap_moments_against_monte_carlo_at_d_64() -> None:
    d, n = 64, 200_000
    _, codes, q, pair = _draw(d, 5)
    gaps = gap_moments(codes, q, pair)
    x, _ = sample_xor(n, d, pair, seed=9)
    values = _values(codes, q, pair, gaps.targets, x)
    # the mean within 5 standard errors; the variance within 5 of its own standard errors
    error = (values.mean(1) - gaps.mean).abs() / (gaps.variance / n).sqrt()
    assert float(error.max()) < 5
    centred = (values - gaps.mean[:, None]) ** 2
    spread = centred.std(1) / math.sqrt(n)
    assert float(((centred.mean(1) - gaps.variance).abs() / spread).max()) < 5


def _moments(means, variances, ranges) -> GapMoments:
    as_tensor = lambda values: torch.tensor(values, dtype=torch.float64)  # noqa: E731
    return GapMoments(as_tensor(means), as_tensor(variances), as_tensor(ranges), (0, 1))


def test_the_failure_bound_and_its_inverse() -> None:
    one = _moments([0.1, 0.2], [0.5, 0.5], [1.0, 1.0])
    rates = bernstein_rates(one)
    assert float(rates[0]) == pytest.approx(0.01 / (1.0 + (2 / 3) * 0.1))
    n = sample_bound([one], 0.5)
    assert failure_bound([one], n) <= 0.5 < failure_bound([one], n - 1)
    # a draw outside the hypothesis counts as a failure: its bound is 1, whatever n
    outside = _moments([0.1, -0.01], [0.5, 0.5], [1.0, 1.0])
    assert not outside.hypothesis and failure_bound([outside], 1e12) == 1.0
    assert failure_bound([one, outside], 1e12) == pytest.approx(0.5)
    assert sample_bound([one, outside], 0.4) == math.inf  # half the draws outside: no n reaches 0.4
    assert sample_bound([one, outside], 0.75) == sample_bound([one], 0.5)  # (1 + B) / 2 <= 3/4 iff B <= 1/2


def test_gaussian_heuristic_reaches_its_level_where_it_says() -> None:
    d = 16
    draws = [gap_moments(*_draw(d, seed)[1:]) for seed in (1, 2, 3)]
    n = gaussian_threshold(draws)
    assert gaussian_success(draws, n) == pytest.approx(0.5, abs=1e-6)
    assert gaussian_success(draws, 4 * n) > 0.5 > gaussian_success(draws, n / 4)
    # the proved bound is above the heuristic's prediction on the same draws
    assert sample_bound(draws, 0.5) > n
