"""Large language models: a Hugging Face causal LM to a Core AI bundle that generates.

::

    from coreai_torch import llm

    bundle = llm.export("path/to/checkpoint", "out/qwen3", max_context=2048)
    model = llm.load("out/qwen3", runtime="reference")      # or runtime="aimodel"
    ids = model.generate([1, 2, 3], max_new_tokens=32)       # greedy by default

See docs/llm.md.
"""

from coreai_torch.llm.bundle import LLMBundle
from coreai_torch.llm.checkpoint import Checkpoint, inspect_checkpoint
from coreai_torch.llm.errors import (
    BundleError,
    CheckpointError,
    ContextLengthError,
    LLMError,
    UnsupportedFamilyError,
)
from coreai_torch.llm.exporter import export
from coreai_torch.llm.families import SUPPORTED
from coreai_torch.llm.generate import GenerationStats, LoadedLLM, load
from coreai_torch.llm.sampling import Sampler

__all__ = [
    "SUPPORTED", "BundleError", "Checkpoint", "CheckpointError", "ContextLengthError",
    "GenerationStats", "LLMBundle", "LLMError", "LoadedLLM", "Sampler",
    "UnsupportedFamilyError", "export", "inspect_checkpoint", "load",
]
