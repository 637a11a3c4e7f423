"""Indexing kernels against torch: gather family, scatter (with reductions), non_zero."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from coreai_core.dialects import coreai
from coreai_core.runtime import KernelError
from tests.core.kernel_util import BF16, FLOAT_DTYPES, check, rand, run_op, seeds, shapes, to_torch

DTYPES = [*FLOAT_DTYPES, np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.uint8)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@given(shape=shapes(min_rank=1), index_shape=shapes(max_rank=2, empty=True), seed=seeds,
       data=st.data())
def test_gather_is_take(dtype, shape, index_shape, seed, data):
    """Negative indices count from the end, like torch advanced indexing."""
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    n = shape[axis]
    idx = np.random.default_rng(seed).integers(-n, n, size=index_shape).astype(np.int64)
    x = rand(seed, shape, dtype)
    (got,) = run_op(lambda v, i: coreai.gather(v, i, axis=axis), x, idx)
    lead = (slice(None),) * (axis % len(shape))
    check(got, to_torch(x)[(*lead, to_torch(idx))])


def test_gather_out_of_range_is_a_kernel_error():
    with pytest.raises(KernelError, match=r"coreai\.gather .*IndexError"):
        run_op(lambda v, i: coreai.gather(v, i), np.zeros(3, np.float32),
               np.array([3], np.int64))


@st.composite
def index_like(draw, shape):
    """An index shape no larger than ``shape`` on each axis (torch.gather's rule)."""
    return tuple(draw(st.integers(1 if d else 0, d)) for d in shape)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@given(shape=shapes(min_rank=1), seed=seeds, data=st.data())
def test_gather_along_axis_is_torch_gather(dtype, shape, seed, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    ishape = data.draw(index_like(shape))
    idx = np.random.default_rng(seed).integers(0, shape[axis], size=ishape).astype(np.int64)
    x = rand(seed, shape, dtype)
    (got,) = run_op(lambda v, i: coreai.gather_along_axis(v, i, axis=axis), x, idx)
    check(got, torch.gather(to_torch(x), axis, to_torch(idx)))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@given(shape=shapes(min_rank=1), batch=shapes(max_rank=2), seed=seeds, data=st.data())
def test_gather_nd_is_advanced_indexing(dtype, shape, batch, seed, data):
    k = data.draw(st.integers(1, len(shape)))
    rng = np.random.default_rng(seed)
    idx = np.stack([rng.integers(-d, d, size=batch) for d in shape[:k]], -1).astype(np.int32)
    x = rand(seed, shape, dtype)
    (got,) = run_op(coreai.gather_nd, x, idx)
    t_idx = to_torch(idx).long()
    check(got, to_torch(x)[tuple(t_idx[..., i] for i in range(k))])


REDUCE = {"add": "sum", "mul": "prod", "max": "amax", "min": "amin", "mean": "mean"}


@pytest.mark.parametrize("reduction", ["add", "mul", "max", "min", "mean"])
@pytest.mark.parametrize("dtype", [*FLOAT_DTYPES, np.dtype(np.int32), np.dtype(np.int64)],
                         ids=str)
@given(shape=shapes(min_rank=1), seed=seeds, include_self=st.booleans(), data=st.data())
def test_scatter_reduce_matches_torch(reduction, dtype, shape, seed, include_self, data):
    """Duplicate indices accumulate; include_self and integer mean (floor) like torch."""
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    ishape = data.draw(index_like(shape))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, shape[axis], size=ishape).astype(np.int64)
    x = rand(seed, shape, dtype, -2, 2, specials=reduction in ("max", "min"))
    src = rand(seed + 1, tuple(d + 1 for d in ishape), dtype, -2, 2)  # larger than index
    (got,) = run_op(lambda a, i, u: coreai.scatter_along_axis(
        a, i, u, axis=axis, reduction=reduction, include_self=include_self), x, idx, src)
    want = torch.scatter_reduce(to_torch(x), axis, to_torch(idx), to_torch(src),
                                REDUCE[reduction], include_self=include_self)
    # Float sums/products run in index order on both sides; float16/bfloat16 round after
    # every step in torch but the mean's division is done once in float32 here.
    tol = {np.dtype(np.float16): (2e-3, 2e-3), BF16: (1.6e-2, 1.6e-2),
           np.dtype(np.float32): (1e-6, 1e-6), np.dtype(np.float64): (1e-12, 1e-12)}
    check(got, want, *tol.get(dtype, (0, 0)))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@given(shape=shapes(min_rank=1), seed=seeds, data=st.data())
def test_scatter_without_reduction_writes_updates(dtype, shape, seed, data):
    """Each output position is written at most once (torch leaves duplicates undefined)."""
    axis = data.draw(st.integers(-len(shape), len(shape) - 1)) % len(shape)
    ishape = data.draw(index_like(shape))
    rng = np.random.default_rng(seed)
    perm = np.argsort(rng.random(shape), axis=axis)  # distinct positions along the axis
    idx = perm[tuple(slice(0, n) for n in ishape)].astype(np.int64)
    x, src = rand(seed, shape, dtype), rand(seed + 1, ishape, dtype)
    (got,) = run_op(lambda a, i, u: coreai.scatter_along_axis(a, i, u, axis=axis), x, idx, src)
    check(got, torch.scatter(to_torch(x), axis, to_torch(idx), to_torch(src)))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@given(shape=shapes(min_rank=1), batch=shapes(min_rank=1, max_rank=2), seed=seeds,
       data=st.data())
def test_scatter_nd_matches_index_put(dtype, shape, batch, seed, data):
    k = data.draw(st.integers(1, len(shape)))
    rng = np.random.default_rng(seed)
    idx = np.stack([rng.integers(-d, d, size=batch) for d in shape[:k]], -1).astype(np.int64)
    updates = rand(seed + 1, batch + shape[k:], dtype)
    x = rand(seed, shape, dtype)
    t_idx = tuple(to_torch(idx)[..., i] for i in range(k))
    (got,) = run_op(lambda a, i, u: coreai.scatter_nd(a, i, u, accumulate=True), x, idx,
                    updates)
    want = to_torch(x).index_put(t_idx, to_torch(updates), accumulate=True)
    # float16/bfloat16: torch accumulates duplicates in the half type, numpy too, but the
    # order of equal-index additions may differ: allow a few ulp of the sums.
    tol = {np.dtype(np.float16): (4e-3, 4e-3), BF16: (3e-2, 3e-2),
           np.dtype(np.float32): (1e-6, 1e-6), np.dtype(np.float64): (1e-12, 1e-12)}
    check(got, want, *tol.get(dtype, (0, 0)))
    # Without accumulate, keep one update per position (torch leaves duplicates undefined).
    flat = np.ravel_multi_index(tuple((idx[..., i] % shape[i]) for i in range(k)), shape[:k])
    _, first = np.unique(flat.reshape(-1), return_index=True)
    rows = idx.reshape(-1, k)[first]
    row_updates = updates.reshape(-1, *shape[k:])[first]
    (got,) = run_op(lambda a, i, u: coreai.scatter_nd(a, i, u), x, rows, row_updates)
    want = to_torch(x).index_put(tuple(to_torch(rows)[:, i] for i in range(k)),
                                 to_torch(row_updates))
    check(got, want)


def test_scatter_nd_broadcasts_updates():
    x = np.zeros((4, 3), np.float32)
    idx = np.array([[0], [2], [0]], np.int64)
    (got,) = run_op(lambda a, i, u: coreai.scatter_nd(a, i, u, accumulate=True), x, idx,
                    np.array([1.0, 2.0, 3.0], np.float32))
    want = torch.zeros(4, 3).index_put((torch.tensor([0, 2, 0]),),
                                       torch.tensor([1.0, 2.0, 3.0]), accumulate=True)
    check(got, want)


@pytest.mark.parametrize("dtype", [*DTYPES, np.dtype(np.bool_)], ids=str)
@given(shape=shapes(empty=True), seed=seeds)
def test_non_zero_row_major(dtype, shape, seed):
    x = rand(seed, shape, dtype, -1, 1, specials=dtype.kind == "f")
    if dtype.kind in "iu":
        x = (x % 3).astype(dtype)  # plenty of zeros
    (got,) = run_op(coreai.non_zero, x)
    check(got, torch.nonzero(to_torch(x)))


@pytest.mark.parametrize("dtype", [np.dtype(np.complex64), np.dtype(np.complex128)], ids=str)
@given(shape=shapes(empty=True), seed=seeds)
def test_non_zero_of_complex_counts_either_part(dtype, shape, seed):
    """A complex element is nonzero when its real or its imaginary part is (-0.0 is zero)."""
    rng = np.random.default_rng(seed)
    parts = [np.where(rng.random(shape) < 0.5, rng.choice([0.0, -0.0], shape),
                      rng.uniform(-1, 1, shape)) for _ in range(2)]
    x = np.empty(shape, dtype)
    x.real, x.imag = parts  # not re + 1j * im: that would turn a -0.0 imaginary part into +0.0
    (got,) = run_op(coreai.non_zero, x)
    check(got, torch.nonzero(to_torch(x)))
