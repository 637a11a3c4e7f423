"""Lowerings of SymInt arithmetic, Python operator targets and size queries.

torch.export only emits these nodes around dynamic shapes, which makes most of them hard to
reach from a small module; here each lowering runs on a hand-built FX node (with the meta
value torch would record) and its result is compared with Python's own arithmetic.
"""

from __future__ import annotations

import math
import operator

import numpy as np
import pytest
import torch
import torch.fx
from hypothesis import given
from hypothesis import strategies as st

from coreai_core import Program, TensorType
from coreai_torch._binding import NodeValues, call_lowering
from coreai_torch._table import qualified_name
from coreai_torch.lowerings import default_table

aten = torch.ops.aten


def _run_python_op(target, args):
    """Lower ``target(*args)`` where each arg is a graph input; return the runtime result."""
    graph = torch.fx.Graph()
    nodes, inputs = [], {}
    for i, a in enumerate(args):
        node = graph.placeholder(f"a{i}")
        node.meta["val"] = a
        nodes.append(node)
        dtype = "bool" if isinstance(a, bool) else ("int64" if isinstance(a, int) else "float64")
        inputs[f"a{i}"] = TensorType((), dtype)
    call = graph.call_function(target, tuple(nodes))
    call.meta["val"] = target(*args)
    lowering = default_table()[qualified_name(target)].fn
    program = Program()
    with program.graph("main", inputs=inputs) as g:
        values = {n: g[n] for n in inputs}
        g.outputs({"out": lowering(values, call, None)})
    feeds = {f"a{i}": np.asarray(a) for i, a in enumerate(args)}
    return program.run(feeds)["out"], call.meta["val"]


INTS = st.integers(-20, 20)
BINARY = [operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod,
          operator.truediv, operator.eq, operator.ne, operator.lt, operator.le, operator.gt,
          operator.ge, torch.sym_max, torch.sym_min]


@pytest.mark.parametrize("target", BINARY, ids=lambda f: f.__name__)
@given(a=INTS, b=INTS)
def test_binary_python_operators_on_ints(target, a: int, b: int) -> None:
    if target in (operator.floordiv, operator.mod, operator.truediv) and b == 0:
        b = 3
    got, want = _run_python_op(target, (a, b))
    assert got.item() == pytest.approx(want)
    assert got.dtype == (np.bool_ if isinstance(want, bool) else
                         np.int64 if isinstance(want, int) else np.float64)


@given(a=st.integers(0, 6), b=st.integers(0, 4))
def test_pow_on_ints(a: int, b: int) -> None:
    got, want = _run_python_op(operator.pow, (a, b))
    assert got.item() == want


@given(a=st.floats(-50, 50), b=INTS)
def test_mixed_int_float(a: float, b: int) -> None:
    got, want = _run_python_op(operator.add, (a, b))
    assert got.item() == pytest.approx(want)


@pytest.mark.parametrize("target", [operator.and_, operator.or_])
@given(a=st.booleans(), b=st.booleans())
def test_logical_operators(target, a: bool, b: bool) -> None:
    got, want = _run_python_op(target, (a, b))
    assert bool(got) == want


@pytest.mark.parametrize("target", [operator.neg, torch.sym_float, torch.sym_int, math.ceil,
                                    math.floor, math.trunc, torch.sym_not],
                         ids=lambda f: f.__name__)
@given(a=st.floats(-50, 50))
def test_unary_python_operators(target, a: float) -> None:
    arg = (a > 0) if target is torch.sym_not else (int(a) if target is torch.sym_float else a)
    got, want = _run_python_op(target, (arg,))
    assert got.item() == pytest.approx(want)


@pytest.mark.parametrize("target", [math.ceil, math.floor, math.trunc], ids=lambda f: f.__name__)
@given(a=st.integers(-50, 50))
def test_rounding_python_operators_on_ints(target, a: int) -> None:
    got, want = _run_python_op(target, (a,))
    assert got.item() == want


def _size_query(fn, x: torch.Tensor):
    graph = torch.fx.Graph()
    node = graph.placeholder("x")
    node.meta["val"] = x
    call = fn(graph, node)
    lowering = default_table()[qualified_name(call.target)]
    program = Program()
    with program.graph("main", inputs={"x": TensorType(tuple(x.shape), "float32")}) as g:
        values = NodeValues()
        values.bind(node, g["x"])
        g.outputs({"out": call_lowering(lowering, values, call, None)})
    return program.run({"x": x.numpy()})["out"], call.meta["val"]


@pytest.mark.parametrize("case", ["size", "numel", "stride", "offset", "contiguous", "item"])
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4))
def test_size_queries(case: str, shape: list[int]) -> None:
    x = torch.randn(shape)
    dim = len(shape) - 1

    def build(graph, node):
        target, args = {
            "size": (aten.sym_size.int, (node, dim)),
            "numel": (aten.sym_numel.default, (node,)),
            "stride": (aten.sym_stride.int, (node, 0)),
            "offset": (aten.sym_storage_offset.default, (node,)),
            "contiguous": (aten.sym_is_contiguous.default, (node,)),
            "item": (aten._local_scalar_dense.default, (node,)),
        }[case]
        if case == "item":
            node.meta["val"] = x.reshape(-1)[:1].reshape(())
        call = graph.call_function(target, args)
        real = [node.meta["val"] if a is node else a for a in args]
        call.meta["val"] = target(*real)
        return call

    if case == "item":
        x = x.reshape(-1)[:1].reshape(())
    got, want = _size_query(build, x)
    assert got.item() == pytest.approx(want)
