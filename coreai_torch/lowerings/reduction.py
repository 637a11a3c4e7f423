"""Built-in lowerings: reductions, arg-reductions, variance, norms, softmax, scans, sorting.

Precision follows torch's CPU kernels: float16/bfloat16 sums, means, norms and softmaxes
accumulate in float32 and round once; variance accumulates in float64 (torch's Welford uses
double). Integer and bool sums/products accumulate in the dtype torch returns (int64).
Scans, sort, topk and the order statistics are the ``sorting`` family.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch.fx

from coreai_core import DType, Location, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._common import ValuesMap, scalar_like
from coreai_torch.lowerings._reduce import (
    acc_dtype,
    axis_arg,
    element_count,
    index_zero,
    input_rank,
    keepdim_arg,
    ordered,
    reduce,
    reduced_axes,
    truthy,
)
from coreai_torch.utils import (
    cast_to,
    dtype_of,
    get_arg,
    get_operand,
    normalize_dim,
    normalize_dims,
    result_dtype,
)

LOWERINGS = LoweringSet("reduction")
reg = LOWERINGS.register_torch_lowering

# -- sum, prod, mean ---------------------------------------------------------------------------


def _accumulate(builder: Callable[..., Value], has_dim: bool) -> Callable:
    """sum/prod: the input is converted to the result dtype (ints -> int64, or ``dtype=``)."""

    def lowering(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
        x = get_operand(values_map, node, 0, loc)
        out = result_dtype(node)
        axes = reduced_axes(node, 1, x.type.rank) if has_dim else None
        keepdim = keepdim_arg(node, 2) if has_dim else False
        x = cast_to(cast_to(x, out, loc), acc_dtype(out), loc)
        return cast_to(reduce(builder, x, axes, keepdim, loc), out, loc)

    lowering.__doc__ = f"Accumulating reduction onto {builder.__name__}."
    return lowering


reg("aten::sum.dim_IntList")(_accumulate(coreai.reduce_sum, True))
reg("aten::sum.default")(_accumulate(coreai.reduce_sum, False))
reg("aten::prod.dim_int")(_accumulate(coreai.reduce_product, True))
reg("aten::prod.default")(_accumulate(coreai.reduce_product, False))


@reg("aten::mean.dim", "aten::mean.default")
def aten_mean_dim(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor"""  # noqa: E501
    x = get_operand(values_map, node, 0, loc)
    out = result_dtype(node)
    axes = reduced_axes(node, 1, x.type.rank)
    x = cast_to(cast_to(x, out, loc), acc_dtype(out), loc)
    return cast_to(reduce(coreai.reduce_mean, x, axes, keepdim_arg(node, 2), loc), out, loc)


# -- max, min, argmax, any, all -----------------------------------------------------------------

def _extremum(builder: Callable[..., Value], *, has_dim: bool) -> Callable:
    def lowering(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
        x = get_operand(values_map, node, 0, loc)
        if not has_dim:
            return reduce(builder, x, None, False, loc)
        axes = reduced_axes(node, 1, x.type.rank, default=[])
        return reduce(builder, x, axes, keepdim_arg(node, 2), loc)

    lowering.__doc__ = f"Reduction onto {builder.__name__} (NaN propagates)."
    return lowering


reg("aten::amax.default")(_extremum(coreai.reduce_max, has_dim=True))
reg("aten::amin.default")(_extremum(coreai.reduce_min, has_dim=True))
reg("aten::max.default")(_extremum(coreai.reduce_max, has_dim=False))
reg("aten::min.default")(_extremum(coreai.reduce_min, has_dim=False))


def _with_index(builder: Callable[..., Value], arg: Callable[..., Value]) -> Callable:
    """max.dim/min.dim: values and the int64 index of the first extremum (first NaN)."""

    def lowering(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> list[Value]:
        x = get_operand(values_map, node, 0, loc)
        axis = axis_arg(node, 1, x.type.rank)
        keepdim = keepdim_arg(node, 2)
        if x.type.rank == 0:
            return [x, index_zero(loc)]
        values = reduce(builder, x, [axis], keepdim, loc)
        return [values, arg(ordered(x, loc), axis=axis, keep_dims=keepdim, loc=loc)]

    lowering.__doc__ = f"Values by {builder.__name__}, indices by {arg.__name__}."
    return lowering


reg("aten::max.dim")(_with_index(coreai.reduce_max, coreai.argmax))
reg("aten::min.dim")(_with_index(coreai.reduce_min, coreai.argmin))


def _arg_reduction(arg: Callable[..., Value]) -> Callable:
    def lowering(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
        x = get_operand(values_map, node, 0, loc)
        dim = get_arg(node, 1, "dim")
        axis = None if dim is None else normalize_dim(int(dim), x.type.rank)
        if x.type.rank == 0:
            axis = None
        return arg(x, axis=axis, keep_dims=keepdim_arg(node, 2), loc=loc)

    lowering.__doc__ = f"{arg.__name__}(Tensor self, int? dim=None, bool keepdim=False) -> Tensor"
    return lowering


reg("aten::argmax.default")(_arg_reduction(coreai.argmax))
reg("aten::argmin.default")(_arg_reduction(coreai.argmin))


def _truth(builder: Callable[..., Value], overload: str) -> Callable:
    """any/all: bool result (uint8 for uint8 input, like torch)."""

    def lowering(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
        x = get_operand(values_map, node, 0, loc)
        rank = x.type.rank
        out = result_dtype(node)
        if overload == "default":
            return cast_to(reduce(builder, x, None, False, loc), out, loc)
        dims = get_arg(node, 1, "dim")
        if overload == "dims" and dims is not None and len(dims) == 0:
            # any.dims/all.dims with dim=[] reduce nothing (unlike sum): x != 0.
            normalize_dims(dims, rank)
            return cast_to(truthy(x, loc), out, loc)
        axes = reduced_axes(node, 1, rank)
        return cast_to(reduce(builder, x, axes, keepdim_arg(node, 2), loc), out, loc)

    lowering.__doc__ = f"{builder.__name__.rstrip('_')}.{overload}: truth reduction."
    return lowering


for _overload in ("default", "dim", "dims"):
    reg(f"aten::any.{_overload}")(_truth(coreai.any_, _overload))
    reg(f"aten::all.{_overload}")(_truth(coreai.all_, _overload))


# -- variance, std, norms -----------------------------------------------------------------------

def _var_args(node: torch.fx.Node, overload: str) -> tuple[list[int] | None, float, bool]:
    """(axes, correction, keepdim) of var/std/var_mean .correction, .dim or .default."""
    rank = input_rank(node)
    if overload == "correction":
        correction = node.kwargs.get("correction")
        return (reduced_axes(node, 1, rank), 1.0 if correction is None else float(correction),
                bool(node.kwargs.get("keepdim", False)))
    if overload == "dim":
        unbiased = bool(get_arg(node, 2, "unbiased", True))
        return reduced_axes(node, 1, rank), float(unbiased), keepdim_arg(node, 3)
    return None, float(bool(get_arg(node, 1, "unbiased", True))), False


def _moments(values_map: ValuesMap, node: torch.fx.Node, loc: Location, overload: str,
             take_sqrt: bool) -> tuple[Value, Value]:
    """(var or std, mean) in float64: a two-pass variance, divided by max(n - correction, 0)."""
    if node.args[0].meta["val"].is_complex():
        raise NotImplementedError(f"{node.name}: complex variance is not supported")
    axes, correction, keepdim = _var_args(node, overload)
    x = cast_to(get_operand(values_map, node, 0, loc), DType.float64, loc)
    mean = reduce(coreai.reduce_mean, x, axes, True, loc)
    diff = coreai.broadcasting_sub(x, mean, loc=loc)
    squares = reduce(coreai.reduce_sum, coreai.broadcasting_mul(diff, diff, loc=loc), axes,
                     keepdim, loc)
    n = element_count(x, axes, DType.float64, loc)
    dof = coreai.broadcasting_maximum(
        coreai.broadcasting_sub(n, scalar_like(correction, n, loc), loc=loc),
        scalar_like(0.0, n, loc), loc=loc)
    var = coreai.broadcasting_divide(squares, dof, loc=loc)
    if take_sqrt:
        var = coreai.sqrt(var, loc=loc)
    if not keepdim and x.type.rank:
        mean = coreai.shrink_dims(mean, list(range(x.type.rank)) if axes is None else axes,
                                  loc=loc)
    return var, mean


def _var(overload: str, take_sqrt: bool) -> Callable:
    def lowering(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
        var, _ = _moments(values_map, node, loc, overload, take_sqrt)
        return cast_to(var, result_dtype(node), loc)

    name = "std" if take_sqrt else "var"
    lowering.__doc__ = f"{name}.{overload}: two-pass variance in float64."
    return lowering


for _overload in ("correction", "dim", "default"):
    reg(f"aten::var.{_overload}")(_var(_overload, False))
    reg(f"aten::std.{_overload}")(_var(_overload, True))


@reg("aten::var_mean.correction")
def aten_var_mean_correction(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                             ) -> list[Value]:
    """var_mean.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> (Tensor, Tensor)"""  # noqa: E501
    var, mean = _moments(values_map, node, loc, "correction", False)
    return [cast_to(var, result_dtype(node, 0), loc), cast_to(mean, result_dtype(node, 1), loc)]


@reg("aten::linalg_vector_norm.default")
def aten_linalg_vector_norm_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                                    ) -> Value:
    """linalg_vector_norm(Tensor self, Scalar ord=2, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor"""  # noqa: E501
    out = result_dtype(node)
    x = cast_to(get_operand(values_map, node, 0, loc), out, loc)
    if not out.is_float:
        raise NotImplementedError(f"{node.name}: vector norm of a {out} tensor")
    x = cast_to(x, acc_dtype(out), loc)
    ord_ = float(get_arg(node, 1, "ord", 2))
    axes = reduced_axes(node, 2, x.type.rank)
    keepdim = keepdim_arg(node, 3)
    a = coreai.abs_(x, loc=loc)
    if ord_ == math.inf:
        y = reduce(coreai.reduce_max, a, axes, keepdim, loc)
    elif ord_ == -math.inf:
        y = reduce(coreai.reduce_min, a, axes, keepdim, loc)
    elif ord_ == 0:
        y = reduce(coreai.reduce_sum, cast_to(truthy(x, loc), a.type.element_type, loc), axes,
                   keepdim, loc)
    elif ord_ == 1:
        y = reduce(coreai.reduce_sum, a, axes, keepdim, loc)
    elif ord_ == 2:
        y = coreai.sqrt(reduce(coreai.reduce_sum, coreai.broadcasting_mul(x, x, loc=loc), axes,
                               keepdim, loc), loc=loc)
    else:
        powered = coreai.broadcasting_pow(a, scalar_like(ord_, a, loc), loc=loc)
        y = coreai.broadcasting_pow(reduce(coreai.reduce_sum, powered, axes, keepdim, loc),
                                    scalar_like(1.0 / ord_, a, loc), loc=loc)
    return cast_to(y, out, loc)


# -- softmax, logsumexp -------------------------------------------------------------------------

def _softmax_like(builder: Callable[..., Value], *, dtype_kwarg: bool) -> Callable:
    """_softmax(x, dim, half_to_float) and softmax.int(x, dim, dtype=None)."""

    def lowering(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
        x = get_operand(values_map, node, 0, loc)
        out = result_dtype(node)
        axis = axis_arg(node, 1, x.type.rank)
        dtype = get_arg(node, 2, "dtype") if dtype_kwarg else None
        if dtype is not None:
            x = cast_to(x, dtype_of(dtype), loc)  # torch converts the input first
        x = cast_to(x, acc_dtype(x.type.element_type), loc)
        if x.type.rank == 0:  # a 0-d tensor is a 1-element vector
            one = builder(coreai.expand_dims(x, [0], loc=loc), axis=0, loc=loc)
            return cast_to(coreai.shrink_dims(one, [0], loc=loc), out, loc)
        return cast_to(builder(x, axis=axis, loc=loc), out, loc)

    lowering.__doc__ = f"{builder.__name__} along dim, computed in float32 for half types."
    return lowering


reg("aten::_softmax.default")(_softmax_like(coreai.softmax, dtype_kwarg=False))
reg("aten::_log_softmax.default")(_softmax_like(coreai.log_softmax, dtype_kwarg=False))
reg("aten::softmax.int")(_softmax_like(coreai.softmax, dtype_kwarg=True))
reg("aten::log_softmax.int")(_softmax_like(coreai.log_softmax, dtype_kwarg=True))


@reg("aten::logsumexp.default")
def aten_logsumexp_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """logsumexp(Tensor self, int[1] dim, bool keepdim=False) -> Tensor"""
    out = result_dtype(node)
    x = cast_to(get_operand(values_map, node, 0, loc), out, loc)
    rank = x.type.rank
    axes = reduced_axes(node, 1, rank)
    keepdim = keepdim_arg(node, 2)
    # torch's sequence, rounding each step to ``out`` (only the sum accumulates in float32):
    # shift by the max, except an infinite max (which would give inf - inf).
    m = reduce(coreai.reduce_max, x, axes, True, loc)
    m = coreai.broadcasting_where(coreai.isinf(m, loc=loc), scalar_like(0.0, m, loc), m, loc=loc)
    e = cast_to(coreai.exp(coreai.broadcasting_sub(x, m, loc=loc), loc=loc), acc_dtype(out), loc)
    s = coreai.log(cast_to(reduce(coreai.reduce_sum, e, axes, keepdim, loc), out, loc), loc=loc)
    if not keepdim and rank:
        m = coreai.shrink_dims(m, list(range(rank)) if axes is None else axes, loc=loc)
    return coreai.broadcasting_add(s, m, loc=loc)

