"""verify(), the first-divergence and NaN finders, pictures (the CLI: test_cli.py)."""

from __future__ import annotations

import pytest
import torch

from coreai_core import Program, TensorType, parse
from coreai_core.dialects import coreai
from coreai_torch import (
    TorchConverter,
    find_first_divergence,
    find_first_nonfinite,
    verify,
)
from coreai_torch.examples import example
from coreai_torch.utils import get_operand
from tests.torch.harness import export


class Small(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 8)
        self.fc2 = torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)).sigmoid())


def _setup():
    torch.manual_seed(0)
    model = Small().eval()
    x = torch.randn(4, 6)
    return model, x, export(model, (x,))


def test_verify_passes_and_reports_errors() -> None:
    model, x, ep = _setup()
    program = TorchConverter().add_exported_program(ep).to_coreai()
    report = verify(model, program, (x,))
    assert report.passed and len(report.outputs) == 1
    assert report.outputs[0].max_abs < 1e-5
    assert "PASS" in str(report)


def _buggy_converter() -> TorchConverter:
    converter = TorchConverter()

    @converter.register_torch_lowering("aten::sigmoid.default", allow_override=True)
    def wrong_sigmoid(values_map, node, loc):  # deliberately off by 0.1
        x = get_operand(values_map, node, 0, loc)
        return coreai.broadcasting_add(coreai.sigmoid(x, loc=loc), 0.1, loc=loc)

    return converter


@pytest.mark.parametrize("optimized", [False, True])
def test_first_divergence_points_at_the_wrong_lowering(optimized: bool) -> None:
    model, x, ep = _setup()
    program = _buggy_converter().add_exported_program(ep).to_coreai()
    if optimized:
        program.optimize()
    assert not verify(model, program, (x,)).passed
    report = find_first_divergence(ep, program, (x,))
    first = report.first
    assert first is not None and first.node == "sigmoid"
    assert first.target == "aten::sigmoid.default"
    assert first.source is not None and "test_tools.py" in first.source
    assert abs(first.max_abs - 0.1) < 1e-5
    assert "first divergence at FX node 'sigmoid'" in str(report)
    passed_before = [n for n in report.nodes[:report.nodes.index(first)]]
    assert all(n.passed for n in passed_before) and passed_before


class Floor(torch.nn.Module):
    def forward(self, x):
        return torch.floor(x)


@pytest.mark.parametrize("dtype", ["int64", "bool"])
def test_verify_fails_on_a_wrong_dtype_kind_even_when_values_agree(dtype: str) -> None:
    # the converter rejects a lowering with the wrong result dtype, so build the program
    program = Program()
    with program.graph("main", inputs={"x": TensorType((4,), "float32")}) as g:
        g.outputs({"y": coreai.cast(coreai.floor(g["x"]), dtype)})
    x = torch.tensor([0.0, 1.0, 1.5, 0.25])  # floor gives 0 or 1: exact in int64 and bool
    report = verify(Floor(), program, (x,))
    assert not report.passed
    (out,) = report.outputs
    assert out.max_abs == 0.0
    kind = "integer" if dtype == "int64" else "bool"
    assert out.problem == f"dtype {dtype} ({kind}) != torch float32 (float)"
    assert out.problem in str(report)


def test_first_divergence_says_when_nothing_could_be_compared() -> None:
    _, x, ep = _setup()
    program = TorchConverter().add_exported_program(ep).to_coreai()
    report = find_first_divergence(ep, parse(program.to_text(full=True)), (x,))  # no FX names
    assert report.nodes == [] and report.first is None
    assert str(report).startswith("compared nothing, so no divergence can be reported")
    assert "parsed or loaded" in str(report)
    other = export(Floor(), (x,))  # an exported program `program` was not converted from
    report = find_first_divergence(other, program, (x,))
    assert report.nodes == [] and report.runtime_named > 0
    assert str(report).startswith("compared nothing, so no divergence can be reported")
    assert "was the program converted from this exported program" in str(report)


def test_divergence_plot(tmp_path) -> None:
    _, x, ep = _setup()
    program = _buggy_converter().add_exported_program(ep).to_coreai()
    path = tmp_path / "errors.png"
    find_first_divergence(ep, program, (x,)).plot(str(path))
    assert path.stat().st_size > 1000


def test_nonfinite_finder() -> None:
    class Log(torch.nn.Module):
        def forward(self, x):
            return torch.log(x - 1.0).exp() + 1

    x = torch.tensor([0.5, 2.0, 3.0])
    ep = export(Log(), (x,))
    program = TorchConverter().add_exported_program(ep).to_coreai()
    found = find_first_nonfinite(program, (x,))
    assert found is not None and found.op == "coreai.log" and found.fx_node == "log"
    assert found.count == 1
    assert find_first_nonfinite(program, (torch.tensor([2.0, 3.0, 4.0]),)) is None


def test_pictures() -> None:
    model, inputs = example("convnet")
    program = TorchConverter().add_pytorch_module(model, args=inputs).to_coreai()
    dot = program.to_dot()
    assert dot.startswith("digraph coreai {") and "conv" in dot and "tensor<2x10xf32>" in dot
    collapsed = program.to_dot(collapse=1)
    assert 'label="features (' in collapsed and len(collapsed) < len(dot)
    mermaid = program.to_mermaid(collapse=1)
    assert mermaid.startswith("flowchart TD") and "features (" in mermaid


def test_fx_names_survive_optimization() -> None:
    class Norm(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = torch.nn.LayerNorm(8)  # weight 1 and bias 0: x*1 + 0 is canonicalized

        def forward(self, x):
            return self.norm(x).relu()

    x = torch.randn(3, 8)
    ep = export(Norm(), (x,))
    program = TorchConverter().add_exported_program(ep).to_coreai()
    before = {n.node for n in find_first_divergence(ep, program, (x,)).nodes}
    program.optimize()
    after = {n.node for n in find_first_divergence(ep, program, (x,)).nodes}
    assert "native_layer_norm#0" in before
    assert "native_layer_norm#0" in after and "relu" in after


def test_mermaid_escapes_angle_brackets() -> None:
    _, _, ep = _setup()
    text = TorchConverter().add_exported_program(ep).to_coreai().to_mermaid()
    assert "tensor&lt;4x6xf32&gt;" in text and "tensor<" not in text
