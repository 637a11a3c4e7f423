"""Reductions, scans, sorting, shape manipulation and indexing ops."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from coreai_core._dtypes import DType
from coreai_core._ir import Dim, TensorType, Value
from coreai_core._opdef import Builder, Ints, builder_names, constant_data, defop
from coreai_core._shapes import (
    broadcast_shapes,
    const_ints,
    expect,
    expect_int_vector,
    fail,
    norm_axes,
    norm_axis,
    same_dtype,
)

# -- reductions ----------------------------------------------------------------------------------


def _reduced(x: Value, axes: Ints | None, keep_dims: bool, dtype: DType | None = None,
             ) -> TensorType:
    ax = norm_axes(axes, x.type.rank)
    shape = [(1 if i in ax else d) for i, d in enumerate(x.type.shape) if keep_dims or i not in ax]
    return TensorType(shape, dtype or x.type.element_type)


def _reduction(name: str, doc: str, result: DType | None = None, numeric: bool = True,
               floats: bool = False, ordered: bool = False) -> Builder[Value]:
    def rule(x: Value, axes: Ints | None = None, keep_dims: bool = False) -> TensorType:
        if numeric:
            expect(x.type.element_type is not DType.bool, f"expects a numeric tensor, got {x.type}")
        if ordered:
            expect(not x.type.element_type.is_complex,
                   f"expects a non-complex tensor (complex numbers have no order), got {x.type}")
        if floats:
            expect(x.type.element_type.is_float or x.type.element_type.is_complex,
                   f"expects a float or complex tensor, got {x.type}")
        return _reduced(x, axes, keep_dims, result)

    rule.__name__ = rule.__qualname__ = name
    rule.__doc__ = doc + " Over ``axes`` (all when None)."
    return defop(traits=("reduction",))(rule)


reduce_sum = _reduction("reduce_sum", "Sum.")
reduce_mean = _reduction("reduce_mean", "Arithmetic mean (float or complex tensors).",
                         floats=True)
reduce_max = _reduction("reduce_max", "Maximum, NaN propagates.", numeric=False, ordered=True)
reduce_min = _reduction("reduce_min", "Minimum, NaN propagates.", numeric=False, ordered=True)
reduce_product = _reduction("reduce_product", "Product.")
all_ = _reduction("all_", "True if every element is nonzero.", DType.bool, numeric=False)
any_ = _reduction("any_", "True if some element is nonzero.", DType.bool, numeric=False)


def _arg_rule(x: Value, axis: int | None, keep_dims: bool) -> TensorType:
    if axis is None:
        return TensorType([1] * x.type.rank if keep_dims else [], DType.int64)
    return _reduced(x, (axis,), keep_dims, DType.int64)


@defop(traits=("reduction",))
def argmax(x: Value, axis: int | None = None, keep_dims: bool = False) -> TensorType:
    """Index of the first maximum (NaN counts as maximal); flattened when axis is None."""
    return _arg_rule(x, axis, keep_dims)


@defop(traits=("reduction",))
def argmin(x: Value, axis: int | None = None, keep_dims: bool = False) -> TensorType:
    """Index of the first minimum (NaN counts as minimal); flattened when axis is None."""
    return _arg_rule(x, axis, keep_dims)


@defop()
def scan(x: Value, axis: int, kind: Literal["sum", "product", "max", "min"] = "sum",
         reverse: bool = False, exclusive: bool = False) -> TensorType:
    """Cumulative sum/product/max/min along ``axis`` (inclusive unless ``exclusive``)."""
    norm_axis(axis, x.type.rank)
    expect(kind in ("sum", "product") or not x.type.element_type.is_complex,
           f"scan kind={kind!r} expects a non-complex tensor (complex numbers have no order), "
           f"got {x.type}")
    return x.type


# -- sorting -------------------------------------------------------------------------------------

@defop(traits=("multi_result",))
def sort(x: Value, axis: int = -1, descending: bool = False, stable: bool = True,
         ) -> tuple[TensorType, TensorType]:
    """Sorted values and their int64 indices; NaN sorts as the largest value."""
    norm_axis(axis, x.type.rank)
    return x.type, x.type.with_dtype(DType.int64)


@defop()
def argsort(x: Value, axis: int = -1, descending: bool = False, stable: bool = True,
            ) -> TensorType:
    """int64 indices that sort ``x`` along ``axis``."""
    norm_axis(axis, x.type.rank)
    return x.type.with_dtype(DType.int64)


@defop(traits=("multi_result",))
def topk(x: Value, k: int, axis: int = -1, largest: bool = True, sorted: bool = True,
         ) -> tuple[TensorType, TensorType]:
    """The ``k`` largest (or smallest) values along ``axis`` and their int64 indices."""
    ax = norm_axis(axis, x.type.rank)
    size = x.type.shape[ax] if x.type.rank else 1
    expect(k >= 0 and (not isinstance(size, int) or k <= size),
           f"k={k} is out of range for axis of size {size}")
    shape = list(x.type.shape)
    if shape:
        shape[ax] = k
    return TensorType(shape, x.type.element_type), TensorType(shape, DType.int64)


# -- shape ---------------------------------------------------------------------------------------

def shape_from(shape: Value, numel_of: Value | None = None) -> tuple:
    """The dims a 1-D int ``shape`` operand gives a result: its constant entries (one ``-1``
    inferred from ``numel_of``'s element count, as ``reshape`` does), or unknown dims of its
    static length when it is computed."""
    expect_int_vector(shape, "shape")
    rank = shape.type.shape[0]
    if not isinstance(rank, int):
        fail("shape operand must have a static length")
    values = const_ints(shape)
    if values is None:
        return tuple(Dim() for _ in range(rank))
    for v in values:
        expect(v >= -1, f"shape entries must be >= -1, got {list(values)}")
    dims: list[int | Dim] = list(values)
    if -1 in values:
        expect(list(values).count(-1) == 1, f"at most one -1 in a shape, got {list(values)}")
        total = numel_of.type.numel if numel_of is not None else None
        if total is not None:
            known = 1
            for v in values:
                if v != -1:
                    known *= v
            expect(known != 0 and total % known == 0,
                   f"cannot reshape {numel_of.type if numel_of else ''} into {list(values)}")
            dims[dims.index(-1)] = total // known
        else:
            dims[dims.index(-1)] = Dim()
    return tuple(dims)


@defop()
def reshape(x: Value, shape: Value) -> TensorType:
    """Reshape to ``shape`` (1-d int tensor; one entry may be -1). Row-major order."""
    dims = shape_from(shape, x)
    if x.type.is_static and all(isinstance(d, int) for d in dims):
        n = 1
        for d in dims:
            n *= d
        expect(n == x.type.numel, f"cannot reshape {x.type} into {list(dims)}")
    return TensorType(dims, x.type.element_type)


@defop()
def broadcast_to(x: Value, shape: Value) -> TensorType:
    """Broadcast ``x`` to ``shape`` (1-d int tensor) with numpy rules."""
    dims = shape_from(shape)
    expect(len(dims) >= x.type.rank, f"cannot broadcast {x.type} to rank {len(dims)}")
    out = broadcast_shapes(x.type.shape, dims)
    for got, want in zip(out, dims, strict=True):
        if isinstance(want, int) and isinstance(got, int):
            expect(got == want, f"cannot broadcast {x.type} to {list(dims)}")
    return TensorType(dims, x.type.element_type)


@defop()
def transpose(x: Value, perm: Ints) -> TensorType:
    """Permute axes: result axis i is input axis ``perm[i]``."""
    expect(sorted(perm) == list(range(x.type.rank)),
           f"perm {list(perm)} is not a permutation of {x.type.rank} axes")
    return x.type.with_shape([x.type.shape[p] for p in perm])


@defop()
def expand_dims(x: Value, axes: Ints) -> TensorType:
    """Insert size-1 axes at ``axes`` (positions in the result)."""
    rank = x.type.rank + len(axes)
    ax = norm_axes(axes, rank)
    dims = iter(x.type.shape)
    return x.type.with_shape([1 if i in ax else next(dims) for i in range(rank)])


@defop()
def shrink_dims(x: Value, axes: Ints) -> TensorType:
    """Remove the size-1 axes ``axes``."""
    ax = norm_axes(axes, x.type.rank)
    for a in ax:
        expect(x.type.shape[a] == 1 or isinstance(x.type.shape[a], Dim),
               f"axis {a} of {x.type} has size {x.type.shape[a]}, not 1")
    return x.type.with_shape([d for i, d in enumerate(x.type.shape) if i not in ax])


@defop()
def tile(x: Value, reps: Ints) -> TensorType:
    """Repeat ``x`` ``reps[i]`` times along axis i (len(reps) == rank)."""
    expect(len(reps) == x.type.rank and all(r >= 0 for r in reps),
           f"reps {list(reps)} must give a non-negative count per axis of {x.type}")
    return x.type.with_shape([d * r if isinstance(d, int) else Dim()
                              for d, r in zip(x.type.shape, reps, strict=True)])


@defop()
def concat(values: Sequence[Value], axis: int) -> TensorType:
    """Join tensors along ``axis``; other dims must match."""
    expect(len(values) >= 1, "concat needs at least one operand")
    dtype = same_dtype(*values)
    rank = values[0].type.rank
    ax = norm_axis(axis, rank)
    total: int | Dim = 0
    for v in values:
        expect(v.type.rank == rank, f"operands must share a rank, got {v.type}")
        for i, (a, b) in enumerate(zip(v.type.shape, values[0].type.shape, strict=True)):
            if i != ax and isinstance(a, int) and isinstance(b, int):
                expect(a == b, f"operand {v.type} does not match {values[0].type} off axis {ax}")
        d = v.type.shape[ax]
        total = total + d if isinstance(total, int) and isinstance(d, int) else Dim()
    shape = list(values[0].type.shape)
    shape[ax] = total
    return TensorType(shape, dtype)


@defop(traits=("multi_result",))
def split(x: Value, split_sizes: Ints, axis: int = 0) -> list[TensorType]:
    """Split along ``axis`` into pieces of ``split_sizes`` (they must sum to the axis size)."""
    ax = norm_axis(axis, x.type.rank)
    size = x.type.shape[ax]
    expect(all(s >= 0 for s in split_sizes), f"split sizes must be >= 0, got {split_sizes}")
    if isinstance(size, int):
        expect(sum(split_sizes) == size, f"split sizes {list(split_sizes)} do not sum to {size}")
    out = []
    for s in split_sizes:
        shape = list(x.type.shape)
        shape[ax] = s
        out.append(x.type.with_shape(shape))
    return out


def _slice_len(size: int, b: int, e: int, s: int) -> int:
    return len(range(*slice(b, e, s).indices(size)))


def _slice_shape(x: Value, begin: Value, end: Value, axes: Ints, strides: Ints) -> list:
    n = len(axes)
    expect_int_vector(begin, "begin", n)
    expect_int_vector(end, "end", n)
    expect(len(strides) == n, f"strides {list(strides)} must have one entry per axis {axes}")
    expect(all(s != 0 for s in strides), "strides must be nonzero")
    ax = [norm_axis(a, x.type.rank) for a in axes]
    expect(len(set(ax)) == n, f"axes {list(axes)} repeat an axis")
    b, e = const_ints(begin), const_ints(end)
    shape = list(x.type.shape)
    for i, a in enumerate(ax):
        size = shape[a]
        if b is None or e is None or not isinstance(size, int):
            shape[a] = Dim()
        else:
            shape[a] = _slice_len(size, b[i], e[i], strides[i])
    return shape


@defop()
def slice_(x: Value, begin: Value, end: Value, axes: Ints, strides: Ints) -> TensorType:
    """Python-style slicing ``x[begin:end:stride]`` on each of ``axes`` (bounds clamp)."""
    return x.type.with_shape(_slice_shape(x, begin, end, axes, strides))


@defop()
def slice_update(x: Value, update: Value, begin: Value, end: Value, axes: Ints,
                 strides: Ints) -> TensorType:
    """``x`` with the slice described as in :func:`slice_` replaced by ``update``."""
    window = _slice_shape(x, begin, end, axes, strides)
    same_dtype(x, update)
    expect(update.type.rank == x.type.rank, f"update {update.type} must have rank {x.type.rank}")
    for w, u in zip(window, update.type.shape, strict=True):
        if isinstance(w, int) and isinstance(u, int):
            expect(w == u, f"update {update.type} does not fit the slice {window}")
    return x.type


@defop()
def pad(x: Value, pads: Ints, mode: Literal["constant", "reflect", "replicate", "circular"]
        = "constant", value: float = 0.0) -> TensorType:
    """Pad each axis by ``pads[2i]`` before and ``pads[2i+1]`` after (negative crops).

    Like torch: for ``reflect`` and ``replicate`` the positive amounts pad the input (reading
    its own edges) and the negative ones then crop the result; ``circular`` crops first and
    wraps the cropped tensor; for ``constant`` the order does not matter.
    """
    expect(len(pads) == 2 * x.type.rank, f"pads needs 2 entries per axis of {x.type}")
    shape: list[int | Dim] = []
    for i, d in enumerate(x.type.shape):
        lo, hi = pads[2 * i], pads[2 * i + 1]
        if mode == "reflect" and isinstance(d, int) and (lo > 0 or hi > 0):
            expect(max(lo, hi) < d, f"reflect padding {lo, hi} must be smaller than {d}")
        if isinstance(d, int):
            expect(d + lo + hi >= 0, f"padding {lo, hi} crops axis {i} of {x.type} below zero")
            shape.append(d + lo + hi)
        else:
            shape.append(d if lo == hi == 0 else Dim())
    return x.type.with_shape(shape)


@defop()
def reverse(x: Value, axes: Ints) -> TensorType:
    """Reverse the order of elements along ``axes``."""
    norm_axes(axes, x.type.rank)
    return x.type


@defop()
def get_shape(x: Value) -> TensorType:
    """The shape of ``x`` as a 1-d int64 tensor."""
    return TensorType([x.type.rank], DType.int64)


@defop()
def range_(start: Value, end: Value, step: Value) -> TensorType:
    """``[start, start+step, ...)`` up to ``end`` (0-d operands of one dtype)."""
    dtype = same_dtype(start, end, step)
    for v in (start, end, step):
        expect(v.type.rank == 0, f"range bounds must be 0-d, got {v.type}")
    s, e, st = (constant_data(v) for v in (start, end, step))
    if s is None or e is None or st is None:
        return TensorType([Dim()], dtype)
    expect(st.item() != 0, "range step must be nonzero")
    n = max(0, math.ceil((e.item() - s.item()) / st.item()))
    return TensorType([n], dtype)


# -- indexing ------------------------------------------------------------------------------------

def _expect_indices(indices: Value) -> None:
    expect(indices.type.element_type.is_int, f"indices must be integers, got {indices.type}")


@defop()
def gather(x: Value, indices: Value, axis: int = 0, wrap_negative: bool = True) -> TensorType:
    """``take`` along ``axis``: result shape x[:axis] + indices.shape + x[axis+1:].

    Indices lie in [0, n) (n = x's size along ``axis``), or in [-n, n) counting from the end
    when ``wrap_negative`` (torch ``take``/``index``); any other index is a run-time error
    (``embedding`` and ``index_select`` reject negative ones)."""
    _expect_indices(indices)
    ax = norm_axis(axis, x.type.rank)
    s = x.type.shape
    return x.type.with_shape([*s[:ax], *indices.type.shape, *s[ax + 1:]])


@defop()
def gather_along_axis(x: Value, indices: Value, axis: int,
                      wrap_negative: bool = True) -> TensorType:
    """``torch.gather``: out[i][j] = x[indices[i][j]][j] for axis 0 (same rank).

    Index range as :func:`gather` (``torch.gather`` rejects negative indices,
    ``take_along_dim`` wraps them)."""
    _expect_indices(indices)
    norm_axis(axis, x.type.rank)
    expect(indices.type.rank == x.type.rank, f"indices {indices.type} must have rank {x.type.rank}")
    return x.type.with_shape(indices.type.shape)


@defop()
def gather_nd(x: Value, indices: Value) -> TensorType:
    """Index the first K axes with the last axis of ``indices`` (size K)."""
    _expect_indices(indices)
    expect(indices.type.rank >= 1, "indices must have rank >= 1")
    k = indices.type.shape[-1]
    if not isinstance(k, int) or k > x.type.rank:
        fail(f"index depth {k} exceeds rank of {x.type}")
    return x.type.with_shape([*indices.type.shape[:-1], *x.type.shape[k:]])


@defop()
def scatter_along_axis(x: Value, indices: Value, updates: Value, axis: int,
                       reduction: Literal["none", "add", "mul", "max", "min", "mean"] = "none",
                       include_self: bool = True, wrap_negative: bool = True) -> TensorType:
    """``torch.scatter``/``scatter_reduce``: write ``updates`` at ``indices`` along ``axis``.

    Index range as :func:`gather` (``torch.scatter`` rejects negative indices)."""
    _expect_indices(indices)
    same_dtype(x, updates)
    norm_axis(axis, x.type.rank)
    expect(indices.type.rank == x.type.rank == updates.type.rank,
           f"x {x.type}, indices {indices.type} and updates {updates.type} must share a rank")
    return x.type


@defop()
def scatter_nd(x: Value, indices: Value, updates: Value, accumulate: bool = False) -> TensorType:
    """Write (or with ``accumulate`` add) ``updates`` at the K-d ``indices`` of ``x``."""
    _expect_indices(indices)
    same_dtype(x, updates)
    expect(indices.type.rank >= 1, "indices must have rank >= 1")
    k = indices.type.shape[-1]
    if not isinstance(k, int) or k > x.type.rank:
        fail(f"index depth {k} exceeds rank of {x.type}")
    expected = [*indices.type.shape[:-1], *x.type.shape[k:]]
    broadcast_shapes(updates.type.shape, expected)
    return x.type


@defop()
def non_zero(x: Value) -> TensorType:
    """Coordinates of nonzero elements (a complex element is nonzero when either part is),
    shape [n, rank], int64, in row-major order."""
    return TensorType([Dim("nnz"), x.type.rank], DType.int64)


# the builders of the ops defined above (see builder_names)
__all__ = [*builder_names(__name__)]
