"""The bundle on disk: its manifest, truncation, and replacing a bundle atomically."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from coreai_torch import __version__, llm
from coreai_torch.llm.bundle import FORMAT, staged_dir
from coreai_torch.llm.errors import BundleError
from tests.llm.conftest import MAX_CONTEXT, PROMPT


def test_the_manifest_describes_the_bundle(llama_bundle: Any) -> None:
    m = json.loads((llama_bundle.path / "manifest.json").read_text())
    assert m == llama_bundle.manifest
    assert (m["model_type"], m["num_layers"], m["max_context"]) == ("llama", 2, MAX_CONTEXT)
    assert m["coreai_torch_version"] == __version__
    assert m["eos_token_ids"] == [2] and m["precision"] == "float32" and m["keep"] == []
    assert m["compression"]["scheme"] == "none"
    prefill, decode = m["entrypoints"]["prefill"], m["entrypoints"]["decode"]
    seq = {"name": prefill["inputs"]["input_ids"]["shape"][1]["name"], "min": 1,
           "max": MAX_CONTEXT}
    assert prefill["inputs"] == {"input_ids": {"shape": [1, seq], "dtype": "int64"},
                                 "cache_position": {"shape": [seq], "dtype": "int64"}}
    assert prefill["outputs"] == {"logits": {"shape": [1, seq, 96], "dtype": "float32"}}
    assert decode["inputs"]["input_ids"] == {"shape": [1, 1], "dtype": "int64"}
    names = ["key_cache_0", "key_cache_1", "value_cache_0", "value_cache_1"]
    assert prefill["state"] == decode["state"] == names
    assert m["state"]["key_cache_0"] == {"shape": [1, 2, MAX_CONTEXT, 8], "dtype": "float32"}
    files = m["files"]
    assert (files["program"], files["aimodel"], files["config"]) == (
        "program.coreai", "model.aimodel", "config.json")
    assert sorted(files["tokenizer"]) == ["tokenizer.json", "tokenizer_config.json"]
    for name in [files["program"], files["aimodel"], files["config"], *files["tokenizer"],
                 files["generation_config"]]:
        assert (llama_bundle.path / name).exists(), name


def _truncated_greedy(folder: Path, layers: int, new: int) -> list[int]:
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(folder, local_files_only=True)
    config.num_hidden_layers = layers
    hf = AutoModelForCausalLM.from_pretrained(folder, config=config,
                                              local_files_only=True).eval()
    with torch.no_grad():
        out = hf.generate(torch.tensor([PROMPT]), max_new_tokens=new, do_sample=False)
    return out[0, len(PROMPT):].tolist()


def test_num_layers_truncates_and_overwrite_replaces(tmp_path: Path,
                                                    llama_checkpoint: Path) -> None:
    out = tmp_path / "bundle"
    one = llm.export(llama_checkpoint, out, max_context=12, num_layers=1, aimodel=False,
                     progress=False)
    assert one.manifest["num_layers"] == 1
    assert json.loads((out / "config.json").read_text())["num_hidden_layers"] == 1
    with llm.load(one) as model:
        assert model.generate(PROMPT, 5) == _truncated_greedy(llama_checkpoint, 1, 5)
    (out / "notes.txt").write_text("the old bundle")
    two = llm.export(llama_checkpoint, out, max_context=10, num_layers=1, overwrite=True,
                     aimodel=False, progress=False)
    assert two.max_context == 10 and not (out / "notes.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle"]


def _old_bundle(folder: Path) -> None:
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps({"format": FORMAT, "old": True}))


def test_a_failure_while_writing_leaves_the_old_bundle_whole(tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    _old_bundle(out)
    with pytest.raises(RuntimeError, match="disk full"), staged_dir(out, overwrite=True) as new:
        (new / "manifest.json").write_text("{}")
        raise RuntimeError("disk full")
    assert json.loads((out / "manifest.json").read_text())["old"] is True
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle"]  # no staging left
    with staged_dir(out, overwrite=True) as new:
        (new / "manifest.json").write_text(json.dumps({"format": FORMAT}))
    assert "old" not in json.loads((out / "manifest.json").read_text())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle"]  # the old one removed


def test_a_newer_bundle_format_is_refused(tmp_path: Path, llama_bundle: Any) -> None:
    manifest = {**llama_bundle.manifest, "format_version": 99}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match=r"format version 99; .* re-export"):
        llm.LLMBundle.open(tmp_path)


def test_the_guide_lists_every_family() -> None:
    """docs/llm.md's family table is the one the code holds (no hand-kept copy drifts)."""
    from coreai_torch.llm.families import family_table_markdown

    guide = Path(__file__).resolve().parents[2] / "docs" / "llm.md"
    assert family_table_markdown() in guide.read_text()


def test_a_loaded_model_exports_and_gets_its_flags_back(tmp_path: Path) -> None:
    from tests.llm.checkpoints import random_model

    model = random_model("qwen2").train()
    with torch.no_grad():
        expected = model.eval().generate(torch.tensor([PROMPT]), max_new_tokens=6,
                                         do_sample=False)[0, len(PROMPT):].tolist()
    model.train()
    bundle = llm.export(model, tmp_path / "bundle", max_context=16, aimodel=False,
                        progress=False)
    assert model.training and all(p.requires_grad for p in model.parameters())
    assert bundle.manifest["files"]["tokenizer"] == []  # a model without a folder: none
    with llm.load(bundle) as loaded:
        assert loaded.tokenizer is None
        assert loaded.generate(PROMPT, 6) == expected
        with pytest.raises(ValueError, match=r"has no tokenizer\.json"):
            loaded.generate("the cat", 2)


def test_experts_run_as_batched_mm_during_export_only() -> None:
    from coreai_torch.llm.exporter import _prepared
    from tests.llm.checkpoints import random_model

    model = random_model("qwen3_moe")
    before = model.get_experts_implementation()
    with _prepared(model):
        assert model.get_experts_implementation() == {"": "batched_mm"}
        assert not torch.is_grad_enabled()
    assert model.get_experts_implementation() == before != {"": "batched_mm"}
