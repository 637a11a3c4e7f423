"""The threads of a running ``Runtime(threads=n)``: its pool and its BLAS thread limit.

Batched kernels (matmul over a stack, convolution over a batch) split their leading axis
into one chunk per thread. Each chunk runs exactly the computation the whole call would run
for those rows (numpy releases the GIL), so the result is bit-identical to one thread. A
kernel with fixed blocks of its own (a stack times one weight: row blocks) hands them to
:func:`parallel_blocks`, which runs the same blocks on any number of threads.

During a run the BLAS libraries numpy and scipy call (OpenBLAS, MKL, ...) run on one thread
(``BLAS_THREADS``), set with ``threadpoolctl`` and restored afterwards. Their own default (one
thread per core) contends with torch's and the runtime's threads: it made real-size models
13-53x slower on a busy 2-core machine. And threaded BLAS does not give the same bits: OpenBLAS
splits the sum of a long matrix-vector product (numpy's path for a matmul with a unit dim)
between its threads, so a run's parallelism is the runtime's own pool, whose chunks are
independent rows.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from typing import Any

import numpy as np
from threadpoolctl import ThreadpoolController

__all__ = ["BlasThreads", "active_pool", "parallel_blocks", "parallel_rows", "using_pool"]

_POOL: ContextVar[tuple[ThreadPoolExecutor, int] | None] = ContextVar("coreai_runtime_pool",
                                                                     default=None)
# Below this many multiply-adds a batched kernel runs on the calling thread: splitting
# costs more than it saves.
MIN_PARALLEL_WORK = 1 << 20
# BLAS threads during a run: more would change the bits of long matrix-vector products.
BLAS_THREADS = 1


class BlasThreads:
    """The BLAS libraries of the process, held at a thread count inside :meth:`limited` blocks.

    The libraries are found once, on first use (threadpoolctl's scan of the loaded shared
    libraries takes milliseconds); a block then costs a few microseconds: it reads each
    library's current count and sets only those that differ, restoring them on exit. The
    count is process-wide: concurrent runs in several Python threads all want the same one.
    """

    def __init__(self) -> None:
        self._libraries: list[Any] | None = None
        self._lock = threading.Lock()

    def _blas(self) -> list[Any]:
        with self._lock:
            if self._libraries is None:
                self._libraries = ThreadpoolController().select(user_api="blas").lib_controllers
            return self._libraries

    def limited(self, threads: int) -> _BlasLimit:
        """A context manager: BLAS runs on ``threads`` threads inside the block, on the
        caller's count again after it."""
        return _BlasLimit(self._blas(), threads)


class _BlasLimit:
    """One ``with`` block of :meth:`BlasThreads.limited` (a class: a run pays its entry)."""

    __slots__ = ("_changed", "_libraries", "_wanted")

    def __init__(self, libraries: list[Any], wanted: int) -> None:
        self._libraries, self._wanted = libraries, wanted
        self._changed: list[tuple[Any, int]] = []

    def __enter__(self) -> None:
        for lib in self._libraries:
            current = lib.num_threads
            if current != self._wanted:
                lib.set_num_threads(self._wanted)
                self._changed.append((lib, current))

    def __exit__(self, *exc: object) -> None:
        for lib, previous in self._changed:
            lib.set_num_threads(previous)


@contextlib.contextmanager
def using_pool(pool: ThreadPoolExecutor | None, threads: int,
               blas: BlasThreads | None = None) -> Iterator[None]:
    """Make ``pool`` (``threads`` wide) the pool of the kernels run inside the block, with
    ``blas`` (when given) held at ``BLAS_THREADS``."""
    with blas.limited(BLAS_THREADS) if blas is not None else contextlib.nullcontext():
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


def parallel_blocks(count: int, work: int, fn: Callable[[int], Any]) -> bool:
    """Run ``fn(i)`` for every ``i`` in ``range(count)``: spread over the run's pool when there
    is one, several blocks and enough ``work``; in order on the calling thread otherwise.

    The blocks are the caller's, whatever the thread count, so a kernel whose blocks are
    fixed computes the same bits on any number of threads. Returns whether the pool ran them.
    """
    active = _POOL.get()
    if active is None or count < 2 or work < MIN_PARALLEL_WORK:
        for i in range(count):
            fn(i)
        return False
    pool, _ = active
    for future in [pool.submit(fn, i) for i in range(count)]:
        future.result()
    return True


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
