"""Built-in lowerings (nn family): scaled dot-product attention.

Follows torch's math backend (``_scaled_dot_product_attention_math``): float16/bfloat16 are
computed in float32; q and k^T are each scaled by sqrt(scale); boolean and causal masks
become additive 0/-inf masks; the softmax is ``_safe_softmax`` (rows that are entirely -inf
give zeros instead of NaN); ``dropout_p > 0`` applies training-mode dropout to the attention
weights (``coreai_torch.lowerings.random.dropout``), like ``F.scaled_dot_product_attention``
called with a dropout probability.
"""

from __future__ import annotations

import math

import numpy as np

from coreai_core import DType, Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.lowerings._nn_utils import const, const64, dim_value, opmath
from coreai_torch.lowerings.random import dropout
from coreai_torch.utils import cast_to, result_dtype

LOWERINGS = LoweringSet("nn_attention")
reg = LOWERINGS.register_torch_lowering


def _transpose_last(x: Value) -> Value:
    r = x.type.rank
    return coreai.transpose(x, [*range(r - 2), r - 1, r - 2])


def _causal_mask(q: Value, k: Value) -> Value:
    """Bool [L, S]: True on and below the diagonal (``ones(L, S).tril()``)."""
    length, source = q.type.shape[-2], k.type.shape[-2]
    if isinstance(length, int) and isinstance(source, int):
        return coreai.constant(np.tril(np.ones((length, source), bool)))
    one, zero = const64(1), const64(0)
    rows = coreai.range_(zero, dim_value(q, q.type.rank - 2), one)
    cols = coreai.range_(zero, dim_value(k, k.type.rank - 2), one)
    return coreai.broadcasting_less_equal(coreai.expand_dims(cols, [0]),
                                          coreai.expand_dims(rows, [1]))


def _additive(mask: Value, dtype: DType) -> Value:
    """A bool mask as torch's ``convert_boolean_attn_mask``: 0 where True, -inf where False."""
    if mask.type.element_type is DType.bool:
        return coreai.broadcasting_where(mask, const(0.0, dtype), const(-math.inf, dtype))
    return cast_to(mask, dtype)


def _repeat_heads(x: Value, heads: int) -> Value:
    """``x.repeat_interleave(heads // x_heads, dim=-3)`` (grouped-query attention)."""
    axis = x.type.rank - 3
    have = x.type.shape[axis]
    if not isinstance(have, int) or have == heads:
        return x
    if heads % have:
        raise NotImplementedError(f"enable_gqa needs query heads {heads} divisible by {have}")
    index = np.repeat(np.arange(have, dtype=np.int64), heads // have)
    return coreai.gather(x, const64(index), axis=axis)


def _scores(query: Value, key: Value, value: Value, attn_mask: Value | None, is_causal: bool,
            scale: float | None, gqa: bool, dtype: DType,
            scale_after: bool = False) -> tuple[Value, Value, DType]:
    """Masked attention logits [..., L, S] and the value tensor, in opmath.

    The math backend scales q and k^T by sqrt(scale) each; ``scale_after`` scales q @ k^T
    once instead, like torch's CPU flash kernel (for half inputs the products are then exact
    in float32, so large logits that cancel in the sum keep their accuracy).
    """
    compute = opmath(dtype)
    q, k, v = (cast_to(t, compute) for t in (query, key, value))
    if is_causal and attn_mask is not None:
        raise NotImplementedError("is_causal=True together with attn_mask")
    embed = q.type.shape[-1]
    if scale is None:
        if not isinstance(embed, int):
            raise NotImplementedError("default attention scale with a dynamic head size")
        scale = 1.0 / math.sqrt(embed)
    factor = math.sqrt(abs(scale))
    if gqa:
        heads = q.type.shape[-3]
        if not isinstance(heads, int):
            raise NotImplementedError("enable_gqa with a dynamic number of query heads")
        k, v = _repeat_heads(k, heads), _repeat_heads(v, heads)
    if scale_after:
        attn = coreai.broadcasting_mul(coreai.batch_matmul(q, _transpose_last(k)),
                                       const(scale, compute))
    else:
        q = coreai.broadcasting_mul(q, const(-factor if scale < 0 else factor, compute))
        kt = coreai.broadcasting_mul(_transpose_last(k), const(factor, compute))
        attn = coreai.batch_matmul(q, kt)
    if is_causal:
        attn = coreai.broadcasting_add(attn, _additive(_causal_mask(q, k), compute))
    elif attn_mask is not None:
        attn = coreai.broadcasting_add(attn, _additive(attn_mask, compute))
    return attn, v, compute


def _safe_softmax(x: Value) -> Value:
    """softmax over the last axis; rows that are all -inf give 0 (torch's ``_safe_softmax``)."""
    dtype = x.type.element_type
    out = coreai.softmax(x, axis=-1)
    masked = coreai.broadcasting_equal(x, const(-math.inf, dtype))
    rows = coreai.all_(masked, axes=[-1], keep_dims=True)
    return coreai.broadcasting_where(rows, const(0.0, dtype), out)


@reg("aten::scaled_dot_product_attention.default")
def aten_scaled_dot_product_attention_default(
        query: Value, key: Value, value: Value, attn_mask: Value | None = None,
        dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
        enable_gqa: bool = False) -> Value:
    """scaled_dot_product_attention(Tensor query, Tensor key, Tensor value,
    Tensor? attn_mask=None, float dropout_p=0., bool is_causal=False, *, float? scale=None,
    bool enable_gqa=False) -> Tensor"""
    attn, v, _ = _scores(query, key, value, attn_mask, is_causal, scale, enable_gqa,
                         result_dtype())
    weights = _safe_softmax(attn)
    if dropout_p != 0.0:  # torch's math path: dropout (training mode) on the attention weights
        weights, _ = dropout(weights, dropout_p)
    return cast_to(coreai.batch_matmul(weights, v), result_dtype())


@reg("aten::_scaled_dot_product_flash_attention_for_cpu.default")
def aten__scaled_dot_product_flash_attention_for_cpu_default(
        query: Value, key: Value, value: Value, dropout_p: float = 0.0, is_causal: bool = False,
        attn_mask: Value | None = None, scale: float | None = None) -> list[Value]:
    """_scaled_dot_product_flash_attention_for_cpu(Tensor query, Tensor key, Tensor value,
    float dropout_p=0., bool is_causal=False, *, Tensor? attn_mask=None, float? scale=None)
    -> (Tensor output, Tensor logsumexp)"""
    if dropout_p != 0.0:
        raise NotImplementedError("_scaled_dot_product_flash_attention_for_cpu with dropout_p "
                                  "> 0 is not supported; export the model in eval mode")
    attn, v, compute = _scores(query, key, value, attn_mask, is_causal, scale, False,
                               result_dtype(index=0), scale_after=True)
    out = coreai.batch_matmul(_safe_softmax(attn), v)
    peak = coreai.reduce_max(attn, axes=[-1], keep_dims=True)
    finite = coreai.broadcasting_where(coreai.isinf(peak), const(0.0, compute), peak)
    total = coreai.reduce_sum(coreai.exp(coreai.broadcasting_sub(attn, finite)),
                              axes=[-1], keep_dims=True)
    lse = coreai.broadcasting_add(coreai.log(total), finite)
    # torch reports 0 for rows that are masked entirely
    masked = coreai.all_(coreai.broadcasting_equal(attn, const(-math.inf, compute)),
                         axes=[-1], keep_dims=True)
    lse = coreai.broadcasting_where(masked, const(0.0, compute), lse)
    lse = coreai.shrink_dims(lse, [-1])
    return [cast_to(out, result_dtype(index=0)), cast_to(lse, result_dtype(index=1))]


__all__ = ["LOWERINGS"]
