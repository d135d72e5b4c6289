"""xorlib: the code behind the book *Sparse XOR in one step*.

The package is built in floors that only look down:

1. **maths core**: :mod:`~xorlib.task` (the sparse XOR task), :mod:`~xorlib.codes`
   (positional codes, dense or streamed), :mod:`~xorlib.attention` (normalisers),
   :mod:`~xorlib.model` (the tied and the split two-head models),
   :mod:`~xorlib.population` and :mod:`~xorlib.empirical` (losses and gradients in
   closed form), :mod:`~xorlib.certify` (the worst case over all inputs),
   :mod:`~xorlib.theory` (the book's formulas);
2. **learners**: :mod:`~xorlib.one_step` and :mod:`~xorlib.learners` (multi-step
   training, the MLP baseline, the authors' model);
3. **experiments**: :mod:`~xorlib.experiments`, each returning a typed result;
4. **presentation**: :mod:`~xorlib.plots`, :mod:`~xorlib.report`, the explorer;
5. **tooling**: :mod:`~xorlib.cache`, :mod:`~xorlib.coursework`.

The one-line entry for readers is :func:`one_step`.
"""

from __future__ import annotations

from .certify import WorstCase, certify_scores, worst_case_loss
from .codes import Codes, default_code_dim
from .model import ModelConfig, TwoHeadModel
from .one_step import OneStepConfig, OneStepResult, one_step, run_one_step
from .runtime import set_progress
from .task import all_inputs, random_pair, sample_xor, xor_labels

__version__ = "0.2.0"

__all__ = [
    "Codes",
    "ModelConfig",
    "OneStepConfig",
    "OneStepResult",
    "TwoHeadModel",
    "WorstCase",
    "all_inputs",
    "certify_scores",
    "default_code_dim",
    "one_step",
    "random_pair",
    "run_one_step",
    "sample_xor",
    "set_progress",
    "worst_case_loss",
    "xor_labels",
]
