"""The public API of :mod:`xorlib` as data: for every public callable, one valid call and what each parameter refuses.

An :class:`Entry` names a callable (``"module:name"``), gives a function that builds the keyword arguments of one
valid, fast call (fresh each time: small ``d`` and ``n``), and a spec per parameter (:mod:`tests._api_specs`)
saying which kinds of bad value it must refuse. Parameters without an explicit spec get one inferred from their
annotation and name (:func:`inferred_spec`): seeds, devices, dtypes, booleans, pairs, tensors. The fuzz test
(``tests/test_fuzz_api.py``) fails if a public callable has no entry, or a parameter no spec.

An entry whose callable lives in a module this work may not change (the report, the explorer, the figure style)
is marked ``xfail`` (strict) with the problem the fuzz test found, until that module is fixed; then the mark must go.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import pkgutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import hypothesis.strategies as st
import torch
from _api_specs import (
    MISSING,
    Bad,
    Bool,
    Case,
    Choice,
    Config,
    Device,
    DType,
    Either,
    Float,
    Free,
    Instance,
    Int,
    Number,
    Pair,
    PathSpec,
    Seed,
    Seq,
    Spec,
    Str,
    Tensor,
    Tup,
    const,
)

import xorlib
from xorlib.attention import ATTENTION_KINDS
from xorlib.codes import CODE_KINDS
from xorlib.model import HEADS, STARTS

D = 8  # the examples' number of positions
PAIR = (1, 5)


@dataclass(frozen=True)
class Entry:
    """One public callable: a valid example call and the specs of its parameters.

    ``specs`` override the inferred ones; ``extra``: more bad calls, ``(param, text, make, names)``;
    ``xfail``: why the fuzz test fails on it for now (a module this work may not change).
    """

    key: str
    example: Callable[[], dict[str, object]]
    specs: dict[str, Spec] = field(default_factory=dict)
    extra: tuple[tuple[str, str, Callable[[object], object], tuple[str, ...]], ...] = ()
    xfail: str | None = None

    @property
    def target(self) -> Callable[..., object]:
        module, _, name = self.key.partition(":")
        return getattr(importlib.import_module(module), name)


# ----------------------------------------------------------------------------- fixtures
_TMP: dict[str, Path] = {}


def tmp() -> Path:
    """A scratch folder for the examples that read or write files (the test sets it; else one per process)."""
    if "dir" not in _TMP:
        _TMP["dir"] = Path(tempfile.mkdtemp(prefix="xorlib-fuzz-"))
    return _TMP["dir"]


def _file(name: str, text: str) -> Path:
    path = tmp() / name
    path.write_text(text, encoding="utf-8")
    return path


def _folder(name: str) -> Path:
    path = tmp() / name
    path.mkdir(exist_ok=True)
    return path


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@functools.cache
def _codes() -> torch.Tensor:
    return xorlib.Codes(D).dense()


def codes() -> torch.Tensor:
    return _codes().clone()


def queries(rank: int = 2) -> torch.Tensor:
    q = 0.5 * torch.randn(2, _codes().shape[1], generator=_gen(1), dtype=torch.float64)
    return q if rank == 2 else q.unsqueeze(0)


def samples(n: int = 16, dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    return xorlib.sample_xor(n, D, PAIR, seed=3, dtype=dtype)


def scores() -> torch.Tensor:
    return torch.randn(2, D, generator=_gen(2), dtype=torch.float64)


def weights() -> torch.Tensor:
    return torch.softmax(scores(), -1)


@functools.cache
def _one_step_result():
    return xorlib.run_one_step(xorlib.OneStepConfig(xorlib.ModelConfig(D), PAIR))


def _fields(record: object) -> dict[str, object]:
    return {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}


@functools.cache
def _grids():
    from xorlib.experiments.finite_samples import success_grid

    return tuple(success_grid.uncached("split", d, (8, 32, 128, 512), code_draws=1, trials=2) for d in (8, 16))


@functools.cache
def _lr_grid():
    from xorlib.experiments.ffnn import lr_grid

    return lr_grid.uncached(ds=(4,), lrs=(1.0,), trials=1, max_steps=10)


@functools.cache
def _same_criterion():
    from xorlib.experiments.ffnn import same_criterion

    return same_criterion.uncached(ds=(4,), trials=1, n_max=64)


@functools.cache
def _linear_bound():
    from xorlib.experiments.linear_models import linear_bound

    return linear_bound.uncached(d=4, widths=(4, 8))


@functools.cache
def _multistep():
    from xorlib.experiments.multistep import multistep_sweep

    return multistep_sweep.uncached(ds=(8,), heads=("split",), runs=1, steps=2)


@functools.cache
def _authors():
    from xorlib.experiments.authors import authors_comparison

    return authors_comparison.uncached(ds=(4,), epochs=(2,), runs=(1,), adam_steps=1)


@functools.cache
def _explorer_state():
    from xorlib.explorer import explorer_state

    return explorer_state(d=D, kappa=10.0)


@functools.cache
def _grade_report():
    from xorlib.coursework import grade_notebook

    return grade_notebook(_file("unknown_chapter.md", "# Not a chapter\n"))


def _mlp_params(dtype: torch.dtype = torch.float32):
    from xorlib.learners.mlp import init_mlp

    return init_mlp(D, 16, dtype=dtype)


def _cached_function():
    from xorlib.experiments.one_step import tie_frequency

    return tie_frequency


def _auto_question_ids() -> tuple[str, ...]:
    from xorlib.coursework.bank import CHAPTERS
    from xorlib.coursework.questions import AutoQuestion

    return tuple(q.id for questions in CHAPTERS.values() for q in questions if isinstance(q, AutoQuestion))


def _reference_answer():
    from xorlib.coursework.bank import get_question

    return get_question("ch02-q1").reference


# ----------------------------------------------------------------------------- shared specs
QUERIES = Tensor((2,), fixed=(0, 1), group=("queries", "codes", "x", "y"))
CODES = Tensor((2,), fixed=(0, 1), group=("queries", "codes", "x", "y"))
X = Tensor((2,), fixed=(1,), values="signs", group=("queries", "codes", "x", "y"))
Y = Tensor((1,), fixed=(0,), values="signs", group=("queries", "codes", "x", "y"))
POPULATION = {
    "queries": Tensor((2, 3), fixed=(-2, -1), group=("queries", "codes")),
    "codes": Tensor((2,), fixed=(1,), group=("queries", "codes")),
    "pair": Pair(D),
    "heads": Choice(HEADS),
    "attention": Choice(ATTENTION_KINDS),
}
EMPIRICAL = {
    "queries": QUERIES,
    "codes": CODES,
    "x": X,
    "y": Y,
    "heads": Choice(HEADS),
    "attention": Choice(ATTENTION_KINDS),
}
EPSILON = Float(0.0, 2.0, strict=True)
STEP = Either(Choice(("certified", "lattice")), Float(0.0, 1e12, strict=True))
LIMITS = Instance("a Limits")
AX = Instance("a matplotlib Axes", none=True)
FIG = Instance("a matplotlib Figure", none=True)
#: The largest d a one-step computation streams over (xorlib.one_step.MAX_D).
ONE_STEP_D = Int(4, size=True)


def _pop_example() -> dict[str, object]:
    return {"queries": queries(), "codes": codes(), "pair": PAIR}


def _emp_example() -> dict[str, object]:
    x, y = samples()
    return {"queries": queries(), "codes": codes(), "x": x, "y": y}


def _model_config(**kw):
    return xorlib.ModelConfig(D, **kw)


def _one_step_config(**kw):
    return xorlib.OneStepConfig(_model_config(), PAIR, **kw)


# ----------------------------------------------------------------------------- the registry
ENTRIES: list[Entry] = [
    # ---- xorlib.task
    Entry("xorlib.task:random_pair", lambda: {"d": D}, {"d": Int(2)}),
    Entry(
        "xorlib.task:sample_xor",
        lambda: {"n": 16, "d": D, "pair": PAIR},
        {"n": Int(1, size=True), "d": Int(2, size=True), "pair": Pair(D)},
    ),
    Entry("xorlib.task:xor_labels", lambda: {"x": samples()[0], "pair": PAIR}, {"x": Tensor((2,), values="signs")}),
    Entry("xorlib.task:all_inputs", lambda: {"d": D}, {"d": Int(2, 22, size=True)}),
    # ---- xorlib.codes, attention, model
    Entry(
        "xorlib.codes:Codes",
        lambda: {"d": D},
        {"d": Int(4), "m": Int(1, 4096, none=True), "kind": Choice(CODE_KINDS)},
    ),
    Entry("xorlib.codes:default_code_dim", lambda: {"d": D}, {"d": Int(4)}),
    Entry(
        "xorlib.attention:attention_weights",
        lambda: {"scores": scores()},
        {"scores": Tensor((1, 2, 3)), "kind": Choice(ATTENTION_KINDS)},
    ),
    Entry(
        "xorlib.model:ModelConfig",
        lambda: {"d": D},
        {
            "d": Int(4),
            "heads": Choice(HEADS),
            "m": Int(1, 4096, none=True),
            "attention": Choice(ATTENTION_KINDS),
            "code_kind": Choice(CODE_KINDS),
            "start": Choice(STARTS, none=True),
            "sigma": Float(0.0, 1e6),
        },
    ),
    Entry(
        "xorlib.model:TwoHeadModel",
        lambda: {"config": _model_config()},
        {"config": Config("xorlib.model:ModelConfig")},
        extra=(("config", "ModelConfig(d=10**12)", lambda _: xorlib.ModelConfig(10**12), ("config", "d", "codes")),),
    ),
    Entry("xorlib.model:readout_constants", lambda: {"heads": "tied"}, {"heads": Choice(HEADS)}),
    # ---- xorlib.population, empirical, certify
    Entry("xorlib.population:population_loss", _pop_example, POPULATION),
    Entry("xorlib.population:population_gradient", _pop_example, POPULATION),
    Entry("xorlib.population:population_score_gradient", _pop_example, POPULATION),
    Entry(
        "xorlib.population:loss_of_weights",
        lambda: {"weights": weights(), "pair": PAIR},
        {"weights": Tensor((2, 3), fixed=(-2,)), "pair": Pair(D), "heads": Choice(HEADS)},
    ),
    Entry("xorlib.empirical:empirical_loss", _emp_example, EMPIRICAL),
    Entry("xorlib.empirical:empirical_gradient", _emp_example, EMPIRICAL),
    Entry("xorlib.empirical:empirical_score_gradient", _emp_example, EMPIRICAL),
    Entry(
        "xorlib.certify:certify_scores",
        lambda: {"scores": scores(), "pair": PAIR},
        {"scores": Tensor((2, 3), fixed=(-2,)), "pair": Pair(D), "heads": Choice(HEADS)},
    ),
    Entry(
        "xorlib.certify:worst_case_loss",
        lambda: {"weights": weights(), "pair": PAIR},
        {"weights": Tensor((2, 3), fixed=(-2,)), "pair": Pair(D), "heads": Choice(HEADS)},
    ),
    Entry(
        "xorlib.certify:WorstCase",
        lambda: _fields(xorlib.worst_case_loss(weights(), PAIR)),
        {name: Instance("a tensor") for name in ("lower", "upper", "exact", "margin")},
    ),
    # ---- xorlib.one_step
    Entry(
        "xorlib.one_step:OneStepConfig",
        lambda: {"model": _model_config(), "pair": PAIR},
        {
            "model": Config("xorlib.model:ModelConfig", others=("xorlib.learners.mlp:MLPConfig",)),
            "pair": Pair(D),
            "n": Int(1, 10**10, none=True),
            "step": STEP,
            "epsilon": EPSILON,
        },
        extra=(
            ("model", "ModelConfig(d=10**12)", lambda _: xorlib.ModelConfig(10**12), ("model", "d")),
            ("model", "ModelConfig(attention='linear')", lambda _: _model_config(attention="linear"), ("model",)),
        ),
    ),
    Entry(
        "xorlib.one_step:one_step",
        lambda: {"d": D},
        {
            "d": ONE_STEP_D,
            "heads": Choice(HEADS),
            "pair": Pair(D, none=True),
            "m": Int(1, 4096, none=True),
            "n": Int(1, 10**10, none=True),
            "sigma": Float(0.0, 1e6),
            "start": Choice(STARTS, none=True),
            "step": STEP,
            "epsilon": EPSILON,
            "code_kind": Choice(CODE_KINDS),
        },
    ),
    Entry(
        "xorlib.one_step:run_one_step",
        lambda: {"config": _one_step_config()},
        {"config": Config("xorlib.one_step:OneStepConfig", others=("xorlib.model:ModelConfig",))},
    ),
    Entry(
        "xorlib.one_step:learning_curve",
        lambda: {"config": _one_step_config(), "sample_sizes": (8, 32)},
        {
            "config": Config("xorlib.one_step:OneStepConfig"),
            "sample_sizes": Seq(Int(1, 10**10), increasing=True),
        },
    ),
    Entry(
        "xorlib.one_step:worst_case_curve",
        lambda: {"config": _one_step_config(), "kappas": [1.0, 10.0]},
        {"config": Config("xorlib.one_step:OneStepConfig"), "kappas": Seq(Float(0.0, 1e12, strict=True))},
    ),
    Entry(
        "xorlib.one_step:OneStepResult",
        lambda: _fields(_one_step_result()),
        {
            "config": Instance("a OneStepConfig", extra=(("a ModelConfig", lambda _: _model_config()),)),
            "rule": Str(),
            "direction_top": Instance("a tuple"),
            "kappa": Number(),
            "lr": Number(),
            "queries_before": Instance("a tensor"),
            "queries_after": Instance("a tensor"),
            "pair_weights": Instance("a tensor"),
            "rest_mass": Instance("a tensor"),
            "found": Instance("a tuple"),
            "worst_case": Instance("a WorstCase"),
            "mean_loss_before": Number(),
            "mean_loss_after": Number(),
            "weights_before": Instance("a tensor", none=True),
            "weights_after": Instance("a tensor", none=True),
        },
    ),
    # ---- xorlib.theory
    Entry("xorlib.theory:tied_worst_case", lambda: {"rest": 0.1}, {"rest": Float(0.0, 0.5), "gap": Float(0.0, 1.0)}),
    Entry(
        "xorlib.theory:tied_margin",
        lambda: {"codes": codes(), "pair": PAIR},
        {"codes": Tensor((2,)), "pair": Pair(D)},
    ),
    Entry("xorlib.theory:rest_mass", lambda: {"scores": scores()[0], "pair": PAIR}, {"scores": Tensor((1,))}),
    Entry(
        "xorlib.theory:rest_mass_bound",
        lambda: {"d": D, "margin": 0.5, "kappa": 10.0},
        {"d": Int(4), "margin": Float(), "kappa": Float(0.0)},
    ),
    Entry(
        "xorlib.theory:typical_rest_mass",
        lambda: {"d": D, "m": 8, "kappa": 2.0},
        {"d": Int(4), "m": Int(1), "kappa": Float(0.0), "rho": Float(-1.0, 1.0)},
    ),
    Entry("xorlib.theory:tied_rest_target", lambda: {"epsilon": 1e-3}, {"epsilon": EPSILON}),
    Entry(
        "xorlib.theory:tied_sharpness",
        lambda: {"d": D, "margin": 0.5, "epsilon": 1e-3},
        {"d": Int(4), "margin": Float(0.0, strict=True), "epsilon": EPSILON},
    ),
    Entry(
        "xorlib.theory:lattice_sharpness",
        lambda: {"d": D, "margin_step": 0.5, "epsilon": 1e-3},
        {"d": Int(4), "margin_step": Float(0.0, strict=True), "epsilon": EPSILON},
    ),
    Entry("xorlib.theory:tie_probability_bound", lambda: {"d": D, "m": 8}, {"d": Int(4), "m": Int(1)}),
    Entry("xorlib.theory:split_rest_target", lambda: {"epsilon": 1e-3}, {"epsilon": Float(0.0, strict=True)}),
    Entry(
        "xorlib.theory:split_step_from_gaps",
        lambda: {
            "d": D,
            "gaps": torch.tensor([0.5, 0.25], dtype=torch.float64),
            "spreads": torch.tensor([0.1, 0.1], dtype=torch.float64),
            "epsilon": 1e-3,
        },
        {
            "d": Int(4),
            "gaps": Tensor((1,), fixed=(0,)),
            "spreads": Tensor((1,), fixed=(0,)),
            "epsilon": Float(0.0, strict=True),
        },
    ),
    Entry(
        "xorlib.theory:split_direction_first_order",
        lambda: {"codes": codes(), "pair": PAIR, "query": queries()[0]},
        {"codes": Tensor((2,), group=("codes", "query")), "query": Tensor((1,), fixed=(0,), group=("codes", "query"))},
    ),
    Entry(
        "xorlib.theory:first_order_split_vector",
        lambda: {"codes": codes(), "pair": PAIR},
        {"codes": Tensor((2,))},
    ),
    Entry(
        "xorlib.theory:split_probability_first_order",
        lambda: {"codes": codes(), "pair": PAIR},
        {"codes": Tensor((2,)), "start": Choice(("independent", "antisymmetric"))},
    ),
    Entry(
        "xorlib.theory:split_sample_bound",
        lambda: {"d": D, "gram_norm": 2.0, "gap": 0.5, "delta": 0.1},
        {
            "d": Int(4),
            "gram_norm": Float(0.0, strict=True),
            "gap": Float(0.0, strict=True),
            "delta": Float(0.0, 1.0, strict=True),
            "theta": Float(0.0),
        },
    ),
    Entry("xorlib.theory:sq_frontier", lambda: {"d": D, "parameters": 16}, {"d": Int(2), "parameters": Int(1)}),
    Entry("xorlib.theory:information_floor", lambda: {"d": D}, {"d": Int(2)}),
    # ---- xorlib.verify, stats, runtime, cache, claims
    Entry(
        "xorlib.verify:enumeration_check",
        lambda: {"d": 6, "m": 5},
        {"d": Int(4, 18, size=True), "m": Int(1, 4096, none=True)},
    ),
    Entry(
        "xorlib.verify:one_head_gap",
        lambda: {"d": 6, "m": 5},
        {"d": Int(4, 22, size=True), "m": Int(1, 4096), "lr": Float(0.0, 1e12)},
    ),
    Entry(
        "xorlib.verify:remainder_ratio",
        lambda: {"d": D, "sigma": 0.1},
        {"d": Int(4, size=True), "sigma": Float(0.0, 1e6)},
    ),
    Entry(
        "xorlib.verify:worst_case_by_enumeration",
        lambda: {"weights": weights(), "pair": PAIR, "heads": "split"},
        {"weights": Tensor((2,), fixed=(0,)), "pair": Pair(D), "heads": Choice(HEADS)},
    ),
    Entry(
        "xorlib.stats:logistic_threshold",
        lambda: {"sample_sizes": [8, 16, 32, 64], "successes": [0, 1, 3, 4], "trials": [4, 4, 4, 4]},
        {
            "sample_sizes": Seq(Float(0.0, strict=True)),
            "successes": Seq(Float(0.0)),
            "trials": Seq(Float(0.0)),
        },
        extra=(
            ("sample_sizes", "one size", lambda s: s[:1], ("sample_sizes",)),
            ("successes", "one fewer", lambda s: s[:-1], ("sample_sizes", "successes", "trials")),
            ("successes", "more than trials", lambda s: [5, *s[1:]], ("successes", "trials")),
        ),
    ),
    Entry(
        "xorlib.stats:power_law",
        lambda: {"x": [8.0, 16.0, 32.0], "y": [1.0, 4.1, 15.9]},
        {"x": Seq(Number(), nonempty=False), "y": Seq(Number(), nonempty=False)},
        extra=(("y", "one fewer", lambda s: s[:-1], ("x", "y")),),
    ),
    Entry(
        "xorlib.stats:bootstrap_exponent",
        lambda: {
            "ds": (8, 16),
            "sample_sizes": ((8, 32, 128, 512), (8, 32, 128, 512)),
            "successes": [g.successes() for g in _grids()],
            "resamples": 10,
        },
        {
            "ds": Seq(Int(1)),
            "sample_sizes": Seq(Seq(Float(0.0, strict=True))),
            "successes": Seq(Instance("a boolean array", extra=(("as int", lambda a: a.astype(int)),))),
            "resamples": Int(10, 10**5),
            "level": Float(0.0, 1.0, strict=True),
        },
        extra=(("ds", "one fewer", lambda s: s[:-1], ("ds", "sample_sizes", "successes")),),
    ),
    Entry("xorlib.runtime:set_progress", lambda: {"show": False}),
    Entry("xorlib.cache:cache_dir", lambda: {}),
    Entry(
        "xorlib.cache:clear_cache",
        lambda: {"function": _cached_function()},
        {"function": Instance("a cached function", none=True, extra=(("len", lambda _: len),))},
    ),
    Entry("xorlib.claims:claims_table", lambda: {"prefix": "../"}, {"prefix": Str()}),
    # ---- xorlib.learners
    Entry(
        "xorlib.learners.training:TrainConfig",
        lambda: {"model": _model_config(), "pair": PAIR, "steps": 2, "gradient": "empirical", "n": 16},
        {
            "model": Config("xorlib.model:ModelConfig", others=("xorlib.one_step:OneStepConfig",)),
            "pair": Pair(D),
            "steps": Int(0, 10**6),
            "optimizer": Choice(("adam", "sgd")),
            "lr": Float(0.0, 1e12, strict=True),
            "gradient": Choice(("population", "empirical")),
            "n": Int(1, 10**8, size=True),
            "epsilon": EPSILON,
        },
    ),
    Entry(
        "xorlib.learners.training:train",
        lambda: {"config": xorlib.learners.training.TrainConfig(_model_config(), PAIR, steps=2)},
        {"config": Config("xorlib.learners.training:TrainConfig", others=("xorlib.model:ModelConfig",))},
        extra=(
            (
                "config",
                "TrainConfig(ModelConfig(d=10**12))",
                lambda _: xorlib.learners.training.TrainConfig(xorlib.ModelConfig(10**12), PAIR),
                ("config", "d"),
            ),
        ),
    ),
    Entry("xorlib.learners.training:DivergenceError", lambda: {}),
    Entry(
        "xorlib.learners.mlp:MLPConfig",
        lambda: {"d": D, "width": 16, "max_steps": 20},
        {
            "d": Int(2, 4096),
            "width": Int(1, 65536),
            "lr": Float(0.0, 1e6, strict=True),
            "batch": Int(1, 65536),
            "max_steps": Int(1, 10**7),
            "eval_n": Int(1, 2**22),
            "screen": Int(0, 10**4),
        },
    ),
    Entry(
        "xorlib.learners.mlp:train_mlp",
        lambda: {"config": xorlib.learners.mlp.MLPConfig(D, width=16, max_steps=20), "pairs": [PAIR]},
        {
            "config": Config("xorlib.learners.mlp:MLPConfig", others=("xorlib.model:ModelConfig",)),
            "pairs": Seq(Pair(D)),
        },
    ),
    Entry(
        "xorlib.learners.mlp:hinge_gradients",
        lambda: {"params": _mlp_params(), "x": samples(dtype=torch.float32)[0], "y": samples(dtype=torch.float32)[1]},
        {
            "params": Instance(
                "an MLPParams",
                extra=(
                    ("a tuple of tensors", lambda p: tuple(p)),
                    ("int64 parameters", lambda p: type(p)(*(t.long() for t in p))),
                ),
            ),
            "x": Tensor((2, 3), fixed=(-1,), group=("x", "y")),
            "y": Tensor((1, 2), fixed=(-1,), group=("x", "y")),
        },
    ),
    Entry(
        "xorlib.learners.authors:AuthorsConfig",
        lambda: {"d": 6, "epochs": 2},
        {
            "d": Int(4, 64),
            "k": Int(1, 6),
            "lr": Float(0.0, 1e6, strict=True),
            "epochs": Int(0, 10**6),
            "train_fraction": Float(0.0, 1.0, strict=True),
            "max_train": Int(1, 10**7),
            "epsilon": Float(0.0, 1.0, strict=True),
            "check_every": Int(1, 10**6),
        },
    ),
    Entry(
        "xorlib.learners.authors:train_authors",
        lambda: {"config": xorlib.learners.authors.AuthorsConfig(6, epochs=2), "supports": [(0, 3)]},
        {
            "config": Config("xorlib.learners.authors:AuthorsConfig", others=("xorlib.learners.mlp:MLPConfig",)),
            "supports": Seq(Tup((Int(0, 5), Int(0, 5)))),
        },
        extra=(("supports", "[(1, 1)]", lambda _: [(1, 1)], ("supports",)),),
    ),
    Entry(
        "xorlib.learners.authors:authors_predict",
        lambda: {
            "a": torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64),
            "bits": (1 - samples()[0]) / 2,
        },
        {"a": Tensor((2, 3), fixed=(-1,)), "bits": Tensor((2, 3), values="bits")},
    ),
    Entry(
        "xorlib.learners.authors:parity_readout",
        lambda: {"count": torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64), "k": 2},
        {"count": Tensor((0, 1, 2, 3)), "k": Int(1, 64)},
    ),
    Entry(
        "xorlib.learners.authors:peak_weight",
        lambda: {"radius": 2.0, "d": D},
        {"radius": Float(0.0, 1e12), "d": Int(2, 10**6, size=True)},
    ),
    Entry(
        "xorlib.learners.authors:radius_for_peak",
        lambda: {"d": D, "weight": 0.5},
        {"d": Int(2, 10**6, size=True), "weight": Float(1 / D, 1.0, strict_max=True)},
    ),
    # ---- xorlib.experiments
    Entry(
        "xorlib.experiments.one_step:one_step_across_d",
        lambda: {"grid": ((D, 1),)},
        {"grid": Seq(Tup((ONE_STEP_D, Int(1)))), "epsilon": EPSILON, "first_seed": Seed()},
    ),
    Entry(
        "xorlib.experiments.one_step:step_size_curves",
        lambda: {"d": D, "sample_sizes": (0, 16), "kappas": (1.0, 100.0), "draws": 1},
        {
            "d": ONE_STEP_D,
            "sample_sizes": Seq(Int(0, 10**10)),
            "kappas": Seq(Float(0.0, 1e12, strict=True)),
            "draws": Int(1),
            "first_seed": Seed(),
        },
    ),
    Entry(
        "xorlib.experiments.one_step:tie_frequency",
        lambda: {"d": D, "draws": 2},
        {"d": Int(4, size=True), "draws": Int(1), "first_seed": Seed()},
    ),
    Entry(
        "xorlib.experiments.one_step:independent_start_split_rates",
        lambda: {"d": D, "sigmas": (1.0,), "starts": 2},
        {"d": Int(4, size=True), "sigmas": Seq(Float(0.0, 1e6)), "starts": Int(1)},
    ),
    Entry(
        "xorlib.experiments.one_step:sigma_sweep",
        lambda: {"d": D, "sigmas": (1.0,), "draws": 1},
        {"d": ONE_STEP_D, "sigmas": Seq(Float(0.0, 1e6)), "draws": Int(1), "first_seed": Seed()},
    ),
    Entry(
        "xorlib.experiments.attention_variants:variant_step",
        lambda: {"config": _model_config(attention="relu"), "pair": PAIR, "kappa": 10.0},
        {"config": Config("xorlib.model:ModelConfig"), "pair": Pair(D), "kappa": Float(0.0, 1e15)},
        extra=(("config", "ModelConfig(d=10**12)", lambda _: xorlib.ModelConfig(10**12), ("config", "d", "codes")),),
    ),
    Entry(
        "xorlib.experiments.attention_variants:variant_table",
        lambda: {"ds": (D,), "kinds": ("relu",), "draws": 1},
        {
            "ds": Seq(Int(4, 4096, size=True)),
            "kinds": Seq(Choice(ATTENTION_KINDS)),
            "draws": Int(1),
            "first_seed": Seed(),
        },
    ),
    Entry(
        "xorlib.experiments.finite_samples:success_grid",
        lambda: {"heads": "split", "d": D, "sample_sizes": (8, 32), "code_draws": 1, "trials": 1},
        {
            "heads": Choice(HEADS),
            "d": Int(4, size=True),
            "sample_sizes": Seq(Int(1, 10**10), increasing=True),
            "code_draws": Int(1),
            "trials": Int(1),
            "epsilon": EPSILON,
            "sigma": Float(0.0, 1e6),
            "first_seed": Seed(),
        },
    ),
    Entry(
        "xorlib.experiments.finite_samples:exponent",
        lambda: {"grids": list(_grids()), "resamples": 10},
        {
            "grids": Seq(Instance("a SuccessGrid")),
            "criterion": Choice(("worst case", "signs")),
            "resamples": Int(10, 10**5),
            "seed": Seed(),
            "level": Float(0.0, 1.0, strict=True),
        },
    ),
    Entry(
        "xorlib.experiments.finite_samples:run",
        lambda: {"plan": {"split": ((D,), 1, 1)}},
        {
            "plan": Instance(
                "a plan",
                extra=(
                    ("{'both': ...}", lambda p: {"both": p["split"]}),
                    ("{'split': ((8,), 1)}", lambda p: {"split": p["split"][:2]}),
                    ("{'split': ((8,), 0, 1)}", lambda p: {"split": (p["split"][0], 0, 1)}),
                    ("{'split': ((2,), 1, 1)}", lambda p: {"split": ((2,), 1, 1)}),
                ),
            ),
            "epsilon": EPSILON,
        },
    ),
    Entry(
        "xorlib.experiments.finite_samples:threshold_table",
        lambda: {"results": {"split": list(_grids())}},
        {
            "results": Instance(
                "a mapping of grids",
                extra=(
                    ("{'both': grids}", lambda r: {"both": r["split"]}),
                    ("{'split': [None]}", lambda r: {"split": [None]}),
                ),
            ),
            "delta": Float(0.0, 1.0, strict=True),
        },
    ),
    Entry(
        "xorlib.experiments.ffnn:lr_grid",
        lambda: {"ds": (4,), "lrs": (1.0,), "trials": 1, "max_steps": 10},
        {
            "ds": Seq(Int(2, 4096, size=True)),
            "lrs": Seq(Float(0.0, 1e6, strict=True)),
            "trials": Int(1, 1000),
            "width": Int(1, 65536, size=True),
            "max_steps": Int(1, 10**7),
        },
    ),
    Entry(
        "xorlib.experiments.ffnn:same_criterion",
        lambda: {"ds": (4,), "trials": 1, "n_max": 64},
        {
            "ds": Seq(Int(4, 4096, size=True)),
            "trials": Int(1, 1000),
            "n_max": Int(64, 2**22, size=True),
            "per_octave": Int(1, 8),
            "mlp_lr": Float(0.0, 1e6, strict=True),
            "width": Int(1, 65536, size=True),
        },
    ),
    Entry(
        "xorlib.experiments.linear_models:frozen_features",
        lambda: {"d": 4, "width": 8, "pairs": 1},
        {"d": Int(3, 16, size=True), "width": Int(1, 4096, size=True), "pairs": Int(1, 6)},
    ),
    Entry(
        "xorlib.experiments.linear_models:linear_bound",
        lambda: {"d": 4, "widths": (4,)},
        {"d": Int(4, 16, size=True), "widths": Seq(Int(1, 4096, size=True))},
    ),
    Entry(
        "xorlib.experiments.multistep:multistep_sweep",
        lambda: {"ds": (D,), "heads": ("split",), "runs": 1, "steps": 2},
        {
            "ds": Seq(Int(4, 4096, size=True)),
            "heads": Seq(Choice(HEADS)),
            "runs": Int(1, 1000),
            "steps": Int(1, 10**5),
            "optimizer": Choice(("adam", "sgd")),
            "lr": Float(0.0, 1e12, strict=True),
        },
    ),
    Entry(
        "xorlib.experiments.authors:authors_comparison",
        lambda: {"ds": (4,), "epochs": (2,), "runs": (1,), "adam_steps": 1},
        {
            "ds": Seq(Int(4, 64, size=True)),
            "epochs": Seq(Int(1, 10**6)),
            "runs": Seq(Int(1, 100)),
            "adam_steps": Int(1, 10**5),
            "mlp_lr": Float(0.0, 1e6, strict=True),
        },
        extra=(("epochs", "one more", lambda s: (*s, *s), ("ds", "epochs", "runs")),),
    ),
    Entry(
        "xorlib.experiments.authors:authors_default",
        lambda: {"runs": 1, "epochs": 0},
        {"runs": Int(1, 100), "epochs": Int(0, 10**6)},
    ),
    # ---- xorlib.plots
    Entry(
        "xorlib.plots.attention:plot_attention",
        lambda: {"weights": weights(), "pair": PAIR},
        {"weights": Tensor((2,), fixed=(0,)), "pair": Pair(D), "ax": AX, "title": Str()},
    ),
    Entry(
        "xorlib.plots.attention:plot_attention_maps",
        lambda: {"rows": [("a step", weights(), PAIR)]},
        {
            "rows": Seq(Tup((Str(), Tensor((2,), fixed=(0,)), Pair(D)), lengths=(3, 4))),
            "floor": Float(0.0, 1.0, strict=True, strict_max=True),
            "fig": FIG,
        },
    ),
    Entry(
        "xorlib.plots.attention:attention_window",
        lambda: {"weights": weights(), "pair": PAIR, "half": 2},
        {"weights": Tensor((2,), fixed=(0,)), "pair": Pair(D), "half": Int(0)},
    ),
    Entry(
        "xorlib.plots.samples:plot_success_curves",
        lambda: {"grids": list(_grids())},
        {"grids": Seq(Instance("a SuccessGrid")), "criterion": Choice(("worst case", "signs")), "ax": AX},
    ),
    Entry(
        "xorlib.plots.samples:plot_sample_thresholds",
        lambda: {"rows": {"split": ((8, 16), (30.0, 120.0)), "reference: d^2": ((8, 16), (64.0, 256.0))}},
        {
            "rows": Instance(
                "a mapping of label to (ds, values)",
                extra=(
                    ("{'x': ((8, 16), (1.0,))}", lambda _: {"x": ((8, 16), (1.0,))}),
                    ("{'x': (8, 16)}", lambda _: {"x": (8, 16)}),
                    ("{3: ((8,), (1.0,))}", lambda _: {3: ((8,), (1.0,))}),
                    ("{'x': (('a',), (1.0,))}", lambda _: {"x": (("a",), (1.0,))}),
                ),
            ),
            "ax": AX,
        },
    ),
    Entry("xorlib.plots.ffnn:plot_lr_grid", lambda: {"result": _lr_grid()}, {"result": Instance("an LrGridResult")}),
    Entry(
        "xorlib.plots.ffnn:plot_same_criterion",
        lambda: {"result": _same_criterion(), "ds": (4,)},
        {"result": Instance("a SameCriterionResult"), "ds": Seq(Int(4), none=True)},
        extra=(("ds", "(64,)", lambda _: (64,), ("ds",)),),
    ),
    Entry(
        "xorlib.plots.ffnn:plot_linear_bound",
        lambda: {"result": _linear_bound()},
        {"result": Instance("a LinearBoundResult")},
    ),
    Entry(
        "xorlib.plots.training:plot_multistep",
        lambda: {"result": _multistep()},
        {"result": Instance("a MultistepResult")},
    ),
    Entry(
        "xorlib.plots.training:plot_authors_margins",
        lambda: {"result": _authors(), "ds": (4,)},
        {"result": Instance("an AuthorsResult"), "ds": Seq(Int(4), none=True)},
        extra=(("ds", "(64,)", lambda _: (64,), ("ds",)),),
    ),
    Entry(
        "xorlib.plots.training:plot_authors_attention",
        lambda: {"result": _authors(), "ds": (4,)},
        {"result": Instance("an AuthorsResult"), "ds": Seq(Int(4), none=True)},
        extra=(("ds", "(64,)", lambda _: (64,), ("ds",)),),
    ),
    Entry(
        "xorlib.plots.style:subplots",
        lambda: {"panels": 2},
        {
            "panels": Int(1, 12),
            "per_row": Int(1, 2),
            "height": Float(1.0, 8.0, none=True),
            "kwargs": Free("passed on to matplotlib's Figure.subplots"),
        },
    ),
    Entry(
        "xorlib.plots.explorer:plot_explorer",
        lambda: {"state": _explorer_state()},
        {"state": Instance("an ExplorerState")},
    ),
    # ---- xorlib.explorer, xorlib.report
    Entry(
        "xorlib.explorer:explorer_state",
        lambda: {"d": D, "kappa": 10.0},
        {
            "d": Int(4, 4096, size=True),
            "heads": Choice(HEADS),
            "attention": Choice(ATTENTION_KINDS),
            "kappa": Float(1e-2 * (1 - 1e-6), 1e8 * (1 + 1e-6)),
            "n": Int(0, 4**10),
            "sigma": Float(0.0, 4.0),
        },
    ),
    Entry(
        "xorlib.explorer:Explorer",
        lambda: {"d": D, "kappa": 10.0},
        {
            "d": Int(8, 4096, size=True),
            "heads": Choice(HEADS),
            "attention": Choice(ATTENTION_KINDS),
            "kappa": Float(1e-2 * (1 - 1e-6), 1e8 * (1 + 1e-6)),
            "n": Int(0, 4**10),
            "sigma": Float(0.0, 4.0),
            "seed": Int(0, 10**6),
        },
        extra=(("d", "9", const(9)[1], ("d",)), ("n", "5", const(5)[1], ("n",))),
    ),
    Entry(
        "xorlib.report:html_table",
        lambda: {"rows": [{"d": 8, "loss": 0.5}]},
        {
            "rows": Instance("an iterable of rows", extra=(("[3]", lambda _: [3]),)),
            "columns": Instance("a sequence or mapping of column names", none=True, extra=(("'d'", lambda _: "d"),)),
            "formats": Instance("a mapping of formats", none=True),
            "caption": Str(none=True),
        },
    ),
    Entry("xorlib.report:in_words", lambda: {"count": 3}, {"count": Int(0)}),
    Entry("xorlib.report:as_power", lambda: {"value": 5.7e-7}, {"value": Number(), "digits": Int(0, 6)}),
    # ---- xorlib.coursework
    Entry("xorlib.coursework.feedback:CheckFailure", lambda: {}),
    Entry(
        "xorlib.coursework.feedback:check",
        lambda: {"question_id": "ch02-q1", "fn": _reference_answer()},
        {"question_id": Choice(_auto_question_ids()), "fn": Instance("a function")},
    ),
    Entry("xorlib.coursework.render:question_table", lambda: {}),
    Entry(
        "xorlib.coursework.gradebook:read_marks",
        lambda: {"path": _file("marks.csv", "student,ch02-w1\nada,1\n")},
        {"path": PathSpec()},
    ),
    Entry(
        "xorlib.coursework.gradebook:grade_all",
        lambda: {"folder": _folder("no-submissions")},
        {
            "folder": PathSpec(),
            "marks": PathSpec(none=True),
            "workers": Int(1, 64),
            "limits": LIMITS,
            "isolation": Choice(("auto", "namespaces", "process")),
            "hide": Seq(PathSpec(), nonempty=False),
        },
    ),
    Entry(
        "xorlib.coursework.grading:grade_notebook",
        lambda: {"path": _file("unknown_chapter.md", "# Not a chapter\n")},
        {
            "path": PathSpec(),
            "student": Str(none=True),
            "limits": LIMITS,
            "isolation": Choice(("auto", "namespaces", "process")),
            "slot": Int(0, 63),
            "hide": Seq(PathSpec(), nonempty=False),
        },
    ),
    Entry(
        "xorlib.coursework.student:write_student_versions",
        lambda: {"paths": [], "out": _folder("student")},
        {"paths": Seq(PathSpec(), nonempty=False), "out": PathSpec()},
    ),
    Entry(
        "xorlib.coursework.sync:sync_chapter",
        lambda: {"path": _file("notes.md", "# No exercises here\n"), "check": True},
        {"path": PathSpec()},
    ),
    Entry(
        "xorlib.coursework.sandbox:Limits",
        lambda: {},
        {
            **{name: Float(0.0, strict=True) for name in ("cell_s", "setup_s", "total_s")},
            **{name: Int(1) for name in ("cpu_s", "memory_mb", "file_mb", "disk_mb", "processes", "output_mb")},
        },
    ),
    Entry(
        "xorlib.coursework.grading:GradeReport",
        lambda: _fields(_grade_report()),
        {
            "notebook": Str(),
            "student": Str(),
            "chapter": Str(none=True),
            "questions": Instance("a tuple of QuestionResult", extra=(("[None]", lambda _: (None,)),)),
            "sandbox": Str(),
            "seconds": Float(0.0),
            "error": Str(none=True),
        },
    ),
    Entry(
        "xorlib.coursework.gradebook:ClassReport",
        lambda: {"reports": (_grade_report(),)},
        {
            "reports": Instance("a tuple of GradeReport", extra=(("(None,)", lambda _: (None,)),)),
            "marks": Instance("a dict of marks", extra=(("{'ada': 3}", lambda _: {"ada": 3}),)),
            "seconds": Float(0.0),
        },
    ),
]

#: Entries by key.
BY_KEY = {entry.key: entry for entry in ENTRIES}


# ----------------------------------------------------------------------------- the public API
def public_callables() -> dict[int, tuple[object, list[str]]]:
    """Every public callable, once: ``{id: (object, its public names "module:name")}``.

    Public: a name in the ``__all__`` of a module whose dotted path has no component starting with ``_``
    (the question bank, ``xorlib.coursework.bank``, is data and is skipped); classes and functions, not
    constants or modules.
    """
    modules = ["xorlib"] + [
        info.name
        for info in pkgutil.walk_packages(xorlib.__path__, "xorlib.")
        if not any(part.startswith("_") for part in info.name.split("."))
        and not info.name.startswith("xorlib.coursework.bank")
    ]
    found: dict[int, tuple[object, list[str]]] = {}
    for name in modules:
        module = importlib.import_module(name)
        for attribute in getattr(module, "__all__", ()):
            obj = getattr(module, attribute)
            if callable(obj) and not inspect.ismodule(obj):
                found.setdefault(id(obj), (obj, []))[1].append(f"{name}:{attribute}")
    return found


# ----------------------------------------------------------------------------- specs of every parameter
def _signature(target: object) -> inspect.Signature:
    if isinstance(target, type) and issubclass(target, BaseException):  # an exception takes any message
        return inspect.Signature([inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL)])
    return inspect.signature(target)


def is_exception(entry: Entry) -> bool:
    """Exceptions take any message: they have no bad arguments."""
    return isinstance(entry.target, type) and issubclass(entry.target, BaseException)


def inferred_spec(name: str, annotation: object) -> Spec | None:
    """The spec a parameter gets from its annotation and name alone (``None``: the registry must give one)."""
    text = str(annotation).replace("'", "")
    none = "None" in text
    if name == "seed" or name.endswith("_seed"):
        return Seed(none=none)
    if name == "device":
        return Device()
    if text.startswith("torch.dtype"):
        return DType()
    if text == "bool":
        return Bool()
    if name == "pair" and text.startswith("tuple[int, int]"):
        return Pair(D, none=none)
    if text.startswith("torch.Tensor"):
        return Tensor((2,), none=none)
    return None


def specs(entry: Entry) -> dict[str, Spec]:
    """The spec of every parameter of ``entry`` (explicit, else inferred); raises naming a parameter without one."""
    out = {}
    for name, parameter in _signature(entry.target).parameters.items():
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            out[name] = Free("extra positional arguments")
            continue
        spec = entry.specs.get(name) or inferred_spec(name, parameter.annotation)
        if spec is None and parameter.kind is inspect.Parameter.VAR_KEYWORD:
            spec = None if name in entry.specs else Free(f"**{name}: its keys have their own specs")
        if spec is None:
            raise LookupError(f"{entry.key}: parameter {name!r} has no spec (add one to the entry)")
        out[name] = spec
    for name, spec in entry.specs.items():  # keys of **kwargs (e.g. exponent's bootstrap options)
        out.setdefault(name, spec)
    return out


def _default(entry: Entry, name: str) -> object:
    parameter = _signature(entry.target).parameters.get(name)
    if parameter is None or parameter.default is inspect.Parameter.empty:
        return MISSING
    return parameter.default


def valid_value(entry: Entry, kwargs: dict[str, object], name: str) -> object:
    """The value of ``name`` in a valid call: the example's, else the default."""
    return kwargs[name] if name in kwargs else _default(entry, name)


def _config_cases(param: str, spec: Config) -> list[Case]:
    """A config argument: wrong types, instances of other configs, and each field of the config bad."""
    target = BY_KEY[spec.key]
    cls = target.target
    wrong = [const(None), const("config"), ("a dict of its fields", lambda _: target.example()), const(object())]
    wrong += [
        (f"a {BY_KEY[k].target.__name__}", lambda _, k=k: BY_KEY[k].target(**BY_KEY[k].example())) for k in spec.others
    ]
    cases = [Case("type", param, tuple(Bad("type", param, text, make, (param,)) for text, make in wrong))]
    for field_name, field_spec in specs(target).items():
        if isinstance(field_spec, Config):
            field_cases = [c for c in _config_cases(field_name, field_spec) if c.category == "type"]
        else:
            field_cases = field_spec.cases(field_name)
        for case in field_cases:

            def build(bad: Bad, field_name: str = field_name) -> Bad:
                def make(_valid: object) -> object:
                    kwargs = target.example()
                    kwargs[field_name] = bad.make(valid_value(target, kwargs, field_name))
                    return cls(**kwargs)

                return Bad(f"field {bad.category}", param, f"{cls.__name__}({field_name}={bad.text})", make, bad.names)

            strategy = None if case.strategy is None else case.strategy.map(build)
            cases.append(Case(f"field {case.category}", param, tuple(build(b) for b in case.canonical), strategy))
    return cases


UNKNOWN = "bogus_argument"


def cases(entry: Entry) -> list[Case]:
    """Every case of bad call of ``entry``: per parameter, per category; an unknown keyword; the entry's extras."""
    out: list[Case] = []
    for name, spec in specs(entry).items():
        out += _config_cases(name, spec) if isinstance(spec, Config) else spec.cases(name)
    if not is_exception(entry):
        out.append(Case("unknown keyword", UNKNOWN, (Bad("unknown keyword", UNKNOWN, "1", lambda _: 1, (UNKNOWN,)),)))
    for param, text, make, names in entry.extra:
        out.append(Case("extra", param, (Bad("extra", param, text, make, names),)))
    return out


def bad_call_strategy(entry: Entry) -> st.SearchStrategy[Bad]:
    """All the bad calls of ``entry``, canonical and generated, as one hypothesis strategy."""
    options = []
    for case in cases(entry):
        options.append(st.sampled_from(case.canonical))
        if case.strategy is not None:
            options.append(case.strategy)
    return st.one_of(*options)
