"""Built-in lowerings (tensor family): reductions, arg-reductions, variance, norms, softmax, scans,
sorting.

Precision follows torch's CPU kernels: float16/bfloat16 sums, means, norms and softmaxes
accumulate in float32 and round once; variance accumulates in float64 (torch's Welford uses
double). Integer and bool sums/products accumulate in the dtype torch returns (int64).
Scans, sort, topk and the order statistics are the ``sorting`` family.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from coreai_core import DType, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._reduce import (
    acc_dtype,
    element_count,
    index_zero,
    ordered,
    reduce,
    reduced_axes,
    truthy,
)
from coreai_torch.utils import cast_to, normalize_dim, result_dtype, scalar_like

LOWERINGS = LoweringSet("tensor_reduction")
reg = LOWERINGS.register_torch_lowering

# -- sum, prod, mean ---------------------------------------------------------------------------


def _accumulate(builder: Callable[..., Value], has_dim: bool) -> Callable[..., Value]:
    """sum/prod: the input is converted to the result dtype (ints -> int64, or ``dtype=``)."""

    def reduce_all(self: Value, dtype: DType | None = None) -> Value:
        return reduce_dims(self, None, False, dtype)

    def reduce_dims(self: Value, dim: list[int] | int | None, keepdim: bool = False,
                    dtype: DType | None = None) -> Value:
        out = result_dtype()
        x = cast_to(cast_to(self, out), acc_dtype(out))
        return cast_to(reduce(builder, x, reduced_axes(dim, x.type.rank), keepdim), out)

    lowering = reduce_dims if has_dim else reduce_all
    lowering.__doc__ = f"Accumulating reduction onto {builder.__name__}."
    return lowering


reg("aten::sum.dim_IntList")(_accumulate(coreai.reduce_sum, True))
reg("aten::sum.default")(_accumulate(coreai.reduce_sum, False))
reg("aten::prod.dim_int")(_accumulate(coreai.reduce_product, True))
reg("aten::prod.default")(_accumulate(coreai.reduce_product, False))


@reg("aten::mean.dim")
@reg("aten::mean.default")
def aten_mean_dim(self: Value, dim: list[int] | None = None, keepdim: bool = False,
                  dtype: DType | None = None) -> Value:
    """mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor"""  # noqa: E501
    out = result_dtype()
    x = self
    if x.type.element_type.is_float:
        x = cast_to(x, out)
    # integers go straight to the accumulation type: torch sums them in float32 for a
    # float16/bfloat16 dtype (no overflow or rounding of each element to the half type)
    x = cast_to(x, acc_dtype(out))
    return cast_to(reduce(coreai.reduce_mean, x, reduced_axes(dim, x.type.rank), keepdim), out)


# -- max, min, argmax, any, all -----------------------------------------------------------------

def _extremum(builder: Callable[..., Value], *, has_dim: bool) -> Callable[..., Value]:
    def reduce_all(self: Value) -> Value:
        return reduce(builder, self, None, False)

    def reduce_dims(self: Value, dim: list[int] | None = None, keepdim: bool = False) -> Value:
        # amax/amin's dim defaults to [] (every axis)
        return reduce(builder, self, reduced_axes(dim, self.type.rank), keepdim)

    lowering = reduce_dims if has_dim else reduce_all
    lowering.__doc__ = f"Reduction onto {builder.__name__} (NaN propagates)."
    return lowering


reg("aten::amax.default")(_extremum(coreai.reduce_max, has_dim=True))
reg("aten::amin.default")(_extremum(coreai.reduce_min, has_dim=True))
reg("aten::max.default")(_extremum(coreai.reduce_max, has_dim=False))
reg("aten::min.default")(_extremum(coreai.reduce_min, has_dim=False))


def _with_index(builder: Callable[..., Value], arg: Callable[..., Value],
                ) -> Callable[..., list[Value]]:
    """max.dim/min.dim: values and the int64 index of the first extremum (first NaN)."""

    def lowering(self: Value, dim: int, keepdim: bool = False) -> list[Value]:
        if self.type.rank == 0:
            normalize_dim(dim, 0)
            return [self, index_zero()]
        axis = normalize_dim(dim, self.type.rank)
        values = reduce(builder, self, [axis], keepdim)
        return [values, arg(ordered(self), axis=axis, keep_dims=keepdim)]

    lowering.__doc__ = f"Values by {builder.__name__}, indices by {arg.__name__}."
    return lowering


reg("aten::max.dim")(_with_index(coreai.reduce_max, coreai.argmax))
reg("aten::min.dim")(_with_index(coreai.reduce_min, coreai.argmin))


def _arg_reduction(arg: Callable[..., Value]) -> Callable[..., Value]:
    def lowering(self: Value, dim: int | None = None, keepdim: bool = False) -> Value:
        axis = None if dim is None else normalize_dim(dim, self.type.rank)
        if self.type.rank == 0:
            axis = None
        return arg(self, axis=axis, keep_dims=keepdim)

    lowering.__doc__ = f"{arg.__name__}(Tensor self, int? dim=None, bool keepdim=False) -> Tensor"
    return lowering


reg("aten::argmax.default")(_arg_reduction(coreai.argmax))
reg("aten::argmin.default")(_arg_reduction(coreai.argmin))


def _truth(builder: Callable[..., Value], overload: str) -> Callable[..., Value]:
    """any/all: bool result (uint8 for uint8 input, like torch)."""

    def reduce_all(self: Value) -> Value:
        return cast_to(reduce(builder, self, None, False), result_dtype())

    def reduce_dims(self: Value, dim: int | list[int] | None = None,
                    keepdim: bool = False) -> Value:
        rank = self.type.rank
        if overload == "dims" and isinstance(dim, list) and len(dim) == 0:
            # any.dims/all.dims with dim=[] reduce nothing (unlike sum): x != 0.
            return cast_to(truthy(self), result_dtype())
        return cast_to(reduce(builder, self, reduced_axes(dim, rank), keepdim), result_dtype())

    lowering = reduce_all if overload == "default" else reduce_dims
    lowering.__doc__ = f"{builder.__name__.rstrip('_')}.{overload}: truth reduction."
    return lowering


for _overload in ("default", "dim", "dims"):
    reg(f"aten::any.{_overload}")(_truth(coreai.any_, _overload))
    reg(f"aten::all.{_overload}")(_truth(coreai.all_, _overload))


# -- variance, std, norms -----------------------------------------------------------------------

def _moments(x: Value, axes: list[int] | None, correction: float, keepdim: bool,
             take_sqrt: bool) -> tuple[Value, Value]:
    """(var or std, mean) in float64 (complex128 for a complex mean): a two-pass variance,
    the sum of |x - mean|**2 divided by max(n - correction, 0)."""
    is_complex = x.type.element_type.is_complex
    x = cast_to(x, DType.complex128 if is_complex else DType.float64)
    mean = reduce(coreai.reduce_mean, x, axes, True)
    diff = coreai.broadcasting_sub(x, mean)
    if is_complex:
        re, im = coreai.real(diff), coreai.imag(diff)
        square = coreai.broadcasting_add(coreai.broadcasting_mul(re, re),
                                         coreai.broadcasting_mul(im, im))
    else:
        square = coreai.broadcasting_mul(diff, diff)
    squares = reduce(coreai.reduce_sum, square, axes, keepdim)
    n = element_count(x, axes, DType.float64)
    dof = coreai.broadcasting_maximum(coreai.broadcasting_sub(n, scalar_like(correction, n)),
                                      scalar_like(0.0, n))
    var = coreai.broadcasting_divide(squares, dof)
    if take_sqrt:
        var = coreai.sqrt(var)
    if not keepdim and x.type.rank:
        mean = coreai.shrink_dims(mean, list(range(x.type.rank)) if axes is None else axes)
    return var, mean


def _var(overload: str, take_sqrt: bool) -> Callable[..., Value]:
    def by_correction(self: Value, dim: list[int] | None = None, correction: float | None = None,
                      keepdim: bool = False) -> Value:
        var, _ = _moments(self, reduced_axes(dim, self.type.rank),
                          1.0 if correction is None else float(correction), keepdim, take_sqrt)
        return cast_to(var, result_dtype())

    def by_dim(self: Value, dim: list[int] | None, unbiased: bool = True,
               keepdim: bool = False) -> Value:
        return by_correction(self, dim, float(unbiased), keepdim)

    def over_all(self: Value, unbiased: bool = True) -> Value:
        return by_correction(self, None, float(unbiased), False)

    lowerings: dict[str, Callable[..., Value]] = {
        "correction": by_correction, "dim": by_dim, "default": over_all}
    lowering = lowerings[overload]
    name = "std" if take_sqrt else "var"
    lowering.__doc__ = f"{name}.{overload}: two-pass variance in float64."
    return lowering


for _overload in ("correction", "dim", "default"):
    reg(f"aten::var.{_overload}")(_var(_overload, False))
    reg(f"aten::std.{_overload}")(_var(_overload, True))


@reg("aten::var_mean.correction")
def aten_var_mean_correction(self: Value, dim: list[int] | None = None,
                             correction: float | None = None, keepdim: bool = False,
                             ) -> list[Value]:
    """var_mean.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> (Tensor, Tensor)"""  # noqa: E501
    var, mean = _moments(self, reduced_axes(dim, self.type.rank),
                         1.0 if correction is None else float(correction), keepdim, False)
    return [cast_to(var, result_dtype(index=0)), cast_to(mean, result_dtype(index=1))]


@reg("aten::linalg_vector_norm.default")
def aten_linalg_vector_norm_default(self: Value, ord: float = 2, dim: list[int] | None = None,
                                    keepdim: bool = False, dtype: DType | None = None) -> Value:
    """linalg_vector_norm(Tensor self, Scalar ord=2, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor"""  # noqa: E501
    out = result_dtype()
    if not out.is_float:
        raise NotImplementedError(f"vector norm of a {out} tensor")
    # a complex input (converted to the complex ``dtype=``) has the norm of its moduli
    x = self
    if x.type.element_type.is_complex:
        x = coreai.abs_(cast_to(x, out.complex_dtype))
    x = cast_to(cast_to(x, out), acc_dtype(out))
    ord_ = float(ord)
    axes = reduced_axes(dim, x.type.rank)
    a = coreai.abs_(x)
    if ord_ == math.inf:
        y = reduce(coreai.reduce_max, a, axes, keepdim)
    elif ord_ == -math.inf:
        y = reduce(coreai.reduce_min, a, axes, keepdim)
    elif ord_ == 0:
        y = reduce(coreai.reduce_sum, cast_to(truthy(x), a.type.element_type), axes, keepdim)
    elif ord_ == 1:
        y = reduce(coreai.reduce_sum, a, axes, keepdim)
    elif ord_ == 2:
        y = coreai.sqrt(reduce(coreai.reduce_sum, coreai.broadcasting_mul(x, x), axes, keepdim))
    else:
        powered = coreai.broadcasting_pow(a, scalar_like(ord_, a))
        y = coreai.broadcasting_pow(reduce(coreai.reduce_sum, powered, axes, keepdim),
                                    scalar_like(1.0 / ord_, a))
    return cast_to(y, out)


# -- softmax, logsumexp -------------------------------------------------------------------------

def _softmax_of(builder: Callable[..., Value], x: Value, dim: int) -> Value:
    out = result_dtype()
    x = cast_to(x, acc_dtype(x.type.element_type))
    if x.type.rank == 0:  # a 0-d tensor is a 1-element vector
        normalize_dim(dim, 0)
        one = builder(coreai.expand_dims(x, [0]), axis=0)
        return cast_to(coreai.shrink_dims(one, [0]), out)
    return cast_to(builder(x, axis=normalize_dim(dim, x.type.rank)), out)


def _softmax_like(builder: Callable[..., Value], *, dtype_kwarg: bool) -> Callable[..., Value]:
    """_softmax(x, dim, half_to_float) and softmax.int(x, dim, dtype=None)."""

    def internal(self: Value, dim: int, half_to_float: bool) -> Value:
        return _softmax_of(builder, self, dim)

    def public(self: Value, dim: int, dtype: DType | None = None) -> Value:
        # torch converts the input to ``dtype`` first
        return _softmax_of(builder, self if dtype is None else cast_to(self, dtype), dim)

    lowering = public if dtype_kwarg else internal
    lowering.__doc__ = f"{builder.__name__} along dim, computed in float32 for half types."
    return lowering


reg("aten::_softmax.default")(_softmax_like(coreai.softmax, dtype_kwarg=False))
reg("aten::_log_softmax.default")(_softmax_like(coreai.log_softmax, dtype_kwarg=False))
reg("aten::softmax.int")(_softmax_like(coreai.softmax, dtype_kwarg=True))
reg("aten::log_softmax.int")(_softmax_like(coreai.log_softmax, dtype_kwarg=True))


@reg("aten::logsumexp.default")
def aten_logsumexp_default(self: Value, dim: list[int], keepdim: bool = False) -> Value:
    """logsumexp(Tensor self, int[1] dim, bool keepdim=False) -> Tensor"""
    out = result_dtype()
    x = cast_to(self, out)
    rank = x.type.rank
    axes = reduced_axes(dim, rank)
    # torch's sequence, rounding each step to ``out`` (only the sum accumulates in float32):
    # shift by the max, except an infinite max (which would give inf - inf). A complex x is
    # shifted by the max of its real parts: the result is the principal log of the sum.
    is_complex = out.is_complex
    m = reduce(coreai.reduce_max, coreai.real(x) if is_complex else x, axes, True)
    m = coreai.broadcasting_where(coreai.isinf(m), scalar_like(0.0, m), m)
    if is_complex:
        m = cast_to(m, out)
    e = cast_to(coreai.exp(coreai.broadcasting_sub(x, m)), acc_dtype(out))
    s = coreai.log(cast_to(reduce(coreai.reduce_sum, e, axes, keepdim), out))
    if not keepdim and rank:
        m = coreai.shrink_dims(m, list(range(rank)) if axes is None else axes)
    return coreai.broadcasting_add(s, m)
