"""Corpus: transformers text models (encoders, decoders, encoder-decoders) from tiny configs.

Every model has 2 layers, hidden size 32 (or the family's nearest legal size), a vocabulary
of 96 and random weights; nothing is downloaded.
"""

from __future__ import annotations

from typing import Any

import torch

from tests.models.builders import Builder, Built, hf_model, token_ids

VOCAB = 96
# keyword names most configs share (attribute maps translate them for the others)
COMMON = {"num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 32,
          "intermediate_size": 64, "vocab_size": VOCAB, "max_position_embeddings": 64}
DECODER = {**COMMON, "num_attention_heads": 4, "num_key_value_heads": 2, "use_cache": False}
SEQ2SEQ = {"vocab_size": VOCAB, "d_model": 32, "encoder_layers": 2, "decoder_layers": 2,
           "encoder_attention_heads": 2, "decoder_attention_heads": 2, "encoder_ffn_dim": 64,
           "decoder_ffn_dim": 64, "max_position_embeddings": 64, "use_cache": False,
           "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2, "decoder_start_token_id": 0}


def _mask() -> torch.Tensor:
    mask = torch.ones(2, 11, dtype=torch.int64)
    mask[1, 7:] = 0  # a padded second sequence
    return mask


def _build(family: str, config: dict[str, Any], kind: str, model: str = "Model",
           field: str = "last_hidden_state") -> Built:
    import transformers

    cfg = getattr(transformers, f"{family}Config")(**config)
    model_cls = getattr(transformers, f"{family}{model}")
    if kind == "encoder":
        return hf_model(model_cls, cfg, (token_ids(VOCAB), _mask()),
                        ("input_ids", "attention_mask"), field)
    if kind == "decoder":
        return hf_model(model_cls, cfg, (token_ids(VOCAB),), ("input_ids",), field)
    decoder_ids = token_ids(VOCAB, length=7)
    return hf_model(model_cls, cfg, (token_ids(VOCAB), decoder_ids),
                    ("input_ids", "decoder_input_ids"), field)


def _entry(family: str, config: dict[str, Any], kind: str, **kw: str) -> Builder:
    return lambda: _build(family, config, kind, **kw)


ENCODERS: dict[str, Builder] = {
    "bert": _entry("Bert", COMMON, "encoder"),
    "roberta": _entry("Roberta", {**COMMON, "pad_token_id": 1}, "encoder"),
    "xlm_roberta": _entry("XLMRoberta", {**COMMON, "pad_token_id": 1}, "encoder"),
    "distilbert": _entry("DistilBert", {"n_layers": 2, "n_heads": 2, "dim": 32,
                                        "hidden_dim": 64, "vocab_size": VOCAB,
                                        "max_position_embeddings": 64}, "encoder"),
    "albert": _entry("Albert", {**COMMON, "embedding_size": 16}, "encoder"),
    "electra": _entry("Electra", {**COMMON, "embedding_size": 16}, "encoder"),
    "deberta": _entry("Deberta", COMMON, "encoder"),
    "deberta_v2": _entry("DebertaV2", COMMON, "encoder"),
    "mpnet": _entry("MPNet", COMMON, "encoder"),
    "funnel": _entry("Funnel", {"vocab_size": VOCAB, "block_sizes": [1, 1], "d_model": 32,
                                "n_head": 2, "d_head": 16, "d_inner": 64,
                                "num_decoder_layers": 1}, "encoder"),
    "roformer": _entry("RoFormer", COMMON, "encoder"),
    "convbert": _entry("ConvBert", COMMON, "encoder"),
    "ernie": _entry("Ernie", COMMON, "encoder"),
    "megatron_bert": _entry("MegatronBert", COMMON, "encoder"),
    "esm": _entry("Esm", {**COMMON, "pad_token_id": 1, "mask_token_id": 2}, "encoder"),
    "rembert": _entry("RemBert", {**COMMON, "bos_token_id": 0, "eos_token_id": 2,
                                  "input_embedding_size": 16,
                                  "output_embedding_size": 16}, "encoder"),
    "xlm": _entry("XLM", {"n_layers": 2, "n_heads": 2, "emb_dim": 32, "vocab_size": VOCAB,
                          "max_position_embeddings": 64}, "encoder"),
    "fnet": _entry("FNet", {**COMMON, "use_tpu_fourier_optimizations": False}, "decoder"),
    "clip_text": _entry("CLIPText", {**COMMON, "max_position_embeddings": 32,
                                      "bos_token_id": 0, "eos_token_id": 2}, "decoder",
                        field="pooler_output"),
}

DECODERS: dict[str, Builder] = {
    "gpt2": _entry("GPT2", {"n_layer": 2, "n_head": 2, "n_embd": 32, "vocab_size": VOCAB,
                            "n_positions": 32, "use_cache": False, "bos_token_id": 0,
                            "eos_token_id": 0}, "decoder"),
    "gpt_neo": _entry("GPTNeo", {"num_layers": 2, "attention_types": [[["global", "local"], 1]],
                                 "hidden_size": 32, "num_heads": 2, "vocab_size": VOCAB,
                                 "max_position_embeddings": 64, "window_size": 4,
                                 "use_cache": False}, "decoder"),
    "gpt_neox": _entry("GPTNeoX", DECODER, "decoder"),
    "gptj": _entry("GPTJ", {"n_layer": 2, "n_head": 4, "n_embd": 32, "rotary_dim": 4,
                            "vocab_size": VOCAB, "n_positions": 64, "use_cache": False},
                   "decoder"),
    "codegen": _entry("CodeGen", {"n_layer": 2, "n_head": 4, "n_embd": 32, "rotary_dim": 4,
                                  "vocab_size": VOCAB, "n_positions": 64, "n_ctx": 64,
                                  "use_cache": False}, "decoder"),
    "gpt_bigcode": _entry("GPTBigCode", {"n_layer": 2, "n_head": 4, "n_embd": 32,
                                         "vocab_size": VOCAB, "n_positions": 64,
                                         "use_cache": False}, "decoder"),
    "opt": _entry("OPT", {**DECODER, "ffn_dim": 64, "word_embed_proj_dim": 32}, "decoder"),
    "bloom": _entry("Bloom", {"n_layer": 2, "n_head": 4, "hidden_size": 32,
                              "vocab_size": VOCAB, "use_cache": False}, "decoder"),
    "falcon": _entry("Falcon", {**DECODER, "num_kv_heads": 2, "new_decoder_architecture": True},
                     "decoder"),
    "llama": _entry("Llama", DECODER, "decoder"),
    "mistral": _entry("Mistral", DECODER, "decoder"),
    "qwen2": _entry("Qwen2", DECODER, "decoder"),
    "qwen3": _entry("Qwen3", {**DECODER, "head_dim": 8}, "decoder"),
    "phi": _entry("Phi", DECODER, "decoder"),
    "phi3": _entry("Phi3", {**DECODER, "pad_token_id": 0}, "decoder"),
    "gemma": _entry("Gemma", {**DECODER, "head_dim": 8}, "decoder"),
    "gemma2": _entry("Gemma2", {**DECODER, "head_dim": 8, "sliding_window": 8}, "decoder"),
    "stablelm": _entry("StableLm", DECODER, "decoder"),
    "starcoder2": _entry("Starcoder2", DECODER, "decoder"),
    "olmo2": _entry("Olmo2", DECODER, "decoder"),
    "cohere": _entry("Cohere", DECODER, "decoder"),
    "granite": _entry("Granite", DECODER, "decoder"),
    "persimmon": _entry("Persimmon", DECODER, "decoder"),
    "xglm": _entry("XGLM", {"num_layers": 2, "attention_heads": 2, "d_model": 32,
                            "ffn_dim": 64, "vocab_size": VOCAB, "max_position_embeddings": 64,
                            "use_cache": False}, "decoder"),
    "biogpt": _entry("BioGpt", DECODER, "decoder"),
    # keep_window_size < the 11 tokens: its attention keeps a topk(sorted=False) of a mask
    # whose masked entries tie at finfo.min (issue 36: ties must fall as in torch's kernel)
    "doge": _entry("Doge", {**DECODER, "keep_window_size": 4}, "decoder"),
    # recurrent, recurrent, attention blocks; the RG-LRU scan writes out[:, t] = state into a
    # preallocated buffer (copy + select_scatter), a window below the 11 tokens
    "recurrent_gemma": _entry("RecurrentGemma", {**DECODER, "num_hidden_layers": 3,
                                                 "lru_width": 48, "attention_window_size": 8},
                              "decoder"),
    "mpt": _entry("Mpt", {"n_layers": 2, "n_heads": 4, "d_model": 32, "vocab_size": VOCAB,
                          "max_seq_len": 64, "use_cache": False}, "decoder"),
}

ENCODER_DECODERS: dict[str, Builder] = {
    "t5": _entry("T5", {"num_layers": 2, "num_heads": 2, "d_model": 32, "d_kv": 16, "d_ff": 64,
                        "vocab_size": VOCAB, "use_cache": False}, "seq2seq"),
    "mt5": _entry("MT5", {"num_layers": 2, "num_heads": 2, "d_model": 32, "d_kv": 16,
                          "d_ff": 64, "vocab_size": VOCAB, "use_cache": False}, "seq2seq"),
    "bart": _entry("Bart", SEQ2SEQ, "seq2seq"),
    "mbart": _entry("MBart", SEQ2SEQ, "seq2seq"),
    "marian": _entry("Marian", SEQ2SEQ, "seq2seq"),
    "pegasus": _entry("Pegasus", SEQ2SEQ, "seq2seq"),
    "blenderbot": _entry("Blenderbot", SEQ2SEQ, "seq2seq"),
    "blenderbot_small": _entry("BlenderbotSmall", SEQ2SEQ, "seq2seq"),
    "m2m_100": _entry("M2M100", SEQ2SEQ, "seq2seq"),
}
