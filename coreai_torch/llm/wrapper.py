"""A causal LM with ``transformers``' ``StaticCache`` held in buffers, for ``torch.export``.

The same mechanism as ``transformers.integrations.executorch``'s
``TorchExportableModuleWithStaticCache`` / ``...WithHybridCache``: the cache is allocated up
front and its key/value tensors are registered as buffers, so an export sees them as mutated
buffers (program state after conversion). Two differences make it export without ``strict``
tracing: the cache layers are re-pointed at the module's buffers on each call (non-strict
export swaps buffers for traced ones, which the cache object would not see), and the write
position is a per-call copy of ``cache_position[0]`` rather than a state counter.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from coreai_torch.llm.errors import LLMError

__all__ = ["StaticCacheLM", "cache_buffer_names"]


def _written_layer(max_cache_len: int) -> Any:
    """A ``StaticLayer`` that writes a prompt of dynamic length into its cache with a one-hot
    matmul and ``where`` (exact: each written slot is one product with 1.0): the scatter
    ``index_copy_`` makes needs static shapes on Apple's side. One token (decode, a static
    length) is still written with ``index_copy_``."""
    from transformers.cache_utils import StaticLayer

    class _MaskWrittenLayer(StaticLayer):
        def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
                   **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
            return _write(self, key_states, value_states)

    return _MaskWrittenLayer(max_cache_len)


def _write(self: Any, key_states: torch.Tensor, value_states: torch.Tensor
           ) -> tuple[torch.Tensor, torch.Tensor]:
    n = key_states.shape[-2]
    start = self.cumulative_length.clone()  # add_ below changes the counter
    self.cumulative_length.add_(n)
    if isinstance(n, int) and n == 1:
        self.keys.index_copy_(2, start.reshape(1), key_states)
        self.values.index_copy_(2, start.reshape(1), value_states)
        return self.keys, self.values
    slots = torch.arange(self.max_cache_len)
    new = torch.arange(n) + start
    place = (slots[:, None] == new[None, :]).to(key_states.dtype)  # [slots, n]
    written = (slots[:, None] >= start) & (slots[:, None] < start + n)  # [slots, 1]
    # reshape: the cache's static shape (the product's batch size would be dynamic)
    keys = (place @ key_states).reshape(self.keys.shape)
    values = (place @ value_states).reshape(self.values.shape)
    self.keys.copy_(torch.where(written, keys, self.keys))
    self.values.copy_(torch.where(written, values, self.values))
    return self.keys, self.values


def cache_buffer_names(num_layers: int) -> list[str]:
    """The state names of the KV cache, in order: ``key_cache_0, value_cache_0, ...``."""
    return [f"{kind}_cache_{i}" for i in range(num_layers) for kind in ("key", "value")]


class StaticCacheLM(nn.Module):
    """``forward(input_ids [1, n], cache_position [n]) -> logits [1, n, vocab]``: runs
    ``model`` on ``n`` tokens at positions ``cache_position`` (consecutive), writing their keys
    and values into the static cache of ``max_cache_len`` positions.

    Sliding-window layers get a full-length cache layer, as in transformers' export recipes;
    the attention mask still limits them to their window.
    """

    def __init__(self, model: Any, max_cache_len: int) -> None:
        super().__init__()
        from transformers.cache_utils import StaticCache, StaticLayer
        from transformers.configuration_utils import get_head_shapes

        self.model: Any = model
        config = model.config.get_text_config()
        self.cache: Any = StaticCache(config=config, max_cache_len=max_cache_len)
        layers: list[Any] = self.cache.layers
        for i, layer in enumerate(layers):
            # StaticSlidingWindowLayer is a StaticLayer too: full length, as in the recipes
            if not isinstance(layer, StaticLayer):
                raise LLMError(f"cache layer {i} is a {type(layer).__name__}, not a static "
                               f"key/value cache: this model cannot be exported")
            layers[i] = _written_layer(max_cache_len)
        num_heads, head_dim = get_head_shapes(config)
        dtype = next(model.parameters()).dtype
        self.cache.early_initialization(1, num_heads, head_dim, dtype, torch.device("cpu"))
        names = cache_buffer_names(len(layers))
        for i, layer in enumerate(layers):
            self.register_buffer(names[2 * i], layer.keys, persistent=False)
            self.register_buffer(names[2 * i + 1], layer.values, persistent=False)

    def forward(self, input_ids: torch.Tensor, cache_position: torch.Tensor) -> Any:
        for i, layer in enumerate(self.cache.layers):
            layer.keys = getattr(self, f"key_cache_{i}")
            layer.values = getattr(self, f"value_cache_{i}")
            # the layer adds the tokens written to this counter in place: give it a copy
            layer.cumulative_length = cache_position[0].clone()
        out = self.model(input_ids=input_ids, attention_mask=None, cache=self.cache,
                         use_cache=True)
        # [1, n, vocab] stated: the converted type's batch size would otherwise be dynamic
        return out.logits[0].unsqueeze(0)
