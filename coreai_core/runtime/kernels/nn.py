"""Numpy kernels of the neural-network ops: matmul, convolution, pooling, resize.

All kernels are vectorized: convolutions and matmuls run on BLAS, windows are strided views
of the padded input (Python loops only over kernel positions and blocks). A convolution's
shape-only decisions are made once per op (``_conv.ConvPlan``, the kernel's ``prepare``).
Float16/bfloat16 inputs are computed in float32 and cast back, like PyTorch's CPU kernels
accumulate in float32.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from coreai_core.runtime.kernels import _conv, _resize, _windows
from coreai_core.runtime.kernels._matmul import shared_rhs_matmul, shares_rhs, stacked_matmul
from coreai_core.runtime.kernels._registry import KernelSet, prepared_by
from coreai_core.runtime.kernels._windows import acc_dtype

KERNELS = KernelSet("nn")

Ints = Sequence[int]


def _acc(x: np.ndarray) -> np.ndarray:
    return x.astype(acc_dtype(x.dtype), copy=False)


@KERNELS.register("coreai.batch_matmul")
def batch_matmul(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """``numpy.matmul`` with float32 accumulation for half types."""
    if (lhs.ndim > 1 or rhs.ndim > 1) and lhs.dtype not in _windows.HALF:
        if shares_rhs(lhs, rhs):
            return shared_rhs_matmul(lhs, rhs)
        return stacked_matmul(lhs, rhs)
    return np.asarray(np.matmul(_acc(lhs), _acc(rhs))).astype(lhs.dtype, copy=False)


def _bias_shape(n: int) -> tuple[int, ...]:
    return (1, -1, *(1,) * n)


def _run_conv(plan: _conv.ConvPlan, x: np.ndarray, weight: np.ndarray,
              bias: np.ndarray | None) -> np.ndarray:
    xa, wa = _acc(x), _acc(weight)
    ba = None if bias is None else _acc(bias)
    # the plan cuts its work in blocks fixed by the shapes and spreads them over the run's pool
    return np.ascontiguousarray(plan(xa, wa, ba), dtype=x.dtype)


def _prepare_conv(types: Sequence[Any], *, strides: Ints | None = None,
                  pads: Ints | None = None, dilation: Ints | None = None,
                  groups: int = 1) -> Callable[..., np.ndarray] | None:
    """``conv`` with its plan built once, for static sample and weight shapes."""
    plan = _conv.prepare_conv(types, strides=strides, pads=pads, dilation=dilation,
                              groups=groups)
    if plan is None:
        return None
    dtype = types[0].element_type.numpy

    def conv_prepared(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None,
                      **_attributes: Any) -> np.ndarray:
        if (x.shape[1:] != plan.sample or weight.shape != plan.weight_shape
                or x.dtype != dtype):
            return conv(x, weight, bias, strides=strides, pads=pads, dilation=dilation,
                        groups=groups)
        return _run_conv(plan, x, weight, bias)

    return conv_prepared


@KERNELS.register("coreai.conv")
@prepared_by(_prepare_conv)
def conv(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None, *,
         strides: Ints | None = None, pads: Ints | None = None, dilation: Ints | None = None,
         groups: int = 1) -> np.ndarray:
    """Grouped N-d convolution: pointwise matmul, chunked im2col or per-tap depthwise (see
    ``_conv``)."""
    plan = _conv.conv_plan(x.shape[1:], weight.shape, acc_dtype(x.dtype), strides, pads,
                           dilation, groups)
    return _run_conv(plan, x, weight, bias)


@KERNELS.register("coreai.conv_transpose")
def conv_transpose(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None, *,
                   strides: Ints | None = None, pads: Ints | None = None,
                   dilation: Ints | None = None, groups: int = 1,
                   output_padding: Ints | None = None) -> np.ndarray:
    """Transposed convolution: matmul, then col2im scatter-add over kernel positions."""
    y = _windows.conv_transpose(_acc(x), _acc(weight), strides, pads, dilation, groups,
                                output_padding)
    if bias is not None:
        y = y + _acc(bias).reshape(_bias_shape(x.ndim - 2))
    return np.ascontiguousarray(y.astype(x.dtype, copy=False))


@KERNELS.register("coreai.maxpool")
def maxpool(x: np.ndarray, *, kernel_size: Ints, strides: Ints | None = None,
            pads: Ints | None = None, dilation: Ints | None = None, ceil_mode: bool = False,
            return_indices: bool = False) -> list[np.ndarray]:
    """Max pooling (NaN propagates); int64 flat indices per (N, C) plane if asked."""
    y, idx = _windows.max_pool(x, kernel_size, strides, pads, dilation, ceil_mode,
                               return_indices)
    return [y] if idx is None else [y, idx]


@KERNELS.register("coreai.sumpool")
def sumpool(x: np.ndarray, *, kernel_size: Ints, strides: Ints | None = None,
            pads: Ints | None = None, dilation: Ints | None = None,
            ceil_mode: bool = False) -> np.ndarray:
    """Sum over sliding windows with zero padding."""
    y = _windows.sum_pool(_acc(x), kernel_size, strides, pads, dilation, ceil_mode)
    return y.astype(x.dtype, copy=False)


@KERNELS.register("coreai.avgpool")
def avgpool(x: np.ndarray, *, kernel_size: Ints, strides: Ints | None = None,
            pads: Ints | None = None, ceil_mode: bool = False, count_include_pad: bool = True,
            divisor_override: int | None = None) -> np.ndarray:
    """Average pooling with torch's divisor rules."""
    total = _windows.sum_pool(_acc(x), kernel_size, strides, pads, None, ceil_mode)
    div: int | np.ndarray
    if divisor_override:
        div = divisor_override
    else:
        div = _windows.avg_divisor(x.shape, kernel_size, strides, pads, ceil_mode,
                                   count_include_pad)
    return (total / np.asarray(div, total.dtype)).astype(x.dtype, copy=False)


def interpolation_plan(shape: Sequence[int], dtype: np.dtype, sizes: Ints, mode: str,
                       align_corners: bool, scales: Sequence[float] | None,
                       ) -> tuple[np.dtype, list[tuple[np.ndarray, np.ndarray | None]]]:
    """How ``coreai.interpolate`` resizes an input of ``shape`` and ``dtype``: the dtype it
    computes in, and per spatial axis (axis 2, 3, ...) the source indices [out] (nearest) or
    [out, taps] and the tap weights [out, taps] (None for nearest). The kernel gathers the taps
    along each axis in turn and sums ``taps[:, j] * weights[:, j]`` over j in order, so
    another backend that does the same reproduces it bit for bit."""
    dtype = np.dtype(dtype)
    # torch computes coordinates in opmath: float64 for float64 data, float32 otherwise.
    ft = np.float64 if dtype == np.float64 else np.float32
    compute = dtype if mode.startswith("nearest") else np.dtype(acc_dtype(dtype))
    # ATen picks its older nearest index rule for small 2-d outputs (see nearest_legacy).
    legacy = len(sizes) == 2 and sum(sizes) <= 128
    plans = [_resize.axis_plan(mode, shape[2 + i], out_size, align_corners,
                               scales[i] if scales is not None else None, ft, legacy, dtype,
                               compute)
             for i, out_size in enumerate(sizes)]
    return compute, plans


@KERNELS.register("coreai.interpolate")
def interpolate(x: np.ndarray, output_size: np.ndarray | None = None, *, sizes: Ints,
                mode: str = "nearest", align_corners: bool = False,
                scales: Sequence[float] | None = None) -> np.ndarray:
    """Resize the spatial dims separably with precomputed per-axis indices and weights."""
    if output_size is not None:
        sizes = [int(s) for s in output_size]
    compute, plans = interpolation_plan(x.shape, x.dtype, sizes, mode, align_corners, scales)
    y = x.astype(compute, copy=False)
    for i, (idx, w) in enumerate(plans):
        y = _resize.resize_axis(y, 2 + i, idx, w)
    return y.astype(x.dtype, copy=False)
