"""Op mappings (nn family): batched matmul and interpolate (the sliding-window ops are in
``nn_windows.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from coreai_core import Operation
from coreai_core.runtime import interpolation_plan
from coreai_torch.aimodel._apple import ca, constant
from coreai_torch.aimodel._context import ExportContext
from coreai_torch.aimodel._emit import i32, reshape_to_result, take
from coreai_torch.aimodel.mappings._registry import mapping_decorator, mapping_registry

__all__ = ["MAPPINGS"]

MAPPINGS = mapping_registry(__name__)
mapping = mapping_decorator(MAPPINGS)


@mapping("coreai.batch_matmul", "broadcasting_batch_matmul (+ reshape)")
def _batch_matmul(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    a, b = xs
    if len(a.type.shape) == 1:
        a = ca.reshape(a, i32([1, a.type.shape[0]]))
    if len(b.type.shape) == 1:
        b = ca.reshape(b, i32([b.type.shape[0], 1]))
    return [reshape_to_result(ctx, op, ca.broadcasting_batch_matmul(a, b))]


@mapping("coreai.interpolate",
         "per axis: gather_nd of the source taps, broadcasting_mul by the weights, "
         "broadcasting_add (the runtime's indices and weights: torch's rules)")
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
