r"""One gradient step, for either model: the reader-facing :func:`one_step`.

The learner starts from the model's start (:class:`xorlib.model.ModelConfig`),
computes the gradient of the loss (the population gradient in closed form, or
the gradient on ``n`` samples), and takes one step
:math:`q^+ = q - \eta\nabla_q L`. Writing :math:`\kappa = c_1\eta/d^2` (the
*sharpness*) and :math:`\delta = -\tfrac{d^2}{c_1}\nabla_q L`, the scores move to
:math:`s^+ = s + \kappa\, t` with the direction scores :math:`t = P\delta`.

Step-size rules, none of which knows the hidden pair:

* ``"certified"`` (both models): the learner reads its own direction. The split
  model takes each head's largest entry of :math:`t_h` as its target and the step
  :func:`xorlib.theory.split_step_from_gaps`, which certifies :math:`\varepsilon`
  whenever those targets are the hidden bits. The tied model takes the two
  largest entries as its pair and scans step sizes for the smallest whose
  certificate, computed *for that believed pair*, is below :math:`\varepsilon`
  (else the one that minimises it);
* ``"lattice"`` (tied model): :func:`xorlib.theory.lattice_sharpness`, from
  :math:`d`, the codes' lattice step and :math:`\varepsilon` only;
* a number: that sharpness :math:`\kappa`.

The population step streams over the positions (:mod:`xorlib._stream`): memory
:math:`O(\text{block}\cdot m)` whatever :math:`d`, the codes regenerated from their
seed in every pass (or kept, packed, when they fit in 256 MB) and never unpacked to floats. The reported worst case is
:func:`xorlib.certify.certify_scores`'s certificate for the true pair.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass

import torch

from . import _samples, _stream
from ._checks import (
    check_choice,
    check_device,
    check_float,
    check_instance,
    check_int,
    check_numbers,
    check_pair,
    check_seed,
    check_sequence,
    check_size,
    check_tensor,
)
from .certify import WorstCase, _certify_summary
from .codes import BlockView
from .model import ModelConfig
from .population import _deviation_loss
from .runtime import threads
from .task import random_pair
from .theory import lattice_sharpness, split_step_from_gaps, tied_rest_target

__all__ = ["OneStepConfig", "OneStepResult", "learning_curve", "one_step", "run_one_step", "worst_case_curve"]

STEP_RULES = ("certified", "lattice")
#: Weights of both heads are kept in the result up to this many positions.
KEEP_WEIGHTS = 2**20
#: The tied model's certified rule scans this many step sizes up to this many positions (beyond: the margin form).
SCAN_POINTS, SCAN_UP_TO = 121, 2**18
#: The largest ``d`` one step streams over: a pass costs about 0.2 µs per position (minutes at this size).
MAX_D = 10**9


@dataclass(frozen=True)
class OneStepConfig:
    r"""One step of one model on one task.

    Parameters
    ----------
    model
        The model (:class:`xorlib.model.ModelConfig`, softmax attention).
    pair
        The hidden pair.
    n
        Number of samples for the gradient; ``None`` for the population gradient.
    data_seed
        Seed of the samples.
    step
        ``"certified"``, ``"lattice"`` (tied model only) or a sharpness :math:`\kappa > 0`.
    epsilon
        The target worst-case loss of the step rules, in ``(0, 2]``.
    device
        Where to compute.
    """

    model: ModelConfig
    pair: tuple[int, int]
    n: int | None = None
    data_seed: int = 0
    step: str | float = "certified"
    epsilon: float = 1e-6
    device: str = "cpu"

    def __post_init__(self) -> None:
        if not isinstance(self.model, ModelConfig):
            raise TypeError(f"model must be a ModelConfig, got {type(self.model).__name__}")
        if self.model.attention != "softmax":
            raise ValueError(f"model.attention must be 'softmax' for one step, got {self.model.attention!r}")
        check_int("model.d", self.model.d, minimum=4, maximum=MAX_D)
        object.__setattr__(self, "pair", check_pair("pair", self.pair, self.model.d))
        if self.n is not None:  # the samples are streamed in chunks; only the codes are dense
            check_int("n", self.n, minimum=1, maximum=10**10)
            check_size(f"the dense codes (d={self.model.d}, m={self.model.m})", self.model.d * self.model.m, 8)
            check_size(f"a chunk of samples (d={self.model.d})", _samples.chunk_rows(self.model.d) * self.model.d, 9)
        check_seed("data_seed", self.data_seed)
        if isinstance(self.step, str):
            check_choice("step", self.step, STEP_RULES)
            if self.step == "lattice" and self.model.heads != "tied":
                raise ValueError(
                    "step='lattice' is the tied model's rule; use 'certified' or a sharpness for heads='split'"
                )
        else:
            object.__setattr__(
                self, "step", check_float("step", self.step, minimum=0.0, maximum=1e12, strict_minimum=True)
            )
        object.__setattr__(
            self, "epsilon", check_float("epsilon", self.epsilon, minimum=0.0, maximum=2.0, strict_minimum=True)
        )
        check_device("device", self.device)


@dataclass(frozen=True)
class OneStepResult:
    """What one step did: the step, the attention of both heads, and the certified worst case over all inputs."""

    config: OneStepConfig
    rule: str  # the rule that chose the step: "certified", "lattice", "fixed" or the certified rule's fallback
    direction_top: tuple[
        tuple[float, ...], ...
    ]  # the three largest entries of each head's direction t (certified rule)
    kappa: float
    lr: float
    queries_before: torch.Tensor
    queries_after: torch.Tensor
    pair_weights: torch.Tensor  # (2 heads, 2 positions): attention on (u, v) after the step
    rest_mass: torch.Tensor  # (2,): attention off the pair after the step
    found: tuple[int, int]  # the position each head attends to most
    worst_case: WorstCase
    mean_loss_before: float
    mean_loss_after: float
    weights_before: torch.Tensor | None = None  # (2, d), kept for d <= KEEP_WEIGHTS
    weights_after: torch.Tensor | None = None

    def __post_init__(self) -> None:
        check_instance("config", self.config, OneStepConfig, "a OneStepConfig")
        check_instance("rule", self.rule, str, "a str")
        check_instance("worst_case", self.worst_case, WorstCase, "a WorstCase")
        for name in ("direction_top", "found"):
            check_instance(name, getattr(self, name), tuple, "a tuple")
        for name in ("kappa", "lr", "mean_loss_before", "mean_loss_after"):
            check_instance(name, getattr(self, name), numbers.Real, "a real number")
        for name in ("queries_before", "queries_after", "pair_weights", "rest_mass"):
            check_instance(name, getattr(self, name), torch.Tensor, "a tensor")
        for name in ("weights_before", "weights_after"):
            check_instance(name, getattr(self, name), (torch.Tensor, type(None)), "a tensor or None")

    @property
    def pair(self) -> tuple[int, int]:
        """The hidden pair."""
        return self.config.pair

    @property
    def parameters(self) -> int:
        """Trainable parameters, ``2m``."""
        return self.config.model.parameters

    @property
    def success(self) -> bool:
        """Whether the certified worst-case loss is at most the target ``epsilon``."""
        return float(self.worst_case.upper) <= self.config.epsilon

    @property
    def direction_gaps(self) -> tuple[float, float]:
        """Per head, the largest minus the second largest entry of its direction :math:`t` (``nan`` unless the certified rule ran)."""
        if not self.direction_top:
            return (math.nan, math.nan)
        return tuple(row[0] - row[1] for row in self.direction_top)  # type: ignore[return-value]

    @property
    def split(self) -> bool:
        """Whether the two heads attend most to the two different hidden bits."""
        return tuple(sorted(self.found)) == self.pair


def one_step(
    d: int,
    heads: str = "split",
    *,
    seed: int = 0,
    pair: tuple[int, int] | None = None,
    m: int | None = None,
    n: int | None = None,
    sigma: float = 1.0,
    start: str | None = None,
    step: str | float = "certified",
    epsilon: float = 1e-6,
    code_kind: str = "balanced",
    device: str = "cpu",
) -> OneStepResult:
    r"""One gradient step of the tied or the split model on a sparse XOR task: the book's one-line entry point.

    ``seed`` draws the codes, the hidden pair (unless ``pair`` is given), the
    start and the samples, each from its own stream. See :class:`OneStepConfig`
    for the step rules and :class:`xorlib.model.ModelConfig` for the models.

    Examples
    --------
    >>> result = one_step(1000, heads="split", seed=0)
    >>> result.split, result.success
    (True, True)
    """
    d = check_int("d", d, minimum=4, maximum=MAX_D)
    seed = check_seed("seed", seed)
    model = ModelConfig(d, heads, m=m, code_kind=code_kind, code_seed=seed, start=start, sigma=sigma, init_seed=seed)
    pair = random_pair(d, seed=seed) if pair is None else pair
    config = OneStepConfig(model, pair, n=n, data_seed=seed, step=step, epsilon=epsilon, device=device)
    return run_one_step(config)


def run_one_step(config: OneStepConfig) -> OneStepResult:
    """Take the step described by ``config`` (see the module docstring), single-threaded: on the CPU, bit-identical for any thread setting."""
    if not isinstance(config, OneStepConfig):
        raise TypeError(f"config must be a OneStepConfig, got {type(config).__name__}")
    with threads(1):
        return _run(config)


@dataclass(frozen=True)
class _Gradient:
    """The learner's state after computing its gradient: the passes over the codes, the start, the direction."""

    views: object  # () -> iterable of BlockView
    queries: torch.Tensor  # (2, m) at the start
    direction: torch.Tensor  # (2, m): the step is q + kappa * direction
    stats: _stream.HeadStats
    at_pair: torch.Tensor  # (2 positions, m): the codes of the hidden pair


def _gradient(config: OneStepConfig) -> _Gradient:
    """The start and the (population or empirical) gradient direction of ``config``."""
    model, pair, device = config.model, config.pair, torch.device(config.device)
    d, c0, c1 = model.d, *model.readout
    codes = model.codes
    q = model.initial_queries().to(device)
    at_pair = codes.rows(list(pair)).to(device)
    if config.n is None:
        views = _stream.code_views(codes, device)
        stats = _stream.head_stats(views, q, pair, q @ at_pair.T)
        grad = _stream.population_gradient(views, q, pair, stats, c0, c1)
        return _Gradient(views, q, -(d**2 / c1) * grad, stats, at_pair)
    return _empirical_gradients(config, [config.n])[0]


def _empirical_gradients(config: OneStepConfig, sample_sizes: list[int]) -> list[_Gradient]:
    """The learner's state for the first ``n`` samples of the stream, for every ``n`` of ``sample_sizes`` (one pass)."""
    model, pair, device = config.model, config.pair, torch.device(config.device)
    d, c0, c1 = model.d, *model.readout
    codes = model.codes
    q = model.initial_queries().to(device)
    at_pair = codes.rows(list(pair)).to(device)
    dense = codes.dense(device=device)
    dense_view = BlockView(0, d, model.m, model.m, 1.0, rows=dense)

    def views():
        return [dense_view]

    stats = _stream.head_stats(views, q, pair, q @ at_pair.T)
    score_grads = _samples.score_gradients(q @ dense.T, pair, (c0, c1), "softmax", sample_sizes, config.data_seed)
    return [_Gradient(views, q, -(d**2 / c1) * (g @ dense), stats, at_pair) for g in score_grads]


def _run(config: OneStepConfig, state: _Gradient | None = None) -> OneStepResult:
    """The step of ``config`` from its gradient (``state``, computed here unless given)."""
    model, pair, device = config.model, config.pair, torch.device(config.device)
    d, c0, c1 = model.d, *model.readout
    state = _gradient(config) if state is None else state
    views, q, direction, stats, at_pair = state.views, state.queries, state.direction, state.stats, state.at_pair
    kappa, top = _choose_sharpness(config, views, q, direction, stats, at_pair)
    rule = config.step if isinstance(config.step, str) else "fixed"
    if not math.isfinite(kappa):  # a tie at the top of a head's direction: nothing certifies, take the lattice step
        kappa, rule = lattice_sharpness(d, model.codes.margin_step, config.epsilon), "certified (no gap: lattice step)"
    keep = d <= KEEP_WEIGHTS
    after = _stream.after_step(
        views, q, direction, torch.tensor([kappa], dtype=q.dtype, device=device), pair, q @ at_pair.T,
        direction @ at_pair.T, d, off_pair=True, keep_scores=keep,
    )  # fmt: skip
    q_after = q + kappa * direction
    tied = bool(torch.equal(q_after[0], q_after[1]))
    certificate = _certify_summary(
        after.log_weight_u[0],
        after.log_weight_v[0],
        after.log_rest[0],
        after.log_error[0],
        torch.tensor(tied),
        model.heads,
    )
    off_pair = {key: value[0] for key, value in after.off_pair.items()}
    parts = _stream.pair_deviations(after.log_weight_u[0], after.log_weight_v[0], after.log_rest[0], model.heads)
    mean_after = _deviation_loss(parts, off_pair, c1)
    return OneStepResult(
        config=config,
        rule=rule,
        direction_top=() if top is None else tuple(tuple(float(v) for v in row) for row in top),
        kappa=kappa,
        lr=kappa * d**2 / c1,
        queries_before=q,
        queries_after=q_after,
        pair_weights=torch.stack([after.log_weight_u[0], after.log_weight_v[0]], dim=-1).exp(),
        rest_mass=after.log_rest[0].exp(),
        found=tuple(int(i) for i in after.top_index[0, :, 0]),
        worst_case=certificate,
        mean_loss_before=float(_stream.population_loss(stats, c0, c1)),
        mean_loss_after=float(mean_after),
        weights_before=torch.softmax(_stream.scores(views, q), -1) if keep else None,
        weights_after=torch.softmax(after.scores, -1) if keep else None,
    )


def _choose_sharpness(config: OneStepConfig, views, q, direction, stats, at_pair) -> tuple[float, torch.Tensor | None]:
    """The sharpness of the configured rule (``inf`` if the certified rule finds no gap), and the direction's top entries."""
    model, d, epsilon = config.model, config.model.d, config.epsilon
    if not isinstance(config.step, str):
        return float(config.step), None
    if config.step == "lattice":
        return lattice_sharpness(d, model.codes.margin_step, epsilon), None
    values, index = _stream.top_scores(views, direction, 3)
    if model.heads == "split":
        return split_step_from_gaps(d, values[:, 0] - values[:, 1], stats.smax - stats.smin, epsilon), values
    # Tied: the believed pair is the two largest entries; the margin form gives the scale of the scan.
    believed = tuple(sorted(int(i) for i in index[0, :2]))
    gap = float(values[0, 1] - values[0, 2])
    if gap <= 0:
        return math.inf, values
    guess = math.log((d - 2) / (2 * tied_rest_target(epsilon))) / gap
    if d > SCAN_UP_TO:
        return guess, values
    kappas = torch.logspace(math.log10(guess) - 3, math.log10(guess) + 1, SCAN_POINTS, dtype=q.dtype)
    rows = model.codes.rows(list(believed)).to(q.device)
    after = _stream.after_step(views, q, direction, kappas, believed, q @ rows.T, direction @ rows.T, d, top=False)
    tied = torch.tensor(bool(torch.equal(direction[0], direction[1])))
    own = _certify_summary(after.log_weight_u, after.log_weight_v, after.log_rest, after.log_error, tied, "tied").upper
    meets = torch.nonzero(own <= epsilon)
    return float(kappas[meets[0, 0]] if meets.numel() else kappas[torch.argmin(own)]), values


@dataclass(frozen=True)
class WorstCaseCurve:
    r"""The certified worst case after one step of each sharpness :math:`\kappa` (one gradient, many step sizes)."""

    kappas: torch.Tensor  # (K,)
    worst_case: WorstCase  # fields of shape (K,)
    found: torch.Tensor  # (K, 2): the position each head attends to most
    pair: tuple[int, int]

    @property
    def split(self) -> torch.Tensor:
        """Whether the heads attend most to the two different hidden bits, per step size."""
        return torch.tensor([tuple(sorted(row.tolist())) == self.pair for row in self.found])


def worst_case_curve(config: OneStepConfig, kappas: torch.Tensor | list[float]) -> WorstCaseCurve:
    """The certified worst case for every sharpness in ``kappas``, from one gradient: one pass over the positions."""
    if not isinstance(config, OneStepConfig):
        raise TypeError(f"config must be a OneStepConfig, got {type(config).__name__}")
    if isinstance(kappas, torch.Tensor):
        kappas = check_tensor("kappas", kappas, ndim=1).tolist()
    kappas = torch.tensor(
        check_numbers("kappas", kappas, minimum=0.0, maximum=1e12, strict_minimum=True), dtype=torch.float64
    )
    with threads(1):
        state = _gradient(config)
        pair, model = config.pair, config.model
        scores_at_pair = state.queries @ state.at_pair.T
        after = _stream.after_step(
            state.views, state.queries, state.direction, kappas.to(state.queries.device), pair, scores_at_pair,
            state.direction @ state.at_pair.T, model.d,
        )  # fmt: skip
        tied = torch.tensor(bool(torch.equal(state.direction[0], state.direction[1])) and model.start == "zero")
        certificate = _certify_summary(
            after.log_weight_u, after.log_weight_v, after.log_rest, after.log_error, tied, model.heads
        )
    return WorstCaseCurve(kappas=kappas, worst_case=certificate, found=after.top_index[..., 0], pair=pair)


def learning_curve(config: OneStepConfig, sample_sizes: list[int] | tuple[int, ...]) -> tuple[OneStepResult, ...]:
    """One step from the first ``n`` samples of one stream, for each ``n`` of ``sample_sizes``, in one pass over the samples.

    ``config.n`` is ignored; the samples are those of ``config.data_seed``'s stream, so
    each result equals ``run_one_step`` with that ``n`` up to rounding (the sums are split at the snapshots).
    """
    if not isinstance(config, OneStepConfig):
        raise TypeError(f"config must be a OneStepConfig, got {type(config).__name__}")
    sample_sizes = check_sequence("sample_sizes", sample_sizes)
    sizes = [check_int(f"sample_sizes[{k}]", n, minimum=1, maximum=10**10) for k, n in enumerate(sample_sizes)]
    if not sizes or sizes != sorted(set(sizes)):
        raise ValueError(
            f"sample_sizes must be a non-empty increasing sequence of distinct sizes, got {list(sample_sizes)}"
        )
    with threads(1):
        states = _empirical_gradients(config, sizes)
        return tuple(_run(dataclasses.replace(config, n=n), state) for n, state in zip(sizes, states, strict=True))
