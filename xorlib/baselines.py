r"""The feed-forward baseline: a two-layer ReLU network trained by online SGD.

The network is :math:`f(x) = \sum_{k=1}^{W} a_k\,\mathrm{ReLU}(\langle w_k, x\rangle + b_k) + c`
with PyTorch's default initialisation (every weight and bias uniform on
:math:`\pm 1/\sqrt{\text{fan-in}}`). It has :math:`W(d + 2) + 1` trainable
parameters: every hidden unit owns one weight per input position.

Training follows the protocol of Barak et al. (2022): hinge loss
:math:`\max(0, 1 - yf)`, minibatches of 32 *fresh* samples at every step, plain
SGD with learning rate 0.1, and success = 100 % accuracy on 8192 fresh samples,
checked every ``eval_every`` steps.

Many seeds are needed, so :class:`TwoLayerReLU` holds ``models`` independent
networks as a leading tensor dimension, and :func:`train_mlp_ensemble` trains
them together with batched matrix products (``torch.bmm``) and a
hand-written backward pass (checked against autograd in the tests). Network
``k`` of an ensemble seeded ``seed`` is initialised exactly like a single
network seeded ``seed + k``. A network stops training (its parameters freeze)
once it has succeeded.

:func:`one_step_neuron_gradient` is the "one-step FFNN": the gradient of the
hinge loss with respect to one hidden unit's :math:`d` first-layer weights, at
initialisation.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn
from tqdm.auto import tqdm

from ._runtime import single_threaded
from ._validate import check_device, check_float, check_int, check_pair, check_seed, check_tensor
from .data import MAX_ENUMERATION_D, all_inputs, make_generator, random_signs, xor_labels

__all__ = [
    "MLPResult",
    "TwoLayerReLU",
    "hinge_loss",
    "mlp_step_flops",
    "one_step_neuron_gradient",
    "population_neuron_gradient",
    "train_mlp_ensemble",
    "train_mlp_online_sgd",
]


def _fresh_signs(generator: torch.Generator, models: int, rows: int, d: int, device: torch.device) -> torch.Tensor:
    """Uniform +-1 float32 entries of shape (models, rows, d), contiguous."""
    return random_signs(generator, (models, rows, d), device=device).contiguous()


def hinge_loss(f: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    r"""Per-sample hinge loss :math:`\max(0, 1 - yf)`."""
    return torch.clamp(1.0 - y * f, min=0.0)


class TwoLayerReLU(nn.Module):
    r"""One or more independent two-layer ReLU networks :math:`f(x) = a^\top\mathrm{ReLU}(Wx + b) + c`.

    Parameters
    ----------
    d
        Input dimension, ``d >= 2``.
    width
        Hidden units :math:`W`, ``width >= 1``.
    seed
        Seed of the initialisation; network ``k`` uses ``seed + k``.
    device
        Where the parameters live.
    models
        Number of independent networks held as a leading dimension.
    dtype
        Parameter dtype (float32 by default, as in the reference protocol).

    Notes
    -----
    Parameters: ``first`` :math:`(M, W, d)`, ``first_bias`` :math:`(M, W)`,
    ``second`` :math:`(M, W)`, ``second_bias`` :math:`(M,)`. The first layer alone
    holds :math:`Wd` numbers: each hidden unit reads every position through its
    own weight.
    """

    def __init__(
        self,
        d: int,
        width: int,
        *,
        seed: int = 0,
        device: str | torch.device = "cpu",
        models: int = 1,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        self.d = check_int("d", d, minimum=2)
        self.width = check_int("width", width, minimum=1)
        self.models = check_int("models", models, minimum=1)
        seed = check_seed("seed", seed)
        check_seed("seed + models - 1", seed + models - 1)
        device = check_device("device", device)
        first, first_bias, second, second_bias = [], [], [], []
        for k in range(self.models):
            generator = make_generator(seed + k)

            def uniform(*shape: int, fan_in: int, g: torch.Generator = generator) -> torch.Tensor:
                bound = 1.0 / math.sqrt(fan_in)
                return (torch.rand(*shape, generator=g, dtype=torch.float64) * 2 - 1) * bound

            first.append(uniform(self.width, self.d, fan_in=self.d))
            first_bias.append(uniform(self.width, fan_in=self.d))
            second.append(uniform(self.width, fan_in=self.width))
            second_bias.append(uniform(1, fan_in=self.width)[0])
        self.first = nn.Parameter(torch.stack(first).to(device=device, dtype=dtype))
        self.first_bias = nn.Parameter(torch.stack(first_bias).to(device=device, dtype=dtype))
        self.second = nn.Parameter(torch.stack(second).to(device=device, dtype=dtype))
        self.second_bias = nn.Parameter(torch.stack(second_bias).to(device=device, dtype=dtype))

    def parameters_per_model(self) -> int:
        r"""Trainable scalars of one network: :math:`W(d + 2) + 1`."""
        return self.width * (self.d + 2) + 1

    def _as_batched(self, x: torch.Tensor) -> tuple[torch.Tensor, bool]:
        x = check_tensor("x", x, ndim=(2, 3), last_dim=self.d)
        if x.ndim == 2:
            return x.to(self.first.dtype).unsqueeze(0).expand(self.models, *x.shape), True
        if x.shape[0] != self.models:
            raise ValueError(f"x must have shape (models={self.models}, n, d), got {tuple(x.shape)}")
        return x.to(self.first.dtype), False

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        r"""Pre-activations :math:`Wx + b`, shape ``(models, n, width)`` (``x`` is ``(models, n, d)``)."""
        return torch.baddbmm(self.first_bias.unsqueeze(1), x, self.first.transpose(1, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Outputs :math:`f(x)`: ``(n,)`` for one network and ``x`` of shape ``(n, d)``, else ``(models, n)``.

        ``x`` of shape ``(n, d)`` is fed to every network; ``(models, n, d)`` gives each network its own inputs.
        """
        batched, shared = self._as_batched(x)
        f = self._outputs(batched)
        return f[0] if shared and self.models == 1 else f

    def _outputs(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.hidden(x))
        return torch.bmm(h, self.second.unsqueeze(-1)).squeeze(-1) + self.second_bias.unsqueeze(-1)

    @torch.no_grad()
    def hinge_gradients(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        r"""Gradients of the mean hinge loss for each network, by hand (no autograd).

        With :math:`g_f = -y\,\mathbb 1[yf < 1]/B`:
        :math:`\partial/\partial a = h^\top g_f`, :math:`\partial/\partial c = \sum g_f`,
        :math:`g_h = g_f a^\top \odot \mathbb 1[Wx + b > 0]`, :math:`\partial/\partial W = g_h^\top x`,
        :math:`\partial/\partial b = \sum g_h`. ``x`` is ``(models, B, d)``, ``y`` is ``(models, B)``.
        Returns the four gradients in the order of the parameters, and the mean losses ``(models,)``.
        """
        pre = self.hidden(x)
        h = torch.relu(pre)
        f = torch.bmm(h, self.second.unsqueeze(-1)).squeeze(-1) + self.second_bias.unsqueeze(-1)
        margin = y * f
        grad_f = -(y * (margin < 1.0)) / x.shape[1]
        grad_second = torch.bmm(grad_f.unsqueeze(1), h).squeeze(1)
        grad_second_bias = grad_f.sum(-1)
        grad_h = grad_f.unsqueeze(-1) * self.second.unsqueeze(1) * (pre > 0)
        grad_first = torch.bmm(grad_h.transpose(1, 2), x)
        grad_first_bias = grad_h.sum(1)
        loss = torch.clamp(1.0 - margin, min=0.0).mean(-1)
        return grad_first, grad_first_bias, grad_second, grad_second_bias, loss


def mlp_step_flops(d: int, width: int, batch: int) -> int:
    r"""Floating-point operations of one SGD step of one network: :math:`\approx 6BWd + O(BW)`.

    Forward :math:`2BWd` (first layer) + :math:`2BW`; backward :math:`2BWd`
    (weight gradient; the input gradient is not needed) + :math:`O(BW)`;
    update :math:`2W(d+2)`. Counted, not measured: wall time is reported beside it.
    """
    d = check_int("d", d, minimum=2)
    width = check_int("width", width, minimum=1)
    batch = check_int("batch", batch, minimum=1)
    return 4 * batch * width * d + 8 * batch * width + 2 * width * (d + 2) + 2


@dataclass(frozen=True)
class MLPResult:
    r"""The outcome of one online-SGD run.

    Attributes
    ----------
    params
        Trainable parameters :math:`W(d+2)+1`.
    steps_to_success
        First evaluated step count with 100 % accuracy on ``eval_n`` fresh samples, or ``None``.
    samples_to_success
        ``steps_to_success * batch`` (fresh training samples seen), or ``None``.
    wall_time
        Seconds of the whole run, evaluations included (for an ensemble: its time divided by its size).
    train_time
        Seconds spent in SGD steps only (drawing minibatches, gradients, updates), same convention.
    steps
        The evaluated step counts.
    accuracy
        Accuracy on fresh samples at each evaluated step.
    flops_to_success
        Training FLOPs up to success (:func:`mlp_step_flops`), or ``None``.
    """

    params: int
    steps_to_success: int | None
    samples_to_success: int | None
    wall_time: float
    train_time: float
    steps: tuple[int, ...]
    accuracy: tuple[float, ...]
    flops_to_success: int | None


def _labels(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """y = -x_i x_j per network: x (models, n, d), index (models, 2) -> (models, n)."""
    rows = torch.arange(x.shape[0], device=x.device)
    return -x[rows, :, index[:, 0]] * x[rows, :, index[:, 1]]


def train_mlp_ensemble(
    d: int,
    pairs: Sequence[tuple[int, int]],
    *,
    width: int = 128,
    lr: float = 0.1,
    batch: int = 32,
    max_steps: int = 20_000,
    eval_every: int = 100,
    eval_n: int = 8192,
    seed: int = 0,
    progress: bool = False,
    device: str | torch.device = "cpu",
) -> list[MLPResult]:
    r"""Train one network per entry of ``pairs`` (its hidden pair) by online SGD, all at once.

    Network ``k`` is initialised with seed ``seed + k`` and draws its own fresh
    minibatches; after every ``eval_every`` steps each unfinished network is
    evaluated on ``eval_n`` fresh samples, and a network with 100 % accuracy
    stops (its parameters freeze). Training ends when all have succeeded or
    after ``max_steps``.
    """
    d = check_int("d", d, minimum=2)
    width = check_int("width", width, minimum=1)
    lr = check_float("lr", lr, minimum=0.0, strict_minimum=True)
    batch = check_int("batch", batch, minimum=1)
    max_steps = check_int("max_steps", max_steps, minimum=1)
    eval_every = check_int("eval_every", eval_every, minimum=1, maximum=max_steps)
    eval_n = check_int("eval_n", eval_n, minimum=1)
    seed = check_seed("seed", seed)
    device = check_device("device", device)
    if len(pairs) == 0:
        raise ValueError("pairs must name at least one hidden pair")
    index = torch.tensor([check_pair(f"pairs[{k}]", p, d) for k, p in enumerate(pairs)], device=device)
    models = index.shape[0]
    start = time.perf_counter()
    net = TwoLayerReLU(d, width, seed=seed, device=device, models=models)
    generator = make_generator(seed + 1_000_003, device)
    active = torch.ones(models, dtype=torch.bool, device=device)
    success_step: list[int | None] = [None] * models
    steps: list[int] = []
    accuracy: list[list[float]] = []
    params = list(net.parameters())
    train_seconds = 0.0
    with (
        torch.no_grad(),
        single_threaded(),
        tqdm(total=max_steps, desc=f"online SGD (d={d})", disable=not progress, leave=False) as bar,
    ):
        step = 0
        while step < max_steps and bool(active.any()):
            block = min(eval_every, max_steps - step)
            block_start = time.perf_counter()
            x_all = _fresh_signs(generator, models, block * batch, d, device).view(models, block, batch, d)
            y_all = _labels(x_all.view(models, block * batch, d), index).view(models, block, batch)
            mask = active.to(net.first.dtype)
            for t in range(block):
                grads = net.hinge_gradients(x_all[:, t], y_all[:, t])[:4]
                for p, g in zip(params, grads, strict=True):
                    p.sub_(lr * g * mask.view(-1, *([1] * (g.ndim - 1))))
            train_seconds += time.perf_counter() - block_start
            step += block
            bar.update(block)
            # One fresh evaluation set per check, shared by the networks (each has its own pair, hence labels).
            x_eval = _fresh_signs(generator, 1, eval_n, d, device)[0]
            y_eval = -(x_eval[:, index[:, 0]] * x_eval[:, index[:, 1]]).T
            f_eval = net._outputs(x_eval.unsqueeze(0).expand(models, -1, -1))
            correct = (torch.sign(f_eval) == y_eval).double().mean(-1)
            steps.append(step)
            accuracy.append(correct.tolist())
            for k in torch.nonzero(active & (correct == 1.0)).flatten().tolist():
                success_step[k] = step
            active &= correct < 1.0
    seconds = (time.perf_counter() - start) / models
    step_flops = mlp_step_flops(d, width, batch)
    return [
        MLPResult(
            params=net.parameters_per_model(),
            steps_to_success=success_step[k],
            samples_to_success=None if success_step[k] is None else success_step[k] * batch,
            wall_time=seconds,
            train_time=train_seconds / models,
            steps=tuple(steps),
            accuracy=tuple(a[k] for a in accuracy),
            flops_to_success=None if success_step[k] is None else success_step[k] * step_flops,
        )
        for k in range(models)
    ]


def train_mlp_online_sgd(
    d: int,
    pair: tuple[int, int],
    *,
    width: int = 128,
    lr: float = 0.1,
    batch: int = 32,
    max_steps: int = 20_000,
    eval_every: int = 100,
    eval_n: int = 8192,
    seed: int = 0,
    progress: bool = False,
    device: str | torch.device = "cpu",
) -> MLPResult:
    r"""Train one two-layer ReLU network on sparse XOR by online SGD (Barak et al.'s protocol).

    Parameters
    ----------
    d
        Input dimension.
    pair
        The hidden pair :math:`(i^*, j^*)`.
    width
        Hidden units.
    lr, batch
        SGD learning rate and minibatch size (fresh samples every step).
    max_steps
        Step budget.
    eval_every, eval_n
        Accuracy on ``eval_n`` fresh samples is checked every ``eval_every`` steps.
    seed
        Seed of the initialisation and the data.
    progress
        Show a tqdm bar.
    device
        Where to train.

    Returns
    -------
    MLPResult
    """
    return train_mlp_ensemble(
        d,
        [pair],
        width=width,
        lr=lr,
        batch=batch,
        max_steps=max_steps,
        eval_every=eval_every,
        eval_n=eval_n,
        seed=seed,
        progress=progress,
        device=device,
    )[0]


def one_step_neuron_gradient(
    net: TwoLayerReLU, x: torch.Tensor, y: torch.Tensor, *, unit: int | None = 0, model: int = 0
) -> torch.Tensor:
    r"""The hinge-loss gradient with respect to one hidden unit's first-layer weights :math:`w_k \in \mathbb R^d`.

    :math:`\nabla_{w_k}\hat L = -\frac{a_k}{n}\sum_s y_s\,\mathbb 1[y_sf(x_s) < 1]\,\mathbb 1[\langle w_k, x_s\rangle + b_k > 0]\,x_s`.
    At initialisation :math:`|f| < 1` on (nearly) every input, so the hinge
    indicator is 1 and the gradient is a correlation of the label with the
    unit's active inputs. Shape ``(d,)``; ``unit=None`` returns every unit, ``(width, d)``.
    """
    if not isinstance(net, TwoLayerReLU):
        raise TypeError(f"net must be a TwoLayerReLU, got {type(net).__name__}")
    if unit is not None:
        unit = check_int("unit", unit, minimum=0, maximum=net.width - 1)
    model = check_int("model", model, minimum=0, maximum=net.models - 1)
    x = check_tensor("x", x, ndim=2, last_dim=net.d)
    y = check_tensor("y", y, ndim=1)
    if y.shape[0] != x.shape[0]:
        raise ValueError(f"y must have one label per row of x ({x.shape[0]}), got {y.shape[0]}")
    batched = x.to(net.first.dtype).unsqueeze(0).expand(net.models, *x.shape)
    labels = y.to(net.first.dtype).unsqueeze(0).expand(net.models, -1)
    grad_first = net.hinge_gradients(batched, labels)[0][model]
    return grad_first if unit is None else grad_first[unit]


def population_neuron_gradient(
    net: TwoLayerReLU, pair: tuple[int, int], *, unit: int | None = 0, model: int = 0
) -> torch.Tensor:
    r"""The exact population version of :func:`one_step_neuron_gradient`, by enumerating all :math:`2^d` inputs.

    Only for ``d <= 22``. Its entries at the relevant pair are
    :math:`a_k\,\mathbb E[x_{j^*}\,\mathbb 1[\langle w_k, x\rangle + b_k > 0]]`
    (and symmetrically), first-order Fourier coefficients of a halfspace, of
    order :math:`|w_{k,j^*}|/\|w_k\|`; every other entry is a third-order
    coefficient, much smaller.
    """
    if not isinstance(net, TwoLayerReLU):
        raise TypeError(f"net must be a TwoLayerReLU, got {type(net).__name__}")
    check_int("d", net.d, minimum=2, maximum=MAX_ENUMERATION_D)
    pair = check_pair("pair", pair, net.d)
    x = all_inputs(net.d, device=net.first.device, dtype=net.first.dtype)
    return one_step_neuron_gradient(net, x, xor_labels(x, pair), unit=unit, model=model)
