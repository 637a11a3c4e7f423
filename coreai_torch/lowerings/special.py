"""Built-in lowerings (special family): special functions, orthogonal polynomials and the
dialect's numeric long tail (fmax, fmin, copysign, hypot, nextafter, gcd, lcm, frexp, signbit).

Special functions lower onto ``coreai.special`` / ``coreai.special_binary`` named by ``fn``
(see ``coreai_core.dialects._special``), with the operands in torch's result dtype (integer
inputs compute in the default float type). ``sinc``, ``special_entr`` and ``special_ndtr``
reach the converter already decomposed by torch into ops lowered elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable

from coreai_core import DType, Value
from coreai_core.dialects import SpecialBinaryFn, SpecialFn, coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._common import in_opmath, lower_binary, opmath
from coreai_torch.utils import cast_to, result_dtype, scalar_like

LOWERINGS = LoweringSet("special")
reg = LOWERINGS.register_torch_lowering

Number = bool | int | float

# -- special functions of one argument -------------------------------------------------------------

# aten op -> coreai.special fn
_UNARY: dict[str, SpecialFn] = {
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


def _special_unary(fn: SpecialFn) -> Callable[..., Value]:
    def lowering(**operand: Value) -> Value:  # the schema names it self or x
        (x,) = operand.values()
        return coreai.special(cast_to(x, result_dtype()), fn=fn)

    lowering.__doc__ = f"coreai.special(x, fn={fn!r}) in the result dtype."
    return lowering


for _aten, _fn in _UNARY.items():
    reg(f"aten::{_aten}.default")(_special_unary(_fn))


# -- special functions of two arguments ------------------------------------------------------------

def _special_binary(fn: SpecialBinaryFn) -> Callable[..., Value]:
    """Both schema arguments (tensors or Python numbers, either side) in the result dtype."""

    def lowering(**operands: Value | Number) -> Value:
        lhs, rhs = (cast_to(v, result_dtype()) for v in operands.values())
        return coreai.special_binary(lhs, rhs, fn=fn)

    lowering.__doc__ = f"coreai.special_binary(lhs, rhs, fn={fn!r}) in the result dtype."
    return lowering


reg("aten::igamma.default")(_special_binary("igamma"))
reg("aten::igammac.default")(_special_binary("igammac"))
_zeta = _special_binary("zeta")
for _overload in ("default", "self_scalar", "other_scalar"):
    reg(f"aten::special_zeta.{_overload}")(_zeta)

_POLYNOMIALS: tuple[SpecialBinaryFn, ...] = (
    "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
    "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
    "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
    "laguerre_polynomial_l", "legendre_polynomial_p",
)
for _poly in _POLYNOMIALS:
    # (Tensor x, Tensor n); x_scalar / n_scalar take a Python number for x or n
    _poly_fn = _special_binary(_poly)
    for _overload in ("default", "x_scalar", "n_scalar"):
        reg(f"aten::special_{_poly}.{_overload}")(_poly_fn)


@reg("aten::polygamma.default")
def aten_polygamma_default(n: int, self: Value) -> Value:
    """polygamma(int n, Tensor self) -> Tensor"""
    if n < 0:
        raise ValueError(f"polygamma needs an order n >= 0, got {n}")
    dtype = result_dtype()
    return coreai.special_binary(cast_to(n, dtype), cast_to(self, dtype), fn="polygamma")


def _xlog(log_fn: Callable[[Value], Value]) -> Callable[..., Value]:
    """self * log_fn(other) with torch's conventions: NaN where other is NaN, else 0 where
    self == 0 (so xlogy(0, 0) = 0 and xlogy(0, inf) = 0)."""

    def lowering(**operands: Value | Number) -> Value:
        x, y = (cast_to(v, opmath(result_dtype())) for v in operands.values())
        zero = scalar_like(0, x)
        prod = coreai.broadcasting_mul(x, log_fn(y))
        out = coreai.broadcasting_where(coreai.broadcasting_equal(x, zero), zero, prod)
        return coreai.broadcasting_where(coreai.isnan(y), y, out)

    lowering.__doc__ = f"self * {log_fn.__name__}(other), 0 where self == 0, NaN where other is."
    # torch computes the product in float32 for half types and rounds once
    return in_opmath(lowering)


# Lowered natively rather than through torch's decomposition, whose Python-number overloads
# call prims::scalar_tensor.
_xlog1py, _xlogy = _xlog(coreai.log1p), _xlog(coreai.log)
for _overload in ("default", "self_scalar", "other_scalar"):
    reg(f"aten::special_xlog1py.{_overload}")(_xlog1py)
for _overload in ("Tensor", "Scalar_Self", "Scalar_Other"):
    reg(f"aten::xlogy.{_overload}")(_xlogy)


# -- the numeric long tail (the special family's ops in coreai_core.dialects._special) ----------

for _name, _builder in [
    ("fmax", coreai.broadcasting_fmax), ("fmin", coreai.broadcasting_fmin),
    ("hypot", coreai.broadcasting_hypot), ("nextafter", coreai.broadcasting_nextafter),
    ("gcd", coreai.broadcasting_gcd), ("lcm", coreai.broadcasting_lcm),
]:
    reg(f"aten::{_name}.default")(lower_binary(_builder))
_copysign = lower_binary(coreai.broadcasting_copysign)
reg("aten::copysign.Tensor")(_copysign)
reg("aten::copysign.Scalar")(_copysign)


@reg("aten::frexp.Tensor")
def aten_frexp_tensor(self: Value) -> tuple[Value, Value]:
    """frexp.Tensor(Tensor self) -> (Tensor mantissa, Tensor exponent)"""
    mantissa, exponent = coreai.frexp(self)
    return mantissa, exponent


@reg("aten::signbit.default")
def aten_signbit_default(self: Value) -> Value:
    """signbit(Tensor self) -> Tensor"""
    dtype = self.type.element_type
    if dtype.is_float:
        return coreai.signbit(self)
    x = cast_to(self, DType.uint8) if dtype is DType.bool else self
    return coreai.broadcasting_less(x, scalar_like(0, x))
