"""Small builders shared by the chapters' test cases: codes, random tensors, weights, samples, case lists.

Every draw is seeded by a label, so that adding a case never shifts another.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import torch

from ...codes import Codes
from ...task import random_pair, sample_xor
from ..questions import Case

#: The teacher's setup: run before the answer cells, in the book, the student version and the grader.
SETUP = "import math\n\nimport torch\n"


def cases(build: Callable[..., Case], *specs: tuple) -> Callable[[], tuple[Case, ...]]:
    """A question's ``public`` cases: ``build(*spec)`` for each spec."""
    return lambda: tuple(build(*spec) for spec in specs)


def seeded(build: Callable[..., Case], *specs: tuple) -> Callable[[int], tuple[Case, ...]]:
    """A question's ``hidden`` cases: ``build(*spec, seed)``, the teacher's seed the last label of every draw."""
    return lambda seed: tuple(build(*spec, seed) for spec in specs)


def seed_of(*labels: object) -> int:
    """A 63-bit seed derived from labels (stable across runs and machines)."""
    digest = hashlib.sha256(repr(labels).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def generator(*labels: object) -> torch.Generator:
    """A CPU generator seeded from labels."""
    return torch.Generator().manual_seed(seed_of(*labels))


def gaussian(shape: tuple[int, ...], scale: float, *labels: object) -> torch.Tensor:
    """Independent normal entries times ``scale``, float64."""
    return scale * torch.randn(shape, generator=generator(*labels), dtype=torch.float64)


def codes(d: int, m: int, kind: str, *labels: object) -> torch.Tensor:
    """The dense code matrix ``(d, m)`` of :class:`xorlib.codes.Codes`, its seed drawn from labels."""
    return Codes(d, m, seed=seed_of("codes", *labels) % 2**31, kind=kind).dense()


def pair(d: int, *labels: object) -> tuple[int, int]:
    """A hidden pair drawn from labels."""
    return random_pair(d, seed=seed_of(*labels) % 2**31)


def samples(n: int, d: int, hidden: tuple[int, int], *labels: object) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` labelled samples ``(x, y)`` of the task with the hidden pair."""
    return sample_xor(n, d, hidden, seed=seed_of(*labels) % 2**31)


def peaked_scores(d: int, hidden: tuple[int, int], height: float, noise: float, *labels: object) -> torch.Tensor:
    """Scores ``(d,)``: Gaussian noise, with the two hidden positions raised by ``height``."""
    s = gaussian((d,), noise, *labels)
    s[list(hidden)] += height
    return s


def weight_gradient(
    weights: torch.Tensor, hidden: tuple[int, int], c0: float, c1: float, *, label: bool = True
) -> torch.Tensor:
    r""":math:`\partial L/\partial \alpha_h` of the population loss, ``(2, d)`` (the closed form of :mod:`xorlib.population`).

    ``label=False`` drops the two label terms :math:`-c_1(\delta_{ju} b_v + \delta_{jv} b_u)`, for a diagnosis.
    """
    u, v = hidden
    grads = []
    for own, other in ((weights[0], weights[1]), (weights[1], weights[0])):
        g = c1**2 * (own * (other @ other) + 2 * (own @ other) * other - 2 * own * other**2) - c1 * c0 * other
        if label:
            g[u] -= c1 * other[v]
            g[v] -= c1 * other[u]
        grads.append(g)
    return torch.stack(grads)


def gradient_mistakes(
    queries: torch.Tensor, codes: torch.Tensor, hidden: tuple[int, int], c0: float, c1: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """The query gradient as three classic mistakes compute it: ``(no centring, no label term)``, each ``(2, m)``."""
    weights = torch.softmax(queries @ codes.T, -1)
    g = weight_gradient(weights, hidden, c0, c1)
    unlabelled = weight_gradient(weights, hidden, c0, c1, label=False)
    no_label = weights * (unlabelled - (weights * unlabelled).sum(-1, keepdim=True))
    return (weights * g) @ codes, no_label @ codes
