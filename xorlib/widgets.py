r"""An interactive explorer of the one-step result (ipywidgets).

The explorer has sliders for the number of positions ``d``, the code dimension
``m``, the sharpness :math:`\kappa` of the step (the learning rate is
:math:`\eta` = :func:`~xorlib.gradient.lr_for_sharpness` of it), the attention
kind, the sample count ``n`` (0 for the exact population gradient) and the
seed. Each change takes one gradient step from :math:`q_1 = q_2 = 0` and
redraws the attention after the step and the loss before and after it, both
the mean over inputs and the exact worst case over all :math:`2^d` inputs.

The computation is one pure function, :func:`explorer_state`, from slider
values to an :class:`ExplorerState`; the drawing is
:func:`xorlib.plots.plot_explorer`. Tests and the static book call them
directly; :class:`Explorer` only wires them to widgets. Sliders use
``continuous_update=False``, so a drag recomputes once, on release.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ._validate import check_choice, check_device, check_float, check_int, check_seed
from .attention import ATTENTION_KINDS, attention_weights
from .codes import default_code_dim, positional_codes
from .data import random_pair, sample_xor
from .gradient import (
    empirical_gradient,
    lr_for_sharpness,
    one_step_from_uniform,
    population_loss_weights,
    worst_case_loss,
)

__all__ = [
    "D_CHOICES",
    "MAX_SAMPLE_ENTRIES",
    "N_CHOICES",
    "Explorer",
    "ExplorerState",
    "explorer",
    "explorer_state",
]

#: Values of ``d`` offered by the slider (the state function accepts any ``d >= 4``).
D_CHOICES = tuple(2**k for k in range(3, 13))
#: Values of ``n`` offered by the slider; 0 means the exact population gradient.
N_CHOICES = (0, 16, 64, 256, 1024, 4096, 16384)
#: Largest ``n * d`` for one empirical step (the batch is held in memory as float64).
MAX_SAMPLE_ENTRIES = 2**24


@dataclass(frozen=True)
class ExplorerState:
    r"""Everything the explorer shows for one setting of the sliders.

    Attributes
    ----------
    d, m, kappa, lr, attention, n, seed
        The setting (``m`` resolved from 0 to its default, ``lr`` from ``kappa``).
    pair
        The hidden pair, drawn from ``seed``.
    weights_before, weights_after
        Attention of both heads, shape ``(2, d)``, at :math:`q = 0` and after the step.
    mean_before, mean_after
        Population loss :math:`\mathbb E_x[\ell]`, exact.
    worst_before, worst_after
        Largest loss over all inputs (the upper end of the certified bracket).
    worst_after_exact
        Whether ``worst_after`` is exact (else it is an upper bound; ``worst_after_lower`` is attained).
    worst_after_lower
        The loss of an input that is actually attained.
    pair_mass
        Attention head 1 puts on the pair after the step, :math:`\alpha_{1,i^*} + \alpha_{1,j^*}`.
    """

    d: int
    m: int
    kappa: float
    lr: float
    attention: str
    n: int
    seed: int
    pair: tuple[int, int]
    weights_before: torch.Tensor
    weights_after: torch.Tensor
    mean_before: float
    mean_after: float
    worst_before: float
    worst_after: float
    worst_after_lower: float
    worst_after_exact: bool
    pair_mass: float

    @property
    def gradient(self) -> str:
        """``"population"`` or ``"n samples"``, for titles."""
        return "population gradient" if self.n == 0 else f"{self.n:,} samples"


def explorer_state(
    d: int = 64,
    m: int = 0,
    kappa: float = 30.0,
    attention: str = "softmax",
    n: int = 0,
    seed: int = 0,
    *,
    device: str | torch.device = "cpu",
) -> ExplorerState:
    r"""One gradient step from :math:`q = 0` and its losses, for one setting of the sliders.

    Parameters
    ----------
    d
        Number of positions, ``d >= 4``.
    m
        Code dimension; 0 for :func:`xorlib.codes.default_code_dim` (:math:`\lceil 4\log_2 d\rceil`).
    kappa
        Sharpness of the step, ``> 0``: :math:`\eta = \kappa d^2/c_1` for softmax
        (:func:`xorlib.gradient.lr_for_sharpness`).
    attention
        One of :data:`xorlib.attention.ATTENTION_KINDS`.
    n
        Number of samples of the empirical gradient; 0 for the exact population
        gradient. ``n * d`` is at most :data:`MAX_SAMPLE_ENTRIES`.
    seed
        Seeds the pair, the codes and the samples.
    device
        Where the tensors live.

    Returns
    -------
    ExplorerState
        The weights before and after the step and the mean and worst-case losses.
    """
    d = check_int("d", d, minimum=4)
    m = check_int("m", m, minimum=0)
    kappa = check_float("kappa", kappa, minimum=0.0, strict_minimum=True)
    attention = check_choice("attention", attention, ATTENTION_KINDS)
    n = check_int("n", n, minimum=0)
    seed = check_seed("seed", seed)
    device = check_device("device", device)
    if n * d > MAX_SAMPLE_ENTRIES:
        raise ValueError(f"n * d must be <= {MAX_SAMPLE_ENTRIES:,} (memory), got n={n:,}, d={d:,}")
    m = m or default_code_dim(d)
    pair = random_pair(d, seed=seed)
    codes = positional_codes(d, m, seed=seed, device=device)
    lr = lr_for_sharpness(kappa, d, attention=attention)
    zero = torch.zeros(2, m, dtype=codes.dtype, device=device)
    if n == 0:
        queries = one_step_from_uniform(codes, pair, lr, attention=attention)
    else:
        x, y = sample_xor(n, d, pair, seed=seed + 1, device=device, dtype=codes.dtype)
        queries = zero - lr * empirical_gradient(zero, codes, x, y, attention=attention)
    before = attention_weights(zero @ codes.T, attention)
    after = attention_weights(queries @ codes.T, attention)
    worst_b, worst_a = worst_case_loss(before, pair), worst_case_loss(after, pair)
    return ExplorerState(
        d=d,
        m=m,
        kappa=kappa,
        lr=lr,
        attention=attention,
        n=n,
        seed=seed,
        pair=pair,
        weights_before=before,
        weights_after=after,
        mean_before=float(population_loss_weights(before, pair)),
        mean_after=float(population_loss_weights(after, pair)),
        worst_before=float(worst_b.value),
        worst_after=float(worst_a.value),
        worst_after_lower=float(worst_a.lower),
        worst_after_exact=bool(worst_a.exact),
        pair_mass=float(after[0, list(pair)].sum()),
    )


def _nearest(choices: tuple[int, ...], value: int) -> int:
    return min(choices, key=lambda c: (abs(math.log2(max(c, 1)) - math.log2(max(value, 1))), c))


class Explorer:
    """The explorer's widgets: controls, an output area, and the latest :class:`ExplorerState`.

    Parameters
    ----------
    d, m, kappa, attention, n, seed
        Initial slider values (``d`` and ``n`` snap to the nearest offered choice).
    device
        Where the tensors live.

    Attributes
    ----------
    controls
        ``{name: widget}`` for the six controls.
    output
        The :class:`ipywidgets.Output` the figure is drawn into.
    widget
        The whole explorer, to display.
    state
        The state of the last successful update, or ``None``.
    error
        The message of the last rejected setting (``""`` if none).
    """

    def __init__(
        self,
        d: int = 64,
        m: int = 0,
        kappa: float = 30.0,
        attention: str = "softmax",
        n: int = 0,
        seed: int = 0,
        *,
        device: str | torch.device = "cpu",
    ) -> None:
        import ipywidgets as w

        self.device = check_device("device", device)
        common = {"continuous_update": False, "style": {"description_width": "initial"}}
        self.controls = {
            "d": w.SelectionSlider(
                options=D_CHOICES, value=_nearest(D_CHOICES, d), description="positions d", **common
            ),
            "m": w.IntSlider(value=m, min=0, max=64, description="code dim m (0 = 4 log2 d)", **common),
            "kappa": w.FloatLogSlider(
                value=kappa,
                base=10,
                min=-1,
                max=2.5,
                step=0.05,
                description="sharpness κ",
                readout_format=".3g",
                **common,
            ),
            "attention": w.Dropdown(options=ATTENTION_KINDS, value=attention, description="attention"),
            "n": w.SelectionSlider(
                options=N_CHOICES,
                value=n if n in N_CHOICES else _nearest(N_CHOICES[1:], n),
                description="samples n (0 = population)",
                **common,
            ),
            "seed": w.BoundedIntText(value=seed, min=0, max=10_000, description="seed", **common),
        }
        self.output = w.Output()
        self.state: ExplorerState | None = None
        self.error = ""
        for control in self.controls.values():
            control.observe(self._on_change, names="value")
        self.widget = w.VBox(
            [w.HBox(list(self.controls.values())[:3]), w.HBox(list(self.controls.values())[3:]), self.output]
        )
        self.update()

    def values(self) -> dict[str, object]:
        """The current slider values, as keyword arguments of :func:`explorer_state`."""
        return {name: control.value for name, control in self.controls.items()}

    def _on_change(self, _change: object) -> None:
        self.update()

    def update(self) -> ExplorerState | None:
        """Recompute from the current values and redraw; a rejected setting shows its message instead."""
        import matplotlib.pyplot as plt
        from IPython.display import clear_output

        from .plots import plot_explorer

        with self.output:
            clear_output(wait=True)
            try:
                self.state = explorer_state(**self.values(), device=self.device)
            except ValueError as err:
                self.error = str(err)
                print(f"This setting is not available: {err}")
                return None
            self.error = ""
            fig = plot_explorer(self.state)
            plt.show()
            plt.close(fig)
        return self.state

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)


def explorer(**initial: object) -> Explorer:
    """Build the explorer (see :class:`Explorer` for the initial values); display it by leaving it last in a cell."""
    return Explorer(**initial)  # type: ignore[arg-type]
