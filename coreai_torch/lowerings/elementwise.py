"""Built-in lowerings: elementwise math, comparisons, logical ops and activations."""

from __future__ import annotations

import math

import torch.fx

from coreai_core import DType, Location, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._common import (
    ValuesMap,
    lower_binary,
    lower_unary,
    operand_as,
    scalar_like,
)
from coreai_torch.utils import cast_to, get_arg, get_operand, result_dtype, result_type

LOWERINGS = LoweringSet("elementwise")
reg = LOWERINGS.register_torch_lowering

# -- unary: one table row per op ------------------------------------------------------------------

_UNARY = {
    "abs": coreai.abs_, "neg": coreai.neg, "sign": coreai.sign, "floor": coreai.floor,
    "ceil": coreai.ceil, "trunc": coreai.trunc, "relu": coreai.relu,
    "bitwise_not": coreai.bitwise_not, "logical_not": None,
}
_FLOAT_UNARY = {
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
def aten_logical_not_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """logical_not(Tensor self) -> Tensor"""
    x = _truthy(get_operand(values_map, node, 0, loc), loc)
    return cast_to(coreai.not_(x, loc=loc), result_dtype(node), loc)


def _truthy(x: Value, loc: Location | None = None) -> Value:
    if x.type.element_type is DType.bool:
        return x
    return coreai.broadcasting_not_equal(x, scalar_like(0, x, loc), loc=loc)


@reg("aten::round.default")
def aten_round_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """round(Tensor self) -> Tensor"""
    return coreai.round_(get_operand(values_map, node, 0, loc), loc=loc)


@reg("aten::round.decimals")
def aten_round_decimals(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """round.decimals(Tensor self, *, int decimals) -> Tensor"""
    x = get_operand(values_map, node, 0, loc)
    decimals = node.kwargs.get("decimals", get_arg(node, 1, default=0))
    if decimals == 0:
        return coreai.round_(x, loc=loc)
    scale = scalar_like(10.0 ** decimals, x, loc)
    scaled = coreai.round_(coreai.broadcasting_mul(x, scale, loc=loc), loc=loc)
    return coreai.broadcasting_divide(scaled, scale, loc=loc)


@reg("aten::isnan.default", "aten::isinf.default", "aten::isfinite.default",
     "aten::isposinf.default", "aten::isneginf.default")
def aten_isnan_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """isnan / isinf / isfinite / isposinf / isneginf (Tensor self) -> Tensor"""
    x = get_operand(values_map, node, 0, loc)
    op = node.target._schema.name.split("::")[1]
    if not (x.type.element_type.is_float or x.type.element_type.is_complex):
        value = op == "isfinite"
        return coreai.broadcast_to(coreai.constant(value), coreai.get_shape(x, loc=loc), loc=loc)
    if op == "isnan":
        return coreai.isnan(x, loc=loc)
    if op == "isinf":
        return coreai.isinf(x, loc=loc)
    if op == "isfinite":
        bad = coreai.broadcasting_or(coreai.isnan(x, loc=loc), coreai.isinf(x, loc=loc), loc=loc)
        return coreai.not_(bad, loc=loc)
    inf = scalar_like(math.inf if op == "isposinf" else -math.inf, x, loc)
    return coreai.broadcasting_equal(x, inf, loc=loc)


@reg("aten::gelu.default")
def aten_gelu_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """gelu(Tensor self, *, str approximate='none') -> Tensor"""
    x = get_operand(values_map, node, 0, loc)
    return coreai.gelu(x, approximate=node.kwargs.get("approximate", "none"), loc=loc)


# -- binary ---------------------------------------------------------------------------------------

_ARITH = {
    "mul": coreai.broadcasting_mul, "maximum": coreai.broadcasting_maximum,
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
reg("aten::pow.Tensor_Tensor", "aten::pow.Tensor_Scalar", "aten::pow.Scalar")(
    lower_binary(coreai.broadcasting_pow))

_COMPARE = {
    "eq": coreai.broadcasting_equal, "ne": coreai.broadcasting_not_equal,
    "lt": coreai.broadcasting_less, "le": coreai.broadcasting_less_equal,
    "gt": coreai.broadcasting_greater, "ge": coreai.broadcasting_greater_equal,
}
for _name, _builder in _COMPARE.items():
    reg(f"aten::{_name}.Tensor", f"aten::{_name}.Scalar")(
        lower_binary(_builder, compute="promoted"))


def _logical(builder: object) -> object:
    def lowering(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
        a = _truthy(get_operand(values_map, node, 0, loc), loc)
        b = _truthy(get_operand(values_map, node, 1, loc), loc)
        return cast_to(builder(a, b, loc=loc), result_dtype(node), loc)

    return lowering


reg("aten::logical_and.default")(_logical(coreai.broadcasting_and))
reg("aten::logical_or.default")(_logical(coreai.broadcasting_or))
reg("aten::logical_xor.default")(_logical(coreai.broadcasting_xor))


def _alpha_scaled(values_map: ValuesMap, node: torch.fx.Node, index: int, dtype: DType,
                  loc: Location) -> Value:
    y = operand_as(values_map, node, index, dtype, loc)
    alpha = node.kwargs.get("alpha", 1)
    if alpha != 1:
        y = coreai.broadcasting_mul(y, coreai.constant(alpha, dtype=dtype, loc=loc), loc=loc)
    return y


@reg("aten::add.Tensor", "aten::add.Scalar")
def aten_add_tensor(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"""
    dtype = result_dtype(node)
    x = operand_as(values_map, node, 0, dtype, loc)
    return coreai.broadcasting_add(x, _alpha_scaled(values_map, node, 1, dtype, loc), loc=loc)


@reg("aten::sub.Tensor", "aten::sub.Scalar")
def aten_sub_tensor(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"""
    dtype = result_dtype(node)
    x = operand_as(values_map, node, 0, dtype, loc)
    return coreai.broadcasting_sub(x, _alpha_scaled(values_map, node, 1, dtype, loc), loc=loc)


@reg("aten::rsub.Tensor", "aten::rsub.Scalar")
def aten_rsub_tensor(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """rsub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor: other - alpha*self"""
    dtype = result_dtype(node)
    y = operand_as(values_map, node, 1, dtype, loc)
    return coreai.broadcasting_sub(y, _alpha_scaled(values_map, node, 0, dtype, loc), loc=loc)


@reg("aten::div.Tensor", "aten::div.Scalar", "aten::true_divide.Tensor")
def aten_div_tensor(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """div.Tensor(Tensor self, Tensor other) -> Tensor (true division)"""
    dtype = result_dtype(node)
    a = operand_as(values_map, node, 0, dtype, loc)
    b = operand_as(values_map, node, 1, dtype, loc)
    return coreai.broadcasting_divide(a, b, loc=loc)


@reg("aten::div.Tensor_mode", "aten::div.Scalar_mode")
def aten_div_tensor_mode(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor"""
    mode = node.kwargs.get("rounding_mode", get_arg(node, 2))
    dtype = result_dtype(node)
    a = operand_as(values_map, node, 0, dtype, loc)
    b = operand_as(values_map, node, 1, dtype, loc)
    if mode == "floor":
        return coreai.broadcasting_floor_divide(a, b, loc=loc)
    q = coreai.broadcasting_divide(a, b, loc=loc)
    return coreai.trunc(q, loc=loc) if mode == "trunc" and dtype.is_float else q


@reg("aten::where.self", "aten::where.ScalarSelf", "aten::where.ScalarOther",
     "aten::where.Scalar")
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


@reg("aten::clamp.default", "aten::clamp.Tensor", "aten::clip.default", "aten::clip.Tensor")
def aten_clamp_default(self: Value, min: Value | float | None = None,
                       max: Value | float | None = None) -> Value:
    """clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor"""
    dtype = result_dtype()
    return _clamp(cast_to(self, dtype), None if min is None else cast_to(min, dtype),
                  None if max is None else cast_to(max, dtype))


@reg("aten::clamp_min.default", "aten::clamp_max.default")
def aten_clamp_min_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """clamp_min / clamp_max (Tensor self, Scalar bound) -> Tensor"""
    dtype = result_dtype(node)
    x = operand_as(values_map, node, 0, dtype, loc)
    bound = operand_as(values_map, node, 1, dtype, loc)
    is_min = node.target._schema.name.endswith("min")
    return _clamp(x, bound if is_min else None, None if is_min else bound)


@reg("aten::hardtanh.default")
def aten_hardtanh_default(self: Value, min_val: float = -1.0, max_val: float = 1.0) -> Value:
    """hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor"""
    return _clamp(self, scalar_like(min_val, self), scalar_like(max_val, self))


# -- activations built from the dialect's primitives ----------------------------------------------

def _act(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    return get_operand(values_map, node, 0, loc)


@reg("aten::leaky_relu.default")
def aten_leaky_relu_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor"""
    x = _act(values_map, node, loc)
    slope = scalar_like(get_arg(node, 1, "negative_slope", 0.01), x, loc)
    neg = coreai.broadcasting_less(x, scalar_like(0, x, loc), loc=loc)
    return coreai.broadcasting_where(neg, coreai.broadcasting_mul(x, slope, loc=loc), x, loc=loc)


def _elu_like(x: Value, alpha: float, scale: float, input_scale: float, loc: Location) -> Value:
    # scale * (x if x > 0 else alpha * (exp(x * input_scale) - 1))
    scaled_in = x if input_scale == 1 else coreai.broadcasting_mul(
        x, scalar_like(input_scale, x, loc), loc=loc)
    neg = coreai.broadcasting_mul(coreai.expm1(scaled_in, loc=loc), scalar_like(alpha, x, loc),
                                  loc=loc)
    pos = coreai.broadcasting_greater(x, scalar_like(0, x, loc), loc=loc)
    out = coreai.broadcasting_where(pos, x, neg, loc=loc)
    return out if scale == 1 else coreai.broadcasting_mul(out, scalar_like(scale, x, loc), loc=loc)


@reg("aten::elu.default")
def aten_elu_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """elu(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1) -> Tensor"""
    x = _act(values_map, node, loc)
    return _elu_like(x, get_arg(node, 1, "alpha", 1.0), get_arg(node, 2, "scale", 1.0),
                     get_arg(node, 3, "input_scale", 1.0), loc)


@reg("aten::selu.default")
def aten_selu_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """selu(Tensor self) -> Tensor"""
    alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
    return _elu_like(_act(values_map, node, loc), alpha, scale, 1.0, loc)


@reg("aten::celu.default")
def aten_celu_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """celu(Tensor self, Scalar alpha=1.0) -> Tensor"""
    alpha = get_arg(node, 1, "alpha", 1.0)
    return _elu_like(_act(values_map, node, loc), alpha, 1.0, 1.0 / alpha, loc)


def _softplus(x: Value, beta: float, threshold: float, loc: Location) -> Value:
    # log1p(exp(beta*x)) / beta, and x itself where beta*x > threshold (torch's rule)
    bx = x if beta == 1 else coreai.broadcasting_mul(x, scalar_like(beta, x, loc), loc=loc)
    soft = coreai.log1p(coreai.exp(bx, loc=loc), loc=loc)
    if beta != 1:
        soft = coreai.broadcasting_divide(soft, scalar_like(beta, x, loc), loc=loc)
    big = coreai.broadcasting_greater(bx, scalar_like(threshold, x, loc), loc=loc)
    return coreai.broadcasting_where(big, x, soft, loc=loc)


@reg("aten::softplus.default")
def aten_softplus_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """softplus(Tensor self, Scalar beta=1, Scalar threshold=20) -> Tensor"""
    return _softplus(_act(values_map, node, loc), get_arg(node, 1, "beta", 1.0),
                     get_arg(node, 2, "threshold", 20.0), loc)


@reg("aten::mish.default")
def aten_mish_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """mish(Tensor self) -> Tensor: x * tanh(softplus(x))"""
    x = _act(values_map, node, loc)
    return coreai.broadcasting_mul(x, coreai.tanh(_softplus(x, 1.0, 20.0, loc), loc=loc), loc=loc)


@reg("aten::log_sigmoid_forward.default")
def aten_log_sigmoid_forward_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                                     ) -> list[Value]:
    """log_sigmoid_forward(Tensor self) -> (Tensor output, Tensor buffer)"""
    x = _act(values_map, node, loc)
    # log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), stable for large |x|
    zero = scalar_like(0, x, loc)
    tail = coreai.log1p(coreai.exp(coreai.neg(coreai.abs_(x, loc=loc), loc=loc), loc=loc), loc=loc)
    out = coreai.broadcasting_sub(coreai.broadcasting_minimum(x, zero, loc=loc), tail, loc=loc)
    # the buffer only feeds the backward op; give it the shape torch records, filled with 0
    buffer_type = result_type(node, 1)
    zero = scalar_like(0, x, loc)
    shape = (coreai.get_shape(x, loc=loc) if buffer_type.shape == x.type.shape
             else list(buffer_type.shape))
    return [out, coreai.broadcast_to(zero, shape, loc=loc)]


@reg("aten::hardsigmoid.default")
def aten_hardsigmoid_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """hardsigmoid(Tensor self) -> Tensor: clamp(x/6 + 1/2, 0, 1)"""
    x = _act(values_map, node, loc)
    y = coreai.broadcasting_add(coreai.broadcasting_divide(x, scalar_like(6, x, loc), loc=loc),
                                scalar_like(0.5, x, loc), loc=loc)
    return _clamp(y, scalar_like(0, x, loc), scalar_like(1, x, loc))


@reg("aten::hardswish.default")
def aten_hardswish_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """hardswish(Tensor self) -> Tensor: x * relu6(x + 3) / 6"""
    x = _act(values_map, node, loc)
    r6 = _clamp(coreai.broadcasting_add(x, scalar_like(3, x, loc), loc=loc),
                scalar_like(0, x, loc), scalar_like(6, x, loc))
    return coreai.broadcasting_divide(coreai.broadcasting_mul(x, r6, loc=loc),
                                      scalar_like(6, x, loc), loc=loc)


@reg("aten::threshold.default")
def aten_threshold_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """threshold(Tensor self, Scalar threshold, Scalar value) -> Tensor"""
    x = _act(values_map, node, loc)
    # torch: x <= threshold ? value : x, so NaN passes through
    replace = coreai.broadcasting_less_equal(x, scalar_like(node.args[1], x, loc), loc=loc)
    return coreai.broadcasting_where(replace, scalar_like(node.args[2], x, loc), x, loc=loc)

