"""The supported model families (Hugging Face ``model_type`` values) and why others are not.

Every family runs on ``transformers``' own modelling code with its ``StaticCache``; nothing
is re-implemented per family. The notes say what is particular about each one.
"""

from __future__ import annotations

from typing import Any

from coreai_torch.llm.errors import UnsupportedFamilyError

__all__ = ["NO_AIMODEL", "REFUSED", "SUPPORTED", "check_family", "family_table_markdown"]

# model_type -> what is particular about the family (shown by docs/llm.md and the CLI)
SUPPORTED: dict[str, str] = {
    "llama": "RoPE, grouped-query attention, SwiGLU MLP",
    "mistral": "llama-like; sliding-window attention when the config sets one",
    "qwen2": "llama-like with q/k/v biases",
    "qwen3": "llama-like with per-head q/k RMSNorm",
    "qwen3_moe": "mixture of experts, run as transformers' batched_mm experts (each token's "
                 "top-k experts gathered: no data-dependent shapes)",
    "mixtral": "mistral with a mixture of experts (batched_mm experts)",
    "phi3": "fused qkv and gate/up projections",
    "gemma2": "alternating sliding-window/global layers, logit soft-capping",
    "gemma3_text": "alternating sliding-window/global layers, two RoPE bases, q/k norms",
    "smollm3": "llama-like, RoPE skipped on some layers",
    "olmo2": "post-norm blocks with q/k RMSNorm",
    "granite": "llama-like with embedding, residual, attention and logit multipliers",
    "gpt_oss": "mixture of experts with attention sinks and sliding-window layers",
    "gpt2": "learned absolute positions, Conv1D projections, tied embeddings",
    "gpt_neox": "partial rotary embedding, parallel attention and MLP",
}

_MOE_DYNAMIC = ("its mixture-of-experts routing (top-k, sums and reshapes over the prompt's "
                "token count) has no dynamic-shape mapping to Core AI yet, so the prefill "
                "with a dynamic length cannot be written as an .aimodel")
# supported families whose bundle has no .aimodel (reference runtime only), with the reason
NO_AIMODEL: dict[str, str] = {
    "qwen3_moe": _MOE_DYNAMIC,
    "mixtral": _MOE_DYNAMIC,
    "gpt_oss": _MOE_DYNAMIC,
}

# model types users may try, with the reason they are refused
REFUSED: dict[str, str] = {
    "mamba": "a state-space model: no attention KV cache to export as prefill/decode state",
    "mamba2": "a state-space model: no attention KV cache to export as prefill/decode state",
    "rwkv": "a recurrent model: no attention KV cache to export as prefill/decode state",
    "jamba": "hybrid attention/state-space layers: the recurrent state is not exported",
    "falcon_h1": "hybrid attention/state-space layers: the recurrent state is not exported",
    "t5": "an encoder-decoder: only decoder-only causal language models are exported",
    "bart": "an encoder-decoder: only decoder-only causal language models are exported",
    "bert": "an encoder: it has no causal language-model head or KV cache",
    "qwen3_vl": "a vision-language model: only the text decoder families are exported",
    "gemma3": "the multimodal Gemma 3: export its text model (model_type 'gemma3_text')",
}


def check_family(config: Any) -> str:
    """The ``model_type`` of ``config`` if it is supported; else raise
    :class:`UnsupportedFamilyError` naming it with the reason."""
    model_type = getattr(config, "model_type", None)
    if model_type in SUPPORTED:
        return str(model_type)
    supported = ", ".join(sorted(SUPPORTED))
    reason = REFUSED.get(str(model_type),
                         "no export of it has been checked against transformers' generate()")
    raise UnsupportedFamilyError(
        f"model type {model_type!r} is not supported: {reason}. Supported model types: "
        f"{supported} (see docs/llm.md, 'Families').")


def family_table_markdown() -> str:
    """The supported families as a markdown table (model type | notes)."""
    rows = ["| model type | notes | runtimes |", "| --- | --- | --- |"]
    for name, note in SUPPORTED.items():
        runtimes = "reference" if name in NO_AIMODEL else "reference, aimodel"
        rows.append(f"| `{name}` | {note} | {runtimes} |")
    return "\n".join(rows)
