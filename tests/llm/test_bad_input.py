"""Bad input gets a clear error before anything heavy is done, and loses nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from coreai_torch import llm
from coreai_torch.llm.errors import (
    BundleError,
    CheckpointError,
    ContextLengthError,
    UnsupportedFamilyError,
)
from tests.llm.conftest import MAX_CONTEXT


def test_a_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="no such checkpoint folder"):
        llm.export(tmp_path / "nowhere", tmp_path / "out", max_context=8)
    assert not (tmp_path / "out").exists()


def test_a_folder_without_config(tmp_path: Path, llama_checkpoint: Path) -> None:
    folder = tmp_path / "weights-only"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes((llama_checkpoint / "model.safetensors")
                                               .read_bytes())
    with pytest.raises(CheckpointError, match=r"no config\.json"):
        llm.export(folder, tmp_path / "out", max_context=8)
    assert not (tmp_path / "out").exists()


def test_a_folder_without_weights(tmp_path: Path, llama_checkpoint: Path) -> None:
    folder = tmp_path / "config-only"
    folder.mkdir()
    (folder / "config.json").write_text((llama_checkpoint / "config.json").read_text())
    (folder / "pytorch_model.bin").write_bytes(b"pickled")
    with pytest.raises(CheckpointError, match=r"no \*\.safetensors weights \(pytorch_model"
                                              r"\.bin is pickled and is never loaded"):
        llm.export(folder, tmp_path / "out", max_context=8)


def test_an_unsupported_family_is_refused_by_name_with_the_reason(tmp_path: Path) -> None:
    folder = tmp_path / "mamba"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "mamba", "hidden_size": 8,
                                                    "num_hidden_layers": 1}))
    (folder / "model.safetensors").write_bytes(b"")
    with pytest.raises(UnsupportedFamilyError,
                       match=r"model type 'mamba' is not supported: a state-space model.*"
                             r"Supported model types: .*qwen3"):
        llm.export(folder, tmp_path / "out", max_context=8)


def test_a_loaded_model_of_another_family_is_refused_too() -> None:
    from transformers import BertConfig, OPTConfig

    with pytest.raises(UnsupportedFamilyError, match="'bert' is not supported: an encoder"):
        llm.inspect_checkpoint(_Fake(BertConfig()), max_context=8)
    with pytest.raises(UnsupportedFamilyError, match="'opt' is not supported: no export of "
                                                     "it has been checked"):
        llm.inspect_checkpoint(_Fake(OPTConfig()), max_context=8)


class _Fake:
    """Stands for a loaded model: a config and a forward."""

    def __init__(self, config: Any) -> None:
        self.config = config

    def forward(self) -> None: ...


def test_max_context_beyond_the_model_positions(tmp_path: Path, llama_checkpoint: Path
                                                ) -> None:
    with pytest.raises(ContextLengthError, match=r"max_context=65 is beyond the 64 positions"):
        llm.export(llama_checkpoint, tmp_path / "out", max_context=65)
    with pytest.raises(ContextLengthError, match="pass an int >= 2"):
        llm.export(llama_checkpoint, tmp_path / "out", max_context=1)


def test_num_layers_out_of_range(tmp_path: Path, llama_checkpoint: Path) -> None:
    with pytest.raises(CheckpointError, match="the model has 2 layers"):
        llm.export(llama_checkpoint, tmp_path / "out", max_context=8, num_layers=3)


def test_bad_precision_and_platform(tmp_path: Path, llama_checkpoint: Path) -> None:
    with pytest.raises(llm.LLMError, match="precision='int8'"):
        llm.export(llama_checkpoint, tmp_path / "out", max_context=8, precision="int8")
    with pytest.raises(llm.LLMError, match="platform='android'"):
        llm.export(llama_checkpoint, tmp_path / "out", max_context=8, platform="android")


def test_an_existing_out_dir_is_refused_and_left_alone(tmp_path: Path, llama_checkpoint: Path
                                                       ) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    with pytest.raises(BundleError, match="exists; pass overwrite=True"):
        llm.export(llama_checkpoint, out, max_context=8)
    # overwrite replaces bundles only: a folder the project did not write is never replaced
    with pytest.raises(BundleError, match="is not an LLM bundle; it is never replaced"):
        llm.export(llama_checkpoint, out, max_context=8, overwrite=True, progress=False)
    assert (out / "mine.txt").read_text() == "keep me"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no staging folder left behind


def test_a_prompt_longer_than_max_context(llama_bundle: Any) -> None:
    with llm.load(llama_bundle) as model:
        with pytest.raises(ContextLengthError, match=f"the prompt has {MAX_CONTEXT + 1} tokens"):
            model.generate([5] * (MAX_CONTEXT + 1), 1)
        with pytest.raises(ContextLengthError, match="exceed the bundle's max_context"):
            model.generate([5] * 10, MAX_CONTEXT - 8)
        # exactly up to the last cache position is fine
        assert len(model.generate([5] * 10, MAX_CONTEXT - 9, stop=[])) >= 1


@pytest.mark.parametrize(("options", "message"), [
    ({"temperature": -1}, "temperature=-1"),
    ({"temperature": float("nan")}, "temperature=nan"),
    ({"top_k": 0, "temperature": 1}, "top_k=0"),
    ({"top_p": 1.5, "temperature": 1}, "top_p=1.5"),
    ({"top_p": 0.9}, "pass temperature > 0 with them"),
    ({"stop": "x"}, "stop='x'"),
])
def test_bad_sampling_arguments(llama_bundle: Any, options: dict[str, Any], message: str
                                ) -> None:
    with llm.load(llama_bundle) as model, pytest.raises(ValueError, match=message):
        model.generate([1, 5], 2, **options)


def test_bad_prompts(llama_bundle: Any) -> None:
    with llm.load(llama_bundle) as model:
        with pytest.raises(ValueError, match="non-empty sequence of token ids"):
            model.generate([], 2)
        with pytest.raises(ValueError, match=r"token ids must be in \[0, 96\)"):
            model.generate([1, 96], 2)
        with pytest.raises(ValueError, match="max_new_tokens=0"):
            model.generate([1, 5], 0)


def test_not_a_bundle(tmp_path: Path) -> None:
    with pytest.raises(BundleError, match="not an LLM bundle"):
        llm.load(tmp_path)
    (tmp_path / "manifest.json").write_text("{")
    with pytest.raises(BundleError, match="malformed manifest"):
        llm.load(tmp_path)
