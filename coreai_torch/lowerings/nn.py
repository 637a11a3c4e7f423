"""Built-in lowerings: nn — matmuls, convolution, col2im, dropout, distances.

Normalization, pooling, resampling (upsample, grid_sampler_2d) and attention are their own
families (``norm``, ``pooling``, ``resample``, ``attention``).

Half-precision inputs are computed in float32 and rounded once at the end wherever torch's
CPU kernels do the same (``opmath``), so results round like torch's.
"""

from __future__ import annotations

import math

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
    drop_batch,
    filled,
    leading_shape,
    ntuple,
    opmath,
    shape_like,
    static_sizes,
)
from coreai_torch.utils import cast_to, get_arg, get_operand, int_list, result_dtype

LOWERINGS = LoweringSet("nn")
reg = LOWERINGS.register_torch_lowering



# -- matrix products ------------------------------------------------------------------------------

@reg("aten::mm.default", "aten::bmm.default", "aten::matmul.default")
def aten_mm_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """mm(Tensor self, Tensor mat2) -> Tensor  (also bmm and matmul: numpy.matmul rules)"""
    a = get_operand(values_map, node, 0, loc)
    b = get_operand(values_map, node, 1, loc)
    return cast_to(coreai.batch_matmul(a, b, loc=loc), result_dtype(node), loc)


@reg("aten::addmm.default")
def aten_addmm_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor"""
    dtype = result_dtype(node)
    compute = opmath(dtype)
    bias, m1, m2 = (cast_to(get_operand(values_map, node, i, loc), compute, loc)
                    for i in range(3))
    beta, alpha = get_arg(node, 3, "beta", 1), get_arg(node, 4, "alpha", 1)
    y = coreai.batch_matmul(m1, m2, loc=loc)
    if alpha != 1:
        y = coreai.broadcasting_mul(y, const(alpha, compute, loc), loc=loc)
    if beta != 0:  # beta == 0 ignores self entirely (NaN/inf included), like torch
        if beta != 1:
            bias = coreai.broadcasting_mul(bias, const(beta, compute, loc), loc=loc)
        y = coreai.broadcasting_add(bias, y, loc=loc)
    return cast_to(y, dtype, loc)


@reg("aten::linear.default")
def aten_linear_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor"""
    dtype = result_dtype(node)
    bias_arg = get_arg(node, 2, "bias")
    compute = opmath(dtype) if bias_arg is not None else dtype
    x = cast_to(get_operand(values_map, node, 0, loc), compute, loc)
    w = cast_to(get_operand(values_map, node, 1, loc), compute, loc)
    if w.type.rank == 2:
        w = coreai.transpose(w, [1, 0], loc=loc)
    y = coreai.batch_matmul(x, w, loc=loc)
    if bias_arg is not None:
        bias = cast_to(values_map[bias_arg.name], compute, loc)
        y = coreai.broadcasting_add(y, bias, loc=loc)
    return cast_to(y, dtype, loc)


# -- convolution ----------------------------------------------------------------------------------

@reg("aten::convolution.default")
def aten_convolution_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding,
    SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor"""
    x = get_operand(values_map, node, 0, loc)
    w = get_operand(values_map, node, 1, loc)
    bias_arg = get_arg(node, 2, "bias")
    bias = values_map[bias_arg.name] if bias_arg is not None else None
    n = w.type.rank - 2
    stride = ntuple(get_arg(node, 3, "stride", 1), n, node, "stride", 1)
    padding = ntuple(get_arg(node, 4, "padding", 0), n, node, "padding", 0)
    dilation = ntuple(get_arg(node, 5, "dilation", 1), n, node, "dilation", 1)
    transposed = bool(get_arg(node, 6, "transposed", False))
    out_pad = ntuple(get_arg(node, 7, "output_padding", 0), n, node, "output_padding", 0)
    groups = int(get_arg(node, 8, "groups", 1))
    x, added = add_batch(x, n, loc)
    if transposed:
        y = coreai.conv_transpose(x, w, bias, strides=stride, pads=padding, dilation=dilation,
                                  groups=groups, output_padding=out_pad, loc=loc)
    else:
        if any(out_pad):
            raise NotImplementedError("output_padding applies to transposed convolution only")
        y = coreai.conv(x, w, bias, strides=stride, pads=padding, dilation=dilation,
                        groups=groups, loc=loc)
    return cast_to(drop_batch(y, added, loc), result_dtype(node), loc)


@reg("aten::col2im.default")
def aten_col2im_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> Value:
    """col2im(Tensor self, SymInt[2] output_size, int[2] kernel_size, int[2] dilation,
    int[2] padding, int[2] stride) -> Tensor

    Sums each kernel position's block into a zero canvas with strided slice updates, in
    torch's order (kernel positions row-major), so the additions round like torch's.
    """
    x = get_operand(values_map, node, 0, loc)
    out_size = int_list(get_arg(node, 1, "output_size"), node, "output_size")
    k = ntuple(get_arg(node, 2, "kernel_size"), 2, node, "kernel_size")
    d = ntuple(get_arg(node, 3, "dilation"), 2, node, "dilation")
    p = ntuple(get_arg(node, 4, "padding"), 2, node, "padding")
    s = ntuple(get_arg(node, 5, "stride"), 2, node, "stride")
    unbatched = x.type.rank == 2
    if unbatched:
        x = coreai.expand_dims(x, [0], loc=loc)
    ck = static_sizes(x, [1], node, "col2im")[0]
    c = ck // (k[0] * k[1])
    blocks = [(out_size[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2)]
    if x.type.shape[2] != blocks[0] * blocks[1]:
        raise NotImplementedError(f"col2im input {x.type} does not hold {blocks} blocks")
    dtype = x.type.element_type
    cols = coreai.reshape(x, leading_shape(x, 1, [c, k[0], k[1], *blocks], loc), loc=loc)
    padded = [out_size[i] + 2 * p[i] for i in range(2)]
    canvas = filled(0, dtype, leading_shape(x, 1, [c, *padded], loc), loc)
    for a in range(k[0]):
        for b in range(k[1]):
            block = coreai.slice_(cols, [a, b], [a + 1, b + 1], axes=[2, 3], strides=[1, 1],
                                  loc=loc)
            block = coreai.reshape(block, leading_shape(x, 1, [c, *blocks], loc), loc=loc)
            begin = [a * d[0], b * d[1]]
            end = [begin[i] + (blocks[i] - 1) * s[i] + 1 for i in range(2)]
            if a or b:  # the first block lands on zeros
                window = coreai.slice_(canvas, begin, end, axes=[2, 3], strides=s, loc=loc)
                block = coreai.broadcasting_add(window, block, loc=loc)
            canvas = coreai.slice_update(canvas, block, begin, end, axes=[2, 3], strides=s,
                                         loc=loc)
    y = coreai.slice_(canvas, p, [p[0] + out_size[0], p[1] + out_size[1]], axes=[2, 3],
                      strides=[1, 1], loc=loc)
    return coreai.shrink_dims(y, [0], loc=loc) if unbatched else y


# -- dropout --------------------------------------------------------------------------------------

@reg("aten::native_dropout.default")
def aten_native_dropout_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                                ) -> list[Value]:
    """native_dropout(Tensor input, float p, bool? train) -> (Tensor, Tensor)

    Inference (``train=False``) is the identity with an all-True mask. Training mode is random
    unless ``p`` is 0 (keep everything) or 1 (drop everything).
    """
    x = get_operand(values_map, node, 0, loc)
    p = float(get_arg(node, 1, "p"))
    train = get_arg(node, 2, "train")
    shape = shape_like(x, loc)
    if train is False or p == 0.0:
        return [x, filled(True, DType.bool, shape, loc)]
    if p == 1.0:
        return [filled(0, x.type.element_type, shape, loc), filled(False, DType.bool, shape, loc)]
    raise NotImplementedError("dropout in training mode is random; export the model in eval mode")


# -- distances ------------------------------------------------------------------------------------

def _p_norm(diff: Value, p: float, loc: Location) -> Value:
    """The p-norm over the last axis of ``diff`` (torch's cdist/pdist special cases)."""
    a = coreai.abs_(diff, loc=loc)
    if p == 0:
        nonzero = coreai.broadcasting_not_equal(a, const(0, a.type.element_type, loc), loc=loc)
        return coreai.reduce_sum(cast_to(nonzero, a.type.element_type, loc), axes=[-1], loc=loc)
    if p == 1:
        return coreai.reduce_sum(a, axes=[-1], loc=loc)
    if p == 2:
        return coreai.sqrt(coreai.reduce_sum(coreai.broadcasting_mul(a, a, loc=loc), axes=[-1],
                                             loc=loc), loc=loc)
    if math.isinf(p):
        return coreai.reduce_max(a, axes=[-1], loc=loc)
    dtype = a.type.element_type
    powered = coreai.broadcasting_pow(a, const(p, dtype, loc), loc=loc)
    return coreai.broadcasting_pow(coreai.reduce_sum(powered, axes=[-1], loc=loc),
                                   const(1.0 / p, dtype, loc), loc=loc)


def _euclidean_mm(x1: Value, x2: Value, loc: Location) -> Value:
    """torch's ``_euclidean_dist``: |a|^2 + |b|^2 - 2 a.b via one matmul, clamped at 0."""
    dtype = x1.type.element_type
    n1 = coreai.reduce_sum(coreai.broadcasting_mul(x1, x1, loc=loc), axes=[-1], keep_dims=True,
                           loc=loc)
    n2 = coreai.reduce_sum(coreai.broadcasting_mul(x2, x2, loc=loc), axes=[-1], keep_dims=True,
                           loc=loc)
    ones1 = filled(1, dtype, shape_like(n1, loc), loc)
    ones2 = filled(1, dtype, shape_like(n2, loc), loc)
    a = coreai.concat([coreai.broadcasting_mul(x1, const(-2, dtype, loc), loc=loc), n1, ones1],
                      axis=-1, loc=loc)
    b = coreai.concat([x2, ones2, n2], axis=-1, loc=loc)
    rank = b.type.rank
    bt = coreai.transpose(b, [*range(rank - 2), rank - 1, rank - 2], loc=loc)
    d2 = coreai.broadcasting_maximum(coreai.batch_matmul(a, bt, loc=loc), const(0, dtype, loc),
                                     loc=loc)
    return coreai.sqrt(d2, loc=loc)


@reg("aten::_cdist_forward.default")
def aten__cdist_forward_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                                ) -> Value:
    """_cdist_forward(Tensor x1, Tensor x2, float p, int? compute_mode) -> Tensor"""
    x1 = get_operand(values_map, node, 0, loc)
    x2 = get_operand(values_map, node, 1, loc)
    p = float(get_arg(node, 2, "p", 2.0))
    mode = get_arg(node, 3, "compute_mode") or 0
    r1, r2 = x1.type.shape[-2], x2.type.shape[-2]
    big = any(not isinstance(r, int) or r > 25 for r in (r1, r2))
    if p == 2 and (mode == 1 or (mode == 0 and big)):
        if not all(isinstance(r, int) for r in (r1, r2)) and mode == 0:
            raise NotImplementedError("cdist with dynamic row counts: torch picks the matmul "
                                      "path by size; pass compute_mode explicitly")
        y = _euclidean_mm(x1, x2, loc)
    else:
        diff = coreai.broadcasting_sub(coreai.expand_dims(x1, [-2], loc=loc),
                                       coreai.expand_dims(x2, [-3], loc=loc), loc=loc)
        y = _p_norm(diff, p, loc)
    return cast_to(y, result_dtype(node), loc)


@reg("aten::_pdist_forward.default")
def aten__pdist_forward_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                                ) -> Value:
    """_pdist_forward(Tensor self, float p=2) -> Tensor"""
    x = get_operand(values_map, node, 0, loc)
    p = float(get_arg(node, 1, "p", 2.0))
    n = static_sizes(x, [0], node, "pdist")[0]
    rows, cols = np.triu_indices(n, k=1)
    a = coreai.gather(x, const64(rows, loc), axis=0, loc=loc)
    b = coreai.gather(x, const64(cols, loc), axis=0, loc=loc)
    y = _p_norm(coreai.broadcasting_sub(a, b, loc=loc), p, loc)
    return cast_to(y, result_dtype(node), loc)


__all__ = ["LOWERINGS"]
