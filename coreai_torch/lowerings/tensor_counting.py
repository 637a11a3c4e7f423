"""Built-in lowerings (tensor family): binary search, histograms, unique values, mode and
segment reductions, all expressed with existing Core AI ops.

Searches replay torch's binary search (its answers for NaN depend on the probe path). Outputs whose
length depends on the data (``bincount``, the ``unique`` family) get a dynamic dim from
``non_zero`` or ``range_``.
"""

from __future__ import annotations

import numpy as np
import torch

from coreai_core import DType, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._index_utils import const64, int64, move_axes_perm, transpose
from coreai_torch.lowerings._reduce import iota, ordered
from coreai_torch.utils import cast_to, dtype_of, normalize_dim, result_dtype, scalar_like

LOWERINGS = LoweringSet("tensor_counting")
reg = LOWERINGS.register_torch_lowering

_I64 = DType.int64
_BIG = 2**62  # a slice end past any size


def _common(a: Value, b: Value | float) -> DType:
    """torch's promoted dtype of a tensor and a tensor-or-number."""
    ta = torch.empty(0, dtype=a.type.element_type.torch)
    tb = (torch.empty([0] * min(b.type.rank, 1), dtype=b.type.element_type.torch)
          if isinstance(b, Value) else b)
    return dtype_of(torch.result_type(ta, tb))


def _count_below(seq: Value, values: Value, right: bool, sorter: Value | None,
                 out_int32: bool) -> Value:
    """torch's searchsorted, step for step: a binary search unrolled ``bit_length(M)`` times
    (each step at least halves every value's [start, end) range), so that NaNs, which break
    the sequence's order, give torch's answers too."""
    if sorter is not None:
        seq = coreai.gather_along_axis(seq, int64(sorter), axis=seq.type.rank - 1)
    dtype = _common(seq, values)
    seq, values = ordered(cast_to(seq, dtype)), ordered(cast_to(values, dtype))
    m = seq.type.shape[-1]
    if not isinstance(m, int):
        raise NotImplementedError("searchsorted needs a static sequence length")
    out = DType.int32 if out_int32 else _I64
    start = coreai.broadcasting_mul(cast_to(coreai.broadcasting_equal(values, values), _I64),
                                    const64(0))  # zeros shaped like values
    end = coreai.broadcasting_add(start, const64(m))
    for _ in range(m.bit_length()):
        active = coreai.broadcasting_less(start, end)
        mid = coreai.broadcasting_add(start, coreai.broadcasting_floor_divide(
            coreai.broadcasting_sub(end, start), const64(2)))
        at = coreai.broadcasting_minimum(mid, const64(m - 1))
        if seq.type.rank == 1:
            probe = coreai.gather(seq, at, axis=0)
        else:
            probe = coreai.gather_along_axis(seq, at, axis=seq.type.rank - 1)
        after = (coreai.broadcasting_greater(probe, values) if right
                 else coreai.broadcasting_greater_equal(probe, values))
        go_right = coreai.broadcasting_and(active, coreai.not_(after))
        go_left = coreai.broadcasting_and(active, after)
        start = coreai.broadcasting_where(go_right, coreai.broadcasting_add(mid, const64(1)),
                                          start)
        end = coreai.broadcasting_where(go_left, mid, end)
    return cast_to(start, out)


def _is_right(right: bool, side: str | None) -> bool:
    if side is not None and side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    return side == "right" if side is not None else right


@reg("aten::searchsorted.Tensor")
def aten_searchsorted_tensor(sorted_sequence: Value, self: Value, out_int32: bool = False,
                             right: bool = False, side: str | None = None,
                             sorter: Value | None = None) -> Value:
    """searchsorted.Tensor(Tensor sorted_sequence, Tensor self, *, bool out_int32=False, bool right=False, str? side=None, Tensor? sorter=None) -> Tensor"""  # noqa: E501
    return _count_below(sorted_sequence, self, _is_right(right, side), sorter, out_int32)


@reg("aten::searchsorted.Scalar")
def aten_searchsorted_scalar(sorted_sequence: Value, self: float | Value, out_int32: bool = False,
                             right: bool = False, side: str | None = None,
                             sorter: Value | None = None) -> Value:
    """searchsorted.Scalar(Tensor sorted_sequence, Scalar self, *, bool out_int32=False, bool right=False, str? side=None, Tensor? sorter=None) -> Tensor"""  # noqa: E501
    value = cast_to(self, _common(sorted_sequence, self))
    return _count_below(sorted_sequence, value, _is_right(right, side), sorter, out_int32)


@reg("aten::bucketize.Tensor")
def aten_bucketize_tensor(self: Value, boundaries: Value, out_int32: bool = False,
                          right: bool = False) -> Value:
    """bucketize.Tensor(Tensor self, Tensor boundaries, *, bool out_int32=False, bool right=False) -> Tensor"""  # noqa: E501
    return _count_below(boundaries, self, right, None, out_int32)


@reg("aten::bucketize.Scalar")
def aten_bucketize_scalar(self: float | Value, boundaries: Value, out_int32: bool = False,
                          right: bool = False) -> Value:
    """bucketize.Scalar(Scalar self, Tensor boundaries, *, bool out_int32=False, bool right=False) -> Tensor"""  # noqa: E501
    value = cast_to(self, _common(boundaries, self))
    return _count_below(boundaries, value, right, None, out_int32)


# -- histograms ------------------------------------------------------------------------------------

def _edges(x: Value, lo: float, hi: float) -> tuple[Value, Value]:
    """histc's outer edges in x's dtype: [min, max], the data's extrema when min == max, and
    widened by 1 on each side (in double, like torch) when they still coincide."""
    dtype = x.type.element_type
    if lo != hi:
        return scalar_like(lo, x), scalar_like(hi, x)
    if x.type.shape[0] == 0:
        return scalar_like(lo - 1, x), scalar_like(hi + 1, x)
    f64 = DType.float64
    low = cast_to(coreai.reduce_min(x), f64)
    high = cast_to(coreai.reduce_max(x), f64)
    same = coreai.broadcasting_equal(low, high)
    one = coreai.constant(1.0, dtype=f64)
    low = coreai.broadcasting_where(same, coreai.broadcasting_sub(low, one), low)
    high = coreai.broadcasting_where(same, coreai.broadcasting_add(high, one), high)
    return cast_to(low, dtype), cast_to(high, dtype)


@reg("aten::histc.default")
def aten_histc_default(self: Value, bins: int = 100, min: float = 0, max: float = 0) -> Value:
    """histc(Tensor self, int bins=100, Scalar min=0, Scalar max=0) -> Tensor

    torch's linear binning: ``bin = int((x - min) * bins / (max - min))`` computed in x's dtype
    (each step rounded), the last edge counted in the last bin, values outside [min, max] and
    NaN ignored.
    """
    x = coreai.reshape(self, [-1])
    lo, hi = _edges(x, float(min), float(max))
    inside = coreai.broadcasting_and(coreai.broadcasting_greater_equal(x, lo),
                                     coreai.broadcasting_less_equal(x, hi))
    safe = coreai.broadcasting_where(inside, x, lo)
    scaled = coreai.broadcasting_mul(coreai.broadcasting_sub(safe, lo), scalar_like(bins, x))
    pos = cast_to(coreai.broadcasting_divide(scaled, coreai.broadcasting_sub(hi, lo)), _I64)
    last = const64(bins - 1)
    pos = coreai.broadcasting_minimum(pos, last)
    grid = coreai.constant(np.arange(bins, dtype=np.int64).reshape(1, bins))
    hits = coreai.broadcasting_and(
        coreai.broadcasting_equal(coreai.expand_dims(pos, [1]), grid),
        coreai.expand_dims(inside, [1]))
    counts = coreai.reduce_sum(cast_to(hits, _I64), axes=[0])
    return cast_to(counts, result_dtype())


@reg("aten::bincount.default")
def aten_bincount_default(self: Value, weights: Value | None = None,
                          minlength: int | Value = 0) -> Value:
    """bincount(Tensor self, Tensor? weights=None, SymInt minlength=0) -> Tensor

    The length, ``max(max(self) + 1, minlength)``, is known only at run time: the result has
    a dynamic dim (a ``range_`` over it).
    """
    x = int64(self)
    with_floor = coreai.concat([x, const64(np.asarray([-1], np.int64))], axis=0)
    top = coreai.broadcasting_add(coreai.reduce_max(with_floor), const64(1))
    length = coreai.broadcasting_maximum(top, cast_to(minlength, _I64))
    bins = coreai.range_(const64(0), length, const64(1))
    hits = coreai.broadcasting_equal(coreai.expand_dims(x, [1]), coreai.expand_dims(bins, [0]))
    dtype = result_dtype()
    if weights is None:
        return cast_to(coreai.reduce_sum(cast_to(hits, _I64), axes=[0]), dtype)
    w = coreai.expand_dims(cast_to(weights, dtype), [1])
    picked = coreai.broadcasting_where(hits, w, scalar_like(0, w))
    return coreai.reduce_sum(picked, axes=[0])


# -- unique ----------------------------------------------------------------------------------------

def _empty(dtype: DType) -> Value:
    return coreai.constant(np.zeros(0, dtype=dtype.numpy))


def _groups(first: Value, n: int | Value) -> tuple[Value, Value, Value]:
    """From ``first`` (bool [n], True where a run of equal elements starts): the start
    positions [k, 1], each element's run number [n] and each run's length [k]."""
    starts = coreai.non_zero(first)
    run = coreai.broadcasting_sub(coreai.scan(cast_to(first, _I64), axis=0), const64(1))
    flat = coreai.reshape(starts, [-1])
    nxt = coreai.slice_(flat, np.asarray([1], np.int64), np.asarray([_BIG], np.int64),
                        axes=[0], strides=[1])
    end = const64(np.asarray([n], np.int64)) if isinstance(n, int) else coreai.reshape(n, [1])
    ends = coreai.concat([nxt, end], axis=0)
    return starts, run, coreai.broadcasting_sub(ends, flat)


def _run_starts(changed: Value) -> Value:
    """``[True, *changed]``: the first element starts a run, then wherever it changed."""
    return coreai.concat([coreai.constant(np.ones(1, dtype=bool)), changed], axis=0)


def _neighbours_differ(x: Value) -> Value:
    """bool [n-1]: x[i] != x[i-1] along axis 0 (any differing element for rank > 1)."""
    one, big = np.asarray([1], np.int64), np.asarray([_BIG], np.int64)
    head = coreai.slice_(x, np.asarray([0], np.int64), np.asarray([-1], np.int64), axes=[0],
                         strides=[1])
    tail = coreai.slice_(x, one, big, axes=[0], strides=[1])
    differ = coreai.broadcasting_not_equal(tail, head)
    if x.type.rank > 1:
        differ = coreai.any_(differ, axes=list(range(1, x.type.rank)))
    return differ


def _unique_outputs(values: Value, inverse: Value, counts: Value, return_inverse: bool,
                    return_counts: bool) -> tuple[Value, Value, Value]:
    return (values, inverse if return_inverse else _empty(_I64),
            counts if return_counts else _empty(_I64))


def _shaped_like(flat: Value, x: Value) -> Value:
    """``flat`` reshaped to x's shape (read at run time when dynamic)."""
    if x.type.rank == 1:
        return flat
    return coreai.reshape(flat, list(x.type.shape) if x.type.is_static else coreai.get_shape(x))


def _length(x: Value) -> int | Value:
    n = x.type.shape[0]
    if isinstance(n, int):
        return n
    return coreai.gather(coreai.get_shape(x), const64(0), axis=0)


@reg("aten::_unique2.default")
def aten__unique2_default(self: Value, sorted: bool = True, return_inverse: bool = False,
                          return_counts: bool = False) -> tuple[Value, Value, Value]:
    """_unique2(Tensor self, bool sorted=True, bool return_inverse=False, bool return_counts=False) -> (Tensor, Tensor, Tensor)

    torch's CPU kernel sorts whatever ``sorted`` says, so the values come out ascending (each
    NaN is its own value, NaNs last).
    """  # noqa: E501
    dtype = self.type.element_type
    flat = ordered(coreai.reshape(self, [-1]))
    if flat.type.shape[0] == 0:
        return _unique_outputs(_empty(dtype), coreai.reshape(int64(self), [*self.type.shape]),
                               _empty(_I64), return_inverse, return_counts)
    s, perm = coreai.sort(flat, axis=0, stable=True)
    n = _length(flat)
    starts, run, counts = _groups(_run_starts(_neighbours_differ(s)), n)
    values = cast_to(coreai.gather_nd(s, starts), dtype)
    zeros = coreai.broadcasting_mul(perm, const64(0))
    inverse = coreai.scatter_along_axis(zeros, perm, run, axis=0)
    inverse = _shaped_like(inverse, self)
    return _unique_outputs(values, inverse, counts, return_inverse, return_counts)


def _unique_rows(x: Value, dim: int, order: Value | None) -> tuple[Value, Value, Value]:
    """Unique slices of x along ``dim``: consecutive ones, or after sorting slices by the
    int64 ``order`` key (equal slices share a key). torch's dim variants always return the
    inverse and the counts, whatever the flags say."""
    rank = x.type.rank
    moved = transpose(x, move_axes_perm(rank, dim, 1, 0))
    rows = ordered(moved)
    n = _length(rows)
    if order is None:
        starts, run, counts = _groups(_run_starts(_neighbours_differ(rows)), n)
        picked = coreai.reshape(starts, [-1])
        return coreai.gather(x, picked, axis=dim), run, counts
    keys, perm = coreai.sort(order, axis=0, stable=True)
    starts, run, counts = _groups(_run_starts(_neighbours_differ(keys)), n)
    picked = coreai.gather(perm, coreai.reshape(starts, [-1]), axis=0)
    zeros = coreai.broadcasting_mul(perm, const64(0))
    inverse = coreai.scatter_along_axis(zeros, perm, run, axis=0)
    return coreai.gather(x, picked, axis=dim), inverse, counts


def static_shape(x: Value, what: str) -> tuple[int, ...]:
    shape = x.type.static_shape
    if shape is None:
        raise NotImplementedError(f"{what} needs a static shape, got {x.type}")
    return shape


def _lexicographic_rank(rows: Value) -> Value:
    """int64 [n]: how many rows of ``rows`` [n, K] are lexicographically smaller."""
    n, k = static_shape(rows, "unique_dim")
    a = coreai.expand_dims(rows, [1])  # [n, 1, K]
    b = coreai.expand_dims(rows, [0])  # [1, n, K]
    differ = coreai.broadcasting_not_equal(a, b)  # [n, n, K]
    if k == 0:
        return coreai.constant(np.zeros(n, np.int64))
    first = coreai.expand_dims(coreai.argmax(cast_to(differ, DType.uint8), axis=2), [2])
    shape = np.asarray([n, n, k], np.int64)
    lhs = coreai.gather_along_axis(coreai.broadcast_to(a, shape), first, axis=2)
    rhs = coreai.gather_along_axis(coreai.broadcast_to(b, shape), first, axis=2)
    less = coreai.broadcasting_and(coreai.broadcasting_less(lhs, rhs),
                                   coreai.any_(differ, axes=[2], keep_dims=True))
    # less[a, b]: row a < row b; the rank of b counts the a's below it
    return coreai.reduce_sum(cast_to(less, _I64), axes=[0, 2])


@reg("aten::unique_consecutive.default")
def aten_unique_consecutive_default(self: Value, return_inverse: bool = False,
                                    return_counts: bool = False, dim: int | None = None,
                                    ) -> tuple[Value, Value, Value]:
    """unique_consecutive(Tensor self, bool return_inverse=False, bool return_counts=False, int? dim=None) -> (Tensor, Tensor, Tensor)"""  # noqa: E501
    if dim is not None:
        return _unique_rows(self, normalize_dim(dim, self.type.rank), None)
    dtype = self.type.element_type
    flat = ordered(coreai.reshape(self, [-1]))
    if flat.type.shape[0] == 0:
        return _unique_outputs(_empty(dtype), coreai.reshape(int64(self), [*self.type.shape]),
                               _empty(_I64), return_inverse, return_counts)
    starts, run, counts = _groups(_run_starts(_neighbours_differ(flat)), _length(flat))
    values = cast_to(coreai.gather_nd(flat, starts), dtype)
    inverse = _shaped_like(run, self)
    return _unique_outputs(values, inverse, counts, return_inverse, return_counts)


@reg("aten::unique_dim.default")
def aten_unique_dim_default(self: Value, dim: int, sorted: bool = True,
                            return_inverse: bool = False, return_counts: bool = False,
                            ) -> tuple[Value, Value, Value]:
    """unique_dim(Tensor self, int dim, bool sorted=True, bool return_inverse=False, bool return_counts=False) -> (Tensor, Tensor, Tensor)

    Slices along ``dim`` are ordered lexicographically (torch sorts whatever ``sorted`` says).
    """  # noqa: E501
    if not self.type.is_static:
        raise NotImplementedError("unique_dim needs a static shape")
    d = normalize_dim(dim, self.type.rank)
    if self.type.shape[d] == 0:  # no slices: the input itself, no inverse, no counts
        return self, _empty(_I64), _empty(_I64)
    moved = transpose(ordered(self), move_axes_perm(self.type.rank, d, 1, 0))
    shape = static_shape(moved, "unique_dim")
    rows = coreai.reshape(moved, [shape[0], int(np.prod(shape[1:], dtype=np.int64))])
    return _unique_rows(self, d, _lexicographic_rank(rows))


# -- mode ------------------------------------------------------------------------------------------

def _largest(dtype: DType) -> float | int | bool:
    if dtype.is_float:
        return float("inf")
    if dtype is DType.bool:
        return True
    return int(np.iinfo(dtype.numpy).max)


@reg("aten::mode.default")
def aten_mode_default(self: Value, dim: int = -1, keepdim: bool = False) -> tuple[Value, Value]:
    """mode(Tensor self, int dim=-1, bool keepdim=False) -> (Tensor values, Tensor indices)

    torch's rule: the most frequent value, the smallest one among equally frequent values, and
    the index of its last occurrence (torch's CPU kernel sorts (value, index) pairs and takes
    the last of the run; its sort is stable for slices up to 16 elements).
    """
    x = ordered(self)
    rank = x.type.rank
    if rank == 0:
        return self, const64(0)
    ax = normalize_dim(dim, rank)
    perm = move_axes_perm(rank, ax, 1, rank - 1)
    xs = transpose(x, perm)  # dim last
    same = coreai.broadcasting_equal(coreai.expand_dims(xs, [rank]),
                                     coreai.expand_dims(xs, [rank - 1]))
    freq = coreai.reduce_sum(cast_to(same, _I64), axes=[rank])
    top = coreai.reduce_max(freq, axes=[rank - 1], keep_dims=True)
    candidates = coreai.broadcasting_equal(freq, top)
    values = coreai.reduce_min(
        coreai.broadcasting_where(candidates, xs, scalar_like(_largest(xs.type.element_type), xs)),
        axes=[rank - 1], keep_dims=True)
    positions = iota(xs, rank - 1)
    at_value = coreai.broadcasting_equal(xs, values)
    indices = coreai.reduce_max(
        coreai.broadcasting_where(at_value, positions, const64(-1)), axes=[rank - 1],
        keep_dims=True)
    back = [perm.index(i) for i in range(rank)]
    values, indices = transpose(values, back), transpose(indices, back)
    if not keepdim:
        values, indices = coreai.shrink_dims(values, [ax]), coreai.shrink_dims(indices, [ax])
    return cast_to(values, self.type.element_type), indices


# -- segment reductions ----------------------------------------------------------------------------

def _segment_bounds(lengths: Value | None, offsets: Value | None) -> tuple[Value, Value, Value]:
    """(start, end, length) of each segment, int64 [B..., S]."""
    if lengths is not None:
        length = int64(lengths)
        end = coreai.scan(length, axis=length.type.rank - 1)
        return coreai.broadcasting_sub(end, length), end, length
    if offsets is None:
        raise ValueError("segment_reduce needs lengths or offsets")
    off = int64(offsets)
    last = off.type.rank - 1
    start = coreai.slice_(off, np.asarray([0], np.int64), np.asarray([-1], np.int64), axes=[last],
                          strides=[1])
    end = coreai.slice_(off, np.asarray([1], np.int64), np.asarray([_BIG], np.int64),
                        axes=[last], strides=[1])
    return start, end, coreai.broadcasting_sub(end, start)


_SEGMENT_IDENTITY = {"sum": 0.0, "mean": 0.0, "prod": 1.0, "max": -float("inf"),
                     "min": float("inf")}


@reg("aten::segment_reduce.default")
def aten_segment_reduce_default(data: Value, reduce: str, lengths: Value | None = None,
                                indices: Value | None = None, offsets: Value | None = None,
                                axis: int = 0, unsafe: bool = False,
                                initial: float | None = None) -> Value:
    """segment_reduce(Tensor data, str reduce, *, Tensor? lengths=None, Tensor? indices=None, Tensor? offsets=None, int axis=0, bool unsafe=False, Scalar? initial=None) -> Tensor

    Segments run along ``axis`` (the last dim of lengths/offsets); an empty segment holds
    ``initial``, else the reduction's identity (-inf for max, +inf for min) and NaN for mean.
    ``unsafe`` only skips torch's input checks.
    """  # noqa: E501
    if reduce not in _SEGMENT_IDENTITY:
        raise ValueError(f"segment_reduce: reduce must be one of {sorted(_SEGMENT_IDENTITY)}, "
                         f"got {reduce!r}")
    if indices is not None:
        raise NotImplementedError("segment_reduce with indices (torch does not support it)")
    start, end, length = _segment_bounds(lengths, offsets)
    b = start.type.rank - 1
    ax = normalize_dim(axis, data.type.rank)
    if ax != b:
        raise ValueError(f"segment_reduce: axis {axis} must be the last dim of lengths/offsets")
    n = data.type.shape[ax]
    if not isinstance(n, int):
        raise NotImplementedError("segment_reduce needs a static size along axis")
    if n == 0:  # every segment is empty: reduce one identity element no segment covers
        shape = [*data.type.shape[:ax], 1, *data.type.shape[ax + 1:]]
        if not all(isinstance(d, int) for d in shape):
            raise NotImplementedError("segment_reduce of empty data needs static sizes")
        data = coreai.broadcast_to(scalar_like(_SEGMENT_IDENTITY[reduce], data),
                                   np.asarray(shape, np.int64))
        n = 1
    trailing = data.type.rank - ax - 1
    pos = coreai.constant(np.arange(n, dtype=np.int64).reshape([1] * (b + 1) + [n]))
    inside = coreai.broadcasting_and(
        coreai.broadcasting_less_equal(coreai.expand_dims(start, [b + 1]), pos),
        coreai.broadcasting_less(pos, coreai.expand_dims(end, [b + 1])))  # [B..., S, N]
    if trailing:
        inside = coreai.expand_dims(inside, list(range(b + 2, b + 2 + trailing)))
    x = coreai.expand_dims(data, [ax])  # [B..., 1, N, F...]
    picked = coreai.broadcasting_where(inside, x, scalar_like(_SEGMENT_IDENTITY[reduce], x))
    builder = {"sum": coreai.reduce_sum, "mean": coreai.reduce_sum,
               "prod": coreai.reduce_product, "max": coreai.reduce_max,
               "min": coreai.reduce_min}[reduce]
    out = builder(picked, axes=[ax + 1])  # [B..., S, F...]
    count = length
    if trailing:
        count = coreai.expand_dims(length, list(range(b + 1, b + 1 + trailing)))
    if initial is not None:
        init = scalar_like(initial, out)
        combine = {"sum": coreai.broadcasting_add, "mean": coreai.broadcasting_add,
                   "prod": coreai.broadcasting_mul, "max": coreai.broadcasting_maximum,
                   "min": coreai.broadcasting_minimum}[reduce]
        out = combine(init, out)
    if reduce == "mean":
        empty = coreai.broadcasting_equal(count, const64(0))
        mean = coreai.broadcasting_divide(out, cast_to(count, out.type.element_type))
        fill = scalar_like(float("nan") if initial is None else initial, out)
        out = coreai.broadcasting_where(empty, fill, mean)
    return out


__all__ = ["LOWERINGS"]
