"""Built-in lowerings: special functions, orthogonal polynomials and the elementwise long tail.

Special functions lower onto ``coreai.special`` / ``coreai.special_binary`` named by ``fn``
(see ``coreai_core.dialects._special``). Integer inputs are promoted to torch's result dtype
(the default float type) first. ``sinc``, ``special_entr`` and ``special_ndtr`` reach the
converter already decomposed by torch into ops lowered elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable

import torch.fx

from coreai_core import DType, Location, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._common import ValuesMap, lower_binary, operand_as, scalar_like
from coreai_torch.utils import cast_to, get_operand, result_dtype

LOWERINGS = LoweringSet("special")
reg = LOWERINGS.register_torch_lowering

Lowering = Callable[[ValuesMap, torch.fx.Node, Location], Value]

# -- special functions of one argument -------------------------------------------------------------

# aten op -> coreai.special fn
_UNARY = {
    "erfc": "erfc", "special_erfcx": "erfcx",
    "i0": "i0", "special_i0e": "i0e", "special_i1": "i1", "special_i1e": "i1e",
    "special_modified_bessel_i0": "i0", "special_modified_bessel_i1": "i1",
    "special_bessel_j0": "bessel_j0", "special_bessel_j1": "bessel_j1",
    "special_bessel_y0": "bessel_y0", "special_bessel_y1": "bessel_y1",
    "special_modified_bessel_k0": "modified_bessel_k0",
    "special_modified_bessel_k1": "modified_bessel_k1",
    "special_scaled_modified_bessel_k0": "scaled_modified_bessel_k0",
    "special_scaled_modified_bessel_k1": "scaled_modified_bessel_k1",
    "special_spherical_bessel_j0": "spherical_bessel_j0", "special_airy_ai": "airy_ai",
    "special_ndtri": "ndtri", "special_log_ndtr": "log_ndtr",
}


def _special_unary(fn: str) -> Lowering:
    def lowering(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
        x = operand_as(values_map, node, 0, result_dtype(node), loc)
        return coreai.special(x, fn=fn, loc=loc)

    lowering.__doc__ = f"coreai.special(x, fn={fn!r}) in the result dtype."
    return lowering


for _aten, _fn in _UNARY.items():
    reg(f"aten::{_aten}.default")(_special_unary(_fn))


# -- special functions of two arguments ------------------------------------------------------------

def _special_binary(fn: str) -> Lowering:
    """Both arguments (tensors or Python numbers, either side) in the result dtype."""

    def lowering(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
        dtype = result_dtype(node)
        lhs = operand_as(values_map, node, 0, dtype, loc)
        rhs = operand_as(values_map, node, 1, dtype, loc)
        return coreai.special_binary(lhs, rhs, fn=fn, loc=loc)

    lowering.__doc__ = f"coreai.special_binary(lhs, rhs, fn={fn!r}) in the result dtype."
    return lowering


reg("aten::igamma.default")(_special_binary("igamma"))
reg("aten::igammac.default")(_special_binary("igammac"))
reg("aten::special_zeta.default", "aten::special_zeta.self_scalar",
    "aten::special_zeta.other_scalar")(_special_binary("zeta"))

_POLYNOMIALS = (
    "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
    "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
    "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
    "laguerre_polynomial_l", "legendre_polynomial_p",
)
for _name in _POLYNOMIALS:
    # (Tensor x, Tensor n); x_scalar / n_scalar take a Python number for x or n
    reg(f"aten::special_{_name}.default", f"aten::special_{_name}.x_scalar",
        f"aten::special_{_name}.n_scalar")(_special_binary(_name))


@reg("aten::polygamma.default")
def aten_polygamma_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """polygamma(int n, Tensor self) -> Tensor"""
    n = node.args[0]
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"polygamma needs a constant integer order n >= 0, got {n!r}")
    dtype = result_dtype(node)
    x = operand_as(values_map, node, 1, dtype, loc)
    return coreai.special_binary(coreai.constant(n, dtype=dtype, loc=loc), x, fn="polygamma",
                                 loc=loc)


def _xlog(log_fn: Callable[..., Value]) -> Lowering:
    """x * log_fn(y) with torch's conventions: NaN where y is NaN, else 0 where x == 0."""

    def lowering(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
        dtype = result_dtype(node)
        x = operand_as(values_map, node, 0, dtype, loc)
        y = operand_as(values_map, node, 1, dtype, loc)
        prod = coreai.broadcasting_mul(x, log_fn(y, loc=loc), loc=loc)
        zero = scalar_like(0, x, loc)
        out = coreai.broadcasting_where(coreai.broadcasting_equal(x, zero, loc=loc), zero, prod,
                                        loc=loc)
        return coreai.broadcasting_where(coreai.isnan(y, loc=loc), y, out, loc=loc)

    lowering.__doc__ = f"x * {log_fn.__name__}(y), 0 where x == 0, NaN where y is NaN."
    return lowering


# Lowered natively (not through torch's decomposition) because the decompositions of the
# Python-number overloads call prims::scalar_tensor.
reg("aten::special_xlog1py.default", "aten::special_xlog1py.self_scalar",
    "aten::special_xlog1py.other_scalar")(_xlog(coreai.log1p))
reg("aten::xlogy.Tensor", "aten::xlogy.Scalar_Self", "aten::xlogy.Scalar_Other")(
    _xlog(coreai.log))


# -- the elementwise numeric long tail -----------------------------------------------------------

for _name, _builder in [
    ("fmax", coreai.broadcasting_fmax), ("fmin", coreai.broadcasting_fmin),
    ("hypot", coreai.broadcasting_hypot), ("nextafter", coreai.broadcasting_nextafter),
    ("gcd", coreai.broadcasting_gcd), ("lcm", coreai.broadcasting_lcm),
]:
    reg(f"aten::{_name}.default")(lower_binary(_builder))
reg("aten::copysign.Tensor", "aten::copysign.Scalar")(lower_binary(coreai.broadcasting_copysign))

# Overloads of the bitwise ops not registered by the elementwise family: a Python number on
# either side (cast to the tensor's dtype, wrapping like torch) and the operator forms.
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
    reg(f"aten::{_name}.Tensor_Scalar", f"aten::{_name}.Scalar_Tensor",
        f"aten::{_op}.Tensor", f"aten::{_op}.Scalar")(lower_binary(_builder))


@reg("aten::frexp.Tensor")
def aten_frexp_tensor(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                      ) -> list[Value]:
    """frexp.Tensor(Tensor self) -> (Tensor mantissa, Tensor exponent)"""
    mantissa, exponent = coreai.frexp(get_operand(values_map, node, 0, loc), loc=loc)
    return [mantissa, exponent]


@reg("aten::ldexp.Tensor")
def aten_ldexp_tensor(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """ldexp.Tensor(Tensor self, Tensor other) -> Tensor: self * 2**other, as torch computes it"""
    dtype = result_dtype(node)
    x = operand_as(values_map, node, 0, dtype, loc)
    e = operand_as(values_map, node, 1, dtype, loc)
    return coreai.broadcasting_mul(
        x, coreai.broadcasting_pow(scalar_like(2.0, e, loc), e, loc=loc), loc=loc)


@reg("aten::signbit.default")
def aten_signbit_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """signbit(Tensor self) -> Tensor"""
    x = get_operand(values_map, node, 0, loc)
    dtype = x.type.element_type
    if dtype.is_float:
        return coreai.signbit(x, loc=loc)
    if dtype is DType.bool:
        x = cast_to(x, DType.uint8, loc)
    return coreai.broadcasting_less(x, scalar_like(0, x, loc), loc=loc)
