"""Shared pieces of the reduction-family lowerings: dim arguments, counts, accumulation types."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from coreai_core import DType, Value
from coreai_core.dialects import coreai
from coreai_torch.lowerings._common import scalar_like
from coreai_torch.utils import cast_to, normalize_dims

_HALF = (DType.float16, DType.bfloat16)


def acc_dtype(dtype: DType) -> DType:
    """torch's CPU accumulation type for sums, means and softmax: half types use float32."""
    return DType.float32 if dtype in _HALF else dtype


def scan_acc_dtype(dtype: DType) -> DType:
    """torch's CPU accumulation type for cumsum/cumprod (``acc_type<T, false>``)."""
    return DType.float64 if dtype is DType.float32 else acc_dtype(dtype)


def reduced_axes(dim: int | list[int] | None, rank: int) -> list[int] | None:
    """The axes of a ``int[1]? dim`` argument; None means every axis.

    torch reduces every dim for ``dim=None`` and ``dim=[]``; a rank-0 tensor admits dim 0/-1
    and reduces "all" of its zero axes.
    """
    if dim is None:
        return None
    axes = normalize_dims([dim] if isinstance(dim, int) else list(dim), rank)
    if not axes or rank == 0:
        return None
    return axes


def reduce(builder: Callable[..., Value], x: Value, axes: list[int] | None, keepdim: bool) -> Value:
    """``builder(x, axes, keep_dims)`` for a coreai.reduce_* / any_ / all_ builder."""
    return builder(x, axes=axes, keep_dims=keepdim)


def ordered(x: Value) -> Value:
    """bool as uint8 for ops that order elements (False < True is kept)."""
    return cast_to(x, DType.uint8) if x.type.element_type is DType.bool else x


def truthy(x: Value) -> Value:
    """``x != 0`` as bool (NaN counts as true, like torch)."""
    if x.type.element_type is DType.bool:
        return x
    return coreai.broadcasting_not_equal(x, scalar_like(0, x))


def index_zero() -> Value:
    """The int64 index of the only element of a 0-d tensor."""
    return coreai.constant(0, dtype=DType.int64)


def axis_size(x: Value, axis: int) -> int | Value:
    """The static size of ``axis`` or a 0-d int64 Value reading it at run time."""
    size = x.type.shape[axis]
    if isinstance(size, int):
        return size
    return coreai.gather(coreai.get_shape(x), index_zero() if axis == 0 else
                         coreai.constant(axis, dtype=DType.int64), axis=0)


def element_count(x: Value, axes: list[int] | None, dtype: DType) -> Value:
    """The number of elements reduced over ``axes`` as a 0-d Value of ``dtype``."""
    axes = list(range(x.type.rank)) if axes is None else axes
    sizes = [s for s in (x.type.shape[a] for a in axes) if isinstance(s, int)]
    if len(sizes) == len(axes):
        return coreai.constant(math.prod(sizes), dtype=dtype)
    picked = coreai.gather(coreai.get_shape(x),
                           coreai.constant(np.asarray(axes, np.int64)), axis=0)
    return cast_to(coreai.reduce_product(picked), dtype)


def iota(x: Value, axis: int) -> Value:
    """int64 positions along ``axis``, shaped to broadcast against ``x``."""
    shape = [1] * x.type.rank
    size = axis_size(x, axis)
    if isinstance(size, int):
        shape[axis] = size
        return coreai.constant(np.arange(size, dtype=np.int64).reshape(shape))
    i64 = DType.int64
    positions = coreai.range_(coreai.constant(0, dtype=i64), size,
                              coreai.constant(1, dtype=i64))
    shape[axis] = -1
    return coreai.reshape(positions, shape)
