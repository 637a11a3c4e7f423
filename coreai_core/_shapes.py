"""Helpers shared by type rules: broadcasting, axes, constant operands."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NoReturn, overload

from coreai_core._dtypes import DType
from coreai_core._ir import Dim, TensorType, Value
from coreai_core._opdef import constant_data
from coreai_core.errors import TypeRuleError

DimT = int | Dim


def fail(message: str) -> NoReturn:
    raise TypeRuleError(message)


def expect(cond: Any, message: str) -> None:
    if not cond:
        raise TypeRuleError(message)


def broadcast_shapes(*shapes: Sequence[DimT]) -> tuple[DimT, ...]:
    """Numpy broadcasting; a dynamic dim against a static one >1 resolves to the static one."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[DimT] = []
    for i in range(rank):
        dims = [s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0]
        static = {d for d in dims if isinstance(d, int) and d != 1}
        if len(static) > 1:
            fail(f"shapes {', '.join(_fmt(s) for s in shapes)} do not broadcast "
                 f"(axis {i - rank})")
        if static:
            out.append(static.pop())
            continue
        dynamic = [d for d in dims if isinstance(d, Dim)]
        out.append(dynamic[0] if dynamic else 1)
    return tuple(out)


def _fmt(shape: Sequence[DimT]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def norm_axis(axis: int, rank: int, what: str = "axis") -> int:
    if not -max(rank, 1) <= axis < max(rank, 1):
        fail(f"{what} {axis} is out of range for rank {rank}")
    return axis % max(rank, 1)


def norm_axes(axes: Sequence[int] | None, rank: int) -> tuple[int, ...]:
    if axes is None:
        return tuple(range(rank))
    out = tuple(sorted({norm_axis(a, rank, "axis") for a in axes}))
    expect(len(out) == len(axes), f"axes {list(axes)} repeat an axis")
    return out


def same_dtype(*values: Value) -> DType:
    first = values[0].type.element_type
    if any(v.type.element_type is not first for v in values):
        fail("operands must share one element type, got " + ", ".join(str(v.type)
                                                                       for v in values))
    return first


def const_ints(v: Value) -> tuple[int, ...] | None:
    """The integer contents of a constant 0-d or 1-d Value, or None if not constant."""
    data = constant_data(v)
    if data is None:
        return None
    return tuple(int(x) for x in data.reshape(-1).tolist())


def expect_int_vector(v: Value, what: str, length: int | None = None) -> None:
    t = v.type
    expect(t.element_type.is_int and t.rank == 1,
           f"{what} must be a 1-d integer tensor, got {t}")
    if length is not None and isinstance(t.shape[0], int):
        expect(t.shape[0] == length, f"{what} must have {length} elements, got {t.shape[0]}")


def tensor(shape: Sequence[DimT], dtype: DType | str) -> TensorType:
    return TensorType(tuple(shape), dtype)


def per_axis(values: Sequence[int] | None, n: int, default: int, name: str) -> tuple[int, ...]:
    """A window attribute (``strides``, ``dilation``, ...) with one entry per spatial axis:
    ``default`` on every axis when None or empty, one entry repeated, or exactly ``n``."""
    if values is None or len(values) == 0:
        return (default,) * n
    if len(values) == 1:
        return tuple(values) * n
    expect(len(values) == n, f"{name} needs {n} entries, got {list(values)}")
    return tuple(values)


def lo_hi_pads(pads: Sequence[int] | None, n: int) -> tuple[int, ...]:
    """Pads as (lo0, hi0, lo1, hi1, ...); a list of n entries pads both sides equally."""
    if pads is None or len(pads) == 0:
        return (0,) * (2 * n)
    if len(pads) == n:
        return tuple(p for v in pads for p in (v, v))
    expect(len(pads) == 2 * n, f"pads needs {n} or {2 * n} entries, got {list(pads)}")
    return tuple(pads)


@overload
def window_out(size: int, k: int, s: int, pad_lo: int, pad_hi: int, d: int,
               ceil_mode: bool = False) -> int: ...
@overload
def window_out(size: DimT, k: int, s: int, pad_lo: int, pad_hi: int, d: int,
               ceil_mode: bool = False) -> DimT: ...
def window_out(size: DimT, k: int, s: int, pad_lo: int, pad_hi: int, d: int,
               ceil_mode: bool = False) -> DimT:
    """Output length of a sliding window (conv/pool), PyTorch's formula.

    As ATen's ``pooling_output_shape``: ``floor((span + (s - 1 if ceil_mode)) / s) + 1`` with
    ``span = size + pads - d*(k-1) - 1``, then with ``ceil_mode`` the last window must start
    inside the input or its left padding. With ``ceil_mode`` a window longer than the padded
    input still gives one output when it starts inside (torch clips it); a length below one
    is an error, as in torch.
    """
    if not isinstance(size, int):
        return Dim()
    span = size + pad_lo + pad_hi - d * (k - 1) - 1
    out = (span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + pad_lo:
        out -= 1
    if out < 1:
        fail(f"window of size {k} (dilation {d}, stride {s}) does not fit input length {size} "
             f"with padding ({pad_lo}, {pad_hi}){'' if ceil_mode else ' and ceil_mode=False'}: "
             f"output length {out}")
    return out
