"""benchmarks/profile_real_size.py on a small model: the profile covers every op, and each
torch call it times computes what our kernel computes on the same operands."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch

from coreai_core import Program
from coreai_core.runtime import Runtime
from coreai_torch import TorchConverter, get_decomp_table

TOOL = Path(__file__).resolve().parents[2] / "benchmarks" / "profile_real_size.py"


def _load_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("profile_real_size", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("profile_real_size", module)
    spec.loader.exec_module(module)
    return module


class Small(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, stride=2, padding=1)
        self.proj = torch.nn.Linear(4 * 5 * 5, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(self.proj(self.conv(x).flatten(1)))


def _program() -> tuple[Program, dict[str, np.ndarray]]:
    torch.manual_seed(0)
    x = torch.randn(2, 3, 9, 9)
    ep = torch.export.export(Small().eval(), (x,)).run_decompositions(get_decomp_table())
    program = TorchConverter(progress=False).add_exported_program(ep).to_coreai()
    program.optimize()
    return program, {program.input_names[0]: x.numpy()}


def test_torch_calls_compute_what_our_kernels_compute() -> None:
    tool = _load_tool()
    program, feeds = _program()
    calls: list[tuple[Any, ...]] = []
    tool._recording_runtime(calls).run(program, feeds)
    assert sorted({c[0] for c in calls}) == ["coreai.batch_matmul", "coreai.conv"]
    runtime, rng = Runtime(), np.random.default_rng(0)
    for key in calls:
        kernel = runtime.kernel_for(key[0])
        run_ours, run_torch = tool._calls(key, rng, kernel)
        ours, theirs = run_ours(), run_torch().numpy()
        assert ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)  # float32 sums


def test_profile_rows_cover_every_op() -> None:
    tool = _load_tool()
    program, feeds = _program()
    rows, shape_rows, module_rows, t_run, t_profiled = tool.profile_rows(program, feeds, 1, 50)
    steps = Runtime().plan(program).steps
    assert sum(r[1] for r in rows) == len(steps)
    assert {r[0] for r in rows} == {s.op.name.removeprefix("coreai.") for s in steps}
    assert abs(sum(r[2] for r in rows) - 1e3 * t_profiled) < 1e-6 * max(1.0, t_profiled)
    matmul_like = [r for r in rows if r[0] in ("batch_matmul", "conv")]
    assert matmul_like and all(r[4] > 0 for r in matmul_like)  # torch timed each
    assert sum(r[2] for r in shape_rows) == sum(r[1] for r in matmul_like)
    assert sum(r[1] for r in module_rows) == len(steps) and t_run > 0
