r"""Multi-step training of the two-head model, and what "recovered the pair" means.

The one-step theory starts from uniform attention and takes a single, very
large population step. Practitioners instead start from a random query, use
Adam with a small learning rate and run many full-batch steps (the paper's
authors used Adam at ``lr=0.1``, full batch). This module does the latter,
with either gradient:

* ``gradient="population"``: the exact population gradient of
  :func:`xorlib.gradient.population_gradient` (no sampling noise);
* ``gradient="empirical"``: the exact gradient of the mean loss on one fixed,
  seeded batch of ``n`` samples (full batch, as in the authors' code), in
  closed form like :func:`xorlib.gradient.empirical_gradient`.

The gradient is written into ``.grad`` and a stock :mod:`torch.optim`
optimiser (Adam or plain SGD) takes the step, so the update rule is exactly
PyTorch's. Several seeds train at once as a leading batch dimension: Adam and
SGD act coordinate by coordinate, so a batch of ``B`` seeds is ``B``
independent runs.

**Recovery** (:func:`recovered`) is a certified, per-model criterion; see its
docstring. ``steps_to_recovery`` is the first step count ``t`` (``t = 0`` is
the initialisation) at which it holds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from tqdm.auto import tqdm

from ._runtime import single_threaded
from ._validate import check_choice, check_device, check_float, check_int, check_pair, check_seed, check_tensor
from .attention import ATTENTION_KINDS, attention_weights, scores_vjp
from .codes import CODE_KINDS, positional_codes
from .data import sample_inputs
from .gradient import population_grad_weights, population_loss_weights, worst_case_loss
from .model import INIT_KINDS, READOUTS, initial_queries, readout_constants

__all__ = [
    "GRADIENTS",
    "OPTIMIZERS",
    "TrainResult",
    "data_seed",
    "recovered",
    "recovered_mask",
    "single_threaded",
    "train_attention",
    "train_attention_seeds",
]

OPTIMIZERS = ("adam", "sgd")
GRADIENTS = ("population", "empirical")

#: Worst-case loss below which every input is classified correctly: for
#: :math:`y = \pm 1`, :math:`\tfrac12 (f - y)^2 < \tfrac12 \iff |f - y| < 1 \iff \operatorname{sign} f = y`.
SIGN_CORRECT_LOSS = 0.5


@dataclass(frozen=True)
class TrainResult:
    r"""The record of one training run.

    Attributes
    ----------
    population_loss
        Shape ``(T + 1,)``: the exact population loss after ``t`` steps, ``t = 0..T``
        (entry 0 is the initialisation). CPU, float64.
    worst_case_loss
        Shape ``(T + 1,)``: a certified upper bound on :math:`\max_x \ell(x)` over all
        :math:`2^d` inputs after ``t`` steps (:func:`xorlib.gradient.worst_case_loss`,
        exact for tied heads once the pair carries most of the mass).
    train_loss
        Shape ``(T + 1,)``: the mean loss on the training batch (``gradient="empirical"``),
        else ``None``.
    steps_to_recovery
        First ``t`` at which :func:`recovered` holds, or ``None`` if it never did.
    queries
        Final queries, shape ``(2, m)``, on the training device.
    weights
        Final attention weights, shape ``(2, d)``, on the training device.
    """

    population_loss: torch.Tensor
    worst_case_loss: torch.Tensor
    train_loss: torch.Tensor | None
    steps_to_recovery: int | None
    queries: torch.Tensor
    weights: torch.Tensor

    @property
    def steps_run(self) -> int:
        """Number of optimiser steps taken (fewer than ``steps`` if stopped at recovery)."""
        return int(self.population_loss.shape[0]) - 1


def _check_bool(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}")
    return value


def _check_weights(weights: object) -> torch.Tensor:
    weights = check_tensor("weights", weights, ndim=(2, 3))
    if weights.shape[-2] != 2:
        raise ValueError(f"weights must have shape (..., 2, d) for the two heads, got {tuple(weights.shape)}")
    return weights


def recovered_mask(
    weights: torch.Tensor,
    pair: tuple[int, int],
    readout_kind: str = "xor",
    *,
    worst_upper: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""Batched :func:`recovered`: weights of shape ``(2, d)`` or ``(B, 2, d)``, result of shape ``()`` or ``(B,)``.

    ``worst_upper`` may pass the already computed ``worst_case_loss(weights, pair, readout_kind).upper``.
    """
    weights = _check_weights(weights)
    d = weights.shape[-1]
    if d < 3:
        raise ValueError(f"recovery needs at least one position outside the pair, so d >= 3; got d = {d}")
    u, v = check_pair("pair", pair, d)
    check_choice("readout_kind", readout_kind, READOUTS)
    magnitude = weights.to(torch.float64).abs()
    on_u, on_v = magnitude[..., u], magnitude[..., v]  # (..., 2)
    others = magnitude.clone()
    others[..., [u, v]] = 0.0
    top_other = others.amax(-1)
    rest = others.sum(-1)
    on_top = (torch.maximum(on_u, on_v) > top_other).all(-1)
    most_mass = (on_u + on_v > rest).all(-1)
    if worst_upper is None:
        worst_upper = worst_case_loss(weights, (u, v), readout_kind).upper
    return on_top & most_mass & (worst_upper < SIGN_CORRECT_LOSS)


def recovered(weights: torch.Tensor, pair: tuple[int, int], readout_kind: str = "xor") -> bool:
    r"""Whether a model with head weights ``weights`` (shape ``(2, d)``) has recovered the pair.

    Write :math:`(u, v) = (i^*, j^*)` and, for head :math:`h`,
    :math:`R_h = \sum_{k \notin \{u, v\}} |\alpha_{h,k}|` (the mass elsewhere). The pair is
    recovered when all three hold:

    1. **The pair holds the top attention.** Readout ``"xor"`` (both heads should
       attend to both positions): in each head, :math:`|\alpha_{h,u}|` and
       :math:`|\alpha_{h,v}|` both exceed every :math:`|\alpha_{h,k}|`,
       :math:`k \notin \{u, v\}`. Readout ``"product"`` (the heads should split the
       pair): one head's largest weight is on :math:`u` and the other's on :math:`v`.
    2. **The pair carries most of the mass**: :math:`|\alpha_{h,u}| + |\alpha_{h,v}| > R_h`
       in each head (more than all other positions together; this is also when
       :func:`xorlib.gradient.worst_case_loss` is exact for tied heads).
    3. **Every input is classified correctly, certified**: the worst-case loss
       bound is below :math:`\tfrac12`, i.e. :math:`\operatorname{sign} f(x) = y` on all
       :math:`2^d` inputs. Without this, a "trap" in which both heads collapse
       onto one relevant position (:math:`f \approx -1` for every input) would pass 1 and 2.
    """
    weights = _check_weights(weights)
    if weights.ndim != 2:
        raise ValueError(f"recovered takes the weights of one model, shape (2, d); got {tuple(weights.shape)}")
    return bool(recovered_mask(weights, pair, readout_kind))


def data_seed(seed: int) -> int:
    """The seed of the training batch of run ``seed`` (distinct from the seed of its initialisation)."""
    seed = check_seed("seed", seed)
    return (seed * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) % 2**63


def _batched_empirical(
    scores: torch.Tensor,
    weights: torch.Tensor,
    codes: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    attention: str,
    readout_kind: str,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Mean batch loss and its query gradient for ``B`` models with their own batches.

    Same closed form as :func:`xorlib.gradient.empirical_gradient`, with a
    leading seed axis: ``weights`` ``(B, 2, d)``, ``x`` ``(B, n, d)``, ``y`` ``(B, n)``.
    """
    c0, c1 = readout_constants(readout_kind)
    z = torch.einsum("bnd,bhd->bnh", x, weights)
    residual = c0 - c1 * z[..., 0] * z[..., 1] - y
    pull = (-c1 / x.shape[1]) * residual.unsqueeze(-1) * z.flip(-1)
    grad_weights = torch.einsum("bnh,bnd->bhd", pull, x)
    grad = scores_vjp(scores, weights, grad_weights, attention) @ codes
    return 0.5 * (residual**2).mean(-1), grad


def _check_code_seeds(code_seed: object) -> int | tuple[int, ...]:
    if isinstance(code_seed, (list, tuple)):
        if not code_seed:
            raise ValueError("code_seed must be a seed or a non-empty sequence of seeds")
        return tuple(check_seed(f"code_seed[{k}]", c) for k, c in enumerate(code_seed))
    return check_seed("code_seed", code_seed)


def _make_optimizer(name: str, parameter: torch.nn.Parameter, lr: float) -> torch.optim.Optimizer:
    if name == "adam":
        return torch.optim.Adam([parameter], lr=lr)
    return torch.optim.SGD([parameter], lr=lr)


def _validate_common(
    d: object,
    pair: object,
    m: object,
    attention: object,
    readout_kind: object,
    optimizer: object,
    lr: object,
    steps: object,
    gradient: object,
    n: object,
    init: object,
    init_scale: object,
    code_seed: object,
    code_kind: object,
    stop_when_recovered: object,
    progress: object,
    device: object,
) -> dict[str, object]:
    d = check_int("d", d, minimum=3)
    out: dict[str, object] = {
        "d": d,
        "pair": check_pair("pair", pair, d),
        "attention": check_choice("attention", attention, ATTENTION_KINDS),
        "readout_kind": check_choice("readout_kind", readout_kind, READOUTS),
        "optimizer": check_choice("optimizer", optimizer, OPTIMIZERS),
        "lr": check_float("lr", lr, minimum=0.0, strict_minimum=True),
        "steps": check_int("steps", steps, minimum=0, maximum=10**7),
        "gradient": check_choice("gradient", gradient, GRADIENTS),
        "init": check_choice("init", init, INIT_KINDS),
        "init_scale": check_float("init_scale", init_scale, minimum=0.0, maximum=1e3),
        "code_seed": _check_code_seeds(code_seed),
        "code_kind": check_choice("code_kind", code_kind, CODE_KINDS),
        "stop_when_recovered": _check_bool("stop_when_recovered", stop_when_recovered),
        "progress": _check_bool("progress", progress),
        "device": check_device("device", device),
    }
    if m is not None:
        m = check_int("m", m, minimum=1)
        if out["code_kind"] == "onehot" and m != d:
            raise ValueError(f"m must be d = {d} (or None) for code_kind='onehot', got {m}")
    out["m"] = m
    if out["gradient"] == "empirical":
        if n is None:
            raise ValueError("n (the full-batch sample size) is required for gradient='empirical'")
        out["n"] = check_int("n", n, minimum=1, maximum=10**8)
    else:
        if n is not None:
            raise ValueError(f"n is only used with gradient='empirical'; got n = {n!r} with gradient='population'")
        out["n"] = None
    return out


def _train(
    config: dict[str, object],
    seeds: Sequence[int],
) -> tuple[TrainResult, ...]:
    d, pair = config["d"], config["pair"]
    attention, readout_kind = config["attention"], config["readout_kind"]
    device = config["device"]
    dtype = torch.float64
    code_seeds = config["code_seed"]
    if isinstance(code_seeds, int):
        codes = positional_codes(d, config["m"], kind=config["code_kind"], seed=code_seeds, device=device)
    else:  # one code draw per run: a (B, d, m) stack
        codes = torch.stack(
            [positional_codes(d, config["m"], kind=config["code_kind"], seed=c, device=device) for c in code_seeds]
        )
    m = codes.shape[-1]
    codes_t = codes.transpose(-1, -2)
    start = torch.stack(
        [
            initial_queries(m, init=config["init"], scale=config["init_scale"], seed=s, device=device, dtype=dtype)
            for s in seeds
        ]
    )
    x = y = None
    if config["gradient"] == "empirical":
        x = torch.stack([sample_inputs(config["n"], d, seed=data_seed(s), device=device, dtype=dtype) for s in seeds])
        y = -x[..., pair[0]] * x[..., pair[1]]
    parameter = torch.nn.Parameter(start.clone())
    optimiser = _make_optimizer(config["optimizer"], parameter, config["lr"])
    steps, batch = config["steps"], len(seeds)
    history = {key: torch.full((steps + 1, batch), math.nan, dtype=dtype) for key in ("pop", "worst", "train")}
    recovered_at = [None] * batch
    final_queries = [None] * batch
    final_weights = [None] * batch
    ended = [steps] * batch

    def record(t: int, weights: torch.Tensor, train_loss: torch.Tensor | None) -> torch.Tensor:
        worst = worst_case_loss(weights, pair, readout_kind).upper
        history["pop"][t] = population_loss_weights(weights, pair, readout_kind).cpu()
        history["worst"][t] = worst.cpu()
        if train_loss is not None:
            history["train"][t] = train_loss.cpu()
        return recovered_mask(weights, pair, readout_kind, worst_upper=worst).cpu()

    bar = tqdm(range(steps + 1), disable=not config["progress"], desc=f"{config['optimizer']} d={d}", leave=False)
    for t in bar:
        with torch.no_grad():
            queries = parameter.detach()
            scores = queries @ codes_t
            weights = attention_weights(scores, attention)
            if x is None:
                train_loss = None
                grad = scores_vjp(scores, weights, population_grad_weights(weights, pair, readout_kind), attention)
                grad = grad @ codes
            else:
                train_loss, grad = _batched_empirical(scores, weights, codes, x, y, attention, readout_kind)
            done_now = record(t, weights, train_loss)
            if not bool(torch.isfinite(grad).all()) or not bool(torch.isfinite(history["pop"][t]).all()):
                raise ValueError(
                    f"training diverged at step {t} (non-finite loss or gradient): lower lr = {config['lr']}"
                )
        for b in range(batch):
            if recovered_at[b] is None and bool(done_now[b]):
                recovered_at[b] = t
                if config["stop_when_recovered"]:
                    ended[b] = t
                    final_queries[b], final_weights[b] = queries[b].clone(), weights[b].clone()
        if config["stop_when_recovered"] and all(r is not None for r in recovered_at):
            break
        if t == steps:
            break
        parameter.grad = grad.clone()
        optimiser.step()
    bar.close()

    results = []
    for b in range(batch):
        if final_queries[b] is None:
            final_queries[b], final_weights[b] = queries[b].clone(), weights[b].clone()
        stop = ended[b] + 1
        results.append(
            TrainResult(
                population_loss=history["pop"][:stop, b].clone(),
                worst_case_loss=history["worst"][:stop, b].clone(),
                train_loss=None if x is None else history["train"][:stop, b].clone(),
                steps_to_recovery=recovered_at[b],
                queries=final_queries[b],
                weights=final_weights[b],
            )
        )
    return tuple(results)


def train_attention(
    d: int,
    pair: tuple[int, int],
    *,
    m: int | None = None,
    attention: str = "softmax",
    readout_kind: str = "xor",
    optimizer: str = "adam",
    lr: float = 0.1,
    steps: int = 2000,
    gradient: str = "population",
    n: int | None = None,
    init: str = "random",
    init_scale: float = 1.0,
    seed: int = 0,
    code_seed: int = 0,
    code_kind: str = "balanced",
    stop_when_recovered: bool = False,
    progress: bool = False,
    device: str | torch.device = "cpu",
) -> TrainResult:
    r"""Train the two queries of the two-head model for ``steps`` full-batch steps.

    Each step computes the gradient :math:`g_t = \nabla_q L(q_t)` in closed form
    (population, or on the fixed batch) and lets ``torch.optim`` apply it:
    Adam (default hyper-parameters but ``lr``) or plain SGD,
    :math:`q_{t+1} = q_t - \eta g_t`.

    Parameters
    ----------
    d, pair
        Number of positions (``d >= 3``) and the relevant pair.
    m, code_kind, code_seed
        Code dimension (``None`` for the default :math:`\lceil 4\log_2 d\rceil`), kind and
        seed of :func:`xorlib.codes.positional_codes`.
    attention, readout_kind
        Normaliser (:data:`xorlib.attention.ATTENTION_KINDS`) and frozen readout.
    optimizer, lr
        ``"adam"`` or ``"sgd"``, and its learning rate (``> 0``). For SGD the population
        gradient at uniform attention is of order :math:`1/d^2`, so a useful SGD rate is
        of order :math:`d^2` (see :func:`xorlib.gradient.lr_for_sharpness`); Adam's steps
        are scale-free.
    steps
        Maximum number of optimiser steps (``0`` only evaluates the initialisation).
    gradient, n
        ``"population"`` (exact, ``n`` must be ``None``) or ``"empirical"``: the full-batch
        gradient on ``n`` samples drawn once with seed :func:`data_seed` ``(seed)``.
    init, init_scale, seed
        Initial queries from :func:`xorlib.model.initial_queries` (``"random"``: each score
        has standard deviation ``init_scale``; ``"zero"``: uniform attention).
    stop_when_recovered
        Stop at the first step at which :func:`recovered` holds.
    progress
        Show a tqdm progress bar over steps.
    device
        Where to train; the loss histories are returned on the CPU.

    Returns
    -------
    TrainResult

    Raises
    ------
    ValueError
        For an argument out of range, or if training diverges (non-finite loss).
    """
    config = _validate_common(
        d, pair, m, attention, readout_kind, optimizer, lr, steps, gradient, n, init, init_scale,
        check_seed("code_seed", code_seed), code_kind, stop_when_recovered, progress, device,
    )  # fmt: skip
    return _train(config, [check_seed("seed", seed)])[0]


def train_attention_seeds(
    d: int,
    pair: tuple[int, int],
    *,
    seeds: Sequence[int],
    m: int | None = None,
    attention: str = "softmax",
    readout_kind: str = "xor",
    optimizer: str = "adam",
    lr: float = 0.1,
    steps: int = 2000,
    gradient: str = "population",
    n: int | None = None,
    init: str = "random",
    init_scale: float = 1.0,
    code_seed: int | Sequence[int] = 0,
    code_kind: str = "balanced",
    stop_when_recovered: bool = False,
    progress: bool = False,
    device: str | torch.device = "cpu",
) -> tuple[TrainResult, ...]:
    """:func:`train_attention` for several seeds at once, batched as a leading tensor dimension.

    Result ``k`` is the run of ``train_attention(..., seed=seeds[k])``: its own
    initialisation and, for ``gradient="empirical"``, its own batch. ``code_seed`` is one
    seed (all runs share the codes) or one per run (run ``k`` uses codes ``code_seed[k]``,
    same as ``train_attention(..., code_seed=code_seed[k])``). With
    ``stop_when_recovered`` each run's record ends at its own recovery, while the batch
    goes on until all have recovered.
    """
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence) or len(seeds) == 0:
        raise TypeError(f"seeds must be a non-empty sequence of integers, got {seeds!r}")
    seed_list = [check_seed(f"seeds[{k}]", s) for k, s in enumerate(seeds)]
    if isinstance(code_seed, (list, tuple)) and len(code_seed) != len(seed_list):
        raise ValueError(f"code_seed must be one seed or one per run ({len(seed_list)}), got {len(code_seed)}")
    config = _validate_common(
        d, pair, m, attention, readout_kind, optimizer, lr, steps, gradient, n, init, init_scale, code_seed,
        code_kind, stop_when_recovered, progress, device,
    )  # fmt: skip
    return _train(config, seed_list)


# ---------------------------------------------------------------------------
# k-sparse parity with k heads (the setting of the paper's first version)
# ---------------------------------------------------------------------------
#
# Task: y = -prod_{i in S} x_i for a support S of k distinct positions (k = 2 is the
# book's sparse XOR). Model: k softmax heads, head h has its own query q_h in R^m over
# the same codes, z_h = sum_i alpha_{h,i} x_i, and the frozen readout is
# f = -prod_h z_h. The model is exact when the heads split S one to one, each
# head putting all its mass on its own support bit. A tied (symmetric)
# initialisation can never split the heads: the gradient is symmetric in them.

#: Largest k for which :func:`parity_population_loss` has a closed form.
MAX_PARITY_K = 3


def parity_support(d: int, k: int, *, seed: int = 0) -> tuple[int, ...]:
    """Draw the support: ``k`` distinct positions of ``range(d)``, sorted, uniformly."""
    d = check_int("d", d, minimum=2)
    k = check_int("k", k, minimum=1, maximum=d)
    generator = torch.Generator().manual_seed(check_seed("seed", seed))
    return tuple(sorted(torch.randperm(d, generator=generator)[:k].tolist()))


def _check_support(support: object, d: int) -> tuple[int, ...]:
    if not isinstance(support, (tuple, list)) or not support:
        raise TypeError(f"support must be a non-empty tuple of distinct positions in [0, {d}), got {support!r}")
    positions = tuple(check_int(f"support[{k}]", s, minimum=0, maximum=d - 1) for k, s in enumerate(support))
    if len(set(positions)) != len(positions):
        raise ValueError(f"support must hold distinct positions, got {positions}")
    return positions


def _check_parity_weights(weights: object, support: object) -> tuple[torch.Tensor, tuple[int, ...]]:
    weights = check_tensor("weights", weights, ndim=(2, 3))
    support = _check_support(support, weights.shape[-1])
    if weights.shape[-2] != len(support):
        raise ValueError(
            f"weights must have one head per support bit, shape (..., {len(support)}, d); got {tuple(weights.shape)}"
        )
    return weights, support


def parity_labels(x: torch.Tensor, support: tuple[int, ...]) -> torch.Tensor:
    r"""Labels :math:`y = -\prod_{i \in S} x_i` for the rows of ``x`` (shape ``(..., n, d)``)."""
    x = check_tensor("x", x, ndim=(2, 3))
    support = _check_support(support, x.shape[-1])
    return -x[..., list(support)].prod(-1)


def parity_predictions(weights: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    r"""Predictions :math:`f = -\prod_h z_h`, :math:`z_h = \sum_i \alpha_{h,i}x_i`: weights ``(k, d)``, ``x`` ``(n, d)``."""
    weights = check_tensor("weights", weights, ndim=2)
    x = check_tensor("x", x, ndim=2, last_dim=weights.shape[-1])
    return -(x @ weights.T.to(x.dtype)).prod(-1)


def parity_population_loss(weights: torch.Tensor, support: tuple[int, ...]) -> torch.Tensor:
    r"""Exact population loss :math:`\tfrac12\mathbb{E}[(f - y)^2]` of the k-head model, for :math:`k \le 3`.

    With :math:`f y = \prod_h z_h \prod_{i\in S} x_i`,
    :math:`L = \tfrac12\bigl(\mathbb{E}\prod_h z_h^2 - 2\,\mathrm{perm}(A) + 1\bigr)`, where
    :math:`A_{h,j} = \alpha_{h,s_j}` (only index tuples that are a permutation of :math:`S`
    survive :math:`\mathbb{E}[x_{i_1}\cdots x_{i_k}\prod_S x]`). Writing :math:`n_h = \|\alpha_h\|^2`
    and :math:`z_h^2 = n_h + Q_h`, :math:`Q_h = \sum_{i \ne j}\alpha_{h,i}\alpha_{h,j}x_ix_j`:

    * :math:`\mathbb{E}[Q_gQ_h] = 2\bigl(\langle\alpha_g,\alpha_h\rangle^2 - \sum_i\alpha_{g,i}^2\alpha_{h,i}^2\bigr)`;
    * :math:`\mathbb{E}[Q_1Q_2Q_3] = 8\sum_{a,b,c \text{ distinct}} u_a v_b w_c` (the three edges must
      form a triangle) with :math:`u = \alpha_1\odot\alpha_3`, :math:`v = \alpha_1\odot\alpha_2`,
      :math:`w = \alpha_2\odot\alpha_3`, by inclusion-exclusion
      :math:`UVW - (uv)W - (uw)V - (vw)U + 2\sum uvw`;

    so :math:`\mathbb{E}\prod_{h\le3} z_h^2 = n_1n_2n_3 + \sum_{\{g,h\}} n_l\,\mathbb{E}[Q_gQ_h] + \mathbb{E}[Q_1Q_2Q_3]`
    (:math:`l` the third head). :math:`O(d)` per model, differentiable.

    Parameters
    ----------
    weights
        Shape ``(k, d)`` or ``(B, k, d)``, one head per support bit.
    support
        The ``k`` support positions.
    """
    weights, support = _check_parity_weights(weights, support)
    k = len(support)
    if k > MAX_PARITY_K:
        raise ValueError(f"the closed form covers k <= {MAX_PARITY_K} heads, got k = {k}; use gradient='empirical'")
    a = [weights[..., h, :] for h in range(k)]
    on_support = weights[..., list(support)]  # (..., k, k): A[h, j] = alpha_{h, s_j}
    norms = [(w * w).sum(-1) for w in a]

    def pair_term(g: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        return 2 * ((g * h).sum(-1) ** 2 - (g * g * h * h).sum(-1))

    if k == 1:
        second, cross = norms[0], on_support[..., 0, 0]
    elif k == 2:
        second = norms[0] * norms[1] + pair_term(a[0], a[1])
        cross = on_support[..., 0, 0] * on_support[..., 1, 1] + on_support[..., 0, 1] * on_support[..., 1, 0]
    else:
        u, v, w = a[0] * a[2], a[0] * a[1], a[1] * a[2]
        big_u, big_v, big_w = u.sum(-1), v.sum(-1), w.sum(-1)
        triangle = (
            big_u * big_v * big_w
            - (u * v).sum(-1) * big_w
            - (u * w).sum(-1) * big_v
            - (v * w).sum(-1) * big_u
            + 2 * (u * v * w).sum(-1)
        )
        second = (
            norms[0] * norms[1] * norms[2]
            + norms[2] * pair_term(a[0], a[1])
            + norms[1] * pair_term(a[0], a[2])
            + norms[0] * pair_term(a[1], a[2])
            + 8 * triangle
        )
        cross = sum(
            on_support[..., 0, p[0]] * on_support[..., 1, p[1]] * on_support[..., 2, p[2]]
            for p in ((0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0))
        )
    return 0.5 * (second - 2 * cross + 1.0)


def parity_worst_case_bound(weights: torch.Tensor, support: tuple[int, ...]) -> torch.Tensor:
    r"""A certified upper bound on :math:`\max_x \ell(x)` for softmax heads (non-negative weights summing to 1).

    If head :math:`h` puts weight :math:`w_h > \tfrac12` on its own support bit
    :math:`s_{\sigma(h)}` (:math:`\sigma` a bijection), then
    :math:`z_h x_{s_{\sigma(h)}} \in [2w_h - 1, 1]`, so :math:`f y \in [\prod_h(2w_h - 1), 1]` and
    :math:`\ell \le \tfrac12\bigl(1 - \prod_h (2w_h - 1)\bigr)^2 < \tfrac12`: every input is
    classified correctly. Otherwise the bound is the trivial :math:`\tfrac12 \cdot 2^2 = 2`.
    """
    weights, support = _check_parity_weights(weights, support)
    on_support = weights[..., list(support)].to(torch.float64)  # (..., k, k)
    top, position = on_support.max(-1)  # each head's largest support weight and which bit
    k = len(support)
    bijection = torch.stack([(position == j).sum(-1) == 1 for j in range(k)], dim=-1).all(-1)
    majority = (top > 0.5).all(-1)
    product = (2 * top - 1).clamp(min=0.0).prod(-1)
    certified = 0.5 * (1 - product) ** 2
    return torch.where(bijection & majority, certified, torch.full_like(certified, 2.0))


def parity_recovered_mask(weights: torch.Tensor, support: tuple[int, ...]) -> torch.Tensor:
    r"""Whether the heads split the support one to one, each with more than half its mass on its own bit.

    This certifies :math:`\operatorname{sign} f(x) = y` on all :math:`2^d` inputs
    (:func:`parity_worst_case_bound` below :math:`\tfrac12`).
    """
    return parity_worst_case_bound(weights, support) < SIGN_CORRECT_LOSS


@dataclass(frozen=True)
class ParityResult:
    """The record of one k-head training run (histories on the CPU, shape ``(T + 1,)``)."""

    population_loss: torch.Tensor
    worst_case_bound: torch.Tensor
    train_loss: torch.Tensor | None
    steps_to_recovery: int | None
    queries: torch.Tensor
    weights: torch.Tensor


def train_parity_heads_seeds(
    d: int,
    support: tuple[int, ...],
    *,
    seeds: Sequence[int],
    m: int | None = None,
    optimizer: str = "adam",
    lr: float = 0.1,
    steps: int = 1000,
    gradient: str = "population",
    n: int | None = None,
    init_scale: float = 1.0,
    tied: bool = False,
    code_seed: int = 0,
    progress: bool = False,
    device: str | torch.device = "cpu",
) -> tuple[ParityResult, ...]:
    r"""Train the k-head model on k-sparse parity, one run per seed, batched over seeds.

    Queries start random (:func:`xorlib.model.initial_queries` per head, score
    standard deviation ``init_scale``; a symmetric start cannot split the heads) and are
    trained with ``torch.optim`` (Adam or SGD) on the exact population loss
    (:func:`parity_population_loss`, :math:`k \le 3`) or on a fixed batch of ``n`` samples
    (``gradient="empirical"``, any ``k``), gradients by autograd. Softmax attention.

    Returns one :class:`ParityResult` per seed; ``steps_to_recovery`` is the first step at
    which :func:`parity_recovered_mask` holds. ``tied=True`` starts every head from the
    same random query (the symmetric start that one symmetric step implies), to show
    that the heads then never split.
    """
    d = check_int("d", d, minimum=2)
    support = _check_support(support, d)
    k = len(support)
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence) or len(seeds) == 0:
        raise TypeError(f"seeds must be a non-empty sequence of integers, got {seeds!r}")
    seed_list = [check_seed(f"seeds[{j}]", s) for j, s in enumerate(seeds)]
    optimizer = check_choice("optimizer", optimizer, OPTIMIZERS)
    lr = check_float("lr", lr, minimum=0.0, strict_minimum=True)
    steps = check_int("steps", steps, minimum=0, maximum=10**7)
    gradient = check_choice("gradient", gradient, GRADIENTS)
    init_scale = check_float("init_scale", init_scale, minimum=0.0, strict_minimum=True, maximum=1e3)
    progress = _check_bool("progress", progress)
    device = check_device("device", device)
    if gradient == "population":
        if n is not None:
            raise ValueError(f"n is only used with gradient='empirical'; got n = {n!r}")
        if k > MAX_PARITY_K:
            raise ValueError(f"gradient='population' covers k <= {MAX_PARITY_K}, got k = {k}")
    elif n is None:
        raise ValueError("n (the full-batch sample size) is required for gradient='empirical'")
    else:
        n = check_int("n", n, minimum=1, maximum=10**8)
    codes = positional_codes(d, m, seed=check_seed("code_seed", code_seed), device=device)
    m = codes.shape[1]
    start = torch.stack(
        [
            torch.cat(
                [
                    initial_queries(m, init="random", scale=init_scale, seed=s * k + h, device=device)[:1]
                    for h in range(k)
                ]
            )
            for s in seed_list
        ]
    )  # (B, k, m): head h of run s uses seed s*k + h
    if _check_bool("tied", tied):
        start = start[:, :1].expand(-1, k, -1).clone()
    parameter = torch.nn.Parameter(start)
    optimiser = _make_optimizer(optimizer, parameter, lr)
    x = y = None
    if gradient == "empirical":
        x = torch.stack([sample_inputs(n, d, seed=data_seed(s), device=device, dtype=torch.float64) for s in seed_list])
        y = parity_labels(x, support)
    batch = len(seed_list)
    history = {key: torch.full((steps + 1, batch), math.nan, dtype=torch.float64) for key in ("pop", "worst", "train")}
    recovered_at: list[int | None] = [None] * batch
    for t in tqdm(range(steps + 1), disable=not progress, desc=f"{k}-parity d={d}", leave=False):
        weights = torch.softmax(parameter @ codes.T, dim=-1)
        population = parity_population_loss(weights, support) if k <= MAX_PARITY_K else None
        if x is None:
            objective = population
        else:
            f = -torch.einsum("bnd,bhd->bnh", x, weights).prod(-1)
            objective = 0.5 * ((f - y) ** 2).mean(-1)
            history["train"][t] = objective.detach().cpu()
        with torch.no_grad():
            if population is not None:
                history["pop"][t] = population.detach().cpu()
            bound = parity_worst_case_bound(weights.detach(), support)
            history["worst"][t] = bound.cpu()
            for b in range(batch):
                if recovered_at[b] is None and float(bound[b]) < SIGN_CORRECT_LOSS:
                    recovered_at[b] = t
        if t == steps:
            break
        optimiser.zero_grad()
        objective.sum().backward()
        if not bool(torch.isfinite(parameter.grad).all()):
            raise ValueError(f"training diverged at step {t} (non-finite gradient): lower lr = {lr}")
        optimiser.step()
    final = weights.detach()
    return tuple(
        ParityResult(
            population_loss=history["pop"][:, b].clone(),
            worst_case_bound=history["worst"][:, b].clone(),
            train_loss=None if x is None else history["train"][:, b].clone(),
            steps_to_recovery=recovered_at[b],
            queries=parameter.detach()[b].clone(),
            weights=final[b].clone(),
        )
        for b in range(batch)
    )
