"""``coreai-torch llm export|generate|eval``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from coreai_torch import llm
from coreai_torch.cli import main
from tests.llm.conftest import PROMPT


def test_export_dry_run_writes_nothing(tmp_path: Path, llama_checkpoint: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bundle"
    assert main(["llm", "export", str(llama_checkpoint), "-o", str(out), "--dry-run",
                 "--num-layers", "1"]) == 0
    printed = capsys.readouterr().out
    assert "model type:   llama" in printed and "layers:       1" in printed
    assert "max context:  64 (model positions: 64)" in printed  # the default: the model's
    assert not out.exists()


def test_export_then_generate(tmp_path: Path, llama_checkpoint: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bundle"
    assert main(["llm", "export", str(llama_checkpoint), "-o", str(out), "--max-context", "16",
                 "--num-layers", "1", "--no-aimodel"]) == 0
    assert f"wrote {out} (llama, 1 layers, max context 16" in capsys.readouterr().out
    bundle = llm.LLMBundle.open(out)
    assert bundle.manifest["num_layers"] == 1 and bundle.manifest["files"]["aimodel"] is None
    ids = ",".join(map(str, PROMPT))
    assert main(["llm", "generate", str(out), "--ids", ids, "--max-new-tokens", "5",
                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    with llm.load(out) as model:
        assert report["tokens"] == model.generate(PROMPT, 5)
    assert report["new_tokens"] == len(report["tokens"]) and report["runtime"] == "reference"
    assert main(["llm", "generate", str(out), "--prompt", "the cat", "--max-new-tokens",
                 "3"]) == 0
    captured = capsys.readouterr()
    assert "tokens/s (reference)" in captured.err and captured.out.strip()
    # an existing bundle: refused (exit code 2), replaced with --overwrite
    assert main(["llm", "export", str(llama_checkpoint), "-o", str(out), "--max-context",
                 "16"]) == 2
    assert "exists; pass overwrite=True (CLI: --overwrite)" in capsys.readouterr().err


def test_generate_on_apple_interpreter_with_chat(llama_bundle: Any,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["llm", "generate", str(llama_bundle.path), "--prompt", "the dog", "--chat",
                 "--max-new-tokens", "4", "--runtime", "aimodel", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    with llm.load(llama_bundle) as model:
        prompt = model.encode(model.chat_prompt([{"role": "user", "content": "the dog"}]),
                              add_special_tokens=False)
        assert report["tokens"] == model.generate(prompt, 4)


@pytest.mark.parametrize(("argv", "message"), [
    (["llm", "generate", "{bundle}", "--ids", "1,x"], "pass token ids as 1,2,3"),
    (["llm", "generate", "{bundle}", "--ids", "1", "--chat"], "--chat applies"),
    (["llm", "generate", "{bundle}", "--ids", "1,2", "--max-new-tokens", "99"],
     "exceed the bundle's max_context=24"),
    (["llm", "generate", "{bundle}", "--ids", "1", "--top-p", "0.5", "--max-new-tokens", "2"],
     "temperature > 0"),
    (["llm", "export", "{missing}", "-o", "{missing}"], "no such checkpoint folder"),
    (["llm", "eval", "{bundle}", "--text", "{missing}"], "cannot read the text"),
])
def test_bad_input_is_one_line_and_exit_code_2(argv: list[str], message: str,
                                                llama_bundle: Any, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    argv = [a.format(bundle=llama_bundle.path, missing=tmp_path / "missing") for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert err.startswith("coreai-torch llm ")


def test_eval_prints_the_perplexity_transformers_gives(llama_bundle: Any, llama_checkpoint: Path,
                                                       tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    """``llm eval`` on a text file: the perplexity of the bundle's model equals exp of the mean
    cross-entropy of transformers' own logits for the same tokens (computed here with torch)."""
    import torch
    from transformers import AutoModelForCausalLM

    text = tmp_path / "text.txt"
    text.write_text("the cat sat on the mat and the dog sat on the cat")
    assert main(["llm", "eval", str(llama_bundle.path), "--text", str(text), "--json"]) == 0
    reported = json.loads(capsys.readouterr().out)["perplexity"]
    with llm.load(llama_bundle) as model:
        ids = model.encode(text.read_text())
    reference = AutoModelForCausalLM.from_pretrained(llama_checkpoint, local_files_only=True,
                                                     dtype=torch.float32).eval()
    with torch.no_grad():
        logits = reference(torch.tensor([ids])).logits[0]
    loss = torch.nn.functional.cross_entropy(logits[:-1], torch.tensor(ids[1:]))
    # the program computes in float32 like torch: agreement to float32 rounding of the mean
    assert reported == pytest.approx(float(torch.exp(loss)), rel=1e-4)
