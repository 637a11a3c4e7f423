"""Op mappings (nn family): the sliding-window ops (conv, conv_transpose,
maxpool, sumpool, avgpool).

Our N-d ops take pads; Core AI's ``conv2d``/``conv3d`` and pooling ops do not, so the input is
padded first (zeros; ``-inf`` for max pooling), 1-d windows run as 2-d ones over a leading
axis of size 1, and ``ceil_mode`` becomes extra padding on the high side: exactly the
windows the runtime's kernels read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np

from coreai_core import Operation
from coreai_torch.aimodel._apple import ca, constant
from coreai_torch.aimodel._context import ExportContext, Refused
from coreai_torch.aimodel._emit import i32, reshape_to_result, scalar, u32
from coreai_torch.aimodel.mappings._registry import mapping_decorator, mapping_registry

__all__ = ["MAPPINGS"]

MAPPINGS = mapping_registry(__name__)
mapping = mapping_decorator(MAPPINGS)


def _pads(op: Operation, n: int) -> list[int]:
    pads = list(op.attributes.get("pads") or [])
    if not pads:
        return [0] * (2 * n)
    return [p for v in pads for p in (v, v)] if len(pads) == n else pads


def _pad_spatial(x: Any, pads: list[int], value: Any) -> Any:
    if not any(pads):
        return x
    if min(pads) < 0:
        raise Refused("negative padding")
    return ca.pad(x, u32([0, 0, 0, 0, *pads]), value)


def _fill(values: Any, n: int, default: int) -> list[int]:
    if values is None or len(values) == 0:
        return [default] * n
    return list(values) * n if len(values) == 1 else list(values)


@attrs.frozen
class _Windows:
    """A conv/pool op's windows on 2 or 3 spatial dims (1-d gets a leading axis of size 1)."""

    x: Any
    kernel: list[int]
    strides: list[int]
    dilation: list[int]
    pads: list[int]  # (low, high) per spatial dim, ceil_mode's overhang included

    def apple(self, two_d: Callable[..., Any], three_d: Callable[..., Any]) -> Callable[..., Any]:
        return two_d if len(self.kernel) == 2 else three_d


def _windows(ctx: ExportContext, op: Operation, x: Any, kernel: list[int],
             default_strides: list[int] | None = None) -> _Windows:
    n = op.operands[0].type.rank - 2
    if n not in (1, 2, 3):
        raise Refused(f"{n}-d windows: Core AI's window ops take 2 or 3 spatial dims")
    strides = op.attributes.get("strides")
    s = _fill(strides, n, 1) if strides or default_strides is None else default_strides
    d, pads = _fill(op.attributes.get("dilation"), n, 1), _pads(op, n)
    if op.attributes.get("ceil_mode"):  # pad the high side up to the last window's end
        size, out = ctx.static_shape(op.operands[0])[2:], ctx.result_shape(op)[2:]
        for i in range(n):
            need = (out[i] - 1) * s[i] + d[i] * (kernel[i] - 1) + 1
            pads[2 * i + 1] += max(0, need - (size[i] + pads[2 * i] + pads[2 * i + 1]))
    if n == 1:  # exact: a 1-d window is a 2-d one on a leading axis of size 1
        x = ca.reshape(x, i32([*x.type.shape[:2], 1, x.type.shape[2]]))
        return _Windows(x, [1, *kernel], [1, *s], [1, *d], [0, 0, *pads])
    return _Windows(x, kernel, s, d, pads)


def _channel_bias(y: Any, bias: Any) -> Any:
    return ca.broadcasting_add(y, ca.reshape(bias, i32([1, -1, *[1] * (len(y.type.shape) - 2)])))


@mapping("coreai.conv", "pad + conv2d/conv3d + broadcasting_add (1-d to 3-d)")
def _conv(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    w_shape = ctx.static_shape(op.operands[1])
    win = _windows(ctx, op, xs[0], list(w_shape[2:]))
    weight = ca.reshape(xs[1], i32([*w_shape[:2], *win.kernel]))
    x = _pad_spatial(win.x, win.pads, scalar(ctx, op, 0))
    y = win.apple(ca.conv2d, ca.conv3d)(x, weight, u32(win.strides), u32(win.dilation),
                                        np.uint32(op.attributes.get("groups", 1)))
    if len(xs) > 2:
        y = _channel_bias(y, xs[2])
    return [reshape_to_result(ctx, op, y)]


@mapping("coreai.conv_transpose",
         "conv_transpose2d/3d + broadcasting_add (1-d to 3-d; symmetric pads)")
def _conv_transpose(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    w_shape = ctx.static_shape(op.operands[1])
    win = _windows(ctx, op, xs[0], list(w_shape[2:]))
    lo, hi = win.pads[0::2], win.pads[1::2]
    if lo != hi:
        raise Refused(f"asymmetric padding {win.pads} (Core AI's conv_transpose pads both "
                      "sides equally)")
    output_padding = _fill(op.attributes.get("output_padding"), len(w_shape) - 2, 0)
    if len(output_padding) == 1:
        output_padding = [0, *output_padding]
    weight = ca.reshape(xs[1], i32([*w_shape[:2], *win.kernel]))
    y = win.apple(ca.conv_transpose2d, ca.conv_transpose3d)(
        win.x, weight, u32(win.strides), u32(lo), u32(win.dilation), u32(output_padding),
        np.uint32(op.attributes.get("groups", 1)))
    if len(xs) > 2:
        y = _channel_bias(y, xs[2])
    return [reshape_to_result(ctx, op, y)]


def _pool_windows(ctx: ExportContext, op: Operation, x: Any) -> _Windows:
    n = op.operands[0].type.rank - 2
    k = _fill(op.attributes["kernel_size"], n, 1)
    return _windows(ctx, op, x, k, default_strides=k)


@mapping("coreai.maxpool",
         "pad(-inf) + maxpool2d/3d (1-d to 3-d; ceil_mode as padding; no indices)")
def _maxpool(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    if op.attributes.get("return_indices"):
        raise Refused("return_indices=True (Core AI's maxpool returns no indices)")
    if not op.operands[0].type.element_type.is_float:
        raise Refused("integer max pooling (its padding needs -inf)")
    win = _pool_windows(ctx, op, xs[0])
    x = _pad_spatial(win.x, win.pads, scalar(ctx, op, -np.inf))
    n = len(win.kernel)
    shape = [*ctx.static_shape(op.operands[0])[:2],
             *[(x.type.shape[2 + i] - win.dilation[i] * (win.kernel[i] - 1) - 1)
               // win.strides[i] + 1 for i in range(n)]]
    out = ca.TensorType(shape, ctx.apple_dtype(op.results[0]))
    y = win.apple(ca.maxpool2d, ca.maxpool3d)(out, x, u32(win.kernel), u32(win.strides),
                                              u32(win.dilation), False)
    return [reshape_to_result(ctx, op, y)]


def _sum_windows(ctx: ExportContext, op: Operation, win: _Windows) -> Any:
    x = _pad_spatial(win.x, win.pads, scalar(ctx, op, 0))
    return win.apple(ca.sumpool2d, ca.sumpool3d)(x, u32(win.kernel), u32(win.strides),
                                                 constant(u32(win.dilation)))


@mapping("coreai.sumpool", "pad + sumpool2d/3d (1-d to 3-d; ceil_mode as padding)")
def _sumpool(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    return [reshape_to_result(ctx, op, _sum_windows(ctx, op, _pool_windows(ctx, op, xs[0])))]


def _avg_divisor(ctx: ExportContext, op: Operation) -> np.ndarray:
    """torch's per-window divisor on our output grid (a product of per-axis counts): the
    padding counts with count_include_pad, ceil_mode's overhang past it never does."""
    n = op.operands[0].type.rank - 2
    k = _fill(op.attributes["kernel_size"], n, 1)
    s = _fill(op.attributes.get("strides"), n, 1) if op.attributes.get("strides") else k
    pads = _pads(op, n)
    size, out = ctx.static_shape(op.operands[0])[2:], ctx.result_shape(op)[2:]
    divisor = np.ones((), np.int64)
    for i in range(n):
        start = np.arange(out[i]) * s[i] - pads[2 * i]
        end = np.minimum(start + k[i], size[i] + pads[2 * i + 1])
        inside = np.minimum(end, size[i]) - np.maximum(start, 0)
        count = end - start if op.attributes.get("count_include_pad", True) else inside
        divisor = divisor * count.reshape([-1 if j == i else 1 for j in range(n)])
    return divisor


@mapping("coreai.avgpool",
         "pad + sumpool2d/3d + broadcasting_divide by torch's per-window counts (1-d to 3-d)")
def _avgpool(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    win = _pool_windows(ctx, op, xs[0])
    total = reshape_to_result(ctx, op, _sum_windows(ctx, op, win))
    dtype = ctx.apple_dtype(op.results[0])
    if op.attributes.get("divisor_override"):
        divisor = np.asarray(op.attributes["divisor_override"], dtype)
    else:
        counts = _avg_divisor(ctx, op)
        divisor = np.asarray(counts.flat[0] if np.all(counts == counts.flat[0]) else counts,
                             dtype)
    return [ca.broadcasting_divide(total, constant(divisor))]

