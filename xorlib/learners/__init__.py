"""Learners: the procedures that turn data into a trained model.

* :mod:`xorlib.learners.training`: multi-step training of the two-head model
  (tied or split heads, population or empirical gradient, Adam or SGD);
* :mod:`xorlib.learners.mlp`: the feed-forward baseline, a two-layer ReLU
  network trained by online SGD with the protocol of Barak et al. (2022);
* :mod:`xorlib.learners.authors`: the authors' own model of the paper's first
  version, reimplemented from its description.

Every learner raises :class:`xorlib.learners.training.DivergenceError` when its
loss turns non-finite, instead of reporting a meaningless accuracy.
"""
