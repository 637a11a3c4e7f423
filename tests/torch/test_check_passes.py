"""Translation validation on converted torch models: find_first_bad_rewrite and the CLI."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
import torch

from coreai_core import Operation, Value
from coreai_core.optimizer import CanonicalizePass, Rewriter
from coreai_torch import TorchConverter, find_first_bad_rewrite, get_decomp_table, verify
from coreai_torch.cli import main


class ConvBnNet(torch.nn.Module):
    """conv + batch norm + relu, then a linear head with tanh: what fold_affine folds."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn(self.conv(x))).mean((2, 3))
        return torch.tanh(self.fc(y))


def model_and_input() -> tuple[ConvBnNet, torch.Tensor]:
    torch.manual_seed(0)
    model = ConvBnNet().eval()
    bn = model.bn
    assert bn.running_mean is not None and bn.running_var is not None
    with torch.no_grad():  # batch norm statistics that are not the identity
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.uniform_(0.5, 2)
        bn.bias.uniform_(-1, 1)
    return model, torch.randn(2, 3, 10, 10)


def test_the_default_pipeline_passes_the_check_on_a_converted_model() -> None:
    model, x = model_and_input()
    ep = torch.export.export(model, (x,)).run_decompositions(get_decomp_table())
    program = TorchConverter().add_exported_program(ep).to_coreai()
    before = str(program)
    report = find_first_bad_rewrite(program, (x,))
    assert report.passed, str(report)
    assert any(c.changed and c.pass_name == "fold_affine" for c in report.checks)
    assert str(program) == before  # checked on a copy
    assert find_first_bad_rewrite(program).passed  # random inputs
    optimized = program.optimize(check={program.input_names[0]: x.numpy()})
    assert optimized.validation is not None and optimized.validation.passed
    assert optimized.ops_after < optimized.ops_before
    assert verify(model, program, (x,)).passed


def wrong_tanh(original: object) -> object:
    """CanonicalizePass.visit, plus a wrong rule: tanh(v) -> sigmoid(v)."""

    def visit(self: CanonicalizePass, op: Operation, rw: Rewriter) -> Sequence[Value] | None:
        if op.name == "coreai.tanh":
            return rw.replacement(op, "coreai.sigmoid", op.operands, {})
        return original(self, op, rw)  # type: ignore[operator]

    return visit


def test_a_wrong_rule_in_a_default_pass_is_found_in_a_converted_model(
        monkeypatch: pytest.MonkeyPatch) -> None:
    model, x = model_and_input()
    ep = torch.export.export(model, (x,)).run_decompositions(get_decomp_table())
    program = TorchConverter().add_exported_program(ep).to_coreai()
    tanh = next(op for op in program.graphs["main"].ops if op.name == "coreai.tanh")
    monkeypatch.setattr(CanonicalizePass, "visit", wrong_tanh(CanonicalizePass.visit))
    report = find_first_bad_rewrite(program, (x,))
    culprit = report.culprit
    assert culprit is not None and culprit.pass_name == "canonicalize"
    assert culprit.op == "coreai.tanh" and culprit.location == str(tanh.location)
    assert "test_check_passes.py" in str(culprit.location)
    with torch.no_grad():  # the model with the wrong rule applied, in torch
        head = model.fc(torch.relu(model.bn(model.conv(x))).mean((2, 3)))
        error = (torch.sigmoid(head) - torch.tanh(head)).abs().max().item()
    np.testing.assert_allclose(culprit.output.max_abs, error, rtol=1e-4)


def test_cli_verify_check_passes(tmp_path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    model, x = model_and_input()
    pt2 = tmp_path / "model.pt2"
    torch.export.save(torch.export.export(model, (x,)), str(pt2))
    assert main(["verify", str(pt2), "--check-passes"]) == 0
    out = capsys.readouterr().out
    assert "optimizer check on the given inputs" in out and "fold_affine" in out
    assert out.count("PASS") == 2  # the pass check, then torch
    assert main(["convert", str(pt2), "-o", str(tmp_path / "prog")]) == 0
    assert main(["verify", str(pt2), str(tmp_path / "prog"), "--check-passes"]) == 2
    assert "drop the program folder" in capsys.readouterr().err
    monkeypatch.setattr(CanonicalizePass, "visit", wrong_tanh(CanonicalizePass.visit))
    assert main(["verify", str(pt2), "--check-passes"]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "of 'canonicalize'" in out and "on coreai.tanh at loc(" in out
    assert "test_check_passes.py" in out
