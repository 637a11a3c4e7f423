"""The comparator finds the first op that computes differently from torch; the inspectors
return torch's, the runtime's and Apple's interpreter's values."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest
import torch

from coreai_core.dialects import coreai
from coreai_torch import TorchConverter
from coreai_torch._utils import get_operand
from coreai_torch.debugging.comparator import create_comparator_for_programs
from coreai_torch.debugging.inspector import (
    CachingInspector,
    CoreAIInspector,
    MissingValue,
    RuntimeInspector,
    TorchFXInspector,
)
from coreai_torch.debugging.intermediates import compare_program_intermediates
from coreai_torch.verify import find_first_divergence, torch_intermediates
from tests.debugging.models import Mlp, converted, exported


def wrong_relu_converter() -> TorchConverter:
    """A converter whose relu lowering is wrong for negative inputs (it returns |x|)."""
    converter = TorchConverter()

    @converter.register_torch_lowering("aten::relu.default", allow_override=True)
    def lower_relu(values_map, node, loc):  # type: ignore[no-untyped-def]
        return coreai.abs_(get_operand(values_map, node, 0, loc), loc=loc)

    return converter


@pytest.mark.parametrize("rows", [1, 47])
def test_comparator_names_the_first_divergent_node(rows: int) -> None:
    torch.manual_seed(rows)
    x = torch.randn(rows, 5)
    ep = exported(Mlp(), x)
    program = converted(ep, wrong_relu_converter())
    comparator = asyncio.run(create_comparator_for_programs(ep, program, "main"))
    result = asyncio.run(comparator.compare_with_tolerance({"x": x}, rtol=1e-5, atol=1e-5))
    first = find_first_divergence(ep, program, {"x": x}, rtol=1e-5, atol=1e-5).first
    assert first is not None and first.node == "relu"
    source, target = result.failed_nodes[0]
    assert source.op_id == "relu"
    assert program.graphs["main"].ops[target.op_id].name == "coreai.abs"
    # a correct conversion passes everywhere it is compared
    good = asyncio.run(create_comparator_for_programs(ep, converted(ep), "main"))
    ok = asyncio.run(good.compare_with_tolerance({"x": x}, rtol=1e-5, atol=1e-5))
    assert ok.failed_nodes == [] and ok.compared >= 4 and ok.pass_count == ok.compared


def test_intermediates_report_matches_find_first_divergence() -> None:
    x = torch.randn(3, 5)
    ep = exported(Mlp(), x)
    program = converted(ep, wrong_relu_converter())
    report = asyncio.run(compare_program_intermediates(ep, program, {"x": x}, rtol=1e-5,
                                                       atol=1e-5))
    divergence = find_first_divergence(ep, program, {"x": x}, rtol=1e-5, atol=1e-5)
    assert [c.torch_node_name for c in report.failures] == \
        [n.node for n in divergence.nodes if not n.passed]


def test_runtime_and_torch_inspectors_agree_with_torch() -> None:
    x = torch.randn(47, 5)
    ep = exported(Mlp(), x)
    program = converted(ep)
    want = torch_intermediates(ep, (x,))
    torch_values = asyncio.run(TorchFXInspector(ep).get_intermediates_for_ops(["relu"], (x,)))
    np.testing.assert_array_equal(torch_values["relu"][0], want["relu"].numpy())
    ids = [i for i, op in enumerate(program.graphs["main"].ops)
           if any(r.name == "relu" for r in op.results)]
    cached = CachingInspector(RuntimeInspector(program))
    got = asyncio.run(cached.get_intermediates_for_ops(ids, {"x": x}))
    np.testing.assert_allclose(got[ids[0]][0], want["relu"].numpy(), rtol=1e-5, atol=1e-6)
    assert asyncio.run(cached.get_intermediates_for_ops(ids, {"x": x})) == got


def test_deployed_model_intermediates_on_apples_interpreter(tmp_path: Path) -> None:
    pytest.importorskip("coreai.runtime")
    x = torch.randn(2, 5)
    program = converted(exported(Mlp(), x))
    ops = program.graphs["main"].ops
    ids = [i for i, op in enumerate(ops) if op.name != "coreai.constant"]
    runtime = asyncio.run(RuntimeInspector(program).get_intermediates_for_ops(ids, {"x": x}))
    # the program re-exported with the requested values as extra outputs, on Apple's side
    apple = asyncio.run(CoreAIInspector(program).get_intermediates_for_ops(ids, {"x": x}))
    for i in ids:
        np.testing.assert_allclose(apple[i][0], runtime[i][0], rtol=1e-5, atol=1e-6,
                                   err_msg=f"op {i} {ops[i].name}")


def test_apples_model_object_on_linux_says_why_a_value_is_missing(tmp_path: Path) -> None:
    pytest.importorskip("coreai.runtime")
    from coreai_torch.aimodel import export_aimodel

    x = torch.randn(2, 5)
    program = converted(exported(Mlp(), x))
    export_aimodel(program, tmp_path / "m.aimodel")
    # given the asset's path, the inspector compiles it with debug info and loads it
    inspector = CoreAIInspector(tmp_path / "m.aimodel")
    ids = list(range(32))  # Apple's "coreai" op ids of the compiled module
    got = asyncio.run(inspector.get_intermediates_for_ops(ids, {"x": x.numpy()}))
    assert inspector.last_outputs is not None
    np.testing.assert_allclose(next(iter(inspector.last_outputs.values())),
                               next(iter(program.run({"x": x.numpy()}).values())),
                               rtol=1e-5, atol=1e-6)
    reasons = {i: inspector.explain_missing(i).reason for i in ids if got[i] is None}
    mapped = [i for i in ids if got[i] is not None
              or reasons[i] is not MissingValue.Reason.NO_PRODUCER_FOUND]
    assert mapped, "the compiled model's debug info maps some coreai ops"
    # Apple's interpreter on Linux hands out no intermediate: each mapped op says why
    for i in mapped:
        if got[i] is None:
            assert reasons[i] in (MissingValue.Reason.NOT_EXPOSED_BY_INTERPRETER,
                                  MissingValue.Reason.MERGED_INTO_ANOTHER_OPERATION)
