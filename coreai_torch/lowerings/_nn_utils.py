"""Helpers shared by the nn-family lowerings: opmath casts, window arguments, batching, shapes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch.fx

from coreai_core import DType, Location, Value
from coreai_core.dialects import coreai
from coreai_torch.utils import cast_to, int_list

HALF = (DType.float16, DType.bfloat16)


def opmath(dtype: DType) -> DType:
    """The type torch's CPU kernels compute in: float32 for float16/bfloat16 (``opmath_t``)."""
    return DType.float32 if dtype in HALF else dtype


def to_opmath(x: Value, loc: Location) -> Value:
    return cast_to(x, opmath(x.type.element_type), loc)


def const(value: Any, dtype: DType, loc: Location) -> Value:
    """A constant of ``dtype`` (0-d for a Python scalar)."""
    return coreai.constant(value, dtype=dtype, loc=loc)


def const64(value: Any, loc: Location) -> Value:
    return coreai.constant(np.asarray(value, dtype=np.int64), loc=loc)


def ntuple(arg: Any, n: int, node: torch.fx.Node, what: str, default: int | None = None,
           ) -> list[int]:
    """A window argument (int, or a list of 1 or ``n`` ints) as ``n`` ints.

    An empty list means ``default`` (``stride=[]`` is the kernel size for pools).
    """
    values = int_list(arg, node, what) if arg is not None else []
    if not values:
        if default is None:
            raise NotImplementedError(f"{what} of {node.name!r} is empty")
        return [default] * n
    if len(values) == 1:
        return values * n
    if len(values) != n:
        raise NotImplementedError(f"{what} of {node.name!r} needs {n} entries, got {values}")
    return values


def add_batch(x: Value, n_spatial: int, loc: Location) -> tuple[Value, bool]:
    """``x`` with a leading batch axis added when it is unbatched ([C, *spatial])."""
    if x.type.rank == n_spatial + 1:
        return coreai.expand_dims(x, [0], loc=loc), True
    if x.type.rank != n_spatial + 2:
        raise NotImplementedError(f"expected a rank {n_spatial + 1} or {n_spatial + 2} input, "
                                  f"got {x.type}")
    return x, False


def drop_batch(y: Value, added: bool, loc: Location) -> Value:
    return coreai.shrink_dims(y, [0], loc=loc) if added else y


def leading_shape(x: Value, count: int, tail: Sequence[int], loc: Location) -> Any:
    """A shape: ``x``'s first ``count`` sizes followed by ``tail`` (a list when static)."""
    lead = x.type.shape[:count]
    if all(isinstance(d, int) for d in lead):
        return [*map(int, lead), *tail]
    sizes = coreai.slice_(coreai.get_shape(x, loc=loc), [0], [count], axes=[0], strides=[1],
                          loc=loc)
    return coreai.concat([sizes, const64(list(tail), loc)], axis=0, loc=loc)


def reshape_lead(x: Value, count: int, tail: Sequence[int], loc: Location) -> Value:
    """``x`` reshaped to its first ``count`` sizes followed by ``tail`` (one -1 allowed)."""
    return coreai.reshape(x, leading_shape(x, count, tail, loc), loc=loc)


def shape_like(x: Value, loc: Location) -> Any:
    """``x``'s shape as a list when static, else as a 1-d int64 Value."""
    if x.type.is_static:
        return [int(d) for d in x.type.shape]
    return coreai.get_shape(x, loc=loc)


def dim_value(x: Value, axis: int, loc: Location) -> int | Value:
    """``x``'s size along ``axis``: an int when static, else a 0-d int64 Value."""
    d = x.type.shape[axis]
    if isinstance(d, int):
        return d
    size = coreai.slice_(coreai.get_shape(x, loc=loc), [axis], [axis + 1], axes=[0],
                         strides=[1], loc=loc)
    return coreai.reshape(size, const64([], loc), loc=loc)


def empty(dtype: DType, loc: Location) -> Value:
    """A [0] tensor (the saved statistics torch returns in inference mode)."""
    return coreai.constant(np.zeros((0,), dtype=dtype.numpy), loc=loc)


def filled(value: Any, dtype: DType, shape: Any, loc: Location) -> Value:
    """A tensor of ``shape`` (list or 1-d int64 Value) filled with ``value``."""
    if not isinstance(shape, Value):
        shape = const64(list(shape), loc)
    return coreai.broadcast_to(const(value, dtype, loc), shape, loc=loc)


def static_sizes(x: Value, axes: Sequence[int], node: torch.fx.Node, what: str) -> list[int]:
    sizes = [x.type.shape[a] for a in axes]
    if not all(isinstance(s, int) for s in sizes):
        raise NotImplementedError(f"{what} of {node.name!r} needs static sizes on axes "
                                  f"{list(axes)}, got {x.type}")
    return [int(s) for s in sizes]


__all__ = [
    "HALF", "add_batch", "const", "const64", "dim_value", "drop_batch", "empty", "filled",
    "leading_shape", "ntuple", "opmath", "reshape_lead", "shape_like", "static_sizes",
    "to_opmath",
]
