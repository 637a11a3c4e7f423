"""coreai_torch.precision_report on the known float16 cliffs (tests/torch/precision_cliffs.py):
each is found (first bad op and problem), named (source location) and fixed (the keep set makes
the float16 program match torch's float32 eager within the report's budget)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from coreai_core import Program, TensorType
from coreai_core.dialects import coreai
from coreai_torch import TorchConverter, get_decomp_table, precision_report
from coreai_torch.cli import ExitCode, main
from tests.torch.precision_cliffs import Softplus, cliffs, numpy_inputs

CLIFFS = cliffs()
RTOL, ATOL = 1e-2, 1e-2  # the report's defaults: float16 carries 11 bits (eps 9.8e-4)


def _convert(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> Program:
    ep = torch.export.export(model, inputs).run_decompositions(get_decomp_table())
    return TorchConverter().add_exported_program(ep).to_coreai()


def _within(program: Program, model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> bool:
    with torch.no_grad():
        want = model(*inputs).numpy()
    got = next(iter(program.run(numpy_inputs(inputs)).values()))
    return bool(np.all(np.abs(got - want) <= ATOL + RTOL * np.abs(want)))


@pytest.mark.parametrize("name", sorted(CLIFFS))
def test_the_report_finds_names_and_fixes_the_cliff(name: str) -> None:
    model, inputs, op, kind = CLIFFS[name]
    program = _convert(model, inputs)
    assert _within(program, model, inputs)  # float32 is right
    assert not _within(program.to_precision("float16"), model, inputs)  # float16 is not
    report = precision_report(program, numpy_inputs(inputs), "float16", rtol=RTOL, atol=ATOL)
    assert not report.passed
    bad = report.first_bad
    assert bad is not None and (bad.op, bad.kind) == (op, kind), str(report)
    if name.endswith("norm"):  # the op comes from torch's module: named by the module path
        assert bad.location.module_path == "norm"
    elif op != "input":
        assert bad.location.file is not None and bad.location.file.endswith(
            "precision_cliffs.py")
    assert bad.describe() in str(report)
    assert report.keep_passes and report.keep
    fixed = program.to_precision("float16", keep=report.keep)
    assert _within(fixed, model, inputs), str(report)
    again = precision_report(program, numpy_inputs(inputs), keep=report.keep)
    assert again.passed and again.first_bad is None
    # minimised: dropping any one kept op breaks the outputs again
    for dropped in report.keep:
        rest = [k for k in report.keep if k != dropped]
        assert not _within(program.to_precision("float16", keep=rest), model, inputs), dropped


class LogSumExp(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.logsumexp(x, dim=1) + torch.log_softmax(x, dim=1).sum(dim=1)


def test_overflow_free_formulations_pass_with_nothing_kept() -> None:
    """torch.logsumexp and log_softmax lower to max-subtracted forms (and one log_softmax op
    that computes in float32 internally): the same inputs as the cliffs pass."""
    x = torch.cat([torch.full((4, 1), 50.0), 8 + 4 * torch.rand(4, 31)], dim=1)
    program = _convert(LogSumExp(), (x,))
    report = precision_report(program, [x.numpy()])
    assert report.passed and report.keep == () and report.first_bad is None, str(report)
    assert "passed" in str(report).splitlines()[0]


def test_bfloat16_has_float32_range() -> None:
    model, inputs, *_ = CLIFFS["softplus"]
    report = precision_report(_convert(model, inputs), numpy_inputs(inputs), "bfloat16")
    assert report.passed, str(report)
    assert report.precision == "bfloat16"


def test_report_table_lists_figures_per_op() -> None:
    model, inputs, *_ = CLIFFS["softplus"]
    report = precision_report(_convert(model, inputs), numpy_inputs(inputs))
    text = str(report)
    assert text.splitlines()[0].startswith("float16 precision report (rtol=0.01, atol=0.01): "
                                           "FAILED")
    assert f"keep in float32 ({len(report.keep)} ops" in text
    for figure in report.ops:
        assert figure.name in text
    exp = next(f for f in report.ops if f.op == "coreai.exp")
    assert exp.kind == "overflow" and exp.max_abs_error == float("inf")
    assert exp.elements == int((np.exp(inputs[0].numpy().astype(np.float64)) > 65504).sum())


def test_state_of_the_program_is_left_alone() -> None:
    class Counter(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("n", torch.zeros(3))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.n.add_(torch.exp(x))
            return self.n * 2

    x = torch.full((3,), 12.0)
    program = _convert(Counter(), (x,))
    report = precision_report(program, [x.numpy()])
    assert not report.passed and report.first_bad is not None
    assert report.first_bad.op == "coreai.exp"
    assert program.state["n"].tolist() == [0, 0, 0]


def test_cli_verify_with_precision(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    x = 10 + 10 * torch.rand(4, 32)
    torch.export.save(torch.export.export(Softplus(), (x,)), str(tmp_path / "cliff.pt2"))
    assert main(["verify", str(tmp_path / "cliff.pt2"), "--precision", "float16"]) \
        == ExitCode.CHECK_FAILED
    out = capsys.readouterr().out
    assert "float16 precision report" in out and "first bad op" in out and "coreai.exp" in out
    assert "keep=" in out
    ok = torch.rand(4, 32)
    torch.export.save(torch.export.export(Softplus(), (ok,)), str(tmp_path / "ok.pt2"))
    assert main(["verify", str(tmp_path / "ok.pt2"), "--precision", "float16"]) == ExitCode.OK
    assert "float16 precision report" in capsys.readouterr().out


def test_keep_names_are_qualified_in_a_program_with_several_entrypoints() -> None:
    p = Program()
    for name in ("prefill", "decode"):
        with p.graph(name, inputs={"x": TensorType((3, 4), "float32")}) as g:
            g.outputs({"y": coreai.log1p(coreai.exp(g["x"]))})
    x = np.full((3, 4), 12.0, np.float32)
    report = precision_report(p, [x], entrypoint="decode")
    assert report.keep == ("decode:%0", "decode:%1"), str(report)
    assert report.first_bad is not None and report.first_bad.name == "%0"
    fixed = p.to_precision("float16", keep=report.keep)
    np.testing.assert_allclose(fixed.run({"x": x}, entrypoint="decode")["y"],
                               p.run({"x": x}, entrypoint="decode")["y"], rtol=1e-6)
    assert np.isinf(fixed.run({"x": x}, entrypoint="prefill")["y"]).all()


def test_a_composite_call_is_reduced_and_kept_as_one_op() -> None:
    """With composites=True, LayerNorm is one ``invoke`` of a ``layer_norm`` composite: the
    report names the call, and keeping it runs the float32 composite."""
    model, inputs, *_ = CLIFFS["layer_norm"]
    converter = TorchConverter(composites=True)
    ep = torch.export.export(model, inputs).run_decompositions(get_decomp_table(converter))
    program = converter.add_exported_program(ep).to_coreai()
    assert "layer_norm" in program.composites
    assert not _within(program.to_precision("float16"), model, inputs)
    report = precision_report(program, numpy_inputs(inputs))
    assert report.first_bad is not None and report.first_bad.op == "coreai.invoke"
    assert report.first_bad.location.module_path == "norm"
    assert _within(program.to_precision("float16", keep=report.keep), model, inputs)
