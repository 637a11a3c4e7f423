"""Built-in lowerings (nn family): average, max and adaptive pooling over 1-3 spatial dims.

Adaptive pools use torch's windows ``[floor(i*in/out), ceil((i+1)*in/out))``. When every
output size divides its input size the windows are a plain pool; otherwise
``_adaptive_avg_pool`` applies one averaging matrix per axis with ``batch_matmul`` (built at
run time for dynamic sizes) and ``adaptive_max_pool`` gathers each window (padded by
repeating its last element) and reduces it. Merged into ``coreai_torch.lowerings.nn``.
"""

from __future__ import annotations

import itertools

import numpy as np
import torch.fx

from coreai_core import DType, Location, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._common import ValuesMap
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
from coreai_torch.utils import cast_to, get_arg, get_operand, int_list, result_dtype

LOWERINGS = LoweringSet("pooling")
reg = LOWERINGS.register_torch_lowering


def _window_args(node: torch.fx.Node, n: int) -> tuple[list[int], list[int], list[int]]:
    k = ntuple(get_arg(node, 1, "kernel_size"), n, node, "kernel_size")
    stride = get_arg(node, 2, "stride")
    s = k if stride is None or stride == [] else ntuple(stride, n, node, "stride")
    p = ntuple(get_arg(node, 3, "padding", 0), n, node, "padding", 0)
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


def _avg_pool(n: int):
    def lowering(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
        x = get_operand(values_map, node, 0, loc)
        k, s, p = _window_args(node, n)
        ceil_mode = bool(get_arg(node, 4, "ceil_mode", False))
        include_pad = bool(get_arg(node, 5, "count_include_pad", True))
        override = get_arg(node, 6, "divisor_override") if n > 1 else None
        x, added = add_batch(x, n, loc)
        if x.type.element_type.is_float:
            y = coreai.avgpool(x, kernel_size=k, strides=s, pads=p, ceil_mode=ceil_mode,
                               count_include_pad=include_pad, divisor_override=override,
                               loc=loc)
        else:  # torch (int64 only) divides the integer window sum, truncating
            total = coreai.sumpool(x, kernel_size=k, strides=s, pads=p, ceil_mode=ceil_mode,
                                   loc=loc)
            if override:
                div: object = override
            else:
                sizes = static_sizes(x, list(range(2, n + 2)), node, "integer avg_pool")
                outs = static_sizes(total, list(range(2, n + 2)), node, "integer avg_pool")
                div = _avg_divisor(sizes, outs, k, s, p, include_pad)
            y = coreai.broadcasting_divide(total, const(div, x.type.element_type, loc), loc=loc)
        return cast_to(drop_batch(y, added, loc), result_dtype(node), loc)

    lowering.__doc__ = (f"avg_pool{n}d(Tensor self, int[{n}] kernel_size, int[{n}] stride=[], "
                        f"int[{n}] padding=0, bool ceil_mode=False, bool count_include_pad=True"
                        + (", int? divisor_override=None" if n > 1 else "") + ") -> Tensor")
    lowering.__name__ = f"aten_avg_pool{n}d_default"
    return lowering


for _n in (1, 2, 3):
    reg(f"aten::avg_pool{_n}d.default")(_avg_pool(_n))


# -- max pooling ----------------------------------------------------------------------------------

def _max_pool(n: int, with_indices: bool):
    def lowering(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> object:
        x = get_operand(values_map, node, 0, loc)
        k, s, p = _window_args(node, n)
        d = ntuple(get_arg(node, 4, "dilation", 1), n, node, "dilation", 1)
        ceil_mode = bool(get_arg(node, 5, "ceil_mode", False))
        x, added = add_batch(x, n, loc)
        out = coreai.maxpool(x, kernel_size=k, strides=s, pads=p, dilation=d,
                             ceil_mode=ceil_mode, return_indices=with_indices, loc=loc)
        out = [drop_batch(v, added, loc) for v in out]
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


def _avg_matrix(size: int | Value, out: int, dtype: DType, loc: Location) -> Value:
    """[out, size] matrix averaging torch's adaptive windows (computed in-graph if dynamic)."""
    if isinstance(size, int):
        m = np.zeros((out, size), np.float64)
        for i, (a, b) in enumerate(_windows(size, out)):
            m[i, a:b] = 1.0 / (b - a)
        return coreai.constant(m, dtype=dtype, loc=loc)
    i = const64(np.arange(out).reshape(out, 1), loc)
    j = coreai.expand_dims(coreai.range_(const64(0, loc), size, const64(1, loc), loc=loc), [0],
                           loc=loc)
    o = const64(out, loc)
    start = coreai.broadcasting_floor_divide(coreai.broadcasting_mul(i, size, loc=loc), o,
                                             loc=loc)
    hi = coreai.broadcasting_mul(coreai.broadcasting_add(i, const64(1, loc), loc=loc), size,
                                 loc=loc)
    end = coreai.broadcasting_floor_divide(
        coreai.broadcasting_add(hi, const64(out - 1, loc), loc=loc), o, loc=loc)
    inside = coreai.broadcasting_and(coreai.broadcasting_greater_equal(j, start, loc=loc),
                                     coreai.broadcasting_less(j, end, loc=loc), loc=loc)
    weight = coreai.reciprocal(cast_to(coreai.broadcasting_sub(end, start, loc=loc), dtype, loc),
                               loc=loc)
    return coreai.broadcasting_where(inside, weight, const(0, dtype, loc), loc=loc)


def _swap(rank: int, a: int, b: int) -> list[int]:
    perm = list(range(rank))
    perm[a], perm[b] = perm[b], perm[a]
    return perm


def _adaptive_avg(n: int):
    def lowering(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
        x = get_operand(values_map, node, 0, loc)
        outs = int_list(get_arg(node, 1, "output_size"), node, "output_size")
        rank = x.type.rank
        sizes = [x.type.shape[rank - n + i] for i in range(n)]
        if all(isinstance(v, int) and v % o == 0 for v, o in zip(sizes, outs, strict=True)):
            xb, added = add_batch(x, n, loc)
            k = [v // o for v, o in zip(sizes, outs, strict=True)]
            y = coreai.avgpool(xb, kernel_size=k, strides=k, loc=loc)
            return cast_to(drop_batch(y, added, loc), result_dtype(node), loc)
        compute = opmath(x.type.element_type)
        y = cast_to(x, compute, loc)
        for i in reversed(range(n)):
            axis = rank - n + i
            m = _avg_matrix(dim_value(x, axis, loc), outs[i], compute, loc)
            if axis == rank - 1:
                y = coreai.batch_matmul(y, coreai.transpose(m, [1, 0], loc=loc), loc=loc)
                continue
            perm = _swap(rank, axis, rank - 2)
            if axis != rank - 2:
                y = coreai.transpose(y, perm, loc=loc)
            y = coreai.batch_matmul(m, y, loc=loc)
            if axis != rank - 2:
                y = coreai.transpose(y, perm, loc=loc)
        return cast_to(y, result_dtype(node), loc)

    lowering.__doc__ = f"_adaptive_avg_pool{n}d(Tensor self, SymInt[{n}] output_size) -> Tensor"
    lowering.__name__ = f"aten__adaptive_avg_pool{n}d_default"
    return lowering


reg("aten::_adaptive_avg_pool2d.default")(_adaptive_avg(2))
reg("aten::_adaptive_avg_pool3d.default")(_adaptive_avg(3))
# Reached only without get_decomp_table (which rewrites it to the 2-d op).
reg("aten::adaptive_avg_pool1d.default")(_adaptive_avg(1))


def _adaptive_max(n: int):
    def lowering(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> list[Value]:
        x = get_operand(values_map, node, 0, loc)
        outs = int_list(get_arg(node, 1, "output_size"), node, "output_size")
        rank = x.type.rank
        sizes = static_sizes(x, list(range(rank - n, rank)), node, "adaptive_max_pool")
        if all(v % o == 0 for v, o in zip(sizes, outs, strict=True)):
            xb, added = add_batch(x, n, loc)
            k = [v // o for v, o in zip(sizes, outs, strict=True)]
            y, idx = coreai.maxpool(xb, kernel_size=k, strides=k, return_indices=True, loc=loc)
            return [drop_batch(y, added, loc), drop_batch(idx, added, loc)]
        return _gathered_max(x, sizes, outs, loc)

    lowering.__doc__ = (f"adaptive_max_pool{n}d(Tensor self, int[{n}] output_size) "
                        "-> (Tensor, Tensor)")
    lowering.__name__ = f"aten_adaptive_max_pool{n}d_default"
    return lowering


def _gathered_max(x: Value, sizes: list[int], outs: list[int], loc: Location) -> list[Value]:
    """Adaptive max pool by gathering every window: values and flat int64 plane indices.

    Ties pick the first maximum and NaN wins, the last NaN of a window, like torch's scan.
    """
    n, rank = len(sizes), x.type.rank
    lead = rank - n
    tables = []
    y = x
    for i in reversed(range(n)):
        wins = _windows(sizes[i], outs[i])
        width = max(b - a for a, b in wins)
        table = np.array([[min(a + t, b - 1) for t in range(width)] for a, b in wins], np.int64)
        tables.insert(0, table)
        y = coreai.gather(y, const64(table, loc), axis=lead + i, loc=loc)
    # [lead..., o1, K1, ..., on, Kn] -> [lead..., o1..on, K1*...*Kn]
    perm = [*range(lead), *(lead + 2 * i for i in range(n)), *(lead + 2 * i + 1 for i in range(n))]
    widths = [t.shape[1] for t in tables]
    taps = int(np.prod(widths))
    y = reshape_lead(coreai.transpose(y, perm, loc=loc), lead + n, [taps], loc)
    values = coreai.reduce_max(y, axes=[-1], loc=loc)
    local = coreai.argmax(y, axis=-1, loc=loc)
    if y.type.element_type.is_float:
        nan = coreai.isnan(y, loc=loc)
        last = coreai.argmax(coreai.reverse(cast_to(nan, DType.int8, loc), axes=[-1], loc=loc),
                             axis=-1, loc=loc)
        last = coreai.broadcasting_sub(const64(taps - 1, loc), last, loc=loc)
        local = coreai.broadcasting_where(coreai.any_(nan, axes=[-1], loc=loc), last, local,
                                          loc=loc)
    # flat input index of tap t in output cell o: sum_i tables[i][o_i, t_i] * inner_i
    inner = [int(np.prod(sizes[i + 1:])) for i in range(n)]
    flat = np.zeros((*outs, taps), np.int64)
    for cell in itertools.product(*(range(o) for o in outs)):
        for t, tap in enumerate(itertools.product(*(range(w) for w in widths))):
            flat[(*cell, t)] = sum(tables[i][cell[i], tap[i]] * inner[i] for i in range(n))
    offsets = np.arange(int(np.prod(outs)), dtype=np.int64).reshape(outs) * taps
    pos = coreai.broadcasting_add(local, const64(offsets, loc), loc=loc)
    indices = coreai.gather(const64(flat.reshape(-1), loc), pos, axis=0, loc=loc)
    return [values, indices]


reg("aten::adaptive_max_pool2d.default")(_adaptive_max(2))
reg("aten::adaptive_max_pool3d.default")(_adaptive_max(3))

__all__ = ["LOWERINGS"]
