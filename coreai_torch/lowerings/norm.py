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
              dtype: DType) -> Value | None:
    arg = get_arg(node, index, name)
    if arg is None:
        return None
    return cast_to(values_map[arg.name], dtype)


def _rstd(var: Value, eps: float) -> Value:
    eps_v = const(eps, var.type.element_type)
    return coreai.rsqrt(coreai.broadcasting_add(var, eps_v))


def _moments(x: Value, axes: list[int]) -> tuple[Value, Value]:
    """Mean and biased variance over ``axes`` (kept as size-1 dims)."""
    mean = coreai.reduce_mean(x, axes=axes, keep_dims=True)
    centered = coreai.broadcasting_sub(x, mean)
    var = coreai.reduce_mean(coreai.broadcasting_mul(centered, centered), axes=axes,
                             keep_dims=True)
    return mean, var


# -- batch norm -----------------------------------------------------------------------------------

def _channel_view(v: Value, rank: int) -> Value:
    """A per-channel [C] vector shaped to broadcast against [N, C, *spatial]."""
    return coreai.expand_dims(v, list(range(1, rank - 1))) if rank > 2 else v


def _batch_norm_apply(x: Value, mean: Value, invstd: Value, weight: Value | None,
                      bias: Value | None) -> Value:
    """``x * alpha + beta`` with per-channel alpha = invstd * weight, beta = bias - mean * alpha."""
    alpha = invstd if weight is None else coreai.broadcasting_mul(invstd, weight)
    shift = coreai.broadcasting_mul(mean, alpha)
    beta = coreai.neg(shift) if bias is None else coreai.broadcasting_sub(bias, shift)
    rank = x.type.rank
    return coreai.broadcasting_add(
        coreai.broadcasting_mul(x, _channel_view(alpha, rank)),
        _channel_view(beta, rank))


def _batch_stats(x: Value) -> tuple[Value, Value]:
    """Per-channel mean and biased variance of [N, C, *spatial], as [C] vectors."""
    axes = [0, *range(2, x.type.rank)]
    mean, var = _moments(x, axes)
    return (coreai.shrink_dims(mean, axes), coreai.shrink_dims(var, axes))


def _count_per_channel(x: Value, node: torch.fx.Node) -> int:
    sizes = static_sizes(x, [0, *range(2, x.type.rank)], "batch_norm statistics")
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
    compute = opmath(get_operand(values_map, node, 0).type.element_type)
    x = cast_to(get_operand(values_map, node, 0), compute)
    weight = _optional(values_map, node, 1, "weight", compute)
    bias = _optional(values_map, node, 2, "bias", compute)
    mean = cast_to(get_operand(values_map, node, 3), compute)
    var = cast_to(get_operand(values_map, node, 4), compute)
    eps = float(get_arg(node, 6, "eps", 1e-5))
    y = _batch_norm_apply(x, mean, _rstd(var, eps), weight, bias)
    return [cast_to(y, out_dtype), empty(result_dtype(node, 1)),
            empty(result_dtype(node, 2))]


def _batch_norm_train(values_map: ValuesMap, node: torch.fx.Node, loc: Location, eps: float,
                      ) -> tuple[Value, Value, Value, Value, Value]:
    """Training-mode batch norm: (out, mean, rstd, biased var, x) in opmath."""
    compute = opmath(get_operand(values_map, node, 0).type.element_type)
    x = cast_to(get_operand(values_map, node, 0), compute)
    weight = _optional(values_map, node, 1, "weight", compute)
    bias = _optional(values_map, node, 2, "bias", compute)
    mean, var = _batch_stats(x)
    rstd = _rstd(var, eps)
    # torch normalizes with the saved statistics, i.e. rounded to their dtype
    stat = result_dtype(node, 1)
    mean, rstd = (cast_to(cast_to(v, stat), compute) for v in (mean, rstd))
    y = _batch_norm_apply(x, mean, rstd, weight, bias)
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
    return [cast_to(v, result_dtype(node, i)) for i, v in enumerate((y, mean, rstd))]


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
    rm = get_operand(values_map, node, 3)
    rv = get_operand(values_map, node, 4)
    if not training:
        out = aten__native_batch_norm_legit_no_training_default(values_map, node)
        return [*out, rm, rv]
    y, mean, rstd, var, x = _batch_norm_train(values_map, node, loc, eps)
    n = _count_per_channel(x, node)
    compute = y.type.element_type
    unbiased = coreai.broadcasting_mul(var, const(n / max(n - 1, 1) if n > 1 else float("nan"),
                                                  compute))
    keep = const(1.0 - momentum, compute)
    m = const(momentum, compute)
    new_rm = coreai.broadcasting_add(coreai.broadcasting_mul(mean, m),
                                     coreai.broadcasting_mul(cast_to(rm, compute), keep))
    new_rv = coreai.broadcasting_add(coreai.broadcasting_mul(unbiased, m),
                                     coreai.broadcasting_mul(cast_to(rv, compute), keep))
    return [cast_to(v, result_dtype(node, i))
            for i, v in enumerate((y, mean, rstd, new_rm, new_rv))]


# -- layer norm and group norm --------------------------------------------------------------------

@reg("aten::native_layer_norm.default")
def aten_native_layer_norm_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                                   ) -> list[Value]:
    """native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias,
    float eps) -> (Tensor, Tensor, Tensor)"""
    x_in = get_operand(values_map, node, 0)
    compute = opmath(x_in.type.element_type)
    x = cast_to(x_in, compute)
    k = len(int_list(get_arg(node, 1, "normalized_shape"), node, "normalized_shape"))
    weight = _optional(values_map, node, 2, "weight", compute)
    bias = _optional(values_map, node, 3, "bias", compute)
    eps = float(get_arg(node, 4, "eps", 1e-5))
    axes = list(range(x.type.rank - k, x.type.rank))
    mean, var = _moments(x, axes)
    rstd = _rstd(var, eps)
    # torch: y = (x * rstd + (-rstd * mean)) * gamma + beta
    shift = coreai.neg(coreai.broadcasting_mul(rstd, mean))
    y = coreai.broadcasting_add(coreai.broadcasting_mul(x, rstd), shift)
    if weight is not None:
        y = coreai.broadcasting_mul(y, weight)
    if bias is not None:
        y = coreai.broadcasting_add(y, bias)
    return [cast_to(v, result_dtype(node, i)) for i, v in enumerate((y, mean, rstd))]


@reg("aten::native_group_norm.default")
def aten_native_group_norm_default(values_map: ValuesMap, node: torch.fx.Node, loc: Location,
                                   ) -> list[Value]:
    """native_group_norm(Tensor input, Tensor? weight, Tensor? bias, SymInt N, SymInt C,
    SymInt HxW, int group, float eps) -> (Tensor, Tensor, Tensor)"""
    x_in = get_operand(values_map, node, 0)
    compute = opmath(x_in.type.element_type)
    x = cast_to(x_in, compute)
    weight = _optional(values_map, node, 1, "weight", compute)
    bias = _optional(values_map, node, 2, "bias", compute)
    groups = int(get_arg(node, 6, "group"))
    eps = float(get_arg(node, 7, "eps", 1e-5))
    c = static_sizes(x, [1], "group_norm channels")[0]
    per_group = c // groups
    xg = reshape_lead(x, 1, [groups, per_group, -1])  # [N, G, C/G, HxW]
    mean, var = _moments(xg, [2, 3])
    rstd = _rstd(var, eps)
    scale = rstd
    if weight is not None:
        scale = coreai.broadcasting_mul(rstd, _group_view(weight, groups, per_group))
    shift = coreai.neg(coreai.broadcasting_mul(scale, mean))
    if bias is not None:
        shift = coreai.broadcasting_add(shift, _group_view(bias, groups, per_group))
    y = coreai.broadcasting_add(coreai.broadcasting_mul(xg, scale), shift)
    y = coreai.reshape(y, shape_like(x))
    stats = [coreai.shrink_dims(v, [2, 3]) for v in (mean, rstd)]
    return [cast_to(v, result_dtype(node, i)) for i, v in enumerate((y, *stats))]


def _group_view(v: Value, groups: int, per_group: int) -> Any:
    """A per-channel [C] vector as [G, C/G, 1] (broadcasts against [N, G, C/G, HxW])."""
    return coreai.reshape(v, [groups, per_group, 1])


__all__ = ["LOWERINGS"]
