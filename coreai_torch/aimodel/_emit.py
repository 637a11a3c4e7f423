"""Small emitting helpers the op mapping modules share."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from coreai_core import DType, Operation
from coreai_torch.aimodel._apple import ca, constant
from coreai_torch.aimodel._context import Emit, ExportContext, apple_shape

__all__ = ["F32", "IN_FLOAT32_NOTE", "bitwise_not", "complex_parts", "dims", "equal",
           "f32_constant", "i32", "in_float32", "is_float_operand", "is_nan", "is_negative", "less",
           "negated", "reshape_to_result", "runtime_shape", "runtime_size", "scalar", "slice_axis",
           "take", "u32", "where"]


def i32(values: Any) -> np.ndarray:
    return np.asarray(values, dtype=np.int32)


def u32(values: Any) -> np.ndarray:
    return np.asarray(values, dtype=np.uint32)


def scalar(ctx: ExportContext, op: Operation, value: float, operand: int = 0) -> Any:
    """A 0-d constant of the exported element type of ``op``'s operand."""
    return constant(np.asarray(value, dtype=ctx.apple_dtype(op.operands[operand])))


def reshape_to_result(ctx: ExportContext, op: Operation, x: Any, index: int = 0) -> Any:
    if dims(x) == apple_shape(op.results[index]):
        return x
    return ca.reshape(x, i32(ctx.result_shape(op, index)))


def take(x: Any, indices: Any, axis: int) -> Any:
    """``numpy.take(x, indices, axis)`` for in-range ``indices`` (an Apple value or an array):
    the axis goes to the front, ``gather_nd`` picks rows, the axes go back."""
    rank = len(x.type.shape)
    if isinstance(indices, np.ndarray):
        indices = constant(indices.astype(np.int32))
    n_idx = len(indices.type.shape)
    if axis:
        x = ca.transpose(x, u32([axis, *[a for a in range(rank) if a != axis]]))
    taken = ca.gather_nd(x, ca.expand_dims(indices, i32([n_idx])))
    if axis:
        # taken: [*indices dims, *x[:axis], *x[axis+1:]] -> [*x[:axis], *indices, *x[axis+1:]]
        order = [*range(n_idx, n_idx + axis), *range(n_idx), *range(n_idx + axis, rank - 1 + n_idx)]
        taken = ca.transpose(taken, u32(order))
    return taken


def slice_axis(x: Any, axis: int, start: int, stop: int) -> Any:
    """``x[..., start:stop, ...]`` on ``axis`` (0 <= start <= stop <= its size)."""
    shape = list(x.type.shape)
    begin, end = [0] * len(shape), list(shape)
    begin[axis], end[axis] = start, stop
    return ca.slice_(x, i32(begin), i32(end), i32([1] * len(shape)))


def dims(x: Any) -> tuple[int, ...]:
    """An Apple value's shape with -1 for a dynamic size (Apple's builders report those as
    MLIR's dynamic marker, a large negative number)."""
    return tuple(d if d >= 0 else -1 for d in x.type.shape)


def runtime_shape(x: Any) -> Any:
    """``x``'s shape as a 1-d int32 Apple value: constant when static, else ``get_shape``."""
    shape = dims(x)
    if -1 not in shape:
        return constant(i32(shape))
    found: Any = ca.get_shape(x)
    return found if str(found.type.dtype) == "int32" else ca.cast(found, np.int32)


def runtime_size(x: Any, axis: int) -> Any:
    """The size of ``x`` along ``axis`` as a 1-element int32 Apple value."""
    size = dims(x)[axis]
    if size >= 0:
        return constant(i32([size]))
    return ca.slice_(runtime_shape(x), i32([axis]), i32([axis + 1]), i32([1]))


def complex_parts(x: Any) -> tuple[Any, Any]:
    """The real and imaginary parts of a Core AI ``complex<f32>`` value (complex and fft)."""
    return ca.real_part(x), ca.imaginary_part(x)


def is_float_operand(op: Operation) -> bool:
    """Whether ``op``'s first operand is a float (the rounding and special families)."""
    return op.operands[0].type.element_type.is_float


def negated(ctx: ExportContext, op: Operation, x: Any) -> Any:
    """``-x`` as ``x * -1``, which keeps the sign of zero (the rounding and special
    families)."""
    return ca.broadcasting_mul(x, scalar(ctx, op, -1))


def bitwise_not(ctx: ExportContext, op: Operation, x: Any) -> Any:
    """``~x`` of ``op``'s first operand's type: ``not_`` for bool, else xor with all ones
    (the elementwise family's bitwise_not; the tensor family's argmin of integers)."""
    if op.operands[0].type.element_type is DType.bool:
        return ca.not_(x)
    dtype = np.dtype(ctx.apple_dtype(op.operands[0]))
    all_ones = np.iinfo(dtype).max if dtype.kind == "u" else -1
    return ca.broadcasting_bitwise_xor(x, constant(np.asarray(all_ones, dtype)))


# -- shared by the elementary functions (elementwise_elementary.py) and special.py ----------

F32 = np.float32


def f32_constant(value: float) -> Any:
    """A float32 0-d constant (``value`` rounded once from float64)."""
    return constant(np.asarray(value, F32))


def in_float32(fn: Callable[..., Any]) -> Emit:
    """``fn`` on float32 operands; other float types are cast to float32 and the result back
    (one rounding of a float32 result that is far more accurate than the narrow type)."""
    def emit(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
        dtype = np.dtype(ctx.apple_dtype(op.operands[0]))
        if dtype == F32:
            return [fn(*xs)]
        out = fn(*[ca.cast(x, F32) for x in xs])
        return [ca.cast(out, ctx.apple_dtype(op.results[0]))]
    emit.__name__ = fn.__name__
    return emit


def where(cond: Any, a: Any, b: Any) -> Any:
    return ca.broadcasting_where(cond, a, b)


def equal(a: Any, b: Any) -> Any:
    return ca.broadcasting_equal(a, b)


def less(a: Any, b: Any) -> Any:
    return ca.broadcasting_greater(b, a)


def is_nan(x: Any) -> Any:
    return ca.broadcasting_not_equal(x, x)


def is_negative(x: Any, zero: Any, one: Any) -> Any:
    """x < 0 or x is -0.0 (1 / -0.0 is -inf); NaN counts as positive. ``zero`` and ``one``
    are constants of x's type."""
    minus_zero = ca.broadcasting_and(equal(x, zero), less(ca.broadcasting_divide(one, x), zero))
    return ca.broadcasting_or(less(x, zero), minus_zero)


IN_FLOAT32_NOTE = "float16 and narrower: in float32, rounded once"
