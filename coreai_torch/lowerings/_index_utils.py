"""Helpers shared by the indexing lowerings: sizes, negative-index wrapping, broadcasting."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from coreai_core import DType, Value
from coreai_core.dialects import coreai
from coreai_torch.utils import cast_to

INT64 = DType.int64


def int64(v: Value) -> Value:
    return cast_to(v, INT64)


def const64(value: object) -> Value:
    return coreai.constant(np.asarray(value, dtype=np.int64))


def to_scalar(v: Value) -> Value:
    """A one-element ``v`` as a 0-d tensor."""
    return coreai.reshape(v, coreai.constant(np.zeros((0,), np.int64)))


def dim_size(x: Value, axis: int) -> int | Value:
    """The static size of ``x`` along ``axis``, or a 0-d int64 Value when it is dynamic."""
    d = x.type.shape[axis]
    if isinstance(d, int):
        return d
    return coreai.gather(coreai.get_shape(x), const64(axis), axis=0)


def shape_of(x: Value) -> Value:
    """``x``'s shape as a 1-d int64 Value (a constant when static)."""
    static = x.type.static_shape
    return const64(list(static)) if static is not None else coreai.get_shape(x)


def sizes_of(x: Value, axes: Sequence[int]) -> Value:
    """``x``'s sizes along ``axes`` as a 1-d int64 Value (a constant when static)."""
    dims = [d for d in (x.type.shape[a] for a in axes) if isinstance(d, int)]
    if len(dims) == len(axes):
        return const64(dims)
    return coreai.gather(coreai.get_shape(x), const64(list(axes)), axis=0)


def broadcast_together(values: Sequence[Value]) -> list[Value]:
    """``values`` broadcast to their common shape (numpy rules; dynamic shapes computed)."""
    values = list(values)
    static = [v.type.static_shape for v in values]
    if all(s is not None for s in static):
        target = tuple(np.broadcast_shapes(*(s for s in static if s is not None)))
        return [v if tuple(v.type.shape) == target else
                coreai.broadcast_to(v, const64(list(target))) for v in values]
    rank = max(v.type.rank for v in values)
    shape: Value | None = None
    for v in values:
        s = coreai.get_shape(v)
        if v.type.rank < rank:
            s = coreai.concat([const64([1] * (rank - v.type.rank)), s], axis=0)
        if shape is None:
            shape = s
        else:  # a size-1 entry takes the other operand's size
            one = coreai.broadcasting_equal(shape, const64(1))
            shape = coreai.broadcasting_where(one, s, shape)
    assert shape is not None  # values is not empty
    return [coreai.broadcast_to(v, shape) for v in values]


def crop_to(x: Value, like: Value, skip: int | None = None) -> Value:
    """``x`` sliced from 0 to ``like``'s size on every axis but ``skip`` where they differ.

    torch.gather/scatter allow ``index`` (and scatter's ``src``) to be smaller than the other
    tensor on the remaining axes; only the leading block takes part.
    """
    axes = []
    for a, (dx, dl) in enumerate(zip(x.type.shape, like.type.shape, strict=True)):
        if a != skip and not (isinstance(dx, int) and isinstance(dl, int) and dx == dl):
            axes.append(a)
    if not axes:
        return x
    return coreai.slice_(x, [0] * len(axes), sizes_of(like, axes), axes=axes,
                         strides=[1] * len(axes))


def move_axes_perm(rank: int, start: int, count: int, to: int) -> list[int]:
    """Permutation moving axes ``[start, start+count)`` so they begin at ``to``."""
    block = list(range(start, start + count))
    others = [a for a in range(rank) if a not in block]
    return others[:to] + block + others[to:]


def transpose(x: Value, perm: Sequence[int]) -> Value:
    perm = list(perm)
    if perm == list(range(len(perm))):
        return x
    return coreai.transpose(x, perm)


def inverse(perm: Sequence[int]) -> list[int]:
    out = [0] * len(perm)
    for i, p in enumerate(perm):
        out[p] = i
    return out
