"""Scaled dot-product attention, ``SDPA``, with Apple's signature and semantics."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from coreai_torch.composite_ops._base import CompositeModule

__all__ = ["MASKED_SCORE", "SDPA", "attention_mask"]

MASKED_SCORE = -1e4
"""What a masked-out attention score becomes (added to it, as in Apple's composite): a finite
value, so that a row with every key masked averages all values instead of giving NaN."""


class SDPA(CompositeModule):
    """``softmax(scale * query @ key^T + mask) @ value`` with causal, sliding-window and sink
    options: the ``scaled_dot_product_attention`` composite.

    ``SDPA(scale=None, is_causal=False, window_size=0)``; ``scale`` defaults to
    ``head_dim ** -0.5``. ``forward(query, key, value, attn_mask=None, sinks=None)`` with
    ``query`` ``[B, Nq, Tq, D]``, ``key`` ``[B, Nkv, Tk, D]``, ``value`` ``[B, Nkv, Tk, Dv]``;
    ``Nq`` a multiple of ``Nkv`` (grouped-query attention: each key/value head serves ``Nq /
    Nkv`` consecutive query heads; do not repeat them yourself).

    Unlike ``torch.nn.functional.scaled_dot_product_attention``:

    - ``is_causal`` is the **lower-right** causal mask: the queries are the last ``Tq`` of
      ``Tk`` positions (decoding with a cache), so query ``i`` sees keys ``j <= i + Tk - Tq``.
      (torch's is upper-left; the two agree when ``Tq == Tk``.)
    - ``window_size > 0`` restricts each query to keys less than ``window_size`` positions
      away (behind it only, when causal).
    - ``attn_mask`` is a boolean "may attend" mask (nonzero: attend); it replaces the causal
      and window masks. A masked score is offset by ``MASKED_SCORE`` (-1e4).
    - ``sinks`` (``[Nq]``) adds one extra logit per head to the softmax, attending to nothing.
    """

    composite_name = "scaled_dot_product_attention"
    composite_attrs = ("scale", "is_causal", "window_size")

    def __init__(self, scale: float | None = None, is_causal: bool = False, window_size: int = 0,
                 _use_hf_impl: bool = False) -> None:
        super().__init__()
        self.scale = scale
        self.is_causal = is_causal
        self.window_size = window_size
        self.version = 1
        self._use_hf_impl = _use_hf_impl

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                attn_mask: torch.Tensor | None = None, sinks: torch.Tensor | None = None,
                ) -> torch.Tensor:
        if attn_mask is None:
            attn_mask = attention_mask(query.shape[-2], key.shape[-2], self.is_causal,
                                       self.window_size, query.device)
        if self._use_hf_impl:
            return _hf_attention(query, key, value, attn_mask, sinks, self.scale)
        if query.dim() == 4:
            key, value = _repeat_heads(key, query.shape[1]), _repeat_heads(value, query.shape[1])
        scale = query.shape[-1] ** -0.5 if self.scale is None else self.scale
        scores = torch.matmul(scale * query, key.transpose(-1, -2))
        if attn_mask is not None:
            scores = scores + MASKED_SCORE * torch.logical_not(attn_mask).to(query.dtype)
        if sinks is None:
            weights = torch.softmax(scores, dim=-1)
        else:
            if sinks.dim() != 1 or sinks.shape[0] != query.shape[1]:
                raise ValueError(f"SDPA sinks must have shape [{query.shape[1]}] (one per query "
                                 f"head), got {list(sinks.shape)}")
            column = sinks.reshape(1, -1, 1, 1).expand(*query.shape[:-1], 1).to(scores.dtype)
            weights = torch.softmax(torch.cat((scores, column), dim=-1), dim=-1)
            weights = weights[..., :key.shape[-2]]
        return torch.matmul(weights, value)


def attention_mask(q_len: int, k_len: int, is_causal: bool, window_size: int,
                   device: torch.device | None = None) -> torch.Tensor | None:
    """The boolean "may attend" mask ``[q_len, k_len]`` of :class:`SDPA`'s options (None: every
    query sees every key). Query ``i`` stands at position ``i + k_len - q_len``."""
    if not is_causal and window_size <= 0:
        return None
    query_at = (torch.arange(q_len, device=device) + (k_len - q_len)).unsqueeze(-1)
    key_at = torch.arange(k_len, device=device).unsqueeze(0)
    distance = query_at - key_at  # > 0: the key is behind the query
    if window_size <= 0:
        return distance >= 0
    if is_causal:
        return (distance >= 0) & (distance < window_size)
    return distance.abs() < window_size


def _repeat_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    if x.shape[1] == heads:
        return x
    if heads % x.shape[1]:
        raise ValueError(f"SDPA: {heads} query heads are not a multiple of {x.shape[1]} "
                         "key/value heads")
    index = torch.arange(x.shape[1], device=x.device).repeat_interleave(heads // x.shape[1])
    return torch.index_select(x, 1, index)


def _hf_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                  attn_mask: torch.Tensor | None, sinks: torch.Tensor | None,
                  scale: float | None) -> torch.Tensor:
    """Hugging Face's arithmetic: torch's attention on repeated heads, masked scores -inf."""
    if sinks is not None:
        raise NotImplementedError("SDPA(_use_hf_impl=True) does not support sinks")
    heads = query.shape[1]
    key, value = _repeat_heads(key, heads), _repeat_heads(value, heads)
    if attn_mask is not None and attn_mask.dtype != torch.bool:
        attn_mask = attn_mask != 0
    return F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, scale=scale)
