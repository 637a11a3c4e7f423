"""Op mappings (tensor family): pad, reverse, get_shape, range, sort, topk, scan, scatter
and slice_update built from Core AI ops.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from coreai_core import Operation, Value
from coreai_torch.aimodel._apple import ca, constant
from coreai_torch.aimodel._context import ExportContext, Refused
from coreai_torch.aimodel._emit import i32, runtime_shape, scalar, slice_axis, take, u32
from coreai_torch.aimodel.mappings._registry import mapping_decorator, mapping_registry

__all__ = ["MAPPINGS"]

MAPPINGS = mapping_registry(__name__)
mapping = mapping_decorator(MAPPINGS)


@mapping("coreai.reverse", "gather_nd of n-1 ... 0 per axis")
def _reverse(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    # a gather of n-1 ... 0: Core AI's reverse takes its axes as an index-typed tensor, which
    # the authoring builders cannot make
    shape = ctx.static_shape(op.operands[0])
    y = xs[0]
    for axis in sorted({a % len(shape) for a in op.attributes["axes"]}):
        if shape[axis] > 1:
            y = take(y, np.arange(shape[axis] - 1, -1, -1), axis)
    return [y]


@mapping("coreai.get_shape", "constant (static shapes), else get_shape")
def _get_shape(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    return [runtime_shape(xs[0])]


@mapping("coreai.range", "constant (constant bounds; the runtime's values), else range_ (integers)")
def _range(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    if op.results[0].type.static_shape is None:
        if not op.results[0].type.element_type.is_int:
            raise Refused("a float range of a length known at run time only (Core AI's range "
                          "accumulates otherwise than start + i * step)")
        return [ca.range_(xs[0], xs[1], xs[2])]
    start, step = (ctx.constant_array(op.operands[i]).item() for i in (0, 2))
    n = ctx.result_shape(op)[0]
    dtype = ctx.apple_dtype(op.results[0])
    # the kernel's values: start + i * step in float64 (int64 for integers), then narrowed
    wide = np.int64 if np.dtype(dtype).kind in "iu" else np.float64
    values = start + np.arange(n, dtype=wide) * step
    if np.dtype(dtype).kind in "iu" and n and not (
            np.iinfo(dtype).min <= values.min() and values.max() <= np.iinfo(dtype).max):
        raise Refused(f"range values [{values.min()}, {values.max()}] do not fit {dtype}")
    return [constant(values.astype(dtype))]


def _axis(op: Operation) -> int:
    rank = op.operands[0].type.rank
    if rank == 0:
        raise Refused("a 0-d operand (Core AI's op takes an axis)")
    return int(op.attributes["axis"]) % rank


def _as_result(ctx: ExportContext, op: Operation, value: Any, index: int) -> Any:
    dtype = ctx.apple_dtype(op.results[index])
    return value if str(value.type.dtype) == str(ca.TensorType([], dtype).dtype) else (
        ca.cast(value, dtype))


def _sort_indices(op: Operation, x: Any, axis: int, descending: bool) -> Any:
    """Stable sort order along ``axis``, NaN as the largest value (first when descending)."""
    along = constant(np.int32(axis))
    stable = constant(np.bool_(True))
    idx = ca.argsort(x, along, constant(np.bool_(descending)), stable)
    if descending and op.operands[0].type.element_type.is_float:
        # Core AI puts NaN last either way: a stable sort on "is a number" moves NaN first
        # and keeps each group's order
        ordered = ca.gather_along_axis(x, idx, along)
        is_number = ca.cast(ca.broadcasting_equal(ordered, ordered), np.int32)
        idx = ca.gather_along_axis(idx, ca.argsort(is_number, along, constant(np.bool_(False)),
                                                   stable), along)
    return idx


@mapping("coreai.sort",
         "argsort (stable) + gather_along_axis; descending floats: a second stable argsort puts "
         "NaN first")
def _sort(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    axis = _axis(op)
    idx = _sort_indices(op, xs[0], axis, op.attributes.get("descending", False))
    values = ca.gather_along_axis(xs[0], idx, constant(np.int32(axis)))
    return [values, _as_result(ctx, op, idx, 1)]


@mapping("coreai.argsort", "argsort (stable), NaN handled as for sort")
def _argsort(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    idx = _sort_indices(op, xs[0], _axis(op), op.attributes.get("descending", False))
    return [_as_result(ctx, op, idx, 0)]


@mapping("coreai.topk", "argsort as for sort + slice_ + gather_along_axis")
def _topk(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    axis = _axis(op)
    shape = ctx.static_shape(op.operands[0])
    idx = _sort_indices(op, xs[0], axis, op.attributes.get("largest", True))
    end = list(shape)
    end[axis] = op.attributes["k"]
    idx = ca.slice_(idx, i32([0] * len(shape)), i32(end), i32([1] * len(shape)))
    values = ca.gather_along_axis(xs[0], idx, constant(np.int32(axis)))
    return [values, _as_result(ctx, op, idx, 1)]


def _identity(kind: str, dtype: np.dtype) -> Any:
    """The value a ``kind`` reduction starts from (the runtime's choice)."""
    if kind in ("sum", "add"):
        return 0
    if kind in ("product", "mul"):
        return 1
    if dtype.kind == "f":
        return -np.inf if kind == "max" else np.inf
    info = np.iinfo(dtype)
    return info.min if kind == "max" else info.max


@mapping("coreai.scan",
         "scan (max/min: NaN propagated by a scan of isnan; exclusive: concat of the identity and "
         "slice_)")
def _scan(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    axis, kind = _axis(op), op.attributes.get("kind", "sum")
    reverse = bool(op.attributes.get("reverse", False))
    dtype = np.dtype(ctx.apple_dtype(op.operands[0]))
    if dtype == np.bool_:
        raise Refused("a boolean scan (Core AI's scan takes numbers)")
    compute = np.dtype(np.float32) if dtype == np.float16 else dtype  # as the kernel
    x: Any = xs[0] if compute == dtype else ca.cast(xs[0], np.float32)
    along, backwards = constant(np.uint32(axis)), constant(np.bool_(reverse))
    y = ca.scan(x, along, backwards, kind)
    if kind in ("max", "min") and compute.kind == "f":
        # Core AI's max/min scans skip NaN; ours propagates it from where it first appears
        seen = ca.scan(ca.cast(ca.broadcasting_not_equal(x, x), compute.type), along, backwards,
                       "max")
        y = ca.broadcasting_where(ca.broadcasting_greater(seen, constant(compute.type(0))),
                                  constant(compute.type(np.nan)), y)
    if op.attributes.get("exclusive", False):  # shift by one, the identity coming first
        shape = list(x.type.shape)
        n = shape[axis]
        first = [1 if a == axis else d for a, d in enumerate(shape)]
        ident = ca.broadcast_to(constant(np.asarray(_identity(kind, compute), compute)),
                                i32(first))
        parts = ([slice_axis(y, axis, 1, n), ident] if reverse
                 else [ident, slice_axis(y, axis, 0, n - 1)])
        y = ca.concat(np.int32(axis), parts)
    return [y if compute == dtype else ca.cast(y, dtype.type)]


def _signed(ctx: ExportContext, v: Value, x: Any) -> Any:
    return x if np.dtype(ctx.apple_dtype(v)).kind == "i" else ca.cast(x, np.int32)


_SCATTER_MODES = {"none": "update", "add": "add", "mul": "mul", "max": "max", "min": "min"}


@mapping("coreai.scatter_along_axis",
         "scatter_along_axis (update, add, mul, max, min; include_self=False: the identity "
         "scattered first; max/min floats: NaN propagated; no mean)")
def _scatter_along_axis(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    reduction = op.attributes.get("reduction", "none")
    if reduction not in _SCATTER_MODES:
        raise Refused(f"reduction={reduction!r} (Core AI's scatter has no such mode)")
    axis = _axis(op)
    shape, ishape = ctx.static_shape(op.operands[0]), ctx.static_shape(op.operands[1])
    if 0 in ishape:  # nothing is written (Core AI's compiler miscomputes empty indices)
        return [xs[0]]
    if any(i != n for d, (i, n) in enumerate(zip(ishape, shape)) if d != axis):
        raise Refused(f"indices {list(ishape)} smaller than the input {list(shape)} off the "
                      "scatter axis (Core AI's scatter_along_axis needs them equal there)")
    x, idx, upd = xs[0], _signed(ctx, op.operands[1], xs[1]), xs[2]
    if tuple(upd.type.shape) != ishape:  # torch reads the leading block of updates
        upd = ca.slice_(upd, i32([0] * len(ishape)), i32(ishape), i32([1] * len(ishape)))
    out_type = ca.TensorType(shape, ctx.apple_dtype(op.results[0]))
    along = constant(np.int32(axis))
    dtype = np.dtype(ctx.apple_dtype(op.operands[0]))
    include_self = op.attributes.get("include_self", True)

    def scatter(into: Any, values: Any, mode: str) -> Any:
        return ca.scatter_along_axis(out_type, into, idx, values, along, scatter_mode=mode)

    out = x
    if reduction != "none" and not include_self:  # scattered places start at the identity
        ident = constant(np.full(ishape, _identity(reduction, dtype), dtype))
        out = scatter(out, ident, "update")
    out = scatter(out, upd, _SCATTER_MODES[reduction])
    if reduction in ("max", "min") and dtype.kind == "f":
        # Core AI's max/min skip NaN; ours (torch's) propagate it
        zeros = constant(np.zeros(shape, dtype))
        hit = scatter(zeros, ca.cast(ca.broadcasting_not_equal(upd, upd), dtype.type), "add")
        nan = ca.broadcasting_greater(hit, constant(dtype.type(0)))
        if include_self:
            nan = ca.broadcasting_or(nan, ca.broadcasting_not_equal(x, x))
        out = ca.broadcasting_where(nan, constant(dtype.type(np.nan)), out)
    return [out]


@mapping("coreai.scatter_nd",
         "scatter_nd; accumulate: scatter_along_axis(add) on rows of the flattened tensor")
def _scatter_nd(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    shape, ishape = ctx.static_shape(op.operands[0]), ctx.static_shape(op.operands[1])
    k = ishape[-1]
    if k == 0:
        raise Refused("0-d index vectors (each addresses the whole tensor)")
    n, rest = int(np.prod(ishape[:-1])), int(np.prod(shape[k:]))
    if n == 0:  # nothing is written; Core AI's compiler crashes on empty indices (Chameleon)
        return [xs[0]]
    x, idx, upd = xs[0], _signed(ctx, op.operands[1], xs[1]), xs[2]
    expected = (*ishape[:-1], *shape[k:])
    if tuple(upd.type.shape) != expected:
        upd = ca.broadcast_to(upd, i32(expected))
    if not op.attributes.get("accumulate", False):
        return [ca.scatter_nd(x, idx, upd)]
    # Core AI's scatter_nd only replaces: add along the rows of x flattened to
    # [prod(shape[:k]), rest], each index vector turned into its row number
    sizes = constant(i32(shape[:k]))
    wrapped = ca.broadcasting_where(ca.broadcasting_greater(constant(np.int32(0)), idx),
                                    ca.broadcasting_add(idx, sizes), idx)
    strides = i32([int(np.prod(shape[j + 1:k])) for j in range(k)])
    rows = ca.reduce_sum(ca.broadcasting_mul(ca.reshape(wrapped, i32([n, k])),
                                             constant(strides)), i32([1]))
    rows = ca.broadcast_to(ca.reshape(rows, i32([n, 1])), i32([n, rest]))
    flat = ca.reshape(x, i32([int(np.prod(shape[:k])), rest]))
    out_type = ca.TensorType([int(np.prod(shape[:k])), rest], ctx.apple_dtype(op.results[0]))
    summed = ca.scatter_along_axis(out_type, flat, rows, ca.reshape(upd, i32([n, rest])),
                                   constant(np.int32(0)), scatter_mode="add")
    return [ca.reshape(summed, i32(shape))]


@mapping("coreai.slice_update",
         "slice_update (constant bounds; a negative stride: upwards, the update reversed)")
def _slice_update(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    shape = ctx.static_shape(op.operands[0])
    begin, end = ctx.constant_ints(op.operands[2]), ctx.constant_ints(op.operands[3])
    ranges = [range(n) for n in shape]
    update = xs[1]
    for i, (axis, stride) in enumerate(zip(op.attributes["axes"], op.attributes["strides"])):
        a = axis % len(shape)
        picked = range(*slice(begin[i], end[i], stride).indices(shape[a]))  # as Python
        if not picked:
            return [xs[0]]  # nothing to write
        if stride < 0:  # the same places written upwards, the update reversed on that axis
            picked = picked[::-1]
            update = take(update, np.arange(len(picked) - 1, -1, -1), a)
        ranges[a] = picked
    starts, stops, steps = (i32([getattr(r, f) for r in ranges])
                            for f in ("start", "stop", "step"))
    return [ca.slice_update(xs[0], starts, stops, steps, update)]


@mapping("coreai.pad",
         "pad (constant, reflect, replicate) + slice_ for negative amounts; circular: slice_ + "
         "concat")
def _pad(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    # as the kernel (torch): reflect/replicate/constant pad and then crop the negative
    # amounts; circular crops first and wraps what is left
    pads, mode = list(op.attributes["pads"]), op.attributes.get("mode", "constant")
    pairs = list(zip(pads[::2], pads[1::2], strict=True))
    widths = [(max(lo, 0), max(hi, 0)) for lo, hi in pairs]

    def crop(y: Any) -> Any:
        for axis, (lo, hi) in enumerate(pairs):
            if lo < 0 or hi < 0:
                y = slice_axis(y, axis, max(-lo, 0), y.type.shape[axis] - max(-hi, 0))
        return y

    if mode != "circular":
        x = xs[0]
        if any(lo or hi for lo, hi in widths):
            value = scalar(ctx, op, op.attributes.get("value", 0.0))
            x = ca.pad(x, u32([w for pair in widths for w in pair]), value, mode)
        return [crop(x)]
    x = crop(xs[0])
    for axis, (lo, hi) in enumerate(widths):
        n = x.type.shape[axis]
        if lo > n or hi > n:
            raise Refused(f"circular padding {lo, hi} wider than axis {axis} of size {n}")
        if lo or hi:
            parts = [slice_axis(x, axis, n - lo, n)] if lo else []
            parts += [x, *([slice_axis(x, axis, 0, hi)] if hi else [])]
            x = ca.concat(np.int32(axis), parts)
    return [x]
