"""What coreai-opt 0.4.0 added, converted and checked like every finalized model
(``test_coreai_opt.check_finalized``: our runtime against torch, the weights still compressed,
Apple's interpreter against our runtime): sparse + palettized weights, 8-bit tables exported as
int8 / fp8 weights, joint P4A8 / P8A8, ``ExportBackend.Torch``, ``prepare(state_dict=)`` and
``cast_to_16_bit_precision(calibration_data=)``.

With coreai-opt 0.3.0 (CI's second run) these features do not exist: the module is skipped,
saying so.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.interop.coreai_opt_cases import COMPRESSIONS_04, HAS_04, compressed_04, coreai_opt, model
from tests.interop.test_coreai_opt import _convert, check_finalized

pytestmark = pytest.mark.skipif(
    not HAS_04, reason=f"new in coreai-opt 0.4.0; installed: {coreai_opt.__version__}")

QUICK_04 = [("mlp", c) for c in COMPRESSIONS_04]
SLOW_04 = [("block", c) for c in COMPRESSIONS_04]


def _run_case(model_name: str, compression: str, tmp_path: Path) -> None:
    m, inputs = compressed_04(model_name, compression)
    _, must_have, must_lack = COMPRESSIONS_04[compression]
    check_finalized(m, inputs, compression, tmp_path, must_have, frozenset(must_lack))


@pytest.mark.parametrize(("model_name", "compression"), QUICK_04, ids=lambda v: v)
def test_coreai_opt_04_compression_converts_and_runs(model_name: str, compression: str,
                                                     tmp_path: Path) -> None:
    _run_case(model_name, compression, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize(("model_name", "compression"), SLOW_04, ids=lambda v: v)
def test_coreai_opt_04_compression_converts_and_runs_slow(model_name: str, compression: str,
                                                          tmp_path: Path) -> None:
    _run_case(model_name, compression, tmp_path)


def test_prepare_with_a_saved_state_dict_gives_the_same_program() -> None:
    """``prepare(state_dict=...)`` restores a prepared palettizer's centroids instead of
    clustering again; the finalized model converts to the program of the original, and both
    compute alike."""
    from coreai_opt import ExportBackend
    from coreai_opt.palettization import KMeansPalettizer, KMeansPalettizerConfig

    def palettizer() -> tuple[KMeansPalettizer, tuple[torch.Tensor, ...]]:
        m, inputs = model("mlp")
        return KMeansPalettizer(m, KMeansPalettizerConfig.presets.w4(group_size=16)), inputs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first, inputs = palettizer()
        state = first.prepare(example_inputs=inputs).state_dict()
        original = first.finalize(backend=ExportBackend.CoreAI)
        second, _ = palettizer()
        with torch.no_grad():  # other weights: the centroids must come from the state dict
            for p in second._model.parameters():  # type: ignore[attr-defined]
                p.mul_(0.5)
        second.prepare(example_inputs=inputs, state_dict=state)
        restored = second.finalize(backend=ExportBackend.CoreAI)
    a = _convert(torch.export.export(original, inputs))
    b = _convert(torch.export.export(restored, inputs))
    assert a == b  # the same ops and the same (compressed) weights
    feed = {a.input_names[0]: inputs[0].numpy()}  # type: ignore[attr-defined]
    np.testing.assert_array_equal(a.run(feed)["linear_1"], b.run(feed)["linear_1"])  # type: ignore[attr-defined]
    np.testing.assert_allclose(a.run(feed)["linear_1"], original(*inputs).detach().numpy(),  # type: ignore[attr-defined]
                               rtol=1e-5, atol=1e-6)


class Overflowing(torch.nn.Module):
    """An activation beyond float16's range (65504) between two ordinary ones."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        big = torch.exp(self.fc(x) + 12.0)  # about e^12 = 1.6e5 and more
        return torch.log(big) - 12.0


def test_cast_to_16_bit_precision_with_calibration_data_keeps_overflowing_ops_float32() -> None:
    """With ``calibration_data``, coreai-opt finds the ops whose activations overflow float16
    and keeps them float32; the cast program converts and computes like torch (where a plain
    cast gives inf)."""
    from coreai_opt.casting import cast_to_16_bit_precision

    torch.manual_seed(0)
    m = Overflowing().eval()
    x = torch.randn(3, 8)
    samples = [torch.randn(3, 8, generator=torch.Generator().manual_seed(i)) for i in range(3)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kept = cast_to_16_bit_precision(torch.export.export(m, (x,)), calibration_data=samples)
        plain = cast_to_16_bit_precision(torch.export.export(m, (x,)))
    assert not np.isfinite(plain.module()(x.half()).detach().numpy()).all()  # the hazard
    program = _convert(kept)
    dtype = program.graphs["main"].inputs[program.input_names[0]].type.element_type  # type: ignore[attr-defined]
    feed = x.half() if str(dtype) == "float16" else x
    got = next(iter(program.run({program.input_names[0]: feed.numpy()}).values()))  # type: ignore[attr-defined]
    want = kept.module()(feed).detach().numpy()
    assert np.isfinite(got).all() and got.dtype == want.dtype
    # float16 rounding of the ops around the float32 ones: a few float16 ulps of the output
    np.testing.assert_allclose(got, want, rtol=4e-3, atol=4e-3 * float(np.abs(want).max()))
    assert any(str(t.element_type) == "float32"
               for g in program.graphs.values() for op in g.ops  # type: ignore[attr-defined]
               for t in (r.type for r in op.results) if op.name == "coreai.exp")
