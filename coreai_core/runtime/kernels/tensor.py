"""Numpy kernels of the tensor ops: reductions, scans, sorting, shape ops and indexing.

Results keep the dtype the op's type rule gives (numpy would widen integer sums and
products; they are computed wide and wrapped back, which is exact modulo 2**bits).
float16/bfloat16 accumulate in float32 like PyTorch's CPU reductions.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np

from coreai_core.runtime import _threads
from coreai_core.runtime.kernels._registry import KernelSet
from coreai_core.runtime.kernels._select import topk_indices
from coreai_core.runtime.kernels.elementwise import F32, HALF, up

KERNELS = KernelSet("tensor")
kernel = KERNELS.register

Ints = Sequence[int]
# the reductions call ufunc.reduce (np.sum without its Python wrapper: a microsecond per call);
# typed Any: numpy's stubs accept keepdims only as a literal
_ADD: Any = np.add
_MAXIMUM: Any = np.maximum
_MINIMUM: Any = np.minimum


def _axes(axes: Ints | None) -> tuple[int, ...] | None:
    return None if axes is None else tuple(axes)


def _wide(dtype: np.dtype) -> np.dtype | None:
    """Accumulator for integer sums/products: 64-bit of the same signedness."""
    if dtype.kind == "i":
        return np.dtype(np.int64)
    if dtype.kind == "u":
        return np.dtype(np.uint64)
    return None


# -- reductions ----------------------------------------------------------------------------------

# Elements below which a reduction runs as one call (two passes under one block of work).
_MIN_SPLIT_SIZE = _threads.BLOCK_WORK // _threads.PASS_COST


def _by_rows(reduce: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """A reduction run in fixed blocks of the axes before its first reduced one, on the run's
    pool (each row's reduction is the same computation whatever the block)."""

    def run(x: np.ndarray, *, axes: Ints | None, keep_dims: bool) -> np.ndarray:
        if x.size < _MIN_SPLIT_SIZE or not axes or x.ndim == 0:
            return reduce(x, axes=axes, keep_dims=keep_dims)
        ax = sorted(a % x.ndim for a in axes)
        keep = ax[0]
        shifted = [a - keep + 1 for a in ax]
        return _threads.in_row_blocks(
            x, keep, 2, lambda rows: reduce(rows, axes=shifted, keep_dims=keep_dims))

    run.__name__, run.__doc__ = reduce.__name__, reduce.__doc__
    return run


@kernel("coreai.reduce_sum")
@_by_rows
def reduce_sum(x: np.ndarray, *, axes: Ints | None, keep_dims: bool) -> np.ndarray:
    """Sum over axes; integers wrap to their dtype, half types accumulate in float32."""
    r = _ADD.reduce(up(x), axis=_axes(axes), keepdims=keep_dims, dtype=_wide(x.dtype))
    return np.asarray(r).astype(x.dtype, copy=False)


@kernel("coreai.reduce_product")
def reduce_product(x: np.ndarray, *, axes: Ints | None, keep_dims: bool) -> np.ndarray:
    """Product over axes (wrapping for integers)."""
    r = np.prod(up(x), axis=_axes(axes), keepdims=keep_dims, dtype=_wide(x.dtype))
    return np.asarray(r).astype(x.dtype, copy=False)


@kernel("coreai.reduce_mean")
@_by_rows
def reduce_mean(x: np.ndarray, *, axes: Ints | None, keep_dims: bool) -> np.ndarray:
    """Mean over axes (NaN for an empty reduction, like torch)."""
    y = up(x)
    ax = _axes(axes)
    count = y.size if ax is None else math.prod(y.shape[a] for a in ax)
    r = _ADD.reduce(y, axis=ax, keepdims=keep_dims) / y.dtype.type(count)  # 0/0: NaN
    return np.asarray(r).astype(x.dtype, copy=False)


@kernel("coreai.reduce_max")
@_by_rows
def reduce_max(x: np.ndarray, *, axes: Ints | None, keep_dims: bool) -> np.ndarray:
    """Max over axes, NaN propagates."""
    return np.asarray(_MAXIMUM.reduce(up(x), axis=_axes(axes), keepdims=keep_dims)
                      ).astype(x.dtype)


@kernel("coreai.reduce_min")
@_by_rows
def reduce_min(x: np.ndarray, *, axes: Ints | None, keep_dims: bool) -> np.ndarray:
    """Min over axes, NaN propagates."""
    return np.asarray(_MINIMUM.reduce(up(x), axis=_axes(axes), keepdims=keep_dims)
                      ).astype(x.dtype)


@kernel("coreai.all")
def all_(x: np.ndarray, *, axes: Ints | None, keep_dims: bool) -> np.ndarray:
    """True where every element is nonzero."""
    return np.asarray(np.all(up(x), axis=_axes(axes), keepdims=keep_dims))


@kernel("coreai.any")
def any_(x: np.ndarray, *, axes: Ints | None, keep_dims: bool) -> np.ndarray:
    """True where some element is nonzero."""
    return np.asarray(np.any(up(x), axis=_axes(axes), keepdims=keep_dims))


def _arg(fn: Callable[..., np.ndarray], x: np.ndarray, axis: int | None, keep_dims: bool,
         ) -> np.ndarray:
    if x.ndim == 0:
        return np.zeros((), np.int64)
    return np.asarray(fn(up(x), axis=axis, keepdims=keep_dims)).astype(np.int64, copy=False)


@kernel("coreai.argmax")
def argmax(x: np.ndarray, *, axis: int | None, keep_dims: bool) -> np.ndarray:
    """Index of the first maximum; the first NaN wins, like torch."""
    return _arg(np.argmax, x, axis, keep_dims)


@kernel("coreai.argmin")
def argmin(x: np.ndarray, *, axis: int | None, keep_dims: bool) -> np.ndarray:
    """Index of the first minimum; the first NaN wins, like torch."""
    return _arg(np.argmin, x, axis, keep_dims)


# -- scans ---------------------------------------------------------------------------------------

def _identity(kind: str, dtype: np.dtype) -> object:
    if kind == "sum":
        return 0
    if kind == "product":
        return 1
    if dtype == np.bool_:
        return kind == "min"
    if dtype.kind == "f" or dtype in HALF:
        return -np.inf if kind == "max" else np.inf
    info = np.iinfo(dtype)
    return info.min if kind == "max" else info.max


@kernel("coreai.scan")
def scan(x: np.ndarray, *, axis: int, kind: str, reverse: bool, exclusive: bool) -> np.ndarray:
    """Cumulative sum/product/max/min (NaN propagates), optionally reversed or exclusive."""
    if x.ndim == 0:
        return scan(x.reshape(1), axis=0, kind=kind, reverse=reverse,
                    exclusive=exclusive).reshape(())
    y = up(x)
    if reverse:
        y = np.flip(y, axis)
    if kind in ("sum", "product"):
        fn = np.cumsum if kind == "sum" else np.cumprod
        r = fn(y, axis=axis, dtype=y.dtype)
    else:
        r = (np.maximum if kind == "max" else np.minimum).accumulate(y, axis=axis)
    if exclusive:
        first = [slice(None)] * r.ndim
        first[axis] = slice(0, 1)
        shifted = np.empty_like(r)
        shifted[tuple(first)] = _identity(kind, r.dtype)
        body = list(first)
        body[axis] = slice(1, None)
        rest = list(first)
        rest[axis] = slice(0, -1)
        shifted[tuple(body)] = r[tuple(rest)]
        r = shifted
    if reverse:
        r = np.flip(r, axis)
    return r.astype(x.dtype, copy=False)


# -- sorting -------------------------------------------------------------------------------------

def sort_indices(x: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """Stable sort order along ``axis``; NaN is the largest value, ties keep index order."""
    y = up(x)
    if not descending:
        return np.argsort(y, axis=axis, kind="stable")
    # Sorting the reversed array ascending and reversing the result is descending with
    # ties still in increasing index order (and NaN first).
    idx = np.argsort(np.flip(y, axis), axis=axis, kind="stable")
    return np.flip(y.shape[axis] - 1 - idx, axis)


@kernel("coreai.sort")
def sort(x: np.ndarray, *, axis: int, descending: bool, stable: bool,
         ) -> tuple[np.ndarray, np.ndarray]:
    """Sorted values and int64 indices (always stable, which satisfies stable=False)."""
    if x.ndim == 0:
        return x, np.zeros((), np.int64)
    idx = sort_indices(x, axis, descending)
    return np.take_along_axis(x, idx, axis), idx.astype(np.int64, copy=False)


@kernel("coreai.argsort")
def argsort(x: np.ndarray, *, axis: int, descending: bool, stable: bool) -> np.ndarray:
    """int64 indices that sort x along axis (stable)."""
    if x.ndim == 0:
        return np.zeros((), np.int64)
    return sort_indices(x, axis, descending).astype(np.int64, copy=False)


@kernel("coreai.topk")
def topk(x: np.ndarray, *, k: int, axis: int, largest: bool, sorted: bool,
         ) -> tuple[np.ndarray, np.ndarray]:
    """k largest/smallest along axis; ties picked and ordered as torch's CPU kernel does
    (see :mod:`._select`)."""
    if x.ndim == 0:
        return x, np.zeros((), np.int64)
    idx = np.moveaxis(topk_indices(np.moveaxis(x, axis, -1), k, largest, sorted), -1, axis)
    return np.take_along_axis(x, idx, axis), idx


# -- shape ---------------------------------------------------------------------------------------

def _ints(a: np.ndarray) -> tuple[int, ...]:
    return tuple(int(v) for v in np.asarray(a).reshape(-1).tolist())


@kernel("coreai.reshape")
def reshape(x: np.ndarray, shape: np.ndarray) -> np.ndarray:
    """Row-major reshape (a view when possible)."""
    return np.reshape(x, _ints(shape))


@kernel("coreai.broadcast_to")
def broadcast_to(x: np.ndarray, shape: np.ndarray) -> np.ndarray:
    """numpy broadcasting to shape (a read-only view)."""
    return np.broadcast_to(x, _ints(shape))


@kernel("coreai.transpose")
def transpose(x: np.ndarray, *, perm: Ints) -> np.ndarray:
    """Permute axes (a view)."""
    return np.transpose(x, perm)


@kernel("coreai.expand_dims")
def expand_dims(x: np.ndarray, *, axes: Ints) -> np.ndarray:
    """Insert size-1 axes at result positions ``axes``."""
    return np.expand_dims(x, tuple(axes))


@kernel("coreai.shrink_dims")
def shrink_dims(x: np.ndarray, *, axes: Ints) -> np.ndarray:
    """Remove size-1 axes."""
    return np.squeeze(x, axis=tuple(axes))


@kernel("coreai.tile")
def tile(x: np.ndarray, *, reps: Ints) -> np.ndarray:
    """Repeat along each axis."""
    return np.tile(x, tuple(reps)) if x.ndim else x.copy()


@kernel("coreai.concat")
def concat(values: list[np.ndarray], *, axis: int) -> np.ndarray:
    """Join along axis."""
    return np.concatenate(values, axis=axis)


@kernel("coreai.split")
def split(x: np.ndarray, *, split_sizes: Ints, axis: int) -> list[np.ndarray]:
    """Pieces of the given sizes along axis (views)."""
    head = (slice(None),) * (axis % x.ndim)
    pieces, start = [], 0
    for n in split_sizes:
        pieces.append(x[(*head, slice(start, start + n))])
        start += n
    return pieces


def _window(x: np.ndarray, begin: np.ndarray, end: np.ndarray, axes: Ints,
            strides: Ints) -> tuple[slice, ...]:
    index = [slice(None)] * x.ndim
    for a, b, e, s in zip(axes, _ints(begin), _ints(end), strides, strict=True):
        index[a] = slice(b, e, s)
    return tuple(index)


@kernel("coreai.slice")
def slice_(x: np.ndarray, begin: np.ndarray, end: np.ndarray, *, axes: Ints,
           strides: Ints) -> np.ndarray:
    """Python slicing x[begin:end:stride] per axis, bounds clamped (a view)."""
    return x[_window(x, begin, end, axes, strides)]


@kernel("coreai.slice_update")
def slice_update(x: np.ndarray, update: np.ndarray, begin: np.ndarray, end: np.ndarray, *,
                 axes: Ints, strides: Ints) -> np.ndarray:
    """A copy of x with the slice replaced by update."""
    out = x.copy()
    out[_window(x, begin, end, axes, strides)] = update
    return out


_PAD_MODES: dict[str, Literal["reflect", "edge", "wrap"]] = {
    "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


@kernel("coreai.pad")
def pad(x: np.ndarray, *, pads: Ints, mode: str, value: float) -> np.ndarray:
    """Pad with a constant, reflection, edge copies or wrap-around; negative amounts crop
    (after padding, except for ``circular``, which wraps the cropped tensor, as torch does)."""
    pairs = list(zip(pads[::2], pads[1::2], strict=True))
    widths = [(max(lo, 0), max(hi, 0)) for lo, hi in pairs]

    def crop(y: np.ndarray) -> np.ndarray:
        return y[tuple(slice(max(-lo, 0), y.shape[i] - max(-hi, 0))
                       for i, (lo, hi) in enumerate(pairs))]

    def padded(y: np.ndarray) -> np.ndarray:
        if not any(lo or hi for lo, hi in widths):
            return y
        if mode == "constant":
            fill = np.array(value).astype(up(x).dtype).astype(x.dtype)
            return np.pad(y, widths, mode="constant", constant_values=fill)
        return np.pad(y, widths, mode=_PAD_MODES[mode])

    return padded(crop(x)) if mode == "circular" else crop(padded(x))


@kernel("coreai.reverse")
def reverse(x: np.ndarray, *, axes: Ints) -> np.ndarray:
    """Reverse along axes (a view)."""
    return np.flip(x, tuple(axes)) if axes else x


@kernel("coreai.get_shape")
def get_shape(x: np.ndarray) -> np.ndarray:
    """The shape as int64."""
    return np.array(x.shape, dtype=np.int64)


@kernel("coreai.range")
def range_(start: np.ndarray, end: np.ndarray, step: np.ndarray) -> np.ndarray:
    """start + i * step for i < ceil((end - start) / step), computed in float64 like torch."""
    s, e, st = start.item(), end.item(), step.item()
    if st == 0:
        raise ValueError("range step must be nonzero")
    n = max(0, math.ceil((e - s) / st))
    if start.dtype.kind in "iu":
        return (s + np.arange(n, dtype=np.int64) * st).astype(start.dtype)
    return (s + np.arange(n, dtype=np.float64) * st).astype(start.dtype)


# -- indexing ------------------------------------------------------------------------------------

def checked_indices(indices: np.ndarray, size: int, axis: int, wrap_negative: bool,
                    ) -> np.ndarray:
    """``indices`` into an axis of ``size``, negative ones counted from the end when
    ``wrap_negative``; raises ``IndexError`` naming the first bad index and the valid range
    (numpy would wrap -1 silently where torch rejects it, and wrap -n-1 twice)."""
    if indices.size == 0:
        return indices
    low = -size if wrap_negative else 0
    lo, hi = indices.min(), indices.max()
    if lo < low or hi >= size:
        bad = lo if lo < low else hi
        valid = f"[{low}, {size})" if size else "none (the axis is empty)"
        raise IndexError(f"index {int(bad)} is out of range for axis {axis} of size {size}; "
                         f"valid indices: {valid}")
    return indices + size * (indices < 0) if lo < 0 else indices


@kernel("coreai.gather")
def gather(x: np.ndarray, indices: np.ndarray, *, axis: int,
           wrap_negative: bool = True) -> np.ndarray:
    """np.take along axis (negative indices count from the end when ``wrap_negative``)."""
    if x.ndim == 0:
        return np.take(x.reshape(1), checked_indices(indices, 1, 0, wrap_negative))
    axis %= x.ndim
    return np.take(x, checked_indices(indices, x.shape[axis], axis, wrap_negative), axis=axis)


def _coords(indices: np.ndarray, axis: int) -> tuple[np.ndarray, ...]:
    """Full index arrays addressing x at every position of ``indices`` along ``axis``."""
    grid: tuple[np.ndarray, ...] = np.indices(indices.shape, sparse=True)
    return tuple(indices if d == axis else g for d, g in enumerate(grid))


@kernel("coreai.gather_along_axis")
def gather_along_axis(x: np.ndarray, indices: np.ndarray, *, axis: int,
                      wrap_negative: bool = True) -> np.ndarray:
    """torch.gather: indices may be smaller than x off the axis."""
    if x.ndim == 0:
        checked_indices(indices, 1, 0, wrap_negative)
        return x[()] if indices.size else x
    axis %= x.ndim
    return x[_coords(checked_indices(indices, x.shape[axis], axis, wrap_negative), axis)]


def _nd_index(x: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, ...]:
    """The K index arrays of K-d ``indices`` into x's first K axes (torch ``index`` rules:
    negative indices count from the end, others out of range are errors)."""
    return tuple(checked_indices(indices[..., i], x.shape[i], i, True)
                 for i in range(indices.shape[-1]))


@kernel("coreai.gather_nd")
def gather_nd(x: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """x indexed on its first K axes by the last axis of indices."""
    k = indices.shape[-1]
    if k == 0:
        return np.broadcast_to(x, indices.shape[:-1] + x.shape).copy()
    return x[_nd_index(x, indices)]


_SCATTER_UFUNC = {"add": np.add, "mean": np.add, "mul": np.multiply, "max": np.maximum,
                  "min": np.minimum}


@kernel("coreai.scatter_along_axis")
def scatter_along_axis(x: np.ndarray, indices: np.ndarray, updates: np.ndarray, *, axis: int,
                       reduction: str, include_self: bool,
                       wrap_negative: bool = True) -> np.ndarray:
    """torch.scatter / scatter_reduce (sum, prod, amax, amin, mean; include_self)."""
    if x.ndim == 0:
        r = scatter_along_axis(x.reshape(1), indices.reshape(1), updates.reshape(1), axis=0,
                               reduction=reduction, include_self=include_self,
                               wrap_negative=wrap_negative)
        return r.reshape(())
    axis %= x.ndim
    coords = _coords(checked_indices(indices, x.shape[axis], axis, wrap_negative), axis)
    src = updates[tuple(slice(0, n) for n in indices.shape)]
    out = x.copy()
    if reduction == "none":
        out[coords] = src
        return out
    if not include_self:  # scattered positions start from the reduction's identity
        kind = {"add": "sum", "mean": "sum", "mul": "product"}.get(reduction, reduction)
        out[coords] = _identity(kind, x.dtype)
    if x.dtype in HALF and reduction in ("add", "mean", "mul"):
        # half types accumulate duplicates in float32 and round once (rounding each partial
        # sum loses up to a few ulps wherever duplicates cancel)
        wide = up(out)
        _SCATTER_UFUNC[reduction].at(wide, coords, up(src))
        out = wide.astype(x.dtype)
    else:
        _SCATTER_UFUNC[reduction].at(out, coords, src)
    if reduction == "mean":
        count = np.full(x.shape, 1 if include_self else 0, np.int64)
        np.add.at(count, coords, 1)
        count = np.maximum(count, 1)
        if x.dtype.kind in "iu":
            return np.floor_divide(out, count).astype(x.dtype)
        return (up(out) / count).astype(x.dtype)
    return out


@kernel("coreai.scatter_nd")
def scatter_nd(x: np.ndarray, indices: np.ndarray, updates: np.ndarray, *,
               accumulate: bool) -> np.ndarray:
    """torch index_put: write (or add, with accumulate) updates at the K-d indices."""
    k = indices.shape[-1]
    batch = indices.shape[:-1]
    upd = np.broadcast_to(updates, batch + x.shape[k:])
    out = x.copy()
    if k == 0:  # every index row addresses the whole tensor
        rows = upd.reshape(-1, *x.shape)
        if accumulate:
            return (up(out) + up(rows).sum(axis=0, dtype=F32 if x.dtype in HALF else None)
                    ).astype(x.dtype)
        return rows[-1].copy() if len(rows) else out
    idx = _nd_index(x, indices)
    if accumulate:
        np.add.at(out, idx, upd)
    else:
        out[idx] = upd
    return out


@kernel("coreai.non_zero")
def non_zero(x: np.ndarray) -> np.ndarray:
    """Coordinates of nonzero elements, [n, rank] int64, row-major."""
    return np.argwhere(up(x)).astype(np.int64, copy=False)
