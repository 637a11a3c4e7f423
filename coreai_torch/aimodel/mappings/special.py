"""Op mappings (special family): fmax/fmin, gcd/lcm, nextafter, frexp (exact), hypot, signbit
and copysign (their error bounds: ``elementwise_elementary.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from coreai_core import Operation
from coreai_torch.aimodel._apple import ca, constant
from coreai_torch.aimodel._context import ExportContext
from coreai_torch.aimodel._emit import (
    IN_FLOAT32_NOTE,
    equal,
    f32_constant,
    in_float32,
    is_float_operand,
    is_nan,
    is_negative,
    negated,
    take,
    where,
)
from coreai_torch.aimodel.mappings._registry import mapping_decorator, mapping_registry

__all__ = ["MAPPINGS"]

MAPPINGS = mapping_registry(__name__)
mapping = mapping_decorator(MAPPINGS)


def _nan_ignoring(pick: Callable[[Any, Any], Any]) -> Callable[
        [ExportContext, Operation, Sequence[Any]], list[Any]]:
    # fmax/fmin: the other operand where one is NaN (NaN only where both are)
    def emit(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
        a, b = xs
        if not is_float_operand(op):
            return [pick(a, b)]
        a_nan, b_nan = ca.broadcasting_not_equal(a, a), ca.broadcasting_not_equal(b, b)
        return [ca.broadcasting_where(a_nan, b, ca.broadcasting_where(b_nan, a, pick(a, b)))]
    return emit


# Euclid's rounds that suffice for |operands| < 2**bits (plus one: the first may only swap).
# Lame: k division steps need operands >= Fibonacci(k + 2); Fibonacci(14) = 377 > 2**8,
# Fibonacci(25) = 75025 > 2**16, Fibonacci(48) > 2**32.
_EUCLID_ROUNDS = {8: 13, 16: 24, 32: 47}


def _gcd_of(ctx: ExportContext, op: Operation, x: Any, y: Any) -> Any:
    # torch's Euclid (a, b = |x|, |y|; while a: a, b = b % a, a), unrolled for the most
    # rounds the type can need; a finished lane (a == 0) keeps b
    dtype = np.dtype(ctx.apple_dtype(op.operands[0]))
    signed = dtype.kind == "i"
    a, b = (ca.abs_(x), ca.abs_(y)) if signed else (x, y)
    zero, one = constant(np.asarray(0, dtype)), constant(np.asarray(1, dtype))
    for _ in range(_EUCLID_ROUNDS[dtype.itemsize * 8]):
        live = ca.broadcasting_not_equal(a, zero)
        rem = ca.broadcasting_modulo(b, ca.broadcasting_where(live, a, one))
        a, b = (ca.broadcasting_where(live, rem, zero), ca.broadcasting_where(live, a, b))
    return b


@mapping("coreai.broadcasting_gcd",
         "Euclid unrolled: 13/24/47 rounds of broadcasting_modulo + where (8/16/32-bit)")
def _gcd(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    return [_gcd_of(ctx, op, *xs)]


@mapping("coreai.broadcasting_lcm",
         "abs(x // gcd * y), gcd as above (8/16-bit: in int32), 0 where gcd is 0")
def _lcm(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    # |x / gcd * y| (0 where gcd is 0); 8/16-bit types multiply in int32, as torch does
    dtype = np.dtype(ctx.apple_dtype(op.operands[0]))
    g = _gcd_of(ctx, op, *xs)
    wide = np.dtype(np.int32) if dtype.itemsize < 4 else dtype
    x, y, g = (ca.cast(v, wide.type) if wide != dtype else v for v in (*xs, g))
    zero, one = constant(np.asarray(0, wide)), constant(np.asarray(1, wide))
    none = ca.broadcasting_equal(g, zero)
    out = ca.broadcasting_mul(ca.broadcasting_floor_divide(x, ca.broadcasting_where(none, one, g)),
                              y)
    if wide.kind == "i":
        out = ca.abs_(out)
    out = ca.broadcasting_where(none, zero, out)
    if wide == dtype:
        return [out]
    # back to 8/16 bits modulo 2**bits, as C truncates (Core AI's cast saturates)
    span = constant(np.asarray(1 << (dtype.itemsize * 8), wide))
    out = ca.broadcasting_sub(out, ca.broadcasting_mul(ca.broadcasting_floor_divide(out, span),
                                                       span))
    if dtype.kind == "i":
        top = constant(np.asarray(np.iinfo(dtype).max, wide))
        out = ca.broadcasting_where(ca.broadcasting_greater(out, top),
                                    ca.broadcasting_sub(out, span), out)
    return [ca.cast(out, dtype.type)]


@mapping("coreai.broadcasting_nextafter",
         "x + -(|x| * (2**-p + 2**(1-2p))) (rounds to the neighbour; scaled near the subnormals, "
         "the subnormal step below), infinities, zeros and NaN fixed")
def _nextafter(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    # x +- d rounds to the neighbour of x when 0.5 ulp(x) < d < 1.5 ulp(x): d = |x| * c with
    # c = 2**-p * (1 + 2**(1-p)) (p significand bits; |x| * c is rounded monotonically from
    # above 2**-p * |x|). Where |x| * c would not be normal, x is scaled by 2**(p+2) first
    # (exactly: the results there are normal); below twice the smallest normal the
    # neighbours are the subnormal spacing away. x == y gives y, an infinite x the largest
    # finite value, a zero result the sign of x, NaN gives NaN.
    dtype = np.dtype(ctx.apple_dtype(op.operands[0]))
    info = np.finfo(dtype)
    p = info.nmant + 1

    def const(v: float) -> Any:
        return constant(np.asarray(v, dtype))

    x, y = xs
    ax = ca.abs_(x)
    scaled = ca.broadcasting_greater(const(2.0 ** (info.minexp + p)), ax)
    scale = ca.broadcasting_where(scaled, const(2.0 ** (p + 2)), const(1))
    unscale = ca.broadcasting_where(scaled, const(2.0 ** -(p + 2)), const(1))
    d = ca.broadcasting_mul(ca.broadcasting_mul(ax, scale),
                            const(2.0 ** -p * (1 + 2.0 ** (1 - p))))
    subnormal_step = ca.broadcasting_greater(const(2.0 ** (info.minexp + 1)), ax)
    d = ca.broadcasting_where(subnormal_step, const(float(info.smallest_subnormal)), d)
    s = ca.broadcasting_where(subnormal_step, const(1), scale)
    u = ca.broadcasting_where(subnormal_step, const(1), unscale)
    step = ca.broadcasting_where(ca.broadcasting_greater(y, x), d, negated(ctx, op, d))
    out = ca.broadcasting_mul(ca.broadcasting_add(ca.broadcasting_mul(x, s), step), u)
    out = ca.broadcasting_where(ca.broadcasting_equal(out, const(0)),
                                ca.broadcasting_mul(x, const(0)), out)
    largest = ca.broadcasting_where(ca.broadcasting_greater(const(0), x), const(-info.max),
                                    const(info.max))
    out = ca.broadcasting_where(ca.broadcasting_equal(ax, const(np.inf)), largest, out)
    out = ca.broadcasting_where(ca.broadcasting_equal(x, y), y, out)
    nan = ca.broadcasting_or(ca.broadcasting_not_equal(x, x), ca.broadcasting_not_equal(y, y))
    return [ca.broadcasting_where(nan, ca.broadcasting_add(x, y), out)]


_FREXP_LOW = -80  # the table of 2**k, k in [-80, 80]: two factors scale any float32


@mapping("coreai.frexp",
         "e = floor(log(|x|) / log 2) + 1, m = |x| * 2**-e from a table, one correction step "
         "(float16: in float32)")
def _frexp(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    # e = floor(log(|x|) / log 2) + 1 (off by at most one near a power of 2), m = |x| * 2**-e
    # by two exact scalings from a table, one correction step; float16 in float32 (the
    # mantissa is exact in float16 again). Zero, +-inf and NaN: (x, 0).
    dtype = np.dtype(ctx.apple_dtype(op.operands[0]))
    f32 = np.float32
    x = xs[0] if dtype == f32 else ca.cast(xs[0], f32)

    def const(v: float) -> Any:
        return constant(np.asarray(v, f32))

    ax = ca.abs_(x)
    special = ca.broadcasting_or(ca.broadcasting_equal(ax, const(0)), ca.broadcasting_or(
        ca.broadcasting_equal(ax, const(np.inf)), ca.broadcasting_not_equal(x, x)))
    safe = ca.broadcasting_where(special, const(1), ax)
    e = ca.broadcasting_add(ca.broadcasting_floor_divide(ca.broadcasting_mul(
        ca.log(safe), const(1 / np.log(2.0))), const(1)), const(1))
    e = ca.cast(e, np.int32)
    table = constant(np.exp2(np.arange(_FREXP_LOW, -_FREXP_LOW + 1)).astype(f32))
    base = constant(np.int32(-_FREXP_LOW))

    def times_power(v: Any, k: Any) -> Any:  # v * 2**k, |k| <= 160, in two exact steps
        half = ca.broadcasting_floor_divide(k, constant(np.int32(2)))
        v = ca.broadcasting_mul(v, take(table, ca.broadcasting_add(half, base), 0))
        rest = ca.broadcasting_sub(k, half)
        return ca.broadcasting_mul(v, take(table, ca.broadcasting_add(rest, base), 0))

    m = times_power(safe, ca.broadcasting_mul(e, constant(np.int32(-1))))
    high = ca.broadcasting_or(ca.broadcasting_greater(m, const(1)),
                              ca.broadcasting_equal(m, const(1)))
    low = ca.broadcasting_greater(const(0.5), m)
    m = ca.broadcasting_where(high, ca.broadcasting_mul(m, const(0.5)), ca.broadcasting_where(
        low, ca.broadcasting_mul(m, const(2)), m))
    one = constant(np.int32(1))
    e = ca.broadcasting_where(high, ca.broadcasting_add(e, one), ca.broadcasting_where(
        low, ca.broadcasting_sub(e, one), e))
    m = ca.broadcasting_where(ca.broadcasting_greater(const(0), x),
                              ca.broadcasting_mul(m, const(-1)), m)
    m = ca.broadcasting_where(special, x, m)
    e = ca.broadcasting_where(special, constant(np.int32(0)), e)
    return [m if dtype == f32 else ca.cast(m, dtype.type), e]



def hypot(x: Any, y: Any) -> Any:
    """hypot(x, y) of float32 Apple values without overflow (see the module doc)."""
    ax, ay = ca.abs_(x), ca.abs_(y)
    small, big = ca.broadcasting_minimum(ax, ay), ca.broadcasting_maximum(ax, ay)
    r = ca.broadcasting_divide(small, big)
    s = ca.sqrt(ca.broadcasting_add(f32_constant(1), ca.broadcasting_mul(r, r)))
    out = where(equal(big, f32_constant(0)), big, ca.broadcasting_mul(big, s))
    out = where(ca.broadcasting_or(is_nan(x), is_nan(y)), ca.broadcasting_add(x, y), out)
    inf = f32_constant(np.inf)
    return where(ca.broadcasting_or(equal(ax, inf), equal(ay, inf)), inf, out)


def _typed(ctx: ExportContext, op: Operation, value: float) -> Any:
    return constant(np.asarray(value, ctx.apple_dtype(op.operands[0])))


def _signbit(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    return [is_negative(xs[0], _typed(ctx, op, 0), _typed(ctx, op, 1))]


def _copysign(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    x, y = xs
    magnitude = ca.abs_(x)
    negative = is_negative(y, _typed(ctx, op, 0), _typed(ctx, op, 1))
    return [where(negative, ca.broadcasting_mul(magnitude, _typed(ctx, op, -1)), magnitude)]


mapping("coreai.broadcasting_fmax",
        "broadcasting_maximum, the other operand where "
        "one is NaN")(_nan_ignoring(ca.broadcasting_maximum))
mapping("coreai.broadcasting_fmin",
        "broadcasting_minimum, the other operand where "
        "one is NaN")(_nan_ignoring(ca.broadcasting_minimum))
mapping("coreai.broadcasting_hypot",
        f"max * sqrt(1 + (min / max)**2), no overflow (<= 2.75 ulps; "
        f"{IN_FLOAT32_NOTE})")(in_float32(hypot))
mapping("coreai.signbit", "x < 0 or (x == 0 and 1 / x < 0) (a NaN counts as positive)")(_signbit)
mapping("coreai.broadcasting_copysign",
        "where(y < 0 or y is -0, -|x|, |x|) (a NaN y counts as positive)")(_copysign)
