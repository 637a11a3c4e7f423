"""Mixed precision on Apple's interpreter: the float16 cliffs (tests/torch/precision_cliffs.py)
exported with the precision report's keep set run on Apple's Core AI interpreter and match
torch's float32 eager within the report's budget; the float16-everywhere export does not (the
cliff is real there too)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from coreai_torch import TorchConverter, get_decomp_table, precision_report
from coreai_torch.aimodel import export_aimodel, verify_aimodel
from tests.torch.precision_cliffs import cliffs, numpy_inputs

CLIFFS = cliffs()
# the precision report's default budget: float16 carries 11 bits (eps 9.8e-4), and the
# interpreter's float16 kernels round differently from ours by an ulp here and there
RTOL, ATOL = 1e-2, 1e-2


@pytest.mark.parametrize(("name", "composites"), [
    ("rms_norm", False), ("log_softmax", False), ("attention", False),
    ("layer_norm", True),  # one invoke of a layer_norm composite, exported reduced or kept
])
def test_the_keep_set_exports_and_passes_on_apples_interpreter(name: str, composites: bool,
                                                               tmp_path: Path) -> None:
    model, inputs, *_ = CLIFFS[name]
    converter = TorchConverter(composites=composites)
    ep = torch.export.export(model, inputs).run_decompositions(get_decomp_table(converter))
    program = converter.add_exported_program(ep).to_coreai()
    report = precision_report(program, numpy_inputs(inputs), rtol=RTOL, atol=ATOL)
    assert not report.passed and report.keep

    everywhere = program.to_precision("float16")
    export_aimodel(everywhere, tmp_path / "float16.aimodel")
    broken = verify_aimodel(model, tmp_path / "float16.aimodel", numpy_inputs(inputs),
                            rtol=RTOL, atol=ATOL)
    assert not broken.passed

    mixed = program.to_precision("float16", keep=report.keep)
    export_aimodel(mixed, tmp_path / "mixed.aimodel")
    fixed = verify_aimodel(model, tmp_path / "mixed.aimodel", numpy_inputs(inputs),
                           program=mixed, rtol=RTOL, atol=ATOL)
    assert fixed.passed, str(fixed)
