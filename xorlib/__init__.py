"""xorlib: the code behind the book *Sparse XOR in one step*.

The package is built in floors that only look down:

1. **maths core**: :mod:`~xorlib.task` (the sparse XOR task), :mod:`~xorlib.codes`
   (positional codes, dense or streamed), :mod:`~xorlib.model` (the tied and the split
   two-head models, :class:`~xorlib.model.ModelConfig`, the one config the core takes),
   :mod:`~xorlib.attention` (normalisers), :mod:`~xorlib.population` and
   :mod:`~xorlib.empirical` (losses and gradients in closed form), :mod:`~xorlib.certify`
   (the worst case over all inputs), :mod:`~xorlib.theory` (the book's formulas);
2. **learners**: :func:`one_step` (and, privately, multi-step training, the MLP baseline,
   the authors' model);
3. **experiments**: :mod:`~xorlib.experiments`, one registry of frozen plans and typed results;
4. **presentation**: :mod:`~xorlib.plots`, :mod:`~xorlib.report`, :mod:`~xorlib.explorer`,
   :mod:`~xorlib.claims`;
5. **tooling**: :mod:`~xorlib.coursework`, and at the side the disk cache and the progress
   switch (:mod:`~xorlib.runtime`).

The one-line entry for readers is :func:`one_step`.
"""

from __future__ import annotations

#: The package's version: the one place it is written (``pyproject.toml`` and the disk cache's key read it here).
__version__ = "0.2.0"

from .learners._one_step import one_step

__all__ = ["one_step"]
