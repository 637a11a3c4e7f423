"""find_first_divergence finds a wrong lowering whose result carries no FX name of its own
(issue 36, RecurrentGemma): a lowering that returns one of its operands, e.g. a dropped write
into a slice, used to leave "no divergence" while the output was wrong."""

from __future__ import annotations

import pytest
import torch

from coreai_torch import TorchConverter, find_first_divergence, verify
from coreai_torch.utils import get_operand
from tests.torch.harness import export


class Scan(torch.nn.Module):
    """A linear recurrence written into a preallocated buffer, like RecurrentGemma's RG-LRU
    scan: ``out[:, t] = state`` becomes copy + select_scatter after functionalization."""

    def forward(self, gate: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(x)
        state = torch.zeros_like(x[:, 0])
        for t in range(x.shape[1]):
            state = gate[:, t] * state + x[:, t]
            out[:, t] = state
        return out * 2.0


class SliceWrite(torch.nn.Module):
    def forward(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        y = x * 2.0
        y[:, 1:3] = z
        return y


def _inputs(module: torch.nn.Module) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    if isinstance(module, Scan):
        return torch.rand(2, 5, 3, generator=g), torch.randn(2, 5, 3, generator=g)
    return torch.randn(4, 5, generator=g), torch.randn(4, 2, generator=g)


def _dropping(target: str) -> TorchConverter:
    """A converter whose lowering of ``target`` returns its first operand: the write (or the
    copy) is silently lost and the result carries the operand's FX name."""
    converter = TorchConverter()

    @converter.register_torch_lowering(target, allow_override=True)
    def returns_its_operand(values_map, node, loc):
        return get_operand(values_map, node, 0, loc)

    return converter


@pytest.mark.parametrize("module, target", [
    (SliceWrite(), "aten::slice_scatter.default"),
    (Scan(), "aten::select_scatter.default"),
    (Scan(), "aten::copy.default"),
], ids=["slice_scatter", "select_scatter", "copy"])
def test_a_lowering_that_returns_an_operand_is_found(module: torch.nn.Module,
                                                     target: str) -> None:
    inputs = _inputs(module)
    ep = export(module, inputs)
    program = _dropping(target).add_exported_program(ep).to_coreai()
    assert not verify(module, program, inputs).passed
    report = find_first_divergence(ep, program, inputs)
    first = report.first
    assert first is not None, str(report)
    assert first.target == target, str(report)
    assert "returned the value of its operand" in first.op
    assert f"({target})" in str(report) and "test_divergence_unpaired.py" in str(report)
    before = report.nodes[:report.nodes.index(first)]
    assert before and all(n.passed for n in before)


@pytest.mark.parametrize("module", [SliceWrite(), Scan()], ids=["slice_write", "scan"])
@pytest.mark.parametrize("optimized", [False, True])
def test_a_right_program_shows_no_divergence(module: torch.nn.Module, optimized: bool) -> None:
    """The operand pairing never reports a right program, also once optimize() has folded
    and fused the nodes it guesses for."""
    inputs = _inputs(module)
    ep = export(module, inputs)
    program = TorchConverter().add_exported_program(ep).to_coreai()
    if optimized:
        program.optimize()
    report = find_first_divergence(ep, program, inputs)
    assert report.first is None and report.nodes, str(report)
    copies = [n for n in report.nodes if n.target in {"aten::copy.default",
                                                       "aten::select_scatter.default"}]
    assert copies or optimized  # the raw program's copies are compared too


def test_fused_away_nodes_are_not_blamed() -> None:
    """LayerNorm's decomposition fuses into one op under optimize(): its inner nodes lose
    their values and any pairing guessed for them must not count as a divergence."""
    class Norm(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.fc(x)
            mean = h.mean(-1, keepdim=True)
            centred = h - mean
            return centred * torch.rsqrt((centred * centred).mean(-1, keepdim=True) + 1e-5)

    x = torch.randn(3, 8, generator=torch.Generator().manual_seed(1))
    ep = export(Norm(), (x,))
    program = TorchConverter().add_exported_program(ep).to_coreai()
    program.optimize()
    report = find_first_divergence(ep, program, (x,))
    assert report.first is None and report.nodes, str(report)


def test_a_guess_no_diverging_value_confirms_is_dropped() -> None:
    """A node whose value lost its name (as when a rewrite fuses it into its user) is paired
    with its operand by guess; that guess fails (x is not x + 1) but relu(x + 1) and the
    output are right, so no divergence is reported."""
    class AddRelu(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(x + 1.0)

    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(2))
    ep = export(AddRelu(), (x,))
    program = TorchConverter().add_exported_program(ep).to_coreai()
    (added,) = [v for op in program.graphs["main"].ops for v in op.results if v.name == "add"]
    added.name = None
    report = find_first_divergence(ep, program, (x,))
    assert report.first is None and [n.node for n in report.nodes] == ["relu"], str(report)
