"""Built-in lowerings (nn family): ``grid_sampler_3d`` (an N-d grid sampler) and the
antialiased ``_upsample_bilinear2d_aa`` / ``_upsample_bicubic2d_aa``.

``grid_sample`` over ``n`` spatial axes: the grid's last axis holds one normalized coordinate
per spatial axis in reverse order (x = the last spatial axis). Each coordinate is unnormalized
and padded per axis with :class:`coreai_torch.lowerings.nn_resample.GridCoords` (torch's
ComputeLocation), then the ``2**n`` corner taps (bilinear/trilinear) or the nearest tap are
gathered from the input flattened over its spatial axes; a tap outside the input reads zero,
which is torch's ``zeros`` padding and harmless for the clipped modes.

The antialiased upsamples are separable: each resized axis is one constant ``[out, in]``
weight matrix applied with ``batch_matmul`` (width first, like torch). The matrix is torch's
(``_compute_indices_min_size_weights_aa``): with ``scale`` = in/out (or 1/scale_factor, or
(in-1)/(out-1) with align_corners), output ``i`` centres at ``scale * (i + 0.5)``, the filter
(triangle, or Keys cubic with a = -0.5) is stretched by ``max(scale, 1)`` so that its support
grows with the downscale factor, taps are the inputs within that support, and the weights of a
row are normalized to sum to one. They are computed in float64 and rounded once to the input's
dtype: torch computes them in the input's dtype, whose float32 rounding errors (up to ~1e-6 per
weight) add up to ~2e-5 on outputs of size 9; ours stay within a float32 ulp or two of the
float64 result. An axis whose size does not change is left alone (torch skips it, whatever the
scale factor).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import numpy as np

from coreai_core import DType, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._nn_utils import const, const64, dim_value, opmath, static_sizes
from coreai_torch.lowerings.nn_resample import BILINEAR, NEAREST, GridCoords, GridTaps
from coreai_torch.utils import cast_to, result_dtype, result_type

LOWERINGS = LoweringSet("nn_resample_general")
reg = LOWERINGS.register_torch_lowering

_MODE_NAMES = {0: "bilinear", 1: "nearest", 2: "bicubic"}


def grid_sample(x: Value, grid: Value, mode: int, padding: int, align_corners: bool,
                what: str) -> Value:
    """torch's ``grid_sampler_{n}d`` for ``mode`` bilinear (multilinear) or nearest.

    ``x`` is [N, C, *sizes] and ``grid`` [N, *out, n] in the compute dtype; the result is
    [N, C, *out] in that dtype. Every size may be dynamic (computed at run time).
    """
    n = x.type.rank - 2
    sizes = [dim_value(x, a) for a in range(2, n + 2)]
    compute = x.type.element_type
    taps = GridTaps(x, sizes)
    coords, points = [], []
    for axis, size in enumerate(sizes):
        c = GridCoords(size, align_corners, padding, compute)
        g = coreai.gather(grid, const64(n - 1 - axis), axis=n + 1)
        coords.append(c)
        points.append(c.pad(c.unnormalize(g)))

    def index(v: Value) -> Value:
        return cast_to(v, DType.int64)

    if mode == NEAREST:
        return taps.read([index(coreai.round_(p)) for p in points])
    if mode != BILINEAR:
        raise NotImplementedError(
            f"{what} with interpolation_mode {_MODE_NAMES.get(mode, mode)}: torch supports "
            "only bilinear and nearest for volumetric grids")
    # per axis: the lower tap, and the weights of the lower and upper taps
    lows, weights = [], []
    for c, p in zip(coords, points, strict=True):
        low = coreai.floor(p)
        frac = coreai.broadcasting_sub(p, low)
        lows.append(index(low))
        weights.append((coreai.broadcasting_sub(c.c(1), frac), frac))
    out: Value | None = None
    for corner in itertools.product((0, 1), repeat=n):
        idx = [low if k == 0 else coreai.broadcasting_add(low, const64(1))
               for low, k in zip(lows, corner, strict=True)]
        wt: Value | None = None
        for w, k in zip(weights, corner, strict=True):
            wt = w[k] if wt is None else coreai.broadcasting_mul(wt, w[k])
        assert wt is not None
        term = coreai.broadcasting_mul(taps.read(idx), coreai.expand_dims(wt, [1]))
        out = term if out is None else coreai.broadcasting_add(out, term)
    assert out is not None
    return out


@reg("aten::grid_sampler_3d.default")
def aten_grid_sampler_3d_default(input: Value, grid: Value, interpolation_mode: int,
                                 padding_mode: int, align_corners: bool) -> Value:
    """grid_sampler_3d(Tensor input, Tensor grid, int interpolation_mode, int padding_mode,
    bool align_corners) -> Tensor"""
    compute = opmath(input.type.element_type)
    out = grid_sample(cast_to(input, compute), cast_to(grid, compute), int(interpolation_mode),
                      int(padding_mode), bool(align_corners), "grid_sampler_3d")
    return cast_to(out, result_dtype())


# -- antialiased upsampling ----------------------------------------------------------------------

def _triangle(x: np.ndarray) -> np.ndarray:
    x = np.abs(x)
    return np.where(x < 1, 1 - x, 0).astype(x.dtype)


def _keys_cubic(x: np.ndarray) -> np.ndarray:
    """Keys' cubic convolution kernel with a = -0.5 (torch's antialiased bicubic filter)."""
    x = np.abs(x)
    a = x.dtype.type(-0.5)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x < 1, near, np.where(x < 2, far, 0)).astype(x.dtype)


_AA_FILTERS: dict[str, tuple[Callable[[np.ndarray], np.ndarray], int]] = {
    "bilinear": (_triangle, 2), "bicubic": (_keys_cubic, 4)}


def aa_weights(mode: str, size_in: int, size_out: int, align_corners: bool,
               scale_factor: float | None, dtype: np.dtype) -> np.ndarray:
    """torch's antialiased resampling matrix [size_out, size_in] of one axis, computed in
    float64 and rounded to ``dtype``."""
    filter_fn, taps = _AA_FILTERS[mode]
    out_dtype, dtype = dtype, np.dtype(np.float64)
    t = dtype.type
    if align_corners:
        scale = t(size_in - 1) / t(size_out - 1) if size_out > 1 else t(0)
    elif scale_factor is not None and scale_factor > 0:
        scale = t(1) / t(scale_factor)
    else:
        scale = t(size_in) / t(size_out)
    support = t(taps * 0.5) * scale if scale >= 1 else t(taps * 0.5)
    stretch = t(1) / scale if scale >= 1 else t(1)
    weights = np.zeros((size_out, size_in), dtype)
    for i in range(size_out):
        center = scale * t(i + 0.5)
        first = max(int(center - support + t(0.5)), 0)  # int(): C++'s truncating cast
        stop = min(int(center + support + t(0.5)), size_in)
        row = filter_fn((np.arange(first, stop).astype(dtype) - center + t(0.5)) * stretch)
        total = row.sum(dtype=dtype)
        weights[i, first:stop] = row / total if total != 0 else row
    return weights.astype(out_dtype)


def _upsample_aa(mode: str, self: Value, align_corners: bool,
                 scales: Sequence[float | None]) -> Value:
    what = f"_upsample_{mode}2d_aa"
    dtype = self.type.element_type
    if dtype not in (DType.float32, DType.float64):
        raise NotImplementedError(
            f"{what} on {dtype}: torch computes the antialiased resize in float32/float64 "
            "(uint8 uses a fixed-point path); cast the input to float first")
    if self.type.rank != 4:
        raise NotImplementedError(f"{what} expects a [N, C, H, W] input, got {self.type}")
    sizes = static_sizes(self, [2, 3], f"{what} input")
    out_type = result_type()
    outs = [d for d in out_type.shape[2:] if isinstance(d, int)]
    if len(outs) != 2:
        raise NotImplementedError(f"{what} with a dynamic output size ({out_type})")
    y = self
    for axis in (3, 2):  # width first, like torch
        n_in, n_out = sizes[axis - 2], outs[axis - 2]
        if n_in == n_out:
            continue
        m = aa_weights(mode, n_in, n_out, align_corners, scales[axis - 2], dtype.numpy)
        if axis == 3:
            y = coreai.batch_matmul(y, const(np.ascontiguousarray(m.T), dtype))
        else:
            y = coreai.batch_matmul(const(m, dtype), y)
    return y


def _register_aa(mode: str) -> None:
    name = f"_upsample_{mode}2d_aa"

    def default(self: Value, output_size: list[int], align_corners: bool,
                scales_h: float | None = None, scales_w: float | None = None) -> Value:
        return _upsample_aa(mode, self, align_corners, [scales_h, scales_w])

    def vec(input: Value, output_size: list[int] | None, align_corners: bool,
            scale_factors: list[float] | None) -> Value:
        scales = [None, None] if output_size is not None or scale_factors is None else \
            list(scale_factors)
        return _upsample_aa(mode, input, align_corners, scales)

    default.__doc__ = (f"{name}(Tensor self, SymInt[2] output_size, bool align_corners, "
                       "float? scales_h=None, float? scales_w=None) -> Tensor")
    vec.__doc__ = (f"{name}.vec(Tensor input, SymInt[]? output_size, bool align_corners, "
                   "float[]? scale_factors) -> Tensor")
    default.__name__, vec.__name__ = f"aten_{name}_default", f"aten_{name}_vec"
    reg(f"aten::{name}.default")(default)
    reg(f"aten::{name}.vec")(vec)


for _mode in _AA_FILTERS:
    _register_aa(_mode)


__all__ = ["LOWERINGS", "GridTaps", "aa_weights", "grid_sample"]
