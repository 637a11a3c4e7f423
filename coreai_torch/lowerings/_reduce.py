"""Shared pieces of the reduction-family lowerings: dim arguments, counts, accumulation types."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch.fx

from coreai_core import DType, Location, Value
from coreai_core.dialects import coreai
from coreai_torch.lowerings._common import scalar_like
from coreai_torch.utils import cast_to, get_arg, int_list, normalize_dim, normalize_dims

_HALF = (DType.float16, DType.bfloat16)


def acc_dtype(dtype: DType) -> DType:
    """torch's CPU accumulation type for sums, means and softmax: half types use float32."""
    return DType.float32 if dtype in _HALF else dtype


def scan_acc_dtype(dtype: DType) -> DType:
    """torch's CPU accumulation type for cumsum/cumprod (``acc_type<T, false>``)."""
    return DType.float64 if dtype is DType.float32 else acc_dtype(dtype)


def reduced_axes(node: torch.fx.Node, index: int, rank: int, default: Any = None,
                 name: str = "dim") -> list[int] | None:
    """The axes of a ``int[1]? dim`` argument; None means every axis.

    torch reduces every dim for ``dim=None`` and ``dim=[]``; a rank-0 tensor admits dim 0/-1
    and reduces "all" of its zero axes.
    """
    dims = get_arg(node, index, name, default)
    if dims is None:
        return None
    axes = normalize_dims(int_list(dims, node, "dim"), rank)
    if not axes or rank == 0:
        return None
    return axes


def axis_arg(node: torch.fx.Node, index: int, rank: int, default: Any = None,
             name: str = "dim") -> int:
    """A single ``int dim`` argument, normalized (rank 0 admits 0 and -1)."""
    return normalize_dim(int(get_arg(node, index, name, default)), rank)


def keepdim_arg(node: torch.fx.Node, index: int) -> bool:
    return bool(get_arg(node, index, "keepdim", False))


def input_rank(node: torch.fx.Node) -> int:
    return node.args[0].meta["val"].dim()


def reduce(builder: Callable[..., Value], x: Value, axes: list[int] | None, keepdim: bool,
           loc: Location) -> Value:
    """``builder(x, axes, keep_dims)`` for a coreai.reduce_* / any_ / all_ builder."""
    return builder(x, axes=axes, keep_dims=keepdim, loc=loc)


def ordered(x: Value, loc: Location) -> Value:
    """bool as uint8 for ops that order elements (False < True is kept)."""
    return cast_to(x, DType.uint8, loc) if x.type.element_type is DType.bool else x


def truthy(x: Value, loc: Location) -> Value:
    """``x != 0`` as bool (NaN counts as true, like torch)."""
    if x.type.element_type is DType.bool:
        return x
    return coreai.broadcasting_not_equal(x, scalar_like(0, x, loc), loc=loc)


def index_zero(loc: Location) -> Value:
    """The int64 index of the only element of a 0-d tensor."""
    return coreai.constant(0, dtype=DType.int64, loc=loc)


def axis_size(x: Value, axis: int, loc: Location) -> int | Value:
    """The static size of ``axis`` or a 0-d int64 Value reading it at run time."""
    size = x.type.shape[axis]
    if isinstance(size, int):
        return size
    return coreai.gather(coreai.get_shape(x, loc=loc), index_zero(loc) if axis == 0 else
                         coreai.constant(axis, dtype=DType.int64, loc=loc), axis=0, loc=loc)


def element_count(x: Value, axes: list[int] | None, dtype: DType, loc: Location) -> Value:
    """The number of elements reduced over ``axes`` as a 0-d Value of ``dtype``."""
    axes = list(range(x.type.rank)) if axes is None else axes
    sizes = [x.type.shape[a] for a in axes]
    if all(isinstance(s, int) for s in sizes):
        return coreai.constant(math.prod(sizes), dtype=dtype, loc=loc)
    picked = coreai.gather(coreai.get_shape(x, loc=loc),
                           coreai.constant(np.asarray(axes, np.int64), loc=loc), axis=0, loc=loc)
    return cast_to(coreai.reduce_product(picked, loc=loc), dtype, loc)


def iota(x: Value, axis: int, loc: Location) -> Value:
    """int64 positions along ``axis``, shaped to broadcast against ``x``."""
    shape = [1] * x.type.rank
    size = axis_size(x, axis, loc)
    if isinstance(size, int):
        shape[axis] = size
        return coreai.constant(np.arange(size, dtype=np.int64).reshape(shape), loc=loc)
    i64 = DType.int64
    positions = coreai.range_(coreai.constant(0, dtype=i64, loc=loc), size,
                              coreai.constant(1, dtype=i64, loc=loc), loc=loc)
    shape[axis] = -1
    return coreai.reshape(positions, shape, loc=loc)
