"""Exact GELU of float32, correctly rounded, with scipy's float64 normal CDF only as a fallback.

``gelu(x) = x * Phi(x)`` rounded once to float32. Computing ``Phi`` with scipy (``ndtr``) in
float64 costs ~100 numpy passes' worth per element: it was 99% of the kernel and 17% of
BERT-base. Here, for float32 ``x`` in ``[LO, HI]``, ``Phi`` comes from a degree-5 Taylor
polynomial around the nearest node ``t = k / 128`` of a table, evaluated with ~40 cheap numpy
passes in float64; the result is rounded to float32 unless it lies too close to a rounding
boundary, and those elements (about 1 in 10^4), the inputs outside ``[LO, HI]`` and NaN/inf take
the float64 ``x * ndtr(x)`` path, rounded once, as before.

**Error bound.** Let ``g = x * Phi(x)`` and ``g~`` the float64 value computed here. Then
``|g~ - g| <= E * |g~|`` with ``E = 2^-40``, so when no float32 rounding boundary (a midpoint
between consecutive float32 numbers) lies within ``E * |g~|`` of ``g~``, ``g`` and ``g~`` round
to the same float32: the result is the correctly rounded ``gelu(x)``. The error terms, with
``u = 2^-53`` and ``h = x - t``, ``|h| <= 2^-8``:

1. *Exact reduction.* ``x * 128`` and ``rint`` are exact, ``t = k / 128`` is exact, and
   ``h = x - t`` is exact: both are on a grid of ``min(ulp(x), 2^-7)`` spanning less than
   ``2^53`` steps (``|x| <= 6``; for ``|x| < 2^-8``, ``t = 0`` and ``h = x``).
2. *Truncation.* ``Phi^(n)(t) = (-1)^(n-1) He_{n-1}(t) phi(t)`` (``He``: probabilists' Hermite
   polynomials), so the remainder of the degree-5 polynomial is
   ``He_5(xi) phi(xi) h^6 / 6!`` for some ``xi`` between ``t`` and ``x``. For ``x >= -1``,
   ``|He_5(xi) phi(xi)| <= 1.09 * sqrt(5!) / sqrt(2 pi) < 4.8`` (Cramer's inequality) and
   ``Phi(x) > 0.158``: relative remainder ``< 4.8 * 2^-48 / 720 / 0.158 < 2^-59``. For
   ``-5 <= x < -1``: ``|He_5(xi)| <= |xi|^5 + 10|xi|^3 + 15|xi| < 4500`` (``|xi| < 5.004``),
   ``phi(xi) / phi(x) <= exp(|x| |h| + h^2 / 2) < 1.03`` and Mills' inequality
   ``Phi(x) >= phi(x) |x| / (x^2 + 1)`` (``(x^2 + 1) / |x| <= 5.2``) give a relative
   remainder ``< 4500 * 1.03 * 5.2 * 2^-48 / 720 < 2^-42.9``.
3. *Table.* Each coefficient is within ``2^-50`` of its exact value relative to it: checked
   against mpmath for every node in ``tests/core/test_kernels_gelu.py`` (``c0 = Phi(t)`` from
   scipy's ``ndtr``, ``c_n`` from numpy's ``exp``). Their sum of magnitudes
   ``sum |c_n h^n|`` is below ``1.2 Phi(x)`` (the same test bounds it per node), so this term
   is below ``1.2 * 2^-50``.
4. *Evaluation.* Horner's rule (5 multiply-adds) and the product by ``x`` add at most
   ``11 u`` times ``sum |c_n h^n| * |x|`` (Higham, eq. 5.3): below ``14 u``, relative.

The sum, ``< 2^-42.9 + 1.2 * 2^-50 + 14 * 2^-53 < 2^-42.7``, leaves a factor 6 of margin
to ``E = 2^-40`` (which also covers measuring the error relative to ``g~`` instead of ``g``).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import scipy.special

__all__ = ["E", "HI", "LO", "STEP", "gelu_float32_block", "taylor_table", "taylor_value"]

STEP = 128  # table nodes per unit
LO, HI = -5.0, 6.0  # the table's range; outside it, scipy's ndtr
DEGREE = 5
E = 2.0**-40  # the relative error bound of the float64 value (see the module docstring)
_F32 = np.dtype(np.float32)


@functools.cache
def taylor_table() -> tuple[np.ndarray, ...]:
    """``c_n(t) = Phi^(n)(t) / n!`` for ``n = 0 .. DEGREE`` at the nodes ``t = k / STEP``,
    ``k = LO * STEP .. HI * STEP``: one float64 array per ``n``."""
    t = np.arange(int(LO * STEP), int(HI * STEP) + 1) / STEP
    phi = np.exp(-(t * t) / 2) / math.sqrt(2 * math.pi)
    hermite = [np.ones_like(t), t, t * t - 1, t**3 - 3 * t, t**4 - 6 * t * t + 3]  # He_0..He_4
    coefficients = [scipy.special.ndtr(t)]
    for n in range(1, DEGREE + 1):
        coefficients.append((-1) ** (n - 1) * hermite[n - 1] * phi / math.factorial(n))
    for c in coefficients:
        c.flags.writeable = False
    return tuple(coefficients)


def taylor_value(x: np.ndarray, scratch: np.ndarray | None = None,
                 ) -> tuple[np.ndarray, np.ndarray]:
    """``x * Phi(x)`` in float64 from the table (within ``E`` relative where ``inside``), and
    ``inside``: where ``x`` (float64 copies of float32 values) lies in ``[LO, HI]``."""
    table = taylor_table()
    scratch = np.empty_like(x) if scratch is None else scratch
    inside = (x >= LO) & (x <= HI)  # False for NaN
    xi = np.where(inside, x, 0.0)
    k = np.rint(np.multiply(xi, STEP, out=scratch), out=scratch)
    index = k.astype(np.intp)
    index -= int(LO * STEP)
    h = np.subtract(xi, np.divide(k, STEP, out=scratch), out=scratch)  # exact
    p = np.take(table[DEGREE], index)
    for n in range(DEGREE - 1, -1, -1):
        p *= h
        p += np.take(table[n], index)
    return np.multiply(xi, p, out=p), inside


def gelu_float32_block(y: np.ndarray, scratch: np.ndarray) -> None:
    """``y`` (float64 copies of float32 inputs) turned into ``gelu(y)``: exactly the correctly
    rounded float32 value where the bound decides it, else ``y * ndtr(y)`` in float64 (the
    caller rounds once to float32)."""
    g, inside = taylor_value(y, scratch)
    r = g.astype(_F32)
    # in magnitudes: the rounding boundaries below and above |r| (exact in float64), from
    # its float32 neighbours (the bit pattern -1 and +1: faster than np.nextafter; at 0 the
    # one below is NaN, and no boundary lies below 0 anyway)
    mag = np.abs(r)
    bits = mag.view(np.int32)
    r64 = mag.astype(np.float64)
    below = np.add(r64, (bits - 1).view(_F32), dtype=np.float64)
    above = np.add(r64, (bits + 1).view(_F32), dtype=np.float64)
    below *= 0.5
    above *= 0.5
    g_mag = np.abs(g)
    tolerance = g_mag * E
    with np.errstate(invalid="ignore"):
        fallback = ~inside | (g_mag - below <= tolerance) | (above - g_mag <= tolerance)
    if fallback.any():
        xs = y[fallback]
        y[...] = r
        y[fallback] = xs * scipy.special.ndtr(xs)
    else:
        y[...] = r
