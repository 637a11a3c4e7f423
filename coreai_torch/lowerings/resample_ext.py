"""Built-in lowerings (resample_ext family): ``grid_sampler_3d`` and an N-d grid sampler.

``grid_sample`` over ``n`` spatial axes: the grid's last axis holds one normalized coordinate
per spatial axis in reverse order (x = the last spatial axis). Each coordinate is unnormalized
and padded per axis with :class:`coreai_torch.lowerings.resample._Coords` (torch's
ComputeLocation), then the ``2**n`` corner taps (bilinear/trilinear) or the nearest tap are
gathered from the input flattened over its spatial axes; a tap outside the input reads zero,
which is torch's ``zeros`` padding and harmless for the clipped modes.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from coreai_core import DType, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._nn_utils import const, const64, leading_shape, opmath, static_sizes
from coreai_torch.lowerings.resample import _BILINEAR, _NEAREST, _Coords
from coreai_torch.utils import cast_to, result_dtype

LOWERINGS = LoweringSet("resample_ext")
reg = LOWERINGS.register_torch_lowering

_MODE_NAMES = {0: "bilinear", 1: "nearest", 2: "bicubic"}


class GridTaps:
    """Reads ``input[n, :, i_0, ..., i_{k-1}]`` for int64 index maps ``[N, *out]`` (zero
    outside the input) from an input ``[N, C, *sizes]``."""

    def __init__(self, x: Value, sizes: Sequence[int]) -> None:
        self.sizes = list(sizes)
        total = 1
        for s in self.sizes:
            total *= s
        self.flat = coreai.reshape(x, leading_shape(x, 2, [total]))

    def read(self, indices: Sequence[Value]) -> Value:
        """The taps at ``indices`` (one map per spatial axis, outermost first): [N, C, *out]."""
        zero = const64(0)
        valid: Value | None = None
        pos: Value | None = None
        for idx, size in zip(indices, self.sizes, strict=True):
            inside = coreai.broadcasting_and(coreai.broadcasting_greater_equal(idx, zero),
                                             coreai.broadcasting_less(idx, const64(size)))
            valid = inside if valid is None else coreai.broadcasting_and(valid, inside)
            clamped = coreai.broadcasting_minimum(coreai.broadcasting_maximum(idx, zero),
                                                  const64(size - 1))
            pos = clamped if pos is None else coreai.broadcasting_add(
                coreai.broadcasting_mul(pos, const64(size)), clamped)
        assert pos is not None and valid is not None
        out = static_sizes(pos, list(range(1, pos.type.rank)), "grid_sample grid")
        count = 1
        for d in out:
            count *= d
        pos = coreai.reshape(pos, leading_shape(pos, 1, [1, count]))
        pos = coreai.broadcast_to(pos, leading_shape(self.flat, 2, [count]))
        got = coreai.gather_along_axis(self.flat, pos, axis=2)
        got = coreai.reshape(got, leading_shape(self.flat, 2, out))
        mask = coreai.expand_dims(valid, [1])
        return coreai.broadcasting_where(mask, got, const(0, got.type.element_type))


def grid_sample(x: Value, grid: Value, mode: int, padding: int, align_corners: bool,
                what: str) -> Value:
    """torch's ``grid_sampler_{n}d`` for ``mode`` bilinear (multilinear) or nearest.

    ``x`` is [N, C, *sizes] and ``grid`` [N, *out, n] in the compute dtype; the result is
    [N, C, *out] in that dtype.
    """
    n = x.type.rank - 2
    sizes = static_sizes(x, list(range(2, n + 2)), f"{what} input")
    static_sizes(grid, list(range(1, n + 1)), f"{what} grid")
    compute = x.type.element_type
    taps = GridTaps(x, sizes)
    coords, points = [], []
    for axis, size in enumerate(sizes):
        c = _Coords(size, align_corners, padding, compute)
        g = coreai.gather(grid, const64(n - 1 - axis), axis=n + 1)
        coords.append(c)
        points.append(c.pad(c.unnormalize(g)))

    def index(v: Value) -> Value:
        return cast_to(v, DType.int64)

    if mode == _NEAREST:
        return taps.read([index(coreai.round_(p)) for p in points])
    if mode != _BILINEAR:
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


__all__ = ["LOWERINGS", "GridTaps", "grid_sample"]
