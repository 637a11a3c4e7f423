"""Special functions (two ops named by a function attribute) and the elementwise numeric long tail.

The ~40 special functions (error functions, Bessel functions, gamma-related functions,
orthogonal polynomials) are two ops, ``special(x, fn=...)`` and ``special_binary(lhs, rhs,
fn=...)``, rather than one op each: they share one type rule and one kernel, and a backend
dispatches on ``fn``. ``SPECIAL_UNARY`` and ``SPECIAL_BINARY`` below document each name. They
are computed in float64 (scipy.special) and rounded once to the operand dtype.
"""

from __future__ import annotations

from typing import Literal, get_args

from coreai_core._dtypes import DType
from coreai_core._ir import TensorType, Value
from coreai_core._opdef import Builder, builder_names, defop
from coreai_core._shapes import broadcast_shapes, fail, same_dtype
from coreai_core.dialects._elementwise import ANY, FLOAT, INTEGER, binary_op

# fn name -> definition; every function maps float to float of the same dtype.
SPECIAL_UNARY: dict[str, str] = {
    "erfc": "complementary error function 1 - erf(x)",
    "erfcx": "scaled complementary error function exp(x**2) * erfc(x)",
    "i0": "modified Bessel function of the first kind, order 0",
    "i0e": "exponentially scaled i0: exp(-abs(x)) * i0(x)",
    "i1": "modified Bessel function of the first kind, order 1",
    "i1e": "exponentially scaled i1: exp(-abs(x)) * i1(x)",
    "bessel_j0": "Bessel function of the first kind, order 0",
    "bessel_j1": "Bessel function of the first kind, order 1",
    "bessel_y0": "Bessel function of the second kind, order 0 (NaN for x < 0, -inf at 0)",
    "bessel_y1": "Bessel function of the second kind, order 1 (NaN for x < 0, -inf at 0)",
    "modified_bessel_k0": "modified Bessel function of the second kind, order 0 (NaN for x < 0)",
    "modified_bessel_k1": "modified Bessel function of the second kind, order 1 (NaN for x < 0)",
    "scaled_modified_bessel_k0": "exp(x) * modified_bessel_k0(x)",
    "scaled_modified_bessel_k1": "exp(x) * modified_bessel_k1(x)",
    "spherical_bessel_j0": "spherical Bessel function of the first kind, order 0: sin(x) / x",
    "airy_ai": "Airy function Ai",
    "ndtri": "inverse of the standard normal CDF (-inf at 0, +inf at 1, NaN outside [0, 1])",
    "log_ndtr": "log of the standard normal CDF, accurate in the lower tail",
}

# fn name -> definition of fn(lhs, rhs). The polynomials take (x, n): n is truncated toward
# zero; a negative n gives 0 (like torch); P_0 = 1 for every x (NaN included); at x = +-inf
# they give the polynomial's limit.
SPECIAL_BINARY: dict[str, str] = {
    "polygamma": "polygamma(n, x), the n-th derivative of digamma; lhs is n (an integer >= 0); "
                 "0 at x = +inf, NaN at x = -inf for n >= 1",
    "igamma": "regularized lower incomplete gamma P(a, x), lhs is a; NaN if either is NaN",
    "igammac": "regularized upper incomplete gamma Q(a, x) = 1 - P(a, x), lhs is a; NaN if "
               "either is NaN",
    "zeta": "Hurwitz zeta function zeta(x, q) = sum_k (k + q)**-x, lhs is x; 0 at q = +inf",
    "chebyshev_polynomial_t": "Chebyshev polynomial of the first kind T_n(x)",
    "chebyshev_polynomial_u": "Chebyshev polynomial of the second kind U_n(x)",
    "chebyshev_polynomial_v": "Chebyshev polynomial of the third kind V_n(x)",
    "chebyshev_polynomial_w": "Chebyshev polynomial of the fourth kind W_n(x)",
    "shifted_chebyshev_polynomial_t": "T_n(2x - 1)",
    "shifted_chebyshev_polynomial_u": "U_n(2x - 1)",
    "shifted_chebyshev_polynomial_v": "V_n(2x - 1)",
    "shifted_chebyshev_polynomial_w": "W_n(2x - 1)",
    "hermite_polynomial_h": "physicists' Hermite polynomial H_n(x)",
    "hermite_polynomial_he": "probabilists' Hermite polynomial He_n(x)",
    "laguerre_polynomial_l": "Laguerre polynomial L_n(x)",
    "legendre_polynomial_p": "Legendre polynomial P_n(x)",
}

DOC_TABLES = {  # rendered into docs/dialect.md
    "`fn` of `coreai.special`:": SPECIAL_UNARY,
    "`fn` of `coreai.special_binary` (for the polynomials, `lhs` is x and `rhs` is n, "
    "truncated toward zero; n < 0 gives 0 and x = +-inf the polynomial's limit):":
        SPECIAL_BINARY,
}

UnaryFn = Literal[
    "erfc", "erfcx", "i0", "i0e", "i1", "i1e", "bessel_j0", "bessel_j1", "bessel_y0",
    "bessel_y1", "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0",
    "scaled_modified_bessel_k1", "spherical_bessel_j0", "airy_ai", "ndtri", "log_ndtr"]
BinaryFn = Literal[
    "polygamma", "igamma", "igammac", "zeta", "chebyshev_polynomial_t",
    "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
    "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
    "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
    "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"]
# the Literals above spell the tables' keys out for type checkers; they must agree
assert set(get_args(UnaryFn)) == set(SPECIAL_UNARY), "UnaryFn differs from SPECIAL_UNARY"
assert set(get_args(BinaryFn)) == set(SPECIAL_BINARY), "BinaryFn differs from SPECIAL_BINARY"


def _floats(**operands: Value) -> None:
    for name, v in operands.items():
        if not v.type.element_type.is_float:
            fail(f"operand {name!r} must be a float tensor, got {v.type}")


def _broadcast(lhs: Value, rhs: Value) -> TensorType:
    return TensorType(broadcast_shapes(lhs.type.shape, rhs.type.shape), same_dtype(lhs, rhs))


# -- special functions --------------------------------------------------------------------------

@defop(traits=("elementwise", "unary"))
def special(x: Value, fn: UnaryFn) -> TensorType:
    """Elementwise special function ``fn`` of a float tensor (``fn`` values: table below).

    Computed in float64 with scipy.special and rounded once to the dtype.
    """
    _floats(x=x)
    return x.type


@defop(traits=("elementwise", "binary"))
def special_binary(lhs: Value, rhs: Value, fn: BinaryFn) -> TensorType:
    """Elementwise two-argument special function ``fn`` (values: table below), broadcast.

    Both operands are float tensors of one dtype; computed in float64 and rounded once.
    """
    _floats(lhs=lhs, rhs=rhs)
    return _broadcast(lhs, rhs)


# -- the elementwise numeric long tail ------------------------------------------------------------

def _binary(name: str, doc: str, accepts: str, commutative: bool = False) -> Builder[Value]:
    return binary_op(name, doc, accepts, traits=("commutative",) if commutative else (),
                     module=__name__)


broadcasting_fmax = _binary(
    "broadcasting_fmax",
    "Elementwise max that ignores NaN (NaN only where both are NaN), like torch.fmax.", ANY,
    commutative=True)
broadcasting_fmin = _binary(
    "broadcasting_fmin",
    "Elementwise min that ignores NaN (NaN only where both are NaN), like torch.fmin.", ANY,
    commutative=True)
broadcasting_copysign = _binary(
    "broadcasting_copysign",
    "``|lhs|`` with the sign bit of rhs (-0.0 and -NaN count as negative).",
    FLOAT)
broadcasting_hypot = _binary(
    "broadcasting_hypot", "sqrt(lhs**2 + rhs**2) without intermediate overflow; inf if either "
    "is +-inf.", FLOAT, commutative=True)
broadcasting_nextafter = _binary(
    "broadcasting_nextafter",
    "The next representable value after lhs in the direction of rhs (in lhs's dtype).", FLOAT)
broadcasting_gcd = _binary(
    "broadcasting_gcd",
    "Greatest common divisor by torch's Euclid on ``|lhs|``, ``|rhs|`` (gcd(0, 0) = 0)."
    " The minimum integer's absolute value wraps to itself, so results involving it can "
    "be negative, exactly as in torch.", INTEGER, commutative=True)
broadcasting_lcm = _binary(
    "broadcasting_lcm",
    "Least common multiple, ``|lhs / gcd * rhs|`` in C integer arithmetic (0 if either is 0).",
    INTEGER, commutative=True)


@defop(traits=("multi_result", "elementwise"))
def frexp(x: Value) -> tuple[TensorType, TensorType]:
    """x = mantissa * 2**exponent with ``0.5 <= |mantissa| < 1``; exponent is int32.

    Zero, +-inf and NaN give themselves as mantissa and exponent 0.
    """
    _floats(x=x)
    return x.type, x.type.with_dtype(DType.int32)


@defop(traits=("elementwise", "unary"))
def signbit(x: Value) -> TensorType:
    """True where the sign bit is set (-0.0 and negative NaN included)."""
    _floats(x=x)
    return x.type.with_dtype(DType.bool)


# the builders of the ops defined above (see builder_names)
__all__ = [*builder_names(__name__)]
