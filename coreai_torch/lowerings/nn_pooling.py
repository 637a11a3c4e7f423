"""Built-in lowerings (nn family): average, max and adaptive pooling over 1-3 spatial dims.

Adaptive pools use torch's windows ``[floor(i*in/out), ceil((i+1)*in/out))``. When every
output size divides its input size the windows are a plain pool; otherwise
``_adaptive_avg_pool`` applies one averaging matrix per axis with ``batch_matmul`` (built at
run time for dynamic sizes) and ``adaptive_max_pool`` gathers each window (padded by
repeating its last element; the windows are computed at run time for dynamic sizes) and
reduces it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from coreai_core import DType, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._nn_utils import (
    add_batch,
    const,
    const64,
    dim_value,
    drop_batch,
    ntuple,
    opmath,
    reshape_lead,
    static_sizes,
)
from coreai_torch.utils import cast_to, result_dtype

LOWERINGS = LoweringSet("nn_pooling")
reg = LOWERINGS.register_torch_lowering


def _window_args(n: int, kernel_size: list[int], stride: list[int] | None,
                 padding: list[int] | None) -> tuple[list[int], list[int], list[int]]:
    k = ntuple(kernel_size, n, "kernel_size")
    s = ntuple(stride, n, "stride", default=k)
    p = ntuple(padding, n, "padding", 0)
    return k, s, p


# -- average pooling ------------------------------------------------------------------------------

def _avg_divisor(sizes: list[int], outs: list[int], k: list[int], s: list[int], p: list[int],
                 count_include_pad: bool) -> np.ndarray:
    """torch's per-window divisor on the output grid (product of per-axis counts)."""
    div = np.ones((), np.int64)
    for i, (size, out) in enumerate(zip(sizes, outs, strict=True)):
        start = np.arange(out) * s[i] - p[i]
        end = np.minimum(start + k[i], size + p[i])
        count = end - start if count_include_pad else (np.minimum(end, size)
                                                      - np.maximum(start, 0))
        shape = [1] * len(sizes)
        shape[i] = out
        div = div * count.reshape(shape)
    return div


def _avg_pool(n: int) -> Callable[..., Value]:
    def lowering(self: Value, kernel_size: list[int], stride: list[int] | None = None,
                 padding: list[int] | None = None, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override: int | None = None) -> Value:
        k, s, p = _window_args(n, kernel_size, stride, padding)
        include_pad, override = count_include_pad, divisor_override
        x, added = add_batch(self, n)
        if x.type.element_type.is_float:
            y = coreai.avgpool(x, kernel_size=k, strides=s, pads=p, ceil_mode=ceil_mode,
                               count_include_pad=include_pad, divisor_override=override)
        else:  # torch (int64 only) divides the integer window sum, truncating
            total = coreai.sumpool(x, kernel_size=k, strides=s, pads=p, ceil_mode=ceil_mode)
            if override:
                div: object = override
            else:
                sizes = static_sizes(x, list(range(2, n + 2)), "integer avg_pool")
                outs = static_sizes(total, list(range(2, n + 2)), "integer avg_pool")
                div = _avg_divisor(sizes, outs, k, s, p, include_pad)
            y = coreai.broadcasting_divide(total, const(div, x.type.element_type))
        return cast_to(drop_batch(y, added), result_dtype())

    lowering.__doc__ = (f"avg_pool{n}d(Tensor self, int[{n}] kernel_size, int[{n}] stride=[], "
                        f"int[{n}] padding=0, bool ceil_mode=False, bool count_include_pad=True"
                        + (", int? divisor_override=None" if n > 1 else "") + ") -> Tensor")
    lowering.__name__ = f"aten_avg_pool{n}d_default"
    return lowering


for _n in (1, 2, 3):
    reg(f"aten::avg_pool{_n}d.default")(_avg_pool(_n))


# -- max pooling ----------------------------------------------------------------------------------

def _max_pool(n: int, with_indices: bool) -> Callable[..., Value | list[Value]]:
    def lowering(self: Value, kernel_size: list[int], stride: list[int] | None = None,
                 padding: list[int] | None = None, dilation: list[int] | None = None,
                 ceil_mode: bool = False) -> Value | list[Value]:
        k, s, p = _window_args(n, kernel_size, stride, padding)
        d = ntuple(dilation, n, "dilation", 1)
        x, added = add_batch(self, n)
        pooled = coreai.maxpool(x, kernel_size=k, strides=s, pads=p, dilation=d,
                                ceil_mode=ceil_mode, return_indices=with_indices)
        out = [drop_batch(v, added) for v in pooled]
        return out if with_indices else out[0]

    suffix = "_with_indices" if with_indices else ""
    result = "(Tensor, Tensor)" if with_indices else "Tensor"
    lowering.__doc__ = (f"max_pool{n}d{suffix}(Tensor self, int[{n}] kernel_size, int[{n}] "
                        f"stride=[], int[{n}] padding=0, int[{n}] dilation=1, "
                        f"bool ceil_mode=False) -> {result}")
    lowering.__name__ = f"aten_max_pool{n}d{suffix}_default"
    return lowering


for _n in (1, 2, 3):
    reg(f"aten::max_pool{_n}d.default")(_max_pool(_n, False))
    reg(f"aten::max_pool{_n}d_with_indices.default")(_max_pool(_n, True))


# -- adaptive pooling -----------------------------------------------------------------------------

def _windows(size: int, out: int) -> list[tuple[int, int]]:
    return [((i * size) // out, -(-((i + 1) * size) // out)) for i in range(out)]


def _avg_matrix(size: int | Value, out: int, dtype: DType) -> Value:
    """[out, size] matrix averaging torch's adaptive windows (computed in-graph if dynamic)."""
    if isinstance(size, int):
        m = np.zeros((out, size), np.float64)
        for row, (a, b) in enumerate(_windows(size, out)):
            m[row, a:b] = 1.0 / (b - a)
        return coreai.constant(m, dtype=dtype)
    i = const64(np.arange(out).reshape(out, 1))
    j = coreai.expand_dims(coreai.range_(const64(0), size, const64(1)), [0])
    o = const64(out)
    start = coreai.broadcasting_floor_divide(coreai.broadcasting_mul(i, size), o)
    hi = coreai.broadcasting_mul(coreai.broadcasting_add(i, const64(1)), size)
    end = coreai.broadcasting_floor_divide(
        coreai.broadcasting_add(hi, const64(out - 1)), o)
    inside = coreai.broadcasting_and(coreai.broadcasting_greater_equal(j, start),
                                     coreai.broadcasting_less(j, end))
    weight = coreai.reciprocal(cast_to(coreai.broadcasting_sub(end, start), dtype))
    return coreai.broadcasting_where(inside, weight, const(0, dtype))


def _swap(rank: int, a: int, b: int) -> list[int]:
    perm = list(range(rank))
    perm[a], perm[b] = perm[b], perm[a]
    return perm


def _adaptive_avg_pool(x: Value, outs: tuple[int, ...], dtype: DType) -> Value:
    """Adaptive average pooling of the last ``len(outs)`` axes of a real ``x``, as ``dtype``."""
    n = len(outs)
    rank = x.type.rank
    sizes = [x.type.shape[rank - n + i] for i in range(n)]
    static = [v for v in sizes if isinstance(v, int)]
    if len(static) == n and all(v % o == 0 for v, o in zip(static, outs, strict=True)):
        xb, added = add_batch(x, n)
        k = [v // o for v, o in zip(static, outs, strict=True)]
        y = coreai.avgpool(xb, kernel_size=k, strides=k)
        return cast_to(drop_batch(y, added), dtype)
    compute = opmath(x.type.element_type)
    y = cast_to(x, compute)
    for i in reversed(range(n)):
        axis = rank - n + i
        m = _avg_matrix(dim_value(x, axis), outs[i], compute)
        if axis == rank - 1:
            y = coreai.batch_matmul(y, coreai.transpose(m, [1, 0]))
            continue
        perm = _swap(rank, axis, rank - 2)
        if axis != rank - 2:
            y = coreai.transpose(y, perm)
        y = coreai.batch_matmul(m, y)
        if axis != rank - 2:
            y = coreai.transpose(y, perm)
    return cast_to(y, dtype)


def _adaptive_avg(n: int) -> Callable[..., Value]:
    def lowering(self: Value, output_size: list[int]) -> Value:
        outs = tuple(ntuple(output_size, n, "output_size"))
        dtype = result_dtype()
        if self.type.element_type.is_complex:
            # averaging is linear: pool the parts (torch itself runs complex inputs only for
            # an all-ones output_size, as a mean)
            part = dtype.real_dtype
            return coreai.complex_(_adaptive_avg_pool(coreai.real(self), outs, part),
                                   _adaptive_avg_pool(coreai.imag(self), outs, part))
        return _adaptive_avg_pool(self, outs, dtype)

    lowering.__doc__ = f"_adaptive_avg_pool{n}d(Tensor self, SymInt[{n}] output_size) -> Tensor"
    lowering.__name__ = f"aten__adaptive_avg_pool{n}d_default"
    return lowering


reg("aten::_adaptive_avg_pool2d.default")(_adaptive_avg(2))
reg("aten::_adaptive_avg_pool3d.default")(_adaptive_avg(3))
# Reached only without get_decomp_table (which rewrites it to the 2-d op).
reg("aten::adaptive_avg_pool1d.default")(_adaptive_avg(1))


def _adaptive_max(n: int) -> Callable[..., list[Value]]:
    def lowering(self: Value, output_size: list[int]) -> list[Value]:
        x = self
        outs = ntuple(output_size, n, "output_size")
        rank = x.type.rank
        sizes = [dim_value(x, a) for a in range(rank - n, rank)]
        static = [v for v in sizes if isinstance(v, int)]
        if len(static) == n and all(v % o == 0 for v, o in zip(static, outs, strict=True)):
            xb, added = add_batch(x, n)
            k = [v // o for v, o in zip(static, outs, strict=True)]
            y, idx = coreai.maxpool(xb, kernel_size=k, strides=k, return_indices=True)
            return [drop_batch(y, added), drop_batch(idx, added)]
        return _gathered_max(x, sizes, outs)

    lowering.__doc__ = (f"adaptive_max_pool{n}d(Tensor self, int[{n}] output_size) "
                        "-> (Tensor, Tensor)")
    lowering.__name__ = f"aten_adaptive_max_pool{n}d_default"
    return lowering


def _as64(v: int | Value) -> Value:
    return const64(v) if isinstance(v, int) else v


class _Windows:
    """torch's adaptive windows of one axis of ``size`` (an int, or a 0-d int64 Value known at
    run time) split into ``out`` cells: ``start``/``last`` [out] (first and last input index
    of each window) and the tap table [out, width], ``min(start + t, last)`` (a window shorter
    than ``width`` repeats its last element). ``width`` is the widest window when the size is
    static, else the bound ``ceil(size / out) + 1``, computed at run time."""

    def __init__(self, size: int | Value, out: int) -> None:
        if isinstance(size, int):
            wins = _windows(size, out)
            width = max(b - a for a, b in wins)
            self.start = const64([a for a, _ in wins])
            self.last = const64([b - 1 for _, b in wins])
            self.table = const64([[min(a + t, b - 1) for t in range(width)] for a, b in wins])
            return
        cell = const64(np.arange(out))
        o = const64(out)
        self.start = coreai.broadcasting_floor_divide(coreai.broadcasting_mul(cell, size), o)
        hi = coreai.broadcasting_mul(coreai.broadcasting_add(cell, const64(1)), size)
        self.last = coreai.broadcasting_sub(
            coreai.broadcasting_floor_divide(coreai.broadcasting_add(hi, const64(out - 1)), o),
            const64(1))
        bound = coreai.broadcasting_add(coreai.broadcasting_floor_divide(
            coreai.broadcasting_add(size, const64(out - 1)), o), const64(1))
        taps = coreai.expand_dims(coreai.range_(const64(0), bound, const64(1)), [0])
        self.table = coreai.broadcasting_minimum(
            coreai.broadcasting_add(coreai.expand_dims(self.start, [1]), taps),
            coreai.expand_dims(self.last, [1]))


def _gathered_max(x: Value, sizes: list[int | Value], outs: list[int]) -> list[Value]:
    """Adaptive max pool by gathering every window: values and flat int64 plane indices.

    Sizes may be dynamic (0-d int64 Values): the windows are then computed at run time.
    Ties pick the first maximum and NaN wins, the last NaN of a window, like torch's scan.
    """
    n, rank = len(sizes), x.type.rank
    lead = rank - n
    wins = [_Windows(size, out) for size, out in zip(sizes, outs, strict=True)]
    y = x
    for i in reversed(range(n)):
        y = coreai.gather(y, wins[i].table, axis=lead + i)
    # [lead..., o1, K1, ..., on, Kn] -> [lead..., o1..on, K1*...*Kn]
    perm = [*range(lead), *(lead + 2 * i for i in range(n)), *(lead + 2 * i + 1 for i in range(n))]
    widths = [dim_value(w.table, 1) for w in wins]
    y = reshape_lead(coreai.transpose(y, perm), lead + n, [-1])
    taps = dim_value(y, y.type.rank - 1)
    values = coreai.reduce_max(y, axes=[-1])
    local = coreai.argmax(y, axis=-1)
    if y.type.element_type.is_float:
        nan = coreai.isnan(y)
        last = coreai.argmax(coreai.reverse(cast_to(nan, DType.int8), axes=[-1]),
                             axis=-1)
        last = coreai.broadcasting_sub(coreai.broadcasting_sub(_as64(taps), const64(1)), last)
        local = coreai.broadcasting_where(coreai.any_(nan, axes=[-1]), last, local)
    # tap (t1..tn) of cell (o1..on) reads input index min(start_i[o_i] + t_i, last_i[o_i]) on
    # axis i; the flat plane index sums them times the inner sizes
    flat: Value | None = None
    inner: int | Value = 1
    for i in reversed(range(n)):
        t = coreai.broadcasting_modulo(local, _as64(widths[i]))
        local = coreai.broadcasting_floor_divide(local, _as64(widths[i]))
        at = [outs[i], *([1] * (n - 1 - i))]
        start = coreai.reshape(wins[i].start, const64(at))
        last_i = coreai.reshape(wins[i].last, const64(at))
        idx = coreai.broadcasting_minimum(coreai.broadcasting_add(start, t), last_i)
        term = coreai.broadcasting_mul(idx, _as64(inner))
        flat = term if flat is None else coreai.broadcasting_add(flat, term)
        size = sizes[i]
        inner = inner * size if isinstance(inner, int) and isinstance(size, int) \
            else coreai.broadcasting_mul(_as64(inner), _as64(size))
    assert flat is not None
    return [values, flat]


reg("aten::adaptive_max_pool2d.default")(_adaptive_max(2))
reg("aten::adaptive_max_pool3d.default")(_adaptive_max(3))

__all__ = ["LOWERINGS"]
