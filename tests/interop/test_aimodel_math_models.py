"""Models that needed the elementary-function and FFT expansions to export (softplus, Mamba,
Mamba-2: log1p; FNet: FFT and complex numbers), exported and verified on Apple's interpreter
against torch eager and coreai_core's runtime."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers
from torch import nn

from coreai_torch import TorchConverter, get_decomp_table
from coreai_torch.aimodel import export_aimodel, verify_aimodel
from tests.models.builders import Built, hf_model, token_ids
from tests.models.corpus.hf_text import ENCODERS, VOCAB

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # configs only: nothing may be downloaded
# the model tests' float32 tolerances (tests/models/test_models.py)
RTOL, ATOL = 1e-3, 1e-4


def _softplus() -> Built:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Softplus(beta=2.0, threshold=15.0),
                          nn.Linear(16, 4), nn.Softplus())
    x = torch.linspace(-40, 40, 5 * 8).reshape(5, 8)  # both sides of the thresholds
    return model.eval(), (x,)


def _mamba() -> Built:
    cfg = transformers.MambaConfig(vocab_size=VOCAB, hidden_size=32, state_size=8,
                                   num_hidden_layers=2, expand=2, conv_kernel=4,
                                   use_cache=False)
    return hf_model(transformers.MambaModel, cfg, (token_ids(VOCAB),), ("input_ids",))


def _mamba2() -> Built:
    cfg = transformers.Mamba2Config(vocab_size=VOCAB, hidden_size=32, state_size=8,
                                    num_hidden_layers=2, expand=2, conv_kernel=4, num_heads=4,
                                    head_dim=16, n_groups=1, chunk_size=4, use_cache=False)
    return hf_model(transformers.Mamba2Model, cfg, (token_ids(VOCAB),), ("input_ids",))


MODELS: dict[str, tuple[Callable[[], Built], str]] = {
    "softplus": (_softplus, "coreai.log1p"),
    "mamba": (_mamba, "coreai.log1p"),
    "mamba2": (_mamba2, "coreai.log1p"),
    "fnet": (ENCODERS["fnet"], "coreai.fft_c2c"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_exports_and_matches_torch(name: str, tmp_path: Path) -> None:
    build, needed = MODELS[name]
    model, inputs = build()
    with torch.no_grad():
        ep = torch.export.export(model, inputs).run_decompositions(get_decomp_table())
    program = TorchConverter().add_exported_program(ep).to_coreai()
    program.optimize()
    ops: set[Any] = {op.name for g in program.graphs.values() for op in g.walk()}
    assert needed in ops, f"{name} no longer needs {needed}: the test would prove nothing"
    path = tmp_path / "model.aimodel"
    export_aimodel(program, path)
    report = verify_aimodel(model, path, inputs, program=program, rtol=RTOL, atol=ATOL)
    assert report.passed, f"{name}:\n{report}"
