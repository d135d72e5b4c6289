"""The settings of a grading run, checked once (shared by :mod:`xorlib.coursework` and the Gradescope autograder)."""

from __future__ import annotations

from pathlib import Path

from ._build import grading_build
from .gradebook import Config
from .grading import Grading
from .sandbox import SANDBOXES, Limits, check_private, choose_tier, site_dirs

__all__ = []  # internal to xorlib.coursework

#: The seed of the hidden cases anyone can compute (the bank is public): for practice only.
PUBLIC_SEED = 0


def grading_settings(seed: object, practice: object, limits: object, sandbox: object, trusted: object, config: Config,
             private: list) -> Grading:  # fmt: skip
    """The settings of a grading run, checked once: the seed's rule, the limits, the tier (and its privacy)."""
    for name, value in (("practice", practice), ("trusted", trusted)):
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be True or False, got {type(value).__name__}")
    if seed is None and not practice:
        raise ValueError("seed is required for summative grading: pass your private seed (seed=..., SEED=... or "
                         f"--seed-file), or practice=True (--practice) to grade with the public seed {PUBLIC_SEED}")  # fmt: skip
    seed = PUBLIC_SEED if seed is None else seed
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise ValueError(f"seed must be an int in [0, 2**63), got {seed!r}")
    if seed == PUBLIC_SEED and not practice:
        raise ValueError(f"seed {PUBLIC_SEED} is public (anyone can compute its hidden cases): pass your private seed "
                         "for summative grading, or practice=True (--practice)")  # fmt: skip
    limits = Limits() if limits is None else limits
    if not isinstance(limits, Limits):
        raise TypeError(f"limits must be a sandbox Limits or None, got {type(limits).__name__}")
    if sandbox not in SANDBOXES:
        raise ValueError(f"sandbox must be one of {', '.join(SANDBOXES)}, got {sandbox!r}")
    tier = choose_tier(sandbox, grading_build(), trusted=trusted)
    package = Path(__file__).resolve().parents[1]
    secret = [package, *(Path(s) / "xorlib" for s in site_dirs()), *[p for p in private if p is not None]]
    check_private(tier, grading_build(), [str(p) for p in secret], seed if seed != PUBLIC_SEED else -1)
    return Grading(seed, limits, tier, dict(config.points))
