"""Zoo models (tests/models/zoo.py) exported to .aimodel, run on Apple's interpreter and
compared with torch eager and with coreai_core's runtime; the rest are refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from coreai_torch import TorchConverter, get_decomp_table
from coreai_torch.aimodel import export_aimodel, verify_aimodel
from coreai_torch.errors import UnexportableOpsError
from tests.models.zoo import all_models

MODELS = all_models()
# the model tests' float32 tolerances (tests/models/test_models.py)
RTOL, ATOL = 1e-3, 1e-4
# Models with ops that have no exact Core AI form, and those ops (docs/coreai-interop.md).
REFUSED: dict[str, set[str]] = {}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODELS))
def test_zoo_model_exports_and_matches_torch(name: str, tmp_path: Path) -> None:
    model, inputs = MODELS[name]()
    with torch.no_grad():
        ep = torch.export.export(model, inputs).run_decompositions(get_decomp_table())
    program = TorchConverter().add_exported_program(ep).to_coreai()
    program.optimize()
    path = tmp_path / "model.aimodel"
    if name in REFUSED:
        with pytest.raises(UnexportableOpsError) as info:
            export_aimodel(program, path)
        assert {op.op for op in info.value.ops} == REFUSED[name]
        assert not path.exists()
        return
    export_aimodel(program, path)
    report = verify_aimodel(model, path, inputs, program=program, rtol=RTOL, atol=ATOL)
    assert report.passed, f"{name}:\n{report}"
