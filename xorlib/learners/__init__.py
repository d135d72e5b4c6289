"""Learners: the procedures that turn data into a trained model (floor 2, private modules).

* :func:`xorlib.one_step` (``_one_step``): one certified gradient step of the tied or the split model,
  streamed over the positions;
* ``_training``: multi-step training of the two-head model (Adam or SGD, population or empirical gradient);
* ``_mlp``: the feed-forward baseline, a two-layer ReLU network trained by online SGD with the
  protocol of Barak et al. (2022);
* ``_authors``: the authors' own model of the paper's first version, reimplemented from its description.

Only :func:`one_step` is public (``xorlib.one_step``); the experiments (:mod:`xorlib.experiments`) call the others,
which trust their callers (the experiments' plans check every size and count). Every learner raises
``DivergenceError`` (a ``ValueError``) when its loss turns non-finite, instead of reporting a meaningless accuracy.
"""

from ._one_step import one_step

__all__ = ["one_step"]  # also xorlib.one_step, the reader's one line
