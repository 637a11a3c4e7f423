"""A tiny transformers Llama (random weights, no download) as a decode step with its KV cache
in buffers: after conversion the cache is program state, and on Apple's interpreter state the
caller carries from step to step."""

from __future__ import annotations

import torch
from torch import nn


def tiny_llama(layers: int = 2, max_positions: int = 64) -> nn.Module:
    """A ``LlamaForCausalLM`` with grouped-query attention (4 heads over 2 KV heads)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                      hidden_size=32, intermediate_size=64, vocab_size=96, use_cache=False,
                      max_position_embeddings=max_positions)
    return LlamaForCausalLM(cfg).eval()


class LlamaDecodeStep(nn.Module):
    """One decode step of ``model`` (a transformers Llama) at position ``pos``: the token's
    keys and values are written into the cache there (``index_copy_``, a state update after
    conversion), then it attends to the cache positions up to ``pos``. Returns the logits."""

    def __init__(self, model: nn.Module, max_len: int) -> None:
        super().__init__()
        cfg = model.config
        self.model, self.max_len = model, max_len
        self.heads, self.kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
        self.head_dim = cfg.hidden_size // cfg.num_attention_heads
        for i in range(cfg.num_hidden_layers):
            for kind in "kv":
                self.register_buffer(f"{kind}{i}",
                                     torch.zeros(1, self.kv_heads, max_len, self.head_dim))

    def forward(self, ids: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

        body, hd, group = self.model.model, self.head_dim, self.heads // self.kv_heads
        h = body.embed_tokens(ids)
        cos, sin = body.rotary_emb(h, pos.reshape(1, 1))
        visible = (torch.arange(self.max_len) <= pos).view(1, 1, 1, -1)
        for i, layer in enumerate(body.layers):
            attn = layer.self_attn
            x = layer.input_layernorm(h)
            q = attn.q_proj(x).view(1, 1, self.heads, hd).transpose(1, 2)
            k = attn.k_proj(x).view(1, 1, self.kv_heads, hd).transpose(1, 2)
            v = attn.v_proj(x).view(1, 1, self.kv_heads, hd).transpose(1, 2)
            q, k = apply_rotary_pos_emb(q, k, cos, sin)
            k_cache, v_cache = getattr(self, f"k{i}"), getattr(self, f"v{i}")
            k_cache.index_copy_(2, pos, k)
            v_cache.index_copy_(2, pos, v)
            o = torch.nn.functional.scaled_dot_product_attention(
                q, k_cache.repeat_interleave(group, 1), v_cache.repeat_interleave(group, 1),
                attn_mask=visible)
            h = h + attn.o_proj(o.transpose(1, 2).reshape(1, 1, -1))
            h = h + layer.mlp(layer.post_attention_layernorm(h))
        return self.model.lm_head(body.norm(h))
