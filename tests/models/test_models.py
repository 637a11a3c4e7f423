"""Real models end to end: export -> decompose -> convert -> optimize -> run == torch eager."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from coreai_torch import TorchConverter, find_first_divergence, get_decomp_table, verify
from tests.models.zoo import all_models

MODELS = all_models()
# float32 tolerances of the model tests, as the issue specifies.
RTOL, ATOL = 1e-3, 1e-4


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_matches_torch(name: str) -> None:
    model, inputs = MODELS[name]()
    with torch.no_grad():
        ep = torch.export.export(model, inputs).run_decompositions(get_decomp_table())
    program = TorchConverter().add_exported_program(ep).to_coreai()
    program.optimize()
    program.verify()
    report = verify(model, program, inputs, rtol=RTOL, atol=ATOL)
    if not report.passed:
        divergence = find_first_divergence(ep, program, inputs, rtol=RTOL, atol=ATOL)
        pytest.fail(f"{name}:\n{report}\n{divergence}")
    for out in report.outputs:
        assert np.isfinite(out.max_abs)
