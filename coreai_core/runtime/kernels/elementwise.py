"""Numpy kernels of the elementwise ops, with PyTorch's semantics.

- float16/bfloat16 are computed in float32 and rounded once per op, like PyTorch's CPU
  kernels; float32/float64 are computed in their own precision.
- Integers keep their dtype and wrap on overflow; integer division by zero raises
  ``ZeroDivisionError`` like torch; ``divide`` truncates, ``floor_divide`` floors,
  ``modulo`` is ``torch.fmod`` and ``remainder`` is ``torch.remainder``.
- maximum/minimum propagate NaN; ``sign(NaN)`` is 0 like ``torch.sign``; round is half-even.
- complex64/complex128 use numpy's complex functions (principal branches, like torch); a cast
  from complex to a real type keeps the real part, to bool tests both parts.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import scipy.special

from coreai_core._dtypes import DType
from coreai_core.dialects.coreai import OPS  # the op definitions the kernels document
from coreai_core.registry import Registry
from coreai_core.runtime import _threads
from coreai_core.runtime.kernels._registry import KernelSet

KERNELS = KernelSet("elementwise")
kernel = KERNELS.register

F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)
HALF = frozenset({np.dtype(np.float16), DType.bfloat16.numpy})

# Op name -> (ufunc, dtype kinds, extra operand): for operands of one of these kinds (never
# float16/bfloat16) the kernel computes exactly ``ufunc(*operands, *extra)``, so a compiled
# plan may call the ufunc directly (and with ``out=``); the extra operand is a 0-d array of
# the operands' dtype, or None.
UFUNCS: Registry[tuple[np.ufunc, str, float | None]] = Registry(
    "ufunc row", "the elementwise kernels", callable_entries=False,
    describe=lambda row: f"numpy.{row[0].__name__}")


def up(x: np.ndarray) -> np.ndarray:
    """float16/bfloat16 widened to float32 (the compute type); other dtypes unchanged."""
    return x.astype(F32) if x.dtype in HALF else x


def _named(fn: Callable, op: str, note: str = "") -> Callable:
    """``fn`` named after ``op`` and documented by the op's definition (what it computes),
    then by ``note`` (how this kernel computes it, where that says more)."""
    fn.__name__ = fn.__qualname__ = op.removeprefix("coreai.")
    fn.__doc__ = " ".join(part for part in (OPS[op].doc, note) if part)
    return fn


def _require_nonzero(rhs: np.ndarray) -> None:
    if not np.all(rhs):
        raise ZeroDivisionError("integer division by zero")


# -- constants and casts -------------------------------------------------------------------------

@kernel("coreai.constant")
def constant(*, value: np.ndarray) -> np.ndarray:
    """The constant's data (weights arrive already resolved to arrays)."""
    return value


@kernel("coreai.cast")
def cast(x: np.ndarray, *, dtype: DType) -> np.ndarray:
    """astype: float->int truncates toward zero, nonzero (and NaN) -> True."""
    target = dtype.numpy
    if x.dtype == target:
        return x
    if x.dtype.kind == "c" and target.kind not in "cb":
        x = x.real  # complex -> real keeps the real part, like torch
    if x.dtype in HALF and target.kind != "f":
        x = x.astype(F32)  # bfloat16 -> int or complex goes through float32, exactly
    return x.astype(target)


# -- unary ---------------------------------------------------------------------------------------

def _unary(op: str, fn: Callable[[np.ndarray], np.ndarray], note: str = "") -> None:
    def k(x: np.ndarray) -> np.ndarray:
        if x.dtype in HALF:
            r = fn(x.astype(F32))
            return r.astype(x.dtype) if r.dtype == F32 else r
        return fn(x)

    kernel(op)(_named(k, op, note))
    if isinstance(fn, np.ufunc):
        UFUNCS.register(op, (fn, "fiubc", None))


def _special_unary(op: str, fn: Callable[[np.ndarray], np.ndarray], note: str = "") -> None:
    def k(x: np.ndarray) -> np.ndarray:
        return fn(x.astype(F64).reshape(-1)).reshape(x.shape).astype(x.dtype)

    kernel(op)(_named(k, op, f"{note} Computed in float64, rounded once.".lstrip()))


def _integral_identity(fn: Callable[[np.ndarray], np.ndarray]) -> Callable:
    """Rounding ops leave integers unchanged (numpy would turn them into floats)."""
    return lambda x: x if x.dtype.kind in "iub" else fn(x)


def _sign(x: np.ndarray) -> np.ndarray:
    s = np.sign(x)
    if x.dtype.kind == "f":
        s = np.where(np.isnan(x), x.dtype.type(0), s)  # torch.sign(nan) == 0
    return s


_EXP_ARG_MAX = np.array(709.0)  # exp stays finite in float64 (sigmoid(-709) is 0 in float32)
_ONE64 = np.array(1.0)
# float64 elements per block of ``in_float64_blocks``: a block and its scratch (128 KiB) stay
# in the L2 cache through the passes over them, where whole arrays of 10^5-10^7 elements
# would go through memory on every pass (GELU on 10^7 elements: 2.8x faster, 1.1-1.3x on
# BERT's 4*10^5, where scipy's float64 normal CDF itself takes most of the time).
BLOCK = 8192


def in_float64_blocks(x: np.ndarray, fn: Callable[[np.ndarray, np.ndarray], None],
                      ) -> np.ndarray:
    """``fn`` computed in float64 over x block by block, rounded once to x's dtype.

    ``fn(y, scratch)`` turns ``y`` (a float64 copy of a block of x) into the result in place;
    ``scratch`` is a float64 block of the same size it may use. The same ufuncs on the same
    values as over the whole array: the result is identical, only the memory traffic drops.
    In a run with a thread pool (``Runtime(threads=n)``) the blocks are shared among the
    threads, with the same result.
    """
    if x.size <= BLOCK:  # one block: no loop to set up
        y = x.astype(F64)
        fn(y, np.empty_like(y))
        return y.astype(x.dtype)
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty(flat.shape, x.dtype)

    def blocks(first: int, stop_block: int) -> None:
        size = min(flat.size, BLOCK)
        y_block, scratch_block = np.empty(size, F64), np.empty(size, F64)
        for start in range(first * BLOCK, min(stop_block * BLOCK, flat.size), BLOCK):
            stop = min(start + BLOCK, flat.size)
            y, scratch = y_block[:stop - start], scratch_block[:stop - start]
            y[...] = flat[start:stop]
            fn(y, scratch)
            out[start:stop] = y

    n_blocks = -(-flat.size // BLOCK)
    # work: an exp or a normal CDF in float64 (8-15 ns per element) costs ~16 numpy passes
    work = 16 * _threads.PASS_COST * flat.size
    _threads.parallel_chunks(_threads.fixed_bounds(n_blocks, work), blocks)
    return out.reshape(x.shape)


def _one_plus_exp_neg(y: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``1 + exp(-y)`` into ``out`` (which may be ``y``), the exponent capped at 709."""
    np.negative(y, out=out)
    np.minimum(out, _EXP_ARG_MAX, out=out)
    np.exp(out, out=out)
    return np.add(out, _ONE64, out=out)


def _sigmoid_in_place(y: np.ndarray, _scratch: np.ndarray) -> None:
    np.divide(_ONE64, _one_plus_exp_neg(y, y), out=y)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    if x.dtype.kind == "c":
        return 1 / (1 + np.exp(-x))
    if x.dtype != F64:
        # 1 / (1 + exp(-x)) in float64, rounded once: the correctly rounded float32 result
        # (short of a ~1e-16-relative tie). scipy's expit does it in one call, fastest on
        # small arrays; numpy's vectorized exp is faster on large ones.
        if x.size <= 256:
            return scipy.special.expit(x.astype(F64)).astype(x.dtype)
        return in_float64_blocks(x, _sigmoid_in_place)
    e = np.exp(-np.abs(x))  # never overflows (so tiny results keep their subnormal value)
    one = x.dtype.type(1)
    return np.where(x >= 0, one / (one + e), e / (one + e))


def _at_minus_inf_zero(x: np.ndarray, r: np.ndarray) -> np.ndarray:
    """``r`` with -0.0 where ``x`` is -inf: x * f(x) with f(x) -> 0 faster than x grows (silu,
    gelu) tends to -0.0 there, where the product's -inf * 0 gives NaN."""
    if (x.dtype.kind == "f" or x.dtype in HALF) and np.isneginf(x).any():
        return np.where(x == -np.inf, r.dtype.type(-0.0), r)
    return r


def _silu_in_place(y: np.ndarray, scratch: np.ndarray) -> None:
    np.divide(y, _one_plus_exp_neg(y, scratch), out=y)


def _silu(x: np.ndarray) -> np.ndarray:
    if x.dtype.kind == "f" and x.dtype != F64:
        # x / (1 + exp(-x)) in float64, rounded once (the correctly rounded result)
        return _at_minus_inf_zero(x, in_float64_blocks(x, _silu_in_place))
    return _at_minus_inf_zero(x, x * _sigmoid(x))


def _rsqrt(x: np.ndarray) -> np.ndarray:
    # float32 and narrower in float64, rounded once: 1 / sqrt(x) in float32 rounds twice and
    # is off by one ulp on ~15% of inputs
    if x.dtype.kind == "f" and x.dtype.itemsize < 8:
        return (1 / np.sqrt(x.astype(F64))).astype(x.dtype)
    return 1 / np.sqrt(x)


_UNARY: list[tuple[str, Callable[[np.ndarray], np.ndarray], str]] = [
    ("coreai.abs", np.abs, "Integers wrap at their minimum."),
    ("coreai.neg", np.negative, ""),
    ("coreai.sign", _sign, ""),
    ("coreai.floor", _integral_identity(np.floor), ""),
    ("coreai.ceil", _integral_identity(np.ceil), ""),
    ("coreai.round", _integral_identity(np.rint), ""),
    ("coreai.trunc", _integral_identity(np.trunc), ""),
    ("coreai.relu", lambda x: np.maximum(x, x.dtype.type(0)), "NaN propagates."),
    ("coreai.acos", np.arccos, ""),
    ("coreai.acosh", np.arccosh, ""),
    ("coreai.asin", np.arcsin, ""),
    ("coreai.asinh", np.arcsinh, ""),
    ("coreai.atan", np.arctan, ""),
    ("coreai.atanh", np.arctanh, ""),
    ("coreai.cos", np.cos, ""),
    ("coreai.cosh", np.cosh, ""),
    ("coreai.sin", np.sin, ""),
    ("coreai.sinh", np.sinh, ""),
    ("coreai.tan", np.tan, ""),
    ("coreai.tanh", np.tanh, ""),
    ("coreai.exp", np.exp, ""),
    ("coreai.exp2", np.exp2, ""),
    ("coreai.expm1", np.expm1, ""),
    ("coreai.log", np.log, ""),
    ("coreai.log2", np.log2, ""),
    ("coreai.log10", np.log10, ""),
    ("coreai.log1p", np.log1p, ""),
    ("coreai.sqrt", np.sqrt, ""),
    ("coreai.rsqrt", _rsqrt, "Rounded once: computed in float64 for float32 and narrower."),
    ("coreai.reciprocal", lambda x: 1 / x, ""),
    ("coreai.sigmoid", _sigmoid, "Computed without overflow."),
    ("coreai.silu", _silu, "-0.0 at -inf (the limit)."),
    ("coreai.not", np.logical_not, ""),
    ("coreai.bitwise_not", np.invert, ""),
    ("coreai.isnan", np.isnan, ""),
    ("coreai.isinf", np.isinf, ""),
]
for _op, _fn, _note in _UNARY:
    _unary(_op, _fn, _note)

for _op, _row in {"coreai.floor": (np.floor, "f", None), "coreai.ceil": (np.ceil, "f", None),
                  "coreai.round": (np.rint, "f", None), "coreai.trunc": (np.trunc, "f", None),
                  "coreai.relu": (np.maximum, "fi", 0)}.items():
    UFUNCS.register(_op, _row)

def _erfinv(x: np.ndarray) -> np.ndarray:
    """scipy's erfinv, keeping the sign of zero (erfinv is odd: erfinv(-0) = -0)."""
    return np.where(x == 0, x, scipy.special.erfinv(x))


def _lgamma(x: np.ndarray) -> np.ndarray:
    """log|Gamma(x)|; +inf at -inf like torch (scipy's gammaln gives -inf there)."""
    return np.where(x == -np.inf, np.inf, scipy.special.gammaln(x))


for _op, _fn, _note in [
    ("coreai.erf", scipy.special.erf, ""),
    ("coreai.erfinv", _erfinv, ""),
    ("coreai.lgamma", _lgamma, ""),
    ("coreai.digamma", scipy.special.psi, "-inf at +0, +inf at -0, NaN at the negative integers."),
]:
    _special_unary(_op, _fn, _note)


def _gelu_in_place(y: np.ndarray, scratch: np.ndarray) -> None:
    # x * Phi(x) with scipy's normal CDF: it takes erfc in the left tail, where
    # 0.5 * (1 + erf(x / sqrt(2))) cancels (wrong float32 results below x = -5.4)
    scipy.special.ndtr(y, out=scratch)
    y *= scratch


@kernel("coreai.gelu")
def gelu(x: np.ndarray, *, approximate: str) -> np.ndarray:
    """x * Phi(x), exact (in float64, rounded once) or with torch's tanh approximation;
    the limits at +-inf (+inf and -0.0), NaN at NaN."""
    if approximate == "tanh":
        y = up(x)
        inner = math.sqrt(2 / math.pi) * (y + 0.044715 * y * y * y)
        r = (0.5 * y * (1 + np.tanh(inner))).astype(x.dtype)
    else:
        r = in_float64_blocks(x, _gelu_in_place)
    return _at_minus_inf_zero(x, r)


@kernel("coreai.softmax")
def softmax(x: np.ndarray, *, axis: int) -> np.ndarray:
    """exp(x - max) / sum, along ``axis`` (float32 compute for half types); in fixed blocks
    of the axes before ``axis`` on the run's pool."""
    if x.size == 0:
        return x.copy()
    if x.ndim > 1 and x.size >= _threads.BLOCK_WORK // _threads.PASS_COST:
        axis %= x.ndim
        # 6 passes: max, subtract, exp (costlier), sum, divide
        return _threads.in_row_blocks(x, axis, 6,
                                      lambda rows: _softmax(rows, axis=1))
    return _softmax(x, axis=axis)


def _softmax(x: np.ndarray, *, axis: int) -> np.ndarray:
    y = up(x)
    top = np.max(y, axis=axis, keepdims=True)
    e = np.subtract(y, top)  # a fresh array: the next steps write into it
    np.exp(e, out=e)
    np.divide(e, np.sum(e, axis=axis, keepdims=True), out=e)
    out = e.astype(x.dtype, copy=False)
    return _at_plus_inf(y, top, axis, out, np.float32(1.0), np.float32(0.0))


def _at_plus_inf(y: np.ndarray, top: np.ndarray, axis: int, out: np.ndarray,
                 at_inf: np.floating, elsewhere: np.floating) -> np.ndarray:
    """Rows (along ``axis``) with exactly one +inf and no NaN: the limit as that entry grows,
    ``at_inf`` there and ``elsewhere`` elsewhere (exp(inf - inf) gives NaN). Several +inf
    have no limit (the result stays NaN), as do rows of NaN or of only -inf."""
    if y.dtype.kind != "f" or not np.isposinf(top).any():
        return out
    is_inf = y == np.inf
    one = (np.sum(is_inf, axis=axis, keepdims=True) == 1) & ~np.isnan(y).any(axis=axis,
                                                                            keepdims=True)
    return np.where(one, np.where(is_inf, at_inf, elsewhere), out).astype(out.dtype)


@kernel("coreai.log_softmax")
def log_softmax(x: np.ndarray, *, axis: int) -> np.ndarray:
    """x - max - log(sum(exp(x - max))) along ``axis``."""
    if x.size == 0:
        return x.copy()
    y = up(x)
    top = np.max(y, axis=axis, keepdims=True)
    shifted = y - top
    out = shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))
    return _at_plus_inf(y, top, axis, out.astype(x.dtype, copy=False), np.float32(0.0),
                        np.float32(-np.inf))


# -- binary --------------------------------------------------------------------------------------

def _binary(ops: tuple[str, ...], fn: Callable[[np.ndarray, np.ndarray], np.ndarray],
            int_fn: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None, *,
            note: str = "") -> None:
    """Register ``fn`` for each op name; ``int_fn`` handles integer/bool operands."""
    for op in ops:  # a kernel function per op: each is named and documented after its op
        kernel(op)(_named(_binary_kernel(fn, int_fn), op, note))
        if isinstance(fn, np.ufunc):
            UFUNCS.register(op, (fn, "fc" if int_fn is not None else "fiubc", None))


def _binary_kernel(fn: Callable[[np.ndarray, np.ndarray], np.ndarray],
                   int_fn: Callable[[np.ndarray, np.ndarray], np.ndarray] | None,
                   ) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def k(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        dt = lhs.dtype
        if dt in HALF:
            r = fn(lhs.astype(F32), rhs.astype(F32))
            return r.astype(dt) if r.dtype == F32 else r
        if int_fn is not None and dt.kind in "iub":
            return int_fn(lhs, rhs)
        return fn(lhs, rhs)

    return k


def _both(name: str) -> tuple[str, str]:
    return (f"coreai.broadcasting_{name}", f"coreai.{name}")


def _int_divide(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """C division: the quotient rounds toward zero (INT_MIN / -1 wraps like torch)."""
    _require_nonzero(rhs)
    if lhs.dtype.kind != "i":
        return np.floor_divide(lhs, rhs)
    # lhs - fmod(lhs, rhs) is an exact multiple of rhs, so flooring it truncates.
    return np.floor_divide(lhs - np.fmod(lhs, rhs), rhs)


def _checked(fn: Callable) -> Callable:
    def k(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        _require_nonzero(rhs)
        return fn(lhs, rhs)

    return k


def _int_pow(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Integer power like torch: a negative exponent gives 0 unless the base is +-1."""
    if rhs.dtype.kind == "u" or not np.any(rhs < 0):
        return np.power(lhs, rhs)
    neg = rhs < 0
    r = np.power(lhs, np.where(neg, rhs.dtype.type(0), rhs))
    odd = (rhs % 2) != 0
    special = np.where(lhs == 1, 1, np.where(lhs == -1, np.where(odd, -1, 1), 0))
    return np.where(neg, special, r).astype(r.dtype)


def _shifted(lhs: np.ndarray, rhs: np.ndarray, shift: np.ufunc,
             out_of_range: Callable[[np.ndarray], np.ndarray | np.generic]) -> np.ndarray:
    """``shift(lhs, rhs)`` in lhs's width, and ``out_of_range(lhs)`` (torch's result) where
    the shift is < 0 or >= the bit width."""
    if lhs.dtype == np.bool_:
        return _shifted(lhs.astype(np.uint8), rhs.astype(np.uint8), shift,
                        out_of_range).astype(bool)
    bits = lhs.dtype.itemsize * 8
    bad = (rhs < 0) | (rhs >= bits)
    r = shift(lhs, np.where(bad, rhs.dtype.type(0), rhs))
    return np.where(bad, out_of_range(lhs), r)


def _shift_left(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """lhs << rhs in lhs's width; shifts < 0 or >= the bit width give 0 like torch."""
    return _shifted(lhs, rhs, np.left_shift, lambda x: x.dtype.type(0))


def _sign_fill(x: np.ndarray) -> np.ndarray | np.generic:
    return np.where(x < 0, x.dtype.type(-1), x.dtype.type(0)) if x.dtype.kind == "i" \
        else x.dtype.type(0)


def _shift_right(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Arithmetic shift for signed types; out-of-range shifts fill with the sign like torch."""
    return _shifted(lhs, rhs, np.right_shift, _sign_fill)


_binary(_both("add"), np.add, note="Integers wrap.")
_binary(_both("sub"), np.subtract, note="Integers wrap.")
_binary(_both("mul"), np.multiply, note="Integers wrap.")
_binary(_both("divide"), np.true_divide, _int_divide)
_binary(("coreai.broadcasting_floor_divide",), np.floor_divide, _checked(np.floor_divide))
_binary(("coreai.broadcasting_modulo",), np.fmod, _checked(np.fmod))
_binary(("coreai.broadcasting_remainder",), np.remainder, _checked(np.remainder))
_binary(("coreai.broadcasting_pow",), np.power, _int_pow)
_binary(("coreai.broadcasting_atan2",), np.arctan2)
_binary(("coreai.broadcasting_maximum",), np.maximum)
_binary(("coreai.broadcasting_minimum",), np.minimum)
_binary(("coreai.broadcasting_equal",), np.equal)
_binary(("coreai.broadcasting_not_equal",), np.not_equal)
_binary(("coreai.broadcasting_greater",), np.greater)
_binary(("coreai.broadcasting_greater_equal",), np.greater_equal)
_binary(("coreai.broadcasting_less",), np.less)
_binary(("coreai.broadcasting_less_equal",), np.less_equal)
_binary(("coreai.broadcasting_and",), np.logical_and)
_binary(("coreai.broadcasting_or",), np.logical_or)
_binary(("coreai.broadcasting_xor",), np.logical_xor)
_binary(("coreai.broadcasting_bitwise_and",), np.bitwise_and)
_binary(("coreai.broadcasting_bitwise_or",), np.bitwise_or)
_binary(("coreai.broadcasting_bitwise_xor",), np.bitwise_xor)
_binary(("coreai.broadcasting_shift_left",), np.left_shift, _shift_left)
_binary(("coreai.broadcasting_shift_right",), np.right_shift, _shift_right)


@kernel("coreai.broadcasting_where")
def broadcasting_where(condition: np.ndarray, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """lhs where condition else rhs, broadcast together."""
    return np.where(condition, lhs, rhs)
