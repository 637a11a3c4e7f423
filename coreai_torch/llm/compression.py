"""Weight compression of a causal LM through Apple's ``coreai-opt``, following Apple's recipes.

``compress(model, "int4")`` returns the model finalized for Core AI (its compressed weights
rebuilt by the ``torch.ops.coreai.*`` ops, so ``torch.export`` and :class:`TorchConverter`
keep them compressed) and a manifest record of what was done.

The presets are Apple's (``coreai-models``: ``export/presets.py`` and the model cards'
YAML recipes):

- ``"int4"``: macOS ``4bit``: int4 weights, ``symmetric_with_clipping``, one scale per block of
  32 input channels, on every linear layer and on the embedding (a tied ``lm_head`` shares the
  embedding's compressed table).
- ``"palettize4"``: iOS ``4bit_weight_palettized_group32``: 4-bit k-means palettization, one
  table per 32 output channels, on every linear layer.
- ``"palettize8"``: 8-bit palettization with one table per tensor (the 8-bit scheme of Apple's
  mixed recipes) on every linear layer.
- ``"mixed-4-8"``: Apple's mixed 4/8-bit palettization (``models/qwen3/*.yaml``): 4-bit tables per
  group of output channels, 8-bit per-tensor tables on the most sensitive decoder layers. For
  the Qwen3-0.6B and Qwen3-4B shapes these are Apple's layer lists; for other shapes the first
  two and last two decoder layers (boundary layers are the most sensitive, Apple's
  compression-exploration notes).

Every palettization leaves the embedding out of k-means (coreai-opt palettizes linear and
convolution weights only, and Apple's recipes exclude it) and, as Apple's iOS export does,
quantizes it to int8 with one scale per tensor; a tied ``lm_head`` uses that same table.

A coreai-opt config (a dict, or a YAML path, with a top-level ``quantization_config`` or
``kmeans_palettization_config`` key, e.g. Apple's ``qwen3_0_6b_mixed_4bit_8bit.yaml``) is
applied as written, with three adaptations recorded in the manifest: norm layers (1-d weights,
which a global per-block spec cannot take) are excluded, as Apple's recipes exclude their own
RMSNorm modules; module-name patterns written for Apple's wrapper (``extend\\.model\\...``)
are matched against the Hugging Face names (``model...``); and the embedding / tied
``lm_head`` rules above.
"""

from __future__ import annotations

import copy
import os
import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import torch
from torch import nn

from coreai_torch.llm._sizes import size_report, weight_sizes

__all__ = ["PRESETS", "CompressionError", "compress"]

_QUANT_KEY = "quantization_config"
_PALETTE_KEY = "kmeans_palettization_config"
_LINEAR = "torch.nn.modules.linear.Linear"
_EMBEDDING = "torch.nn.modules.sparse.Embedding"
# Apple's recipes name modules of its own wrapper; the checkpoint's modules sit under "model."
_APPLE_PREFIX = re.compile(r"^extend(\\\.|\.)")

_INT4_BLOCK32 = {"dtype": "int4", "qscheme": "symmetric_with_clipping",
                 "granularity": {"type": "per_block", "block_size": 32, "axis": 1}}
_INT8_PER_TENSOR = {"dtype": "int8", "qscheme": "symmetric",
                    "granularity": {"type": "per_tensor"}}


def _weights(spec: Mapping[str, Any]) -> dict[str, Any]:
    return {"op_state_spec": {"weight": dict(spec)}, "op_input_spec": None,
            "op_output_spec": None}


def _palette(n_bits: int, group_size: int | None) -> dict[str, Any]:
    granularity: dict[str, Any] = (
        {"type": "per_tensor"} if group_size is None else
        {"type": "per_grouped_channel", "axis": 0, "group_size": group_size})
    return {"op_state_spec": {"weight": {"n_bits": n_bits, "granularity": granularity}}}


PRESETS: dict[str, str] = {
    "int4": "int4 weights, symmetric with clipping, blocks of 32 (Apple's macOS 4bit)",
    "palettize4": "4-bit palettization, a table per 32 output channels, int8 embedding "
                  "(Apple's iOS 4bit_weight_palettized_group32)",
    "palettize8": "8-bit palettization, a table per tensor, int8 embedding",
    "mixed-4-8": "4-bit palettization with 8-bit layers (Apple's qwen3 mixed 4/8-bit recipes)",
}

# Apple's models/qwen3/*.yaml: (layers, hidden size) -> (4-bit group size, 8-bit layers)
_APPLE_MIXED = {(28, 1024): (8, (0, 2, 4, 7, 15, 16)),
                (36, 2560): (32, (6, 8, 11, 33, 34))}


class CompressionError(ValueError):
    """A compression that cannot be applied: an unknown preset, a malformed config, a
    pattern that names no module."""


# -- the model's structure -----------------------------------------------------------------

def _fqn(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _decoder_layers(model: nn.Module) -> tuple[str, int]:
    """The module path of the decoder layers' ``ModuleList`` and its length."""
    config = getattr(model, "config", None)
    count = getattr(config, "num_hidden_layers", None) or getattr(config, "n_layer", None)
    lists = [(n, len(m)) for n, m in model.named_modules() if isinstance(m, nn.ModuleList)]
    for name, length in lists:
        if count is None or length == count:
            return name, length
    raise CompressionError(
        f"compress: found no decoder layer list in {type(model).__name__} "
        f"(a ModuleList of {count} layers); mixed-4-8 needs one")


def _tied_head(model: nn.Module) -> tuple[str, str] | None:
    """(embedding name, lm_head name) when the output projection shares the input
    embedding's weight."""
    get_in = getattr(model, "get_input_embeddings", None)
    get_out = getattr(model, "get_output_embeddings", None)
    if get_in is None or get_out is None:
        return None
    emb, head = get_in(), get_out()
    if emb is None or head is None or emb.weight is not head.weight:
        return None
    names = {id(m): n for n, m in model.named_modules()}
    return names[id(emb)], names[id(head)]


def _norm_types(model: nn.Module) -> list[str]:
    """Module types with a 1-d ``weight`` and no matrix weight: normalization layers."""
    out: dict[str, None] = {}
    for m in model.modules():
        w = getattr(m, "weight", None)
        if isinstance(w, torch.Tensor) and w.dim() == 1 and not isinstance(
                m, nn.Linear | nn.Embedding):
            out[_fqn(type(m))] = None
    return list(out)


# -- configs -------------------------------------------------------------------------------

def _preset(name: str, model: nn.Module) -> dict[str, Any]:
    if name == "int4":
        spec = _weights(_INT4_BLOCK32)
        return {_QUANT_KEY: {"execution_mode": "eager", "global_config": None,
                             "module_type_configs": {_LINEAR: spec, _EMBEDDING: spec}}}
    if name == "palettize4":
        return {_PALETTE_KEY: {"global_config": _palette(4, 32)}}
    if name == "palettize8":
        return {_PALETTE_KEY: {"global_config": _palette(8, None)}}
    assert name == "mixed-4-8"
    prefix, count = _decoder_layers(model)
    hidden = getattr(getattr(model, "config", None), "hidden_size", None)
    apple = _APPLE_MIXED.get((count, int(hidden or 0)))
    if apple is not None:
        group, eight = apple
    else:
        group = 8 if (hidden or 0) <= 1024 else 32
        eight = tuple(sorted({0, 1, count - 2, count - 1} & set(range(count))))
    layers = "|".join(str(i) for i in eight)
    return {_PALETTE_KEY: {
        "global_config": _palette(4, group),
        "module_name_configs": {rf"{re.escape(prefix)}\.({layers})\..*": _palette(8, None)}}}


def _load_config(compression: str | Mapping[str, Any] | os.PathLike[str],
                 model: nn.Module) -> tuple[str, dict[str, Any]]:
    if isinstance(compression, str) and compression in PRESETS:
        return compression, _preset(compression, model)
    if isinstance(compression, Mapping):
        return "config", copy.deepcopy(dict(compression))
    path = Path(compression)
    if isinstance(compression, os.PathLike) or path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            raise CompressionError(f"compress: config file {path} does not exist")
        import yaml  # type: ignore[import-untyped]

        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError as e:
            raise CompressionError(f"compress: {path} is not valid YAML: {e}") from e
        if not isinstance(data, dict):
            raise CompressionError(f"compress: {path} holds {type(data).__name__}, not a "
                                   "coreai-opt config mapping")
        return str(path), data
    raise CompressionError(
        f"compress: unknown compression {compression!r}; the presets are "
        + ", ".join(f"{k!r} ({v})" for k, v in PRESETS.items())
        + ", or pass a coreai-opt config (a dict or a YAML path)")


def _adapt(config: dict[str, Any], model: nn.Module, notes: list[str]) -> str:
    """Check the config's shape and adapt it to the Hugging Face module tree (in place);
    returns its kind (``quantization_config`` / ``kmeans_palettization_config``)."""
    keys = set(config) & {_QUANT_KEY, _PALETTE_KEY}
    if len(keys) != 1 or len(config) != 1:
        raise CompressionError(
            f"compress: a coreai-opt config has one top-level key, {_QUANT_KEY!r} or "
            f"{_PALETTE_KEY!r}; got {sorted(config)}")
    kind = keys.pop()
    body = config[kind] = dict(config[kind] or {})
    if kind == _QUANT_KEY:
        body.setdefault("execution_mode", "eager")  # a HF forward does not torch.export as is
    types = body["module_type_configs"] = dict(body.get("module_type_configs") or {})
    if body.get("global_config", "default") is not None:
        for fqn in _norm_types(model):
            if fqn not in types:
                types[fqn] = None
                notes.append(f"{fqn} excluded (1-d norm weights)")
    names = dict(body.get("module_name_configs") or {})
    module_names = [n for n, _ in model.named_modules()]
    adapted: dict[str, Any] = {}
    for pattern, value in names.items():
        if not any(re.fullmatch(pattern, n) for n in module_names):
            plain = _APPLE_PREFIX.sub("", pattern)
            if plain != pattern and any(re.fullmatch(plain, n) for n in module_names):
                notes.append(f"pattern {pattern!r} matched as {plain!r}")
                pattern = plain
            else:
                sample = ", ".join(n for n in module_names if n.count(".") <= 3)[:300]
                raise CompressionError(
                    f"compress: module_name_configs pattern {pattern!r} matches no module "
                    f"of {type(model).__name__} (module names: {sample}, ...); fix the "
                    "pattern (it is matched in full, as a regular expression)")
        adapted[pattern] = value
    body["module_name_configs"] = adapted
    return kind


# -- applying coreai-opt ---------------------------------------------------------------------

def _example_inputs(model: nn.Module) -> tuple[torch.Tensor]:
    vocab = int(getattr(getattr(model, "config", None), "vocab_size", 2) or 2)
    return (torch.arange(4).remainder(vocab).reshape(1, 4),)


class _LogitsOnly(nn.Module):
    """The model's logits of ``input_ids`` without a cache: what coreai-opt traces."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, use_cache=False).logits


def _run(kind: str, config: dict[str, Any], model: nn.Module) -> None:
    """Prepare and finalize ``model`` in place with coreai-opt (backend Core AI)."""
    with warnings.catch_warnings():  # coreai-opt warns about untested torch versions
        warnings.simplefilter("ignore")
        try:
            import coreai_opt
        except ImportError as e:
            raise CompressionError(
                "compress: needs Apple's coreai-opt; install it with this package's llm extra, "
                "`pip install 'coreai-torch[llm]'`, or `pip install coreai-opt` (not "
                "coreai-opt[coreai], which replaces this package)") from e
        from coreai_opt.palettization import KMeansPalettizer, KMeansPalettizerConfig
        from coreai_opt.quantization import Quantizer, QuantizerConfig

        # names are matched against the wrapper's module tree: prefix them
        body = config[kind]
        body["module_name_configs"] = {
            rf"model\.{p}": v for p, v in body.get("module_name_configs", {}).items()}
        wrapped = _LogitsOnly(model)
        inputs = _example_inputs(model)
        compressor: Any
        if kind == _QUANT_KEY:
            compressor = Quantizer(wrapped, QuantizerConfig.from_dict(config))  # type: ignore[arg-type]
        else:
            compressor = KMeansPalettizer(wrapped, KMeansPalettizerConfig.from_dict(config))  # type: ignore[arg-type]
        with torch.no_grad():
            prepared = compressor.prepare(example_inputs=inputs)
            finalized = compressor.finalize(prepared, backend=coreai_opt.ExportBackend.CoreAI)
    if finalized is not wrapped and getattr(finalized, "model", None) is not model:
        raise CompressionError("compress: coreai-opt returned a new model object; expected "
                               "the module finalized in place")


def _is_compressed(module: nn.Module) -> bool:
    return getattr(module, "parametrizations", None) is not None and "weight" in \
        module.parametrizations  # type: ignore[operator]


def _share_head(model: nn.Module, tie: tuple[str, str], notes: list[str]) -> None:
    """Make a tied ``lm_head`` compute with the embedding's compressed weight (one table)."""
    from torch.nn.utils import parametrize

    emb, head = model.get_submodule(tie[0]), model.get_submodule(tie[1])
    if not _is_compressed(emb):
        return
    if _is_compressed(head):
        parametrize.remove_parametrizations(head, "weight", leave_parametrized=False)
    chain: Any = cast(Any, emb).parametrizations.weight
    head.weight = nn.Parameter(torch.empty(0, dtype=chain.original.dtype), requires_grad=False)
    parametrize.register_parametrization(head, "weight", chain[0], unsafe=True)
    notes.append(f"{tie[1]} shares {tie[0]}'s compressed weight (tied)")


def compress(model: nn.Module, compression: str | Mapping[str, Any] | os.PathLike[str] | None,
             ) -> tuple[nn.Module, dict[str, Any]]:
    """Compress the weights of a ``transformers`` causal LM with coreai-opt, in place.

    ``compression``: ``None``/``"none"``, a preset of :data:`PRESETS` (``"int4"``,
    ``"palettize4"``, ``"palettize8"``, ``"mixed-4-8"``), or a coreai-opt config (a mapping or
    the path of a YAML file, as Apple's recipes are written). Returns the model finalized for
    Core AI (export it with ``torch.export`` and convert it; its weights stay compressed) and
    the manifest record: ``scheme``, the config applied, ``notes`` on how it was adapted,
    ``tensors`` (each weight's scheme, bits per element and bytes) and ``size`` (bytes
    against float16/float32).

    Raises :class:`CompressionError` for an unknown preset (naming the presets), a malformed
    config or a module pattern that matches nothing.
    """
    before = weight_sizes(model)
    parameters = sum(int(torch.Size(s.shape).numel()) for s in before)
    if compression is None or compression == "none":
        return model, _manifest("none", None, [], model, parameters)
    scheme, config = _load_config(compression, model)
    notes: list[str] = []
    kind = _adapt(config, model, notes)
    tie = _tied_head(model)
    applied = copy.deepcopy(config)
    if tie is not None and kind == _PALETTE_KEY:
        # the head follows the embedding's int8 table, below (a quantization config takes
        # both, as one parameter, and the head is pointed at the embedding's copy after)
        config[kind]["module_name_configs"][re.escape(tie[1])] = None
    _run(kind, config, model)
    embedding = getattr(model, "get_input_embeddings", lambda: None)()
    if kind == _PALETTE_KEY and isinstance(embedding, nn.Embedding) and not _is_compressed(
            embedding):
        names = {id(m): n for n, m in model.named_modules()}
        _run(_QUANT_KEY, {_QUANT_KEY: {
            "execution_mode": "eager", "global_config": None, "module_type_configs": {},
            "module_name_configs": {re.escape(names[id(embedding)]): _weights(
                _INT8_PER_TENSOR)}}}, model)
        notes.append(f"{names[id(embedding)]} quantized to int8 per tensor (Apple's iOS "
                     "embedding)")
    if tie is not None:
        _share_head(model, tie, notes)
    dropped = _drop_zero_points(model)
    if dropped:
        notes.append(f"all-zero zero points of {dropped} symmetric weights dropped")
    return model, _manifest(scheme, applied, notes, model, parameters)


def _drop_zero_points(model: nn.Module) -> int:
    """coreai-opt stores an all-zero zero point with symmetric weights: drop it (the same
    values, 0.5 bit less per int4 block)."""
    count = 0
    for module in model.modules():
        zero = getattr(module, "zero_point", None)
        if (isinstance(zero, torch.Tensor) and hasattr(module, "quantized_data")
                and not bool(zero.any())):
            module.zero_point = None  # type: ignore[assignment]
            count += 1
    return count


def _manifest(scheme: str, config: dict[str, Any] | None, notes: list[str], model: nn.Module,
              parameters: int) -> dict[str, Any]:
    sizes = weight_sizes(model)
    return {"scheme": scheme, "config": config, "notes": notes,
            "tensors": [s.to_dict() for s in sizes],
            "size": size_report(sizes, parameters).to_dict()}
