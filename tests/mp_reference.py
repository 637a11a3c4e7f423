"""Correct values of the special functions, from mpmath at 40 significant digits.

torch's float64 special functions are not all accurate to float64: ``bessel_j0`` is off by up
to 4e-7 absolute on [-40, 40], ``bessel_y1`` by 8e-7, ``trigamma`` by 1e-9, and ``airy_ai`` by
1e-4 relative near x = -2.2. The runtime computes with scipy in float64 and rounds once, so
tests of these functions compare with mpmath (an independent arbitrary-precision library,
installed with torch through sympy). Where mpmath has no real value for an input (NaN,
infinities, poles, outside the real domain) ``values`` reports it and tests use torch's
float64 value there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mpmath
import numpy as np
import torch

__all__ = ["reference", "values"]

mp = mpmath  # the functions; the precision is set per call (mpmath.workdps)
f = mpmath.mpf
DIGITS = 40


def _u(n: int, x: Any) -> Any:
    return mp.chebyu(n, x) if n >= 0 else f(0)


_UNARY: dict[str, Callable[[Any], Any]] = {
    "erfc": mp.erfc,
    "erfcx": lambda x: mp.exp(x * x) * mp.erfc(x),
    "i0": lambda x: mp.besseli(0, x),
    "i0e": lambda x: mp.exp(-abs(x)) * mp.besseli(0, x),
    "i1": lambda x: mp.besseli(1, x),
    "i1e": lambda x: mp.exp(-abs(x)) * mp.besseli(1, x),
    "bessel_j0": lambda x: mp.besselj(0, x),
    "bessel_j1": lambda x: mp.besselj(1, x),
    "bessel_y0": lambda x: mp.bessely(0, x) if x > 0 else None,
    "bessel_y1": lambda x: mp.bessely(1, x) if x > 0 else None,
    "modified_bessel_k0": lambda x: mp.besselk(0, x) if x > 0 else None,
    "modified_bessel_k1": lambda x: mp.besselk(1, x) if x > 0 else None,
    "scaled_modified_bessel_k0": lambda x: mp.exp(x) * mp.besselk(0, x) if x > 0 else None,
    "scaled_modified_bessel_k1": lambda x: mp.exp(x) * mp.besselk(1, x) if x > 0 else None,
    "spherical_bessel_j0": lambda x: mp.sin(x) / x if x != 0 else f(1),
    "airy_ai": mp.airyai,
    "ndtri": lambda p: mp.sqrt(2) * mp.erfinv(2 * p - 1) if 0 < p < 1 else None,
    "log_ndtr": lambda x: mp.log(mp.ncdf(x)),
}


def _poly(p: Callable[[int, Any], Any], shifted: bool = False) -> Callable[[Any, Any], Any]:
    def value(x: Any, n: Any) -> Any:
        k = int(n)  # truncation toward zero, like torch
        if k < 0:
            return f(0)
        return p(k, 2 * x - 1 if shifted else x)

    return value


_T = mp.chebyt
_U = _u
_V = lambda k, x: _u(k, x) - _u(k - 1, x)  # noqa: E731
_W = lambda k, x: _u(k, x) + _u(k - 1, x)  # noqa: E731
_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "polygamma": lambda n, x: (mp.polygamma(int(n), x)
                               if x > 0 or x != mp.floor(x) else None),
    "igamma": lambda a, x: (mp.gammainc(a, 0, x, regularized=True)
                            if a > 0 and x >= 0 else None),
    "igammac": lambda a, x: (mp.gammainc(a, x, mp.inf, regularized=True)
                             if a > 0 and x >= 0 else None),
    "zeta": lambda s, q: mp.zeta(s, q) if s > 1 and q > 0 else None,
    "chebyshev_polynomial_t": _poly(_T), "chebyshev_polynomial_u": _poly(_U),
    "chebyshev_polynomial_v": _poly(_V), "chebyshev_polynomial_w": _poly(_W),
    "shifted_chebyshev_polynomial_t": _poly(_T, True),
    "shifted_chebyshev_polynomial_u": _poly(_U, True),
    "shifted_chebyshev_polynomial_v": _poly(_V, True),
    "shifted_chebyshev_polynomial_w": _poly(_W, True),
    "hermite_polynomial_h": _poly(mp.hermite),
    "hermite_polynomial_he": _poly(lambda k, x: mp.hermite(k, x / mp.sqrt(2)) / mp.sqrt(2) ** k),
    "laguerre_polynomial_l": _poly(lambda k, x: mp.laguerre(k, 0, x)),
    "legendre_polynomial_p": _poly(mp.legendre),
}


def values(fn: str, *args: Any) -> tuple[np.ndarray, np.ndarray]:
    """(float64 values, mask of the elements mpmath gave a real value for), broadcast."""
    table = _UNARY if len(args) == 1 else _BINARY
    arrays = np.broadcast_arrays(*(np.asarray(a, np.float64) for a in args))
    out = np.full(arrays[0].shape, np.nan)
    ok = np.zeros(arrays[0].shape, bool)
    with mpmath.workdps(DIGITS):
        _fill(table[fn], arrays, out, ok)
    return out, ok


def _fill(fn: Callable[..., Any], arrays: list[np.ndarray], out: np.ndarray,
          ok: np.ndarray) -> None:
    for index in np.ndindex(out.shape):
        xs = [a[index] for a in arrays]
        if not all(np.isfinite(xs)):
            continue
        try:
            v = fn(*(f(float(x)) for x in xs))
        except (ValueError, ZeroDivisionError):
            continue
        if v is None or isinstance(v, mpmath.mpc):
            continue
        out[index], ok[index] = float(v), True


def reference(fn: str, torch_fn: Callable[..., torch.Tensor],
              fix: Callable[..., torch.Tensor] | None = None) -> Callable[..., torch.Tensor]:
    """An op-db ``reference``: mpmath's value rounded to torch's result dtype; torch's
    float64 value (corrected by ``fix(out, *args)``) where mpmath has none."""
    def compute(*args: Any) -> torch.Tensor:
        dtype = torch_fn(*args).dtype
        wide = [a.double() if isinstance(a, torch.Tensor) else a for a in args]
        fallback = torch_fn(*wide)
        if fix is not None:
            fallback = fix(fallback, *wide)
        plain = [a.numpy() if isinstance(a, torch.Tensor) else a for a in wide]
        exact, ok = values(fn, *plain)
        out = torch.where(torch.from_numpy(ok), torch.from_numpy(exact), fallback)
        return out.to(dtype)

    return compute
