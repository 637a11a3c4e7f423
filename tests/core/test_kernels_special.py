"""Special-function and long-tail elementwise kernels against torch.

The kernels compute in float64 with scipy.special and round once. The expected values are
mpmath's (``tests/mp_reference.py``; torch's float64 Bessel, trigamma and Airy functions are
not accurate to float64) rounded to the tested dtype, and torch's float64 values where mpmath
has no real value (NaN, infinities, poles, outside the domain). Special values where torch's
answer is not the mathematical one are checked against the limits, derived in each test.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from coreai_core.dialects import coreai
from coreai_core.dialects._special import SPECIAL_BINARY, SPECIAL_UNARY
from tests import mp_reference
from tests.core.kernel_util import (
    BF16,
    FLOAT_DTYPES,
    INT_DTYPES,
    TORCH_DTYPE,
    check,
    rand,
    run_op,
    seeds,
    shapes,
    to_torch,
)

S = torch.special

# fn -> (torch twin, domain of the random inputs)
UNARY = {
    "erfc": (torch.erfc, (-6, 6)), "erfcx": (S.erfcx, (-5, 30)),
    "i0": (torch.i0, (-30, 30)), "i0e": (S.i0e, (-30, 30)), "i1": (S.i1, (-30, 30)),
    "i1e": (S.i1e, (-30, 30)), "bessel_j0": (S.bessel_j0, (-40, 40)),
    "bessel_j1": (S.bessel_j1, (-40, 40)), "bessel_y0": (S.bessel_y0, (-1, 40)),
    "bessel_y1": (S.bessel_y1, (-1, 40)), "modified_bessel_k0": (S.modified_bessel_k0, (-1, 40)),
    "modified_bessel_k1": (S.modified_bessel_k1, (-1, 40)),
    "scaled_modified_bessel_k0": (S.scaled_modified_bessel_k0, (-1, 40)),
    "scaled_modified_bessel_k1": (S.scaled_modified_bessel_k1, (-1, 40)),
    "spherical_bessel_j0": (S.spherical_bessel_j0, (-40, 40)), "airy_ai": (S.airy_ai, (-10, 10)),
    "ndtri": (S.ndtri, (-0.1, 1.1)), "log_ndtr": (S.log_ndtr, (-40, 8)),
}
# fn -> (torch twin, lhs domain, rhs domain)
BINARY = {
    "igamma": (torch.igamma, (0, 20), (0, 20)), "igammac": (torch.igammac, (0, 20), (0, 20)),
    "zeta": (S.zeta, (1.1, 8), (0.1, 10)),
    "polygamma": (lambda n, x: torch.stack([torch.polygamma(int(k), v) for k, v in zip(
        n.reshape(-1), x.reshape(-1))]).reshape(x.shape), (0, 4), (0.1, 10)),
    **{name: (getattr(S, name), (-1.2, 1.2) if name.startswith(("cheb", "leg")) else
              (-0.1, 1.1) if name.startswith("shifted") else (-4, 12), (0, 13))
       for name in SPECIAL_BINARY if "polynomial" in name},
}
# float64: scipy and torch are different float64 implementations, a few ulp apart (more
# near the zeros of the oscillating Bessel functions, hence the absolute term).
# float32 / float16 / bfloat16: both are rounded from float64; values within a few float64
# ulp of a rounding boundary may round to neighbours: one ulp of the dtype.
TOL = {np.dtype(np.float64): (1e-10, 1e-13), np.dtype(np.float32): (2.4e-7, 1e-30),
       np.dtype(np.float16): (1e-3, 6e-8), BF16: (8e-3, 1e-30)}
SPECIAL_VALUES = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, 1e-8, 100.0]


def _expected(name: str, torch_fn, *arrays: np.ndarray, dtype: np.dtype) -> torch.Tensor:
    """mpmath's value where it has a real one, else torch's float64 value; rounded to dtype."""
    exact, ok = mp_reference.values(name, *arrays)
    fallback = torch_fn(*(to_torch(np.broadcast_to(a, exact.shape).astype(np.float64))
                          for a in arrays))
    return torch.where(torch.from_numpy(ok), torch.from_numpy(exact), fallback).to(
        TORCH_DTYPE[dtype])


def test_every_special_function_is_tested():
    assert set(UNARY) == set(SPECIAL_UNARY)
    assert set(BINARY) == set(SPECIAL_BINARY)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("fn", sorted(UNARY))
@given(shape=shapes(empty=True, max_size=60), seed=seeds)  # mpmath: per element
def test_special_unary_is_correctly_rounded(fn, dtype, shape, seed):
    ref, domain = UNARY[fn]
    x = rand(seed, shape, dtype, *domain, specials=True)
    (got,) = run_op(lambda v: coreai.special(v, fn=fn), x)
    check(got, _expected(fn, ref, x, dtype=dtype), *TOL[dtype])


@pytest.mark.parametrize("fn", sorted(UNARY))
def test_special_unary_special_values(fn):
    x = np.array(SPECIAL_VALUES, np.float64)
    (got,) = run_op(lambda v: coreai.special(v, fn=fn), x)
    want = _expected(fn, UNARY[fn][0], x, dtype=x.dtype)
    check(got, want, *TOL[x.dtype])
    np.testing.assert_array_equal(np.isnan(got), torch.isnan(want).numpy())
    np.testing.assert_array_equal(np.isinf(got), torch.isinf(want).numpy())


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float64)], ids=str)
@pytest.mark.parametrize("fn", sorted(BINARY))
@given(shape=shapes(max_size=60), seed=seeds)
def test_special_binary_is_correctly_rounded(fn, dtype, shape, seed):
    ref, lhs_domain, rhs_domain = BINARY[fn]
    a = rand(seed, shape, dtype, *lhs_domain)
    b = rand(seed + 1, shape[-1:], dtype, *rhs_domain)  # broadcast against a
    if "polynomial" in fn:
        b = np.trunc(b) - 1  # degrees -1..12 (negative: 0)
    if fn == "polygamma":
        a, b = np.trunc(a).astype(dtype), np.broadcast_to(b, shape).astype(dtype)
    (got,) = run_op(lambda u, v: coreai.special_binary(u, v, fn=fn), a, b)
    want = _expected(fn, ref, a, b, dtype=dtype)
    rtol, atol = TOL[dtype]
    if "polynomial" in fn and dtype == np.float64:
        # scipy's float64 recurrences cancel near the roots: an absolute error of a few ulp
        # of the largest intermediate term (below 2**12 * 13**12 / 12! here).
        atol = 1e-9
    check(got, want, rtol, atol)


@pytest.mark.parametrize("fn", sorted(n for n in SPECIAL_BINARY if "polynomial" in n))
def test_polynomials_at_infinity_are_their_limits(fn):
    """At x = +-inf, P_n is +-inf with the sign P_n takes at a huge finite x (the same sign
    for every |x| beyond the largest root); P_0 = 1. torch's recurrences agree, scipy's
    give inf - inf = NaN, which the kernel must not return."""
    n = np.arange(0, 9, dtype=np.float64)
    for sign in (1.0, -1.0):
        x = np.full_like(n, sign * np.inf)
        huge = 1e6 * sign * (0.5 if fn.startswith("shifted") else 1.0) + (
            0.5 if fn.startswith("shifted") else 0.0)
        (got,) = run_op(lambda u, v: coreai.special_binary(u, v, fn=fn), x, n)
        far = getattr(S, fn)(torch.full((9,), huge, dtype=torch.float64),
                             torch.from_numpy(n)).numpy()
        assert got[0] == 1.0
        assert np.all(np.isinf(got[1:])), got
        np.testing.assert_array_equal(np.sign(got[1:]), np.sign(far[1:]))


@pytest.mark.parametrize("fn", sorted(n for n in SPECIAL_BINARY if "polynomial" in n))
def test_polynomial_degree_is_truncated_and_negative_gives_zero(fn):
    x = np.array([0.3, -0.7, 1.0, -1.0, 0.3, 0.3, np.nan], np.float64)
    n = np.array([2.9, 3.5, 4.2, 5.0, -0.5, -3.0, 0.0], np.float64)
    (got,) = run_op(lambda u, v: coreai.special_binary(u, v, fn=fn), x, n)
    want = getattr(S, fn)(to_torch(x), to_torch(np.trunc(n)))
    check(got[:6], want[:6], 1e-12, 1e-12)  # -0.5 truncates to 0: P_0 = 1
    assert got[4] == 1.0 and got[5] == 0.0 and got[6] == 1.0  # P_0(NaN) = 1, like torch


def test_special_binary_limits_where_torch_returns_nan():
    """zeta(x > 1, q -> inf) -> 0 and polygamma(n >= 2, x -> inf) -> 0: the values at a large
    finite argument shrink toward 0 (torch itself returns NaN at inf)."""
    (z,) = run_op(lambda u, v: coreai.special_binary(u, v, fn="zeta"),
                  np.array([2.0, 3.5]), np.array([np.inf, np.inf]))
    np.testing.assert_array_equal(z, [0.0, 0.0])
    assert torch.all(S.zeta(torch.tensor([2.0, 3.5], dtype=torch.float64),
                            torch.tensor(1e200, dtype=torch.float64)) < 1e-190)
    (p,) = run_op(lambda u, v: coreai.special_binary(u, v, fn="polygamma"),
                  np.array([2.0, 3.0]), np.array([np.inf, np.inf]))
    np.testing.assert_array_equal(np.abs(p), [0.0, 0.0])
    assert torch.all(torch.polygamma(2, torch.tensor(1e100, dtype=torch.float64)).abs() < 1e-190)


def test_incomplete_gamma_propagates_nan():
    """A NaN argument gives NaN (torch returns 0 or 1 for some, testing x == 0 first)."""
    a = np.array([np.nan, np.inf, np.nan, 1.0])
    x = np.array([0.0, np.nan, np.inf, np.nan])
    for fn in ("igamma", "igammac"):
        (got,) = run_op(lambda u, v, f=fn: coreai.special_binary(u, v, fn=f), a, x)
        assert np.all(np.isnan(got)), (fn, got)


# -- the elementwise long tail --------------------------------------------------------------------

LONG_TAIL = [
    (coreai.broadcasting_fmax, torch.fmax, "any"), (coreai.broadcasting_fmin, torch.fmin, "any"),
    (coreai.broadcasting_copysign, torch.copysign, "float"),
    (coreai.broadcasting_hypot, torch.hypot, "float"),
    (coreai.broadcasting_nextafter, torch.nextafter, "float"),
    (coreai.broadcasting_gcd, torch.gcd, "int"), (coreai.broadcasting_lcm, torch.lcm, "int"),
]


def _dtypes(kind: str) -> list[np.dtype]:
    floats = FLOAT_DTYPES if kind != "int" else []
    ints = INT_DTYPES if kind != "float" else []
    return [*floats, *ints, *([np.dtype(np.bool_)] if kind == "any" else [])]


@pytest.mark.parametrize("build,ref,dtype", [
    (b, r, d) for b, r, kind in LONG_TAIL for d in _dtypes(kind)],
    ids=lambda v: getattr(v, "__name__", str(v)))
@given(shape=shapes(), seed=seeds, same=st.booleans())
def test_long_tail_binary_matches_torch(build, ref, dtype, shape, seed, same):
    a = rand(seed, shape, dtype, -1e3, 1e3, specials=True)
    b = a.copy() if same else rand(seed + 1, shape[-1:], dtype, -1e3, 1e3, specials=True)
    (got,) = run_op(build, a, b)
    want = ref(to_torch(a), to_torch(b))
    # fmax/fmin/copysign/nextafter/gcd/lcm are exact; hypot rounds a sqrt, where numpy's and
    # torch's libm may differ in the last ulp (the transcendental tolerance of this file)
    rtol = 1e-16 if ref is not torch.hypot else TOL[dtype][0] if dtype in TOL else 0.0
    check(got, want, rtol)  # exact except hypot (correctly rounded here, ~1 ulp in torch)


def test_lcm_and_gcd_wrap_like_torch():
    """8/16-bit lcm is computed in int (C promotion) and truncated; 32/64-bit wraps in place."""
    for dtype, lo, hi in [(np.int8, -128, 127), (np.int16, -32768, 32767),
                          (np.int32, -2**31, 2**31 - 1), (np.int64, -2**63, 2**63 - 1),
                          (np.uint8, 0, 255)]:
        rng = np.random.default_rng(0)
        a = rng.integers(lo, hi, size=400, endpoint=True, dtype=dtype)
        b = rng.integers(lo, hi, size=400, endpoint=True, dtype=dtype)
        a[:3], b[:3] = lo, [0, lo, -1 if lo else 1]
        for build, ref in [(coreai.broadcasting_lcm, torch.lcm),
                           (coreai.broadcasting_gcd, torch.gcd)]:
            (got,) = run_op(build, a, b)
            check(got, ref(to_torch(a), to_torch(b)))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@given(shape=shapes(empty=True), seed=seeds)
def test_frexp_and_signbit_match_torch(dtype, shape, seed):
    x = rand(seed, shape, dtype, -1e4, 1e4, specials=True)
    x = np.where(rand(seed + 1, shape, np.float64) > 0, x, -x).astype(dtype)  # -NaN, -0.0
    mantissa, exponent = run_op(coreai.frexp, x)
    want_m, want_e = torch.frexp(to_torch(x))
    check(mantissa, want_m)
    check(exponent, want_e)
    (bit,) = run_op(coreai.signbit, x)
    check(bit, torch.signbit(to_torch(x)))
