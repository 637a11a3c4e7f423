"""Op-database entries (special family): special functions, orthogonal polynomials and the
dialect's numeric long tail (fmax, copysign, hypot, nextafter, gcd, lcm, frexp, signbit).

Float inputs mix in 0, +-inf and NaN (``tensors(special=True)``). Where torch's own result is
not the correctly rounded one, ``reference`` computes the expected values instead, each with
its reason:

- ``in_float64``: torch evaluated on float64 inputs and rounded to the result dtype. Used where
  torch's float32 algorithm loses accuracy that the runtime (scipy in float64, rounded once)
  keeps: the polynomial recurrences near their roots, zeta and the incomplete gamma functions.
- ``_fix_*``: special values where torch's answer is not the mathematical one (documented at
  each function).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from hypothesis import strategies as st

from tests import mp_reference
from tests.torch.op_db._entry import (
    ANY,
    FLOATS,
    INT_DTYPES,
    NUMERIC,
    EntrySet,
    Sample,
    broadcastable,
    shapes,
    tensors,
)
from tests.torch.op_db.elementwise import pair, unary

aten = torch.ops.aten
S = torch.special
F32_F64 = st.sampled_from((torch.float32, torch.float64))
INTS = st.sampled_from(INT_DTYPES)

ENTRIES = EntrySet()


add = ENTRIES.add


def in_float64(fn: Callable[..., torch.Tensor],
               fix: Callable[..., torch.Tensor] | None = None) -> Callable[..., torch.Tensor]:
    """``fn`` on float64 copies of the tensor arguments, rounded to ``fn``'s result dtype;
    ``fix(out, *args)`` then corrects special values torch gets wrong."""
    def reference(*args: Any, **kwargs: Any) -> torch.Tensor:
        dtype = fn(*args, **kwargs).dtype
        wide = [a.double() if isinstance(a, torch.Tensor) else a for a in args]
        out = fn(*wide, **kwargs)
        if fix is not None:
            out = fix(out, *wide)
        return out.to(dtype)

    return reference


def with_scalar(dtypes: st.SearchStrategy, scalars: st.SearchStrategy, low: float = -4.0,
                high: float = 4.0, scalar_first: bool = False) -> st.SearchStrategy[Sample]:
    """A tensor and a Python number (the number first with ``scalar_first``)."""
    @st.composite
    def build(draw: Any) -> Sample:
        dtype = draw(dtypes)
        x = draw(tensors(draw(shapes()), dtype, low=low, high=high,
                         special=dtype.is_floating_point))
        s = draw(scalars)
        return Sample((s, x) if scalar_first else (x, s))

    return build()


# -- special functions of one argument -------------------------------------------------------------
HALF_TOO = FLOATS  # torch implements these for float16/bfloat16 on CPU as well
@st.composite
def _small(draw: Any, dtypes: st.SearchStrategy, low: float, high: float,
           special: bool = True) -> Sample:
    """One tensor of rank <= 2 (mpmath computes its reference element by element)."""
    dtype = draw(dtypes)
    return Sample((draw(tensors(draw(shapes(max_rank=2)), dtype, low=low, high=high,
                                special=special and dtype.is_floating_point)),))


# torch's Bessel J/Y and Airy functions are not accurate to float64 (bessel_y1 is off by up
# to 8e-7, airy_ai by 7e-5 relative near x = -2.2, see tests/mp_reference.py): compared with
# mpmath's value rounded to the dtype.
MP_UNARY = {"special_bessel_j0": "bessel_j0", "special_bessel_j1": "bessel_j1",
            "special_bessel_y0": "bessel_y0", "special_bessel_y1": "bessel_y1",
            "special_airy_ai": "airy_ai"}
for target, fn, dtypes, lo, hi in [
    ("aten::erfc.default", torch.erfc, HALF_TOO, -6.0, 6.0),
    ("aten::special_erfcx.default", S.erfcx, F32_F64, -5.0, 30.0),
    ("aten::i0.default", torch.i0, HALF_TOO, -15.0, 15.0),
    ("aten::special_i0e.default", S.i0e, HALF_TOO, -30.0, 30.0),
    ("aten::special_i1.default", S.i1, HALF_TOO, -15.0, 15.0),
    ("aten::special_i1e.default", S.i1e, HALF_TOO, -30.0, 30.0),
    ("aten::special_modified_bessel_i0.default", S.modified_bessel_i0, F32_F64, -30.0, 30.0),
    ("aten::special_modified_bessel_i1.default", S.modified_bessel_i1, F32_F64, -30.0, 30.0),
    ("aten::special_bessel_j0.default", S.bessel_j0, F32_F64, -30.0, 30.0),
    ("aten::special_bessel_j1.default", S.bessel_j1, F32_F64, -30.0, 30.0),
    # negative x: NaN; 0: -inf (the pole)
    ("aten::special_bessel_y0.default", S.bessel_y0, F32_F64, -1.0, 30.0),
    ("aten::special_bessel_y1.default", S.bessel_y1, F32_F64, -1.0, 30.0),
    ("aten::special_modified_bessel_k0.default", S.modified_bessel_k0, F32_F64, -1.0, 30.0),
    ("aten::special_modified_bessel_k1.default", S.modified_bessel_k1, F32_F64, -1.0, 30.0),
    ("aten::special_scaled_modified_bessel_k0.default", S.scaled_modified_bessel_k0, F32_F64,
     -1.0, 30.0),
    ("aten::special_scaled_modified_bessel_k1.default", S.scaled_modified_bessel_k1, F32_F64,
     -1.0, 30.0),
    ("aten::special_spherical_bessel_j0.default", S.spherical_bessel_j0, F32_F64, -30.0, 30.0),
    ("aten::special_airy_ai.default", S.airy_ai, F32_F64, -10.0, 10.0),
    # outside [0, 1]: NaN; 0 and 1: -inf and +inf
    ("aten::special_ndtri.default", S.ndtri, F32_F64, -0.1, 1.1),
    ("aten::special_log_ndtr.default", S.log_ndtr, F32_F64, -40.0, 8.0),
]:
    op = target.split("::")[1].split(".")[0]
    if op in MP_UNARY:
        ref = mp_reference.reference(MP_UNARY[op], fn)
        add(target, fn, _small(dtypes, lo, hi), reference=ref)
        add(target, fn, _small(INTS, 0, 5), reference=ref, name=f"{op}[int]")
        continue
    add(target, fn, unary(dtypes, low=lo, high=hi))
    add(target, fn, unary(INTS, low=0, high=5, special=False), name=f"{op}[int]")



# -- special functions of two arguments ------------------------------------------------------------

def _fix_igamma(out: torch.Tensor, a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """torch tests x == 0 and isinf before NaN (igamma(nan, 0) = 0, igamma(inf, nan) = 0);
    a NaN argument gives NaN."""
    return torch.where(a.isnan() | x.isnan(), torch.full_like(out, float("nan")), out)


for name, fn in [("igamma", torch.igamma), ("igammac", torch.igammac)]:
    add(f"aten::{name}.default", fn, pair(FLOATS, low=-0.5, high=12.0),
        reference=lambda a, x, fn=fn: _fix_igamma(fn(a, x), a, x))


def _fix_zeta(out: torch.Tensor, x: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """zeta(x, +inf) is the limit 0 for x > 1; torch returns NaN."""
    return torch.where((q == float("inf")) & (x > 1), torch.zeros_like(out), out)


# torch's float32 zeta is off by up to 5e-4 relative (measured for x in [0.5, 6], q in
# [-3, 6]); compared with its float64 result rounded to float32.
add("aten::special_zeta.default", S.zeta, pair(F32_F64, low=0.5, high=6.0, rhs_low=-3.0),
    reference=in_float64(S.zeta, _fix_zeta))
add("aten::special_zeta.default", S.zeta, pair(INTS, low=0, high=6, special=False),
    reference=in_float64(S.zeta, _fix_zeta), name="special_zeta[int]")
add("aten::special_zeta.self_scalar", S.zeta,
    with_scalar(F32_F64, st.sampled_from((1.5, 2.0, 3.0, 4.5)), low=-3.0, high=6.0,
                scalar_first=True), reference=in_float64(S.zeta, _fix_zeta))
add("aten::special_zeta.other_scalar", S.zeta,
    with_scalar(F32_F64, st.sampled_from((0.5, 1.0, 2.0, -1.5)), low=0.5, high=6.0),
    reference=in_float64(S.zeta, _fix_zeta))


def _fix_polygamma(out: torch.Tensor, n: int, x: torch.Tensor) -> torch.Tensor:
    """polygamma(n >= 2, +inf) is the limit 0 (torch: NaN); polygamma(n >= 1, x) at the
    poles x = 0, -1, -2, ... is +inf for odd n (torch's trigamma returns ~1e32 there, from
    sin(pi x) rounding to a tiny non-zero value); NaN at x = -inf for n >= 1, where the poles
    pile up (torch: NaN for n = 1, -inf for n >= 2)."""
    if n >= 1:
        out = torch.where(x == -float("inf"), torch.full_like(out, float("nan")), out)
    if n >= 2:
        out = torch.where(x == float("inf"), torch.zeros_like(out), out)
    if n >= 1 and n % 2 == 1:
        pole = (x <= 0) & (x == x.floor()) & x.isfinite()
        out = torch.where(pole, torch.full_like(out, float("inf")), out)
    return out


@st.composite
def _polygamma(draw: Any, dtypes: st.SearchStrategy = FLOATS) -> Sample:
    dtype = draw(dtypes)
    n = draw(st.integers(0, 4))
    x = draw(tensors(draw(shapes()), dtype, low=-3.5, high=8.0,
                     special=dtype.is_floating_point))
    if dtype.is_floating_point and draw(st.booleans()):
        x = x.round()  # the poles at 0, -1, -2, ...
    return Sample((n, x))


# torch's float32 polygamma is off by up to 1.7e-2 relative near the poles (measured for
# n = 1..3, x in [-3.5, 8]); compared with its float64 result rounded to the dtype.
add("aten::polygamma.default", torch.polygamma, _polygamma(),
    reference=in_float64(torch.polygamma, _fix_polygamma))
add("aten::polygamma.default", torch.polygamma, _polygamma(INTS),
    reference=in_float64(torch.polygamma, _fix_polygamma), name="polygamma[int]")


# -- orthogonal polynomials ----------------------------------------------------------------------

def _fix_polynomial(fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """Where torch's recurrences are not the polynomial's value:

    - P_n(NaN) is NaN for n >= 1: torch's loop stops at once on NaN and returns an
      uninitialized value;
    - P_n(+-inf) for n >= 1 is the limit, +-inf with the sign P_n has at a huge finite x
      (beyond every root); torch's recurrence gives inf - inf = NaN for some n.
    """
    def fix(out: torch.Tensor, x: Any, n: Any) -> torch.Tensor:
        x = torch.as_tensor(x, dtype=out.dtype)
        n = torch.as_tensor(n, dtype=out.dtype)
        degree = n.trunc()
        out = torch.where(x.isnan() & (degree >= 1), torch.full_like(out, float("nan")), out)
        far = fn(torch.where(x.isinf(), x.sign() * 1e20, x), n)  # |P_n(1e20)| < 1e300
        limit = far.sign() * float("inf")
        return torch.where(x.isinf() & (degree >= 1), limit, out)

    return fix


@st.composite
def _polynomial(draw: Any, overload: str, low: float, high: float,
                x_dtypes: st.SearchStrategy = F32_F64) -> Sample:
    dtype = draw(x_dtypes)
    shape = draw(shapes())
    x = draw(tensors(shape, dtype, low=low, high=high, special=dtype.is_floating_point))
    if overload == "n_scalar":
        return Sample((x, draw(st.integers(-1, 12))))
    n_dtype = draw(st.sampled_from((dtype, torch.int64)))
    # float n in [-2, 12] has fractions: torch truncates it toward zero
    n = draw(tensors(draw(broadcastable(shape)), n_dtype, low=-2, high=12))
    if overload == "x_scalar":
        return Sample((draw(st.sampled_from((-1.5, -1.0, -0.25, 0.0, 0.5, 1.0, 2.0))), n))
    return Sample((x, n) if draw(st.booleans()) else (x, n.expand(shape).contiguous()))


# torch evaluates the polynomials by a float32 recurrence (or cos(n acos x)), which loses
# relative accuracy near the roots (up to 1e-2 for n <= 12; hermite_polynomial_h exceeds the
# default float32 tolerance on 0.3 % of uniform samples); compared with its float64 result
# rounded to float32.
for name in ("chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
             "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
             "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
             "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
             "laguerre_polynomial_l", "legendre_polynomial_p"):
    fn = getattr(S, name)
    lo, hi = (-0.5, 1.5) if name.startswith("shifted") else (-2.0, 2.0)
    if name.startswith("laguerre"):
        lo, hi = -2.0, 12.0
    ref = in_float64(fn, _fix_polynomial(fn))
    for overload in ("default", "n_scalar", "x_scalar"):
        add(f"aten::special_{name}.{overload}", fn, _polynomial(overload, lo, hi),
            reference=ref)
    add(f"aten::special_{name}.default", fn, _polynomial("default", -2, 2, INTS),
        reference=ref, name=f"special_{name}[int]")


# -- x * log(y) ------------------------------------------------------------------------------------
for target, fn, y_low in [("aten::special_xlog1py", S.xlog1py, -1.5),
                          ("aten::xlogy", torch.xlogy, -0.5)]:
    tensor_form = "Tensor" if target.endswith("xlogy") else "default"
    add(f"{target}.{tensor_form}", fn, pair(FLOATS, low=-2.0, high=4.0, rhs_low=y_low))
    add(f"{target}.{tensor_form}", fn, pair(INTS, low=-2, high=4, rhs_low=0, special=False),
        name=f"{target.split('::')[1]}[int]")
    scalars = st.sampled_from((0.0, 2.0, -1.5, float("nan")))
    self_scalar = "Scalar_Self" if tensor_form == "Tensor" else "self_scalar"
    other_scalar = "Scalar_Other" if tensor_form == "Tensor" else "other_scalar"
    add(f"{target}.{self_scalar}", fn, with_scalar(FLOATS, scalars, scalar_first=True))
    add(f"{target}.{other_scalar}", fn, with_scalar(FLOATS, scalars, low=-2.0))


# -- the numeric long tail ----------------------------------------------------------------------
add("aten::fmax.default", torch.fmax, pair(NUMERIC))
add("aten::fmin.default", torch.fmin, pair(NUMERIC))
add("aten::fmax.default", torch.fmax, pair(st.just(torch.bool)), name="fmax[bool]")
add("aten::copysign.Tensor", torch.copysign, pair(NUMERIC))
add("aten::copysign.Scalar", torch.copysign,
    with_scalar(NUMERIC, st.sampled_from((-1.0, 2.5, 0.0, -0.0, float("-inf")))))
add("aten::hypot.default", torch.hypot, pair(FLOATS, low=-1e3, high=1e3, mixed=False))


@st.composite
def _nextafter(draw: Any) -> Sample:
    dtype = draw(FLOATS)
    shape = draw(shapes())
    x = draw(tensors(shape, dtype, special=True))
    if draw(st.booleans()):  # subnormal neighbours
        x = x * {torch.float32: 1e-40, torch.float64: 1e-310}.get(dtype, 1e-5)
    y = x.clone() if draw(st.booleans()) else draw(
        tensors(draw(broadcastable(shape)), dtype, special=True))
    return Sample((x, y))


add("aten::nextafter.default", torch.nextafter, _nextafter())

add("aten::gcd.default", torch.gcd, pair(INTS, low=-200, high=200, special=False))
add("aten::lcm.default", torch.lcm, pair(INTS, low=-200, high=200, special=False))
add("aten::lcm.default", torch.lcm,
    pair(st.sampled_from((torch.int32, torch.int64)), low=-2**31, high=2**31 - 1,
         special=False, mixed=False), name="lcm[overflow]")


@st.composite
def _signed_floats(draw: Any, dtypes: st.SearchStrategy = FLOATS) -> torch.Tensor:
    dtype = draw(dtypes)
    x = draw(tensors(draw(shapes()), dtype, low=-1e3, high=1e3,
                     special=dtype.is_floating_point))
    if dtype.is_floating_point and draw(st.booleans()):
        x = -x  # -0.0 and -NaN
    return x


add("aten::frexp.Tensor", torch.frexp, st.builds(lambda x: Sample((x,)), _signed_floats()))
add("aten::signbit.default", torch.signbit,
    st.builds(lambda x: Sample((x,)), _signed_floats(ANY)))
