"""Complex-number and FFT kernels against torch: elementwise math on complex64/complex128,
casts, the complex part ops, and the ``fft_*`` transforms against torch's ``_fft_*`` ops.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from coreai_core.dialects import coreai
from tests.core.kernel_util import check, rand, run_op, seeds, shapes, to_torch

COMPLEX = [np.dtype(np.complex64), np.dtype(np.complex128)]
# numpy's complex routines and torch's (std::complex / SLEEF) agree within a few ulps of the
# parts' type; near a zero of the result only an absolute bound holds.
TOL = {np.dtype(np.complex64): (2e-5, 2e-6), np.dtype(np.complex128): (1e-12, 1e-14)}
# A transform of n points sums n products: its rounding error grows like log2(n) ulps of the
# largest magnitude, which atol (relative to the data's scale ~ sqrt(n)) covers.
FFT_TOL = {np.dtype(np.complex64): (1e-5, 1e-4), np.dtype(np.complex128): (1e-12, 1e-11),
           np.dtype(np.float32): (1e-5, 1e-4), np.dtype(np.float64): (1e-12, 1e-11)}


def crand(seed: int, shape: tuple[int, ...], dtype: np.dtype, lo: float = -3.0,
          hi: float = 3.0) -> np.ndarray:
    """Random complex data whose parts lie in [lo, hi)."""
    part = np.complex64 if dtype == np.complex64 else np.complex128
    re = rand(seed, shape, np.float64, lo, hi)
    im = rand(seed + 1, shape, np.float64, lo, hi)
    return (re + 1j * im).astype(part)


def check_complex(got: np.ndarray, want: torch.Tensor, rtol: float, atol: float) -> None:
    """Shape, dtype, then both parts (NaN where torch has NaN)."""
    want_np = want.resolve_conj().numpy()
    assert got.shape == want_np.shape, f"shape {got.shape} != {want_np.shape}"
    assert got.dtype == want_np.dtype, f"dtype {got.dtype} != {want_np.dtype}"
    for part in (np.real, np.imag):
        np.testing.assert_allclose(part(got).astype(np.float64),
                                   part(want_np).astype(np.float64),
                                   rtol=rtol, atol=atol, equal_nan=True)


UNARY = [
    (coreai.acos, torch.acos), (coreai.acosh, torch.acosh), (coreai.asin, torch.asin),
    (coreai.asinh, torch.asinh), (coreai.atan, torch.atan), (coreai.atanh, torch.atanh),
    (coreai.cos, torch.cos), (coreai.cosh, torch.cosh), (coreai.sin, torch.sin),
    (coreai.sinh, torch.sinh), (coreai.tan, torch.tan), (coreai.tanh, torch.tanh),
    (coreai.exp, torch.exp), (coreai.exp2, torch.exp2), (coreai.expm1, torch.expm1),
    (coreai.log, torch.log), (coreai.log2, torch.log2), (coreai.log10, torch.log10),
    (coreai.log1p, torch.log1p), (coreai.sqrt, torch.sqrt), (coreai.rsqrt, torch.rsqrt),
    (coreai.reciprocal, torch.reciprocal), (coreai.sigmoid, torch.sigmoid),
    (coreai.silu, F.silu), (coreai.neg, torch.neg),
]


@pytest.mark.parametrize("build, fn", UNARY, ids=[b.__name__ for b, _ in UNARY])
@given(seed=seeds, shape=shapes(), dtype=st.sampled_from(COMPLEX))
def test_complex_unary_matches_torch(build, fn, seed, shape, dtype):
    z = crand(seed, shape, dtype)
    (got,) = run_op(build, z)
    rtol, atol = TOL[dtype]
    check_complex(got, fn(to_torch(z)), rtol, atol)


@pytest.mark.parametrize("build, fn", [(coreai.abs_, torch.abs), (coreai.isnan, torch.isnan),
                                       (coreai.isinf, torch.isinf)])
@given(seed=seeds, shape=shapes(), dtype=st.sampled_from(COMPLEX))
def test_complex_to_real_unary_matches_torch(build, fn, seed, shape, dtype):
    z = crand(seed, shape, dtype)
    if z.size:  # NaN and inf in either part
        flat = z.reshape(-1)
        flat[0] = complex(np.nan, 1.0)
        flat[-1] = complex(2.0, -np.inf)
    (got,) = run_op(build, z)
    check(got, fn(to_torch(z)), *TOL[dtype])


BINARY = [
    (coreai.broadcasting_add, torch.add), (coreai.broadcasting_sub, torch.sub),
    (coreai.broadcasting_mul, torch.mul), (coreai.broadcasting_divide, torch.div),
    (coreai.broadcasting_pow, torch.pow),
]


@pytest.mark.parametrize("build, fn", BINARY, ids=[b.__name__ for b, _ in BINARY])
@given(seed=seeds, shape=shapes(min_rank=1), dtype=st.sampled_from(COMPLEX))
def test_complex_binary_matches_torch(build, fn, seed, shape, dtype):
    a = crand(seed, shape, dtype)
    b = crand(seed + 7, shape[1:], dtype, 0.5, 2.0)  # broadcast; away from 0 for div/pow
    (got,) = run_op(build, a, b)
    rtol, atol = TOL[dtype]
    check_complex(got, fn(to_torch(a), to_torch(b)), rtol * 10, atol * 10)


@given(seed=seeds, shape=shapes(min_rank=1), dtype=st.sampled_from(COMPLEX))
def test_complex_equality_and_where_match_torch(seed, shape, dtype):
    a = crand(seed, shape, dtype)
    b = a.copy()
    b.reshape(-1)[::2] += 1j  # equal at odd positions only
    eq, ne, sel = run_op(lambda x, y: (coreai.broadcasting_equal(x, y),
                                       coreai.broadcasting_not_equal(x, y),
                                       coreai.where(coreai.broadcasting_equal(x, y), x, y)),
                         a, b)
    ta, tb = to_torch(a), to_torch(b)
    check(eq, ta == tb)
    check(ne, ta != tb)
    check_complex(sel, torch.where(ta == tb, ta, tb), 0, 0)


@pytest.mark.parametrize("src, dst", [
    ("complex64", "float32"), ("complex128", "float16"), ("complex64", "int32"),
    ("complex64", "bool"), ("float32", "complex64"), ("int64", "complex128"),
    ("bfloat16", "complex64"), ("complex64", "complex128"), ("complex128", "complex64"),
])
@given(seed=seeds, shape=shapes())
def test_cast_to_and_from_complex_matches_torch(src, dst, seed, shape):
    from coreai_core import DType

    s = DType.of(src)
    x = crand(seed, shape, s.numpy, -50, 50) if s.is_complex else rand(seed, shape, s.numpy,
                                                                       -50, 50)
    if s.is_complex and x.size:
        x.reshape(-1)[0] = 0.0 + 0.5j  # a zero real part with a nonzero imaginary part
    (got,) = run_op(lambda v: coreai.cast(v, dst), x)
    with warnings.catch_warnings():  # complex -> real drops the imaginary part, as intended
        warnings.simplefilter("ignore", UserWarning)
        want = to_torch(x).to(DType.of(dst).torch)
    if want.is_complex():
        check_complex(got, want, 0, 0)
    else:
        check(got, want)


@given(seed=seeds, shape=shapes(), dtype=st.sampled_from(COMPLEX))
def test_complex_parts_and_conj_match_torch(seed, shape, dtype):
    z = crand(seed, shape, dtype)
    re, im, cj, pairs = run_op(lambda v: (coreai.real(v), coreai.imag(v), coreai.conj(v),
                                          coreai.view_as_real(v)), z)
    t = to_torch(z)
    check(re, t.real.contiguous())
    check(im, t.imag.contiguous())
    check_complex(cj, torch.conj_physical(t), 0, 0)
    check(pairs, torch.view_as_real(t).contiguous())


@given(seed=seeds, shape=shapes(max_rank=2), dtype=st.sampled_from(["float32", "float64"]),
       broadcast=st.booleans())
def test_complex_from_parts_and_pairs_match_torch(seed, shape, dtype, broadcast):
    re = rand(seed, shape, dtype, specials=True)
    im = rand(seed + 1, shape[1:] if broadcast else shape, dtype, specials=True)
    (z,) = run_op(coreai.complex_, re, im)
    check_complex(z, torch.complex(to_torch(re), to_torch(im)), 0, 0)
    pairs = rand(seed, (*shape, 2), dtype, specials=True)
    (w,) = run_op(coreai.view_as_complex, pairs)
    check_complex(w, torch.view_as_complex(to_torch(pairs)), 0, 0)


NORMS = {"none": 0, "by_root_n": 1, "by_n": 2}  # torch's `normalization` integer


@st.composite
def fft_case(draw, min_size: int = 1):
    """A shape (sizes 1..9 and 47) and 1-3 distinct axes of it, in any order."""
    rank = draw(st.integers(1, 3))
    sizes = st.one_of(st.integers(min_size, 9), st.just(47))
    shape = tuple(draw(sizes) if i == 0 else draw(st.integers(min_size, 6))
                  for i in range(rank))
    shape = tuple(draw(st.permutations(shape)))
    axes = draw(st.lists(st.integers(-rank, rank - 1), min_size=1, max_size=rank,
                         unique_by=lambda a: a % rank))
    return shape, axes


def nonneg(axes: list[int], shape: tuple[int, ...]) -> list[int]:
    """torch's ``_fft_*`` ops expect the non-negative dims its public API passes them."""
    return [a % len(shape) for a in axes]


@given(seed=seeds, case=fft_case(), dtype=st.sampled_from(COMPLEX),
       norm=st.sampled_from(list(NORMS)), forward=st.booleans())
def test_fft_c2c_matches_torch(seed, case, dtype, norm, forward):
    shape, axes = case
    z = crand(seed, shape, dtype)
    (got,) = run_op(lambda v: coreai.fft_c2c(v, axes=axes, forward=forward,
                                             normalization=norm), z)
    want = torch.ops.aten._fft_c2c(to_torch(z), nonneg(axes, shape), NORMS[norm], forward)
    check_complex(got, want, *FFT_TOL[dtype])


@given(seed=seeds, case=fft_case(), dtype=st.sampled_from(["float32", "float64"]),
       norm=st.sampled_from(list(NORMS)), onesided=st.booleans())
def test_fft_r2c_matches_torch(seed, case, dtype, norm, onesided):
    shape, axes = case
    x = rand(seed, shape, dtype)
    (got,) = run_op(lambda v: coreai.fft_r2c(v, axes=axes, normalization=norm,
                                             onesided=onesided), x)
    want = torch.ops.aten._fft_r2c(to_torch(x), nonneg(axes, shape), NORMS[norm], onesided)
    check_complex(got, want, *FFT_TOL[np.dtype(dtype)])


@given(seed=seeds, case=fft_case(), dtype=st.sampled_from(COMPLEX),
       norm=st.sampled_from(list(NORMS)), odd=st.booleans())
def test_fft_c2r_matches_torch(seed, case, dtype, norm, odd):
    shape, axes = case
    last = shape[axes[-1]]
    n = 2 * (last - 1) + int(odd) or 1  # last == n // 2 + 1
    z = crand(seed, shape, dtype)
    (got,) = run_op(lambda v: coreai.fft_c2r(v, axes=axes, last_dim_size=n,
                                             normalization=norm), z)
    want = torch.ops.aten._fft_c2r(to_torch(z), nonneg(axes, shape), NORMS[norm], n)
    check(got, want, *FFT_TOL[dtype])
