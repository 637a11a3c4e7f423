"""The threads of a running ``Runtime``: its pool, its BLAS thread limit and its fixed blocks.

A kernel that spreads work over threads cuts it into blocks whose boundaries depend on the
shapes only (:func:`fixed_bounds`), never on the thread count; every block runs on one
thread with BLAS on one thread, and writes its own part of the result (or returns a partial
result the caller combines in block order). One thread runs the same blocks in order, so
results are bit-identical on any number of threads: parallelism changes who computes a
block, never what a block computes.

During a run the BLAS libraries numpy and scipy call (OpenBLAS, MKL, ...) run on one thread
(``BLAS_THREADS``), set with ``threadpoolctl`` and restored afterwards. Their own default (one
thread per core) contends with torch's and the runtime's threads: it made real-size models
13-53x slower on a busy 2-core machine. And threaded BLAS does not give the same bits: OpenBLAS
splits the sum of a long matrix-vector product (numpy's path for a matmul with a unit dim)
between its threads, so a run's parallelism is the runtime's own pool.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import ThreadpoolController

__all__ = ["BLAS", "BlasThreads", "RunContext", "active_pool", "available_cores", "fixed_bounds",
           "in_row_blocks", "parallel_chunks"]

_POOL: ContextVar[tuple[ThreadPoolExecutor, int] | None] = ContextVar("coreai_runtime_pool",
                                                                     default=None)
# Multiply-adds (or equivalent) of one block: ~0.3-0.5 ms on one core (OpenBLAS runs 35-60
# float32 G multiply-adds/s per core), so the hand-off of blocks to threads stays under a few
# percent; work below two blocks runs as one. (A quarter of this, ~0.1 ms blocks, gave a
# second core only 1.1-1.4x on BERT's products instead of 1.6-1.9x.)
BLOCK_WORK = 1 << 24
# One numpy pass over one element (a ufunc with out=, memory-bound) costs about this many of
# BLAS's multiply-adds: the work of elementwise blocks is counted in passes times this.
PASS_COST = 32
# At most this many blocks per kernel call: enough to balance 16 threads, few enough that the
# hand-offs stay cheap.
MAX_BLOCKS = 64
# BLAS threads during a run: more would change the bits of long matrix-vector products.
BLAS_THREADS = 1


def available_cores() -> int:
    """The cores this process may run on: its CPU affinity, capped by a cgroup CPU quota
    (v2 ``cpu.max``, v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``); at least 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    quota = _cgroup_quota(Path("/sys/fs/cgroup"))
    if quota is not None:
        cores = min(cores, max(1, math.ceil(quota)))
    return max(1, cores)


def _cgroup_quota(root: Path) -> float | None:
    """The CPU quota of the cgroup under ``root`` in cores, or None when unlimited/unknown."""
    try:
        v2 = root / "cpu.max"
        if v2.is_file():
            quota, _, period = v2.read_text().partition(" ")
            if quota.strip() == "max":
                return None
            return int(quota) / int(period or "100000")
        v1 = root / "cpu" / "cpu.cfs_quota_us"
        if not v1.is_file():
            v1 = root / "cpu,cpuacct" / "cpu.cfs_quota_us"
        if v1.is_file():
            quota_us = int(v1.read_text())
            period_us = int((v1.parent / "cpu.cfs_period_us").read_text())
            return quota_us / period_us if quota_us > 0 and period_us > 0 else None
    except (OSError, ValueError):
        return None
    return None


class BlasThreads:
    """The BLAS libraries of the process, held at ``BLAS_THREADS`` while any run is under way.

    The libraries are found once, on first use (threadpoolctl's scan of the loaded shared
    libraries takes milliseconds). The thread count of a BLAS library is process-wide, so one
    object (:data:`BLAS`) serves every runtime: the first run to start sets the count (only
    where it differs) and the last one to end restores the caller's, so concurrent runs in
    several Python threads never see each other's restore. For OpenBLAS on its own threads
    (numpy's and scipy's wheels) the library's get/set functions are called directly (the
    functions threadpoolctl calls, found by the same symbol names): through threadpoolctl's
    generic methods a run paid ~8 us for it.
    """

    def __init__(self) -> None:
        self._libraries: list[tuple[Callable[[], int], Callable[[int], Any]]] | None = None
        self._lock = threading.Lock()
        self._holders = 0
        self._saved: list[tuple[Callable[[int], Any], int]] = []

    def _blas(self) -> list[tuple[Callable[[], int], Callable[[int], Any]]]:
        libraries = self._libraries
        if libraries is None:
            with self._lock:
                if self._libraries is None:
                    controllers = ThreadpoolController().select(user_api="blas").lib_controllers
                    self._libraries = [_get_set(lib) for lib in controllers]
                libraries = self._libraries
        return libraries

    def __enter__(self) -> None:
        libraries = self._blas()
        with self._lock:
            if self._holders == 0:
                for get, set_ in libraries:
                    current = get()
                    if current != BLAS_THREADS:
                        set_(BLAS_THREADS)
                        self._saved.append((set_, current))
            self._holders += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._holders -= 1
            if self._holders == 0:
                for set_, previous in self._saved:
                    set_(previous)
                self._saved.clear()


def _get_set(lib: Any) -> tuple[Callable[[], int], Callable[[int], Any]]:
    """The thread-count getter and setter of a threadpoolctl library controller."""
    dynlib = getattr(lib, "dynlib", None)
    if (lib.internal_api == "openblas" and getattr(lib, "threading_layer", "") != "openmp"
            and dynlib is not None):
        for prefix, suffix in itertools.product(("", "scipy_"), ("", "64_", "_64")):
            get = getattr(dynlib, f"{prefix}openblas_get_num_threads{suffix}", None)
            set_ = getattr(dynlib, f"{prefix}openblas_set_num_threads{suffix}", None)
            if get is not None and set_ is not None:
                return get, set_
    return (lambda: lib.num_threads), lib.set_num_threads


# The process's BLAS thread count is one for all runtimes: one holder for all of them.
BLAS = BlasThreads()


class RunContext:
    """The context of one run: BLAS held at ``BLAS_THREADS`` (unless ``blas`` is False: a run
    that cannot call BLAS) and ``pool`` (``threads`` wide, or None) the pool of the kernels run
    inside it. A class: a run pays only its entry."""

    __slots__ = ("_active", "_blas", "_token")

    def __init__(self, pool: ThreadPoolExecutor | None, threads: int,
                 blas: bool = True) -> None:
        self._active = (pool, threads) if pool is not None and threads > 1 else None
        self._blas = blas
        self._token: Any = None

    def __enter__(self) -> None:
        if self._blas:
            BLAS.__enter__()
        if self._active is not None:
            self._token = _POOL.set(self._active)

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _POOL.reset(self._token)
        if self._blas:
            BLAS.__exit__()


def active_pool() -> tuple[ThreadPoolExecutor, int] | None:
    """The pool of the current run and its width, or None (one thread, or inside a block:
    the pool's threads do not see it, so a block never waits on the pool it runs on)."""
    return _POOL.get()


def fixed_bounds(count: int, work: int, quantum: int = 1) -> list[int]:
    """Boundaries ``[0, ..., count]`` of blocks of ``range(count)`` for ``work`` in total.

    A function of its arguments only (the shapes), never of the thread count: about
    ``work / BLOCK_WORK`` blocks (at most ``MAX_BLOCKS``, at most one per ``quantum`` items),
    of equal size rounded up to a multiple of ``quantum``, the last one shorter.
    """
    if count <= 0:
        return [0, max(count, 0)]
    blocks = min(MAX_BLOCKS, max(1, work // BLOCK_WORK), max(1, count // quantum))
    size = -(-count // blocks)
    size = -(-size // quantum) * quantum
    return [*range(0, count, size), count]


def parallel_chunks(bounds: list[int], fn: Callable[[int, int], Any]) -> list[Any]:
    """``[fn(a, b) for a, b in consecutive bounds]``, the calls spread over the run's pool
    when there is one and several chunks, in order on the calling thread otherwise. The
    results come back in chunk order either way.

    The calling thread and up to ``width - 1`` pool threads each take the next block not yet
    taken until none is left: one hand-off per thread rather than per block (a future per
    block cost ~20-50 us of contended Python each and halved the gain of a second core on
    BERT's products), and a thread that finishes early takes more blocks. Which thread runs
    a block never changes what the block computes.
    """
    pairs = list(itertools.pairwise(bounds))
    active = _POOL.get()
    if active is None or len(pairs) < 2:
        return [fn(a, b) for a, b in pairs]
    pool, width = active
    results: list[Any] = [None] * len(pairs)
    taken = itertools.count()  # next() on it is atomic: each index goes to one thread
    failed: list[BaseException] = []

    def take_blocks() -> None:
        for i in taken:
            if i >= len(pairs) or failed:
                return
            try:
                results[i] = fn(*pairs[i])
            except BaseException as error:
                failed.append(error)
                raise

    helpers = [pool.submit(take_blocks) for _ in range(min(width, len(pairs)) - 1)]
    try:
        take_blocks()
    finally:
        for helper in helpers:  # wait for every block in flight, even after an error
            with contextlib.suppress(BaseException):
                helper.result()
    if failed:
        raise failed[0]
    return results


def in_row_blocks(x: np.ndarray, keep: int, passes: int,
                  fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """``fn(x)`` for a ``fn`` that treats every index of the leading ``keep`` axes alike and
    independently (a reduction or softmax over later axes): run over fixed blocks of those
    axes merged into rows (one axis, of size 1 when ``keep`` is 0), the results joined along
    them. ``passes``: numpy passes over the data ``fn`` makes (for the size of the blocks).
    Small inputs run as one call on all rows."""
    rows = math.prod(x.shape[:keep])
    flat = x.reshape(rows, *x.shape[keep:])  # fn always sees one leading axis of rows
    work = passes * PASS_COST * x.size
    if rows < 2 or work < 2 * BLOCK_WORK:
        y = fn(flat)
    else:
        y = np.concatenate(parallel_chunks(fixed_bounds(rows, work),
                                           lambda a, b: fn(flat[a:b])))
    return y.reshape((*x.shape[:keep], *y.shape[1:]))
