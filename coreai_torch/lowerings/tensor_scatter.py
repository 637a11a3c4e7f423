"""Built-in lowerings (tensor family): scatter, scatter_reduce, index_reduce, *_scatter views.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from coreai_core import DType, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._index_utils import (
    const64,
    crop_to,
    dim_size,
    int64,
    inverse,
    shape_of,
    to_scalar,
    transpose,
)
from coreai_torch.lowerings._nn_utils import STATIC_WORKAROUND
from coreai_torch.utils import cast_to, normalize_dim

LOWERINGS = LoweringSet("tensor_scatter")
reg = LOWERINGS.register_torch_lowering

# torch reduce names -> scatter_along_axis reductions
Reduction = Literal["none", "add", "mul", "max", "min", "mean"]
_REDUCTIONS: dict[str | None, Reduction] = {
    None: "none", "sum": "add", "add": "add", "prod": "mul", "multiply": "mul", "mean": "mean",
    "amax": "max", "amin": "min",
}


def _reduction(name: str | None) -> Reduction:
    if name not in _REDUCTIONS:
        raise NotImplementedError(f"scatter reduction {name!r} is not supported")
    return _REDUCTIONS[name]


def _scatter(x: Value, dim: int, index: Value, src: Value | float, reduce: str | None,
             include_self: bool = True) -> Value:
    """scatter(self, dim, index, src-or-value) with ``reduce``; shapes as torch.scatter."""
    index = int64(index)
    dtype = x.type.element_type
    scalar = x.type.rank == 0
    if scalar:
        x = coreai.reshape(x, [1])
    if index.type.rank == 0:
        index = coreai.reshape(index, [1])
    if isinstance(src, Value) and src.type.rank > 0:
        updates = crop_to(cast_to(src, dtype), index)
    else:  # a scalar value (or a 0-d src) written at every index
        updates = coreai.broadcast_to(cast_to(src, dtype), shape_of(index))
    axis = normalize_dim(dim, x.type.rank)
    out = coreai.scatter_along_axis(x, index, updates, axis=axis, reduction=_reduction(reduce),
                                    include_self=include_self, wrap_negative=False)
    return to_scalar(out) if scalar else out


@reg("aten::scatter.src")
def aten_scatter_src(self: Value, dim: int, index: Value, src: Value) -> Value:
    """scatter.src(Tensor self, int dim, Tensor index, Tensor src) -> Tensor"""
    return _scatter(self, dim, index, src, None)


@reg("aten::scatter.value")
def aten_scatter_value(self: Value, dim: int, index: Value, value: float | Value) -> Value:
    """scatter.value(Tensor self, int dim, Tensor index, Scalar value) -> Tensor"""
    return _scatter(self, dim, index, value, None)


@reg("aten::scatter.reduce")
def aten_scatter_reduce(self: Value, dim: int, index: Value, src: Value, reduce: str) -> Value:
    """scatter.reduce(Tensor self, int dim, Tensor index, Tensor src, *, str reduce) -> Tensor"""
    return _scatter(self, dim, index, src, reduce)


@reg("aten::scatter.value_reduce")
def aten_scatter_value_reduce(self: Value, dim: int, index: Value, value: float | Value,
                              reduce: str) -> Value:
    """scatter.value_reduce(Tensor self, int dim, Tensor index, Scalar value, *, str reduce) -> Tensor"""  # noqa: E501
    return _scatter(self, dim, index, value, reduce)


@reg("aten::scatter_add.default")
def aten_scatter_add_default(self: Value, dim: int, index: Value, src: Value) -> Value:
    """scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor"""
    return _scatter(self, dim, index, src, "add")


@reg("aten::scatter_reduce.two")
def aten_scatter_reduce_two(self: Value, dim: int, index: Value, src: Value, reduce: str,
                            include_self: bool = True) -> Value:
    """scatter_reduce.two(Tensor self, int dim, Tensor index, Tensor src, str reduce, *, bool include_self=True) -> Tensor"""  # noqa: E501
    return _scatter(self, dim, index, src, reduce, include_self)


@reg("aten::index_reduce.default")
def aten_index_reduce_default(self: Value, dim: int, index: Value, source: Value, reduce: str,
                              include_self: bool = True) -> Value:
    """index_reduce(Tensor self, int dim, Tensor index, Tensor source, str reduce, *, bool include_self=True) -> Tensor"""  # noqa: E501
    x = self
    index = int64(index)
    source = cast_to(source, x.type.element_type)
    scalar = x.type.rank == 0
    if scalar:
        x, source = (coreai.reshape(v, [1]) for v in (x, source))
    axis = normalize_dim(dim, x.type.rank)
    # index[i] applies to source's slice i along axis: spread it over source's shape
    shape = [1] * x.type.rank
    shape[axis] = -1
    index = coreai.broadcast_to(coreai.reshape(index, shape), shape_of(source))
    out = coreai.scatter_along_axis(x, index, source, axis=axis, reduction=_reduction(reduce),
                                    include_self=include_self, wrap_negative=False)
    return to_scalar(out) if scalar else out


# -- scatters into views --------------------------------------------------------------------------

def _bound(value: int | Value) -> Value:
    if isinstance(value, Value):
        return coreai.reshape(cast_to(value, DType.int64), [1])
    return const64([int(value)])


@reg("aten::select_scatter.default")
def aten_select_scatter_default(self: Value, src: Value, dim: int, index: int | Value) -> Value:
    """select_scatter(Tensor self, Tensor src, int dim, SymInt index) -> Tensor"""
    x = self
    src = cast_to(src, x.type.element_type)
    axis = normalize_dim(dim, x.type.rank)
    begin = _bound(index)
    if isinstance(index, Value) or index < 0:
        size = dim_size(x, axis)
        size = const64([size]) if isinstance(size, int) else coreai.reshape(size, [1])
        neg = coreai.broadcasting_less(begin, const64(0))
        begin = coreai.broadcasting_where(neg, coreai.broadcasting_add(begin, size), begin)
    end = coreai.broadcasting_add(begin, const64(1))
    update = coreai.expand_dims(src, axes=[axis])
    return coreai.slice_update(x, update, begin, end, axes=[axis], strides=[1])


@reg("aten::slice_scatter.default")
def aten_slice_scatter_default(self: Value, src: Value, dim: int = 0,
                               start: int | Value | None = None, end: int | Value | None = None,
                               step: int | Value = 1) -> Value:
    """slice_scatter(Tensor self, Tensor src, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor"""  # noqa: E501
    x = self
    src = cast_to(src, x.type.element_type)
    axis = normalize_dim(dim, x.type.rank)
    if not isinstance(step, int):
        raise NotImplementedError("slice_scatter needs a static step")
    begin = _bound(0 if start is None else start)
    stop = _bound(np.iinfo(np.int64).max if end is None else end)
    return coreai.slice_update(x, src, begin, stop, axes=[axis], strides=[step])


@reg("aten::diagonal_scatter.default")
def aten_diagonal_scatter_default(self: Value, src: Value, offset: int = 0, dim1: int = 0,
                                  dim2: int = 1) -> Value:
    """diagonal_scatter(Tensor self, Tensor src, int offset=0, int dim1=0, int dim2=1) -> Tensor"""
    x = self
    src = cast_to(src, x.type.element_type)
    rank = x.type.rank
    d1 = normalize_dim(dim1, rank)
    d2 = normalize_dim(dim2, rank)
    n1, n2 = x.type.shape[d1], x.type.shape[d2]
    if not isinstance(n1, int) or not isinstance(n2, int):
        raise NotImplementedError("diagonal_scatter needs static sizes on dim1 and dim2")
    rows = np.arange(max(0, -offset), n1)
    cols = rows + offset
    keep = cols < n2
    coords = np.stack([rows[keep], cols[keep]], axis=-1).astype(np.int64).reshape(-1, 2)
    # (dim1, dim2) first; src holds the diagonal on its last axis -> move it first
    perm = [d1, d2] + [a for a in range(rank) if a not in (d1, d2)]
    xt = transpose(x, perm)
    updates = transpose(src, [src.type.rank - 1, *range(src.type.rank - 1)])
    out = coreai.scatter_nd(xt, coreai.constant(coords), updates)
    return transpose(out, inverse(perm))


@reg("aten::as_strided_scatter.default")
def aten_as_strided_scatter_default(self: Value, src: Value, size: list[int | Value],
                                    stride: list[int | Value],
                                    storage_offset: int | Value | None = None) -> Value:
    """as_strided_scatter(Tensor self, Tensor src, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) -> Tensor

    ``self`` is taken as contiguous (a functional program's tensors are): the view's element
    at index ``i`` is storage element ``storage_offset + sum(i_k * stride_k)`` of self's
    row-major flattening. Where view elements overlap, the last one written wins.
    """  # noqa: E501
    sizes = [s for s in size if isinstance(s, int)]
    strides = [s for s in stride if isinstance(s, int)]
    if (len(sizes) != len(size) or len(strides) != len(stride)
            or isinstance(storage_offset, Value) or not self.type.is_static):
        raise NotImplementedError("as_strided_scatter needs static sizes, strides and offset, "
                                  f"got {self.type}; {STATIC_WORKAROUND}")
    offset = int(storage_offset or 0)
    grid = np.indices(sizes)
    flat_index = offset + sum((g.astype(np.int64) * st for g, st in zip(grid, strides,
                                                                        strict=True)),
                              start=np.zeros(sizes, np.int64))
    flat = coreai.reshape(self, [-1])
    updates = coreai.reshape(cast_to(src, self.type.element_type), [-1])
    index = coreai.constant(flat_index.reshape(-1, 1))
    out = coreai.scatter_nd(flat, index, updates)
    return coreai.reshape(out, list(self.type.shape))
