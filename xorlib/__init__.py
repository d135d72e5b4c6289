"""xorlib: the code behind the book *Transformers learn sparse XOR in one step*.

Each module is one idea: :mod:`~xorlib.data` (the task), :mod:`~xorlib.codes`
(positional codes), :mod:`~xorlib.attention` (normalisers), :mod:`~xorlib.model`
(the two-head Transformer), :mod:`~xorlib.gradient` (closed-form population
gradient, one-step update and exact worst case).
"""

from __future__ import annotations

__version__ = "0.1.0"
