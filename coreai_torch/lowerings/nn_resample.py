"""Built-in lowerings (nn family): upsampling and grid_sampler_2d.

Every ``upsample_*`` overload maps onto ``coreai.interpolate``, whose ``scales`` attribute
carries torch's scale factors so source coordinates are computed exactly like torch's.
``grid_sampler_2d`` is built from the dialect: unnormalize the grid, apply the padding mode
(clip or reflect), then gather the taps of each output pixel from the flattened input plane
and blend them; out-of-range taps read zero.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from coreai_core import Dim, DType, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._nn_utils import const, const64, dim_value, leading_shape, opmath
from coreai_torch.lowerings.tensor_creation import Piece, dim_piece, shape_operand, size_piece
from coreai_torch.utils import cast_to, result_dtype, result_type

LOWERINGS = LoweringSet("nn_resample")
reg = LOWERINGS.register_torch_lowering

# -- upsample -------------------------------------------------------------------------------------

_AXES = {1: ("scales",), 2: ("scales_h", "scales_w"), 3: ("scales_d", "scales_h", "scales_w")}
Mode = Literal["nearest", "nearest_exact", "linear", "cubic"]
_MODES: dict[str, tuple[Mode, int, bool]] = {  # aten name -> (mode, spatial dims, corners)
    "upsample_nearest1d": ("nearest", 1, False),
    "upsample_nearest2d": ("nearest", 2, False),
    "upsample_nearest3d": ("nearest", 3, False),
    "_upsample_nearest_exact1d": ("nearest_exact", 1, False),
    "_upsample_nearest_exact2d": ("nearest_exact", 2, False),
    "_upsample_nearest_exact3d": ("nearest_exact", 3, False),
    "upsample_linear1d": ("linear", 1, True),
    "upsample_bilinear2d": ("linear", 2, True),
    "upsample_trilinear3d": ("linear", 3, True),
    "upsample_bicubic2d": ("cubic", 2, True),
}


def _upsample(name: str, overload: str) -> Callable[..., Value]:
    mode, n, has_corners = _MODES[name]

    # the overloads differ in argument names (``input``/``self``, per-axis scales), so the
    # lowering takes the bound arguments by name
    def lowering(**args: Any) -> Value:
        x = args["input"] if overload == "vec" else args["self"]
        out_type = result_type()
        sizes = list(out_type.shape[2:])
        dynamic = not all(isinstance(s, int) for s in sizes)
        if mode != "nearest" and mode != "nearest_exact" and not x.type.element_type.is_float:
            raise NotImplementedError(f"{name} on {x.type.element_type} (torch rounds integer "
                                      "interpolation differently)")
        corners = bool(args["align_corners"]) if has_corners else False
        given = args["output_size"]
        scales: list[float] | None = None
        if overload == "vec":
            factors = args["scale_factors"]
            if given is None and factors is not None:
                scales = [float(f) for f in factors]
        else:
            per_axis = [args[key] for key in _AXES[n]]
            if any(s is not None for s in per_axis):
                # an axis without a scale uses in/out, which is what out/in as a scale gives
                # (or -1, "not given", when the sizes are dynamic)
                in_sizes = x.type.shape[2:]
                scales = [float(s) if s is not None else
                          -1.0 if dynamic else _ratio(sizes[i], in_sizes[i])
                          for i, s in enumerate(per_axis)]
        output_size = None
        static = [s if isinstance(s, int) else -1 for s in sizes]
        if dynamic:
            output_size = _output_size(x, given, args.get("scale_factors"), overload, name)
        y = coreai.interpolate(x, sizes=static, mode=mode, align_corners=corners, scales=scales,
                               output_size=output_size)
        return cast_to(y, out_type.element_type)

    args = ("SymInt[]? output_size" + (", bool align_corners" if has_corners else "")
            + ", float[]? scale_factors") if overload == "vec" else (
        f"SymInt[{n}] output_size" + (", bool align_corners" if has_corners else "")
        + "".join(f", float? {k}=None" for k in _AXES[n]))
    lowering.__doc__ = f"{name}.{overload}(Tensor input, {args}) -> Tensor"
    lowering.__name__ = f"aten_{name}_{overload}"
    return lowering


def _ratio(out: int | Dim, size: int | Dim) -> float:
    if not isinstance(out, int) or not isinstance(size, int):
        raise NotImplementedError("a missing scale with dynamic sizes")
    return out / size


def _output_size(x: Value, given: list[int | Value] | None, factors: list[float] | None,
                 overload: str, name: str) -> Value:
    """The spatial output sizes as a 1-d int64 operand: the given (symbolic) sizes, or
    ``int(in * scale)`` computed in double like ATen's ``compute_output_size``."""
    if given is not None:
        return shape_operand([size_piece(s) for s in given])
    if overload != "vec" or factors is None:
        raise NotImplementedError(f"{name}.{overload} without an output size")
    pieces: list[Piece] = []
    for i, scale in enumerate(factors):
        size = dim_piece(x, 2 + i)
        if isinstance(size, int):
            pieces.append(int(size * float(scale)))
            continue
        real = coreai.broadcasting_mul(cast_to(size, DType.float64),
                                       const(float(scale), DType.float64))
        pieces.append(cast_to(coreai.trunc(real), DType.int64))
    return shape_operand(pieces)


for _name in _MODES:
    for _overload in ("vec", "default"):
        reg(f"aten::{_name}.{_overload}")(_upsample(_name, _overload))


# -- grid_sampler_2d ------------------------------------------------------------------------------

BILINEAR, NEAREST, BICUBIC = 0, 1, 2
_ZEROS, _BORDER, _REFLECTION = 0, 1, 2


def _as64(v: int | Value) -> Value:
    return const64(v) if isinstance(v, int) else v


class GridCoords:
    """Coordinate arithmetic of one grid axis of extent ``size`` (torch's ComputeLocation);
    ``size`` is an int, or a 0-d int64 Value when the input's size is known only at run time."""

    def __init__(self, size: int | Value, align_corners: bool, padding: int,
                 dtype: DType) -> None:
        self.size, self.corners, self.padding = size, align_corners, padding
        self.dtype = dtype

    def c(self, v: float) -> Value:
        return const(v, self.dtype)

    def _extent(self, offset: int, factor: float) -> Value:
        """``(size + offset) * factor`` in the compute dtype."""
        if isinstance(self.size, int):
            return self.c((self.size + offset) * factor)
        shifted = coreai.broadcasting_add(self.size, const64(offset))
        return coreai.broadcasting_mul(cast_to(shifted, self.dtype), self.c(factor))

    def unnormalize(self, g: Value) -> Value:
        if self.corners:
            return coreai.broadcasting_mul(coreai.broadcasting_add(g, self.c(1)),
                                           self._extent(-1, 0.5))
        scaled = coreai.broadcasting_mul(coreai.broadcasting_add(g, self.c(1)),
                                         self._extent(0, 0.5))
        return coreai.broadcasting_sub(scaled, self.c(0.5))

    def clip(self, v: Value) -> Value:
        return coreai.broadcasting_minimum(coreai.broadcasting_maximum(v, self.c(0)),
                                           self._extent(-1, 1.0))

    def reflect(self, v: Value) -> Value:
        low = 0.0 if self.corners else -0.5
        if isinstance(self.size, int):
            twice_static = 2.0 * (self.size - 1) if self.corners else 2.0 * self.size
            if twice_static <= 0:
                return coreai.broadcasting_mul(v, self.c(0))
            return self._fold(v, low, self.c(twice_static))
        twice = self._extent(-1, 2.0) if self.corners else self._extent(0, 2.0)
        # a size-1 axis with align_corners has no extent (twice == 0): the result is v * 0,
        # as in the static case; the fold divides by 1 there and is discarded
        empty = coreai.broadcasting_less_equal(twice, self.c(0))
        folded = self._fold(v, low, coreai.broadcasting_where(empty, self.c(1), twice))
        return coreai.broadcasting_where(empty, coreai.broadcasting_mul(v, self.c(0)), folded)

    def _fold(self, v: Value, low: float, twice: Value) -> Value:
        shifted = coreai.abs_(coreai.broadcasting_sub(v, self.c(low)))
        flips = coreai.trunc(coreai.broadcasting_divide(shifted, twice))
        extra = coreai.broadcasting_sub(shifted, coreai.broadcasting_mul(flips, twice))
        folded = coreai.broadcasting_minimum(extra, coreai.broadcasting_sub(twice, extra))
        return coreai.broadcasting_add(folded, self.c(low))

    def pad(self, v: Value) -> Value:
        """Apply the padding mode to unnormalized coordinates."""
        if self.padding == _BORDER:
            return self.clip(v)
        if self.padding == _REFLECTION:
            return self.clip(self.reflect(v))
        return v


def _shape_part(x: Value, start: int, stop: int) -> Value:
    """``x``'s sizes ``start:stop`` as a 1-d int64 Value."""
    return coreai.slice_(coreai.get_shape(x), [start], [stop], axes=[0], strides=[1])


class GridTaps:
    """Reads ``input[n, :, i_0, ..., i_{k-1}]`` for int64 index maps ``[N, *out]`` (zero
    outside the input) from an input ``[N, C, *sizes]``. ``sizes`` are ints, or 0-d int64
    Values for sizes known only at run time; ``N`` and ``out`` may be dynamic too."""

    def __init__(self, x: Value, sizes: Sequence[int | Value]) -> None:
        self.sizes = list(sizes)
        static = [s for s in self.sizes if isinstance(s, int)]
        total = -1
        if len(static) == len(self.sizes):
            total = 1
            for s in static:
                total *= s
        self.flat = coreai.reshape(x, leading_shape(x, 2, [total]))

    def read(self, indices: Sequence[Value]) -> Value:
        """The taps at ``indices`` (one map per spatial axis, outermost first): [N, C, *out]."""
        zero = const64(0)
        valid: Value | None = None
        pos: Value | None = None
        for idx, size in zip(indices, self.sizes, strict=True):
            inside = coreai.broadcasting_and(coreai.broadcasting_greater_equal(idx, zero),
                                             coreai.broadcasting_less(idx, _as64(size)))
            valid = inside if valid is None else coreai.broadcasting_and(valid, inside)
            top = const64(size - 1) if isinstance(size, int) else \
                coreai.broadcasting_sub(size, const64(1))
            clamped = coreai.broadcasting_minimum(coreai.broadcasting_maximum(idx, zero), top)
            pos = clamped if pos is None else coreai.broadcasting_add(
                coreai.broadcasting_mul(pos, _as64(size)), clamped)
        assert pos is not None and valid is not None
        out = [d for d in pos.type.shape[1:] if isinstance(d, int)]
        if len(out) == pos.type.rank - 1:
            count = 1
            for d in out:
                count *= d
            flat_pos = coreai.reshape(pos, leading_shape(pos, 1, [1, count]))
            flat_pos = coreai.broadcast_to(flat_pos, leading_shape(self.flat, 2, [count]))
            got = coreai.gather_along_axis(self.flat, flat_pos, axis=2)
            return self._masked(coreai.reshape(got, leading_shape(self.flat, 2, out)), valid)
        # dynamic grid sizes: the same with run-time shapes
        flat_pos = coreai.reshape(pos, leading_shape(pos, 1, [1, -1]))
        flat_pos = coreai.broadcast_to(flat_pos, coreai.concat(
            [_shape_part(self.flat, 0, 2), _shape_part(flat_pos, 2, 3)], axis=0))
        got = coreai.gather_along_axis(self.flat, flat_pos, axis=2)
        got = coreai.reshape(got, coreai.concat(
            [_shape_part(self.flat, 0, 2), _shape_part(pos, 1, pos.type.rank)], axis=0))
        return self._masked(got, valid)

    @staticmethod
    def _masked(got: Value, valid: Value) -> Value:
        mask = coreai.expand_dims(valid, [1])
        return coreai.broadcasting_where(mask, got, const(0, got.type.element_type))


def _cubic_weights(t: Value) -> list[Value]:
    """torch's bicubic convolution weights (A = -0.75) for the taps at -1, 0, 1, 2."""
    dtype = t.type.element_type
    a = -0.75

    def c(v: float) -> Value:
        return const(v, dtype)

    def mul(p: Value, q: Value) -> Value:
        return coreai.broadcasting_mul(p, q)

    def add(p: Value, q: Value) -> Value:
        return coreai.broadcasting_add(p, q)

    def conv1(s: Value) -> Value:  # ((A + 2) * s - (A + 3)) * s * s + 1
        return add(mul(mul(add(mul(c(a + 2), s), c(-(a + 3))), s), s), c(1))

    def conv2(s: Value) -> Value:  # ((A * s - 5A) * s + 8A) * s - 4A
        return add(mul(add(mul(add(mul(c(a), s), c(-5 * a)), s), c(8 * a)), s), c(-4 * a))

    one_minus = coreai.broadcasting_sub(c(1), t)
    return [conv2(add(t, c(1))), conv1(t), conv1(one_minus), conv2(add(one_minus, c(1)))]


@reg("aten::grid_sampler_2d.default")
def aten_grid_sampler_2d_default(input: Value, grid: Value, interpolation_mode: int,
                                 padding_mode: int, align_corners: bool) -> Value:
    """grid_sampler_2d(Tensor input, Tensor grid, int interpolation_mode, int padding_mode,
    bool align_corners) -> Tensor"""
    compute = opmath(input.type.element_type)
    x = cast_to(input, compute)
    grid = cast_to(grid, compute)
    mode, padding, corners = interpolation_mode, padding_mode, align_corners
    h, w = dim_value(x, 2), dim_value(x, 3)
    gx = coreai.gather(grid, const64(0), axis=3)
    gy = coreai.gather(grid, const64(1), axis=3)
    cx, cy = GridCoords(w, corners, padding, compute), GridCoords(h, corners, padding, compute)
    taps = GridTaps(x, [h, w])

    def index(v: Value) -> Value:
        return cast_to(v, DType.int64)

    def weighted(v: Value, wt: Value) -> Value:
        return coreai.broadcasting_mul(v, coreai.expand_dims(wt, [1]))

    out: Value | None = None
    if mode == NEAREST:
        ix = index(coreai.round_(cx.pad(cx.unnormalize(gx))))
        iy = index(coreai.round_(cy.pad(cy.unnormalize(gy))))
        out = taps.read([iy, ix])
    elif mode == BILINEAR:
        fx, fy = cx.pad(cx.unnormalize(gx)), cy.pad(cy.unnormalize(gy))
        x0, y0 = coreai.floor(fx), coreai.floor(fy)
        we = coreai.broadcasting_sub(fx, x0)
        ww = coreai.broadcasting_sub(cx.c(1), we)
        ws = coreai.broadcasting_sub(fy, y0)
        wn = coreai.broadcasting_sub(cy.c(1), ws)
        ix0, iy0 = index(x0), index(y0)
        ix1 = coreai.broadcasting_add(ix0, const64(1))
        iy1 = coreai.broadcasting_add(iy0, const64(1))
        for iy, ix, wy, wx in ((iy0, ix0, wn, ww), (iy0, ix1, wn, we), (iy1, ix0, ws, ww),
                               (iy1, ix1, ws, we)):
            term = weighted(taps.read([iy, ix]), coreai.broadcasting_mul(wy, wx))
            out = term if out is None else coreai.broadcasting_add(out, term)
    elif mode == BICUBIC:
        fx, fy = cx.unnormalize(gx), cy.unnormalize(gy)
        x0, y0 = coreai.floor(fx), coreai.floor(fy)
        wxs = _cubic_weights(coreai.broadcasting_sub(fx, x0))
        wys = _cubic_weights(coreai.broadcasting_sub(fy, y0))
        cols = [index(cx.pad(coreai.broadcasting_add(x0, cx.c(i - 1))))
                for i in range(4)]
        for j in range(4):
            iy = index(cy.pad(coreai.broadcasting_add(y0, cy.c(j - 1))))
            row = weighted(taps.read([iy, cols[0]]), wxs[0])
            for i in range(1, 4):
                row = coreai.broadcasting_add(row, weighted(taps.read([iy, cols[i]]), wxs[i]))
            term = weighted(row, wys[j])
            out = term if out is None else coreai.broadcasting_add(out, term)
    else:
        raise NotImplementedError(f"grid_sampler_2d interpolation_mode {mode}")
    assert out is not None
    return cast_to(out, result_dtype())


__all__ = ["BICUBIC", "BILINEAR", "LOWERINGS", "NEAREST", "GridCoords", "GridTaps"]
