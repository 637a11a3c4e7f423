"""bfloat16 programs export: the .aimodel keeps bfloat16 tensors (Core AI's ``bf16``) and runs
on Apple's interpreter, matching coreai_core's runtime and torch eager."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coreai_core import DType, Program
from coreai_torch import TorchConverter, get_decomp_table
from coreai_torch.aimodel import export_aimodel, run_aimodel
from tests.models.zoo import all_models

BF16_EPS = float(ml_dtypes.finfo(ml_dtypes.bfloat16).eps)  # 2**-7


class Block(torch.nn.Module):
    """Ops whose bfloat16 results both runtimes round: matmul, gelu, layer norm, softmax."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(width, width)
        self.norm = torch.nn.LayerNorm(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(torch.nn.functional.gelu(self.proj(x)) + x)
        return torch.softmax(h, dim=-1) * h


def _program(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> Program:
    ep = torch.export.export(model, inputs).run_decompositions(get_decomp_table())
    program = TorchConverter().add_exported_program(ep).to_coreai()
    program.optimize()
    return program


def _close(got: np.ndarray, want: np.ndarray, ulps: float) -> bool:
    """Within ``ulps`` bfloat16 epsilons of the output's scale (max |want|)."""
    g, w = got.astype(np.float32), want.astype(np.float32)
    return bool(np.all(np.abs(g - w) <= ulps * BF16_EPS * max(1.0, float(np.abs(w).max()))))


@settings(max_examples=4, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.sampled_from([1, 7, 47]), width=st.sampled_from([1, 5, 16]))
def test_bfloat16_block_exports_and_matches(rows: int, width: int, tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = Block(width).eval().to(torch.bfloat16)
    x = torch.randn(rows, width).to(torch.bfloat16)
    program = _program(model, (x,))
    graph = program.graphs["main"]
    assert graph.inputs["x"].type.element_type is DType.bfloat16
    path = export_aimodel(program, tmp_path / f"block_{rows}_{width}.aimodel")
    feed = {"x": x.float().numpy().astype(ml_dtypes.bfloat16)}
    got = run_aimodel(path, feed)
    ours = program.run(feed)
    with torch.no_grad():
        want = model(x).float().numpy()
    for name in ours:
        assert got[name].dtype == ml_dtypes.bfloat16
        # each op of either runtime rounds to bfloat16, but they fuse and sum in other orders:
        # a few epsilons of the output's scale apart (torch's own CPU bf16 error is of that size)
        assert _close(got[name], ours[name], 4), name
        assert _close(got[name], want, 4), name


@pytest.mark.slow
def test_bfloat16_llama_exports_and_matches(tmp_path: Path) -> None:
    model, (ids,) = all_models()["llama[sdpa]"]()
    model = model.to(torch.bfloat16)
    program = _program(model, (ids,))
    path = export_aimodel(program, tmp_path / "llama_bf16.aimodel")
    feed = {program.input_names[0]: ids.numpy()}
    got, ours = run_aimodel(path, feed), program.run(feed)
    with torch.no_grad():
        want = model(ids).float().numpy()
    for name in ours:
        # two layers of bf16 attention and MLPs: errors of single ops compound (measured
        # about 1.5 epsilons; torch's own bf16 CPU result is as far from float32)
        assert _close(got[name], ours[name], 8), name
        assert _close(got[name], want, 8), name
