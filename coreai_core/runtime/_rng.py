"""The random-number generator of a run, handed to random kernels without global state.

``Runtime.run(..., seed=)`` opens :func:`seeded` for the duration of the run; random kernels
(``coreai.random_*``, and custom kernels that need randomness) call :func:`current_generator`.
The generator lives in a ``ContextVar``, so concurrent runs in threads (or asyncio tasks)
never share or leak a stream, and nothing outlives the run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

import numpy as np

__all__ = ["Seed", "current_generator", "seeded"]

Seed = int | np.random.SeedSequence | np.random.Generator | None

_GENERATOR: ContextVar[np.random.Generator | None] = ContextVar("coreai_generator", default=None)


def make_generator(seed: Seed) -> np.random.Generator:
    """A numpy ``Generator`` (PCG64) for ``seed``; fresh OS entropy when ``seed`` is None.

    A ``Generator`` passed in is used as is (its stream continues across runs).
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not (seed is None or isinstance(seed, (int, np.integer,
                                                                       np.random.SeedSequence))):
        raise TypeError("seed must be None, a non-negative int, a numpy SeedSequence or a numpy "
                        f"Generator, got {type(seed).__name__}")
    if isinstance(seed, (int, np.integer)) and seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed}")
    return np.random.default_rng(seed)


@contextlib.contextmanager
def seeded(seed: Seed = None) -> Iterator[np.random.Generator | None]:
    """Make ``make_generator(seed)`` the current generator inside the ``with`` block.

    ``seed=None`` changes nothing: draws use an enclosing block's generator, else fresh
    entropy (so an unseeded run pays nothing for a generator it may not need).
    """
    if seed is None:
        yield _GENERATOR.get()
        return
    token = _GENERATOR.set(make_generator(seed))
    try:
        yield _GENERATOR.get()
    finally:
        _GENERATOR.reset(token)


def current_generator() -> np.random.Generator:
    """The generator of the seeded run (or ``seeded`` block) in progress.

    Without one (an unseeded run, a kernel called directly, ``evaluate_op``) there is no seed
    to honour: each call returns a new generator with fresh OS entropy.
    """
    gen = _GENERATOR.get()
    return gen if gen is not None else np.random.default_rng()
