"""The validator finds the node where NaN or infinity starts, in torch and on the runtime."""

from __future__ import annotations

import asyncio

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from coreai_torch.debugging.graph import create_graph_from_exported_program
from coreai_torch.debugging.inspector import TorchFXInspector
from coreai_torch.debugging.search_strategy import ExhaustiveStrategy, LevelOrderStrategy
from coreai_torch.debugging.validator import (
    Validator,
    create_validator_for_coreai_program,
    create_validator_for_exported_program,
)
from tests.debugging.models import Chain, converted, exported

STRATEGIES = {
    "bisection": LevelOrderStrategy.bisection, "top_down": LevelOrderStrategy.top_down,
    "bottom_up": LevelOrderStrategy.bottom_up, "auto": LevelOrderStrategy.auto,
    "exhaustive": lambda g, batch_size=10: ExhaustiveStrategy(g),
}


def first_bad_in_torch(ep: torch.export.ExportedProgram, x: torch.Tensor, kind: str) -> str:
    """The first FX node (graph order) whose value is NaN/inf, by running every node."""
    from coreai_torch.verify import torch_intermediates

    bad = torch.isnan if kind == "nan" else torch.isinf
    values = torch_intermediates(ep, (x,))
    return next(n.name for n in ep.graph.nodes if n.name in values
                and values[n.name].is_floating_point() and bool(bad(values[n.name]).any()))


@settings(max_examples=8, deadline=None)
@given(steps=st.integers(1, 9), data=st.data(), kind=st.sampled_from(["nan", "inf"]),
       strategy=st.sampled_from(sorted(STRATEGIES)), batch=st.sampled_from([1, 3, 10]),
       rows=st.sampled_from([1, 2, 47]))
def test_first_failing_node_in_torch(steps: int, data: st.DataObject, kind: str, strategy: str,
                                     batch: int, rows: int) -> None:
    bad_at = data.draw(st.integers(0, steps - 1))
    x = torch.randn(rows, 3)
    ep = exported(Chain(steps, bad_at, kind), x)
    graph = create_graph_from_exported_program(ep)
    search = STRATEGIES[strategy](graph, batch_size=batch)
    validator = Validator(graph, TorchFXInspector(ep), search)
    check = validator.check_for_nans if kind == "nan" else validator.check_for_infs
    result = asyncio.run(check((x,)))
    assert [n.op_id for n in result.failed_nodes] == [first_bad_in_torch(ep, x, kind)]


@settings(max_examples=4, deadline=None)
@given(steps=st.integers(1, 7), data=st.data(), kind=st.sampled_from(["nan", "inf"]))
def test_first_failing_op_on_the_runtime(steps: int, data: st.DataObject, kind: str) -> None:
    bad_at = data.draw(st.integers(0, steps - 1))
    x = torch.randn(2, 3)
    ep = exported(Chain(steps, bad_at, kind), x)
    program = converted(ep)
    program.optimize()
    validator = asyncio.run(create_validator_for_coreai_program(program, "main"))
    check = validator.check_for_nans if kind == "nan" else validator.check_for_infs
    result = asyncio.run(check({"x": x}))
    (node,) = result.failed_nodes
    op = program.graphs["main"].ops[node.op_id]
    # the op computes the torch node where the failure starts
    assert op.name == ("coreai.sqrt" if kind == "nan" else "coreai.exp")
    assert any(r.name == first_bad_in_torch(ep, x, kind) for r in op.results)


def test_a_healthy_model_fails_nowhere_and_custom_checks_run() -> None:
    x = torch.linspace(-2, 2, 12).reshape(4, 3)
    ep = exported(Chain(4, None), x)
    validator = create_validator_for_exported_program(ep)
    assert asyncio.run(validator.check_for_nans((x,))).failed_nodes == []
    # a bound tanh's values cross and later nodes cross again (not a failure that spreads
    # like NaN): searched from the inputs, as the validator's docstring says
    graph = create_graph_from_exported_program(ep)
    validator = Validator(graph, TorchFXInspector(ep), LevelOrderStrategy.top_down(graph))
    result = asyncio.run(validator.check(
        lambda arrays: any(a is not None and (a < -0.25).any() for a in arrays), (x,)))
    below = bool((torch.tanh(x) < -0.25).any())
    assert [n.op_id for n in result.failed_nodes] == (["tanh"] if below else [])
