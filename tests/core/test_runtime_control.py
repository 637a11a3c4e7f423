"""Control flow in the runtime (if_, while_, invoke), evaluate_op and intermediate capture."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from coreai_core import MissingKernelError, Program, TensorType
from coreai_core._builder import insertion_point
from coreai_core.dialects import coreai
from coreai_core.runtime import (
    DEFAULT_TABLE,
    KernelError,
    Runtime,
    evaluate_op,
    run_graph_collect,
)

F32 = "float32"


def _select_program() -> Program:
    """main(c, x): if c then x * 2 + 1 else -x, yielding two results."""
    p = Program()
    with p.graph("main", inputs={"c": TensorType((), "bool"),
                                 "x": TensorType((3,), F32)}) as g:
        y, z = coreai.if_(
            g["c"], [g["x"]],
            lambda v: (coreai.broadcasting_add(coreai.broadcasting_mul(v, 2.0), 1.0), v),
            lambda v: (coreai.neg(v), coreai.broadcasting_mul(v, 0.0)))
        g.outputs({"y": y, "z": z})
    return p


def test_if_runs_the_chosen_branch():
    p = _select_program()
    x = np.array([1.0, -2.0, 3.0], np.float32)
    out = p.run({"c": np.array(True), "x": x})
    np.testing.assert_array_equal(out["y"], torch.from_numpy(x).mul(2).add(1).numpy())
    np.testing.assert_array_equal(out["z"], x)
    out = p.run({"c": np.array(False), "x": x})
    np.testing.assert_array_equal(out["y"], -x)
    np.testing.assert_array_equal(out["z"], np.zeros(3, np.float32))


def _sum_to_program() -> Program:
    """main(n) -> (i, total): while i < n: total += i; i += 1 (carried int64 scalars)."""
    p = Program()
    with p.graph("main", inputs={"n": TensorType((), "int64")}) as g:
        zero = coreai.constant(np.array(0, np.int64))
        n = g["n"]
        i, total, _ = coreai.while_(
            [zero, zero, n],
            lambda i, total, n: coreai.broadcasting_less(i, n),
            lambda i, total, n: (coreai.broadcasting_add(i, 1),
                                 coreai.broadcasting_add(total, i), n))
        g.outputs({"i": i, "total": total})
    return p


@given(n=st.integers(-2, 40))
def test_while_loops_until_cond_is_false(n):
    out = _sum_to_program().run({"n": np.array(n, np.int64)})
    assert int(out["i"]) == max(n, 0)
    assert int(out["total"]) == sum(range(max(n, 0)))


def test_regions_are_planned_once(monkeypatch):
    p = _sum_to_program()
    rt = Runtime()
    lookups = []
    real_get = rt.kernels.get
    monkeypatch.setattr(rt.kernels, "get", lambda name: lookups.append(name) or real_get(name))
    rt.run(p, {"n": np.array(5, np.int64)})
    planned = len(lookups)
    assert "coreai.broadcasting_less" in lookups
    out = rt.run(p, {"n": np.array(50, np.int64)})  # 50 iterations, no new lookups
    assert len(lookups) == planned and int(out["total"]) == sum(range(50))


def test_regions_may_read_values_of_the_enclosing_graph():
    """A branch that uses an outer value gets it bound per call (a captured value)."""
    p = Program()
    with p.graph("main", inputs={"c": TensorType((), "bool"), "x": TensorType((2,), F32),
                                 "s": TensorType((2,), F32)}) as g:
        s = coreai.broadcasting_mul(g["s"], 10.0)
        (y,) = coreai.if_(g["c"], [g["x"]], lambda v: coreai.broadcasting_add(v, s),
                          lambda v: coreai.broadcasting_sub(v, s))
        g.outputs({"y": y})
    x, s_in = np.array([1.0, 2.0], np.float32), np.array([1.0, -1.0], np.float32)
    for c in (True, False):
        out = p.run({"c": np.array(c), "x": x, "s": s_in})
        np.testing.assert_array_equal(out["y"], x + 10 * s_in if c else x - 10 * s_in)


def test_invoke_calls_another_entrypoint():
    p = Program()
    with p.graph("square_plus", inputs={"a": TensorType((2,), F32)}) as g:
        g.outputs({"b": coreai.broadcasting_add(coreai.broadcasting_mul(g["a"], g["a"]), 1.0)})
    with p.graph("main", inputs={"x": TensorType((2,), F32)}) as g:
        (once,) = coreai.invoke([g["x"]], callee="square_plus")
        (twice,) = coreai.invoke([once], callee="square_plus")
        g.outputs({"y": twice})
    x = np.array([1.0, 2.0], np.float32)
    t = torch.from_numpy(x)
    want = ((t * t + 1) * (t * t + 1) + 1).numpy()
    np.testing.assert_array_equal(p.run({"x": x})["y"], want)


def test_missing_kernels_inside_regions_and_callees_are_listed():
    p = _select_program()
    with p.graph("helper", inputs={"a": TensorType((3,), F32)}) as g:
        g.outputs({"b": coreai.exp(g["a"])})
    with insertion_point(p.graphs["main"]):
        coreai.invoke([p.graphs["main"]["x"]], callee="helper")
    kept = {n: DEFAULT_TABLE.get(n) for n in DEFAULT_TABLE.names()
            if n not in ("coreai.neg", "coreai.exp")}
    missing = Runtime(kept, base=None)  # a runtime with exactly these kernels
    with pytest.raises(MissingKernelError) as info:
        missing.plan(p)
    text = str(info.value)
    assert "coreai.neg: no kernel" in text and "coreai.if.else_branch" in text
    assert "coreai.exp: no kernel" in text and "@helper" in text


def test_kernel_errors_inside_a_loop_name_the_inner_op():
    p = Program()
    with p.graph("main", inputs={"d": TensorType((), "int32")}) as g:
        one = coreai.constant(np.array(1, np.int32))
        (r,) = coreai.while_(
            [one], lambda v: coreai.broadcasting_less(v, 100),
            lambda v: coreai.broadcasting_add(v, coreai.broadcasting_divide(v, g["d"])))
        g.outputs({"r": r})
    with pytest.raises(KernelError) as info:
        p.run({"d": np.array(0, np.int32)})
    text = str(info.value)
    assert text.startswith("coreai.while in graph @main failed")
    assert "coreai.broadcasting_divide in graph @coreai.while.body failed" in text
    assert int(p.run({"d": np.array(1, np.int32)})["r"]) == 128


# -- evaluate_op and intermediates ---------------------------------------------------------------

def test_evaluate_op_runs_one_op_on_arrays():
    p = Program()
    with p.graph("main", inputs={"x": TensorType((4, 6), F32)}) as g:
        parts = coreai.split(g["x"], [1, 5], axis=1)
        s = coreai.softmax(parts[1], axis=0)
        big = coreai.constant(np.arange(30, dtype=np.float32).reshape(6, 5), name="big")
        g.outputs({"s": s, "big": big})
    ops = p.graphs["main"].ops
    x = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    a, b = evaluate_op(ops[0], [x])
    np.testing.assert_array_equal(a, x[:, :1])
    np.testing.assert_array_equal(b, x[:, 1:])
    (s,) = evaluate_op(ops[1], [b])
    np.testing.assert_allclose(s, torch.softmax(torch.from_numpy(b), 0).numpy(), rtol=1e-6)
    (w,) = evaluate_op(ops[2], [], program=p)  # a weight reference needs the program
    np.testing.assert_array_equal(w, p.weights["big"])


def test_evaluate_op_on_control_flow():
    p = _select_program()
    op = p.graphs["main"].ops[0]
    y, z = evaluate_op(op, [np.array(False), np.array([1.0, 2.0, 3.0], np.float32)])
    np.testing.assert_array_equal(y, [-1.0, -2.0, -3.0])
    np.testing.assert_array_equal(z, [0.0, 0.0, 0.0])


def test_run_graph_collect_records_every_op_result():
    p = Program()
    with p.graph("main", inputs={"x": TensorType((3,), F32)}) as g:
        a = coreai.exp(g["x"])
        b = coreai.broadcasting_mul(a, 2.0)
        g.outputs({"y": coreai.reduce_sum(b)})
    x = np.array([0.0, 1.0, 2.0], np.float32)
    outputs, values = run_graph_collect(p, {"x": x})
    graph_results = [r for op in p.graphs["main"].ops for r in op.results]
    assert set(values) == set(graph_results)  # constants included
    computed = [v for v in values if v.owner.name != "coreai.constant"]
    assert computed == [a, b, graph_results[-1]]  # in execution order
    np.testing.assert_allclose(values[a], np.exp(x), rtol=1e-6)  # float32 exp, a few ulp
    np.testing.assert_array_equal(values[b], values[a] * 2)
    assert outputs["y"] == values[graph_results[-1]]
