"""Built-in lowerings (indexing family): scatter, scatter_reduce, index_reduce, *_scatter views.

Merged into ``coreai_torch.lowerings.indexing.LOWERINGS``.
"""

from __future__ import annotations

import numpy as np
import torch.fx

from coreai_core import Location, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._common import ValuesMap
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
from coreai_torch.utils import cast_to, get_arg, get_operand, normalize_dim, shape_value

LOWERINGS = LoweringSet("scatter")
reg = LOWERINGS.register_torch_lowering

# torch reduce names -> scatter_along_axis reductions
_REDUCTIONS = {
    None: "none", "sum": "add", "add": "add", "prod": "mul", "multiply": "mul", "mean": "mean",
    "amax": "max", "amin": "min",
}


def _reduction(name: str | None) -> str:
    if name not in _REDUCTIONS:
        raise NotImplementedError(f"scatter reduction {name!r} is not supported")
    return _REDUCTIONS[name]


def _scatter(values_map: ValuesMap, node: torch.fx.Node, loc: Location, reduce: str | None,
             include_self: bool = True) -> Value:
    """scatter(self, dim, index, src-or-value) with ``reduce``; shapes as torch.scatter."""
    x = get_operand(values_map, node, 0, loc)
    index = int64(get_operand(values_map, node, 2, loc), loc)
    src = node.args[3]
    dtype = x.type.element_type
    scalar = x.type.rank == 0
    if scalar:
        x = coreai.reshape(x, [1], loc=loc)
    if index.type.rank == 0:
        index = coreai.reshape(index, [1], loc=loc)
    if isinstance(src, torch.fx.Node) and src.meta["val"].dim() > 0:
        updates = crop_to(cast_to(values_map[src.name], dtype, loc), index, loc)
    else:  # a scalar value (or a 0-d src) written at every index
        value = (cast_to(values_map[src.name], dtype, loc) if isinstance(src, torch.fx.Node)
                 else coreai.constant(src, dtype=dtype, loc=loc))
        updates = coreai.broadcast_to(value, shape_of(index, loc), loc=loc)
    axis = normalize_dim(node.args[1], x.type.rank)
    out = coreai.scatter_along_axis(x, index, updates, axis=axis, reduction=_reduction(reduce),
                                    include_self=include_self, loc=loc)
    return to_scalar(out, loc) if scalar else out


@reg("aten::scatter.src", "aten::scatter.value")
def aten_scatter_src(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """scatter.src(Tensor self, int dim, Tensor index, Tensor src) -> Tensor"""
    return _scatter(values_map, node, loc, None)


@reg("aten::scatter.reduce", "aten::scatter.value_reduce")
def aten_scatter_reduce(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """scatter.reduce(Tensor self, int dim, Tensor index, Tensor src, *, str reduce) -> Tensor"""
    return _scatter(values_map, node, loc, get_arg(node, 4, "reduce"))


@reg("aten::scatter_add.default")
def aten_scatter_add_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor"""
    return _scatter(values_map, node, loc, "add")


@reg("aten::scatter_reduce.two")
def aten_scatter_reduce_two(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """scatter_reduce.two(Tensor self, int dim, Tensor index, Tensor src, str reduce, *, bool include_self=True) -> Tensor"""  # noqa: E501
    return _scatter(values_map, node, loc, get_arg(node, 4, "reduce"),
                    bool(get_arg(node, 5, "include_self", True)))


@reg("aten::index_reduce.default")
def aten_index_reduce_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                              ) -> Value:
    """index_reduce(Tensor self, int dim, Tensor index, Tensor source, str reduce, *, bool include_self=True) -> Tensor"""  # noqa: E501
    x = get_operand(values_map, node, 0, loc)
    index = int64(get_operand(values_map, node, 2, loc), loc)
    source = cast_to(get_operand(values_map, node, 3, loc), x.type.element_type, loc)
    reduce = get_arg(node, 4, "reduce")
    include_self = bool(get_arg(node, 5, "include_self", True))
    scalar = x.type.rank == 0
    if scalar:
        x, source = (coreai.reshape(v, [1], loc=loc) for v in (x, source))
    axis = normalize_dim(node.args[1], x.type.rank)
    # index[i] applies to source's slice i along axis: spread it over source's shape
    shape = [1] * x.type.rank
    shape[axis] = -1
    index = coreai.broadcast_to(coreai.reshape(index, shape, loc=loc), shape_of(source, loc),
                                loc=loc)
    out = coreai.scatter_along_axis(x, index, source, axis=axis, reduction=_reduction(reduce),
                                    include_self=include_self, loc=loc)
    return to_scalar(out, loc) if scalar else out


# -- scatters into views --------------------------------------------------------------------------

def _bound(values_map: ValuesMap, node: torch.fx.Node, value: object, loc: Location) -> Value:
    if isinstance(value, torch.fx.Node):
        return shape_value(values_map, node, [value], loc)
    return const64([int(value)], loc)


@reg("aten::select_scatter.default")
def aten_select_scatter_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                                ) -> Value:
    """select_scatter(Tensor self, Tensor src, int dim, SymInt index) -> Tensor"""
    x = get_operand(values_map, node, 0, loc)
    src = cast_to(get_operand(values_map, node, 1, loc), x.type.element_type, loc)
    axis = normalize_dim(node.args[2], x.type.rank)
    index = node.args[3]
    begin = _bound(values_map, node, index, loc)
    if isinstance(index, torch.fx.Node) or index < 0:
        size = dim_size(x, axis, loc)
        size = const64([size], loc) if isinstance(size, int) else coreai.reshape(size, [1], loc=loc)
        neg = coreai.broadcasting_less(begin, const64(0, loc), loc=loc)
        begin = coreai.broadcasting_where(neg, coreai.broadcasting_add(begin, size, loc=loc),
                                          begin, loc=loc)
    end = coreai.broadcasting_add(begin, const64(1, loc), loc=loc)
    update = coreai.expand_dims(src, axes=[axis], loc=loc)
    return coreai.slice_update(x, update, begin, end, axes=[axis], strides=[1], loc=loc)


@reg("aten::slice_scatter.default")
def aten_slice_scatter_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                               ) -> Value:
    """slice_scatter(Tensor self, Tensor src, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor"""  # noqa: E501
    x = get_operand(values_map, node, 0, loc)
    src = cast_to(get_operand(values_map, node, 1, loc), x.type.element_type, loc)
    axis = normalize_dim(get_arg(node, 2, "dim", 0), x.type.rank)
    start = get_arg(node, 3, "start")
    end = get_arg(node, 4, "end")
    step = get_arg(node, 5, "step", 1)
    if not isinstance(step, int):
        raise NotImplementedError("slice_scatter needs a static step")
    begin = _bound(values_map, node, 0 if start is None else start, loc)
    stop = _bound(values_map, node, np.iinfo(np.int64).max if end is None else end, loc)
    return coreai.slice_update(x, src, begin, stop, axes=[axis], strides=[step], loc=loc)


@reg("aten::diagonal_scatter.default")
def aten_diagonal_scatter_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                                  ) -> Value:
    """diagonal_scatter(Tensor self, Tensor src, int offset=0, int dim1=0, int dim2=1) -> Tensor"""
    x = get_operand(values_map, node, 0, loc)
    src = cast_to(get_operand(values_map, node, 1, loc), x.type.element_type, loc)
    offset = get_arg(node, 2, "offset", 0)
    rank = x.type.rank
    d1 = normalize_dim(get_arg(node, 3, "dim1", 0), rank)
    d2 = normalize_dim(get_arg(node, 4, "dim2", 1), rank)
    n1, n2 = x.type.shape[d1], x.type.shape[d2]
    if not isinstance(n1, int) or not isinstance(n2, int):
        raise NotImplementedError("diagonal_scatter needs static sizes on dim1 and dim2")
    rows = np.arange(max(0, -offset), n1)
    cols = rows + offset
    keep = cols < n2
    coords = np.stack([rows[keep], cols[keep]], axis=-1).astype(np.int64).reshape(-1, 2)
    # (dim1, dim2) first; src holds the diagonal on its last axis -> move it first
    perm = [d1, d2] + [a for a in range(rank) if a not in (d1, d2)]
    xt = transpose(x, perm, loc)
    updates = transpose(src, [src.type.rank - 1, *range(src.type.rank - 1)], loc)
    out = coreai.scatter_nd(xt, coreai.constant(coords, loc=loc), updates, loc=loc)
    return transpose(out, inverse(perm), loc)
