r"""The interactive explorer: one gradient step for any setting of its controls, and the widgets that set them.

*What this is:* a pure function, :func:`explorer_state`, from the controls' values to a state (the step and
every number its figure, :func:`plot_explorer`, shows), and a small :class:`Explorer` that wires ipywidgets
controls to it. *What it is not:* new mathematics. A softmax step is :func:`xorlib.one_step` with a fixed
sharpness; a step of another normaliser is the attention-variants experiment's one step (population gradient only).

Each setting takes **one gradient step** of sharpness :math:`\kappa` (learning rate :math:`\eta = \kappa d^2/c_1`)
from the model's start, on the population gradient (``n = 0``) or on ``n`` samples, and certifies the loss over all
:math:`2^d` inputs (:mod:`xorlib.certify`). The function accepts exactly the settings the controls offer, so that
the tests, which try the controls at their extremes, cover every setting a reader can reach:

=============  ==========================================================================================
``d``          4 to 4096 (the control: powers of two from 8)
``heads``      ``"split"`` or ``"tied"`` (:class:`xorlib.model.ModelConfig`)
``attention``  one of ``softmax``, ``linear``, ``relu``, ``sigmoid`` or ``componentwise``
``kappa``      ``Explorer.KAPPA_RANGE``, wide because the unnormalised forms need far larger steps than softmax
``n``          0 (population) or a sample count up to the largest of ``Explorer.N_CHOICES``, softmax only,
               with :math:`n d \le` ``Explorer.MAX_SAMPLE_ENTRIES`` (about a second of computing)
``sigma``      ``Explorer.SIGMA_RANGE``: the scale of the split model's random start (the tied model starts at 0)
``seed``       the codes, the pair, the start and the samples, as in :func:`xorlib.one_step`
=============  ==========================================================================================
"""

from __future__ import annotations

import html
import math
from typing import Annotated, ClassVar

from ._certificate import of_weights
from ._checks import check_choice, check_float, check_int
from ._contract import Between, Heads, Seed, public
from ._moments import loss_of_weights
from ._normalisers import NORMALISERS, AttentionKind
from .experiments._attention_variants import variant_step
from .learners._one_step import one_step
from .model import ModelConfig
from .plots._explorer import LOSS_RANGE, ExplorerState, plot_explorer, readable
from .task import random_pair

__all__ = ["Explorer", "explorer_state", "plot_explorer"]

HEADS = ("tied", "split")
ATTENTION_KINDS = tuple(NORMALISERS)

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

_KAPPA_SLACK = 1e-9  # a log slider's value may round just past its ends


@public
def explorer_state(
    d: Annotated[int, Between(4, D_CHOICES[-1])] = 64,
    heads: Heads = "split",
    attention: AttentionKind = "softmax",
    kappa: Annotated[float, Between(0.0, None, open_low=True)] = 100.0,
    n: Annotated[int, Between(0, N_CHOICES[-1])] = 0,
    sigma: Annotated[float, Between(*SIGMA_RANGE)] = 1.0,
    seed: Seed = 0,
) -> ExplorerState:
    r"""One gradient step of sharpness :math:`\kappa` for one setting of the explorer's controls.

    Parameters
    ----------
    d
        Number of positions, 4 to 4096.
    heads
        ``"split"`` or ``"tied"``.
    attention
        One of ``softmax``, ``linear``, ``relu``, ``sigmoid`` or ``componentwise``.
    kappa
        Sharpness of the step, from :math:`10^{-2}` to :math:`10^8`; the learning rate is :math:`\eta = \kappa d^2/c_1`.
    n
        Samples of the empirical gradient, 0 to :math:`4^{10}`, with :math:`n d \le 2^{26}`; 0 for the population
        gradient. Only softmax attention has an empirical step here: for the other normalisers ``n`` must be 0.
    sigma
        Scale of the split model's random start :math:`q_1 = -q_2 \sim \mathcal N(0, \sigma^2 I/m)`, from 0 to 4;
        the tied model starts at :math:`q = 0` whatever ``sigma``.
    seed
        Seeds the codes, the pair, the start and the samples (as :func:`xorlib.one_step` does).

    Returns
    -------
    ExplorerState
        The setting, the step (``result``), both heads' weights before and after it (``weights_before``,
        ``weights_after``, shape ``(2, d)``), the mean losses and the certified worst case before and after
        (``worst_after`` is an upper bound; ``worst_after_lower`` is attained; ``inf`` where float64
        overflows), ``signs_correct``, and ``found``, ``split``, ``pair_mass``, ``weight_range``.

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
    kappa = _check_kappa(kappa)
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


def _softmax_state(d: int, heads: Heads, kappa: float, n: int, sigma: float, seed: int) -> ExplorerState:
    result = one_step(d, heads, seed=seed, n=n or None, sigma=sigma, step=kappa)
    before, after = result.weights_before, result.weights_after
    worst = result.worst_case
    mean_after = result.mean_loss_after  # the log-domain form: precise far below the rounding error of 1
    if not math.isfinite(mean_after):  # it gives NaN when a weight underflows to 0 (e.g. tied, d = 8, kappa = 1e8)
        mean_after = float(loss_of_weights(after, result.pair, result.config.model.readout))
    return ExplorerState(
        d=d, heads=heads, attention="softmax", kappa=kappa, n=n, sigma=sigma, seed=seed,
        m=result.config.model.m, pair=result.pair, lr=result.lr, weights_before=before, weights_after=after,
        mean_loss_before=_finite_or_inf(result.mean_loss_before),
        mean_loss_after=_finite_or_inf(mean_after),
        worst_before=_finite_or_inf(of_weights(before, result.pair, result.config.model).upper),
        worst_after=_finite_or_inf(worst.upper), worst_after_lower=_finite_or_inf(worst.lower),
        worst_after_exact=bool(worst.exact) and math.isfinite(float(worst.upper)),
        signs_correct=bool(worst.margin > 0), result=result,
    )  # fmt: skip


def _variant_state(
    d: int, heads: Heads, attention: AttentionKind, kappa: float, sigma: float, seed: int
) -> ExplorerState:
    config = ModelConfig(d, heads, attention=attention, code_seed=seed, sigma=sigma, init_seed=seed)
    pair = random_pair(d, seed=seed)
    step = variant_step(config, pair, kappa)
    worst = step.worst_case
    _, c1 = config.readout
    return ExplorerState(
        d=d, heads=heads, attention=attention, kappa=kappa, n=0, sigma=sigma, seed=seed, m=config.m, pair=pair,
        lr=kappa * d**2 / c1, weights_before=step.weights_before, weights_after=step.weights_after,
        mean_loss_before=_finite_or_inf(loss_of_weights(step.weights_before, pair, config.readout)),
        mean_loss_after=_finite_or_inf(step.mean_loss_after),
        worst_before=_finite_or_inf(of_weights(step.weights_before, pair, config).upper),
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


def _control_values(values: dict[str, object]) -> dict[str, object]:
    """``values`` (a subset of the controls) checked against what the controls can show: no widget clamps or rounds."""
    checks = {
        "d": lambda v: _choice("d", v, D_CHOICES),
        "n": lambda v: _choice("n", v, N_CHOICES),
        "heads": lambda v: check_choice("heads", v, HEADS),
        "attention": lambda v: check_choice("attention", v, ATTENTION_KINDS),
        "kappa": _check_kappa,
        "sigma": lambda v: check_float("sigma", v, minimum=SIGMA_RANGE[0], maximum=SIGMA_RANGE[1]),
        "seed": lambda v: check_int("seed", v, minimum=0, maximum=10**6),
    }
    return {name: checks[name](value) for name, value in values.items()}


class Explorer:
    r"""The explorer's controls, its output area, and the latest :class:`ExplorerState`.

    Each change of a control recomputes :func:`explorer_state` and redraws
    :func:`xorlib.explorer.plot_explorer` (sliders recompute on release). A rejected setting shows its message
    instead of a figure. For a normaliser other than softmax the samples control is set to 0 and disabled (its
    label says why); for the tied model, which starts at :math:`q = 0`, the :math:`\sigma` control is disabled.

    Parameters
    ----------
    d, heads, attention, kappa, n, sigma, seed
        Initial values (``d`` one of :attr:`D_CHOICES`, ``n`` one of :attr:`N_CHOICES`); see :func:`explorer_state`.
        A value the controls cannot show is refused with a ``ValueError`` naming it, never clamped.

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

    Examples
    --------
    >>> explorer = Explorer(d=64, heads="split", kappa=100.0)  # doctest: +SKIP
    >>> explorer.state.split, explorer.error  # doctest: +SKIP
    (True, '')
    """

    #: The values of ``d`` the control offers (:func:`explorer_state` takes any ``d`` from 4 to the largest).
    D_CHOICES: ClassVar[tuple[int, ...]] = D_CHOICES
    #: The smallest and largest sharpness :math:`\kappa`.
    KAPPA_RANGE: ClassVar[tuple[float, float]] = KAPPA_RANGE
    #: The sample counts the control offers; 0 is the population gradient.
    N_CHOICES: ClassVar[tuple[int, ...]] = N_CHOICES
    #: The smallest and largest scale :math:`\sigma` of the split model's start.
    SIGMA_RANGE: ClassVar[tuple[float, float]] = SIGMA_RANGE
    #: The largest :math:`n d` of one empirical step: about a second of computing on one core.
    MAX_SAMPLE_ENTRIES: ClassVar[int] = MAX_SAMPLE_ENTRIES
    #: The largest seed the seed control takes.
    MAX_SEED: ClassVar[int] = 10**6
    #: The figure's loss axis: losses below are drawn at the left edge, above at the right edge, both labelled.
    LOSS_RANGE: ClassVar[tuple[float, float]] = LOSS_RANGE
    #: How the explorer writes a number (``0.72``, ``1,234``, ``2.4 × 10⁻⁷``, ``10⁸``, ``overflow``).
    readable = staticmethod(readable)

    @public
    def __init__(
        self,
        d: int = 64,
        heads: Heads = "split",
        attention: AttentionKind = "softmax",
        kappa: float = 100.0,
        n: int = 0,
        sigma: float = 1.0,
        seed: int = 0,
    ) -> None:
        import ipywidgets as w

        values = _control_values({"d": d, "n": n, "kappa": kappa, "sigma": sigma, "seed": seed})
        d, n, kappa, sigma, seed = (values[name] for name in ("d", "n", "kappa", "sigma", "seed"))
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
        """Set several controls at once (names as in :meth:`values`) and recompute once.

        Every value is checked first, against what its control can show: a value out of range or of the wrong
        kind raises a ``ValueError`` or ``TypeError`` naming it, and then no control changes, so the controls and
        the figure stay in step. (A setting the controls can show but :func:`explorer_state` rejects, such as
        samples with another normaliser, is shown as its message instead of a figure.)
        """
        unknown = sorted(set(values) - set(self.controls))
        if unknown:
            raise TypeError(f"unknown control(s) {unknown}; the controls are {list(self.controls)}")
        checked = _control_values(values)
        before = self.values()
        self._syncing = True
        try:
            for name, value in checked.items():
                self.controls[name].value = value
            self._sync_controls()
        except Exception:  # a widget refused after all: put every control back as it was
            for name, value in before.items():
                self.controls[name].value = value
            self._sync_controls()
            raise
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
