"""Zoo models (tests/models/zoo.py) through the float16 precision report: the report runs on
real architectures, its output figures are the float16 program's errors, and when the outputs
fail, the keep set it returns makes them pass. Three models also run with a budget tight
enough (1e-3) that the search has to find a keep set in a real graph."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from coreai_core import DType, Program
from coreai_core.text import result_names
from coreai_torch import TorchConverter, get_decomp_table, precision_report
from tests.models.zoo import all_models

MODELS = all_models()
CORPUS = sorted([
    "mlp", "cnn_batchnorm", "transformer_encoder", "lstm", "gru", "unet", "cond", "resnet",
    "convnext", "bert[sdpa]", "gpt2[eager]", "gpt2[sdpa]", "llama[sdpa]",
    "qwen2[eager]", "mistral[sdpa]", "t5_encoder[eager]", "vit[sdpa]", "swin[eager]",
    "clip_text[sdpa]", "clip_vision[eager]", "wav2vec2[eager]",
])
TIGHT = ["gpt2[eager]", "t5_encoder[eager]", "vit[sdpa]"]
# the report's default budget (float16 carries 11 bits), and the tight one
RTOL, ATOL = 1e-2, 1e-2
TIGHT_TOL = 1e-3


def test_the_corpus_has_at_least_twenty_models() -> None:
    assert len(CORPUS) >= 20 and set(CORPUS) <= set(MODELS) and set(TIGHT) <= set(CORPUS)


def _convert(name: str) -> tuple[Program, list[np.ndarray]]:
    model, inputs = MODELS[name]()
    with torch.no_grad():
        ep = torch.export.export(model, inputs).run_decompositions(get_decomp_table())
    program = TorchConverter().add_exported_program(ep).to_coreai()
    program.optimize()
    return program, [t.numpy() for t in inputs]


def _within(got: dict[str, np.ndarray], want: dict[str, np.ndarray], tol: float) -> bool:
    return all(np.all(np.abs(got[k].astype(np.float64) - want[k]) <= tol + tol * np.abs(want[k]))
               for k in want)


@pytest.mark.slow
@pytest.mark.parametrize("name", CORPUS)
def test_precision_report_on_the_corpus(name: str) -> None:
    program, inputs = _convert(name)
    for tol in (RTOL, TIGHT_TOL) if name in TIGHT else (RTOL,):
        report = precision_report(program, inputs, rtol=tol, atol=tol)
        want = program.run(inputs)
        got = program.to_precision("float16").run(inputs)
        assert report.passed == _within(got, want, tol), str(report)
        for out in report.outputs:
            err = np.abs(got[out.name].astype(np.float64) - want[out.name])
            assert out.max_abs_error == pytest.approx(float(err.max()), rel=1e-12)
        graph = program.graphs["main"]
        floats = {n for r, n in result_names(graph).items()
                  if r.owner in graph.ops and r.type.element_type is DType.float32
                  and r is r.owner.results[0]}
        assert {f.name for f in report.ops if f.op != "input"} == floats
        if tol == TIGHT_TOL:  # chosen because they fail there: the search must run
            assert not report.passed and report.checks > 0
        if report.passed:
            assert report.keep == () and report.first_bad is None
            continue
        assert report.keep_passes and report.first_bad is not None, str(report)
        fixed = program.to_precision("float16", keep=report.keep).run(inputs)
        assert _within(fixed, want, tol), str(report)
