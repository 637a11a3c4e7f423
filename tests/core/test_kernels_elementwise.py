"""Elementwise kernels against torch: unary math, rounding, casts, binary ops, where, gelu,
softmax. Each test runs a one-op program and compares with the torch op computed here.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from coreai_core.dialects import coreai
from coreai_core.runtime import KernelError
from tests import reference
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

# (rtol, atol) per float dtype for transcendental functions.
# float64: numpy and torch call different libm implementations, each within ~1 ulp.
# float32: numpy's SIMD float32 routines are within ~4 ulp (4 * 1.2e-7), torch's SLEEF 1 ulp.
# float16 / bfloat16: both compute in float32 and round once; a 1-ulp float32 difference can
#   flip the final rounding, i.e. one half ulp (2**-10) or bfloat16 ulp (2**-7).
TOL = {np.dtype(np.float64): (1e-12, 1e-14), np.dtype(np.float32): (2e-6, 1e-7),
       np.dtype(np.float16): (2e-3, 1e-5), BF16: (1.6e-2, 1e-5)}
# The special functions are computed in float64 here but with float32 series in torch
# (its lgamma/digamma lose a few ulp, and absolute accuracy near their zeros).
SPECIAL_TOL = {np.dtype(np.float64): (1e-9, 1e-12), np.dtype(np.float32): (1e-5, 1e-5),
               np.dtype(np.float16): (2e-3, 1e-3), BF16: (1.6e-2, 1e-2)}

SPECIAL_VALUES = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5,
                  2.0, -3.0, 1e-8, 100.0, -100.0]

def gelu_tanh(t: torch.Tensor) -> torch.Tensor:
    return F.gelu(t, approximate="tanh")


# builder, torch function, domain of the random inputs
FLOAT_UNARY = [
    (coreai.acos, torch.acos, (-1, 1)), (coreai.acosh, torch.acosh, (1, 20)),
    (coreai.asin, torch.asin, (-1, 1)), (coreai.asinh, torch.asinh, (-20, 20)),
    (coreai.atan, torch.atan, (-20, 20)), (coreai.atanh, torch.atanh, (-0.99, 0.99)),
    (coreai.cos, torch.cos, (-10, 10)), (coreai.cosh, torch.cosh, (-10, 10)),
    (coreai.sin, torch.sin, (-10, 10)), (coreai.sinh, torch.sinh, (-10, 10)),
    (coreai.tan, torch.tan, (-1.5, 1.5)), (coreai.tanh, torch.tanh, (-10, 10)),
    (coreai.exp, torch.exp, (-20, 20)), (coreai.exp2, torch.exp2, (-20, 20)),
    (coreai.expm1, torch.expm1, (-5, 5)), (coreai.log, torch.log, (0.001, 1000)),
    (coreai.log2, torch.log2, (0.001, 1000)), (coreai.log10, torch.log10, (0.001, 1000)),
    (coreai.log1p, torch.log1p, (-0.99, 100)), (coreai.sqrt, torch.sqrt, (0, 100)),
    (coreai.rsqrt, torch.rsqrt, (0.01, 100)), (coreai.reciprocal, torch.reciprocal, (0.1, 10)),
    (coreai.sigmoid, torch.sigmoid, (-30, 30)), (coreai.silu, F.silu, (-30, 30)),
    (coreai.gelu, F.gelu, (-6, 6)),
    (lambda x: coreai.gelu(x, approximate="tanh"), gelu_tanh, (-6, 6)),
]
SPECIAL_UNARY = [
    (coreai.erf, torch.erf, (-5, 5)), (coreai.erfinv, torch.erfinv, (-1, 1)),
    (coreai.lgamma, torch.lgamma, (-10, 20)), (coreai.digamma, torch.digamma, (0.05, 20)),
]
# torch's float32 gelu computes 1 + erf(x / sqrt(2)) (or 1 + tanh(...)) in float32, which
# cancels for x << 0: the absolute error there is ~|x| * eps32 / 2 (ours: erf in float64,
# and numpy's tanh, which differs from torch's by an ulp before the cancellation).
EXTRA_ATOL = {(F.gelu, np.dtype(np.float32)): 1e-6, (gelu_tanh, np.dtype(np.float32)): 1e-6}
NUMERIC_UNARY = [
    (coreai.abs_, torch.abs), (coreai.neg, torch.neg), (coreai.sign, torch.sign),
    (coreai.floor, torch.floor), (coreai.ceil, torch.ceil), (coreai.round_, torch.round),
    (coreai.trunc, torch.trunc), (coreai.relu, torch.relu),
]


def _name(fn) -> str:
    return getattr(fn, "__name__", "fn")


def _torch_on(ref, a: np.ndarray) -> torch.Tensor:
    return ref(to_torch(a))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("build,ref,domain", FLOAT_UNARY + SPECIAL_UNARY,
                         ids=[_name(r) for _, r, _ in FLOAT_UNARY + SPECIAL_UNARY])
@given(shape=shapes(empty=True), seed=seeds)
def test_float_unary_matches_torch(build, ref, domain, dtype, shape, seed):
    x = rand(seed, shape, dtype, *domain)
    (got,) = run_op(build, x)
    rtol, atol = (SPECIAL_TOL if (build, ref, domain) in SPECIAL_UNARY else TOL)[dtype]
    check(got, _torch_on(ref, x), rtol, max(atol, EXTRA_ATOL.get((ref, dtype), 0)))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("build,ref", [(b, r) for b, r, _ in FLOAT_UNARY + SPECIAL_UNARY]
                         + NUMERIC_UNARY + [(coreai.isnan, torch.isnan),
                                            (coreai.isinf, torch.isinf)],
                         ids=lambda v: _name(v) if callable(v) else "")
def test_unary_special_values_match_torch(build, ref, dtype):
    """NaN, infinities, signed zeros, poles and half-way points behave like torch."""
    x = np.array(SPECIAL_VALUES, dtype=dtype)
    (got,) = run_op(build, x)
    # torch's gelu(+inf) depends on the CPU's vector unit, and gelu/silu(-inf) are NaN in
    # torch: compare with the correct limits there (tests/reference.py)
    correct = {F.gelu: reference.gelu, F.silu: reference.silu,
               gelu_tanh: lambda t: reference.gelu(t, approximate="tanh")}
    want = _torch_on(correct.get(ref, ref), x)
    rtol, atol = SPECIAL_TOL[dtype]
    check(got, want, rtol, atol)
    # Infinities and NaN must sit in the same places (assert_allclose accepts inf == inf).
    np.testing.assert_array_equal(np.isnan(got.astype(np.float64)) if got.dtype != bool
                                  else got, torch.isnan(want.double()).numpy()
                                  if want.dtype != torch.bool else want.numpy())


@pytest.mark.parametrize("dtype", [*FLOAT_DTYPES, *INT_DTYPES], ids=str)
@pytest.mark.parametrize("build,ref", NUMERIC_UNARY, ids=lambda v: _name(v))
@given(shape=shapes(empty=True), seed=seeds)
def test_numeric_unary_matches_torch(build, ref, dtype, shape, seed):
    x = rand(seed, shape, dtype, -5, 5)
    if dtype.kind == "f":
        x = (np.round(x.astype(np.float64) * 2) / 2).astype(dtype)  # many exact halves
    (got,) = run_op(build, x)
    check(got, _torch_on(ref, x))  # exact: no rounding happens in these ops


def test_integer_unary_wraps_at_the_minimum():
    x = np.array([-128, 127, 0, -1], np.int8)
    for build, ref in [(coreai.abs_, torch.abs), (coreai.neg, torch.neg)]:
        (got,) = run_op(build, x)
        check(got, ref(to_torch(x)))


@pytest.mark.parametrize("dtype", [np.dtype(np.bool_), *INT_DTYPES], ids=str)
@given(shape=shapes(empty=True), seed=seeds)
def test_logical_and_bitwise_not(dtype, shape, seed):
    x = rand(seed, shape, dtype)
    (got,) = run_op(coreai.bitwise_not, x)
    check(got, torch.bitwise_not(to_torch(x)))
    if dtype == np.bool_:
        (got,) = run_op(coreai.not_, x)
        check(got, torch.logical_not(to_torch(x)))


# -- casts ---------------------------------------------------------------------------------------

CAST_DTYPES = [*FLOAT_DTYPES, *INT_DTYPES, np.dtype(np.bool_)]


@pytest.mark.parametrize("target", CAST_DTYPES, ids=str)
@pytest.mark.parametrize("source", CAST_DTYPES, ids=str)
@given(shape=shapes(empty=True), seed=seeds)
def test_cast_matches_torch(source, target, shape, seed):
    """Float->int truncates toward zero, nonzero->True; values stay in the target's range."""
    lo = 0.0 if target.kind == "u" else -100.0
    x = rand(seed, shape, source, lo, 100.0, specials=target == np.bool_)
    (got,) = run_op(lambda v: coreai.cast(v, target), x)
    check(got, to_torch(x).to(TORCH_DTYPE[target]))  # exact: torch and numpy round alike


# -- binary --------------------------------------------------------------------------------------

@st.composite
def broadcast_pair(draw, empty: bool = False):
    """Two shapes that broadcast: suffixes of one base shape with some dims set to 1."""
    base = draw(shapes(empty=empty))

    def variant() -> tuple[int, ...]:
        keep = draw(st.integers(0, len(base)))
        return tuple(d if draw(st.booleans()) else 1 for d in base[len(base) - keep:])

    return variant(), variant()


def _int_div(a, b):
    return torch.div(a, b, rounding_mode="trunc")


# builder, torch function, what operands are valid: "any", "nonzero" rhs, "pos" lhs
ARITH = [
    (coreai.broadcasting_add, torch.add, "any"), (coreai.broadcasting_sub, torch.sub, "any"),
    (coreai.broadcasting_mul, torch.mul, "any"),
    (coreai.broadcasting_floor_divide, torch.floor_divide, "nonzero"),
    (coreai.broadcasting_modulo, torch.fmod, "nonzero"),
    (coreai.broadcasting_remainder, torch.remainder, "nonzero"),
    (coreai.broadcasting_maximum, torch.maximum, "any"),
    (coreai.broadcasting_minimum, torch.minimum, "any"),
]
COMPARE = [
    (coreai.broadcasting_equal, torch.eq), (coreai.broadcasting_not_equal, torch.ne),
    (coreai.broadcasting_greater, torch.gt), (coreai.broadcasting_greater_equal, torch.ge),
    (coreai.broadcasting_less, torch.lt), (coreai.broadcasting_less_equal, torch.le),
]


def _operands(seed: int, shapes_: tuple, dtype, valid: str, specials: bool = False):
    a = rand(seed, shapes_[0], dtype, -10, 10, specials=specials)
    b = rand(seed + 1, shapes_[1], dtype, -10, 10, specials=specials)
    if valid == "nonzero" and dtype.kind in "iu":
        b = np.where(b == 0, b.dtype.type(7), b)
    return a, b


@pytest.mark.parametrize("dtype", [*FLOAT_DTYPES, *INT_DTYPES], ids=str)
@pytest.mark.parametrize("build,ref,valid", ARITH, ids=lambda v: _name(v))
@given(pair=broadcast_pair(empty=True), seed=seeds)
def test_arithmetic_matches_torch(build, ref, valid, dtype, pair, seed):
    """Integers wrap on overflow; division ops follow torch's rounding and signs."""
    a, b = _operands(seed, pair, dtype, valid, specials=dtype.kind == "f")
    (got,) = run_op(build, a, b)
    check(got, ref(to_torch(a), to_torch(b)))  # exact: IEEE ops, halves rounded from float32


@pytest.mark.parametrize("dtype", [*FLOAT_DTYPES, *INT_DTYPES], ids=str)
@given(pair=broadcast_pair(), seed=seeds)
def test_divide_truncates_integers_and_is_true_division_for_floats(dtype, pair, seed):
    a, b = _operands(seed, pair, dtype, "nonzero")
    (got,) = run_op(coreai.broadcasting_divide, a, b)
    want = _int_div if dtype.kind in "iu" else torch.div
    check(got, want(to_torch(a), to_torch(b)), *TOL.get(dtype, (0, 0)))


@pytest.mark.parametrize("build", [coreai.add, coreai.sub, coreai.mul, coreai.divide],
                         ids=_name)
def test_same_shape_binary_ops(build):
    a = rand(1, (3, 47), np.int32)
    b = np.where(rand(2, (3, 47), np.int32) == 0, 3, rand(2, (3, 47), np.int32)).astype(np.int32)
    ref = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "divide": _int_div}
    (got,) = run_op(build, a, b)
    check(got, ref[build.__name__](to_torch(a), to_torch(b)))


@pytest.mark.parametrize("build,ref", [
    (coreai.broadcasting_divide, _int_div), (coreai.broadcasting_floor_divide,
                                             torch.floor_divide),
    (coreai.broadcasting_modulo, torch.fmod), (coreai.broadcasting_remainder, torch.remainder),
], ids=lambda v: _name(v))
def test_integer_division_by_zero_raises_like_torch(build, ref):
    a, b = np.array([5, -5], np.int32), np.array([2, 0], np.int32)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        ref(to_torch(a), to_torch(b))
    with pytest.raises(KernelError, match="division by zero") as info:
        run_op(build, a, b)
    assert isinstance(info.value.__cause__, ZeroDivisionError)


def test_integer_extremes_wrap_like_torch():
    # (torch's truncating division of INT_MIN by -1 traps, so divide is not in the list)
    for dtype in (np.int32, np.int64):
        info = np.iinfo(dtype)
        a = np.array([info.max, info.min, info.min, info.max], dtype)
        b = np.array([1, -1, -1, 2], dtype)
        for build, ref in [(coreai.broadcasting_add, torch.add),
                           (coreai.broadcasting_sub, torch.sub),
                           (coreai.broadcasting_mul, torch.mul),
                           (coreai.broadcasting_floor_divide, torch.floor_divide)]:
            (got,) = run_op(build, a, b)
            check(got, ref(to_torch(a), to_torch(b)))


@pytest.mark.parametrize("dtype", [np.dtype(t) for t in (np.uint16, np.uint32, np.uint64)],
                         ids=str)
@pytest.mark.parametrize("build,ref", [
    (coreai.broadcasting_add, torch.add), (coreai.broadcasting_sub, torch.sub),
    (coreai.broadcasting_mul, torch.mul), (coreai.broadcasting_maximum, torch.maximum),
    (coreai.broadcasting_floor_divide, torch.floor_divide),
], ids=lambda v: _name(v))
@given(pair=broadcast_pair(), seed=seeds)
def test_wide_unsigned_arithmetic_wraps(dtype, build, ref, pair, seed):
    """torch lacks most uint16/32/64 kernels: the reference runs in int64 and wraps."""
    a, b = _operands(seed, pair, dtype, "nonzero")
    (got,) = run_op(build, a, b)
    want = ref(to_torch(a.astype(np.int64)), to_torch(b.astype(np.int64)))
    check(got, want.to(getattr(torch, dtype.name)))


@pytest.mark.parametrize("dtype", [*FLOAT_DTYPES, *INT_DTYPES, np.dtype(np.bool_)], ids=str)
@pytest.mark.parametrize("build,ref", COMPARE, ids=lambda v: _name(v))
@given(pair=broadcast_pair(empty=True), seed=seeds)
def test_comparisons_match_torch(build, ref, dtype, pair, seed):
    a = rand(seed, pair[0], dtype, -2, 2, specials=dtype.kind == "f")
    b = rand(seed + 1, pair[1], dtype, -2, 2, specials=dtype.kind == "f")
    if dtype.kind == "f":
        a, b = np.round(a), np.round(b)  # many equal pairs
    (got,) = run_op(build, a, b)
    check(got, ref(to_torch(a), to_torch(b)))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@given(pair=broadcast_pair(), seed=seeds)
def test_float_pow_and_atan2(dtype, pair, seed):
    base = rand(seed, pair[0], dtype, 0.1, 4)
    exponent = rand(seed + 1, pair[1], dtype, -3, 3)
    (got,) = run_op(coreai.broadcasting_pow, base, exponent)
    check(got, torch.pow(to_torch(base), to_torch(exponent)), *TOL[dtype])
    y = rand(seed + 2, pair[0], dtype, -5, 5, specials=True)
    x = rand(seed + 3, pair[1], dtype, -5, 5, specials=True)
    (got,) = run_op(coreai.broadcasting_atan2, y, x)
    check(got, torch.atan2(to_torch(y), to_torch(x)), *TOL[dtype])


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=str)
@given(pair=broadcast_pair(), seed=seeds)
def test_integer_pow_matches_torch(dtype, pair, seed):
    """Negative exponents give 0 except for bases 1 and -1; overflow wraps."""
    rng = np.random.default_rng(seed)
    lo = 0 if dtype.kind == "u" else -5
    base = rng.integers(lo, 6, size=pair[0]).astype(dtype)
    exponent = rng.integers(lo if dtype.kind == "u" else -3, 12, size=pair[1]).astype(dtype)
    (got,) = run_op(coreai.broadcasting_pow, base, exponent)
    check(got, torch.pow(to_torch(base), to_torch(exponent)))


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=str)
@given(pair=broadcast_pair(), seed=seeds)
def test_shifts_match_torch(dtype, pair, seed):
    """Shifts by a negative amount or the bit width or more follow torch's definition."""
    rng = np.random.default_rng(seed)
    bits = dtype.itemsize * 8
    a = rand(seed, pair[0], dtype)
    lo = 0 if dtype.kind == "u" else -2
    b = rng.integers(lo, bits + 3, size=pair[1]).astype(dtype)
    for build, ref in [(coreai.broadcasting_shift_left, torch.bitwise_left_shift),
                       (coreai.broadcasting_shift_right, torch.bitwise_right_shift)]:
        (got,) = run_op(build, a, b)
        check(got, ref(to_torch(a), to_torch(b)))


@pytest.mark.parametrize("dtype", [np.dtype(np.bool_), *INT_DTYPES], ids=str)
@given(pair=broadcast_pair(empty=True), seed=seeds)
def test_bitwise_and_logical_ops(dtype, pair, seed):
    a, b = rand(seed, pair[0], dtype), rand(seed + 1, pair[1], dtype)
    ops = [(coreai.broadcasting_bitwise_and, torch.bitwise_and),
           (coreai.broadcasting_bitwise_or, torch.bitwise_or),
           (coreai.broadcasting_bitwise_xor, torch.bitwise_xor)]
    if dtype == np.bool_:
        ops += [(coreai.broadcasting_and, torch.logical_and),
                (coreai.broadcasting_or, torch.logical_or),
                (coreai.broadcasting_xor, torch.logical_xor)]
    for build, ref in ops:
        (got,) = run_op(build, a, b)
        check(got, ref(to_torch(a), to_torch(b)))


@pytest.mark.parametrize("dtype", [*FLOAT_DTYPES, np.dtype(np.int64), np.dtype(np.bool_)],
                         ids=str)
@given(base=shapes(), seed=seeds, data=st.data())
def test_where_broadcasts_three_ways(dtype, base, seed, data):
    def sub() -> tuple[int, ...]:
        keep = data.draw(st.integers(0, len(base)))
        return tuple(d if data.draw(st.booleans()) else 1 for d in base[len(base) - keep:])

    cond = rand(seed, sub(), np.bool_)
    a, b = rand(seed + 1, sub(), dtype, specials=True), rand(seed + 2, sub(), dtype)
    (got,) = run_op(coreai.where, cond, a, b)
    check(got, torch.where(to_torch(cond), to_torch(a), to_torch(b)))


# -- softmax -------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@given(shape=shapes(min_rank=1), seed=seeds, data=st.data())
def test_softmax_and_log_softmax(dtype, shape, seed, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = rand(seed, shape, dtype, -30, 30)
    x.reshape(-1)[:: 7] = -np.inf  # masked positions, as in attention
    # float32: exp/sum/log are each within a few ulp, and sums run in a different order.
    rtol, atol = {np.dtype(np.float32): (1e-5, 1e-6)}.get(dtype, TOL[dtype])
    (got,) = run_op(lambda v: coreai.softmax(v, axis=axis), x)
    check(got, torch.softmax(to_torch(x), axis), rtol, atol)
    (got,) = run_op(lambda v: coreai.log_softmax(v, axis=axis), x)
    # log_softmax: the log of the sum contributes an absolute error ~ eps * |x| in float32;
    # torch's half kernels round the sum of exps to the half type before the log, an
    # absolute error up to one ulp of 1.0 (2**-10 float16, 2**-7 bfloat16).
    log_atol = {np.dtype(np.float16): 2**-10, BF16: 2**-7}.get(dtype, 1e-5 * 30)
    check(got, torch.log_softmax(to_torch(x), axis), rtol, max(atol, log_atol))


def test_softmax_is_stable_and_all_masked_rows_are_nan_like_torch():
    x = np.array([[1000.0, 1001.0, -1000.0], [-np.inf, -np.inf, -np.inf]], np.float32)
    (got,) = run_op(coreai.softmax, x)
    check(got, torch.softmax(to_torch(x), -1), 1e-6, 0)  # float32 rounding of exp()
    assert np.isnan(got[1]).all()
