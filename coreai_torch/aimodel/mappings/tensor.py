"""Op mappings (tensor family): reductions, shapes and indexing that Core AI has.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from coreai_core import DType, Operation
from coreai_torch.aimodel._apple import ca, constant
from coreai_torch.aimodel._context import Emit, ExportContext, Refused
from coreai_torch.aimodel._emit import (
    bitwise_not,
    dims,
    i32,
    reshape_to_result,
    runtime_size,
    scalar,
    take,
    u32,
)
from coreai_torch.aimodel.mappings._registry import mapping_decorator, mapping_registry

__all__ = ["MAPPINGS"]

MAPPINGS = mapping_registry(__name__)
mapping = mapping_decorator(MAPPINGS)


def _reduction(apple: Callable[..., Any], logical: bool = False) -> Emit:
    def emit(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
        rank = op.operands[0].type.rank
        axes = op.attributes.get("axes")
        axes = list(range(rank)) if axes is None else [a % rank for a in axes]
        x = xs[0]
        if logical and op.operands[0].type.element_type is not DType.bool:
            x = ca.cast(x, np.bool_)  # Core AI's all_/any_ take booleans: nonzero is true
        if not axes:  # Core AI reduces every axis for an empty list; ours none
            return [x]
        return [reshape_to_result(ctx, op, apple(x, i32(axes)))]
    emit.__name__ = f"reduce_via_{apple.__name__}"
    return emit


def _first_argmax(ctx: ExportContext, op: Operation, x: Any, axis: int) -> Any:
    index = ca.cast(ca.argmax(x, np.int32(axis)), ctx.apple_dtype(op.results[0]))
    return reshape_to_result(ctx, op, index)


@mapping("coreai.argmax", "argmax + cast (floats: the first NaN's index where there is one)")
def _argmax(ctx: ExportContext, op: Operation, xs: Sequence[Any], negate: bool = False,
            ) -> list[Any]:
    x = xs[0]
    is_float = op.operands[0].type.element_type.is_float
    if negate and is_float:
        x = ca.broadcasting_mul(x, scalar(ctx, op, -1))
    elif negate:  # ~x reverses the order of integers without overflow (-x would not)
        x = bitwise_not(ctx, op, x)
        if op.operands[0].type.element_type is DType.bool:
            x = ca.cast(x, np.int32)
    axis = op.attributes.get("axis")
    if axis is None:
        x, axis = ca.reshape(x, i32([-1])), 0
    axis %= len(x.type.shape)
    index = _first_argmax(ctx, op, x, axis)
    if is_float:  # Core AI's argmax skips NaN; ours (torch's) returns the first NaN
        nan = ca.cast(ca.broadcasting_not_equal(x, x), ctx.apple_dtype(op.operands[0]))
        has_nan = ca.broadcasting_greater(ca.reduce_max(nan, i32([axis])), scalar(ctx, op, 0))
        index = ca.broadcasting_where(reshape_to_result(ctx, op, has_nan),
                                      _first_argmax(ctx, op, nan, axis), index)
    return [index]


@mapping("coreai.argmin", "argmax of x * -1, as argmax (floats); of ~x (integers, bool)")
def _argmin(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    return _argmax(ctx, op, xs, negate=True)


def _target_shape(op: Operation, xs: Sequence[Any]) -> Any:
    """The result's shape: a constant when static, else the op's shape operand."""
    shape = op.results[0].type.static_shape
    return i32(shape) if shape is not None else xs[1]


@mapping("coreai.reshape", "reshape")
def _reshape(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    return [ca.reshape(xs[0], _target_shape(op, xs))]


@mapping("coreai.expand_dims", "reshape (static), else expand_dims")
def _expand_dims(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    if op.results[0].type.static_shape is not None:
        return _reshape(ctx, op, xs)
    rank = op.results[0].type.rank
    return [ca.expand_dims(xs[0], i32(sorted(a % rank for a in op.attributes["axes"])))]


@mapping("coreai.shrink_dims", "reshape (static), else shrink_dims or a reshape to get_shape sizes")
def _shrink_dims(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    if op.results[0].type.static_shape is not None:
        return _reshape(ctx, op, xs)
    rank = op.operands[0].type.rank
    removed = {a % rank for a in op.attributes["axes"]}
    if all(dims(xs[0])[a] == 1 for a in removed):
        return [ca.shrink_dims(xs[0], i32(sorted(removed)))]
    # Core AI's shrink_dims needs the removed sizes static: reshape to the kept sizes instead
    kept = [runtime_size(xs[0], a) for a in range(rank) if a not in removed]
    return [ca.reshape(xs[0], ca.concat(np.int32(0), kept))]


@mapping("coreai.broadcast_to", "broadcast_to")
def _broadcast_to(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    return [ca.broadcast_to(xs[0], _target_shape(op, xs))]


@mapping("coreai.transpose", "transpose")
def _transpose(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    rank = op.operands[0].type.rank
    return [ca.transpose(xs[0], u32([p % rank for p in op.attributes["perm"]]))]


@mapping("coreai.concat", "concat")
def _concat(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    rank = op.results[0].type.rank
    return [ca.concat(np.int32(op.attributes["axis"] % rank), list(xs))]


@mapping("coreai.tile", "tile")
def _tile(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    reps = list(op.attributes["reps"])
    rank = op.operands[0].type.rank
    if len(reps) != rank:
        raise Refused("tile repetitions of another rank than the input")
    return [ca.tile(xs[0], u32(reps))]


def _full_slice(ctx: ExportContext, x: Any, shape: tuple[int, ...],
                ranges: dict[int, tuple[int, int, int]]) -> Any:
    begin, end, step = [], [], []
    for axis, size in enumerate(shape):
        b, e, s = ranges.get(axis, (0, size, 1))
        begin.append(b)
        end.append(e)
        step.append(s)
    return ca.slice_(x, i32(begin), i32(end), i32(step))


@mapping("coreai.slice",
         "slice_ (constant bounds; a negative stride reverses the axis by gather_nd first; "
         "run-time bounds or sizes: normalised at run time, positive strides)")
def _slice(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    if op.operands[0].type.static_shape is None or not all(
            v.owner is not None and v.owner.name == "coreai.constant" for v in op.operands[1:]):
        return [_dynamic_slice(ctx, op, xs)]
    shape = ctx.static_shape(op.operands[0])
    begin, end = ctx.constant_ints(op.operands[1]), ctx.constant_ints(op.operands[2])
    ranges: dict[int, tuple[int, int, int]] = {}
    x = xs[0]
    for i, (axis, stride) in enumerate(zip(op.attributes["axes"], op.attributes["strides"])):
        a = axis % len(shape)
        picked = range(*slice(begin[i], end[i], stride).indices(shape[a]))
        if stride < 0:  # the same elements, counted from the end of the reversed axis
            x = take(x, np.arange(shape[a] - 1, -1, -1), a)
            last = shape[a] - 1
            picked = range(last - picked.start, last - picked.stop, -stride)
        ranges[a] = (picked.start, max(picked.start, picked.stop), picked.step)
    return [_full_slice(ctx, x, shape, ranges)]


def _bound(index: Any, size: Any) -> Any:
    """A slice bound as Python's ``slice(...).indices`` gives it for a positive step: a
    negative ``index`` counts from the end, then it is clamped to [0, size] (all 1-element
    int32 values)."""
    zero = constant(i32([0]))
    wrapped = ca.broadcasting_where(ca.greater(zero, index), ca.add(index, size), index)
    return ca.minimum(ca.maximum(wrapped, zero), size)


def _dynamic_slice(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> Any:
    """A slice whose input shape or bounds are known at run time only: the bounds are
    normalised at run time (positive strides only)."""
    x, rank = xs[0], op.operands[0].type.rank
    axes = [a % rank for a in op.attributes["axes"]]
    strides = list(op.attributes["strides"])
    if any(s <= 0 for s in strides):
        raise Refused("a negative slice stride on a dynamic shape or with bounds computed at "
                      "run time (the reversed axis needs its size at export time)")

    def bound(operand: int, i: int) -> Any:
        value = op.operands[operand]
        if value.owner is not None and value.owner.name == "coreai.constant":
            # sizes fit int32, so clipping keeps the slice (INT64_MAX means "to the end")
            known = ctx.constant_ints(value)[i]
            return constant(i32([min(max(known, -(2**31)), 2**31 - 1)]))
        return ca.slice_(xs[operand], i32([i]), i32([i + 1]), i32([1]))

    begin: list[Any] = []
    end: list[Any] = []
    step: list[int] = []
    for axis in range(rank):
        size = runtime_size(x, axis)
        if axis in axes:
            i = axes.index(axis)
            b = _bound(bound(1, i), size)
            e = _bound(bound(2, i), size)
            begin.append(b)
            end.append(ca.maximum(e, b))
            step.append(strides[i])
        else:
            begin.append(constant(i32([0])))
            end.append(size)
            step.append(1)
    return ca.slice_(x, ca.concat(np.int32(0), begin), ca.concat(np.int32(0), end), i32(step))


@mapping("coreai.split", "slice_ per piece (dynamic: other axes' sizes by get_shape)")
def _split(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    x, t = xs[0], op.operands[0].type
    axis = op.attributes["axis"] % t.rank
    if t.static_shape is not None:
        out, start = [], 0
        for size in op.attributes["split_sizes"]:
            out.append(_full_slice(ctx, x, t.static_shape, {axis: (start, start + size, 1)}))
            start += size
        return out
    if not isinstance(t.shape[axis], int):
        raise Refused(f"a split along dynamic axis {axis} (its parts' sizes are static)")
    # the other axes whole: their sizes as constants, or read at run time when dynamic
    ends: list[Any] = [runtime_size(x, a) for a in range(t.rank)]
    out, start = [], 0
    for size in op.attributes["split_sizes"]:
        begin = i32([start if a == axis else 0 for a in range(t.rank)])
        end = [constant(i32([start + size])) if a == axis else e for a, e in enumerate(ends)]
        out.append(ca.slice_(x, begin, ca.concat(np.int32(0), end), i32([1] * t.rank)))
        start += size
    return out


@mapping("coreai.gather", "transpose + gather_nd + transpose")
def _gather(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    rank = op.operands[0].type.rank
    return [take(xs[0], xs[1], op.attributes.get("axis", 0) % rank)]


@mapping("coreai.gather_nd", "gather_nd")
def _gather_nd(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    return [ca.gather_nd(xs[0], xs[1])]


@mapping("coreai.gather_along_axis", "gather_along_axis")
def _gather_along_axis(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    rank = op.operands[0].type.rank
    return [ca.gather_along_axis(xs[0], xs[1], np.int32(op.attributes["axis"] % rank))]


mapping("coreai.reduce_sum", "reduce_sum (+ reshape)")(_reduction(ca.reduce_sum))
mapping("coreai.reduce_mean", "reduce_mean (+ reshape)")(_reduction(ca.reduce_mean))
mapping("coreai.reduce_max", "reduce_max (+ reshape)")(_reduction(ca.reduce_max))
mapping("coreai.reduce_min", "reduce_min (+ reshape)")(_reduction(ca.reduce_min))
mapping("coreai.reduce_product", "reduce_product (+ reshape)")(_reduction(ca.reduce_product))
mapping("coreai.all", "cast to bool + all_ (+ reshape)")(_reduction(ca.all_, logical=True))
mapping("coreai.any", "cast to bool + any_ (+ reshape)")(_reduction(ca.any_, logical=True))
