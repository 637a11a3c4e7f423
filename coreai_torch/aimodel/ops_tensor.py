"""Op mappings of resizing, reordering and indexing ops (interpolate, reverse, sort, scatter,
...), merged into :data:`coreai_torch.aimodel.ops.MAPPINGS`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import coreai.authoring as ca
import numpy as np
from coreai.authoring.constant import constant

from coreai_core import Operation
from coreai_core.runtime import interpolation_plan
from coreai_torch.aimodel._context import ExportContext, Refused
from coreai_torch.aimodel._emit import OpMapping, i32, take

__all__ = ["TENSOR_MAPPINGS"]


def _interpolate(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    # Core AI's own interpolate differs from torch's rules: nearest rounds half-pixel
    # coordinates to even where torch floors (i * in / out), and linear derives coordinates by
    # division; so each axis gathers the runtime's taps and blends them with its weights.
    shape = ctx.static_shape(op.operands[0])
    dtype = np.dtype(ctx.apple_dtype(op.operands[0]))
    sizes = ctx.result_shape(op)[2:]
    compute, plans = interpolation_plan(shape, dtype, sizes, op.attributes["mode"],
                                        op.attributes.get("align_corners", False),
                                        op.attributes.get("scales"))
    y = xs[0] if compute == dtype else ca.cast(xs[0], compute.type)
    for i, (idx, w) in enumerate(plans):
        axis = 2 + i
        if w is None:
            if not np.array_equal(idx, np.arange(shape[axis])):
                y = take(y, idx, axis)
            continue
        blend = [1] * len(shape)
        blend[axis] = len(idx)
        out = None
        for j in range(idx.shape[1]):  # the kernel's order: taps[0] * w[0] + taps[1] * w[1] ...
            tap = ca.broadcasting_mul(take(y, idx[:, j], axis),
                                      constant(w[:, j].reshape(blend).astype(compute)))
            out = tap if out is None else ca.broadcasting_add(out, tap)
        y = out
    return [y if compute == dtype else ca.cast(y, dtype.type)]


def _reverse(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    # a gather of n-1 ... 0: Core AI's reverse takes its axes as an index-typed tensor, which
    # the authoring builders cannot make
    shape = ctx.static_shape(op.operands[0])
    y = xs[0]
    for axis in sorted({a % len(shape) for a in op.attributes["axes"]}):
        if shape[axis] > 1:
            y = take(y, np.arange(shape[axis] - 1, -1, -1), axis)
    return [y]


def _get_shape(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    return [constant(i32(ctx.static_shape(op.operands[0])))]


def _range(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
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


TENSOR_MAPPINGS: dict[str, OpMapping] = {
    "coreai.interpolate": OpMapping(
        _interpolate, "per axis: gather_nd of the source taps, broadcasting_mul by the "
        "weights, broadcasting_add (the runtime's indices and weights: torch's rules)"),
    "coreai.reverse": OpMapping(_reverse, "gather_nd of n-1 ... 0 per axis"),
    "coreai.get_shape": OpMapping(_get_shape, "constant (static shapes)"),
    "coreai.range": OpMapping(_range, "constant (constant bounds; the runtime's values)"),
}
