"""Graph diff/match, the benchmarker, saved intermediates, histograms, debug info and the
tools that need Apple's device runtime."""

from __future__ import annotations

import asyncio
import copy
import io
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from coreai_core.runtime._plan_time import LAYOUT_OPS
from coreai_torch.debugging.benchmarker import benchmark_coreai_program
from coreai_torch.debugging.compute_plan import ComputePlan
from coreai_torch.debugging.graph_diff import (
    compute_coreai_program_diff,
    compute_exported_program_diff,
    compute_per_graph_diff,
    format_multi_graph_diff,
    op_id_alignment,
    write_diff,
)
from coreai_torch.debugging.graph_match import WeightPolicy, align, program_graph
from coreai_torch.debugging.histogram import operation_histogram
from coreai_torch.debugging.plan_diff import compare_compute_plans
from coreai_torch.debugging.timing_diff import compare_runs
from coreai_torch.debugging.torch_utils import load_intermediates, save_intermediates
from coreai_torch.debugging.utils import DeviceRuntimeError
from coreai_torch.verify import torch_intermediates
from tests.debugging.models import Chain, Mlp, converted, exported


def test_exported_programs_diff() -> None:
    x = torch.randn(3, 5)
    a, b = exported(Chain(3, None), x), exported(Chain(4, None), x)
    same = compute_exported_program_diff(a, exported(Chain(3, None), x))
    assert same.is_isomorphic and same.summary.unmapped_target_node_count == 0
    diff = compute_exported_program_diff(a, b)
    # one more step: sin, mul, add (three call_function nodes) added, nothing removed
    added = [diff.target_graph.nodes[n]["op_name"] for n in diff.unmapped_target_nodes]
    assert not diff.is_isomorphic and diff.unmapped_source_nodes == []
    assert Counter(added) == Counter(["aten.sin.default", "aten.mul.Tensor", "aten.add.Tensor"])
    out = io.StringIO()
    write_diff(diff, diff.source_graph, diff.target_graph, output=out, max_items=2)
    assert "added (3)" in out.getvalue() and "... 1 more" in out.getvalue()


def test_program_before_and_after_optimize() -> None:
    x = torch.randn(2, 5)
    before = converted(exported(Mlp(), x))
    after = copy.deepcopy(before)
    after.optimize()
    assert compute_coreai_program_diff(before, copy.deepcopy(before)).is_isomorphic
    alignment = op_id_alignment(before, after)
    ops_b, ops_a = before.graphs["main"].ops, after.graphs["main"].ops
    # every pair is the same op; every computing op of the optimized program has a partner
    assert all(ops_b[s].name == ops_a[t].name for s, t in alignment.mapping.items())
    paired = set(alignment.mapping.values())
    assert {i for i, op in enumerate(ops_a) if op.name != "coreai.constant"} <= paired
    assert set(alignment.removed) | set(alignment.mapping) == set(range(len(ops_b)))
    text = format_multi_graph_diff(compute_per_graph_diff(before, after))
    assert text.startswith("@main: graphs differ")


def test_weights_enter_the_label_only_when_asked() -> None:
    x = torch.randn(2, 5)
    torch.manual_seed(0)
    a = converted(exported(Mlp(), x))
    torch.manual_seed(1)
    b = converted(exported(Mlp(), x))
    ga, gb = program_graph(a), program_graph(b)
    assert align(ga, gb).identical
    digest = align(ga, gb, WeightPolicy.DIGEST_PORTABLE)
    changed = {ga.nodes[s]["op_name"] for s, _ in digest.modified}
    assert changed == {"coreai.constant"} and not digest.identical


def test_benchmark_times_every_op_on_the_runtime_and_the_interpreter() -> None:
    x = torch.randn(4, 5)
    program = converted(exported(Mlp(), x))
    result = asyncio.run(benchmark_coreai_program(program, {"x": x}, num_runs=3))
    timed = {i for t in result.operation_timings for i in t.op_ids}
    ops = program.graphs["main"].ops
    # what runs on every call: not constants, nor the layout of a constant weight (the
    # linear layers' weight transposes), which the plan computes once (runtime/_plan_time.py)
    planned = {op.results[0] for op in ops if op.name == "coreai.constant"}
    for op in ops:
        if op.name in LAYOUT_OPS and all(v in planned for v in op.operands):
            planned.update(op.results)
    computing = {i for i, op in enumerate(ops) if not set(op.results) <= planned}
    assert computing and computing <= timed
    assert all(len(t.measurement.samples) == 3 and t.measurement.statistics.minimum >= 0
               for t in result.operation_timings)
    modules = result.get_module_timings()
    assert {"fc1", "fc2"} <= set(modules)
    out = io.StringIO()
    result.write_summary(out, top_n=2)
    assert "timed ops" in out.getvalue()
    pytest.importorskip("coreai.runtime")
    whole = asyncio.run(benchmark_coreai_program(program, {"x": x}, num_runs=2,
                                                 runtime="interpreter"))
    (timing,) = whole.operation_timings
    assert len(timing.measurement.samples) == 2 and set(timing.op_ids) >= computing


def test_timing_diff_pairs_the_ops_that_survived_optimize() -> None:
    x = torch.randn(4, 5)
    before = converted(exported(Mlp(), x))
    after = copy.deepcopy(before)
    after.optimize()
    diff = asyncio.run(compare_runs(before, after, {"x": x}, num_runs=2))
    assert diff.matched
    for m in diff.matched:
        assert m.before.op_names == m.after.op_names


def test_saved_intermediates_round_trip(tmp_path: Path) -> None:
    x = torch.randn(47, 5)
    ep = exported(Mlp(), x)
    index = save_intermediates(ep, (x,), tmp_path / "out", coreai_program=converted(ep))
    trace = load_intermediates(index)
    want = torch_intermediates(ep, (x,))
    computed = {n.name for n in ep.graph.nodes if n.op == "call_function"}
    assert set(trace.intermediates) == computed  # the default filter: every computed tensor
    for name, t in trace.intermediates.items():
        torch.testing.assert_close(t, want[name], rtol=0, atol=0)
    torch.testing.assert_close(trace.inputs["x"], x, rtol=0, atol=0)
    assert trace.mappings is not None and trace.mappings.outputs


def test_histogram_counts_every_op() -> None:
    program = converted(exported(Mlp(), torch.randn(2, 5)))
    want = Counter(op.name for op in program.graphs["main"].walk())
    h = operation_histogram(program)
    assert h.counts == dict(want) and h.size == sum(want.values())


def test_device_runtime_tools_name_macos() -> None:
    program = converted(exported(Mlp(), torch.randn(2, 5)))
    with pytest.raises(DeviceRuntimeError, match=r"ComputePlan\.from_program needs Apple's "
                                                 r"Core AI device runtime, which runs on macOS"):
        asyncio.run(ComputePlan.from_program(program))
    with pytest.raises(DeviceRuntimeError, match="macOS"):
        asyncio.run(compare_compute_plans(program, program))
    with pytest.raises(DeviceRuntimeError, match="macOS"):
        asyncio.run(compare_runs(program, program, {"x": np.zeros((2, 5), np.float32)},
                                 specialization_options=object()))
