"""The package's one progress switch: :func:`set_progress` shows or hides every progress bar.

Functions never take a ``progress`` flag; the long computations (the experiments) ask the switch.
``XORLIB_PROGRESS=1`` in the environment turns bars on at import; they are off by default, so that
the built book stays free of bar output. No cache key depends on the switch.
"""

from __future__ import annotations

from ._runtime import set_progress

__all__ = ["set_progress"]
