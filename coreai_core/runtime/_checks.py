"""Checks of what kernels return against the op's declared types (shared by both executors)."""

from __future__ import annotations

from typing import Any

import numpy as np

_ndarray = np.ndarray


def check_result(r: Any, expect: tuple[np.dtype, int]) -> np.ndarray:
    if isinstance(r, (tuple, list)) and len(r) == 1:
        r = r[0]
    if r.__class__ is not _ndarray:
        r = np.asarray(r)
    dtype, ndim = expect
    if r.dtype != dtype:
        raise TypeError(f"kernel returned {r.dtype}, but the op's type says {dtype}")
    if r.ndim != ndim:
        raise TypeError(f"kernel returned a rank-{r.ndim} array, but the op's type has "
                        f"rank {ndim}")
    return r


def check_results(r: Any, expect: tuple[tuple[np.dtype, int], ...]) -> list[np.ndarray]:
    if isinstance(r, np.ndarray) and len(expect) == 1:
        r = [r]
    if not isinstance(r, (tuple, list)) or len(r) != len(expect):
        n = len(r) if isinstance(r, (tuple, list)) else 1
        raise TypeError(f"kernel returned {n} result(s), but the op has {len(expect)}")
    return [check_result(v, e) for v, e in zip(r, expect, strict=True)]
