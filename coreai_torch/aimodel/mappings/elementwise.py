"""Op mappings (elementwise family): the ops Core AI has almost as they are (unary and binary
functions, comparisons, casts).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from coreai_core import Operation
from coreai_torch.aimodel._apple import ca
from coreai_torch.aimodel._context import Emit, ExportContext, exported_dtype
from coreai_torch.aimodel._emit import bitwise_not, i32, scalar
from coreai_torch.aimodel.mappings._casts import cast_exactly
from coreai_torch.aimodel.mappings._registry import mapping_decorator, mapping_registry

__all__ = ["MAPPINGS"]

MAPPINGS = mapping_registry(__name__)
mapping = mapping_decorator(MAPPINGS)


def _direct(apple: Callable[..., Any]) -> Emit:
    def emit(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
        return [apple(*xs)]
    return emit


_UNARY: dict[str, Callable[..., Any]] = {
    "abs": ca.abs_, "acos": ca.acos, "acosh": ca.acosh, "asin": ca.asin, "asinh": ca.asinh,
    "atan": ca.atan, "atanh": ca.atanh, "cos": ca.cos, "cosh": ca.cosh, "sin": ca.sin,
    "sinh": ca.sinh, "tan": ca.tan, "tanh": ca.tanh, "exp": ca.exp, "log": ca.log,
    "sqrt": ca.sqrt, "rsqrt": ca.rsqrt, "erf": ca.erf, "sigmoid": ca.sigmoid, "silu": ca.silu,
    "relu": ca.relu, "not": ca.not_, "round": ca.round_,
}


_BINARY: dict[str, Callable[..., Any]] = {
    "broadcasting_add": ca.broadcasting_add, "broadcasting_sub": ca.broadcasting_sub,
    "broadcasting_mul": ca.broadcasting_mul, "broadcasting_divide": ca.broadcasting_divide,
    "broadcasting_maximum": ca.broadcasting_maximum,
    "broadcasting_minimum": ca.broadcasting_minimum,
    "broadcasting_equal": ca.broadcasting_equal,
    "broadcasting_not_equal": ca.broadcasting_not_equal,
    "broadcasting_greater": ca.broadcasting_greater, "broadcasting_and": ca.broadcasting_and,
    "broadcasting_or": ca.broadcasting_or, "broadcasting_xor": ca.broadcasting_xor,
    "broadcasting_bitwise_and": ca.broadcasting_bitwise_and,
    "broadcasting_bitwise_or": ca.broadcasting_bitwise_or,
    "broadcasting_bitwise_xor": ca.broadcasting_bitwise_xor,
    "broadcasting_pow": ca.broadcasting_pow,
    "broadcasting_floor_divide": ca.broadcasting_floor_divide,
    "broadcasting_modulo": ca.broadcasting_modulo, "add": ca.add, "sub": ca.sub, "mul": ca.mul,
    "divide": ca.divide,
}


def _fn_name(apple: Callable[..., Any]) -> str:
    return apple.__name__


@mapping("coreai.neg", "broadcasting_mul(x, -1)")
def _neg(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    # x * -1 rather than 0 - x: it keeps the sign of zero, like negation
    return [ca.broadcasting_mul(xs[0], scalar(ctx, op, -1))]


@mapping("coreai.reciprocal", "broadcasting_divide(1, x)")
def _reciprocal(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    return [ca.broadcasting_divide(scalar(ctx, op, 1), xs[0])]


@mapping("coreai.broadcasting_less", "broadcasting_greater(y, x)")
def _less(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    return [ca.broadcasting_greater(xs[1], xs[0])]


def _or_equal(strict: Callable[[Sequence[Any]], Any]) -> Emit:
    # a >= b is (a > b) or (a == b): exact, NaN included (both are false)
    def emit(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
        return [ca.broadcasting_or(strict(xs), ca.broadcasting_equal(xs[0], xs[1]))]
    return emit


@mapping("coreai.isnan", "broadcasting_not_equal(x, x)")
def _isnan(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    return [ca.broadcasting_not_equal(xs[0], xs[0])]


@mapping("coreai.isinf", "broadcasting_or(x == inf, x == -inf)")
def _isinf(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    return [ca.broadcasting_or(ca.broadcasting_equal(xs[0], scalar(ctx, op, np.inf)),
                               ca.broadcasting_equal(xs[0], scalar(ctx, op, -np.inf)))]


@mapping("coreai.sign", "broadcasting_where(x > 0, 1, where(0 > x, -1, 0))")
def _sign(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    # NaN compares false both ways and gives 0, as ours does
    x, zero = xs[0], scalar(ctx, op, 0)
    negative = ca.broadcasting_where(ca.broadcasting_greater(zero, x), scalar(ctx, op, -1), zero)
    return [ca.broadcasting_where(ca.broadcasting_greater(x, zero), scalar(ctx, op, 1),
                                  negative)]


@mapping("coreai.bitwise_not", "broadcasting_bitwise_xor(x, all ones) (bool: not_)")
def _bitwise_not(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    return [bitwise_not(ctx, op, xs[0])]


@mapping("coreai.broadcasting_where", "broadcasting_where")
def _where(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    return [ca.broadcasting_where(*xs)]


@mapping("coreai.gelu", "gelu")
def _gelu(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    return [ca.gelu(xs[0], approximate=op.attributes["approximate"])]


@mapping("coreai.softmax", "softmax")
def _softmax(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    return [ca.softmax(xs[0], i32(op.attributes["axis"]))]


@mapping("coreai.cast", "cast (to the narrowed type)")
def _cast(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    src, dst = (exported_dtype(v.type.element_type) for v in (op.operands[0], op.results[0]))
    return [cast_exactly(xs[0], src, dst)]


@mapping("coreai.constant", "constant (int64/float64 narrowed, checked)")
def _constant(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    # the exporter emits each constant where it is first used (narrowed, values checked)
    raise AssertionError("coreai.constant is emitted by the exporter")


for _name, _fn in {**_UNARY, **_BINARY}.items():
    mapping(f"coreai.{_name}", _fn_name(_fn))(_direct(_fn))
mapping("coreai.broadcasting_greater_equal",
        "broadcasting_or(broadcasting_greater(x, y), broadcasting_equal(x, y))")(
    _or_equal(lambda xs: ca.broadcasting_greater(xs[0], xs[1])))
mapping("coreai.broadcasting_less_equal",
        "broadcasting_or(broadcasting_greater(y, x), broadcasting_equal(x, y))")(
    _or_equal(lambda xs: ca.broadcasting_greater(xs[1], xs[0])))
