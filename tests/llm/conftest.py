"""Fixtures of the LLM tests: tiny checkpoints written to temporary folders, exported once
per session (no download: Hugging Face libraries run offline here)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.llm.checkpoints import write_checkpoint

PROMPT = [1, 5, 17, 33, 4, 9, 11, 12]
MAX_CONTEXT = 24


@pytest.fixture(scope="session", autouse=True)
def _offline() -> Iterator[None]:
    old = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    yield
    if old is None:
        os.environ.pop("HF_HUB_OFFLINE", None)
    else:
        os.environ["HF_HUB_OFFLINE"] = old


def transformers_greedy(folder: Path, prompt: list[int], max_new_tokens: int) -> list[int]:
    """The new tokens of ``transformers``' own greedy ``generate()`` on the checkpoint."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True).eval()
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), max_new_tokens=max_new_tokens,
                             do_sample=False)
    return [int(t) for t in out[0, len(prompt):]]


@pytest.fixture(scope="session")
def llama_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_checkpoint(tmp_path_factory.mktemp("llama") / "checkpoint", "llama")


@pytest.fixture(scope="session")
def llama_bundle(llama_checkpoint: Path) -> Any:
    """The llama checkpoint exported once (float32, both runtimes' files)."""
    from coreai_torch import llm

    return llm.export(llama_checkpoint, llama_checkpoint.parent / "bundle",
                      max_context=MAX_CONTEXT, progress=False)
