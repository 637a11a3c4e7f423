"""``llm.export``: a causal LM to a bundle with ``prefill`` and ``decode`` sharing a KV cache."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from coreai_torch.llm import compression as _compression
from coreai_torch.llm.bundle import (
    AIMODEL_FILE,
    FORMAT,
    FORMAT_VERSION,
    MANIFEST_FILE,
    PROGRAM_FILE,
    LLMBundle,
    check_out_dir,
    graph_signature,
    staged_dir,
)
from coreai_torch.llm.checkpoint import Checkpoint, inspect_checkpoint, load_model
from coreai_torch.llm.errors import LLMError
from coreai_torch.llm.families import NO_AIMODEL
from coreai_torch.llm.wrapper import StaticCacheLM, cache_buffer_names

__all__ = ["INPUT_NAMES", "OUTPUT_NAME", "PLATFORMS", "PRECISIONS", "export"]

INPUT_NAMES = ("input_ids", "cache_position")
OUTPUT_NAME = "logits"
PRECISIONS = ("float32", "float16")
PLATFORMS = ("macOS", "iOS")


def _progress(total: int, desc: str, enabled: bool | None) -> Any:
    from tqdm.auto import tqdm  # type: ignore[import-untyped]

    # enabled=None: a bar on a terminal only (tqdm's own rule)
    return tqdm(total=total, desc=desc, unit="step", disable=None if enabled is None
                else not enabled)


@contextlib.contextmanager
def _prepared(model: Any) -> Iterator[None]:
    """``model`` ready to export in the block: eval mode, no gradients, and mixture-of-experts
    layers on transformers' ``batched_mm`` experts (gathered weights and batched matmuls; its
    default grouped kernel is a custom op with data-dependent shapes). A given model gets
    its training flag, ``requires_grad`` flags and experts implementation back afterwards."""
    training = model.training
    flags = [(p, p.requires_grad) for p in model.parameters()]
    experts = None
    if getattr(model, "_can_set_experts_implementation", lambda: False)():
        experts = model.get_experts_implementation()
        model.set_experts_implementation("batched_mm")
    model.eval().requires_grad_(False)
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(training)
        for p, flag in flags:
            p.requires_grad_(flag)
        if experts is not None:
            model.set_experts_implementation(experts)


def _export_entrypoints(module: StaticCacheLM, max_context: int) -> dict[str, Any]:
    """torch.export of ``prefill`` (any length 1..max_context, exported once) and
    ``decode`` (one token)."""
    seq = torch.export.Dim("seq", min=1, max=max_context)
    n = min(4, max_context)
    ids, pos = torch.zeros(1, n, dtype=torch.long), torch.arange(n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # transformers' and torch.export's deprecation chatter
        prefill = torch.export.export(
            module, (), {"input_ids": ids, "cache_position": pos},
            dynamic_shapes={"input_ids": {1: seq}, "cache_position": {0: seq}}, strict=False)
        decode = torch.export.export(
            module, (), {"input_ids": ids[:, :1], "cache_position": pos[:1]}, strict=False)
    return {"prefill": prefill, "decode": decode}


def _convert(exported: Mapping[str, Any], state_names: list[str]) -> Any:
    from coreai_torch import TorchConverter, get_decomp_table

    converter = TorchConverter()
    for name, ep in exported.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ep = ep.run_decompositions(get_decomp_table())
        converter.add_exported_program(ep, input_names=list(INPUT_NAMES),
                                       output_names=[OUTPUT_NAME], entrypoint_name=name)
    program = converter.to_coreai()
    missing = sorted(set(state_names) - set(program.state_names))
    if missing:  # the cache writes did not reach the program: generation would be wrong
        raise LLMError(f"the exported program does not update the KV cache {missing}; the "
                       f"model's attention does not use transformers' StaticCache")
    return program


def _float16_keep(program: Any, prompt_len: int, vocab: int) -> list[str]:
    """What must stay float32 in float16: ``precision_report`` on a decode step after a
    prefill (so the cache holds real keys and values), as module paths or op kinds, which
    name the same ops in both entrypoints."""
    from coreai_torch import precision_report

    rng = np.random.default_rng(0)
    ids = rng.integers(0, vocab, (1, prompt_len))
    program.reset_state()
    program.run({"input_ids": ids, "cache_position": np.arange(prompt_len)},
                entrypoint="prefill")
    step = {"input_ids": ids[:, -1:], "cache_position": np.array([prompt_len])}
    report = precision_report(program, step, "float16", entrypoint="decode")
    program.reset_state()
    keep = set()
    for figure in report.ops:
        if figure.kept:
            keep.add(figure.location.module_path or figure.op)
    return sorted(keep)


def _write_aimodel(staging: Path, program: Any, aimodel: bool | None, model_type: str
                   ) -> str | None:
    """Write the ``.aimodel``; returns why there is none (None: written)."""
    from coreai_torch.errors import MissingExtraError, UnexportableOpsError

    if aimodel is False:
        return "not requested (aimodel=False)"
    if model_type in NO_AIMODEL:
        reason = f"{model_type}: {NO_AIMODEL[model_type]}"
        if aimodel:
            raise LLMError(f"no .aimodel can be written for {reason}; export with "
                           f"aimodel=None or False and run it with runtime='reference'")
        return reason
    try:
        from coreai_torch.aimodel import export_aimodel
    except MissingExtraError as e:
        if aimodel:
            raise
        return f"Apple's coreai package is not installed ({e})"
    try:
        export_aimodel(program, staging / AIMODEL_FILE)
    except UnexportableOpsError as e:
        if aimodel:
            raise
        reason = " ".join(str(e).split())
        warnings.warn(f"no .aimodel in the bundle: {reason}", stacklevel=3)
        return reason
    return None


def _write(staging: Path, program: Any, checkpoint: Checkpoint, manifest: dict[str, Any],
           model_config: Any, aimodel: bool | None, bar: Any) -> None:
    program.save(staging / PROGRAM_FILE)
    bar.update()
    files: dict[str, Any] = {"program": PROGRAM_FILE, "aimodel": None, "config": "config.json"}
    missing = _write_aimodel(staging, program, aimodel, checkpoint.model_type)
    if missing is None:
        files["aimodel"] = AIMODEL_FILE
    manifest["aimodel_missing"] = missing
    bar.update()
    (staging / "config.json").write_text(model_config.to_json_string())
    for name in checkpoint.files:
        assert checkpoint.folder is not None
        shutil.copyfile(checkpoint.folder / name, staging / name)
    files["tokenizer"] = [f for f in checkpoint.files if f != "generation_config.json"]
    files["generation_config"] = ("generation_config.json"
                                  if "generation_config.json" in checkpoint.files else None)
    manifest["files"] = files
    (staging / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
    bar.update()


def export(model_or_path: Any, out_dir: str | os.PathLike[str], *, max_context: int,
           compression: str | Mapping[str, Any] | os.PathLike[str] | None = None,
           precision: str = "float32", num_layers: int | None = None,
           platform: str | None = None, overwrite: bool = False, aimodel: bool | None = None,
           progress: bool | None = None) -> LLMBundle:
    """Export a causal LM to a bundle folder at ``out_dir`` and return it.

    ``model_or_path`` is a local checkpoint folder (``config.json``, ``*.safetensors``,
    tokenizer files; loaded offline, never from the network) or a loaded ``transformers``
    causal LM. The bundle's program has a ``prefill`` entrypoint (``input_ids [1, n]``,
    ``cache_position [n]`` for any ``n`` up to ``max_context``) and a ``decode`` entrypoint
    (one token), both returning ``logits [1, n, vocab]`` and sharing the KV cache
    (``key_cache_<i>``/``value_cache_<i>``) as state. It is saved as ``program.coreai`` (the
    reference runtime) and, with Apple's ``coreai`` package installed and ``aimodel`` set, as
    ``model.aimodel``; ``manifest.json`` describes it all (see docs/llm.md).

    ``compression`` goes to :func:`coreai_torch.llm.compression.compress` before export;
    ``precision="float16"`` finds what must stay float32 with ``precision_report`` on a decode
    step and records it (``keep``) in the manifest; ``num_layers`` keeps the first layers
    only; ``platform`` (``"macOS"``, ``"iOS"``) is recorded for the deployment. An existing
    ``out_dir`` is refused unless ``overwrite`` (and then replaced as a whole, atomically).
    Errors (:class:`~coreai_torch.llm.errors.LLMError`) come before anything heavy is done.
    """
    if precision not in PRECISIONS:
        raise LLMError(f"precision={precision!r}: pass one of {', '.join(PRECISIONS)}")
    if platform is not None and platform not in PLATFORMS:
        raise LLMError(f"platform={platform!r}: pass one of {', '.join(PLATFORMS)} or None")
    checkpoint = inspect_checkpoint(model_or_path, max_context=max_context,
                                    num_layers=num_layers)
    out = Path(out_dir)
    check_out_dir(out, overwrite=overwrite)
    from coreai_torch import __version__

    with _progress(7, f"llm export {checkpoint.model_type}", progress) as bar:
        bar.set_postfix_str("loading")
        model = load_model(model_or_path, checkpoint)
        bar.update()
        with _prepared(model):
            bar.set_postfix_str("compressing")
            model, compression_record = _compression.compress(model, compression)
            bar.update()
            bar.set_postfix_str("torch.export")
            wrapped = StaticCacheLM(model, max_context)
            state_names = cache_buffer_names(len(wrapped.cache.layers))
            exported = _export_entrypoints(wrapped, max_context)
            bar.update()
        bar.set_postfix_str("converting")
        program = _convert(exported, state_names)
        del exported, wrapped
        bar.update()
        keep: list[str] = []
        if precision == "float16":
            bar.set_postfix_str("float16 check")
            keep = _float16_keep(program, min(8, max_context - 1), int(
                checkpoint.config.get_text_config().vocab_size))
            program = program.to_precision("float16", keep=keep or None)
        manifest = {
            "format": FORMAT, "format_version": FORMAT_VERSION,
            "coreai_torch_version": __version__,
            "model_type": checkpoint.model_type, "num_layers": checkpoint.num_layers,
            "max_context": max_context,
            "vocab_size": int(checkpoint.config.get_text_config().vocab_size),
            "eos_token_ids": checkpoint.eos_ids,
            "entrypoints": {name: graph_signature(program, name)
                            for name in ("prefill", "decode")},
            "state": {name: {"shape": list(program.initial_state[name].shape),
                             "dtype": str(program.initial_state[name].dtype)}
                      for name in program.state_names},
            "precision": precision, "keep": keep, "compression": compression_record,
            "platform": platform or "macOS",
        }
        bar.set_postfix_str("writing")
        with staged_dir(out, overwrite=overwrite) as staging:
            _write(staging, program, checkpoint, manifest, model.config, aimodel, bar)
        bar.set_postfix_str("done")
    return LLMBundle.open(out)
