"""Built-in lowerings (elementwise family): elementwise math, comparisons, logical ops and
activations."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from coreai_core import DType, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._common import Builder, in_opmath, lower_binary, lower_unary
from coreai_torch.utils import cast_to, result_dtype, result_type, scalar_like

LOWERINGS = LoweringSet("elementwise")
reg = LOWERINGS.register_torch_lowering

# -- unary: one table row per op ------------------------------------------------------------------

_UNARY: dict[str, Builder | None] = {
    "abs": coreai.abs_, "neg": coreai.neg, "sign": coreai.sign, "floor": coreai.floor,
    "ceil": coreai.ceil, "trunc": coreai.trunc, "relu": coreai.relu,
    "bitwise_not": coreai.bitwise_not, "logical_not": None,
}
_FLOAT_UNARY: dict[str, Builder] = {
    "acos": coreai.acos, "acosh": coreai.acosh, "asin": coreai.asin, "asinh": coreai.asinh,
    "atan": coreai.atan, "atanh": coreai.atanh, "cos": coreai.cos, "cosh": coreai.cosh,
    "sin": coreai.sin, "sinh": coreai.sinh, "tan": coreai.tan, "tanh": coreai.tanh,
    "exp": coreai.exp, "exp2": coreai.exp2, "expm1": coreai.expm1, "log": coreai.log,
    "log2": coreai.log2, "log10": coreai.log10, "log1p": coreai.log1p, "sqrt": coreai.sqrt,
    "rsqrt": coreai.rsqrt, "reciprocal": coreai.reciprocal, "erf": coreai.erf,
    "erfinv": coreai.erfinv, "lgamma": coreai.lgamma, "digamma": coreai.digamma,
    "sigmoid": coreai.sigmoid, "silu": coreai.silu,
}
for _name, _builder in _UNARY.items():
    if _builder is not None:
        reg(f"aten::{_name}.default")(lower_unary(_builder))
for _name, _builder in _FLOAT_UNARY.items():
    reg(f"aten::{_name}.default")(lower_unary(_builder, float_compute=True))


@reg("aten::logical_not.default")
def aten_logical_not_default(self: Value) -> Value:
    """logical_not(Tensor self) -> Tensor"""
    return cast_to(coreai.not_(_truthy(self)), result_dtype())


def _truthy(x: Value) -> Value:
    if x.type.element_type is DType.bool:
        return x
    return coreai.broadcasting_not_equal(x, scalar_like(0, x))


@reg("aten::round.default")
def aten_round_default(self: Value) -> Value:
    """round(Tensor self) -> Tensor"""
    return coreai.round_(self)


@reg("aten::round.decimals")
def aten_round_decimals(self: Value, decimals: int) -> Value:
    """round.decimals(Tensor self, *, int decimals) -> Tensor"""
    if decimals == 0:
        return coreai.round_(self)
    # torch's sequence: in float32 for half types; x * 10**d for d > 0, x / 10**-d for d < 0
    dtype = self.type.element_type
    x = cast_to(self, DType.float32) if dtype in (DType.float16, DType.bfloat16) else self
    scale = scalar_like(10.0 ** abs(decimals), x)
    if decimals > 0:
        y = coreai.broadcasting_divide(coreai.round_(coreai.broadcasting_mul(x, scale)), scale)
    else:
        y = coreai.broadcasting_mul(coreai.round_(coreai.broadcasting_divide(x, scale)), scale)
    return cast_to(y, dtype)


def _float_class_test(op: str) -> Callable[[Value], Value]:
    """isnan / isinf / isfinite / isposinf / isneginf: a bool tensor (integers are finite)."""

    def lowering(self: Value) -> Value:
        if not (self.type.element_type.is_float or self.type.element_type.is_complex):
            return coreai.broadcast_to(coreai.constant(op == "isfinite"), coreai.get_shape(self))
        if op == "isnan":
            return coreai.isnan(self)
        if op == "isinf":
            return coreai.isinf(self)
        if op == "isfinite":
            return coreai.not_(coreai.broadcasting_or(coreai.isnan(self), coreai.isinf(self)))
        return coreai.broadcasting_equal(
            self, scalar_like(math.inf if op == "isposinf" else -math.inf, self))

    lowering.__name__ = lowering.__qualname__ = f"aten_{op}_default"
    lowering.__doc__ = f"{op}(Tensor self) -> Tensor"
    return lowering


for _op in ("isnan", "isinf", "isfinite", "isposinf", "isneginf"):
    reg(f"aten::{_op}.default")(_float_class_test(_op))


@reg("aten::gelu.default")
def aten_gelu_default(self: Value, approximate: str = "none") -> Value:
    """gelu(Tensor self, *, str approximate='none') -> Tensor"""
    if approximate not in ("none", "tanh"):
        raise NotImplementedError(f"gelu approximate={approximate!r}")
    return coreai.gelu(self, approximate="tanh" if approximate == "tanh" else "none")


# -- binary ---------------------------------------------------------------------------------------

def broadcasting_mul_or_and(lhs: Value, rhs: Value) -> Value:
    """lhs * rhs; on bool operands the logical and, as in torch."""
    if lhs.type.element_type is DType.bool:
        return coreai.broadcasting_and(lhs, rhs)
    return coreai.broadcasting_mul(lhs, rhs)


_ARITH: dict[str, Builder] = {
    "mul": broadcasting_mul_or_and, "maximum": coreai.broadcasting_maximum,
    "minimum": coreai.broadcasting_minimum,
    "fmod": coreai.broadcasting_modulo, "remainder": coreai.broadcasting_remainder,
    "atan2": coreai.broadcasting_atan2, "bitwise_and": coreai.broadcasting_bitwise_and,
    "bitwise_or": coreai.broadcasting_bitwise_or, "bitwise_xor": coreai.broadcasting_bitwise_xor,
    "bitwise_left_shift": coreai.broadcasting_shift_left,
    "bitwise_right_shift": coreai.broadcasting_shift_right,
    "floor_divide": coreai.broadcasting_floor_divide,
}
for _name, _builder in _ARITH.items():
    # tensor overloads (Tensor/Scalar), else the op's only one; never TorchScript's scalar
    # overloads (mul.default on two numbers), which exported programs do not contain
    _overloads = getattr(torch.ops.aten, _name).overloads()
    _tensor_form = "Tensor" if "Tensor" in _overloads else "default"
    for _overload in [_tensor_form, *(["Scalar"] if "Scalar" in _overloads else [])]:
        reg(f"aten::{_name}.{_overload}")(lower_binary(_builder))
reg("aten::remainder.Scalar_Tensor")(lower_binary(coreai.broadcasting_remainder))
_pow = lower_binary(coreai.broadcasting_pow)
for _overload in ("Tensor_Tensor", "Tensor_Scalar", "Scalar"):
    reg(f"aten::pow.{_overload}")(_pow)

# Overloads of the bitwise ops the table above leaves out: a Python number on either side
# (cast to the tensor's dtype, wrapping like torch) and the operator forms.
for _name, _builder in [
    ("bitwise_and", coreai.broadcasting_bitwise_and),
    ("bitwise_or", coreai.broadcasting_bitwise_or),
    ("bitwise_xor", coreai.broadcasting_bitwise_xor),
]:
    reg(f"aten::{_name}.Scalar_Tensor")(lower_binary(_builder))
for _name, _op, _builder in [
    ("bitwise_left_shift", "__lshift__", coreai.broadcasting_shift_left),
    ("bitwise_right_shift", "__rshift__", coreai.broadcasting_shift_right),
]:
    _shift = lower_binary(_builder)
    for _qn in (f"aten::{_name}.Tensor_Scalar", f"aten::{_name}.Scalar_Tensor",
                f"aten::{_op}.Tensor", f"aten::{_op}.Scalar"):
        reg(_qn)(_shift)


@reg("aten::ldexp.Tensor")
def aten_ldexp_tensor(self: Value, other: Value) -> Value:
    """ldexp.Tensor(Tensor self, Tensor other) -> Tensor: self * 2**other, as torch computes it"""
    # torch computes mul(self, pow(2.0, other)): a floating exponent's power is rounded to
    # the exponent's dtype before the product is promoted; an integer one is exact (result dtype)
    dtype = result_dtype()
    kind = other.type.element_type
    exponent = other if kind.is_float or kind.is_complex else cast_to(other, dtype)
    scale = coreai.broadcasting_pow(scalar_like(2.0, exponent), exponent)
    return coreai.broadcasting_mul(cast_to(self, dtype), cast_to(scale, dtype))


_COMPARE: dict[str, Builder] = {
    "eq": coreai.broadcasting_equal, "ne": coreai.broadcasting_not_equal,
    "lt": coreai.broadcasting_less, "le": coreai.broadcasting_less_equal,
    "gt": coreai.broadcasting_greater, "ge": coreai.broadcasting_greater_equal,
}
for _name, _builder in _COMPARE.items():
    _compare = lower_binary(_builder, compute="promoted")
    reg(f"aten::{_name}.Tensor")(_compare)
    reg(f"aten::{_name}.Scalar")(_compare)


def _logical(builder: Builder) -> Callable[[Value, Value], Value]:
    def lowering(self: Value, other: Value) -> Value:
        return cast_to(builder(_truthy(self), _truthy(other)), result_dtype())

    lowering.__doc__ = f"Logical lowering onto {builder.__name__} of the operands' truth."
    return lowering


reg("aten::logical_and.default")(_logical(coreai.broadcasting_and))
reg("aten::logical_or.default")(_logical(coreai.broadcasting_or))
reg("aten::logical_xor.default")(_logical(coreai.broadcasting_xor))


def _scaled(y: Value | float, alpha: float, dtype: DType) -> Value:
    y = cast_to(y, dtype)
    return y if alpha == 1 else coreai.broadcasting_mul(y, coreai.constant(alpha, dtype=dtype))


@reg("aten::add.Tensor")
@reg("aten::add.Scalar")
def aten_add_tensor(self: Value, other: Value | float, alpha: float = 1) -> Value:
    """add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"""
    dtype = result_dtype()
    if dtype is DType.bool:  # torch: bool + bool is the logical or (alpha must be a bool)
        other_b = cast_to(other, dtype)
        if not alpha:
            other_b = coreai.broadcasting_and(other_b, coreai.constant(False))
        return coreai.broadcasting_or(cast_to(self, dtype), other_b)
    return coreai.broadcasting_add(cast_to(self, dtype), _scaled(other, alpha, dtype))


@reg("aten::sub.Tensor")
@reg("aten::sub.Scalar")
def aten_sub_tensor(self: Value, other: Value | float, alpha: float = 1) -> Value:
    """sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"""
    dtype = result_dtype()
    return coreai.broadcasting_sub(cast_to(self, dtype), _scaled(other, alpha, dtype))


@reg("aten::rsub.Tensor")
@reg("aten::rsub.Scalar")
def aten_rsub_tensor(self: Value, other: Value | float, alpha: float = 1) -> Value:
    """rsub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor: other - alpha*self"""
    dtype = result_dtype()
    return coreai.broadcasting_sub(cast_to(other, dtype), _scaled(self, alpha, dtype))


@reg("aten::div.Tensor")
@reg("aten::div.Scalar")
@reg("aten::true_divide.Tensor")
def aten_div_tensor(self: Value, other: Value | float) -> Value:
    """div.Tensor(Tensor self, Tensor other) -> Tensor (true division)"""
    dtype = result_dtype()
    return coreai.broadcasting_divide(cast_to(self, dtype), cast_to(other, dtype))


@reg("aten::div.Tensor_mode")
@reg("aten::div.Scalar_mode")
def aten_div_tensor_mode(self: Value, other: Value | float, rounding_mode: str | None) -> Value:
    """div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor"""
    dtype = result_dtype()
    a, b = cast_to(self, dtype), cast_to(other, dtype)
    if rounding_mode == "floor":
        return coreai.broadcasting_floor_divide(a, b)
    q = coreai.broadcasting_divide(a, b)
    return coreai.trunc(q) if rounding_mode == "trunc" and dtype.is_float else q


@reg("aten::where.self")
@reg("aten::where.ScalarSelf")
@reg("aten::where.ScalarOther")
@reg("aten::where.Scalar")
def aten_where_self(condition: Value, self: Value | float, other: Value | float) -> Value:
    """where.self(Tensor condition, Tensor self, Tensor other) -> Tensor"""
    dtype = result_dtype()
    return coreai.broadcasting_where(_truthy(condition), cast_to(self, dtype),
                                     cast_to(other, dtype))


def _clamp(x: Value, lo: Value | None, hi: Value | None) -> Value:
    if lo is not None:
        x = coreai.broadcasting_maximum(x, lo)
    if hi is not None:
        x = coreai.broadcasting_minimum(x, hi)
    return x


@reg("aten::clamp.default")
@reg("aten::clamp.Tensor")
@reg("aten::clip.default")
@reg("aten::clip.Tensor")
def aten_clamp_default(self: Value, min: Value | float | None = None,
                       max: Value | float | None = None) -> Value:
    """clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor"""
    dtype = result_dtype()
    return _clamp(cast_to(self, dtype), None if min is None else cast_to(min, dtype),
                  None if max is None else cast_to(max, dtype))


@reg("aten::clamp_min.default")
def aten_clamp_min_default(self: Value, min: Value | float) -> Value:
    """clamp_min(Tensor self, Scalar min) -> Tensor"""
    dtype = result_dtype()
    return _clamp(cast_to(self, dtype), cast_to(min, dtype), None)


@reg("aten::clamp_max.default")
def aten_clamp_max_default(self: Value, max: Value | float) -> Value:
    """clamp_max(Tensor self, Scalar max) -> Tensor"""
    dtype = result_dtype()
    return _clamp(cast_to(self, dtype), None, cast_to(max, dtype))


@reg("aten::hardtanh.default")
def aten_hardtanh_default(self: Value, min_val: float = -1.0, max_val: float = 1.0) -> Value:
    """hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor"""
    return _clamp(self, scalar_like(min_val, self), scalar_like(max_val, self))


# -- activations built from the dialect's primitives ----------------------------------------------
# Composites run ``in_opmath``: torch's CPU kernels compute them in float32 for float16/bfloat16
# and round once (softplus(12) in float16 is 12, not log1p(inf)).

@reg("aten::leaky_relu.default")
def aten_leaky_relu_default(self: Value, negative_slope: float = 0.01) -> Value:
    """leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor"""
    x = self
    neg = coreai.broadcasting_less(x, scalar_like(0, x))
    return coreai.broadcasting_where(
        neg, coreai.broadcasting_mul(x, scalar_like(negative_slope, x)), x)


def _elu_like(x: Value, alpha: float, scale: float, input_scale: float) -> Value:
    # scale * (x if x > 0 else alpha * (exp(x * input_scale) - 1))
    scaled_in = x if input_scale == 1 else coreai.broadcasting_mul(x, scalar_like(input_scale, x))
    neg = coreai.broadcasting_mul(coreai.expm1(scaled_in), scalar_like(alpha, x))
    out = coreai.broadcasting_where(coreai.broadcasting_greater(x, scalar_like(0, x)), x, neg)
    return out if scale == 1 else coreai.broadcasting_mul(out, scalar_like(scale, x))


@reg("aten::elu.default")
@in_opmath
def aten_elu_default(self: Value, alpha: float = 1.0, scale: float = 1.0,
                     input_scale: float = 1.0) -> Value:
    """elu(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1) -> Tensor"""
    return _elu_like(self, alpha, scale, input_scale)


@reg("aten::selu.default")
@in_opmath
def aten_selu_default(self: Value) -> Value:
    """selu(Tensor self) -> Tensor"""
    alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
    return _elu_like(self, alpha, scale, 1.0)


@reg("aten::celu.default")
@in_opmath
def aten_celu_default(self: Value, alpha: float = 1.0) -> Value:
    """celu(Tensor self, Scalar alpha=1.0) -> Tensor"""
    return _elu_like(self, alpha, 1.0, 1.0 / alpha)


def _softplus(x: Value, beta: float, threshold: float) -> Value:
    # log1p(exp(beta*x)) / beta, and x itself where beta*x > threshold (torch's rule)
    bx = x if beta == 1 else coreai.broadcasting_mul(x, scalar_like(beta, x))
    soft = coreai.log1p(coreai.exp(bx))
    if beta != 1:
        soft = coreai.broadcasting_divide(soft, scalar_like(beta, x))
    big = coreai.broadcasting_greater(bx, scalar_like(threshold, x))
    return coreai.broadcasting_where(big, x, soft)


@reg("aten::softplus.default")
@in_opmath
def aten_softplus_default(self: Value, beta: float = 1.0, threshold: float = 20.0) -> Value:
    """softplus(Tensor self, Scalar beta=1, Scalar threshold=20) -> Tensor"""
    return _softplus(self, beta, threshold)


def _limit_at_minus_inf(x: Value, y: Value) -> Value:
    """``y`` = x * f(x) with -0.0 where x is -inf, its limit (f -> 0 there and -inf * 0 is NaN;
    torch returns that NaN)."""
    at = coreai.broadcasting_equal(x, scalar_like(float("-inf"), x))
    return coreai.broadcasting_where(at, scalar_like(-0.0, x), y)


@reg("aten::mish.default")
@in_opmath
def aten_mish_default(self: Value) -> Value:
    """mish(Tensor self) -> Tensor: x * tanh(softplus(x))"""
    return _limit_at_minus_inf(
        self, coreai.broadcasting_mul(self, coreai.tanh(_softplus(self, 1.0, 20.0))))


@reg("aten::log_sigmoid_forward.default")
@in_opmath
def aten_log_sigmoid_forward_default(self: Value) -> list[Value]:
    """log_sigmoid_forward(Tensor self) -> (Tensor output, Tensor buffer)"""
    x = self
    # log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), stable for large |x|
    zero = scalar_like(0, x)
    tail = coreai.log1p(coreai.exp(coreai.neg(coreai.abs_(x))))
    out = coreai.broadcasting_sub(coreai.broadcasting_minimum(x, zero), tail)
    # the buffer only feeds the backward op; give it the shape torch records, filled with 0
    buffer_type = result_type(index=1)
    shape = coreai.get_shape(x) if buffer_type.shape == x.type.shape else list(buffer_type.shape)
    return [out, coreai.broadcast_to(zero, shape)]


@reg("aten::hardsigmoid.default")
@in_opmath
def aten_hardsigmoid_default(self: Value) -> Value:
    """hardsigmoid(Tensor self) -> Tensor: clamp(x/6 + 1/2, 0, 1)"""
    x = self
    y = coreai.broadcasting_add(coreai.broadcasting_divide(x, scalar_like(6, x)),
                                scalar_like(0.5, x))
    return _clamp(y, scalar_like(0, x), scalar_like(1, x))


@reg("aten::hardswish.default")
@in_opmath
def aten_hardswish_default(self: Value) -> Value:
    """hardswish(Tensor self) -> Tensor: x * relu6(x + 3) / 6"""
    x = self
    r6 = _clamp(coreai.broadcasting_add(x, scalar_like(3, x)), scalar_like(0, x),
                scalar_like(6, x))
    return _limit_at_minus_inf(
        x, coreai.broadcasting_divide(coreai.broadcasting_mul(x, r6), scalar_like(6, x)))


@reg("aten::threshold.default")
def aten_threshold_default(self: Value, threshold: float, value: float) -> Value:
    """threshold(Tensor self, Scalar threshold, Scalar value) -> Tensor"""
    # torch: x <= threshold ? value : x, so NaN passes through
    replace = coreai.broadcasting_less_equal(self, scalar_like(threshold, self))
    return coreai.broadcasting_where(replace, scalar_like(value, self), self)
