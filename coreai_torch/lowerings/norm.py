"""Built-in lowerings (nn family): batch, layer and group normalization.

Statistics and the affine transform are computed in torch's CPU ``opmath`` (float32 for
float16/bfloat16) with the same algebraic form as torch's kernels (per-channel
``alpha = rstd * weight``, ``beta = bias - mean * alpha``, ``y = x * alpha + beta``), so the
results round like torch's. Merged into ``coreai_torch.lowerings.nn.LOWERINGS``.
"""

from __future__ import annotations

from typing import Any

import torch.fx

from coreai_core import DType, Location, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._common import ValuesMap
from coreai_torch.lowerings._nn_utils import (
    const,
    empty,
    opmath,
    reshape_lead,
    shape_like,
    static_sizes,
)
from coreai_torch.utils import cast_to, get_arg, get_operand, int_list, result_dtype

LOWERINGS = LoweringSet("norm")
reg = LOWERINGS.register_torch_lowering


def _optional(values_map: ValuesMap, node: torch.fx.Node, index: int, name: str,
              dtype: DType, loc: Location) -> Value | None:
    arg = get_arg(node, index, name)
    if arg is None:
        return None
    return cast_to(values_map[arg.name], dtype, loc)


def _rstd(var: Value, eps: float, loc: Location) -> Value:
    eps_v = const(eps, var.type.element_type, loc)
    return coreai.rsqrt(coreai.broadcasting_add(var, eps_v, loc=loc), loc=loc)


def _moments(x: Value, axes: list[int], loc: Location) -> tuple[Value, Value]:
    """Mean and biased variance over ``axes`` (kept as size-1 dims)."""
    mean = coreai.reduce_mean(x, axes=axes, keep_dims=True, loc=loc)
    centered = coreai.broadcasting_sub(x, mean, loc=loc)
    var = coreai.reduce_mean(coreai.broadcasting_mul(centered, centered, loc=loc), axes=axes,
                             keep_dims=True, loc=loc)
    return mean, var


# -- batch norm -----------------------------------------------------------------------------------

def _channel_view(v: Value, rank: int, loc: Location) -> Value:
    """A per-channel [C] vector shaped to broadcast against [N, C, *spatial]."""
    return coreai.expand_dims(v, list(range(1, rank - 1)), loc=loc) if rank > 2 else v


def _batch_norm_apply(x: Value, mean: Value, invstd: Value, weight: Value | None,
                      bias: Value | None, loc: Location) -> Value:
    """``x * alpha + beta`` with per-channel alpha = invstd * weight, beta = bias - mean * alpha."""
    alpha = invstd if weight is None else coreai.broadcasting_mul(invstd, weight, loc=loc)
    shift = coreai.broadcasting_mul(mean, alpha, loc=loc)
    if bias is None:
        beta = coreai.neg(shift, loc=loc)
    else:
        beta = coreai.broadcasting_sub(bias, shift, loc=loc)
    rank = x.type.rank
    return coreai.broadcasting_add(
        coreai.broadcasting_mul(x, _channel_view(alpha, rank, loc), loc=loc),
        _channel_view(beta, rank, loc), loc=loc)


def _batch_stats(x: Value, loc: Location) -> tuple[Value, Value]:
    """Per-channel mean and biased variance of [N, C, *spatial], as [C] vectors."""
    axes = [0, *range(2, x.type.rank)]
    mean, var = _moments(x, axes, loc)
    return (coreai.shrink_dims(mean, axes, loc=loc), coreai.shrink_dims(var, axes, loc=loc))


def _count_per_channel(x: Value, node: torch.fx.Node) -> int:
    sizes = static_sizes(x, [0, *range(2, x.type.rank)], node, "batch_norm statistics")
    n = 1
    for s in sizes:
        n *= s
    return n


@reg("aten::_native_batch_norm_legit_no_training.default")
def aten__native_batch_norm_legit_no_training_default(
        values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> list[Value]:
    """_native_batch_norm_legit_no_training(Tensor input, Tensor? weight, Tensor? bias,
    Tensor running_mean, Tensor running_var, float momentum, float eps)
    -> (Tensor, Tensor, Tensor)"""
    out_dtype = result_dtype(node, 0)
    compute = opmath(get_operand(values_map, node, 0, loc).type.element_type)
    x = cast_to(get_operand(values_map, node, 0, loc), compute, loc)
    weight = _optional(values_map, node, 1, "weight", compute, loc)
    bias = _optional(values_map, node, 2, "bias", compute, loc)
    mean = cast_to(get_operand(values_map, node, 3, loc), compute, loc)
    var = cast_to(get_operand(values_map, node, 4, loc), compute, loc)
    eps = float(get_arg(node, 6, "eps", 1e-5))
    y = _batch_norm_apply(x, mean, _rstd(var, eps, loc), weight, bias, loc)
    return [cast_to(y, out_dtype, loc), empty(result_dtype(node, 1), loc),
            empty(result_dtype(node, 2), loc)]


def _batch_norm_train(values_map: ValuesMap, node: torch.fx.Node, loc: Location, eps: float,
                      ) -> tuple[Value, Value, Value, Value, Value]:
    """Training-mode batch norm: (out, mean, rstd, biased var, x) in opmath."""
    compute = opmath(get_operand(values_map, node, 0, loc).type.element_type)
    x = cast_to(get_operand(values_map, node, 0, loc), compute, loc)
    weight = _optional(values_map, node, 1, "weight", compute, loc)
    bias = _optional(values_map, node, 2, "bias", compute, loc)
    mean, var = _batch_stats(x, loc)
    rstd = _rstd(var, eps, loc)
    # torch normalizes with the saved statistics, i.e. rounded to their dtype
    stat = result_dtype(node, 1)
    mean, rstd = (cast_to(cast_to(v, stat, loc), compute, loc) for v in (mean, rstd))
    y = _batch_norm_apply(x, mean, rstd, weight, bias, loc)
    return y, mean, rstd, var, x


@reg("aten::_native_batch_norm_legit.no_stats")
def aten__native_batch_norm_legit_no_stats(values_map: ValuesMap, node: torch.fx.Node,
                                           loc: Location) -> list[Value]:
    """_native_batch_norm_legit.no_stats(Tensor input, Tensor? weight, Tensor? bias,
    bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor)"""
    if not get_arg(node, 3, "training", True):
        raise NotImplementedError("batch norm without running stats needs training=True")
    y, mean, rstd, _, _ = _batch_norm_train(values_map, node, loc,
                                            float(get_arg(node, 5, "eps", 1e-5)))
    return [cast_to(v, result_dtype(node, i), loc) for i, v in enumerate((y, mean, rstd))]


@reg("aten::_native_batch_norm_legit_functional.default")
def aten__native_batch_norm_legit_functional_default(
        values_map: ValuesMap, node: torch.fx.Node, loc: Location) -> list[Value]:
    """_native_batch_norm_legit_functional(Tensor input, Tensor? weight, Tensor? bias,
    Tensor running_mean, Tensor running_var, bool training, float momentum, float eps)
    -> (Tensor, Tensor, Tensor, Tensor running_mean_out, Tensor running_var_out)

    Training mode returns the batch statistics and the updated running statistics (the
    converter turns the buffer mutation into program state).
    """
    training = bool(get_arg(node, 5, "training", True))
    momentum = float(get_arg(node, 6, "momentum", 0.1))
    eps = float(get_arg(node, 7, "eps", 1e-5))
    rm = get_operand(values_map, node, 3, loc)
    rv = get_operand(values_map, node, 4, loc)
    if not training:
        out = aten__native_batch_norm_legit_no_training_default(values_map, node, loc)
        return [*out, rm, rv]
    y, mean, rstd, var, x = _batch_norm_train(values_map, node, loc, eps)
    n = _count_per_channel(x, node)
    compute = y.type.element_type
    unbiased = coreai.broadcasting_mul(var, const(n / max(n - 1, 1) if n > 1 else float("nan"),
                                                  compute, loc), loc=loc)
    keep = const(1.0 - momentum, compute, loc)
    m = const(momentum, compute, loc)
    new_rm = coreai.broadcasting_add(coreai.broadcasting_mul(mean, m, loc=loc),
                                     coreai.broadcasting_mul(cast_to(rm, compute, loc), keep,
                                                             loc=loc), loc=loc)
    new_rv = coreai.broadcasting_add(coreai.broadcasting_mul(unbiased, m, loc=loc),
                                     coreai.broadcasting_mul(cast_to(rv, compute, loc), keep,
                                                             loc=loc), loc=loc)
    return [cast_to(v, result_dtype(node, i), loc)
            for i, v in enumerate((y, mean, rstd, new_rm, new_rv))]


# -- layer norm and group norm --------------------------------------------------------------------

@reg("aten::native_layer_norm.default")
def aten_native_layer_norm_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                                   ) -> list[Value]:
    """native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias,
    float eps) -> (Tensor, Tensor, Tensor)"""
    x_in = get_operand(values_map, node, 0, loc)
    compute = opmath(x_in.type.element_type)
    x = cast_to(x_in, compute, loc)
    k = len(int_list(get_arg(node, 1, "normalized_shape"), node, "normalized_shape"))
    weight = _optional(values_map, node, 2, "weight", compute, loc)
    bias = _optional(values_map, node, 3, "bias", compute, loc)
    eps = float(get_arg(node, 4, "eps", 1e-5))
    axes = list(range(x.type.rank - k, x.type.rank))
    mean, var = _moments(x, axes, loc)
    rstd = _rstd(var, eps, loc)
    # torch: y = (x * rstd + (-rstd * mean)) * gamma + beta
    shift = coreai.neg(coreai.broadcasting_mul(rstd, mean, loc=loc), loc=loc)
    y = coreai.broadcasting_add(coreai.broadcasting_mul(x, rstd, loc=loc), shift, loc=loc)
    if weight is not None:
        y = coreai.broadcasting_mul(y, weight, loc=loc)
    if bias is not None:
        y = coreai.broadcasting_add(y, bias, loc=loc)
    return [cast_to(v, result_dtype(node, i), loc) for i, v in enumerate((y, mean, rstd))]


@reg("aten::native_group_norm.default")
def aten_native_group_norm_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                                   ) -> list[Value]:
    """native_group_norm(Tensor input, Tensor? weight, Tensor? bias, SymInt N, SymInt C,
    SymInt HxW, int group, float eps) -> (Tensor, Tensor, Tensor)"""
    x_in = get_operand(values_map, node, 0, loc)
    compute = opmath(x_in.type.element_type)
    x = cast_to(x_in, compute, loc)
    weight = _optional(values_map, node, 1, "weight", compute, loc)
    bias = _optional(values_map, node, 2, "bias", compute, loc)
    groups = int(get_arg(node, 6, "group"))
    eps = float(get_arg(node, 7, "eps", 1e-5))
    c = static_sizes(x, [1], node, "group_norm channels")[0]
    per_group = c // groups
    xg = reshape_lead(x, 1, [groups, per_group, -1], loc)  # [N, G, C/G, HxW]
    mean, var = _moments(xg, [2, 3], loc)
    rstd = _rstd(var, eps, loc)
    scale = rstd
    if weight is not None:
        scale = coreai.broadcasting_mul(rstd, _group_view(weight, groups, per_group, loc),
                                        loc=loc)
    shift = coreai.neg(coreai.broadcasting_mul(scale, mean, loc=loc), loc=loc)
    if bias is not None:
        shift = coreai.broadcasting_add(shift, _group_view(bias, groups, per_group, loc),
                                        loc=loc)
    y = coreai.broadcasting_add(coreai.broadcasting_mul(xg, scale, loc=loc), shift, loc=loc)
    y = coreai.reshape(y, shape_like(x, loc), loc=loc)
    stats = [coreai.shrink_dims(v, [2, 3], loc=loc) for v in (mean, rstd)]
    return [cast_to(v, result_dtype(node, i), loc) for i, v in enumerate((y, *stats))]


def _group_view(v: Value, groups: int, per_group: int, loc: Location) -> Any:
    """A per-channel [C] vector as [G, C/G, 1] (broadcasts against [N, G, C/G, HxW])."""
    return coreai.reshape(v, [groups, per_group, 1], loc=loc)


__all__ = ["LOWERINGS"]
