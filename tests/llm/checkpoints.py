"""Tiny random-weight checkpoints of every supported family, written as local folders
(config.json, safetensors, a tokenizer trained here); nothing is downloaded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

VOCAB = 96
WORDS = ("the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "to", "park", "while",
         "birds", "sang", "in", "green", "trees", "under", "blue", "sky")
CHAT_TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} {% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>{% endif %}")

_LLAMA_LIKE = {"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
               "hidden_size": 32, "intermediate_size": 64, "vocab_size": VOCAB,
               "max_position_embeddings": 64, "bos_token_id": 1, "eos_token_id": 2,
               "pad_token_id": 0, "tie_word_embeddings": False}
_MOE = {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32}

# model_type -> config keyword arguments (2 layers, hidden size 32, vocabulary 96)
CONFIGS: dict[str, dict[str, Any]] = {
    "llama": _LLAMA_LIKE,
    "mistral": {**_LLAMA_LIKE, "sliding_window": 4},
    "qwen2": _LLAMA_LIKE,
    "qwen3": {**_LLAMA_LIKE, "head_dim": 8},
    "qwen3_moe": {**_LLAMA_LIKE, "head_dim": 8, **_MOE},
    "mixtral": {**_LLAMA_LIKE, "num_local_experts": 4, "num_experts_per_tok": 2},
    "phi3": {**_LLAMA_LIKE},
    "gemma2": {**_LLAMA_LIKE, "head_dim": 8, "sliding_window": 4},
    "gemma3_text": {**_LLAMA_LIKE, "head_dim": 8, "sliding_window": 4,
                    "layer_types": ["sliding_attention", "full_attention"]},
    "smollm3": {**_LLAMA_LIKE},
    "olmo2": {**_LLAMA_LIKE},
    "granite": {**_LLAMA_LIKE, "embedding_multiplier": 2.0, "residual_multiplier": 0.5,
                "attention_multiplier": 0.2, "logits_scaling": 2.0},
    "gpt_oss": {**_LLAMA_LIKE, "head_dim": 8, "num_local_experts": 4,
                "num_experts_per_tok": 2, "sliding_window": 4,
                "layer_types": ["sliding_attention", "full_attention"]},
    "gpt2": {"n_layer": 2, "n_head": 4, "n_embd": 32, "vocab_size": VOCAB, "n_positions": 64,
             "bos_token_id": 1, "eos_token_id": 2},
    # no grouped-query attention in GPT-NeoX: one key/value head per query head
    "gpt_neox": {**{k: v for k, v in _LLAMA_LIKE.items() if k != "num_key_value_heads"},
                 "rotary_pct": 0.5},
}


def word_tokenizer() -> Any:
    """A word-level ``tokenizers`` tokenizer over :data:`WORDS` (ids 0-3 are special)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3}
    for w in WORDS:
        vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="<s> $A",
                                                       special_tokens=[("<s>", 1)])
    tok.add_special_tokens(["<pad>", "<s>", "</s>", "<unk>"])
    from tokenizers import decoders

    tok.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    return tok


def make_config(model_type: str, **overrides: Any) -> Any:
    from transformers import AutoConfig

    return AutoConfig.for_model(model_type, **{**CONFIGS[model_type], **overrides})


def random_model(model_type: str, **overrides: Any) -> Any:
    """A seeded random model whose logits are far from uniform, so that greedy generation
    varies from step to step (Hugging Face's std 0.02 init gives near-uniform logits, whose
    argmax would hardly depend on the cache): every weight matrix is drawn with std
    1/sqrt(fan_in) (unit-variance outputs), biases with std 0.1, norms left at one."""
    from transformers import AutoModelForCausalLM
    from transformers.pytorch_utils import Conv1D

    torch.manual_seed(0)
    config = make_config(model_type, **overrides)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    # GPT-2's Conv1D stores its weight as [in, out]; everything else as [..., out, in]
    transposed = {id(m.weight) for m in model.modules() if isinstance(m, Conv1D)}
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim >= 2:
                fan_in = p.shape[0] if id(p) in transposed else p.shape[-1]
                p.copy_(torch.randn(p.shape, generator=g) / fan_in ** 0.5)
            elif "norm" not in name and "ln" not in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)
    return model


def write_checkpoint(folder: Path, model_type: str, *, tokenizer: bool = True,
                     **overrides: Any) -> Path:
    """Save a random ``model_type`` model (and a tokenizer) to ``folder``; returns it."""
    import json

    model = random_model(model_type, **overrides)
    model.save_pretrained(folder, safe_serialization=True)
    if tokenizer:
        word_tokenizer().save(str(folder / "tokenizer.json"))
        (folder / "tokenizer_config.json").write_text(json.dumps({
            "bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>",
            "unk_token": "<unk>", "chat_template": CHAT_TEMPLATE}))
    return folder
