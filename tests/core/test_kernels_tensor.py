"""Tensor kernels against torch: reductions, arg-reductions, scans, sorting and shape ops."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from coreai_core.dialects import coreai
from tests.core.kernel_util import (
    BF16,
    FLOAT_DTYPES,
    INT_DTYPES,
    check,
    rand,
    run_op,
    seeds,
    shapes,
    to_torch,
)

BOOL = np.dtype(np.bool_)
# (rtol, atol) for float sums/means/products: numpy sums pairwise, torch in vectorized
# chunks, so the rounding differs by a few ulp of the largest partial sum (~47 terms of |x| <
# 3 here); half types accumulate in float32 on both sides and round once at the end.
SUM_TOL = {np.dtype(np.float64): (1e-12, 1e-12), np.dtype(np.float32): (1e-5, 1e-5),
           np.dtype(np.float16): (2e-3, 1e-3), BF16: (1.6e-2, 1e-2)}


@st.composite
def shape_and_axes(draw, empty: bool = False, min_rank: int = 0):
    """A shape and the axes to reduce: None (all) or a non-empty subset, some negative."""
    shape = draw(shapes(min_rank=min_rank, empty=empty))
    if not shape or draw(st.booleans()):
        return shape, None
    picked = draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, unique=True))
    return shape, tuple(a - len(shape) if draw(st.booleans()) else a for a in picked)


def _dims(shape, axes):
    return tuple(range(len(shape))) if axes is None else axes


# -- reductions ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [*FLOAT_DTYPES, *INT_DTYPES], ids=str)
@given(case=shape_and_axes(empty=True), keep=st.booleans(), seed=seeds)
def test_reduce_sum_and_product(dtype, case, keep, seed):
    """Integer results wrap to the input dtype (torch would widen to int64)."""
    shape, axes = case
    x = rand(seed, shape, dtype, -1.5, 1.5)
    t = to_torch(x)
    (got,) = run_op(lambda v: coreai.reduce_sum(v, axes=axes, keep_dims=keep), x)
    want = torch.sum(t, dim=_dims(shape, axes), keepdim=keep) if shape else t
    check(got, want.to(t.dtype), *SUM_TOL.get(dtype, (0, 0)))
    want = t
    for d in sorted((a % len(shape) for a in _dims(shape, axes)), reverse=True):
        want = torch.prod(want, dim=d, keepdim=keep)  # torch.prod takes one dim at a time
    (got,) = run_op(lambda v: coreai.reduce_product(v, axes=axes, keep_dims=keep), x)
    check(got, want.to(t.dtype), *SUM_TOL.get(dtype, (0, 0)))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@given(case=shape_and_axes(empty=True), keep=st.booleans(), seed=seeds)
def test_reduce_mean(dtype, case, keep, seed):
    shape, axes = case
    x = rand(seed, shape, dtype)
    (got,) = run_op(lambda v: coreai.reduce_mean(v, axes=axes, keep_dims=keep), x)
    want = torch.mean(to_torch(x), dim=_dims(shape, axes), keepdim=keep) if shape \
        else to_torch(x)
    check(got, want, *SUM_TOL[dtype])


@pytest.mark.parametrize("dtype", [*FLOAT_DTYPES, *INT_DTYPES, BOOL], ids=str)
@given(case=shape_and_axes(), keep=st.booleans(), seed=seeds)
def test_reduce_max_min_all_any(dtype, case, keep, seed):
    """max/min propagate NaN like torch.amax/amin (exact)."""
    shape, axes = case
    x = rand(seed, shape, dtype, specials=True)
    t = to_torch(x)
    dims = _dims(shape, axes)
    for build, ref in [(coreai.reduce_max, torch.amax), (coreai.reduce_min, torch.amin),
                       (coreai.all_, torch.all), (coreai.any_, torch.any)]:
        (got,) = run_op(lambda v, b=build: b(v, axes=axes, keep_dims=keep), x)
        want = ref(t, dim=dims, keepdim=keep) if shape else ref(t)
        # torch.all/any keep uint8 for uint8 input; the op's type rule says bool.
        check(got, want.bool() if ref in (torch.all, torch.any) else want)


@pytest.mark.parametrize("dtype", [*FLOAT_DTYPES, *INT_DTYPES, BOOL], ids=str)
@given(shape=shapes(min_rank=1), keep=st.booleans(), seed=seeds, data=st.data())
def test_argmax_argmin_first_occurrence_and_nan(dtype, shape, keep, seed, data):
    axis = data.draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1)))
    x = rand(seed, shape, dtype, -2, 2, specials=True)
    if dtype.kind == "f":
        x = np.round(x)  # ties
    t = to_torch(x).to(torch.uint8) if dtype == BOOL else to_torch(x)  # torch: no bool argmax
    for build, ref in [(coreai.argmax, torch.argmax), (coreai.argmin, torch.argmin)]:
        (got,) = run_op(lambda v, b=build: b(v, axis=axis, keep_dims=keep), x)
        check(got, ref(t, dim=axis, keepdim=keep))


# -- scans ---------------------------------------------------------------------------------------

def _torch_scan(t: torch.Tensor, dim: int, kind: str, reverse: bool, exclusive: bool):
    if reverse:
        t = torch.flip(t, (dim,))
    if kind == "sum":
        r = torch.cumsum(t, dim).to(t.dtype)
    elif kind == "product":
        r = torch.cumprod(t, dim).to(t.dtype)
    else:
        r = (torch.cummax if kind == "max" else torch.cummin)(t, dim).values
    if exclusive and r.shape[dim]:
        first = torch.narrow(r, dim, 0, 1).clone()
        identity = {"sum": 0, "product": 1}.get(kind)
        if identity is None:
            lowest = kind == "max"
            if t.dtype == torch.bool:
                identity = not lowest
            elif t.dtype.is_floating_point:
                identity = -float("inf") if lowest else float("inf")
            else:
                info = torch.iinfo(t.dtype)
                identity = info.min if lowest else info.max
        first.fill_(identity)
        r = torch.cat([first, torch.narrow(r, dim, 0, r.shape[dim] - 1)], dim)
    return torch.flip(r, (dim,)) if reverse else r


@pytest.mark.parametrize("kind", ["sum", "product", "max", "min"])
@pytest.mark.parametrize("dtype", [*FLOAT_DTYPES, *INT_DTYPES, BOOL], ids=str)
@given(shape=shapes(min_rank=1, empty=True), seed=seeds, reverse=st.booleans(),
       exclusive=st.booleans(), data=st.data())
def test_scan(kind, dtype, shape, seed, reverse, exclusive, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = rand(seed, shape, dtype, -1.5, 1.5, specials=kind in ("max", "min"))
    (got,) = run_op(lambda v: coreai.scan(v, axis=axis, kind=kind, reverse=reverse,
                                          exclusive=exclusive), x)
    want = _torch_scan(to_torch(x), axis % len(shape), kind, reverse, exclusive)
    if dtype == BOOL:
        want = want.bool()
    check(got, want, *SUM_TOL.get(dtype, (0, 0)))


# -- sorting -------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [*FLOAT_DTYPES, *INT_DTYPES, BOOL], ids=str)
@given(shape=shapes(min_rank=1, empty=True), seed=seeds, descending=st.booleans(),
       data=st.data())
def test_sort_and_argsort_are_stable_with_nan_largest(dtype, shape, seed, descending, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = rand(seed, shape, dtype, -2, 2, specials=True)
    if dtype.kind == "f":
        x = np.round(x)  # ties, and both signed zeros
    values, indices = run_op(lambda v: coreai.sort(v, axis=axis, descending=descending), x)
    want = torch.sort(to_torch(x), dim=axis, descending=descending, stable=True)
    check(values, want.values)
    check(indices, want.indices)
    (got,) = run_op(lambda v: coreai.argsort(v, axis=axis, descending=descending), x)
    check(got, torch.argsort(to_torch(x), dim=axis, descending=descending, stable=True))


@pytest.mark.parametrize("dtype", [*FLOAT_DTYPES, np.dtype(np.int32), np.dtype(np.uint8)],
                         ids=str)
@given(shape=shapes(min_rank=1), seed=seeds, largest=st.booleans(), data=st.data())
def test_topk(dtype, shape, seed, largest, data):
    """Values and indices equal torch's CPU kernel's, ties included (the rule is in
    ``coreai_core/runtime/kernels/_select.py``; tests/torch/test_topk_ties.py goes further)."""
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    k = data.draw(st.integers(0, shape[axis]))
    is_sorted = data.draw(st.booleans())
    rng = np.random.default_rng(seed)
    distinct = rng.permutation(np.arange(int(np.prod(shape))) % 250).reshape(shape)
    for x in (distinct.astype(dtype), rand(seed, shape, dtype, -2, 2).round()):
        values, indices = run_op(lambda v: coreai.topk(v, k=k, axis=axis, largest=largest,
                                                       sorted=is_sorted), x)
        want = torch.topk(to_torch(x), k, dim=axis, largest=largest, sorted=is_sorted)
        check(values, want.values)
        check(indices, want.indices)
    ties = np.array([1.0, 3.0, 3.0, np.nan, 3.0, 1.0], np.float32)
    values, indices = run_op(lambda v: coreai.topk(v, k=3), ties)
    check(indices, torch.topk(to_torch(ties), 3).indices)  # NaN is largest


# -- shape ops -----------------------------------------------------------------------------------

@given(shape=shapes(empty=True), seed=seeds, data=st.data())
def test_reshape_transpose_reverse_get_shape(shape, seed, data):
    x = rand(seed, shape, np.float32)
    t = to_torch(x)
    perm = data.draw(st.permutations(range(len(shape))))
    (got,) = run_op(lambda v: coreai.transpose(v, perm), x)
    check(got, torch.permute(t, perm))
    axes = data.draw(st.lists(st.integers(0, max(len(shape) - 1, 0)), unique=True,
                              max_size=len(shape)))
    (got,) = run_op(lambda v: coreai.reverse(v, axes), x)
    check(got, torch.flip(t, axes))
    (got,) = run_op(coreai.get_shape, x)
    check(got, torch.tensor(t.shape, dtype=torch.int64))
    flat = [int(np.prod(shape))]
    target = data.draw(st.sampled_from([flat, [-1], [1, *shape, 1], [*shape[::-1]]]))
    (got,) = run_op(lambda v: coreai.reshape(v, np.array(target, np.int64)), x)
    check(got, torch.reshape(t, target))


@given(shape=shapes(), seed=seeds, data=st.data())
def test_expand_shrink_broadcast_tile(shape, seed, data):
    x = rand(seed, shape, np.int16)
    t = to_torch(x)
    rank = len(shape) + 2
    axes = data.draw(st.lists(st.integers(-rank, rank - 1), min_size=2, max_size=2,
                              unique_by=lambda a: a % rank))
    (got,) = run_op(lambda v: coreai.expand_dims(v, axes), x)
    want = t
    for a in sorted(a % rank for a in axes):
        want = torch.unsqueeze(want, a)
    check(got, want)
    ones = tuple(i for i, d in enumerate(shape) if d == 1)
    (got,) = run_op(lambda v: coreai.shrink_dims(v, ones), x)
    check(got, torch.squeeze(t, ones) if ones else t)
    target = [3, *[data.draw(st.sampled_from([1, 4])) if d == 1 else d for d in shape]]
    (got,) = run_op(lambda v: coreai.broadcast_to(v, np.array(target, np.int64)), x)
    check(got, torch.broadcast_to(t, target))
    reps = data.draw(st.lists(st.integers(0, 3), min_size=len(shape), max_size=len(shape)))
    (got,) = run_op(lambda v: coreai.tile(v, reps), x)
    check(got, torch.tile(t, reps) if shape else t)


@given(shape=shapes(min_rank=1, empty=True), seed=seeds, data=st.data())
def test_concat_and_split(shape, seed, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    sizes = data.draw(st.lists(st.integers(0, 4), min_size=1, max_size=4))
    parts = []
    for i, n in enumerate(sizes):
        s = list(shape)
        s[axis] = n
        parts.append(rand(seed + i, tuple(s), BF16))
    (got,) = run_op(lambda *vs: coreai.concat(list(vs), axis), *parts)
    joined = torch.cat([to_torch(p) for p in parts], axis)
    check(got, joined)
    pieces = run_op(lambda v: coreai.split(v, sizes, axis), got)
    for piece, want in zip(pieces, torch.split(joined, sizes, axis), strict=True):
        check(piece, want)


def _indices(n: int, b: int, e: int, s: int) -> list[int]:
    return list(range(*slice(b, e, s).indices(n)))


@st.composite
def windows(draw, shape):
    """Slice bounds (out of range and negative ones included) on a subset of the axes."""
    axes = draw(st.lists(st.integers(0, len(shape) - 1), unique=True, max_size=len(shape)))
    begin = [draw(st.integers(-60, 60)) for _ in axes]
    end = [draw(st.integers(-60, 60)) for _ in axes]
    strides = [draw(st.sampled_from([1, 2, 3, -1, -2])) for _ in axes]
    return axes, begin, end, strides


def _torch_window(shape, axes, begin, end, strides):
    """Per-axis index lists (torch has no negative steps, so index explicitly)."""
    index = [list(range(n)) for n in shape]
    for a, b, e, s in zip(axes, begin, end, strides, strict=True):
        index[a] = _indices(shape[a], b, e, s)
    return torch.meshgrid(*[torch.tensor(i, dtype=torch.int64) for i in index], indexing="ij")


@given(shape=shapes(min_rank=1), seed=seeds, data=st.data())
def test_slice_and_slice_update(shape, seed, data):
    axes, begin, end, strides = data.draw(windows(shape))
    x = rand(seed, shape, np.float64)
    b, e = np.array(begin, np.int64), np.array(end, np.int64)
    (got,) = run_op(lambda v, bv, ev: coreai.slice_(v, bv, ev, axes, strides), x, b, e)
    grid = _torch_window(shape, axes, begin, end, strides)
    check(got, to_torch(x)[grid])
    update = rand(seed + 1, got.shape, np.float64)
    (got,) = run_op(lambda v, u, bv, ev: coreai.slice_update(v, u, bv, ev, axes, strides),
                    x, update, b, e)
    want = to_torch(x).clone()
    want[grid] = to_torch(update)
    check(got, want)


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@given(spatial=shapes(min_rank=1, max_rank=2), seed=seeds, data=st.data())
def test_pad(mode, spatial, seed, data):
    """torch.nn.functional.pad on [N, C, *spatial] (its pads list the last axis first)."""
    shape = (2, 3, *spatial)
    pads: list[int] = [0, 0, 0, 0]
    for n in spatial:
        lo_bound = -n // 2 if mode == "constant" else 0  # negative pads crop
        # torch: reflect pads must be smaller than the axis, circular ones at most its size
        hi_bound = {"reflect": n - 1, "circular": n}.get(mode, 4)
        pads += [data.draw(st.integers(lo_bound, hi_bound)) for _ in range(2)]
    x = rand(seed, shape, np.float32)
    value = 1.5 if mode == "constant" else 0.0
    (got,) = run_op(lambda v: coreai.pad(v, pads, mode=mode, value=value), x)
    torch_pads = [p for i in reversed(range(2, len(shape))) for p in pads[2 * i:2 * i + 2]]
    if mode == "constant":
        want = F.pad(to_torch(x), torch_pads, mode="constant", value=value)
    else:
        want = F.pad(to_torch(x), torch_pads, mode=mode)
    check(got, want)


@pytest.mark.parametrize("dtype", [np.dtype(np.int64), np.dtype(np.int32),
                                   np.dtype(np.float32), np.dtype(np.float64)], ids=str)
@given(start=st.integers(-20, 20), length=st.integers(0, 30), step=st.sampled_from(
    [1, 2, 3, -1, -2, 0.5, 0.3, -0.7]))
def test_range_matches_arange(dtype, start, length, step):
    if dtype.kind == "i":
        step = int(step) or 1
    s = np.array(start, dtype)
    st_ = np.array(step, dtype)
    e = np.array(start + length * float(st_), dtype)
    (got,) = run_op(coreai.range_, s, e, st_)
    want = torch.arange(s.item(), e.item(), st_.item(), dtype=to_torch(s).dtype)
    # torch's vectorized arange adds multiples of step to a per-chunk base in float64, so a
    # value can differ from start + i * step in the last ulp (then rounded to the dtype).
    check(got, want, {np.dtype(np.float64): 5e-16, np.dtype(np.float32): 1.2e-7}.get(dtype, 0))


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@given(n=st.integers(1, 6), seed=seeds, data=st.data())
def test_pad_with_a_negative_side(mode, n, seed, data):
    """One side crops, the other pads: reflect/replicate pad from the input's own edges and then
    crop (even when the crop removes every input element); circular wraps the cropped part."""
    if mode == "reflect":
        n = max(n, 2)  # reflect pads must be smaller than the axis
    if mode == "circular":  # torch wraps the cropped tensor: it must keep enough elements
        lo = -data.draw(st.integers(1, max(n - 1, 1)))
        hi = data.draw(st.integers(0, n + lo))
    else:
        lo = -data.draw(st.integers(1, n))
        hi = data.draw(st.integers(max(0, -n - lo + 1), n - 1 if mode == "reflect" else 4))
    if n + lo + hi <= 0 or (mode == "circular" and n + lo <= 0):
        return
    lo, hi = (lo, hi) if data.draw(st.booleans()) else (hi, lo)
    x = rand(seed, (1, 2, n), np.float32)
    (got,) = run_op(lambda v: coreai.pad(v, [0, 0, 0, 0, lo, hi], mode=mode), x)
    check(got, F.pad(to_torch(x).clone(), [lo, hi], mode=mode))
