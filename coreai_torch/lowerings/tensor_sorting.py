"""Built-in lowerings (tensor family): reductions that scan or order elements: cumulative ops, sort,
topk, medians.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import numpy as np

from coreai_core import DType, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._common import scalar_like
from coreai_torch.lowerings._nn_utils import STATIC_WORKAROUND, dim_value
from coreai_torch.lowerings._reduce import (
    axis_size,
    index_zero,
    iota,
    ordered,
    scan_acc_dtype,
)
from coreai_torch.utils import cast_to, normalize_dim, result_dtype

LOWERINGS = LoweringSet("tensor_sorting")
reg = LOWERINGS.register_torch_lowering


# -- scans --------------------------------------------------------------------------------------

def _cumulative(kind: Literal["sum", "product"]) -> Callable[..., Value]:
    def lowering(self: Value, dim: int, dtype: DType | None = None) -> Value:
        out = result_dtype()
        axis = normalize_dim(dim, self.type.rank)
        # torch converts to ``dtype`` (int64 for ints/bool) and accumulates in acc_type.
        x = cast_to(cast_to(self, out), scan_acc_dtype(out))
        if x.type.rank == 0:
            return cast_to(x, out)
        return cast_to(coreai.scan(x, axis=axis, kind=kind), out)

    name = "cumsum" if kind == "sum" else "cumprod"
    lowering.__doc__ = f"{name}(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor"
    return lowering


reg("aten::cumsum.default")(_cumulative("sum"))
reg("aten::cumprod.default")(_cumulative("product"))


def _cum_extremum(kind: Literal["max", "min"]) -> Callable[..., list[Value]]:
    """cummax/cummin: running values and the index of the latest extremum (latest NaN)."""

    def lowering(self: Value, dim: int) -> list[Value]:
        x = self
        axis = normalize_dim(dim, x.type.rank)
        if x.type.rank == 0:
            return [x, index_zero()]
        xo = ordered(x)
        values = coreai.scan(xo, axis=axis, kind=kind)
        # torch moves the index whenever x[j] >= running (<= for min) or x[j] is NaN, i.e.
        # whenever x[j] equals the new running value; the index is then a running max of j.
        hit = coreai.broadcasting_equal(xo, values)
        if x.type.element_type.is_float:
            hit = coreai.broadcasting_or(hit, coreai.isnan(xo))
        positions = coreai.broadcasting_where(hit, iota(x, axis), index_zero())
        indices = coreai.scan(positions, axis=axis, kind="max")
        return [cast_to(values, x.type.element_type), indices]

    lowering.__doc__ = f"cum{kind}(Tensor self, int dim) -> (Tensor values, Tensor indices)"
    return lowering


reg("aten::cummax.default")(_cum_extremum("max"))
reg("aten::cummin.default")(_cum_extremum("min"))


def _logaddexp(a: Value, b: Value) -> Value:
    """log(exp(a) + exp(b)) without overflow; -inf/+inf handled like torch."""
    hi = coreai.broadcasting_maximum(a, b)
    lo = coreai.broadcasting_minimum(a, b)
    s = coreai.broadcasting_add(
        hi, coreai.log1p(coreai.exp(coreai.broadcasting_sub(lo, hi))))
    # lo == -inf: the sum is hi (also when both are -inf); hi == +inf: the sum is +inf.
    infinite = coreai.broadcasting_or(
        coreai.broadcasting_equal(lo, scalar_like(-math.inf, lo)),
        coreai.broadcasting_equal(hi, scalar_like(math.inf, hi)))
    return coreai.broadcasting_where(infinite, hi, s)


@reg("aten::logcumsumexp.default")
def aten_logcumsumexp_default(self: Value, dim: int) -> Value:
    """logcumsumexp(Tensor self, int dim) -> Tensor

    A log-depth (Hillis-Steele) scan of logaddexp: accurate for any input range, where one
    max-shifted cumsum would underflow for inputs far below the axis maximum.
    """
    out = result_dtype()
    axis = normalize_dim(dim, self.type.rank)
    # complex64 accumulates in complex128, as torch's acc_type
    acc = DType.complex128 if out.is_complex else scan_acc_dtype(out)
    y = cast_to(cast_to(self, out), acc)
    if y.type.rank == 0:
        return cast_to(y, out)
    n = y.type.shape[axis]
    if not isinstance(n, int):
        if out.is_complex:
            raise NotImplementedError(
                f"logcumsumexp of a complex tensor needs a static size along dim {dim}; "
                f"export that dim static")
        return cast_to(_logcumsumexp_loop(y, axis), out)
    if out.is_complex:
        return cast_to(_complex_logcumsumexp(y, axis, n), out)
    return cast_to(_log_scan(y, axis, n, _logaddexp), out)


def _shifted(y: Value, axis: int, n: int, step: int) -> Value:
    """``y`` moved ``step`` places forward along ``axis``, -inf shifted in at the front."""
    head = coreai.slice_(y, [0], [n - step], axes=[axis], strides=[1])
    pads = [0] * (2 * y.type.rank)
    pads[2 * axis] = step
    return coreai.pad(head, pads, mode="constant", value=-math.inf)


def _log_scan(y: Value, axis: int, n: int, add: Callable[[Value, Value], Value]) -> Value:
    """A log-depth (Hillis-Steele) inclusive scan of ``add`` along ``axis``."""
    step = 1
    while step < n:
        y = add(y, _shifted(y, axis, n, step))  # y[i] <- add(y[i], y[i - step])
        step *= 2
    return y


def _complex_logaddexp(a: Value, b: Value) -> Value:
    """log(exp(a) + exp(b)) for complex a, b, shifted by the one with the larger real part."""
    a_hi = coreai.broadcasting_greater_equal(coreai.real(a), coreai.real(b))
    hi = coreai.broadcasting_where(a_hi, a, b)
    lo = coreai.broadcasting_where(a_hi, b, a)
    s = coreai.broadcasting_add(hi, coreai.log1p(coreai.exp(coreai.broadcasting_sub(lo, hi))))
    lo_re = coreai.real(lo)
    return coreai.broadcasting_where(
        coreai.broadcasting_equal(lo_re, scalar_like(-math.inf, lo_re)), hi, s)


def _wrap(angle: Value) -> Value:
    """An angle reduced to the principal range [-pi, pi]."""
    turns = coreai.round_(coreai.broadcasting_divide(angle, scalar_like(2 * math.pi, angle)))
    return coreai.broadcasting_sub(
        angle, coreai.broadcasting_mul(turns, scalar_like(2 * math.pi, angle)))


def _complex_logcumsumexp(z: Value, axis: int, n: int) -> Value:
    """logcumsumexp of a complex128 ``z``, on torch's branch of the logarithm.

    The real parts are log|cumsum(exp(z))|. The imaginary parts are only defined modulo 2*pi;
    torch's CPU kernel picks them with the recurrence ``y[k] = M + log1p(exp(m - M))``, where
    M and m are y[k-1] and z[k] ordered by real part (z[k] is M on ties). Each step adds a
    principal angle in [-pi/2, pi/2] to the imaginary part of M, so: where z[k] is M (a
    "reset") the result is imag(z[k]) + wrap(arg S[k] - imag(z[k])); elsewhere it is the
    previous result + wrap(arg S[k] - arg S[k-1]). A log-depth scan gives arg S, a cumsum of
    the increments and a gather at the latest reset give the branch. A result of -inf (only
    -inf real parts so far) has imaginary part 0, as torch's. Two +inf real parts are not
    handled as torch (which adds complex infinities): the result is NaN.
    """
    total = _log_scan(z, axis, n, _complex_logaddexp)  # log S[k], any branch
    theta = coreai.imag(total)
    before = _shifted(total, axis, n, 1)  # log S[k-1]; -inf + 0j before the first
    reset = coreai.broadcasting_greater_equal(coreai.real(z), coreai.real(before))
    zero = scalar_like(0.0, theta)
    steps = coreai.broadcasting_where(
        reset, zero, _wrap(coreai.broadcasting_sub(theta, coreai.imag(before))))
    climbed = coreai.scan(steps, axis=axis, kind="sum")
    z_im = coreai.imag(z)
    start = coreai.broadcasting_add(z_im, _wrap(coreai.broadcasting_sub(theta, z_im)))
    base = coreai.broadcasting_where(reset, coreai.broadcasting_sub(start, climbed), zero)
    latest = coreai.scan(coreai.broadcasting_where(reset, iota(z, axis), index_zero()),
                         axis=axis, kind="max")
    imag = coreai.broadcasting_add(coreai.gather_along_axis(base, latest, axis=axis), climbed)
    re = coreai.real(total)
    empty = coreai.broadcasting_equal(re, scalar_like(-math.inf, re))
    imag = coreai.broadcasting_where(empty, zero, imag)
    # a NaN (in either part) makes both parts NaN from there on, as in torch
    nan = coreai.isnan(total)
    re, imag = (coreai.broadcasting_where(nan, scalar_like(math.nan, p), p) for p in (re, imag))
    return coreai.complex_(re, imag)


def _logcumsumexp_loop(y: Value, axis: int) -> Value:
    """The same scan over a run-time sized axis, as a loop: while ``step < size``,
    ``y[i] <- logaddexp(y[i], y[i - step])`` (-inf where ``i < step``) and ``step *= 2``."""
    others = [a for a in range(y.type.rank) if a != axis]

    def size(v: Value) -> Value:
        return cast_to(dim_value(v, axis), DType.int64)

    def cond(v: Value, step: Value) -> Value:
        return coreai.broadcasting_less(step, size(v))

    def body(v: Value, step: Value) -> list[Value]:
        zero = coreai.constant(np.asarray(0, np.int64))
        positions = coreai.range_(zero, size(v), coreai.constant(np.asarray(1, np.int64)))
        source = coreai.broadcasting_maximum(coreai.broadcasting_sub(positions, step), zero)
        valid = coreai.broadcasting_greater_equal(positions, step)
        if others:
            valid = coreai.expand_dims(valid, others)
        shifted = coreai.broadcasting_where(valid, coreai.gather(v, source, axis=axis),
                                            scalar_like(-math.inf, v))
        # v leads every broadcast in _logaddexp, so the carried type (its dims) is kept
        doubled = coreai.broadcasting_mul(step, coreai.constant(np.asarray(2, np.int64)))
        return [_logaddexp(v, shifted), doubled]

    init = [y, coreai.constant(np.asarray(1, np.int64))]
    y_final, _ = coreai.while_(init, cond=cond, body=body)
    return y_final


# -- sort, topk ---------------------------------------------------------------------------------

def _sort(x: Value, dim: int, descending: bool) -> list[Value]:
    axis = normalize_dim(dim, x.type.rank)
    if x.type.rank == 0:
        return [x, index_zero()]
    values, indices = coreai.sort(ordered(x), axis=axis, descending=descending,
                                  stable=True)
    return [cast_to(values, x.type.element_type), indices]


@reg("aten::sort.default")
def aten_sort_default(self: Value, dim: int = -1, descending: bool = False) -> list[Value]:
    """sort(Tensor self, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)

    Always sorted stably (a stable order is one of the orders an unstable sort may give).
    """
    return _sort(self, dim, descending)


@reg("aten::sort.stable")
def aten_sort_stable(self: Value, stable: bool | None, dim: int = -1,
                     descending: bool = False) -> list[Value]:
    """sort.stable(Tensor self, *, bool? stable, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)"""  # noqa: E501
    return _sort(self, dim, descending)


@reg("aten::topk.default")
def aten_topk_default(self: Value, k: int | Value, dim: int = -1, largest: bool = True,
                      sorted: bool = True) -> list[Value]:
    """topk(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor values, Tensor indices)"""  # noqa: E501
    x = self
    if isinstance(k, Value):
        raise NotImplementedError(f"topk needs a static k, got a symbolic one (a size of a "
                                  f"dynamic dim); {STATIC_WORKAROUND}")
    axis = normalize_dim(dim, x.type.rank)
    if x.type.rank == 0:
        if k != 1:
            raise NotImplementedError(f"topk with k={k} of a 0-d tensor")
        return [x, index_zero()]
    values, indices = coreai.topk(ordered(x), int(k), axis=axis, largest=largest, sorted=sorted)
    return [cast_to(values, x.type.element_type), indices]


# -- order statistics ---------------------------------------------------------------------------

def _kth(x: Value, axis: int, k: int | Value) -> tuple[Value, Value]:
    """The k-th smallest (0-based; NaN sorts last) along ``axis`` and its index, keep_dims.

    ``k`` is a static int, a 0-d int64 Value, or an int64 Value of the keep_dims shape.
    """
    values, indices = coreai.sort(ordered(x), axis=axis, stable=True)
    begin: list[int] | Value
    end: list[int] | Value
    if isinstance(k, int):
        begin, end = [k], [k + 1]
    elif k.type.rank == 0:
        begin = coreai.reshape(k, [1])
        end = coreai.broadcasting_add(begin, scalar_like(1, begin))
    else:
        value = coreai.gather_along_axis(values, k, axis=axis)
        index = coreai.gather_along_axis(indices, k, axis=axis)
        return cast_to(value, x.type.element_type), index
    value = coreai.slice_(values, begin, end, axes=[axis], strides=[1])
    index = coreai.slice_(indices, begin, end, axes=[axis], strides=[1])
    return cast_to(value, x.type.element_type), index


def _median(x: Value, axis: int, ignore_nan: bool) -> tuple[Value, Value]:
    """torch.median / nanmedian along ``axis`` (keep_dims): the lower median.

    median: NaN and the index of the first NaN when the slice has one. nanmedian: the lower
    median of the non-NaN elements (NaN when there are none).
    """
    is_float = x.type.element_type.is_float
    i64 = DType.int64
    if ignore_nan and is_float:
        valid = coreai.not_(coreai.isnan(x))
        count = coreai.reduce_sum(cast_to(valid, i64), axes=[axis], keep_dims=True)
        lower = coreai.broadcasting_floor_divide(
            coreai.broadcasting_sub(count, coreai.constant(1, dtype=i64)),
            coreai.constant(2, dtype=i64))
        return _kth(x, axis, coreai.broadcasting_maximum(lower, index_zero()))
    n = axis_size(x, axis)
    if isinstance(n, int):
        if n == 0:
            raise NotImplementedError("median of an empty dimension")
        k: int | Value = (n - 1) // 2
    else:
        k = coreai.broadcasting_floor_divide(
            coreai.broadcasting_sub(n, coreai.constant(1, dtype=i64)),
            coreai.constant(2, dtype=i64))
    value, index = _kth(x, axis, k)
    if is_float:
        nan = coreai.isnan(x)
        has_nan = coreai.any_(nan, axes=[axis], keep_dims=True)
        value = coreai.broadcasting_where(has_nan, scalar_like(math.nan, value), value)
        first_nan = coreai.argmax(cast_to(nan, DType.uint8), axis=axis, keep_dims=True)
        index = coreai.broadcasting_where(has_nan, first_nan, index)
    return value, index


def _median_all(ignore_nan: bool) -> Callable[..., Value]:
    def lowering(self: Value) -> Value:
        value, _ = _median(coreai.reshape(self, [-1]), 0, ignore_nan)
        return coreai.shrink_dims(value, [0])

    name = "nanmedian" if ignore_nan else "median"
    lowering.__doc__ = f"{name}(Tensor self) -> Tensor: the lower median of all elements."
    return lowering


def _median_dim(ignore_nan: bool) -> Callable[..., list[Value]]:
    def lowering(self: Value, dim: int, keepdim: bool = False) -> list[Value]:
        axis = normalize_dim(dim, self.type.rank)
        if self.type.rank == 0:
            return [self, index_zero()]
        value, index = _median(self, axis, ignore_nan)
        if not keepdim:
            value = coreai.shrink_dims(value, [axis])
            index = coreai.shrink_dims(index, [axis])
        return [value, index]

    name = "nanmedian" if ignore_nan else "median"
    lowering.__doc__ = (f"{name}.dim(Tensor self, int dim, bool keepdim=False) -> "
                        "(Tensor values, Tensor indices)")
    return lowering


reg("aten::median.default")(_median_all(False))
reg("aten::nanmedian.default")(_median_all(True))
reg("aten::median.dim")(_median_dim(False))
reg("aten::nanmedian.dim")(_median_dim(True))


@reg("aten::kthvalue.default")
def aten_kthvalue_default(self: Value, k: int, dim: int = -1, keepdim: bool = False,
                          ) -> list[Value]:
    """kthvalue(Tensor self, int k, int dim=-1, bool keepdim=False) -> (Tensor values, Tensor indices)"""  # noqa: E501
    axis = normalize_dim(dim, self.type.rank)
    if self.type.rank == 0:
        return [self, index_zero()]
    value, index = _kth(self, axis, k - 1)
    if not keepdim:
        value = coreai.shrink_dims(value, [axis])
        index = coreai.shrink_dims(index, [axis])
    return [value, index]
