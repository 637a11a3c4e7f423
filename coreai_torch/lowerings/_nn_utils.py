"""Helpers shared by the nn-family lowerings: opmath casts, window arguments, batching, shapes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from coreai_core import DType, Value
from coreai_core.dialects import coreai
from coreai_torch.lowerings._common import HALF, opmath, to_opmath

STATIC_WORKAROUND = ("export those dims static (leave them out of torch.export's dynamic_shapes "
                     "or give them a fixed size)")


def const(value: Any, dtype: DType) -> Value:
    """A constant of ``dtype`` (0-d for a Python scalar)."""
    return coreai.constant(value, dtype=dtype)


def const64(value: Any) -> Value:
    return coreai.constant(np.asarray(value, dtype=np.int64))


def ntuple(arg: int | Sequence[int | Value] | None, n: int, what: str,
           default: int | Sequence[int] | None = None) -> list[int]:
    """A window argument (int, or a list of 1 or ``n`` ints) as ``n`` ints.

    An empty list means ``default``, an int repeated or a list of ``n`` ints (``stride=[]`` is
    the kernel size for pools).
    """
    items = [] if arg is None else [arg] if isinstance(arg, int) else list(arg)
    if any(isinstance(v, Value) for v in items):
        raise NotImplementedError(f"{what} must be static, got a symbolic size; "
                                  f"{STATIC_WORKAROUND}")
    values = [int(v) for v in items]  # type: ignore[arg-type]
    if not values:
        if default is None:
            raise NotImplementedError(f"{what} is empty")
        return [default] * n if isinstance(default, int) else list(default)
    if len(values) == 1:
        return values * n
    if len(values) != n:
        raise NotImplementedError(f"{what} needs {n} entries, got {values}")
    return values


def add_batch(x: Value, n_spatial: int) -> tuple[Value, bool]:
    """``x`` with a leading batch axis added when it is unbatched ([C, *spatial])."""
    if x.type.rank == n_spatial + 1:
        return coreai.expand_dims(x, [0]), True
    if x.type.rank != n_spatial + 2:
        raise NotImplementedError(f"expected a rank {n_spatial + 1} or {n_spatial + 2} input, "
                                  f"got {x.type}")
    return x, False


def drop_batch(y: Value, added: bool) -> Value:
    return coreai.shrink_dims(y, [0]) if added else y


def leading_shape(x: Value, count: int, tail: Sequence[int]) -> Any:
    """A shape: ``x``'s first ``count`` sizes followed by ``tail`` (a list when static)."""
    lead = x.type.shape[:count]
    if all(isinstance(d, int) for d in lead):
        return [*(int(d) for d in lead if isinstance(d, int)), *tail]
    sizes = coreai.slice_(coreai.get_shape(x), [0], [count], axes=[0], strides=[1])
    return coreai.concat([sizes, const64(list(tail))], axis=0)


def reshape_lead(x: Value, count: int, tail: Sequence[int]) -> Value:
    """``x`` reshaped to its first ``count`` sizes followed by ``tail`` (one -1 allowed)."""
    return coreai.reshape(x, leading_shape(x, count, tail))


def shape_like(x: Value) -> Any:
    """``x``'s shape as a list when static, else as a 1-d int64 Value."""
    static = x.type.static_shape
    return list(static) if static is not None else coreai.get_shape(x)


def dim_value(x: Value, axis: int) -> int | Value:
    """``x``'s size along ``axis``: an int when static, else a 0-d int64 Value."""
    d = x.type.shape[axis]
    if isinstance(d, int):
        return d
    size = coreai.slice_(coreai.get_shape(x), [axis], [axis + 1], axes=[0],
                         strides=[1])
    return coreai.reshape(size, const64([]))


def empty(dtype: DType) -> Value:
    """A [0] tensor (the saved statistics torch returns in inference mode)."""
    return coreai.constant(np.zeros((0,), dtype=dtype.numpy))


def filled(value: Any, dtype: DType, shape: Any) -> Value:
    """A tensor of ``shape`` (list or 1-d int64 Value) filled with ``value``."""
    if not isinstance(shape, Value):
        shape = const64(list(shape))
    return coreai.broadcast_to(const(value, dtype), shape)


def static_sizes(x: Value, axes: Sequence[int], what: str) -> list[int]:
    """``x``'s sizes on ``axes``, which must be static (``what`` names the use in errors)."""
    sizes = [s for s in (x.type.shape[a] for a in axes) if isinstance(s, int)]
    if len(sizes) != len(axes):
        dynamic = [a for a in axes if not isinstance(x.type.shape[a], int)]
        raise NotImplementedError(
            f"{what} needs static sizes on axes {list(axes)}, got {x.type} (axes {dynamic} "
            f"are dynamic); {STATIC_WORKAROUND}")
    return sizes


__all__ = [
    "HALF", "STATIC_WORKAROUND", "add_batch", "const", "const64", "dim_value", "drop_batch",
    "empty", "filled", "leading_shape", "ntuple", "opmath", "reshape_lead", "shape_like",
    "static_sizes", "to_opmath",
]
