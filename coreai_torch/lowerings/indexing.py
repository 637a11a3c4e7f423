"""Built-in lowerings: indexing, gather/scatter, masks, nonzero, embedding.

Advanced indexing (``index.Tensor``/``index_put``) follows numpy/torch: the index tensors are
broadcast together (bool masks contribute one int64 column per mask dimension through
``non_zero``, so their length is data dependent), the indexed axes are moved to the front and
addressed with ``gather_nd``/``scatter_nd``; when the advanced indices are adjacent the result's
broadcast block stays where the first of them was, otherwise it leads. Scatter-like ops are the
``scatter`` family and embeddings the ``embedding`` family.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
import torch.fx

from coreai_core import DType, Location, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._common import ValuesMap
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
    wrap_negative,
)
from coreai_torch.utils import (
    cast_to,
    get_arg,
    get_operand,
    normalize_dim,
    result_dtype,
)

LOWERINGS = LoweringSet("indexing")
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


def _index_groups(values_map: ValuesMap, x: Value, indices: Sequence[Any], loc: Location,
                  ) -> list[tuple[list[int], Value, bool]]:
    """(axes, coordinates, is_mask) per non-None index; masks become ``non_zero`` columns."""
    groups = []
    axis = 0
    for arg in indices:
        if arg is None:
            axis += 1
            continue
        v = values_map[arg.name]
        if v.type.element_type in _MASK_DTYPES:
            r = v.type.rank
            if r == 0:
                raise NotImplementedError("a 0-d boolean index is not supported")
            groups.append((list(range(axis, axis + r)), coreai.non_zero(v, loc=loc), True))
            axis += r
        else:
            if not v.type.element_type.is_int:
                raise TypeError(f"index tensors must be integer or bool, got {v.type}")
            v = wrap_negative(int64(v, loc), dim_size(x, axis, loc), loc)
            groups.append(([axis], v, False))
            axis += 1
    if axis > x.type.rank:
        raise IndexError(f"too many indices ({axis}) for a tensor of rank {x.type.rank}")
    if not groups:
        raise NotImplementedError("index.Tensor needs at least one index tensor")
    return groups


def _column(nz: Value, j: int, loc: Location) -> Value:
    col = coreai.slice_(nz, [j], [j + 1], axes=[1], strides=[1], loc=loc)
    return coreai.shrink_dims(col, axes=[1], loc=loc)


def _plan(values_map: ValuesMap, x: Value, indices: Sequence[Any], loc: Location) -> _IndexPlan:
    groups = _index_groups(values_map, x, indices, loc)
    dims = [a for axes, _, _ in groups for a in axes]
    if len(groups) == 1 and groups[0][2]:
        index = groups[0][1]  # a single mask: its non_zero rows are the coordinates
    else:
        cols: list[Value] = []
        for axes, v, is_mask in groups:
            cols += [_column(v, j, loc) for j in range(len(axes))] if is_mask else [v]
        cols = broadcast_together(cols, loc)
        index = coreai.concat([coreai.expand_dims(c, axes=[-1], loc=loc) for c in cols],
                              axis=-1, loc=loc)
    rest = [a for a in range(x.type.rank) if a not in dims]
    adjacent = dims == list(range(dims[0], dims[0] + len(dims)))
    return _IndexPlan(dims, index, dims + rest, dims[0] if adjacent else 0, x.type.rank)


@reg("aten::index.Tensor")
def aten_index_tensor(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """index.Tensor(Tensor self, Tensor?[] indices) -> Tensor"""
    x = get_operand(values_map, node, 0, loc)
    indices = node.args[1]
    present = [(i, a) for i, a in enumerate(indices) if a is not None]
    if len(present) == 1:  # one integer index tensor: a plain take along its axis
        axis, arg = present[0]
        v = values_map[arg.name]
        if v.type.element_type not in _MASK_DTYPES:
            v = wrap_negative(int64(v, loc), dim_size(x, axis, loc), loc)
            return coreai.gather(x, v, axis=axis, loc=loc)
    plan = _plan(values_map, x, indices, loc)
    out = coreai.gather_nd(transpose(x, plan.perm, loc), plan.index, loc=loc)
    return transpose(out, plan.to_torch_order(), loc)


@reg("aten::index_put.default")
def aten_index_put_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor"""
    x = get_operand(values_map, node, 0, loc)
    values = cast_to(get_operand(values_map, node, 2, loc), x.type.element_type, loc)
    accumulate = bool(get_arg(node, 3, "accumulate", False))
    plan = _plan(values_map, x, node.args[1], loc)
    # values broadcast against torch's result order; bring them to (block, rest) order
    rank = plan.out_rank
    extra = values.type.rank - rank
    if extra > 0:
        if any(d != 1 for d in values.type.shape[:extra]):
            raise NotImplementedError(f"values {values.type} do not broadcast to the indexed "
                                      f"shape of rank {rank}")
        values = coreai.shrink_dims(values, axes=list(range(extra)), loc=loc)
    elif extra < 0:
        values = coreai.expand_dims(values, axes=list(range(-extra)), loc=loc)
    values = transpose(values, inverse(plan.to_torch_order()), loc)
    xt = transpose(x, plan.perm, loc)
    out = coreai.scatter_nd(xt, plan.index, values, accumulate=accumulate, loc=loc)
    return transpose(out, inverse(plan.perm), loc)


# -- gather / select ------------------------------------------------------------------------------

def _at_least_1d(*values: Value, loc: Location) -> list[Value]:
    return [coreai.reshape(v, [1], loc=loc) if v.type.rank == 0 else v for v in values]


@reg("aten::gather.default")
def aten_gather_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor"""
    x = get_operand(values_map, node, 0, loc)
    index = int64(get_operand(values_map, node, 2, loc), loc)
    scalar = index.type.rank == 0
    x, index = _at_least_1d(x, index, loc=loc)
    axis = normalize_dim(node.args[1], x.type.rank)
    out = coreai.gather_along_axis(crop_to(x, index, loc, skip=axis), index, axis=axis, loc=loc)
    return to_scalar(out, loc) if scalar else out


@reg("aten::index_select.default")
def aten_index_select_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                              ) -> Value:
    """index_select(Tensor self, int dim, Tensor index) -> Tensor"""
    x = get_operand(values_map, node, 0, loc)
    index = int64(get_operand(values_map, node, 2, loc), loc)
    if x.type.rank == 0:  # the only valid index is 0 and the result is x itself
        return x
    axis = normalize_dim(node.args[1], x.type.rank)
    if index.type.rank == 0:
        index = coreai.reshape(index, [1], loc=loc)
    return coreai.gather(x, index, axis=axis, loc=loc)


# -- masks ----------------------------------------------------------------------------------------

@reg("aten::masked_fill.Scalar", "aten::masked_fill.Tensor")
def aten_masked_fill_scalar(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """masked_fill.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor"""
    dtype = result_dtype(node)
    x = cast_to(get_operand(values_map, node, 0, loc), dtype, loc)
    mask = cast_to(get_operand(values_map, node, 1, loc), DType.bool, loc)
    value = node.args[2]
    if isinstance(value, torch.fx.Node):
        fill = cast_to(values_map[value.name], dtype, loc)
    else:
        fill = coreai.constant(value, dtype=dtype, loc=loc)
    return coreai.broadcasting_where(mask, fill, x, loc=loc)


@reg("aten::masked_scatter.default")
def aten_masked_scatter_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                                ) -> Value:
    """masked_scatter(Tensor self, Tensor mask, Tensor source) -> Tensor"""
    # The k-th True position (row-major) takes source.flatten()[k]: an exclusive prefix sum of
    # the mask gives each position its source index.
    x = get_operand(values_map, node, 0, loc)
    mask = cast_to(get_operand(values_map, node, 1, loc), DType.bool, loc)
    source = cast_to(get_operand(values_map, node, 2, loc), x.type.element_type, loc)
    x, mask = broadcast_together([x, mask], loc)
    if source.type.numel == 0:
        return x
    out_shape = shape_of(x, loc)
    flat_mask = coreai.reshape(mask, [-1], loc=loc)
    flat_x = coreai.reshape(x, [-1], loc=loc)
    pos = coreai.scan(int64(flat_mask, loc), axis=0, kind="sum", exclusive=True, loc=loc)
    flat_src = coreai.reshape(source, [-1], loc=loc)
    last = coreai.broadcasting_sub(dim_size_value(flat_src, loc), const64(1, loc), loc=loc)
    pos = coreai.broadcasting_minimum(pos, last, loc=loc)  # positions past the last True
    taken = coreai.gather(flat_src, pos, axis=0, loc=loc)
    out = coreai.broadcasting_where(flat_mask, taken, flat_x, loc=loc)
    return coreai.reshape(out, out_shape, loc=loc)


def dim_size_value(x: Value, loc: Location, axis: int = 0) -> Value:
    """``x``'s size along ``axis`` as a 0-d int64 Value."""
    size = dim_size(x, axis, loc)
    return const64(size, loc) if isinstance(size, int) else size


@reg("aten::masked_select.default")
def aten_masked_select_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                               ) -> Value:
    """masked_select(Tensor self, Tensor mask) -> Tensor"""
    x = get_operand(values_map, node, 0, loc)
    mask = cast_to(get_operand(values_map, node, 1, loc), DType.bool, loc)
    x, mask = broadcast_together([x, mask], loc)
    flat_x = coreai.reshape(x, [-1], loc=loc)
    coords = coreai.non_zero(coreai.reshape(mask, [-1], loc=loc), loc=loc)
    return coreai.gather_nd(flat_x, coords, loc=loc)


@reg("aten::nonzero.default")
def aten_nonzero_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """nonzero(Tensor self) -> Tensor"""
    return coreai.non_zero(get_operand(values_map, node, 0, loc), loc=loc)


@reg("aten::nonzero_static.default")
def aten_nonzero_static_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                                ) -> Value:
    """nonzero_static(Tensor self, *, SymInt size, int fill_value=-1) -> Tensor"""
    x = get_operand(values_map, node, 0, loc)
    size = get_arg(node, 1, "size")
    fill = get_arg(node, 2, "fill_value", -1)
    if not isinstance(size, int):
        raise NotImplementedError("nonzero_static needs a static size")
    rank = x.type.rank
    padding = coreai.constant(np.full((size, rank), fill, dtype=np.int64), loc=loc)
    both = coreai.concat([coreai.non_zero(x, loc=loc), padding], axis=0, loc=loc)
    first = coreai.slice_(both, [0], [size], axes=[0], strides=[1], loc=loc)
    return coreai.reshape(first, [size, rank], loc=loc)


# -- flat put -------------------------------------------------------------------------------------

@reg("aten::put.default")
def aten_put_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """put(Tensor self, Tensor index, Tensor source, bool accumulate=False) -> Tensor"""
    x = get_operand(values_map, node, 0, loc)
    index = int64(get_operand(values_map, node, 1, loc), loc)
    source = cast_to(get_operand(values_map, node, 2, loc), x.type.element_type, loc)
    accumulate = bool(get_arg(node, 3, "accumulate", False))
    flat = coreai.reshape(x, [-1], loc=loc)
    index = wrap_negative(coreai.reshape(index, [-1, 1], loc=loc), dim_size(flat, 0, loc), loc)
    out = coreai.scatter_nd(flat, index, coreai.reshape(source, [-1], loc=loc),
                            accumulate=accumulate, loc=loc)
    return coreai.reshape(out, shape_of(x, loc), loc=loc)


__all__ = ["INT64", "LOWERINGS"]
