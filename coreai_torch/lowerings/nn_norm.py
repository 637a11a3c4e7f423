"""Built-in lowerings (nn family): batch, layer and group normalization.

Statistics and the affine transform are computed in torch's CPU ``opmath`` (float32 for
float16/bfloat16) with the same algebraic form as torch's kernels (per-channel
``alpha = rstd * weight``, ``beta = bias - mean * alpha``, ``y = x * alpha + beta``), so the
results round like torch's.
"""

from __future__ import annotations

from typing import Any

from coreai_core import DType, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._nn_utils import (
    const,
    empty,
    opmath,
    reshape_lead,
    shape_like,
    static_sizes,
)
from coreai_torch.utils import cast_to, result_dtype

LOWERINGS = LoweringSet("nn_norm")
reg = LOWERINGS.register_torch_lowering


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


def _count_per_channel(x: Value) -> int:
    sizes = static_sizes(x, [0, *range(2, x.type.rank)], "batch_norm statistics")
    n = 1
    for s in sizes:
        n *= s
    return n


def _opt(v: Value | None, dtype: DType) -> Value | None:
    return None if v is None else cast_to(v, dtype)


@reg("aten::_native_batch_norm_legit_no_training.default")
def aten__native_batch_norm_legit_no_training_default(
        input: Value, weight: Value | None, bias: Value | None, running_mean: Value,
        running_var: Value, momentum: float, eps: float) -> list[Value]:
    """_native_batch_norm_legit_no_training(Tensor input, Tensor? weight, Tensor? bias,
    Tensor running_mean, Tensor running_var, float momentum, float eps)
    -> (Tensor, Tensor, Tensor)"""
    compute = opmath(input.type.element_type)
    x = cast_to(input, compute)
    mean, var = cast_to(running_mean, compute), cast_to(running_var, compute)
    y = _batch_norm_apply(x, mean, _rstd(var, eps), _opt(weight, compute), _opt(bias, compute))
    return [cast_to(y, result_dtype(index=0)), empty(result_dtype(index=1)),
            empty(result_dtype(index=2))]


def _batch_norm_train(input: Value, weight: Value | None, bias: Value | None, eps: float,
                      stat: DType | None = None) -> tuple[Value, Value, Value, Value, Value]:
    """Training-mode batch norm: (out, mean, rstd, biased var, x) in opmath.

    ``stat`` is the dtype torch saves the batch statistics in (default: the node's).
    """
    compute = opmath(input.type.element_type)
    x = cast_to(input, compute)
    mean, var = _batch_stats(x)
    rstd = _rstd(var, eps)
    # torch normalizes with the saved statistics, i.e. rounded to their dtype
    stat = result_dtype(index=1) if stat is None else stat
    mean, rstd = (cast_to(cast_to(v, stat), compute) for v in (mean, rstd))
    y = _batch_norm_apply(x, mean, rstd, _opt(weight, compute), _opt(bias, compute))
    return y, mean, rstd, var, x


@reg("aten::_native_batch_norm_legit.no_stats")
def aten__native_batch_norm_legit_no_stats(input: Value, weight: Value | None,
                                           bias: Value | None, training: bool,
                                           momentum: float, eps: float) -> list[Value]:
    """_native_batch_norm_legit.no_stats(Tensor input, Tensor? weight, Tensor? bias,
    bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor)"""
    if not training:
        raise NotImplementedError("batch norm without running stats needs training=True")
    y, mean, rstd, _, _ = _batch_norm_train(input, weight, bias, eps)
    return [cast_to(v, result_dtype(index=i)) for i, v in enumerate((y, mean, rstd))]


@reg("aten::_native_batch_norm_legit_functional.default")
def aten__native_batch_norm_legit_functional_default(
        input: Value, weight: Value | None, bias: Value | None, running_mean: Value,
        running_var: Value, training: bool, momentum: float, eps: float) -> list[Value]:
    """_native_batch_norm_legit_functional(Tensor input, Tensor? weight, Tensor? bias,
    Tensor running_mean, Tensor running_var, bool training, float momentum, float eps)
    -> (Tensor, Tensor, Tensor, Tensor running_mean_out, Tensor running_var_out)

    Training mode returns the batch statistics and the updated running statistics (the
    converter turns the buffer mutation into program state).
    """
    rm, rv = running_mean, running_var
    if not training:
        out = aten__native_batch_norm_legit_no_training_default(input, weight, bias, rm, rv,
                                                                momentum, eps)
        return [*out, rm, rv]
    # Mixed precision (half input, float32 running statistics): torch's kernel saves the
    # batch statistics in float32 (its meta says half) and normalizes with those.
    mixed = rm.type.element_type == opmath(input.type.element_type) != input.type.element_type
    y, mean, rstd, var, x = _batch_norm_train(input, weight, bias, eps,
                                              rm.type.element_type if mixed else None)
    n = _count_per_channel(x)
    compute = y.type.element_type
    unbiased = coreai.broadcasting_mul(var, const(n / max(n - 1, 1) if n > 1 else float("nan"),
                                                  compute))
    keep = const(1.0 - momentum, compute)
    m = const(momentum, compute)
    new_rm = coreai.broadcasting_add(coreai.broadcasting_mul(mean, m),
                                     coreai.broadcasting_mul(cast_to(rm, compute), keep))
    new_rv = coreai.broadcasting_add(coreai.broadcasting_mul(unbiased, m),
                                     coreai.broadcasting_mul(cast_to(rv, compute), keep))
    return [cast_to(v, result_dtype(index=i))
            for i, v in enumerate((y, mean, rstd, new_rm, new_rv))]


# -- layer norm and group norm --------------------------------------------------------------------

@reg("aten::native_layer_norm.default")
def aten_native_layer_norm_default(input: Value, normalized_shape: list[int | Value],
                                   weight: Value | None, bias: Value | None, eps: float,
                                   ) -> list[Value]:
    """native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias,
    float eps) -> (Tensor, Tensor, Tensor)"""
    compute = opmath(input.type.element_type)
    x = cast_to(input, compute)
    k = len(normalized_shape)
    axes = list(range(x.type.rank - k, x.type.rank))
    mean, var = _moments(x, axes)
    rstd = _rstd(var, eps)
    # torch: y = (x * rstd + (-rstd * mean)) * gamma + beta
    shift = coreai.neg(coreai.broadcasting_mul(rstd, mean))
    y = coreai.broadcasting_add(coreai.broadcasting_mul(x, rstd), shift)
    if weight is not None:
        y = coreai.broadcasting_mul(y, cast_to(weight, compute))
    if bias is not None:
        y = coreai.broadcasting_add(y, cast_to(bias, compute))
    return [cast_to(v, result_dtype(index=i)) for i, v in enumerate((y, mean, rstd))]


@reg("aten::native_group_norm.default")
def aten_native_group_norm_default(input: Value, weight: Value | None, bias: Value | None,
                                   N: int | Value, C: int | Value,
                                   HxW: int | Value, group: int, eps: float,
                                   ) -> list[Value]:
    """native_group_norm(Tensor input, Tensor? weight, Tensor? bias, SymInt N, SymInt C,
    SymInt HxW, int group, float eps) -> (Tensor, Tensor, Tensor)"""
    compute = opmath(input.type.element_type)
    x = cast_to(input, compute)
    groups = group
    c = static_sizes(x, [1], "group_norm channels")[0]
    per_group = c // groups
    # [N, G, C/G, HxW]; -1 only for a symbolic HxW (it is ambiguous on an empty batch)
    xg = reshape_lead(x, 1, [groups, per_group, HxW if isinstance(HxW, int) else -1])
    mean, var = _moments(xg, [2, 3])
    rstd = _rstd(var, eps)
    scale = rstd
    if weight is not None:
        scale = coreai.broadcasting_mul(
            rstd, _group_view(cast_to(weight, compute), groups, per_group))
    shift = coreai.neg(coreai.broadcasting_mul(scale, mean))
    if bias is not None:
        shift = coreai.broadcasting_add(
            shift, _group_view(cast_to(bias, compute), groups, per_group))
    y = coreai.broadcasting_add(coreai.broadcasting_mul(xg, scale), shift)
    y = coreai.reshape(y, shape_like(x))
    stats = [coreai.shrink_dims(v, [2, 3]) for v in (mean, rstd)]
    return [cast_to(v, result_dtype(index=i)) for i, v in enumerate((y, *stats))]


def _group_view(v: Value, groups: int, per_group: int) -> Any:
    """A per-channel [C] vector as [G, C/G, 1] (broadcasts against [N, G, C/G, HxW])."""
    return coreai.reshape(v, [groups, per_group, 1])


__all__ = ["LOWERINGS"]
