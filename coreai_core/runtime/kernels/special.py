"""Numpy kernels of the special functions and the elementwise numeric long tail.

Special functions are computed in float64 with ``scipy.special`` and rounded once to the
operand dtype, so every dtype gets the correctly rounded value (up to scipy's float64 error).
Where scipy and the mathematical limit disagree (polynomials at +-inf) the kernel returns the
limit; see each function's docstring.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.special as sc

from coreai_core.runtime.kernels._registry import KernelSet

KERNELS = KernelSet("special")
kernel = KERNELS.register

F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)


def _in_float64(fn: Callable[..., np.ndarray], *args: np.ndarray) -> np.ndarray:
    """fn of the float64-widened operands, rounded once to the first operand's dtype."""
    dtype = args[0].dtype
    with np.errstate(all="ignore"):
        out = fn(*(np.asarray(a, F64) for a in args))
    return np.asarray(out).astype(dtype)


# -- special functions ----------------------------------------------------------------------------

_UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "erfc": sc.erfc,
    "erfcx": sc.erfcx,
    "i0": sc.i0,
    "i0e": sc.i0e,
    "i1": sc.i1,
    "i1e": sc.i1e,
    "bessel_j0": sc.j0,
    "bessel_j1": sc.j1,
    "bessel_y0": sc.y0,
    "bessel_y1": sc.y1,
    "modified_bessel_k0": sc.k0,
    "modified_bessel_k1": sc.k1,
    "scaled_modified_bessel_k0": sc.k0e,
    "scaled_modified_bessel_k1": sc.k1e,
    "spherical_bessel_j0": lambda x: sc.spherical_jn(0, x),
    "airy_ai": lambda x: sc.airy(x)[0],
    "ndtri": sc.ndtri,
    "log_ndtr": sc.log_ndtr,
}


@kernel("coreai.special")
def special(x: np.ndarray, *, fn: str) -> np.ndarray:
    """scipy.special's ``fn`` in float64, rounded to x's dtype."""
    return _in_float64(_UNARY[fn], x)


def _polygamma(n: np.ndarray, x: np.ndarray) -> np.ndarray:
    """polygamma(n, x); NaN at x = -inf for n >= 1, where the poles accumulate (no limit)."""
    out = sc.polygamma(n, x)
    return np.where((x == -np.inf) & (n >= 1), np.nan, out)


def _chebyshev_u(k: np.ndarray, x: np.ndarray) -> np.ndarray:
    """U_k(x) with U_{-1} = 0 (the recurrence's seed, used for V and W)."""
    return np.where(k >= 0, sc.eval_chebyu(np.maximum(k, 0), x), 0.0)


# fn -> (evaluate P_k(x) for integer k >= 0 and finite x, sign of the leading coefficient
# as a function of k); the polynomial's argument is 2x - 1 for the shifted families.
_POLYNOMIALS: dict[str, tuple[Callable[[np.ndarray, np.ndarray], np.ndarray],
                              Callable[[np.ndarray], np.ndarray]]] = {
    "chebyshev_polynomial_t": (sc.eval_chebyt, np.ones_like),
    "chebyshev_polynomial_u": (sc.eval_chebyu, np.ones_like),
    "chebyshev_polynomial_v": (lambda k, x: _chebyshev_u(k, x) - _chebyshev_u(k - 1, x),
                               np.ones_like),
    "chebyshev_polynomial_w": (lambda k, x: _chebyshev_u(k, x) + _chebyshev_u(k - 1, x),
                               np.ones_like),
    "hermite_polynomial_h": (sc.eval_hermite, np.ones_like),
    "hermite_polynomial_he": (sc.eval_hermitenorm, np.ones_like),
    "laguerre_polynomial_l": (sc.eval_laguerre, lambda k: np.where(k % 2 == 0, 1.0, -1.0)),
    "legendre_polynomial_p": (sc.eval_legendre, np.ones_like),
}


def _polynomial(name: str, x: np.ndarray, n: np.ndarray) -> np.ndarray:
    """P_n(x) like torch: n truncated toward zero, 0 for n < 0, P_0 = 1 for every x.

    scipy's recurrences give NaN or the wrong sign at x = +-inf (inf - inf); there the
    polynomial's limit, sign(leading coefficient) * sign(x)**n * inf, is returned instead.
    A non-finite n gives NaN.
    """
    shifted = name.startswith("shifted_")
    evaluate, lead_sign = _POLYNOMIALS[name.removeprefix("shifted_")]
    x, n = np.broadcast_arrays(x, n)
    finite_n = np.isfinite(n)
    degree = np.trunc(np.where(finite_n, n, 0.0))
    k = np.maximum(degree, 0).astype(np.int64)
    arg = 2.0 * x - 1.0 if shifted else x
    finite_x = np.isfinite(arg)
    value = evaluate(k, np.where(finite_x, arg, 0.0))
    limit = lead_sign(k) * np.where((arg < 0) & (k % 2 == 1), -1.0, 1.0) * np.inf
    value = np.where(finite_x, value, np.where(np.isnan(arg), np.nan, limit))
    value = np.where(k == 0, 1.0, value)
    value = np.where(degree < 0, 0.0, value)
    return np.where(finite_n, value, np.nan)


def _binary_fn(name: str) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    if name == "polygamma":
        return _polygamma
    if name == "igamma":
        return sc.gammainc
    if name == "igammac":
        return sc.gammaincc
    if name == "zeta":
        return sc.zeta
    return lambda x, n: _polynomial(name, x, n)


@kernel("coreai.special_binary")
def special_binary(lhs: np.ndarray, rhs: np.ndarray, *, fn: str) -> np.ndarray:
    """The two-argument special function ``fn`` in float64, rounded to the operands' dtype."""
    return _in_float64(_binary_fn(fn), lhs, rhs)


# -- the elementwise numeric long tail -----------------------------------------------------------

def _half_via_float32(fn: Callable[[np.ndarray, np.ndarray], np.ndarray],
                      ) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """fn on float16/bfloat16 widened to float32 (exact for these ops), rounded back."""
    def k(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        dt = lhs.dtype
        if dt.kind != "f" or dt.itemsize >= 4:
            return fn(lhs, rhs)
        return fn(lhs.astype(F32), rhs.astype(F32)).astype(dt)

    return k


@kernel("coreai.broadcasting_fmax")
def broadcasting_fmax(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Max ignoring NaN (np.fmax)."""
    return _half_via_float32(np.fmax)(lhs, rhs)


@kernel("coreai.broadcasting_fmin")
def broadcasting_fmin(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Min ignoring NaN (np.fmin)."""
    return _half_via_float32(np.fmin)(lhs, rhs)


@kernel("coreai.broadcasting_copysign")
def broadcasting_copysign(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """|lhs| with rhs's sign bit (np.copysign)."""
    return _half_via_float32(np.copysign)(lhs, rhs)


@kernel("coreai.broadcasting_hypot")
def broadcasting_hypot(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """np.hypot in float64, rounded once (float64 operands directly)."""
    if lhs.dtype == F64:
        return np.hypot(lhs, rhs)
    return _in_float64(np.hypot, lhs, rhs)


@kernel("coreai.broadcasting_nextafter")
def broadcasting_nextafter(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """np.nextafter in the operands' own dtype (bfloat16 through ml_dtypes' ufunc)."""
    return np.nextafter(lhs, rhs)


def _gcd(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """torch's Euclid: a, b = |a|, |b|; while a: a, b = b % a, a (C remainder).

    It equals np.gcd except where |minimum integer| wraps to itself: the C remainder then
    keeps signs, so e.g. gcd(5, -128) is -1 in int8 (numpy: 1).
    """
    with np.errstate(over="ignore"):
        a, b = np.abs(lhs), np.abs(rhs)
    a, b = np.broadcast_arrays(a, b)
    a, b = a.copy(), b.copy()
    live = a != 0
    while np.any(live):  # at most ~93 rounds for 64-bit operands
        c = a[live]
        a[live] = np.fmod(b[live], c)
        b[live] = c
        live = a != 0
    return b


@kernel("coreai.broadcasting_gcd")
def broadcasting_gcd(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Greatest common divisor by torch's algorithm (see ``_gcd``)."""
    return _gcd(lhs, rhs)


@kernel("coreai.broadcasting_lcm")
def broadcasting_lcm(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """|lhs / gcd * rhs| evaluated like torch's C++: 8/16-bit types are promoted to int32
    before the product (then truncated back), 32/64-bit types wrap in their own width."""
    dtype = lhs.dtype
    wide = np.dtype(np.int32) if dtype.itemsize < 4 else dtype
    g = _gcd(lhs, rhs).astype(wide)  # in the operands' own width, as torch's calc_gcd<T>
    a, b = lhs.astype(wide), rhs.astype(wide)
    safe = np.where(g == 0, wide.type(1), g)
    with np.errstate(over="ignore"):
        out = np.abs((a // safe) * b)
    return np.where(g == 0, wide.type(0), out).astype(dtype)


@kernel("coreai.frexp")
def frexp(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.frexp; float16/bfloat16 through float32, which represents them exactly."""
    mantissa, exponent = np.frexp(x if x.dtype.itemsize >= 4 else x.astype(F32))
    return mantissa.astype(x.dtype), exponent.astype(np.int32)


@kernel("coreai.signbit")
def signbit(x: np.ndarray) -> np.ndarray:
    """The top bit of each element's bit pattern (works for every float dtype, NaN included)."""
    bits = x.view(np.dtype(f"u{x.dtype.itemsize}"))
    return (bits >> (8 * x.dtype.itemsize - 1)).astype(bool)
