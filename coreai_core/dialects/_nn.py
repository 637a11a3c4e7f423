"""Neural-network ops: matmul, convolution, pooling, interpolation.

Quantization ops live with the compression ops (``_compression.py``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, overload

from coreai_core._dtypes import DType
from coreai_core._ir import Dim, Location, TensorType, Value
from coreai_core._opdef import Floats, Ints, IntsLike, Range, ValueLike, builder_names, defop
from coreai_core._shapes import (
    broadcast_shapes,
    expect,
    expect_int_vector,
    lo_hi_pads,
    per_axis,
    same_dtype,
    window_out,
)
from coreai_core.errors import TypeRuleError

# Accepted ranges of the window attributes (as torch): checked before any type rule runs.
Strides = Annotated[Ints | None, Range(lo=1)]
Dilation = Annotated[Ints | None, Range(lo=1)]
Pads = Annotated[Ints | None, Range(lo=0)]
KernelSize = Annotated[Ints, Range(lo=1)]
Groups = Annotated[int, Range(lo=1)]


@defop(traits=("heavy",))
def batch_matmul(lhs: Value, rhs: Value) -> TensorType:
    """``numpy.matmul``: batch dims broadcast; 1-d operands are promoted and squeezed."""
    dtype = same_dtype(lhs, rhs)
    a, b = lhs.type.shape, rhs.type.shape
    expect(len(a) >= 1 and len(b) >= 1, "matmul operands must have rank >= 1")
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    k1, k2 = a2[-1], b2[-2]
    if isinstance(k1, int) and isinstance(k2, int):
        expect(k1 == k2, f"contracting dims differ: {lhs.type} @ {rhs.type}")
    batch = broadcast_shapes(a2[:-2], b2[:-2])
    shape = [*batch, *([a2[-2]] if len(a) > 1 else []), *([b2[-1]] if len(b) > 1 else [])]
    return TensorType(shape, dtype)


def _spatial(x: Value, n: int | None, what: str) -> int:
    rank = x.type.rank
    expect(rank >= 3, f"{what} expects [N, C, *spatial], got {x.type}")
    if n is not None:
        expect(rank - 2 == n, f"{what} expects {n} spatial dims, got {x.type}")
    expect(rank - 2 <= 3, f"{what} supports 1-3 spatial dims, got {x.type}")
    return rank - 2


def _static_kernel(weight: Value) -> list[int]:
    k = [v for v in weight.type.shape[2:] if isinstance(v, int)]
    expect(len(k) == weight.type.rank - 2, "kernel sizes must be static")
    return k


@defop(traits=("heavy",))
def conv(x: Value, weight: Value, bias: Value | None = None, strides: Strides = None,
         pads: Pads = None, dilation: Dilation = None, groups: Groups = 1) -> TensorType:
    """N-d convolution (cross-correlation): x ``[N, C, *S]``, weight ``[O, C/groups, *K]``."""
    n = _spatial(x, None, "conv")
    dtype = same_dtype(x, weight)
    expect(weight.type.rank == n + 2, f"weight {weight.type} must have rank {n + 2}")
    s, d = per_axis(strides, n, 1, "strides"), per_axis(dilation, n, 1, "dilation")
    p = lo_hi_pads(pads, n)
    c, o = x.type.shape[1], weight.type.shape[0]
    if isinstance(c, int) and isinstance(weight.type.shape[1], int):
        expect(c == weight.type.shape[1] * groups,
               f"input channels {c} != weight channels {weight.type.shape[1]} x groups {groups}")
    if isinstance(o, int):
        expect(o % groups == 0, f"output channels {o} not divisible by groups {groups}")
    if bias is not None:
        same_dtype(x, bias)
        expect(bias.type.rank == 1, f"bias must be 1-d, got {bias.type}")
    k = _static_kernel(weight)
    spatial = [window_out(x.type.shape[2 + i], k[i], s[i], p[2 * i], p[2 * i + 1], d[i])
               for i in range(n)]
    return TensorType([x.type.shape[0], o, *spatial], dtype)


@defop(traits=("heavy",))
def conv_transpose(x: Value, weight: Value, bias: Value | None = None,
                   strides: Strides = None, pads: Pads = None, dilation: Dilation = None,
                   groups: Groups = 1,
                   output_padding: Annotated[Ints | None, Range(lo=0)] = None) -> TensorType:
    """Transposed convolution: x ``[N, C, *S]``, weight ``[C, O/groups, *K]``."""
    n = _spatial(x, None, "conv_transpose")
    dtype = same_dtype(x, weight)
    expect(weight.type.rank == n + 2, f"weight {weight.type} must have rank {n + 2}")
    s, d = per_axis(strides, n, 1, "strides"), per_axis(dilation, n, 1, "dilation")
    p = lo_hi_pads(pads, n)
    op_ = per_axis(output_padding, n, 0, "output_padding")
    for i in range(n):
        expect(op_[i] < max(s[i], d[i]), f"output_padding {op_[i]} on spatial axis {i} must be "
               f"smaller than the stride {s[i]} or the dilation {d[i]} (as in torch)")
    c, c_w = x.type.shape[1], weight.type.shape[0]
    if isinstance(c, int) and isinstance(c_w, int):
        expect(c == c_w, f"input channels {c} != weight's first dim {c_w}")
    if isinstance(c_w, int):
        expect(c_w % groups == 0, f"input channels {c_w} not divisible by groups {groups}")
    o = weight.type.shape[1]
    o = o * groups if isinstance(o, int) else Dim()
    if bias is not None:
        same_dtype(x, bias)
    k = _static_kernel(weight)
    spatial: list[int | Dim] = []
    for i in range(n):
        size = x.type.shape[2 + i]
        if not isinstance(size, int):
            spatial.append(Dim())
            continue
        out = (size - 1) * s[i] - p[2 * i] - p[2 * i + 1] + d[i] * (k[i] - 1) + op_[i] + 1
        expect(out >= 0, f"conv_transpose output length {out} < 0 on spatial axis {i}")
        spatial.append(out)
    return TensorType([x.type.shape[0], o, *spatial], dtype)


def _pool_shape(x: Value, kernel_size: Ints, strides: Ints | None, pads: Ints | None,
                dilation: Ints | None, ceil_mode: bool) -> list:  # ranges checked by the ops
    n = _spatial(x, None, "pool")
    k = per_axis(kernel_size, n, 1, "kernel_size")
    s = per_axis(strides, n, 1, "strides") if strides else k
    d, p = per_axis(dilation, n, 1, "dilation"), lo_hi_pads(pads, n)
    for i in range(n):
        expect(max(p[2 * i], p[2 * i + 1]) <= k[i] // 2,
               f"padding {max(p[2 * i], p[2 * i + 1])} must be at most half the kernel size "
               f"{k[i]} (as in torch)")
    spatial = [window_out(x.type.shape[2 + i], k[i], s[i], p[2 * i], p[2 * i + 1], d[i],
                          ceil_mode) for i in range(n)]
    return [*x.type.shape[:2], *spatial]


@defop(traits=("multi_result",))
def maxpool(x: Value, kernel_size: KernelSize, strides: Strides = None, pads: Pads = None,
            dilation: Dilation = None, ceil_mode: bool = False,
            return_indices: bool = False) -> list[TensorType]:
    """Max pooling over 1-3 spatial dims; optional int64 flat indices like torch."""
    shape = _pool_shape(x, kernel_size, strides, pads, dilation, ceil_mode)
    out = [x.type.with_shape(shape)]
    if return_indices:
        out.append(TensorType(shape, DType.int64))
    return out


@defop()
def sumpool(x: Value, kernel_size: KernelSize, strides: Strides = None, pads: Pads = None,
            dilation: Dilation = None, ceil_mode: bool = False) -> TensorType:
    """Sum over sliding windows (zero padding) on 1-3 spatial dims."""
    return x.type.with_shape(_pool_shape(x, kernel_size, strides, pads, dilation, ceil_mode))


@defop()
def avgpool(x: Value, kernel_size: KernelSize, strides: Strides = None, pads: Pads = None,
            ceil_mode: bool = False, count_include_pad: bool = True,
            divisor_override: Annotated[int | None, Range(nonzero=True)] = None) -> TensorType:
    """Average pooling with PyTorch's divisor rules (count_include_pad, divisor_override)."""
    expect(x.type.element_type.is_float, f"avgpool expects a float tensor, got {x.type}")
    return x.type.with_shape(_pool_shape(x, kernel_size, strides, pads, None, ceil_mode))


@defop()
def interpolate(x: Value, sizes: Annotated[Ints, Range(lo=-1)],
                mode: Literal["nearest", "nearest_exact", "linear", "cubic"] = "nearest",
                align_corners: bool = False, scales: Floats | None = None,
                output_size: Value | None = None) -> TensorType:
    """Resize the spatial dims to ``sizes`` (PyTorch upsample semantics).

    ``linear`` is bi/tri-linear by rank; ``scales`` are torch's ``scale_factor`` values
    (output/input, one per spatial dim; a value <= 0 means "not given") and change the
    coordinate mapping exactly like torch does. ``output_size`` (1-d int64, one entry per
    spatial dim) gives sizes known only at run time; ``sizes`` then holds -1 for each of them.
    """
    n = _spatial(x, None, "interpolate")
    expect(len(sizes) == n, f"sizes needs {n} entries, got {list(sizes)}")
    if output_size is not None:
        expect_int_vector(output_size, "output_size", n)
        return x.type.with_shape([*x.type.shape[:2],
                                  *(Dim() if s == -1 else s for s in sizes)])
    expect(all(s >= 0 for s in sizes),
           f"sizes entries must be >= 0 (-1 only with output_size), got {list(sizes)}")
    if scales is not None:
        expect(len(scales) == n, f"scales needs {n} entries, got {list(scales)}")
    if mode == "cubic":
        expect(n == 2, "cubic interpolation needs 2 spatial dims")
    expect(x.type.element_type.is_float or mode.startswith("nearest"),
           f"{mode} interpolation expects a float tensor, got {x.type}")
    return x.type.with_shape([*x.type.shape[:2], *sizes])


# -- fixed-rank builder names (the seed guide's spelling); they build the ops above ------------

def _rank_checked(x: Any, n: int, name: str) -> None:
    if isinstance(x, Value) and x.type.rank != n + 2:
        raise TypeRuleError(f"{name} expects a rank-{n + 2} input, got {x.type}", op=name)


def conv2d(x: ValueLike, weight: ValueLike, bias: ValueLike | None = None,
           strides: IntsLike | None = None, pads: IntsLike | None = None,
           dilation: IntsLike | None = None, groups: int = 1, *,
           loc: Location | None = None) -> Value:
    """:func:`conv` on [N, C, H, W]."""
    _rank_checked(x, 2, "coreai.conv2d")
    return conv(x, weight, bias, strides, pads, dilation, groups, loc=loc)


def sumpool2d(x: ValueLike, kernel_size: IntsLike, strides: IntsLike | None = None,
              pads: IntsLike | None = None, dilation: IntsLike | None = None,
              ceil_mode: bool = False, *, loc: Location | None = None) -> Value:
    """:func:`sumpool` on [N, C, H, W]."""
    _rank_checked(x, 2, "coreai.sumpool2d")
    return sumpool(x, kernel_size, strides, pads, dilation, ceil_mode, loc=loc)


@overload
def maxpool2d(x: ValueLike, kernel_size: IntsLike, strides: IntsLike | None = None,
              pads: IntsLike | None = None, dilation: IntsLike | None = None,
              ceil_mode: bool = False, return_indices: Literal[False] = False, *,
              loc: Location | None = None) -> Value: ...
@overload
def maxpool2d(x: ValueLike, kernel_size: IntsLike, strides: IntsLike | None = None,
              pads: IntsLike | None = None, dilation: IntsLike | None = None,
              ceil_mode: bool = False, *, return_indices: Literal[True],
              loc: Location | None = None) -> tuple[Value, Value]: ...
def maxpool2d(x: ValueLike, kernel_size: IntsLike, strides: IntsLike | None = None,
              pads: IntsLike | None = None, dilation: IntsLike | None = None,
              ceil_mode: bool = False, return_indices: bool = False, *,
              loc: Location | None = None) -> Value | tuple[Value, Value]:
    """:func:`maxpool` on [N, C, H, W]; returns the values (and indices if asked)."""
    _rank_checked(x, 2, "coreai.maxpool2d")
    out = maxpool(x, kernel_size, strides, pads, dilation, ceil_mode, return_indices, loc=loc)
    return (out[0], out[1]) if return_indices else out[0]


# the builders of the ops defined above (see builder_names), and the conveniences this module adds
__all__ = [*builder_names(__name__), "conv2d", "sumpool2d", "maxpool2d"]
