"""Built-in lowerings (nn family): matmuls and other products (``_trilinear``,
``addbmm``), convolution, col2im, distances.

Normalization, pooling, resampling (upsample, grid_sampler_2d) and attention are the family's
parts ``nn_norm``, ``nn_pooling``, ``nn_resample`` and ``nn_attention``; dropout lives with the
random ops (``random``).

Half-precision inputs are computed in float32 and rounded once at the end wherever torch's
CPU kernels do the same (``opmath``), so results round like torch's.
"""

from __future__ import annotations

import math

import numpy as np

from coreai_core import Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._nn_utils import (
    add_batch,
    const,
    const64,
    drop_batch,
    filled,
    leading_shape,
    ntuple,
    opmath,
    shape_like,
    static_sizes,
)
from coreai_torch.utils import cast_to, result_dtype, scalar_like

LOWERINGS = LoweringSet("nn")
reg = LOWERINGS.register_torch_lowering



# -- matrix products ------------------------------------------------------------------------------

@reg("aten::mm.default")
@reg("aten::bmm.default")
def aten_mm_default(self: Value, mat2: Value) -> Value:
    """mm(Tensor self, Tensor mat2) -> Tensor  (also bmm)"""
    return cast_to(coreai.batch_matmul(self, mat2), result_dtype())


@reg("aten::matmul.default")
def aten_matmul_default(self: Value, other: Value) -> Value:
    """matmul(Tensor self, Tensor other) -> Tensor  (numpy.matmul rules)"""
    return cast_to(coreai.batch_matmul(self, other), result_dtype())


@reg("aten::addmm.default")
def aten_addmm_default(self: Value, mat1: Value, mat2: Value, beta: float = 1,
                       alpha: float = 1) -> Value:
    """addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor"""
    dtype = result_dtype()
    compute = opmath(dtype)
    bias, m1, m2 = (cast_to(v, compute) for v in (self, mat1, mat2))
    y = coreai.batch_matmul(m1, m2)
    if alpha != 1:
        y = coreai.broadcasting_mul(y, const(alpha, compute))
    if beta != 0:  # beta == 0 ignores self entirely (NaN/inf included), like torch
        if beta != 1:
            bias = coreai.broadcasting_mul(bias, const(beta, compute))
        y = coreai.broadcasting_add(bias, y)
    return cast_to(y, dtype)


@reg("aten::linear.default")
def aten_linear_default(input: Value, weight: Value, bias: Value | None = None) -> Value:
    """linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor"""
    dtype = result_dtype()
    compute = opmath(dtype) if bias is not None else dtype
    x = cast_to(input, compute)
    w = cast_to(weight, compute)
    if w.type.rank == 2:
        w = coreai.transpose(w, [1, 0])
    y = coreai.batch_matmul(x, w)
    if bias is not None:
        y = coreai.broadcasting_add(y, cast_to(bias, compute))
    return cast_to(y, dtype)


# -- convolution ----------------------------------------------------------------------------------

@reg("aten::convolution.default")
def aten_convolution_default(input: Value, weight: Value, bias: Value | None,
                             stride: list[int], padding: list[int], dilation: list[int],
                             transposed: bool, output_padding: list[int], groups: int) -> Value:
    """convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding,
    SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor"""
    w = weight
    n = w.type.rank - 2
    strides = ntuple(stride, n, "stride", 1)
    pads = ntuple(padding, n, "padding", 0)
    dilations = ntuple(dilation, n, "dilation", 1)
    out_pad = ntuple(output_padding, n, "output_padding", 0)
    x, added = add_batch(input, n)
    if transposed:
        y = coreai.conv_transpose(x, w, bias, strides=strides, pads=pads, dilation=dilations,
                                  groups=groups, output_padding=out_pad)
    else:
        if any(out_pad):
            raise NotImplementedError("output_padding applies to transposed convolution only")
        y = coreai.conv(x, w, bias, strides=strides, pads=pads, dilation=dilations,
                        groups=groups)
    return cast_to(drop_batch(y, added), result_dtype())


@reg("aten::col2im.default")
def aten_col2im_default(self: Value, output_size: list[int], kernel_size: list[int],
                        dilation: list[int], padding: list[int], stride: list[int]) -> Value:
    """col2im(Tensor self, SymInt[2] output_size, int[2] kernel_size, int[2] dilation,
    int[2] padding, int[2] stride) -> Tensor

    Sums each kernel position's block into a zero canvas with strided slice updates, in
    torch's order (kernel positions row-major), so the additions round like torch's.
    """
    x = self
    out_size = ntuple(output_size, 2, "output_size")
    k = ntuple(kernel_size, 2, "kernel_size")
    d = ntuple(dilation, 2, "dilation")
    p = ntuple(padding, 2, "padding")
    s = ntuple(stride, 2, "stride")
    unbatched = x.type.rank == 2
    if unbatched:
        x = coreai.expand_dims(x, [0])
    ck = static_sizes(x, [1], "col2im")[0]
    c = ck // (k[0] * k[1])
    blocks = [(out_size[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2)]
    if x.type.shape[2] != blocks[0] * blocks[1]:
        raise NotImplementedError(f"col2im input {x.type} does not hold {blocks} blocks")
    dtype = x.type.element_type
    cols = coreai.reshape(x, leading_shape(x, 1, [c, k[0], k[1], *blocks]))
    padded = [out_size[i] + 2 * p[i] for i in range(2)]
    canvas = filled(0, dtype, leading_shape(x, 1, [c, *padded]))
    for a in range(k[0]):
        for b in range(k[1]):
            block = coreai.slice_(cols, [a, b], [a + 1, b + 1], axes=[2, 3], strides=[1, 1])
            block = coreai.reshape(block, leading_shape(x, 1, [c, *blocks]))
            begin = [a * d[0], b * d[1]]
            end = [begin[i] + (blocks[i] - 1) * s[i] + 1 for i in range(2)]
            if a or b:  # the first block lands on zeros
                window = coreai.slice_(canvas, begin, end, axes=[2, 3], strides=s)
                block = coreai.broadcasting_add(window, block)
            canvas = coreai.slice_update(canvas, block, begin, end, axes=[2, 3], strides=s)
    y = coreai.slice_(canvas, p, [p[0] + out_size[0], p[1] + out_size[1]], axes=[2, 3],
                      strides=[1, 1])
    return coreai.shrink_dims(y, [0]) if unbatched else y


# -- distances ------------------------------------------------------------------------------------

def _p_norm(diff: Value, p: float) -> Value:
    """The p-norm over the last axis of ``diff`` (torch's cdist/pdist special cases)."""
    a = coreai.abs_(diff)
    if p == 0:
        nonzero = coreai.broadcasting_not_equal(a, const(0, a.type.element_type))
        return coreai.reduce_sum(cast_to(nonzero, a.type.element_type), axes=[-1])
    if p == 1:
        return coreai.reduce_sum(a, axes=[-1])
    if p == 2:
        return coreai.sqrt(coreai.reduce_sum(coreai.broadcasting_mul(a, a), axes=[-1]))
    if math.isinf(p):
        return coreai.reduce_max(a, axes=[-1])
    dtype = a.type.element_type
    powered = coreai.broadcasting_pow(a, const(p, dtype))
    return coreai.broadcasting_pow(coreai.reduce_sum(powered, axes=[-1]),
                                   const(1.0 / p, dtype))


def _euclidean_mm(x1: Value, x2: Value) -> Value:
    """torch's ``_euclidean_dist``: |a|^2 + |b|^2 - 2 a.b via one matmul, clamped at 0."""
    dtype = x1.type.element_type
    n1 = coreai.reduce_sum(coreai.broadcasting_mul(x1, x1), axes=[-1], keep_dims=True)
    n2 = coreai.reduce_sum(coreai.broadcasting_mul(x2, x2), axes=[-1], keep_dims=True)
    ones1 = filled(1, dtype, shape_like(n1))
    ones2 = filled(1, dtype, shape_like(n2))
    a = coreai.concat([coreai.broadcasting_mul(x1, const(-2, dtype)), n1, ones1],
                      axis=-1)
    b = coreai.concat([x2, ones2, n2], axis=-1)
    rank = b.type.rank
    bt = coreai.transpose(b, [*range(rank - 2), rank - 1, rank - 2])
    d2 = coreai.broadcasting_maximum(coreai.batch_matmul(a, bt), const(0, dtype))
    return coreai.sqrt(d2)


@reg("aten::_cdist_forward.default")
def aten__cdist_forward_default(x1: Value, x2: Value, p: float,
                                compute_mode: int | None) -> Value:
    """_cdist_forward(Tensor x1, Tensor x2, float p, int? compute_mode) -> Tensor"""
    mode = compute_mode or 0
    r1, r2 = x1.type.shape[-2], x2.type.shape[-2]
    big = any(not isinstance(r, int) or r > 25 for r in (r1, r2))
    if p == 2 and (mode == 1 or (mode == 0 and big)):
        if not all(isinstance(r, int) for r in (r1, r2)) and mode == 0:
            raise NotImplementedError("cdist with dynamic row counts: torch picks the matmul "
                                      "path by size; pass compute_mode explicitly")
        y = _euclidean_mm(x1, x2)
    else:
        diff = coreai.broadcasting_sub(coreai.expand_dims(x1, [-2]),
                                       coreai.expand_dims(x2, [-3]))
        y = _p_norm(diff, p)
    return cast_to(y, result_dtype())


@reg("aten::_pdist_forward.default")
def aten__pdist_forward_default(self: Value, p: float = 2.0) -> Value:
    """_pdist_forward(Tensor self, float p=2) -> Tensor"""
    x = self
    n = static_sizes(x, [0], "pdist")[0]
    rows, cols = np.triu_indices(n, k=1)
    a = coreai.gather(x, const64(rows), axis=0)
    b = coreai.gather(x, const64(cols), axis=0)
    y = _p_norm(coreai.broadcasting_sub(a, b), p)
    return cast_to(y, result_dtype())


# -- products of several operands (bilinear, addbmm) ----------------------------------------------

@reg("aten::_trilinear.default")
def aten__trilinear_default(i1: Value, i2: Value, i3: Value, expand1: list[int],
                            expand2: list[int], expand3: list[int], sumdim: list[int],
                            unroll_dim: int = 1) -> Value:
    """_trilinear(Tensor i1, Tensor i2, Tensor i3, int[] expand1, int[] expand2, int[] expand3, int[] sumdim, int unroll_dim=1) -> Tensor

    Each input gets size-1 dims at its ``expand`` positions, the three are multiplied and
    ``sumdim`` is summed away (``unroll_dim`` only picks torch's loop order).
    """  # noqa: E501
    dtype = result_dtype()
    acc = opmath(dtype)
    parts = []
    for x, expand in ((i1, expand1), (i2, expand2), (i3, expand3)):
        x = cast_to(x, acc)
        if expand:
            x = coreai.expand_dims(x, sorted(expand))
        parts.append(x)
    product = coreai.broadcasting_mul(coreai.broadcasting_mul(parts[0], parts[1]), parts[2])
    if sumdim:
        product = coreai.reduce_sum(product, axes=sorted(sumdim))
    return cast_to(product, dtype)


@reg("aten::addbmm.default")
def aten_addbmm_default(self: Value, batch1: Value, batch2: Value, beta: float = 1,
                        alpha: float = 1) -> Value:
    """addbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor

    ``beta * self + alpha * sum_b batch1[b] @ batch2[b]``; with ``beta == 0`` self is ignored
    (NaN in it does not propagate), like torch.
    """
    dtype = result_dtype()
    acc = opmath(dtype)
    products = coreai.batch_matmul(cast_to(batch1, acc), cast_to(batch2, acc))
    total = coreai.reduce_sum(products, axes=[0])
    if alpha != 1:
        total = coreai.broadcasting_mul(total, scalar_like(alpha, total))
    if beta != 0:
        base = cast_to(self, acc)
        if beta != 1:
            base = coreai.broadcasting_mul(base, scalar_like(beta, base))
        total = coreai.broadcasting_add(base, total)
    return cast_to(total, dtype)


__all__ = ["LOWERINGS"]
