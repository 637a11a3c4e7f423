"""Op mappings (elementwise family): floor, ceil, trunc, remainder, shifts and log_softmax
expressed exactly with Core AI ops.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from coreai_core import Operation
from coreai_torch.aimodel._apple import ca, constant
from coreai_torch.aimodel._context import ExportContext, Refused
from coreai_torch.aimodel._emit import i32, is_float_operand, negated, scalar, take
from coreai_torch.aimodel.mappings._registry import mapping_decorator, mapping_registry

__all__ = ["MAPPINGS"]

MAPPINGS = mapping_registry(__name__)
mapping = mapping_decorator(MAPPINGS)


def _floor_of(ctx: ExportContext, op: Operation, x: Any) -> Any:
    # floor_divide(x, 1) floors every finite x exactly; Core AI gives NaN for +-inf there
    floored = ca.broadcasting_floor_divide(x, scalar(ctx, op, 1))
    infinite = ca.broadcasting_equal(ca.abs_(x), scalar(ctx, op, np.inf))
    return ca.broadcasting_where(infinite, x, floored)


def _rounding(fn: Callable[[ExportContext, Operation, Any], Any]) -> Callable[
        [ExportContext, Operation, Sequence[Any]], list[Any]]:
    def emit(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
        return [fn(ctx, op, xs[0]) if is_float_operand(op) else xs[0]]  # integers: the identity
    return emit


def _ceil_of(ctx: ExportContext, op: Operation, x: Any) -> Any:
    return negated(ctx, op, _floor_of(ctx, op, negated(ctx, op, x)))  # -floor(-x)


def _trunc_of(ctx: ExportContext, op: Operation, x: Any) -> Any:
    # x < 0 rounds up, everything else (-0.0 and NaN included) down
    negative = ca.broadcasting_greater(scalar(ctx, op, 0), x)
    return ca.broadcasting_where(negative, _ceil_of(ctx, op, x), _floor_of(ctx, op, x))


@mapping("coreai.broadcasting_remainder",
         "broadcasting_modulo, + y where the signs differ (floats: zero signed like y)")
def _remainder(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    # numpy's (and Python's) rule on fmod: r + b where r is nonzero with the other sign than
    # b; floats give a zero the sign of b
    a, b = xs
    zero = scalar(ctx, op, 0)
    r = ca.broadcasting_modulo(a, b)
    other_sign = ca.broadcasting_xor(ca.broadcasting_greater(zero, r),
                                     ca.broadcasting_greater(zero, b))
    fix = ca.broadcasting_and(ca.broadcasting_not_equal(r, zero), other_sign)
    out = ca.broadcasting_where(fix, ca.broadcasting_add(r, b), r)
    if is_float_operand(op):
        signed_zero = ca.broadcasting_where(ca.broadcasting_greater(zero, b),
                                            scalar(ctx, op, -0.0), zero)
        out = ca.broadcasting_where(ca.broadcasting_equal(r, zero), signed_zero, out)
    return [out]


@mapping("coreai.log_softmax",
         "x - max - log(reduce_sum(exp(x - max))) (a row's single +inf: 0 there, -inf elsewhere)")
def _log_softmax(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    # the kernel's formula, in float32 for float16: x - max - log(sum(exp(x - max))); a row
    # with one +inf (and no NaN) is 0 there and -inf elsewhere, its limit
    dtype = np.dtype(ctx.apple_dtype(op.operands[0]))
    compute = np.dtype(np.float32) if dtype == np.float16 else dtype
    x: Any = xs[0] if compute == dtype else ca.cast(xs[0], np.float32)
    rank = op.operands[0].type.rank
    axis = i32([op.attributes["axis"] % rank])
    kept = [1 if a == int(axis[0]) else n for a, n in enumerate(x.type.shape)]

    def reduced(y: Any) -> Any:  # Core AI's reductions drop the axis
        return ca.reshape(y, i32(kept))

    def const(value: float) -> Any:
        return constant(np.asarray(value, compute))

    shifted = ca.broadcasting_sub(x, reduced(ca.reduce_max(x, axis)))
    out = ca.broadcasting_sub(shifted,
                              ca.log(reduced(ca.reduce_sum(ca.exp(shifted), axis))))
    is_inf = ca.broadcasting_equal(x, const(np.inf))
    infs = reduced(ca.reduce_sum(ca.cast(is_inf, np.int32), axis))
    nans = reduced(ca.any_(ca.broadcasting_not_equal(x, x), axis))
    one = ca.broadcasting_and(ca.broadcasting_equal(infs, constant(np.int32(1))),
                              ca.not_(nans))
    out = ca.broadcasting_where(one, ca.broadcasting_where(is_inf, const(0), const(-np.inf)),
                                out)
    return [out if compute == dtype else ca.cast(out, dtype.type)]


def _shift(left: bool) -> Callable[[ExportContext, Operation, Sequence[Any]], list[Any]]:
    # x << n is x * 2**n (integer multiplication wraps, as the dialect's), x >> n is
    # floor_divide(x, 2**n) (arithmetic for signed types); 2**n comes from a table. A signed
    # type's 2**(w-1) does not fit: that shift takes one more step by 2. Shifts < 0 or >= w
    # give 0 (left) or the sign fill (right), like the kernel (torch).
    def emit(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
        dtype = np.dtype(ctx.apple_dtype(op.operands[0]))
        if dtype == np.bool_:
            raise Refused("shifts of booleans")
        x, n = xs
        width, signed = dtype.itemsize * 8, dtype.kind == "i"
        top = width - 2 if signed else width - 1
        table = constant(np.asarray([1 << k for k in range(top + 1)], dtype))

        def const(v: int) -> Any:
            return constant(np.asarray(v, dtype))

        clipped = ca.broadcasting_minimum(ca.broadcasting_maximum(n, const(0)), const(top))
        power = take(table, ca.cast(clipped, np.int32), 0)
        step = ca.broadcasting_mul if left else ca.broadcasting_floor_divide
        out = step(x, power)
        if signed:
            out = ca.broadcasting_where(ca.broadcasting_equal(n, const(width - 1)),
                                        step(out, const(2)), out)
        bad = ca.broadcasting_or(ca.broadcasting_greater(const(0), n),
                                 ca.broadcasting_greater(n, const(width - 1)))
        fill = const(0)
        if signed and not left:
            fill = ca.broadcasting_where(ca.broadcasting_greater(const(0), x), const(-1),
                                         const(0))
        return [ca.broadcasting_where(bad, fill, out)]
    return emit


mapping("coreai.floor", "broadcasting_floor_divide(x, 1), x where x is +-inf")(_rounding(_floor_of))
mapping("coreai.ceil", "-floor(-x), floor as above")(_rounding(_ceil_of))
mapping("coreai.trunc",
        "broadcasting_where(x < 0, ceil(x), floor(x)), as above")(_rounding(_trunc_of))
mapping("coreai.broadcasting_shift_left",
        "broadcasting_mul by 2**n from a table (wrapping); out-of-range shifts: 0")(_shift(True))
mapping("coreai.broadcasting_shift_right",
        "broadcasting_floor_divide by 2**n from a table; out-of-range shifts: the "
        "sign fill")(_shift(False))
