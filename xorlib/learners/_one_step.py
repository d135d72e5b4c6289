r"""One gradient step, for either model: the reader-facing :func:`xorlib.one_step`.

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
* ``"lattice"`` (tied model): :func:`xorlib.theory.tied_sharpness` at the codes'
  lattice step, from :math:`d`, the lattice step and :math:`\varepsilon` only;
* a number: that sharpness :math:`\kappa`.

The population step streams over the positions (:mod:`xorlib._gradient`, :mod:`xorlib._stream`,
:mod:`xorlib._candidates`; the blocks from :mod:`xorlib._source`): memory
:math:`O(\text{block}\cdot m)` whatever :math:`d`, the codes regenerated from their
seed in every pass (or kept, packed: up to 256 MiB whole, or up to 576 MiB as the half of each balanced
block's bytes that determines the rest) and never unpacked to floats; at :math:`d = 10^8` a split step reads them three times and a tied step once. The reported worst case is
:func:`xorlib.certify.certify_scores`'s certificate for the true pair, with the rounding allowance of the
streamed scores (:func:`xorlib._logsums.log_weight_error`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Annotated, Literal

import torch

from .._candidates import NEGLECTED_AT_MOST, after_from_candidates, direction_pass
from .._certificate import WorstCase, certificate
from .._checks import check_pair, check_size
from .._contract import MAX_D, MAX_SAMPLE_ENTRIES, Between, Device, Heads, Pair, Seed, config, public
from .._gradient import HeadStats, head_stats, population_loss, scores, start_and_gradient
from .._moments import OffPair, deviation_loss
from .._packed import BlockView, Lookup
from .._runtime import threads
from .._samples import chunk_rows, score_gradients
from .._source import CodeSource, code_views
from .._stream import after_step, pair_deviations, top_scores
from ..codes import Codes
from ..model import ModelConfig
from ..task import random_pair
from ..theory import split_step_from_gaps, tied_rest_target, tied_sharpness

#: Weights of both heads are kept in the result up to this many positions.
KEEP_WEIGHTS = 2**20
#: The tied model's certified rule scans this many step sizes up to this many positions (beyond: the margin form).
SCAN_POINTS, SCAN_UP_TO = 121, 2**18
#: Up to this many code entries (d m), a step takes the pair's rows from the dense codes (one generation, memoised).
SMALL_DENSE = 2**16
#: The largest rounding allowance of a log-weight with which a step is certified: each weight is then known to
#: within a factor e^(1/2) = 1.65. The allowance (xorlib._logsums.log_weight_error) grows with the score
#: magnitude, about 1e-13 per unit of score: beyond, the certificate's arithmetic would bound nothing useful.
MAX_LOG_ERROR = 0.5
#: A step: a rule that chooses it, or a sharpness kappa.
Step = Literal["certified", "lattice"] | Annotated[float, Between(0.0, 1e12, open_low=True)]


@config
class StepConfig:
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
    pair: Pair
    n: Annotated[int | None, Between(1, MAX_SAMPLE_ENTRIES)] = None
    data_seed: Seed = 0
    step: Step = "certified"
    epsilon: Annotated[float, Between(0.0, 2.0, open_low=True)] = 1e-6
    device: Device = "cpu"

    def __post_init__(self) -> None:
        model = self.model
        if model.attention != "softmax":
            raise ValueError(f"model.attention must be 'softmax' for one step, got {model.attention!r}")
        object.__setattr__(self, "pair", check_pair("pair", self.pair, model.d))
        if self.n is not None:  # the samples are streamed in chunks of packed bits; only the codes are dense
            if self.n * model.d > MAX_SAMPLE_ENTRIES:
                raise ValueError(
                    f"n * d must be at most {MAX_SAMPLE_ENTRIES:,} sample entries, got n * d = {self.n * model.d:,}: "
                    f"at d = {model.d:,} take n <= {MAX_SAMPLE_ENTRIES // model.d:,}"
                )
            check_size(f"the dense codes (d={model.d}, m={model.m})", model.d * model.m, 8)
            # a chunk of packed sample bits (its passes add a fixed 9 x 2^19 bytes)
            check_size(f"a chunk of samples (d={model.d})", chunk_rows(model.d) * ((model.d + 7) // 8), 2)
        if self.step == "lattice" and not model.tied:
            raise ValueError(
                "step='lattice' is the tied model's rule; use 'certified' or a sharpness for heads='split'"
            )
        if self.step == "lattice" and not math.isfinite(model.codes.margin_step):
            raise ValueError(
                f"step='lattice' needs sign codes (balanced or iid): code_kind={model.code_kind!r} has no lattice step"
            )


@dataclass(frozen=True)
class StepResult:
    """What one step did: the step, the attention of both heads, and the certified worst case over all inputs."""

    config: StepConfig
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


@public(options=(ModelConfig, StepConfig), set_here=("attention", "code_seed", "init_seed", "model", "data_seed"))
def one_step(
    d: Annotated[int, Between(4, MAX_D)], heads: Heads = "split", *, seed: Seed = 0, pair: Pair | None = None, **options
) -> StepResult:
    r"""One gradient step of the tied or the split model on a sparse XOR task: the book's one-line entry point.

    A thin face over the two configs: ``seed`` draws the codes, the hidden pair (unless ``pair`` is
    given), the start and the samples, each from its own stream, and every other option is a field of
    :class:`xorlib.model.ModelConfig` (``m``, ``sigma``, ``start``, ``code_kind``) or of the step's config
    (``n``: samples, ``None`` for the population gradient; ``step``: ``"certified"``, ``"lattice"`` (tied
    model) or a sharpness :math:`\kappa \in (0, 10^{12}]`; ``epsilon``: the rules' target worst case in
    :math:`(0, 2]`; ``device``). Single-threaded: on the CPU, bit-identical for any thread setting.

    Returns
    -------
    StepResult
        The step (``kappa``, ``lr``, ``rule``), both heads' queries and attention before and after
        (``weights_after`` up to :math:`d = 2^{20}`), the weight on the pair and off it, the position each
        head attends to most (``found``; ``split`` when they are the two hidden bits), the mean loss before
        and after, and ``worst_case``, the certified bracket on the loss over all :math:`2^d` inputs
        (``success``: its upper bound is at most ``epsilon``).

    Raises
    ------
    ValueError
        For a bad option, or a step too large for float64 to certify (the message gives the steps that can be).

    Examples
    --------
    >>> result = one_step(1000, heads="split", seed=0)
    >>> result.split, result.success
    (True, True)
    """
    model_options = {name: value for name, value in options.items() if name in _MODEL_OPTIONS}
    model = ModelConfig(d, heads, code_seed=seed, init_seed=seed, **model_options)
    step_options = {name: value for name, value in options.items() if name not in _MODEL_OPTIONS}
    pair = random_pair(d, seed=seed) if pair is None else pair
    return take_step(StepConfig(model, pair, data_seed=seed, **step_options))


_MODEL_OPTIONS = frozenset(field.name for field in dataclasses.fields(ModelConfig))


def take_step(config: StepConfig) -> StepResult:
    """Take the step described by ``config`` (see the module docstring), single-threaded."""
    with threads(1):
        return _run(config)


def take_steps(config: StepConfig, rules: tuple[Step, ...]) -> tuple[StepResult, ...]:
    """:func:`take_step` of ``config`` with each step rule of ``rules`` in turn (``config.step`` is ignored).

    The gradient does not depend on the rule: it is computed once, so each result equals its own
    :func:`take_step` bit for bit, one gradient pass cheaper per further rule.
    """
    with threads(1):
        state = _gradient(config)
        return tuple(_run(dataclasses.replace(config, step=rule), state) for rule in rules)


@dataclass(frozen=True)
class _Gradient:
    """The learner's state after computing its gradient: the passes over the codes, the start, the direction."""

    views: object  # () -> iterable of block views
    queries: torch.Tensor  # (2, m) at the start
    direction: torch.Tensor  # (2, m): the step is q + kappa * direction
    stats: HeadStats
    at_pair: torch.Tensor  # (2 positions, m): the codes of the hidden pair


def _gradient(config: StepConfig) -> _Gradient:
    """The start and the (population or empirical) gradient direction of ``config``."""
    model, pair, device = config.model, config.pair, torch.device(config.device)
    d, c0, c1 = model.d, *model.readout
    codes = model.codes
    q = model.initial_queries().to(device)
    at_pair = _rows(codes, pair).to(device)
    if config.n is None:
        # The tied model's certified rule reads the codes once where they do not all fit
        # (_after_in_direction_pass): keeping some of them would only cost memory.
        once = model.tied and config.step == "certified" and d > SCAN_UP_TO and not bool(q.any())
        views = code_views(codes, device, partial=not once)
        stats, grad = start_and_gradient(views, q, pair, q @ at_pair.T, c0, c1)
        return _Gradient(views, q, -(d**2 / c1) * grad, stats, at_pair)
    return _empirical_gradients(config, [config.n])[0]


def _empirical_gradients(config: StepConfig, sample_sizes: list[int]) -> list[_Gradient]:
    """The learner's state for the first ``n`` samples of the stream, for every ``n`` of ``sample_sizes`` (one pass)."""
    return [states[0] for states in _shared_stream_gradients([config], sample_sizes)]


def _shared_stream_gradients(configs: list[StepConfig], sample_sizes: list[int]) -> list[list[_Gradient]]:
    """``[n][config]``: the states of several starts of one task on the first ``n`` samples of one stream (one pass).

    The configs differ at most in their model's start (:func:`learning_curves` checks it); the samples' pass
    computes every start's gradient at once.
    """
    config = configs[0]
    model, pair, device = config.model, config.pair, torch.device(config.device)
    d, c0, c1 = model.d, *model.readout
    dense = model.codes.dense(device=device)
    at_pair = dense[list(pair)]
    dense_view = BlockView(0, d, model.m, model.m, 1.0, rows=dense)

    def views():
        return [dense_view]

    starts = [c.model.initial_queries().to(device) for c in configs]
    stats = [head_stats(views, q, pair, q @ at_pair.T) for q in starts]
    scores = starts[0] @ dense.T if len(configs) == 1 else torch.stack([q @ dense.T for q in starts])
    score_grads = score_gradients(scores, pair, (c0, c1), model.normaliser, sample_sizes, config.data_seed)
    if len(configs) == 1:
        score_grads = [g.unsqueeze(0) for g in score_grads]
    return [
        [
            _Gradient(views, q, -(d**2 / c1) * (g @ dense), s, at_pair)
            for q, s, g in zip(starts, stats, grads, strict=True)
        ]
        for grads in score_grads
    ]


def _run(config: StepConfig, state: _Gradient | None = None) -> StepResult:
    """The step of ``config`` from its gradient (``state``, computed here unless given)."""
    model, pair, device = config.model, config.pair, torch.device(config.device)
    d, c0, c1 = model.d, *model.readout
    state = _gradient(config) if state is None else state
    views, q, direction, stats, at_pair = state.views, state.queries, state.direction, state.stats, state.at_pair
    keep = d <= KEEP_WEIGHTS
    rule = config.step if isinstance(config.step, str) else "fixed"
    after, kappa, top = _after_in_direction_pass(config, state, keep)
    if after is None:
        if top is None:
            kappa, top = _choose_sharpness(config, views, q, direction, stats, at_pair)
        if not math.isfinite(kappa):  # a tie at the top of a head's direction: nothing certifies, take the lattice step
            kappa, rule = _lattice_fallback(config), "certified (no gap: lattice step)"
        after = after_step(
            views, q, direction, torch.tensor([kappa], dtype=q.dtype, device=device), pair, d, off_pair=True,
            keep_scores=keep,
        )  # fmt: skip
    _refuse_uncertifiable(config, kappa, after)
    q_after = q + kappa * direction
    tied = bool(torch.equal(q_after[0], q_after[1]))
    worst = certificate(
        after.log_weight_u[0], after.log_weight_v[0], after.log_rest[0], after.log_error[0], torch.tensor(tied), model
    )
    off_pair = OffPair(*(getattr(after.off_pair, f.name)[0] for f in dataclasses.fields(OffPair)))  # no deep copy
    parts = pair_deviations(after.log_weight_u[0], after.log_weight_v[0], after.log_rest[0], model.tied)
    mean_after = deviation_loss(parts, off_pair, c1)
    return StepResult(
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
        worst_case=worst,
        mean_loss_before=float(population_loss(stats, c0, c1)),
        mean_loss_after=float(mean_after),
        weights_before=torch.softmax(scores(views, q), -1) if keep else None,
        weights_after=torch.softmax(after.scores, -1) if keep else None,
    )


def _rows(codes: Codes, index: tuple[int, int]) -> torch.Tensor:
    """Two rows of the codes: from the dense matrix when it is small (built once per codes, and
    memoised), else generated from their blocks alone (:meth:`xorlib.codes.Codes.rows`). The same numbers."""
    return codes.dense()[list(index)] if codes.d * codes.m <= SMALL_DENSE else codes.rows(list(index))


def _after_in_direction_pass(config: StepConfig, state: _Gradient, keep: bool):
    r"""The certified rule's step and the summaries after it from one pass over the codes, where it applies.

    The rule needs the direction's top entries before it can take its step, so the summaries after the
    step would need a pass of their own. Instead one pass (:func:`xorlib._candidates.direction_pass`) finds
    the top entries and keeps every position that can matter after any step the rule may take: a lower
    bound on that step follows from lower bounds on the top entries (those seen so far) and from each
    head's largest entry, expected at the hidden positions (looked up first, with the pass's arithmetic).
    The pass checks the expectation; where it fails, or the candidates overflow, the usual pass after the
    step follows (with the step already known). Used for the tied model where the codes are regenerated (not
    all kept: a pass then costs their generation). Its step is set by the gap between the pair and the largest
    other entry, so after it every other position lies far below the top and few remain candidates (0.2% at
    d = 10^8). The split model's step is set by each head's own gap, often to a position off the pair: there
    the positions within 50 e-folds after the step are a sixth of all (measured at d = 10^8), and it keeps
    the separate pass. The step is the rule's own, from the pass's top entries:
    the pair only tells where to look first. Returns ``(after, kappa, top)``, ``after`` ``None`` when the
    usual pass is needed (``kappa`` and ``top`` then ``None`` too if this path does not apply).
    """
    model, pair, d = config.model, config.pair, config.model.d
    views, q, direction, stats = state.views, state.queries, state.direction, state.stats
    applies = model.tied and config.step == "certified" and isinstance(views, CodeSource) and views.codes.packed
    if not applies or keep or d <= SCAN_UP_TO or views.keeps_all:
        return None, None, None
    H = 1 if torch.equal(q[0], q[1]) and torch.equal(direction[0], direction[1]) else 2
    rows = [views.row_view(position) for position in pair]
    pair_direction = torch.cat([Lookup(direction[:H])(row) for row in rows], dim=1)  # (H, 2): t at u, v
    pair_scores = torch.cat([Lookup(q[:H])(row) for row in rows], dim=1)
    assumed = pair_direction.amax(1)  # each head's largest entry, expected at the pair
    numerator = math.log((d - 2) / (2 * tied_rest_target(config.epsilon)))

    def kappa_floor(values: torch.Tensor) -> float:
        """The rule's step is ``numerator / (t(2) - t(3))``, and ``t(2) - t(3) <= t(1) - (a lower bound on t(3))``."""
        if values.shape[1] < 3 or float(assumed[0] - values[0, 2]) <= 0:
            return 0.0
        return numerator / float(assumed[0] - values[0, 2])

    found = direction_pass(views, q, direction, pair, kappa_floor, d)
    top = found.values.expand(2, -1) if H == 1 else found.values
    kappa = _rule_kappa(config, top, stats)
    if not torch.equal(found.values[:, 0], assumed) or not math.isfinite(kappa):
        return None, kappa, top
    if found.candidates is None or kappa < found.floor or found.neglected > NEGLECTED_AT_MOST:
        return None, kappa, top
    after = after_from_candidates(found, q, direction, kappa, pair, pair_scores, pair_direction, d, views.scale)
    return after, kappa, top


def _rule_kappa(config: StepConfig, values: torch.Tensor, stats: HeadStats) -> float:
    """The certified rule's step from the direction's top three entries ``(2, 3)`` (``d > SCAN_UP_TO`` for the tied model)."""
    d, epsilon = config.model.d, config.epsilon
    if not config.model.tied:
        return split_step_from_gaps(d, values[:, 0] - values[:, 1], stats.smax - stats.smin, epsilon)
    gap = float(values[0, 1] - values[0, 2])
    if gap <= 0:
        return math.inf
    return math.log((d - 2) / (2 * tied_rest_target(epsilon))) / gap


def _lattice_fallback(config: StepConfig) -> float:
    """The lattice step of the tied rule, for a certified rule that found no gap; refused for codes without a lattice."""
    model = config.model
    margin_step = model.codes.margin_step
    if not math.isfinite(margin_step):
        raise ValueError(
            f"the certified rule found no gap between the two largest entries of a head's direction (code_kind = "
            f"{model.code_kind!r}, m = {model.m}), and {model.code_kind} codes have no lattice step to fall back on: "
            "use balanced or iid codes, a larger m, or a fixed sharpness (step=kappa)"
        )
    return tied_sharpness(model.d, margin_step, config.epsilon)


def _refuse_uncertifiable(config: StepConfig, kappa: float, after) -> None:
    """Refuse a step whose scores float64 cannot certify (the rounding allowance would swamp the certificate)."""
    biggest, allowance = float(after.biggest.max()), float(after.log_error.max())
    if not math.isfinite(allowance) or not math.isfinite(biggest) or allowance > MAX_LOG_ERROR:
        fraction = MAX_LOG_ERROR / allowance if math.isfinite(allowance) and allowance > 0 else 0.0
        largest = kappa * fraction
        reach = biggest * fraction if math.isfinite(biggest) else 0.0
        how = "the certified rule chose" if isinstance(config.step, str) else "step ="
        raise ValueError(
            f"{how} kappa = {kappa:.3g}, which moves the scores to {biggest:.3g} in magnitude, beyond the "
            f"{reach:.3g} that float64 certifies: steps up to about kappa = {largest:.3g} can be "
            f"certified here; lower sigma (now {config.model.sigma:g}) or pass step=kappa with kappa <= "
            f"{min(largest, 1e12):.3g}"
        )


def _choose_sharpness(config: StepConfig, views, q, direction, stats, at_pair) -> tuple[float, torch.Tensor | None]:
    """The sharpness of the configured rule (``inf`` if the certified rule finds no gap), and the direction's top entries."""
    model, d, epsilon = config.model, config.model.d, config.epsilon
    if not isinstance(config.step, str):
        return float(config.step), None
    if config.step == "lattice":
        return tied_sharpness(d, model.codes.margin_step, epsilon), None
    values, index = top_scores(views, direction, 3)
    guess = _rule_kappa(config, values, stats)
    if not model.tied or not math.isfinite(guess) or d > SCAN_UP_TO:
        return guess, values
    # Tied: the believed pair is the two largest entries; the margin form gives the scale of the scan.
    believed = tuple(sorted(int(i) for i in index[0, :2]))
    kappas = torch.logspace(math.log10(guess) - 3, math.log10(guess) + 1, SCAN_POINTS, dtype=q.dtype)
    after = after_step(views, q, direction, kappas, believed, d, top=False)
    tied = torch.tensor(bool(torch.equal(direction[0], direction[1])))
    own = certificate(after.log_weight_u, after.log_weight_v, after.log_rest, after.log_error, tied, model).upper
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


def worst_case_curve(config: StepConfig, kappas: tuple[float, ...]) -> WorstCaseCurve:
    """The certified worst case for every sharpness in ``kappas``, from one gradient: one pass over the positions."""
    kappas = torch.tensor(kappas, dtype=torch.float64)
    with threads(1):
        state = _gradient(config)
        pair, model = config.pair, config.model
        after = after_step(
            state.views, state.queries, state.direction, kappas.to(state.queries.device), pair, model.d
        )  # fmt: skip
        tied = torch.tensor(bool(torch.equal(state.direction[0], state.direction[1])) and model.start == "zero")
        worst = certificate(after.log_weight_u, after.log_weight_v, after.log_rest, after.log_error, tied, model)
    return WorstCaseCurve(kappas=kappas, worst_case=worst, found=after.top_index[..., 0], pair=pair)


def learning_curve(config: StepConfig, sample_sizes: tuple[int, ...]) -> tuple[StepResult, ...]:
    """One step from the first ``n`` samples of one stream, for each ``n`` of ``sample_sizes`` (increasing), in one pass.

    ``config.n`` is ignored; the samples are those of ``config.data_seed``'s stream, so
    each result equals :func:`take_step` with that ``n``, bit for bit (the gradient's histograms add the samples one
    at a time in stream order, whatever the snapshots: ``xorlib._samples``).
    """
    return learning_curves((config,), sample_sizes)[0]


def learning_curves(
    configs: tuple[StepConfig, ...], sample_sizes: tuple[int, ...]
) -> tuple[tuple[StepResult, ...], ...]:
    """:func:`learning_curve` for several starts of one task, ``[config][n]``, in one pass over one stream of samples.

    The configs may differ only in their model's start (``sigma``, ``start``, ``init_seed``): the codes, the pair,
    the samples and the step rule are shared, so the starts see the same samples. ``config.n`` is ignored.
    """
    first = configs[0]
    for other in configs[1:]:
        model = dataclasses.replace(
            other.model, sigma=first.model.sigma, start=first.model.start, init_seed=first.model.init_seed
        )
        if model != first.model or dataclasses.replace(other, model=first.model, n=first.n) != first:
            raise ValueError("configs must differ only in their model's start (sigma, start, init_seed)")
    sizes = list(sample_sizes)
    with threads(1):
        states = _shared_stream_gradients(list(configs), sizes)
        return tuple(
            tuple(_run(dataclasses.replace(config, n=n), at_n[k]) for n, at_n in zip(sizes, states, strict=True))
            for k, config in enumerate(configs)
        )
