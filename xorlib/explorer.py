r"""The interactive explorer: one gradient step for any setting of its controls, and the widgets that set them.

*What this is:* a pure function, :func:`explorer_state`, from the controls' values to an :class:`ExplorerState`
(the step and every number its figure, :func:`xorlib.plots.explorer.plot_explorer`, shows), and a small
:class:`Explorer` that wires ipywidgets controls to it. *What it is not:* new mathematics. A softmax step is
:func:`xorlib.one_step` with a fixed sharpness; a step of another normaliser is
:func:`xorlib.experiments.attention_variants.variant_step` (population gradient only).

Each setting takes **one gradient step** of sharpness :math:`\kappa` (learning rate :math:`\eta = \kappa d^2/c_1`)
from the model's start, on the population gradient (``n = 0``) or on ``n`` samples, and certifies the loss over all
:math:`2^d` inputs (:mod:`xorlib.certify`). The function accepts exactly the settings the controls offer, so that
the tests, which try the controls at their extremes, cover every setting a reader can reach:

=============  ==========================================================================================
``d``          4 to 4096 (the control: powers of two from 8)
``heads``      ``"split"`` or ``"tied"`` (:class:`xorlib.model.ModelConfig`)
``attention``  one of :data:`xorlib.attention.ATTENTION_KINDS`
``kappa``      :data:`KAPPA_RANGE`, wide because the unnormalised forms need far larger steps than softmax
``n``          0 (population) or a sample count up to :data:`N_CHOICES`' largest, softmax only, with
               :math:`n d \le` :data:`MAX_SAMPLE_ENTRIES` (about a second of computing)
``sigma``      :data:`SIGMA_RANGE`: the scale of the split model's random start (the tied model starts at 0)
``seed``       the codes, the pair, the start and the samples, as in :func:`xorlib.one_step`
=============  ==========================================================================================
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

import torch

from ._checks import check_choice, check_float, check_int, check_seed
from .attention import ATTENTION_KINDS
from .certify import worst_case_loss
from .experiments.attention_variants import VariantStep, variant_step
from .model import HEADS, ModelConfig
from .one_step import OneStepResult, one_step
from .population import loss_of_weights
from .task import random_pair

__all__ = ["Explorer", "explorer_state"]

#: Values of ``d`` offered by the control (:func:`explorer_state` takes any ``d`` from 4 to the largest).
D_CHOICES = tuple(2**k for k in range(3, 13))
#: Smallest and largest sharpness :math:`\kappa`.
KAPPA_RANGE = (1e-2, 1e8)
#: Sample counts offered by the control; 0 is the population gradient.
N_CHOICES = (0, *(4**k for k in range(2, 11)))
#: Smallest and largest scale :math:`\sigma` of the split model's start.
SIGMA_RANGE = (0.0, 4.0)
#: Largest :math:`n d` of one empirical step: about a second of computing on one core.
MAX_SAMPLE_ENTRIES = 2**26

_D_RANGE = (4, D_CHOICES[-1])
_KAPPA_SLACK = 1e-9  # a log slider's value may round just past its ends


@dataclass(frozen=True)
class ExplorerState:
    r"""One setting of the explorer, the step it takes, and the numbers its figure shows.

    Attributes
    ----------
    d, heads, attention, kappa, n, sigma, seed
        The setting, as validated by :func:`explorer_state`.
    m
        The code dimension (:func:`xorlib.codes.default_code_dim`).
    pair
        The hidden pair :math:`(u, v)`.
    lr
        The learning rate :math:`\eta = \kappa d^2 / c_1`.
    weights_before, weights_after
        Both heads' attention, shape ``(2, d)``, at the start and after the step. The unnormalised forms can give
        weights far outside :math:`[0, 1]` (component-wise attention caps its scores at 700 so that :math:`e^s`
        stays finite).
    mean_loss_before, mean_loss_after
        The population loss :math:`\mathbb E_x[\ell]` (``inf`` where float64 overflows).
    worst_before, worst_after
        The certified worst case over all :math:`2^d` inputs (an upper bound; ``inf`` where it overflows).
    worst_after_lower
        The loss of an input that is attained after the step: the worst case lies in ``[lower, worst_after]``.
    worst_after_exact
        Whether the bracket is closed (``worst_after`` is the worst case itself).
    signs_correct
        Certified: after the step, the sign of the prediction is the label on every input.
    result
        The step itself: a :class:`xorlib.one_step.OneStepResult` (softmax) or a
        :class:`xorlib.experiments.attention_variants.VariantStep`.
    """

    d: int
    heads: str
    attention: str
    kappa: float
    n: int
    sigma: float
    seed: int
    m: int
    pair: tuple[int, int]
    lr: float
    weights_before: torch.Tensor
    weights_after: torch.Tensor
    mean_loss_before: float
    mean_loss_after: float
    worst_before: float
    worst_after: float
    worst_after_lower: float
    worst_after_exact: bool
    signs_correct: bool
    result: OneStepResult | VariantStep

    @property
    def found(self) -> tuple[int, int]:
        """The position each head attends to most after the step."""
        return tuple(int(k) for k in self.weights_after.argmax(-1))  # type: ignore[return-value]

    @property
    def split(self) -> bool:
        """Whether the two heads attend most to the two different hidden bits."""
        return tuple(sorted(self.found)) == self.pair

    @property
    def pair_mass(self) -> tuple[float, float]:
        r"""Per head, the weight on the hidden pair after the step, :math:`\alpha_{h,u} + \alpha_{h,v}`."""
        return tuple(float(w) for w in self.weights_after[:, list(self.pair)].sum(-1))  # type: ignore[return-value]

    @property
    def weight_range(self) -> tuple[float, float]:
        """The smallest and the largest weight after the step, over both heads."""
        return float(self.weights_after.min()), float(self.weights_after.max())

    @property
    def gradient(self) -> str:
        """``"population gradient"`` or ``"n samples"``, for summaries."""
        return "population gradient" if self.n == 0 else f"{self.n:,} samples"


def explorer_state(
    d: int = 64,
    heads: str = "split",
    attention: str = "softmax",
    kappa: float = 100.0,
    n: int = 0,
    sigma: float = 1.0,
    seed: int = 0,
) -> ExplorerState:
    r"""One gradient step of sharpness :math:`\kappa` for one setting of the explorer's controls.

    Parameters
    ----------
    d
        Number of positions, 4 to 4096.
    heads
        ``"split"`` or ``"tied"``.
    attention
        One of :data:`xorlib.attention.ATTENTION_KINDS`.
    kappa
        Sharpness of the step, in :data:`KAPPA_RANGE`; the learning rate is :math:`\eta = \kappa d^2/c_1`.
    n
        Samples of the empirical gradient, 0 to the largest of :data:`N_CHOICES`, with
        :math:`n d \le` :data:`MAX_SAMPLE_ENTRIES`; 0 for the population gradient. Only softmax attention has an
        empirical step here: for the other normalisers ``n`` must be 0.
    sigma
        Scale of the split model's random start :math:`q_1 = -q_2 \sim \mathcal N(0, \sigma^2 I/m)`, in
        :data:`SIGMA_RANGE`; the tied model starts at :math:`q = 0` whatever ``sigma``.
    seed
        Seeds the codes, the pair, the start and the samples (as :func:`xorlib.one_step` does).

    Returns
    -------
    ExplorerState
        The step, the weights before and after it, and the mean and certified worst-case losses.

    Raises
    ------
    TypeError, ValueError
        For a value of the wrong kind or outside its range; the message names the argument.

    Examples
    --------
    >>> state = explorer_state(d=64, heads="split", kappa=100.0)
    >>> state.split, state.worst_after < 1e-6
    (True, True)
    """
    d = check_int("d", d, minimum=_D_RANGE[0], maximum=_D_RANGE[1])
    heads = check_choice("heads", heads, HEADS)
    attention = check_choice("attention", attention, ATTENTION_KINDS)
    kappa = _check_kappa(kappa)
    n = check_int("n", n, minimum=0, maximum=N_CHOICES[-1])
    sigma = check_float("sigma", sigma, minimum=SIGMA_RANGE[0], maximum=SIGMA_RANGE[1])
    seed = check_seed("seed", seed)
    if n and attention != "softmax":
        raise ValueError(
            f"n must be 0 (the population gradient) for attention={attention!r}: "
            "the explorer's empirical step is softmax-only"
        )
    if n * d > MAX_SAMPLE_ENTRIES:
        raise ValueError(
            f"n * d must be at most {MAX_SAMPLE_ENTRIES:,} (about a second of computing), got n * d = {n * d:,}: "
            f"at d = {d:,} take n <= {MAX_SAMPLE_ENTRIES // d:,}"
        )
    if attention == "softmax":
        return _softmax_state(d, heads, kappa, n, sigma, seed)
    return _variant_state(d, heads, attention, kappa, sigma, seed)


def _check_kappa(kappa: object) -> float:
    """``kappa`` as a float in :data:`KAPPA_RANGE` (a log slider's rounding just past an end is forgiven)."""
    low, high = KAPPA_RANGE
    kappa = check_float("kappa", kappa, minimum=0.0, strict_minimum=True)
    if not low * (1 - _KAPPA_SLACK) <= kappa <= high * (1 + _KAPPA_SLACK):
        raise ValueError(f"kappa must be in [{low:g}, {high:g}], got {kappa:g}")
    return min(max(kappa, low), high)


def _finite_or_inf(value: float) -> float:
    """A loss as a float, ``inf`` for one that overflowed (NaN from ``inf - inf``)."""
    value = float(value)
    return value if math.isfinite(value) else math.inf


def _softmax_state(d: int, heads: str, kappa: float, n: int, sigma: float, seed: int) -> ExplorerState:
    result = one_step(d, heads, seed=seed, n=n or None, sigma=sigma, step=kappa)
    before, after = result.weights_before, result.weights_after
    worst = result.worst_case
    mean_after = result.mean_loss_after  # the log-domain form: precise far below the rounding error of 1
    if not math.isfinite(mean_after):  # it gives NaN when a weight underflows to 0 (e.g. tied, d = 8, kappa = 1e8)
        mean_after = float(loss_of_weights(after, result.pair, heads=heads))
    return ExplorerState(
        d=d, heads=heads, attention="softmax", kappa=kappa, n=n, sigma=sigma, seed=seed,
        m=result.config.model.m, pair=result.pair, lr=result.lr, weights_before=before, weights_after=after,
        mean_loss_before=_finite_or_inf(result.mean_loss_before),
        mean_loss_after=_finite_or_inf(mean_after),
        worst_before=_finite_or_inf(worst_case_loss(before, result.pair, heads=heads).upper),
        worst_after=_finite_or_inf(worst.upper), worst_after_lower=_finite_or_inf(worst.lower),
        worst_after_exact=bool(worst.exact) and math.isfinite(float(worst.upper)),
        signs_correct=bool(worst.margin > 0), result=result,
    )  # fmt: skip


def _variant_state(d: int, heads: str, attention: str, kappa: float, sigma: float, seed: int) -> ExplorerState:
    config = ModelConfig(d, heads, attention=attention, code_seed=seed, sigma=sigma, init_seed=seed)
    pair = random_pair(d, seed=seed)
    step = variant_step(config, pair, kappa)
    worst = step.worst_case
    _, c1 = config.readout
    return ExplorerState(
        d=d, heads=heads, attention=attention, kappa=kappa, n=0, sigma=sigma, seed=seed, m=config.m, pair=pair,
        lr=kappa * d**2 / c1, weights_before=step.weights_before, weights_after=step.weights_after,
        mean_loss_before=_finite_or_inf(loss_of_weights(step.weights_before, pair, heads=heads)),
        mean_loss_after=_finite_or_inf(step.mean_loss_after),
        worst_before=_finite_or_inf(worst_case_loss(step.weights_before, pair, heads=heads).upper),
        worst_after=_finite_or_inf(worst.upper), worst_after_lower=_finite_or_inf(worst.lower),
        worst_after_exact=bool(worst.exact) and math.isfinite(float(worst.upper)),
        signs_correct=bool(worst.margin > 0), result=step,
    )  # fmt: skip


def _choice(name: str, value: object, choices: tuple[int, ...]) -> int:
    """``value`` if it is one of the integer ``choices`` a selection control offers."""
    value = check_int(name, value)
    if value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value}")
    return value


class Explorer:
    r"""The explorer's controls, its output area, and the latest :class:`ExplorerState`.

    Each change of a control recomputes :func:`explorer_state` and redraws
    :func:`xorlib.plots.explorer.plot_explorer` (sliders recompute on release). A rejected setting shows its message
    instead of a figure. For a normaliser other than softmax the samples control is set to 0 and disabled (its
    label says why); for the tied model, which starts at :math:`q = 0`, the :math:`\sigma` control is disabled.

    Parameters
    ----------
    d, heads, attention, kappa, n, sigma, seed
        Initial values (``d`` one of :data:`D_CHOICES`, ``n`` one of :data:`N_CHOICES`); see :func:`explorer_state`.

    Attributes
    ----------
    controls
        ``{name: widget}``, named like the arguments of :func:`explorer_state`.
    message
        An HTML widget that shows why a setting is rejected (empty otherwise).
    output
        The :class:`ipywidgets.Output` the figure is drawn into.
    widget
        The whole explorer, to display (leaving the explorer last in a cell displays it too).
    state
        The state of the current setting, or ``None`` if it was rejected.
    error
        The message of the rejected setting (``""`` if none).
    """

    def __init__(
        self,
        d: int = 64,
        heads: str = "split",
        attention: str = "softmax",
        kappa: float = 100.0,
        n: int = 0,
        sigma: float = 1.0,
        seed: int = 0,
    ) -> None:
        import ipywidgets as w

        d, n = _choice("d", d, D_CHOICES), _choice("n", n, N_CHOICES)
        heads, attention = check_choice("heads", heads, HEADS), check_choice("attention", attention, ATTENTION_KINDS)
        kappa = _check_kappa(kappa)
        sigma = check_float("sigma", sigma, minimum=SIGMA_RANGE[0], maximum=SIGMA_RANGE[1])
        seed = check_int("seed", seed, minimum=0, maximum=10**6)
        common = {"continuous_update": False, "style": {"description_width": "initial"}}
        self.controls = {
            "d": w.SelectionSlider(options=D_CHOICES, value=d, description="positions d", **common),
            "heads": w.ToggleButtons(options=HEADS, value=heads, description="model"),
            "attention": w.Dropdown(options=ATTENTION_KINDS, value=attention, description="attention"),
            "kappa": w.FloatLogSlider(
                value=kappa, base=10, min=math.log10(KAPPA_RANGE[0]), max=math.log10(KAPPA_RANGE[1]), step=0.05,
                description="sharpness κ", readout_format=".3g", **common,
            ),
            "n": w.SelectionSlider(options=N_CHOICES, value=n, description="samples n (0 = population)", **common),
            "sigma": w.FloatSlider(
                value=sigma, min=SIGMA_RANGE[0], max=SIGMA_RANGE[1], step=0.05, description="start scale σ", **common
            ),
            "seed": w.BoundedIntText(value=seed, min=0, max=10**6, description="seed", **common),
        }  # fmt: skip
        self.message = w.HTML()
        self.output = w.Output()
        self.state: ExplorerState | None = None
        self.error = ""
        self._syncing = False
        self._sync_controls()
        for control in self.controls.values():
            control.observe(self._on_change, names="value")
        rows = [["d", "heads", "attention"], ["kappa", "n"], ["sigma", "seed"]]
        self.widget = w.VBox([w.HBox([self.controls[k] for k in row]) for row in rows] + [self.message, self.output])
        self.update()

    def values(self) -> dict[str, object]:
        """The current control values, as keyword arguments of :func:`explorer_state`."""
        return {name: control.value for name, control in self.controls.items()}

    def set(self, **values: object) -> ExplorerState | None:
        """Set several controls at once (names as in :meth:`values`) and recompute once."""
        unknown = sorted(set(values) - set(self.controls))
        if unknown:
            raise TypeError(f"unknown control(s) {unknown}; the controls are {list(self.controls)}")
        self._syncing = True
        try:
            for name, value in values.items():
                self.controls[name].value = value
            self._sync_controls()
        finally:
            self._syncing = False
        return self.update()

    def _sync_controls(self) -> None:
        """Disable what a setting ignores: samples for the other normalisers, the start scale for the tied model."""
        n, sigma = self.controls["n"], self.controls["sigma"]
        softmax = self.controls["attention"].value == "softmax"
        if not softmax:
            n.value = 0
        n.disabled = not softmax
        n.description = "samples n (0 = population)" if softmax else "samples n: softmax only"
        tied = self.controls["heads"].value == "tied"
        sigma.disabled = tied
        sigma.description = "start scale σ: split model only" if tied else "start scale σ"

    def _on_change(self, _change: object) -> None:
        if self._syncing:
            return
        self._syncing = True
        try:
            self._sync_controls()
        finally:
            self._syncing = False
        self.update()

    def update(self) -> ExplorerState | None:
        """Recompute from the current values and redraw; a rejected setting shows its message instead."""
        import matplotlib.pyplot as plt
        from IPython.display import clear_output, display

        from .plots.explorer import plot_explorer

        try:
            self.state, self.error = explorer_state(**self.values()), ""  # type: ignore[arg-type]
        except (TypeError, ValueError) as err:
            self.state, self.error = None, str(err)
        self.message.value = f"<b>This setting is not available:</b> {html.escape(self.error)}" if self.error else ""
        with self.output:
            clear_output(wait=True)
            if self.state is not None:
                fig = plot_explorer(self.state)
                display(fig)
                plt.close(fig)
        return self.state

    def _repr_mimebundle_(self, **kwargs: object) -> dict | None:
        return self.widget._repr_mimebundle_(**kwargs)
