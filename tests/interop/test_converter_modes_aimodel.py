"""``TorchConverter(mode=...)`` in the ``.aimodel``: DEBUG's op ids, module paths and stack
frames become the Core AI ops' locations, RELEASE's op ids only; both run alike on Apple's
interpreter, and RELEASE's asset is smaller."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from coreai_torch import TorchConverter, get_decomp_table
from coreai_torch.aimodel import build_module, export_aimodel, run_aimodel

THIS_FILE = Path(__file__).name


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(6, 16), torch.nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x))).softmax(-1)


def _program(mode: TorchConverter.Mode) -> object:
    torch.manual_seed(0)
    ep = torch.export.export(Net(), (torch.randn(5, 6),)).run_decompositions(get_decomp_table())
    return TorchConverter(mode=mode).add_exported_program(ep).to_coreai()


def _asm(program: object) -> str:
    return build_module(program)._mlir_module.operation.get_asm(enable_debug_info=True)  # type: ignore[arg-type]


def test_debug_locations_reach_the_core_ai_ops() -> None:
    debug = _asm(_program(TorchConverter.Mode.DEBUG))
    release = _asm(_program(TorchConverter.Mode.RELEASE))
    for asm in (debug, release):
        assert 'coreai_torch.op_id = "relu"' in asm and 'coreai_torch.op_id = "softmax"' in asm
    assert f'{THIS_FILE}":' in debug and 'coreai_torch.module = "fc1"' in debug
    assert "torch/nn/modules/linear.py" in debug  # the Linear's own frame, under the user's
    assert THIS_FILE not in release and "coreai_torch.module" not in release


def test_both_modes_run_alike_on_apples_interpreter_and_release_is_smaller(
        tmp_path: Path) -> None:
    x = np.random.default_rng(4).standard_normal((5, 6), dtype=np.float32)
    results, sizes = {}, {}
    for mode in TorchConverter.Mode:
        path = tmp_path / f"{mode.value}.aimodel"
        export_aimodel(_program(mode), path)  # type: ignore[arg-type]
        results[mode] = run_aimodel(path, {"x": x})["softmax"]
        sizes[mode] = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    np.testing.assert_array_equal(results[TorchConverter.Mode.DEBUG],
                                  results[TorchConverter.Mode.RELEASE])
    torch.manual_seed(0)
    want = Net()(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(results[TorchConverter.Mode.DEBUG], want, rtol=1e-5, atol=1e-6)
    assert sizes[TorchConverter.Mode.RELEASE] < sizes[TorchConverter.Mode.DEBUG], sizes
