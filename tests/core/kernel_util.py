"""Shared pieces of the kernel tests: run one op through the runtime, convert to/from torch.

``run_op(build, *arrays)`` builds ``main(x0, x1, ...)`` whose outputs are what ``build``
returns for the input Values, runs it with ``Program.run`` and returns the output arrays.
``check(got, want, rtol, atol)`` compares a numpy result with a torch tensor computed in the
test: shape first, then dtype, then values (NaN == NaN, and -0.0 == 0.0).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import torch
from hypothesis import strategies as st

from coreai_core import DType, Program, TensorType

BF16 = np.dtype(ml_dtypes.bfloat16)
FLOAT_DTYPES = [np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16), BF16]
INT_DTYPES = [np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64, np.uint8)]

seeds = st.integers(0, 2**32 - 1)


def shapes(min_rank: int = 0, max_rank: int = 3, empty: bool = False,
           max_size: int = 3000) -> st.SearchStrategy[tuple[int, ...]]:
    """Shapes with size-1 and odd dims (47), optionally empty ones."""
    dims = st.sampled_from([0, 1, 2, 3, 5, 47] if empty else [1, 2, 3, 5, 47])
    return st.lists(dims, min_size=min_rank, max_size=max_rank).map(tuple).filter(
        lambda s: int(np.prod(s)) <= max_size)


def rand(seed: int, shape: tuple[int, ...], dtype: Any, lo: float = -3.0, hi: float = 3.0,
         specials: bool = False) -> np.ndarray:
    """Random data in [lo, hi) (integers: the dtype's small range); optional NaN/inf/-0."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.asarray(rng.integers(0, 2, size=shape)).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.asarray(rng.integers(max(info.min, -100), min(info.max, 100), size=shape,
                                       endpoint=True)).astype(dtype)
    a = np.asarray(rng.uniform(lo, hi, size=shape))
    if specials and a.size:
        flat = a.reshape(-1)
        picks = rng.integers(0, a.size, size=max(1, a.size // 5))
        flat[picks] = rng.choice([np.nan, np.inf, -np.inf, 0.0, -0.0], size=picks.size)
    return a.astype(dtype)


def to_torch(a: np.ndarray) -> torch.Tensor:
    a = np.array(a)  # a contiguous, writable copy that keeps 0-d arrays 0-d
    if a.dtype == BF16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def from_torch(t: torch.Tensor) -> np.ndarray:
    if t.dtype == torch.bfloat16:
        return t.contiguous().view(torch.int16).numpy().view(BF16)
    return t.numpy()


def run_op(build: Callable[..., Any], *arrays: np.ndarray) -> list[np.ndarray]:
    """Run ``build(*inputs)`` as a one-graph program on ``arrays``; outputs in order."""
    p = Program()
    types = {f"x{i}": TensorType(a.shape, DType.of(a.dtype)) for i, a in enumerate(arrays)}
    with p.graph("main", inputs=types) as g:
        out = build(*[g[n] for n in types])
        g.outputs(list(out) if isinstance(out, (tuple, list)) else [out])
    return list(p.run(dict(zip(types, arrays, strict=True))).values())


def check(got: np.ndarray, want: torch.Tensor | np.ndarray, rtol: float = 0.0,
          atol: float = 0.0) -> None:
    """Shape, then dtype, then values of ``got`` against the torch result ``want``."""
    want_np = from_torch(want) if isinstance(want, torch.Tensor) else np.asarray(want)
    assert got.shape == want_np.shape, f"shape {got.shape} != {want_np.shape}"
    assert got.dtype == want_np.dtype, f"dtype {got.dtype} != {want_np.dtype}"
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want_np)
        return
    np.testing.assert_allclose(got.astype(np.float64), want_np.astype(np.float64),
                               rtol=rtol, atol=atol, equal_nan=True)


TORCH_DTYPE = {np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64,
               np.dtype(np.float16): torch.float16, BF16: torch.bfloat16,
               np.dtype(np.int8): torch.int8, np.dtype(np.int16): torch.int16,
               np.dtype(np.int32): torch.int32, np.dtype(np.int64): torch.int64,
               np.dtype(np.uint8): torch.uint8, np.dtype(np.bool_): torch.bool}
