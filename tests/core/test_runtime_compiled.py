"""Compiled plans (generated Python functions) against the interpreted plan path."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coreai_core import Program, TensorType
from coreai_core._builder import insertion_point
from coreai_core.dialects import coreai
from coreai_core.runtime import KernelError, Runtime
from tests.core.strategies import inputs_for, programs

F32 = "float32"


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@st.composite
def _cases(draw, dynamic: bool):
    program = draw(programs(max_steps=10, dynamic=dynamic))
    return program, draw(inputs_for(program))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_cases(dynamic=False) | _cases(dynamic=True), optimized=st.booleans())
def test_compiled_and_interpreted_plans_give_identical_bits(case, optimized):
    program, inputs = case
    if optimized:
        program.optimize()
    copies = {k: v.copy() for k, v in inputs.items()}
    results = []
    for compiled in (True, False):
        state = {k: v.copy() for k, v in program.initial_state.items()}
        outs = []
        for _ in range(2):  # the second call reads the state the first one wrote
            outs.append(Runtime(compiled=compiled).run(program, inputs, state=state))
        results.append((outs, state))
    (c_outs, c_state), (i_outs, i_state) = results
    for c, i in zip(c_outs, i_outs, strict=True):
        assert list(c) == list(i)
        assert all(_same_bits(c[k], i[k]) for k in c)
    assert all(_same_bits(c_state[k], i_state[k]) for k in i_state)
    assert all(_same_bits(inputs[k], copies[k]) for k in inputs)  # inputs never written


def _chain(n: int) -> Program:
    p = Program()
    with p.graph("main", inputs={"x": TensorType((3, 5), F32), "b": TensorType((5,), F32)}) as g:
        v = g["x"]
        for i in range(n):
            v = coreai.broadcasting_add(v, g["b"]) if i % 2 else coreai.tanh(v)
        g.outputs({"y": v})
    return p


def test_an_elementwise_chain_runs_in_place_and_reports_its_peak():
    p = _chain(40)
    rt = Runtime()
    plan = rt.plan(p)
    x, b = np.linspace(-1, 1, 15, dtype=np.float32).reshape(3, 5), np.ones(5, np.float32)
    expected = x
    for i in range(40):
        expected = expected + b if i % 2 else np.tanh(expected)
    np.testing.assert_array_equal(rt.run(p, {"x": x, "b": b})["y"], expected)
    assert plan.stats.direct_ufunc_calls == 40
    assert plan.stats.in_place == 39  # the first result is a new array, the rest reuse it
    assert plan.stats.peak_intermediate_bytes == 3 * 5 * 4
    text = rt.explain_plan(p)
    assert "def plan_main(" in text and "peak intermediate bytes 60" in text
    # in place: the ufunc's output (its last positional argument) is one of its operands
    assert re.search(r"= \w+\((v\d+)(, \w+)*, \1\)", text)
    assert p.explain_plan() == Runtime().explain_plan(p)  # the default runtime's plan


def test_a_value_another_op_views_is_never_overwritten():
    """reshape returns a view: the add must not write into the buffer it shares."""
    p = Program()
    with p.graph("main", inputs={"x": TensorType((2, 3), F32)}) as g:
        a = coreai.exp(g["x"])
        view = coreai.reshape(a, [3, 2])
        b = coreai.broadcasting_add(a, a)  # a dies here, but `view` still reads its buffer
        g.outputs({"b": b, "view": view})
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = Runtime().run(p, {"x": x})
    np.testing.assert_array_equal(out["view"], np.exp(x).reshape(3, 2))
    np.testing.assert_array_equal(out["b"], np.exp(x) + np.exp(x))


def test_dead_buffers_are_reused_by_later_results_of_the_same_shape():
    p = Program()
    with p.graph("main", inputs={"x": TensorType((4, 4), F32)}) as g:
        a = coreai.exp(g["x"])
        s = coreai.reduce_sum(a, axes=[1], keep_dims=True)  # a's last use: not elementwise
        c = coreai.sin(coreai.broadcasting_mul(g["x"], s))
        g.outputs({"c": c})
    rt = Runtime()
    x = np.linspace(0, 1, 16, dtype=np.float32).reshape(4, 4)
    out = rt.run(p, {"x": x})
    np.testing.assert_array_equal(out["c"], np.sin(x * np.exp(x).sum(1, keepdims=True)))
    assert rt.plan(p).stats.reused_buffers == 0  # a is read by reduce_sum: not ours to reuse

    q = Program()
    with q.graph("main", inputs={"x": TensorType((4, 4), F32)}) as g:
        a = coreai.exp(g["x"])
        b = coreai.broadcasting_mul(g["x"], g["x"])
        c = coreai.broadcasting_add(a, b)  # a and b die; c goes into a, b is free
        d = coreai.cos(g["x"])  # ... and d goes into b's buffer
        g.outputs({"y": coreai.broadcasting_sub(c, d)})
    out = rt.run(q, {"x": x})
    np.testing.assert_array_equal(out["y"], (np.exp(x) + x * x) - np.cos(x))
    assert rt.plan(q).stats.reused_buffers == 1


@given(shape=st.lists(st.sampled_from([1, 2, 47]), min_size=1, max_size=3),
       data=st.data())
def test_a_split_is_written_as_slices_with_the_kernels_views(shape, data):
    """The compiled plan slices a split inline; the pieces are the kernel's views: the
    same bits as the interpreted plan, and an elementwise op on a piece never writes into
    the split value's buffer."""
    axis = data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
    n = shape[axis]
    cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=3), label="cuts"))
    sizes = [b - a for a, b in zip([0, *cuts], [*cuts, n], strict=True)]
    p = Program()
    with p.graph("main", inputs={"x": TensorType(tuple(shape), F32)}) as g:
        whole = coreai.exp(g["x"])
        pieces = coreai.split(whole, split_sizes=sizes, axis=axis)
        pieces = pieces if isinstance(pieces, (list, tuple)) else [pieces]
        outs = {f"p{i}": coreai.tanh(v) for i, v in enumerate(pieces)}
        g.outputs({**outs, "whole": whole})
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    compiled, interpreted = (Runtime(compiled=c).run(p, {"x": x}) for c in (True, False))
    assert all(_same_bits(compiled[k], interpreted[k]) for k in interpreted)
    want = np.split(np.exp(x), np.cumsum(sizes)[:-1], axis=axis)
    for i, w in enumerate(want):
        np.testing.assert_array_equal(compiled[f"p{i}"], np.tanh(w))
    np.testing.assert_array_equal(compiled["whole"], np.exp(x))
    assert "k_split" not in Runtime().explain_plan(p)


def test_a_user_split_kernel_is_called():
    rt = Runtime()
    calls = []

    @rt.register_kernel("coreai.split", allow_override=True)
    def split(x, *, split_sizes, axis):
        calls.append(1)
        return np.split(x, np.cumsum(split_sizes)[:-1], axis=axis)

    p = Program()
    with p.graph("main", inputs={"x": TensorType((4,), F32)}) as g:
        a, b = coreai.split(g["x"], split_sizes=[1, 3], axis=0)
        g.outputs({"a": a, "b": b})
    out = rt.run(p, {"x": np.arange(4, dtype=np.float32)})
    np.testing.assert_array_equal(out["b"], [1, 2, 3])
    assert calls == [1]


def test_user_kernels_are_called_instead_of_the_ufunc():
    rt = Runtime()
    calls = []
    rt.register_kernel("coreai.tanh", lambda x: calls.append(1) or np.tanh(x),
                       allow_override=True)
    rt.run(_chain(4), {"x": np.zeros((3, 5), np.float32), "b": np.ones(5, np.float32)})
    assert len(calls) == 2


@pytest.mark.parametrize("compiled", [True, False])
def test_a_failing_kernel_is_named_by_both_paths(compiled):
    rt = Runtime(compiled=compiled)

    @rt.register_kernel("coreai.tanh", allow_override=True)
    def broken(x):
        raise ValueError("no tanh today")

    p = _chain(6)
    with pytest.raises(KernelError, match=r"coreai\.tanh.*no tanh today") as info:
        rt.run(p, {"x": np.zeros((3, 5), np.float32), "b": np.ones(5, np.float32)})
    assert info.value.op is p.graphs["main"].ops[0]


def test_regions_and_callees_are_compiled_too():
    p = Program()
    with p.graph("helper", inputs={"a": TensorType((3,), F32)}) as g:
        g.outputs({"b": coreai.exp(coreai.neg(g["a"]))})
    with p.graph("main", inputs={"x": TensorType((3,), F32), "p": TensorType((), "bool")}) as g:
        (r,) = coreai.if_(g["p"], [g["x"]], lambda v: [coreai.sin(v)], lambda v: [coreai.cos(v)])
        with insertion_point(g):
            (c,) = coreai.invoke([r], callee="helper")
        g.outputs({"y": c})
    rt = Runtime()
    x = np.array([0.5, 1.0, 2.0], np.float32)
    out = rt.run(p, {"x": x, "p": np.array(True)})
    np.testing.assert_array_equal(out["y"], np.exp(-np.sin(x)))
    text = rt.explain_plan(p)
    assert text.count("def plan_") == 4  # main, the two branches and the callee


def _batched_program(batch: int) -> Program:
    rng = np.random.default_rng(3)
    p = Program()
    with p.graph("main", inputs={"x": TensorType((batch, 6, 20, 20), F32),
                                 "a": TensorType((batch, 64, 96), F32),
                                 "b": TensorType((batch, 96, 30), F32)}) as g:
        w = coreai.constant(rng.standard_normal((8, 6, 3, 3), np.float32), name="w")
        y = coreai.conv(g["x"], w, None, pads=[1, 1])
        m = coreai.batch_matmul(g["a"], coreai.constant(
            rng.standard_normal((96, 200), np.float32), name="m"))
        g.outputs({"y": y, "m": m, "s": coreai.batch_matmul(g["a"], g["b"])})
    return p


@pytest.mark.parametrize("batch", [1, 2, 5])
def test_threads_split_batched_kernels_with_identical_bits(batch, monkeypatch):
    from coreai_core.runtime import _threads
    from coreai_core.runtime.kernels import _matmul

    monkeypatch.setattr(_threads, "BLOCK_WORK", 1 << 10)  # split even these small kernels
    # row blocks of the shared-weight matmul that straddle its stacked matrices
    monkeypatch.setattr(_matmul, "MATMUL_ROW_BLOCK", 48)
    p = _batched_program(batch)
    rng = np.random.default_rng(4)
    inputs = {"x": rng.standard_normal((batch, 6, 20, 20), np.float32),
              "a": rng.standard_normal((batch, 64, 96), np.float32),
              "b": rng.standard_normal((batch, 96, 30), np.float32)}
    calls = []
    real = _threads.parallel_chunks

    def spy(bounds, fn):
        calls.append((tuple(bounds), _threads.active_pool() is not None))
        return real(bounds, fn)

    monkeypatch.setattr(_threads, "parallel_chunks", spy)
    one = Runtime(threads=1).run(p, inputs)
    serial = list(calls)
    calls.clear()
    three = Runtime(threads=3).run(p, inputs)
    assert all(_same_bits(one[k], three[k]) for k in one)
    # the same blocks, on the pool with 3 threads: the convolution's, "m"'s (64 * batch rows
    # in 48-row blocks) and, from 2 matrices on, the stack "s"'s
    assert [b for b, _ in calls] == [b for b, _ in serial]
    assert len(calls) == (3 if batch > 1 else 2)
    assert all(pooled for _, pooled in calls), calls
    np.testing.assert_allclose(one["m"], inputs["a"].astype(np.float64) @ p.weights["m"],
                               rtol=1e-4, atol=1e-4)


def test_threads_must_be_a_positive_int():
    with pytest.raises(ValueError, match="threads"):
        Runtime(threads=0)
