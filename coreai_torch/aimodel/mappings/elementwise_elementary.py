"""Op mappings (elementwise family): log1p, expm1, log2, log10, exp2 and atan2 expanded
from Core AI's ``log``, ``exp``, ``atan`` and ``sqrt`` with a stated error bound (and, in
``special.py``, hypot, signbit and copysign).

The bounds are in ulps of the exact result (float32), relative to the error of Apple's own
functions, measured on its interpreter (docs/coreai-interop.md, "Elementary functions"):
``L`` for ``log`` (0.82 ulp), ``E`` for ``exp`` (0.51 ulp), ``A`` for ``atan`` (0.84 ulp);
``sqrt``, ``+ - * /`` round correctly. Writing a relative error ``r`` before the last rounding
as ``r / u`` ulps (``u = 2**-24``, the unit roundoff) and adding 0.5 for the last rounding:

- ``log1p``: ``u = 1 + x``; ``x`` where ``u == 1``, else ``log(u) * (x / (u - 1))``
  (Goldberg). ``f(u) = log(u) / (u - 1)`` has ``|u f'(u) / f(u)| < 1``, so the rounding of
  ``1 + x`` moves the result by < 1 ulp; ``u - 1`` is exact for ``u <= 2**24`` (else 1 ulp);
  ``log`` adds ``2L``, the division 1: at most ``3.5 + 2L`` ulps (5.14).
- ``expm1``: ``u = exp(x)``; ``x`` where ``u == 1``, -1 where ``u - 1 == -1``, else
  ``(u - 1) * (x / log(u))`` (Kahan). ``g(u) = (u - 1) / log(u)`` has ``0 < u g' / g < 1``, so
  ``exp``'s error moves it by ``2E``; ``u - 1`` (exact for 0.5 <= u <= 2, else 1), ``log``
  (``2L``), the division (1) and the product (0.5): at most ``2.5 + 2E + 2L`` ulps (5.16).
- ``log2``, ``log10``: ``log(x) * c`` with ``c`` the rounded ``1/log(2)``, ``1/log(10)``:
  ``2L`` + 1 (``c``) + 0.5: at most ``1.5 + 2L`` ulps (3.14).
- ``exp2``: ``x = n + f`` with ``n = round(x)`` (``f = x - n`` exact, ``|f| <= 1/2``),
  ``exp(f * c) * 2**a * 2**b`` with ``c`` the rounded ``log(2)`` and ``a + b = n`` (each
  ``2**k`` exact, from a table; the scaling is exact unless the result is subnormal).
  ``f * c`` has an absolute error <= ``log(2) / 2 * 2u``, which ``exp`` turns into a
  relative one: at most ``E + 0.7`` ulps (1.21), plus 0.5 for a subnormal result.
- ``atan2``: ``atan(min(|x|, |y|) / max(|x|, |y|))`` (1 + ``A``), ``pi/2 - that`` where
  ``|y| > |x|`` (the difference is >= pi/4, the term <= pi/4: 1 for the rounded ``pi/2``
  and 0.5), ``pi - that`` where ``x`` is negative (1 + 0.5 again), the sign of ``y``: at most
  ``A + 4`` ulps (4.84). Signed zeros (seen as ``1 / x < 0``) and infinities follow C99.
- ``hypot``: ``b * sqrt(1 + (s / b)**2)`` with ``b = max(|x|, |y|)``, ``s = min``: the
  quotient and square (3 relative to ``r**2 <= (1 + r**2)/2``: 1.5) and the sum (1) give
  ``sqrt`` half of 2.5, ``sqrt`` rounds (1), the product (0.5): at most 2.75 ulps. No
  intermediate overflows or underflows; an infinite operand gives inf (even with a NaN).

float16 (and any narrower float) is computed in float32 and rounded once: a float32 error of at most
5.2 float32 ulps is at most 5.2 * 2**-13 float16 ulps, so the float16 bound is 0.5 + 8 * 2**-13 ulp
(0.501): correct rounding except within a hair of a tie. ``copysign`` and ``signbit`` are exact
except on a NaN sign, which no Core AI op reads: a NaN ``y`` (``x``) counts as positive. IEEE 754
leaves the sign of a NaN produced by arithmetic unspecified (x86 sets it, ARM does not), so only a
NaN with a deliberately set sign bit differs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from coreai_torch.aimodel._apple import ca, constant
from coreai_torch.aimodel._emit import (
    F32,
    IN_FLOAT32_NOTE,
    equal,
    f32_constant,
    in_float32,
    is_nan,
    is_negative,
    take,
    where,
)
from coreai_torch.aimodel.mappings._registry import mapping_decorator, mapping_registry

__all__ = ["APPLE_ERRORS", "MAPPINGS"]

MAPPINGS = mapping_registry(__name__)
mapping = mapping_decorator(MAPPINGS)

_INV_LN2, _INV_LN10 = 1 / np.log(2.0), 1 / np.log(10.0)


# The largest errors (ulps, float32) of Apple's interpreter measured by
# tools/measure_aimodel_elementary.py: the L, E, A of the bounds above.
APPLE_ERRORS = {"log": 0.82, "exp": 0.51, "atan": 0.84}


def log1p(x: Any) -> Any:
    """log(1 + x) of a float32 Apple value (Goldberg's, see the module doc)."""
    # Core AI's compiler rewrites (x + 1) - 1 to x, which would undo the trick; it does not
    # see through a maximum (u < -1 only where log(u) is NaN anyway)
    u = ca.broadcasting_maximum(ca.broadcasting_add(x, f32_constant(1)), f32_constant(-1))
    q = ca.broadcasting_divide(x, ca.broadcasting_sub(u, f32_constant(1)))
    out = where(equal(u, f32_constant(1)), x, ca.broadcasting_mul(ca.log(u), q))
    return where(equal(x, f32_constant(np.inf)), x, out)  # inf / inf would be NaN


def expm1(x: Any) -> Any:
    """exp(x) - 1 of a float32 Apple value (Kahan's, see the module doc)."""
    u = ca.exp(x)
    um1 = ca.broadcasting_sub(u, f32_constant(1))
    out = ca.broadcasting_mul(um1, ca.broadcasting_divide(x, ca.log(u)))  # no overflow
    out = where(equal(um1, f32_constant(-1)), f32_constant(-1), out)
    out = where(equal(u, f32_constant(np.inf)), u, out)
    return where(equal(u, f32_constant(1)), x, out)


def _log_times(c: float) -> Callable[[Any], Any]:
    def fn(x: Any) -> Any:
        return ca.broadcasting_mul(ca.log(x), f32_constant(c))
    fn.__name__ = f"log_times_{c:.6f}"
    return fn


_EXP2_LOW, _EXP2_HIGH = -160, 130  # beyond them exp2 of float32 is 0 or inf
_POWERS = np.exp2(np.arange(_EXP2_LOW // 2, _EXP2_HIGH // 2 + 1, dtype=np.float64))


def exp2(x: Any) -> Any:
    """2**x of a float32 Apple value (see the module doc)."""
    nan = is_nan(x)
    low, high = f32_constant(_EXP2_LOW), f32_constant(_EXP2_HIGH)
    xc = ca.broadcasting_minimum(ca.broadcasting_maximum(where(nan, f32_constant(0), x), low),
                                 high)
    n = ca.round_(xc)
    f = ca.broadcasting_sub(xc, n)  # exact, |f| <= 1/2
    ni = ca.cast(n, np.int32)
    b = ca.broadcasting_floor_divide(ni, constant(np.int32(2)))
    a = ca.broadcasting_sub(ni, b)
    table = constant(_POWERS.astype(F32))
    base = constant(np.int32(-(_EXP2_LOW // 2)))
    y = ca.exp(ca.broadcasting_mul(f, f32_constant(np.log(2.0))))
    y = ca.broadcasting_mul(y, take(table, ca.broadcasting_add(a, base), 0))
    y = ca.broadcasting_mul(y, take(table, ca.broadcasting_add(b, base), 0))
    return where(nan, x, y)


def atan2(y: Any, x: Any) -> Any:
    """atan2(y, x) of float32 Apple values, C99's special values (see the module doc)."""
    zero = f32_constant(0)
    ay, ax = ca.abs_(y), ca.abs_(x)
    small, big = ca.broadcasting_minimum(ay, ax), ca.broadcasting_maximum(ay, ax)
    r = ca.broadcasting_divide(small, big)
    # both infinite: pi/4 (or 3pi/4)
    r = where(equal(small, f32_constant(np.inf)), f32_constant(1), r)
    r = where(equal(big, zero), zero, r)  # both zero: 0 (or pi)
    a = ca.atan(r)
    a = where(ca.broadcasting_greater(ay, ax), ca.broadcasting_sub(f32_constant(np.pi / 2), a), a)
    a = where(is_negative(x, zero, f32_constant(1)), ca.broadcasting_sub(f32_constant(np.pi), a), a)
    out = where(is_negative(y, zero, f32_constant(1)), ca.broadcasting_mul(a, f32_constant(-1)), a)
    return where(ca.broadcasting_or(is_nan(x), is_nan(y)), ca.broadcasting_add(x, y), out)


mapping("coreai.log1p",
        f"u = 1 + x; x where u == 1, else log(u) * (x / (u - 1)) (<= 3.5 + 2L "
        f"ulps; {IN_FLOAT32_NOTE})")(in_float32(log1p))
mapping("coreai.expm1",
        f"u = exp(x); x where u == 1, -1 where u - 1 == -1, else (u - 1) * (x / "
        f"log(u)) (<= 2.5 + 2E + 2L ulps; {IN_FLOAT32_NOTE})")(in_float32(expm1))
mapping("coreai.log2",
        f"log(x) * (1 / log 2) (<= 1.5 + 2L ulps; "
        f"{IN_FLOAT32_NOTE})")(in_float32(_log_times(_INV_LN2)))
mapping("coreai.log10",
        f"log(x) * (1 / log 10) (<= 1.5 + 2L ulps; "
        f"{IN_FLOAT32_NOTE})")(in_float32(_log_times(_INV_LN10)))
mapping("coreai.exp2",
        f"exp((x - n) * log 2) * 2**a * 2**b, n = round(x) = a + b, 2**k from a "
        f"table (<= E + 0.7 ulps, + 0.5 subnormal; {IN_FLOAT32_NOTE})")(in_float32(exp2))
mapping("coreai.broadcasting_atan2",
        f"atan(min(|x|,|y|) / max(|x|,|y|)) with quadrant and signed-zero fixes "
        f"(<= A + 4 ulps; {IN_FLOAT32_NOTE})")(in_float32(atan2))
