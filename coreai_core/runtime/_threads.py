"""The thread pool of a running ``Runtime(threads=n)``, visible to the kernels of that run.

Batched kernels (matmul over a stack, convolution over a batch) split their leading axis
into one chunk per thread. Each chunk runs exactly the computation the whole call would run
for those rows (numpy releases the GIL), so the result is bit-identical to one thread.
"""

from __future__ import annotations

import contextlib
import itertools
import math
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from typing import Any

import numpy as np

__all__ = ["active_pool", "parallel_rows", "using_pool"]

_POOL: ContextVar[tuple[ThreadPoolExecutor, int] | None] = ContextVar("coreai_runtime_pool",
                                                                     default=None)
# Below this many multiply-adds a batched kernel runs on the calling thread: splitting
# costs more than it saves.
MIN_PARALLEL_WORK = 1 << 20


@contextlib.contextmanager
def using_pool(pool: ThreadPoolExecutor | None, threads: int) -> Iterator[None]:
    """Make ``pool`` (``threads`` wide) the pool of the kernels run inside the block."""
    if pool is None or threads <= 1:
        yield
        return
    token = _POOL.set((pool, threads))
    try:
        yield
    finally:
        _POOL.reset(token)


def active_pool() -> tuple[ThreadPoolExecutor, int] | None:
    """The pool of the current run and its width, or None (one thread)."""
    return _POOL.get()


def parallel_rows(rows: int, work: int, fn: Callable[[int, int], Any]) -> list[Any] | None:
    """Run ``fn(start, stop)`` over chunks of ``range(rows)`` on the run's pool.

    Returns the chunk results in order, or None when there is no pool, one row, or too
    little ``work`` (then the caller computes everything itself).
    """
    active = _POOL.get()
    if active is None or rows < 2 or work < MIN_PARALLEL_WORK:
        return None
    pool, threads = active
    n = min(threads, rows)
    bounds = [round(i * rows / n) for i in range(n + 1)]
    futures = [pool.submit(fn, a, b) for a, b in itertools.pairwise(bounds) if b > a]
    return [f.result() for f in futures]


def matmul_rows(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray | None:
    """``np.matmul`` of a stack split over its leading axis on the pool, or None."""
    if lhs.ndim < 3 or not (rhs.ndim == 2 or (rhs.ndim == lhs.ndim
                                               and rhs.shape[0] == lhs.shape[0])):
        return None
    shape = (*np.broadcast_shapes(lhs.shape[:-2], rhs.shape[:-2]), lhs.shape[-2],
             rhs.shape[-1])
    if shape[0] != lhs.shape[0]:
        return None
    out = np.empty(shape, np.result_type(lhs, rhs))
    work = math.prod(shape) * lhs.shape[-1]

    def chunk(a: int, b: int) -> None:
        np.matmul(lhs[a:b], rhs if rhs.ndim == 2 else rhs[a:b], out=out[a:b])

    return out if parallel_rows(shape[0], work, chunk) is not None else None
