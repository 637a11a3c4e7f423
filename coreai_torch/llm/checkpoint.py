"""A causal LM from a local checkpoint folder or a loaded ``transformers`` model, checked
before anything heavy happens: the folder's files, the family, the context length."""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from coreai_torch.llm.errors import CheckpointError, ContextLengthError
from coreai_torch.llm.families import check_family

__all__ = ["TOKENIZER_FILES", "Checkpoint", "inspect_checkpoint", "load_model", "offline"]

# files a bundle copies from the checkpoint when present (the tokenizer and how to generate)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "added_tokens.json", "chat_template.jinja", "chat_template.json",
                   "vocab.json", "merges.txt", "tokenizer.model", "generation_config.json")


@contextlib.contextmanager
def offline() -> Iterator[None]:
    """Hugging Face libraries never touch the network in this block (``HF_HUB_OFFLINE``);
    the variable is restored afterwards."""
    old = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = old


@attrs.frozen
class Checkpoint:
    """What an export will take from a checkpoint: checked, before any weight is loaded."""

    model_type: str
    config: Any  # a transformers PretrainedConfig, truncated to num_layers
    folder: Path | None  # None for a loaded model without a local folder
    num_layers: int  # the layers exported
    max_positions: int | None  # the model's position limit (None: not stated)
    files: tuple[str, ...]  # tokenizer and generation files the bundle copies

    @property
    def eos_ids(self) -> list[int]:
        """The end-of-sequence token ids (generation config first, then the model config)."""
        gen = self.folder / "generation_config.json" if self.folder else None
        value: Any = None
        if gen is not None and gen.is_file():
            import json

            value = json.loads(gen.read_text()).get("eos_token_id")
        if value is None:
            value = getattr(self.config, "eos_token_id", None)
        if value is None:
            return []
        return [int(v) for v in (value if isinstance(value, list) else [value])]


def _max_positions(config: Any) -> int | None:
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _truncate(config: Any, num_layers: int | None) -> Any:
    total = int(config.num_hidden_layers)
    if num_layers is None:
        return config
    if not isinstance(num_layers, int) or isinstance(num_layers, bool) or not (
            1 <= num_layers <= total):
        raise CheckpointError(f"num_layers={num_layers!r}: the model has {total} layers; pass "
                              f"an int from 1 to {total}")
    config = copy.deepcopy(config)
    config.num_hidden_layers = num_layers
    for per_layer in ("layer_types", "no_rope_layers", "mlp_only_layers"):
        value = getattr(config, per_layer, None)
        if isinstance(value, list) and len(value) > num_layers:
            setattr(config, per_layer, value[:num_layers])
    return config


def _check_context(max_context: Any, limit: int | None, where: str) -> None:
    if not isinstance(max_context, int) or isinstance(max_context, bool) or max_context < 2:
        raise ContextLengthError(f"max_context={max_context!r}: pass an int >= 2 (the prompt "
                                 f"plus generated tokens the KV cache holds)")
    if limit is not None and max_context > limit:
        raise ContextLengthError(
            f"max_context={max_context} is beyond the {limit} positions of {where} "
            f"(max_position_embeddings); pass max_context <= {limit}")


def inspect_checkpoint(model_or_path: Any, *, max_context: int,
                       num_layers: int | None = None) -> Checkpoint:
    """Check ``model_or_path`` (a checkpoint folder or a loaded ``transformers`` model)
    without loading weights: files, family, ``num_layers`` and ``max_context``."""
    folder: Path | None
    if isinstance(model_or_path, (str, os.PathLike)):
        folder = Path(model_or_path)
        if not folder.is_dir():
            raise CheckpointError(f"{folder}: no such checkpoint folder (a local folder with "
                                  f"config.json and *.safetensors; nothing is downloaded)")
        if not (folder / "config.json").is_file():
            raise CheckpointError(f"{folder}: no config.json; a checkpoint folder holds the "
                                  f"model's config.json and its *.safetensors weights")
        if not any(folder.glob("*.safetensors")):
            pickled = [p.name for p in folder.glob("*.bin")]
            hint = (f" ({', '.join(pickled)} is pickled and is never loaded: convert it to "
                    f"safetensors)" if pickled else "")
            raise CheckpointError(f"{folder}: no *.safetensors weights{hint}")
        from transformers import AutoConfig

        with offline():
            try:
                config = AutoConfig.from_pretrained(folder, local_files_only=True)
            except (ValueError, KeyError, OSError) as e:
                raise CheckpointError(f"{folder}/config.json cannot be read by transformers: "
                                      f"{e}") from e
        files = tuple(f for f in TOKENIZER_FILES if (folder / f).is_file())
        where = str(folder)
    else:
        config = getattr(model_or_path, "config", None)
        if config is None or not hasattr(model_or_path, "forward"):
            raise CheckpointError(f"{type(model_or_path).__name__}: pass a checkpoint folder "
                                  f"or a loaded transformers causal LM (a PreTrainedModel)")
        if num_layers is not None:
            raise CheckpointError("num_layers truncates a checkpoint folder as it loads; for a "
                                  "loaded model, pass a folder or truncate the model yourself")
        name = getattr(config, "_name_or_path", "") or ""
        folder = Path(name) if name and Path(name).is_dir() else None
        files = tuple(f for f in TOKENIZER_FILES if folder and (folder / f).is_file())
        where = type(model_or_path).__name__
    model_type = check_family(config)
    config = _truncate(config, num_layers)
    limit = _max_positions(config)
    _check_context(max_context, limit, where)
    return Checkpoint(model_type=model_type, config=config, folder=folder,
                      num_layers=int(config.num_hidden_layers), max_positions=limit,
                      files=files)


def load_model(model_or_path: Any, checkpoint: Checkpoint) -> Any:
    """The causal LM: loaded from the folder (float32, safetensors, offline, in eval mode
    without gradients) or the given model itself, untouched (the export prepares it and
    restores it afterwards)."""
    import torch

    if not isinstance(model_or_path, (str, os.PathLike)):
        return model_or_path
    from transformers import AutoModelForCausalLM

    with offline():
        try:
            model = AutoModelForCausalLM.from_pretrained(
                str(checkpoint.folder), config=checkpoint.config, local_files_only=True,
                dtype=torch.float32, use_safetensors=True)
        except (ValueError, KeyError, OSError) as e:
            raise CheckpointError(f"{checkpoint.folder}: transformers cannot load the "
                                  f"weights: {e}") from e
    return model.eval().requires_grad_(False)
