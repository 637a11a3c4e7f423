"""float16: what must stay float32 is found on the decode step and recorded, and greedy
generation over 32 tokens is compared with float32 (transformers' own, which the bundles
match token for token in float32: test_families.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from coreai_torch import llm
from tests.llm.checkpoints import write_checkpoint
from tests.llm.conftest import PROMPT, transformers_greedy

NEW_TOKENS = 32


def _transformers_logits(folder: Path) -> np.ndarray:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True).eval()
    with torch.no_grad():
        return model(torch.tensor([PROMPT])).logits[0].numpy()


def test_float16_greedy_agreement_with_float32(tmp_path: Path) -> None:
    folder = write_checkpoint(tmp_path / "checkpoint", "qwen3")
    max_context = len(PROMPT) + NEW_TOKENS
    bundle = llm.export(folder, tmp_path / "bundle", max_context=max_context,
                        precision="float16", progress=False)
    manifest = bundle.manifest
    assert manifest["precision"] == "float16" and isinstance(manifest["keep"], list)
    expected = transformers_greedy(folder, PROMPT, NEW_TOKENS)
    with llm.load(bundle) as model:
        got = model.generate(PROMPT, NEW_TOKENS, stop=[])
        logits = model.logits(PROMPT)
    # Apple's interpreter runs the same float16 program: the same greedy tokens here
    assert manifest["files"]["aimodel"] is not None
    with llm.load(bundle, runtime="aimodel") as apple:
        on_apple = apple.generate(PROMPT, NEW_TOKENS, stop=[])
    n = min(len(got), len(expected))
    agreement = float(np.mean(np.array(got[:n]) == np.array(expected[:n])))
    prefix = next((i for i in range(n) if got[i] != expected[i]), n)
    apple_agreement = float(np.mean(np.array(on_apple[:n]) == np.array(expected[:n])))
    print(f"float16 greedy agreement with float32 over {n} tokens: reference "
          f"{agreement:.0%} (identical for the first {prefix}), Apple's interpreter "
          f"{apple_agreement:.0%}; keep = {manifest['keep']}")
    # the program computes in float16 (its logits are not float32's) close to float32
    reference = _transformers_logits(folder)
    assert not np.array_equal(logits, reference)
    scale = float(np.abs(reference).max())
    np.testing.assert_allclose(logits, reference, atol=0.05 * scale)
    # Bound: float16 rounds each op to 11 significant bits, so logits move by ~1e-3 of their
    # scale and a greedy choice flips only where the top two logits are that close; once it
    # flips, the continuations differ. The first tokens, decided by wide margins in this
    # random model, must agree, and most of the 32 must.
    assert prefix >= 4, (got, expected)
    assert agreement >= 0.5, (got, expected)
    assert apple_agreement >= 0.5, (on_apple, expected)
