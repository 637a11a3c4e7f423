"""Built-in lowerings (tensor family): indexing, gather/scatter, masks, nonzero, embedding.

Advanced indexing (``index.Tensor``/``index_put``) follows numpy/torch: the index tensors are
broadcast together (bool masks contribute one int64 column per mask dimension through
``non_zero``, so their length is data dependent), the indexed axes are moved to the front and
addressed with ``gather_nd``/``scatter_nd``; when the advanced indices are adjacent the result's
broadcast block stays where the first of them was, otherwise it leads. Scatter-like ops are the
``scatter`` family and embeddings the ``embedding`` family.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import numpy as np

from coreai_core import DType, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._index_utils import (
    INT64,
    broadcast_together,
    const64,
    crop_to,
    dim_size,
    int64,
    inverse,
    move_axes_perm,
    shape_of,
    to_scalar,
    transpose,
)
from coreai_torch.utils import (
    cast_to,
    normalize_dim,
    result_dtype,
)

LOWERINGS = LoweringSet("tensor_indexing")
reg = LOWERINGS.register_torch_lowering

_MASK_DTYPES = (DType.bool, DType.uint8)


# -- advanced indexing ----------------------------------------------------------------------------

@attrs.frozen
class _IndexPlan:
    """How ``x[indices]`` addresses ``x``.

    ``dims`` are the indexed axes in order, ``index`` the broadcast int64 coordinates with a
    trailing axis of size ``len(dims)``; ``x`` transposed by ``perm`` has the indexed axes first.
    The gathered result (broadcast block first, then the remaining axes) is moved so the block
    starts at axis ``at`` (0 unless the indexed axes are adjacent).
    """

    dims: list[int]
    index: Value
    perm: list[int]
    at: int
    rank: int

    @property
    def block_rank(self) -> int:
        return self.index.type.rank - 1

    @property
    def out_rank(self) -> int:
        return self.block_rank + self.rank - len(self.dims)

    def to_torch_order(self) -> list[int]:
        """Permutation from (block, rest) order to torch's result order."""
        return move_axes_perm(self.out_rank, 0, self.block_rank, self.at)


def _index_groups(x: Value, indices: Sequence[Value | None],
                  ) -> list[tuple[list[int], Value, bool]]:
    """(axes, coordinates, is_mask) per non-None index; masks become ``non_zero`` columns."""
    groups = []
    axis = 0
    for v in indices:
        if v is None:
            axis += 1
            continue
        if v.type.element_type in _MASK_DTYPES:
            r = v.type.rank
            if r == 0:
                raise NotImplementedError("a 0-d boolean index is not supported")
            groups.append((list(range(axis, axis + r)), coreai.non_zero(v), True))
            axis += r
        else:
            if not v.type.element_type.is_int:
                raise TypeError(f"index tensors must be integer or bool, got {v.type}")
            # negative indices count from the end: gather_nd/scatter_nd wrap [-n, n) and
            # reject the rest (wrapping here too would accept -n-1)
            groups.append(([axis], int64(v), False))
            axis += 1
    if axis > x.type.rank:
        raise IndexError(f"too many indices ({axis}) for a tensor of rank {x.type.rank}")
    if not groups:
        raise NotImplementedError("index.Tensor needs at least one index tensor")
    return groups


def _column(nz: Value, j: int) -> Value:
    col = coreai.slice_(nz, [j], [j + 1], axes=[1], strides=[1])
    return coreai.shrink_dims(col, axes=[1])


def _plan(x: Value, indices: Sequence[Value | None]) -> _IndexPlan:
    groups = _index_groups(x, indices)
    dims = [a for axes, _, _ in groups for a in axes]
    if len(groups) == 1 and groups[0][2]:
        index = groups[0][1]  # a single mask: its non_zero rows are the coordinates
    else:
        cols: list[Value] = []
        for axes, v, is_mask in groups:
            cols += [_column(v, j) for j in range(len(axes))] if is_mask else [v]
        cols = broadcast_together(cols)
        index = coreai.concat([coreai.expand_dims(c, axes=[-1]) for c in cols],
                              axis=-1)
    rest = [a for a in range(x.type.rank) if a not in dims]
    adjacent = dims == list(range(dims[0], dims[0] + len(dims)))
    return _IndexPlan(dims, index, dims + rest, dims[0] if adjacent else 0, x.type.rank)


@reg("aten::index.Tensor")
def aten_index_tensor(self: Value, indices: list[Value | None]) -> Value:
    """index.Tensor(Tensor self, Tensor?[] indices) -> Tensor"""
    x = self
    present = [(i, v) for i, v in enumerate(indices) if v is not None]
    if len(present) == 1:  # one integer index tensor: a plain take along its axis
        axis, v = present[0]
        if v.type.element_type not in _MASK_DTYPES:
            return coreai.gather(x, int64(v), axis=axis)  # wraps [-n, n) like torch
    plan = _plan(x, indices)
    out = coreai.gather_nd(transpose(x, plan.perm), plan.index)
    return transpose(out, plan.to_torch_order())


@reg("aten::index_put.default")
def aten_index_put_default(self: Value, indices: list[Value | None], values: Value,
                           accumulate: bool = False) -> Value:
    """index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor"""
    x = self
    values = cast_to(values, x.type.element_type)
    plan = _plan(x, indices)
    # values broadcast against torch's result order; bring them to (block, rest) order
    rank = plan.out_rank
    extra = values.type.rank - rank
    if extra > 0:
        if any(d != 1 for d in values.type.shape[:extra]):
            raise NotImplementedError(f"values {values.type} do not broadcast to the indexed "
                                      f"shape of rank {rank}")
        values = coreai.shrink_dims(values, axes=list(range(extra)))
    elif extra < 0:
        values = coreai.expand_dims(values, axes=list(range(-extra)))
    values = transpose(values, inverse(plan.to_torch_order()))
    xt = transpose(x, plan.perm)
    out = coreai.scatter_nd(xt, plan.index, values, accumulate=accumulate)
    return transpose(out, inverse(plan.perm))


# -- gather / select ------------------------------------------------------------------------------

def _at_least_1d(*values: Value) -> list[Value]:
    return [coreai.reshape(v, [1]) if v.type.rank == 0 else v for v in values]


@reg("aten::gather.default")
def aten_gather_default(self: Value, dim: int, index: Value, sparse_grad: bool = False) -> Value:
    """gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor"""
    sizes = index.type.static_shape
    if sizes is not None and 0 in sizes:
        # torch checks nothing against an empty index (not even its rank): an empty result
        return coreai.constant(np.zeros(sizes, self.type.element_type.numpy))
    index = int64(index)
    scalar = index.type.rank == 0
    x, index = _at_least_1d(self, index)
    axis = normalize_dim(dim, x.type.rank)
    out = coreai.gather_along_axis(crop_to(x, index, skip=axis), index, axis=axis,
                                   wrap_negative=False)  # torch rejects negative indices
    return to_scalar(out) if scalar else out


@reg("aten::index_select.default")
def aten_index_select_default(self: Value, dim: int, index: Value) -> Value:
    """index_select(Tensor self, int dim, Tensor index) -> Tensor"""
    x = self
    index = int64(index)
    if x.type.rank == 0:  # the only valid index is 0 and the result is x itself
        return x
    axis = normalize_dim(dim, x.type.rank)
    if index.type.rank == 0:
        index = coreai.reshape(index, [1])
    return coreai.gather(x, index, axis=axis, wrap_negative=False)  # torch rejects -1


# -- masks ----------------------------------------------------------------------------------------

@reg("aten::masked_fill.Scalar")
@reg("aten::masked_fill.Tensor")
def aten_masked_fill_scalar(self: Value, mask: Value, value: float | Value) -> Value:
    """masked_fill.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor"""
    dtype = result_dtype()
    return coreai.broadcasting_where(cast_to(mask, DType.bool), cast_to(value, dtype),
                                     cast_to(self, dtype))


@reg("aten::masked_scatter.default")
def aten_masked_scatter_default(self: Value, mask: Value, source: Value) -> Value:
    """masked_scatter(Tensor self, Tensor mask, Tensor source) -> Tensor"""
    # The k-th True position (row-major) takes source.flatten()[k]: an exclusive prefix sum of
    # the mask gives each position its source index.
    source = cast_to(source, self.type.element_type)
    x, mask = broadcast_together([self, cast_to(mask, DType.bool)])
    if source.type.numel == 0:
        return x
    out_shape = shape_of(x)
    flat_mask = coreai.reshape(mask, [-1])
    flat_x = coreai.reshape(x, [-1])
    pos = coreai.scan(int64(flat_mask), axis=0, kind="sum", exclusive=True)
    flat_src = coreai.reshape(source, [-1])
    last = coreai.broadcasting_sub(dim_size_value(flat_src), const64(1))
    pos = coreai.broadcasting_minimum(pos, last)  # positions past the last True
    taken = coreai.gather(flat_src, pos, axis=0)
    out = coreai.broadcasting_where(flat_mask, taken, flat_x)
    return coreai.reshape(out, out_shape)


def dim_size_value(x: Value, axis: int = 0) -> Value:
    """``x``'s size along ``axis`` as a 0-d int64 Value."""
    size = dim_size(x, axis)
    return const64(size) if isinstance(size, int) else size


@reg("aten::masked_select.default")
def aten_masked_select_default(self: Value, mask: Value) -> Value:
    """masked_select(Tensor self, Tensor mask) -> Tensor"""
    x, mask = broadcast_together([self, cast_to(mask, DType.bool)])
    flat_x = coreai.reshape(x, [-1])
    coords = coreai.non_zero(coreai.reshape(mask, [-1]))
    return coreai.gather_nd(flat_x, coords)


@reg("aten::nonzero.default")
def aten_nonzero_default(self: Value) -> Value:
    """nonzero(Tensor self) -> Tensor"""
    return coreai.non_zero(self)


@reg("aten::nonzero_static.default")
def aten_nonzero_static_default(self: Value, size: int | Value, fill_value: int = -1) -> Value:
    """nonzero_static(Tensor self, *, SymInt size, int fill_value=-1) -> Tensor"""
    x, fill = self, fill_value
    if not isinstance(size, int):
        raise NotImplementedError("nonzero_static needs a static size")
    rank = x.type.rank
    padding = coreai.constant(np.full((size, rank), fill, dtype=np.int64))
    both = coreai.concat([coreai.non_zero(x), padding], axis=0)
    first = coreai.slice_(both, [0], [size], axes=[0], strides=[1])
    return coreai.reshape(first, [size, rank])


# -- flat put -------------------------------------------------------------------------------------

@reg("aten::put.default")
def aten_put_default(self: Value, index: Value, source: Value, accumulate: bool = False,
                     ) -> Value:
    """put(Tensor self, Tensor index, Tensor source, bool accumulate=False) -> Tensor"""
    x = self
    index = int64(index)
    source = cast_to(source, x.type.element_type)
    flat = coreai.reshape(x, [-1])
    index = coreai.reshape(index, [-1, 1])  # scatter_nd wraps [-n, n) like torch
    out = coreai.scatter_nd(flat, index, coreai.reshape(source, [-1]),
                            accumulate=accumulate)
    return coreai.reshape(out, shape_of(x))


__all__ = ["INT64", "LOWERINGS"]
