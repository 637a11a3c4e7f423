"""Reduction-family lowerings that scan or order elements: cumulative ops, sort, topk, medians.

Registered into the reduction family's table by ``reduction.py``.
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
    axis_arg,
    axis_size,
    index_zero,
    input_rank,
    iota,
    keepdim_arg,
    ordered,
    scan_acc_dtype,
)
from coreai_torch.utils import cast_to, get_arg, get_operand, normalize_dim, result_dtype

LOWERINGS = LoweringSet("sorting")
reg = LOWERINGS.register_torch_lowering


# -- scans --------------------------------------------------------------------------------------

def _cumulative(kind: str) -> Callable:
    def lowering(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
        x = get_operand(values_map, node, 0, loc)
        out = result_dtype(node)
        axis = axis_arg(node, 1, x.type.rank)
        # torch converts to ``dtype`` (int64 for ints/bool) and accumulates in acc_type.
        x = cast_to(cast_to(x, out, loc), scan_acc_dtype(out), loc)
        if x.type.rank == 0:
            return cast_to(x, out, loc)
        return cast_to(coreai.scan(x, axis=axis, kind=kind, loc=loc), out, loc)

    name = "cumsum" if kind == "sum" else "cumprod"
    lowering.__doc__ = f"{name}(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor"
    return lowering


reg("aten::cumsum.default")(_cumulative("sum"))
reg("aten::cumprod.default")(_cumulative("product"))


def _cum_extremum(kind: str) -> Callable:
    """cummax/cummin: running values and the index of the latest extremum (latest NaN)."""

    def lowering(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> list[Value]:
        x = get_operand(values_map, node, 0, loc)
        axis = axis_arg(node, 1, x.type.rank)
        if x.type.rank == 0:
            return [x, index_zero(loc)]
        xo = ordered(x, loc)
        values = coreai.scan(xo, axis=axis, kind=kind, loc=loc)
        # torch moves the index whenever x[j] >= running (<= for min) or x[j] is NaN, i.e.
        # whenever x[j] equals the new running value; the index is then a running max of j.
        hit = coreai.broadcasting_equal(xo, values, loc=loc)
        if x.type.element_type.is_float:
            hit = coreai.broadcasting_or(hit, coreai.isnan(xo, loc=loc), loc=loc)
        positions = coreai.broadcasting_where(hit, iota(x, axis, loc), index_zero(loc), loc=loc)
        indices = coreai.scan(positions, axis=axis, kind="max", loc=loc)
        return [cast_to(values, x.type.element_type, loc), indices]

    lowering.__doc__ = f"cum{kind}(Tensor self, int dim) -> (Tensor values, Tensor indices)"
    return lowering


reg("aten::cummax.default")(_cum_extremum("max"))
reg("aten::cummin.default")(_cum_extremum("min"))


def _logaddexp(a: Value, b: Value, loc: Location) -> Value:
    """log(exp(a) + exp(b)) without overflow; -inf/+inf handled like torch."""
    hi = coreai.broadcasting_maximum(a, b, loc=loc)
    lo = coreai.broadcasting_minimum(a, b, loc=loc)
    s = coreai.broadcasting_add(
        hi, coreai.log1p(coreai.exp(coreai.broadcasting_sub(lo, hi, loc=loc), loc=loc), loc=loc),
        loc=loc)
    # lo == -inf: the sum is hi (also when both are -inf); hi == +inf: the sum is +inf.
    infinite = coreai.broadcasting_or(
        coreai.broadcasting_equal(lo, scalar_like(-math.inf, lo, loc), loc=loc),
        coreai.broadcasting_equal(hi, scalar_like(math.inf, hi, loc), loc=loc), loc=loc)
    return coreai.broadcasting_where(infinite, hi, s, loc=loc)


@reg("aten::logcumsumexp.default")
def aten_logcumsumexp_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                              ) -> Value:
    """logcumsumexp(Tensor self, int dim) -> Tensor

    A log-depth (Hillis-Steele) scan of logaddexp: accurate for any input range, where one
    max-shifted cumsum would underflow for inputs far below the axis maximum.
    """
    x = get_operand(values_map, node, 0, loc)
    out = result_dtype(node)
    axis = axis_arg(node, 1, x.type.rank)
    y = cast_to(cast_to(x, out, loc), scan_acc_dtype(out), loc)
    if y.type.rank == 0:
        return cast_to(y, out, loc)
    n = y.type.shape[axis]
    if not isinstance(n, int):
        raise NotImplementedError(f"{node.name}: logcumsumexp needs a static size along dim")
    pads = [0] * (2 * y.type.rank)
    step = 1
    while step < n:
        # y[i] <- logaddexp(y[i], y[i - step]) with -inf shifted in at the front.
        head = coreai.slice_(y, [0], [n - step], axes=[axis], strides=[1], loc=loc)
        pads[2 * axis] = step
        shifted = coreai.pad(head, pads, mode="constant", value=-math.inf, loc=loc)
        y = _logaddexp(y, shifted, loc)
        step *= 2
    return cast_to(y, out, loc)


# -- sort, topk ---------------------------------------------------------------------------------

def _sort(values_map: ValuesMap, node: torch.fx.Node, loc: Location, axis: int,
          descending: bool) -> list[Value]:
    x = get_operand(values_map, node, 0, loc)
    if x.type.rank == 0:
        return [x, index_zero(loc)]
    values, indices = coreai.sort(ordered(x, loc), axis=axis, descending=descending,
                                  stable=True, loc=loc)
    return [cast_to(values, x.type.element_type, loc), indices]


@reg("aten::sort.default")
def aten_sort_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> list[Value]:
    """sort(Tensor self, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)

    Always sorted stably (a stable order is one of the orders an unstable sort may give).
    """
    return _sort(values_map, node, loc, axis_arg(node, 1, input_rank(node), -1),
                 bool(get_arg(node, 2, "descending", False)))


@reg("aten::sort.stable")
def aten_sort_stable(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> list[Value]:
    """sort.stable(Tensor self, *, bool? stable, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)"""  # noqa: E501
    axis = normalize_dim(int(node.kwargs.get("dim", -1)), input_rank(node))
    return _sort(values_map, node, loc, axis, bool(node.kwargs.get("descending", False)))


@reg("aten::topk.default")
def aten_topk_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> list[Value]:
    """topk(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor values, Tensor indices)"""  # noqa: E501
    x = get_operand(values_map, node, 0, loc)
    k = get_arg(node, 1, "k")
    if isinstance(k, torch.fx.Node):
        raise NotImplementedError(f"{node.name}: topk needs a static k, got symbolic {k.name!r}")
    axis = axis_arg(node, 2, x.type.rank, -1)
    largest = bool(get_arg(node, 3, "largest", True))
    is_sorted = bool(get_arg(node, 4, "sorted", True))
    if x.type.rank == 0:
        if k != 1:
            raise NotImplementedError(f"{node.name}: topk with k={k} of a 0-d tensor")
        return [x, index_zero(loc)]
    values, indices = coreai.topk(ordered(x, loc), int(k), axis=axis, largest=largest,
                                  sorted=is_sorted, loc=loc)
    return [cast_to(values, x.type.element_type, loc), indices]


# -- order statistics ---------------------------------------------------------------------------

def _kth(x: Value, axis: int, k: int | Value, loc: Location) -> tuple[Value, Value]:
    """The k-th smallest (0-based; NaN sorts last) along ``axis`` and its index, keep_dims.

    ``k`` is a static int, a 0-d int64 Value, or an int64 Value of the keep_dims shape.
    """
    values, indices = coreai.sort(ordered(x, loc), axis=axis, stable=True, loc=loc)
    if isinstance(k, int):
        begin, end = [k], [k + 1]
    elif k.type.rank == 0:
        begin = coreai.reshape(k, [1], loc=loc)
        end = coreai.broadcasting_add(begin, scalar_like(1, begin, loc), loc=loc)
    else:
        value = coreai.gather_along_axis(values, k, axis=axis, loc=loc)
        index = coreai.gather_along_axis(indices, k, axis=axis, loc=loc)
        return cast_to(value, x.type.element_type, loc), index
    value = coreai.slice_(values, begin, end, axes=[axis], strides=[1], loc=loc)
    index = coreai.slice_(indices, begin, end, axes=[axis], strides=[1], loc=loc)
    return cast_to(value, x.type.element_type, loc), index


def _median(x: Value, axis: int, ignore_nan: bool, loc: Location) -> tuple[Value, Value]:
    """torch.median / nanmedian along ``axis`` (keep_dims): the lower median.

    median: NaN and the index of the first NaN when the slice has one. nanmedian: the lower
    median of the non-NaN elements (NaN when there are none).
    """
    is_float = x.type.element_type.is_float
    i64 = DType.int64
    if ignore_nan and is_float:
        valid = coreai.not_(coreai.isnan(x, loc=loc), loc=loc)
        count = coreai.reduce_sum(cast_to(valid, i64, loc), axes=[axis], keep_dims=True, loc=loc)
        k = coreai.broadcasting_floor_divide(
            coreai.broadcasting_sub(count, coreai.constant(1, dtype=i64), loc=loc),
            coreai.constant(2, dtype=i64), loc=loc)
        return _kth(x, axis, coreai.broadcasting_maximum(k, index_zero(loc), loc=loc), loc)
    n = axis_size(x, axis, loc)
    if isinstance(n, int):
        if n == 0:
            raise NotImplementedError("median of an empty dimension")
        k: int | Value = (n - 1) // 2
    else:
        k = coreai.broadcasting_floor_divide(
            coreai.broadcasting_sub(n, coreai.constant(1, dtype=i64), loc=loc),
            coreai.constant(2, dtype=i64), loc=loc)
    value, index = _kth(x, axis, k, loc)
    if is_float:
        nan = coreai.isnan(x, loc=loc)
        has_nan = coreai.any_(nan, axes=[axis], keep_dims=True, loc=loc)
        value = coreai.broadcasting_where(has_nan, scalar_like(math.nan, value, loc), value,
                                          loc=loc)
        first_nan = coreai.argmax(cast_to(nan, DType.uint8, loc), axis=axis, keep_dims=True,
                                  loc=loc)
        index = coreai.broadcasting_where(has_nan, first_nan, index, loc=loc)
    return value, index


def _median_all(ignore_nan: bool) -> Callable:
    def lowering(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
        x = get_operand(values_map, node, 0, loc)
        value, _ = _median(coreai.reshape(x, [-1], loc=loc), 0, ignore_nan, loc)
        return coreai.shrink_dims(value, [0], loc=loc)

    name = "nanmedian" if ignore_nan else "median"
    lowering.__doc__ = f"{name}(Tensor self) -> Tensor: the lower median of all elements."
    return lowering


def _median_dim(ignore_nan: bool) -> Callable:
    def lowering(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> list[Value]:
        x = get_operand(values_map, node, 0, loc)
        axis = axis_arg(node, 1, x.type.rank)
        if x.type.rank == 0:
            return [x, index_zero(loc)]
        value, index = _median(x, axis, ignore_nan, loc)
        if not keepdim_arg(node, 2):
            value = coreai.shrink_dims(value, [axis], loc=loc)
            index = coreai.shrink_dims(index, [axis], loc=loc)
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
def aten_kthvalue_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                          ) -> list[Value]:
    """kthvalue(Tensor self, int k, int dim=-1, bool keepdim=False) -> (Tensor values, Tensor indices)"""  # noqa: E501
    x = get_operand(values_map, node, 0, loc)
    k = int(get_arg(node, 1, "k"))
    axis = axis_arg(node, 2, x.type.rank, -1)
    if x.type.rank == 0:
        return [x, index_zero(loc)]
    value, index = _kth(x, axis, k - 1, loc)
    if not keepdim_arg(node, 3):
        value = coreai.shrink_dims(value, [axis], loc=loc)
        index = coreai.shrink_dims(index, [axis], loc=loc)
    return [value, index]
