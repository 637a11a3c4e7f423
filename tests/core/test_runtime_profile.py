"""Runtime.profile: one run with the wall time of each op, results as run() gives them."""

from __future__ import annotations

import numpy as np
import pytest

from coreai_core import Program, TensorType
from coreai_core.dialects import coreai
from coreai_core.runtime import KernelError, Runtime


def _chain() -> Program:
    p = Program()
    with p.graph("main", inputs={"x": TensorType((2, 3), "float32")}) as g:
        e = coreai.exp(g["x"])
        g.outputs({"y": coreai.tanh(coreai.broadcasting_mul(e, g["x"])),
                   "s": coreai.softmax(e, axis=1)})
    return p


def test_profile_times_every_step_and_returns_the_run_outputs() -> None:
    program, runtime = _chain(), Runtime()
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    outputs, timings = runtime.profile(program, {"x": x})
    expected = runtime.run(program, {"x": x})
    assert list(outputs) == list(expected)
    for name in expected:
        assert outputs[name].tobytes() == expected[name].tobytes()
    steps = runtime.plan(program).steps
    assert [op for op, _ in timings] == [step.op for step in steps]
    assert [op.name for op, _ in timings] == ["coreai.exp", "coreai.broadcasting_mul",
                                              "coreai.tanh", "coreai.softmax"]
    assert all(isinstance(t, float) and t >= 0 for _, t in timings)


def test_profile_reads_and_updates_state_like_run() -> None:
    counter = Program()
    with counter.graph("main", inputs={"step": TensorType((), "int64")},
                       state={"count": np.zeros((), np.int64)}) as g:
        new = coreai.broadcasting_add(g["count"], g["step"])
        g.outputs({"count": new}, state={"count": new})
    runtime = Runtime()
    runtime.run(counter, {"step": np.int64(2)})
    outputs, timings = runtime.profile(counter, {"step": np.int64(3)})
    assert int(outputs["count"]) == 5 and int(counter.state["count"]) == 5
    assert [op.name for op, _ in timings] == ["coreai.broadcasting_add"]


def test_a_failing_kernel_names_its_op() -> None:
    p = Program()
    with p.graph("main", inputs={"x": TensorType((3,), "int32")}) as g:
        g.outputs({"y": coreai.broadcasting_divide(coreai.neg(g["x"]), g["x"])})
    with pytest.raises(KernelError, match=r"coreai\.broadcasting_divide") as info:
        Runtime().profile(p, {"x": np.array([1, 0, 2], np.int32)})
    assert info.value.op is p.graphs["main"].ops[1]
