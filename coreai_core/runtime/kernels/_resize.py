"""Per-axis source indices and weights for ``coreai.interpolate`` (PyTorch upsample rules).

The arithmetic mirrors ATen's ``UpSample.h`` / ``UpSampleKernel.cpp`` step by step, including
the precision each step runs in (``opmath``: float32 for float16/bfloat16/float32 inputs,
float64 for float64), so nearest-neighbour indices match torch exactly.
"""

from __future__ import annotations

import numpy as np


def _scale(in_size: int, out_size: int, align_corners: bool, scale: float | None,
           ft: type) -> np.floating:
    """``area_pixel_compute_scale``: source pixels per destination pixel."""
    if align_corners:
        return ft(in_size - 1) / ft(out_size - 1) if out_size > 1 else ft(0)
    if scale is not None and scale > 0:
        return ft(1.0 / scale)
    return ft(in_size) / ft(out_size)


def _source(scale: np.floating, out_size: int, align_corners: bool, cubic: bool,
            ft: type) -> np.ndarray:
    """``area_pixel_compute_source_index`` for every destination index."""
    dst = np.arange(out_size)
    if align_corners:
        return scale * dst.astype(ft)
    # C++ evaluates ``scale * (dst + 0.5) - 0.5`` in double, then stores it in opmath.
    src: np.ndarray = (np.float64(scale) * (dst + 0.5) - 0.5).astype(ft)
    return src if cubic else np.maximum(src, ft(0))


def _floor_index(real: np.ndarray, in_size: int) -> np.ndarray:
    # floorf() rounds its argument to float32 first.
    return np.minimum(np.floor(real.astype(np.float32)).astype(np.int64), in_size - 1)


def nearest(in_size: int, out_size: int, scale: float | None, exact: bool,
            ft: type) -> np.ndarray:
    """Source index per destination index for ``nearest`` / ``nearest_exact``."""
    sc = _scale(in_size, out_size, False, scale, ft)
    if not exact:
        return _floor_index(sc * np.arange(out_size).astype(ft), in_size)
    real = _source(sc, out_size, False, False, ft)
    return _floor_index(real.astype(np.float64) + 0.5, in_size)


def nearest_legacy(in_size: int, out_size: int, scale: float | None, exact: bool,
                   ) -> np.ndarray:
    """``nearest_idx`` / ``nearest_exact_idx``: ATen's older index rule (float32 scale).

    ATen's CPU kernel still uses it for 2-d outputs with ``H + W <= 128`` (its
    "channels last" path, taken for every small output): a same-size or double-size output
    short-circuits to ``i`` / ``i // 2`` whatever the user's scale says.
    """
    dst = np.arange(out_size)
    if not exact and out_size == in_size:
        return dst
    if not exact and out_size == 2 * in_size:
        return dst >> 1
    if scale is not None and scale > 0:
        sc = np.float32(1.0 / scale)
    else:
        sc = np.float32(in_size) / np.float32(out_size)
    if exact:  # (i + 0.5) * scale runs in double; floorf() rounds it to float first
        return _floor_index((dst + 0.5) * np.float64(sc), in_size)
    return _floor_index(dst.astype(np.float32) * sc, in_size)


def linear(in_size: int, out_size: int, align_corners: bool, scale: float | None,
           ft: type) -> tuple[np.ndarray, np.ndarray]:
    """Indices [out, 2] and weights [out, 2] of linear interpolation along one axis."""
    if in_size == out_size:  # torch copies straight through, whatever the scale says
        i = np.arange(out_size)
        return np.stack([i, i], 1), np.stack([np.ones(out_size, ft), np.zeros(out_size, ft)], 1)
    sc = _scale(in_size, out_size, align_corners, scale, ft)
    real = _source(sc, out_size, align_corners, False, ft)
    i0 = _floor_index(real, in_size)
    lam1 = np.clip(real - i0.astype(ft), ft(0), ft(1)).astype(ft)
    i1 = i0 + (i0 < in_size - 1)
    return np.stack([i0, i1], 1), np.stack([ft(1) - lam1, lam1], 1)


def _cubic_conv1(t: np.ndarray, a: np.floating) -> np.ndarray:
    return ((a + 2) * t - (a + 3)) * t * t + 1


def _cubic_conv2(t: np.ndarray, a: np.floating) -> np.ndarray:
    return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a


def cubic(in_size: int, out_size: int, align_corners: bool, scale: float | None,
          ft: type) -> tuple[np.ndarray, np.ndarray]:
    """Indices [out, 4] (clamped to the border) and weights [out, 4] of bicubic, A = -0.75."""
    sc = _scale(in_size, out_size, align_corners, scale, ft)
    real = _source(sc, out_size, align_corners, True, ft)
    i0 = _floor_index(real, in_size)
    t = np.clip(real - i0.astype(ft), ft(0), ft(1)).astype(ft)
    a, one = ft(-0.75), ft(1)
    w: np.ndarray = np.stack([_cubic_conv2(t + one, a), _cubic_conv1(t, a),
                  _cubic_conv1(one - t, a), _cubic_conv2(one - t + one, a)], 1).astype(ft)
    idx = np.clip(i0[:, None] + np.arange(-1, 3), 0, in_size - 1)
    return idx, w


def resize_axis(x: np.ndarray, axis: int, idx: np.ndarray, w: np.ndarray | None,
                ) -> np.ndarray:
    """Gather along ``axis`` (nearest) or blend the gathered taps with weights."""
    if w is None:
        return np.take(x, idx, axis=axis)
    shape = [1] * x.ndim
    shape[axis] = idx.shape[0]
    out = np.take(x, idx[:, 0], axis=axis) * w[:, 0].reshape(shape)
    for j in range(1, idx.shape[1]):
        out += np.take(x, idx[:, j], axis=axis) * w[:, j].reshape(shape)
    return out
