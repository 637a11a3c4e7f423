"""The runtime's contract: running, inputs, bad inputs, state, plan-once, custom kernels."""

from __future__ import annotations

import gc
import threading
import warnings
import weakref

import ml_dtypes
import numpy as np
import pytest
import torch

from coreai_core import (
    Dim,
    Location,
    MissingKernelError,
    Program,
    RuntimeInputError,
    TensorType,
    Value,
    WeightRef,
)
from coreai_core._opdef import OPS, defop
from coreai_core.dialects import coreai
from coreai_core.runtime import (
    DEFAULT_TABLE,
    KernelError,
    PlanError,
    Runtime,
    default_runtime,
    run_program,
    to_array,
)


@pytest.fixture
def scale_op():
    """A custom op ``test_rt.scale(x, factor)`` defined for one test (OPS is global)."""

    @defop(name="test_rt.scale")
    def scale(x: Value, factor: float = 2.0) -> TensorType:
        """x * factor (test op without a default kernel)."""
        return x.type

    yield scale
    OPS.unregister("test_rt.scale")


def _affine_program() -> Program:
    p = Program()
    with p.graph("main", inputs={"x": TensorType((2, 3), "float32"),
                                 "b": TensorType((3,), "float32")}) as g:
        y = coreai.broadcasting_add(coreai.broadcasting_mul(g["x"], 2.0), g["b"])
        g.outputs({"y": y, "z": coreai.relu(y)})
    return p


# -- running -------------------------------------------------------------------------------------

def test_design_contract_example():
    p = Program()
    with p.graph("main", inputs={"x": TensorType((2, 3), "float32")}) as g:
        g.outputs({"y": coreai.relu(coreai.broadcasting_add(g["x"], 1.0))})
    out = p.run({"x": np.ones((2, 3), np.float32)})
    assert list(out) == ["y"] == p.output_names
    np.testing.assert_array_equal(out["y"], np.full((2, 3), 2.0, np.float32))


def test_outputs_in_order_from_dict_or_positional_inputs():
    p = _affine_program()
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 3
    b = np.array([1, -20, 3], np.float32)
    by_name = p.run({"b": b, "x": x})
    positional = p.run([x, b])
    assert list(by_name) == ["y", "z"]
    want = torch.relu(torch.from_numpy(x) * 2 + torch.from_numpy(b)).numpy()
    for out in (by_name, positional):
        np.testing.assert_array_equal(out["z"], want)


def test_torch_tensors_and_python_values_are_accepted():
    p = _affine_program()
    x = torch.randn(3, 2).T  # non-contiguous
    b = [1.0, 2.0, 3.0]
    out = p.run({"x": x.requires_grad_(), "b": b})
    want = torch.relu(x.detach() * 2 + torch.tensor(b)).numpy()
    np.testing.assert_allclose(out["z"], want, rtol=1e-6)  # float32: torch fuses mul-add


def test_to_array_shares_memory_with_torch_and_views_bfloat16():
    t = torch.randn(4, 5)
    assert np.shares_memory(to_array(t), t.numpy())
    bf = torch.randn(3, 4).to(torch.bfloat16)
    a = to_array(bf)
    assert a.dtype == np.dtype(ml_dtypes.bfloat16)
    assert a.__array_interface__["data"][0] == bf.data_ptr()  # no copy
    np.testing.assert_array_equal(a.astype(np.float32), bf.float().numpy())


def test_outputs_are_writable_and_never_alias_weights():
    p = Program()
    data = np.arange(20, dtype=np.float32)
    with p.graph("main") as g:
        w = coreai.constant(data, name="w")
        g.outputs({"w": w, "r": coreai.reshape(w, np.array([4, 5], np.int64))})
    out = p.run()
    out["w"] += 1
    out["r"][0, 0] = 100
    np.testing.assert_array_equal(p.weights["w"], data)
    np.testing.assert_array_equal(p.run()["w"], data)


def test_no_numpy_warnings_escape():
    p = Program()
    with p.graph("main", inputs={"x": TensorType((3,), "float32")}) as g:
        g.outputs({"y": coreai.log(g["x"]), "z": coreai.reciprocal(g["x"])})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = p.run({"x": np.array([0.0, -1.0, 1.0], np.float32)})
    np.testing.assert_array_equal(out["y"], torch.log(torch.tensor([0.0, -1.0, 1.0])).numpy())


def test_other_entrypoints_and_run_program():
    p = _affine_program()
    with p.graph("twice", inputs={"v": TensorType((Dim("n"),), "int32")}) as g:
        g.outputs({"w": coreai.broadcasting_mul(g["v"], 2)})
    out = run_program(p, {"v": np.array([1, 2, 3], np.int32)}, entrypoint="twice")
    np.testing.assert_array_equal(out["w"], [2, 4, 6])
    assert out["w"].dtype == np.int32


# -- bad inputs ----------------------------------------------------------------------------------

@pytest.fixture
def counting_runtime():
    """A runtime whose relu/add kernels count their calls (to prove nothing ran)."""
    rt = Runtime()
    calls = []
    for name in ("coreai.broadcasting_add", "coreai.relu"):
        default = DEFAULT_TABLE.get(name)

        def counted(*args, _d=default, **kw):
            calls.append(1)
            return _d(*args, **kw)

        rt.register_kernel(name, counted, allow_override=True)
    return rt, calls


def _dynamic_program() -> Program:
    p = Program()
    n = Dim("n", 2, 8)
    with p.graph("main", inputs={"tokens": TensorType((n, 4), "float32"),
                                 "mask": TensorType((n,), "bool")}) as g:
        g.outputs({"y": coreai.relu(coreai.broadcasting_add(g["tokens"], 1.0))})
    return p


GOOD = {"tokens": np.zeros((3, 4), np.float32), "mask": np.ones(3, bool)}


@pytest.mark.parametrize("inputs,fragments", [
    ({"tokens": GOOD["tokens"]}, ["missing input 'mask'"]),
    ({**GOOD, "extra": 1.0}, ["unknown input 'extra'"]),
    ({"tokenz": GOOD["tokens"], "mask": GOOD["mask"]},
     ["unknown input 'tokenz'; did you mean 'tokens'?", "missing input 'tokens'"]),
    ({**GOOD, "tokens": GOOD["tokens"].astype(np.float64)},
     ["'tokens': expected tensor<?n[2:8]x4xf32>, got float64",
      "element type float64, expected float32"]),
    ({**GOOD, "tokens": np.zeros((3, 4, 1), np.float32)}, ["rank 3, expected 2"]),
    ({**GOOD, "tokens": np.zeros((3, 5), np.float32)}, ["axis 1 is 5, expected 4"]),
    ({"tokens": np.zeros((9, 4), np.float32), "mask": np.ones(9, bool)},
     ["axis 0 = 9 is outside the bounds of ?n[2:8]"]),
    ({**GOOD, "mask": np.ones(4, bool)}, ["dimension ?n = 4 here but 3 in 'tokens'"]),
    ({**GOOD, "mask": "yes"}, ["'mask': expected tensor<?n[2:8]xi1>", "got str"]),
    ([GOOD["tokens"]], ["expected 2 positional inputs"]),
    ({**GOOD, "mask": None}, ["'mask': expected tensor<?n[2:8]xi1>, got None"]),
    # several problems, one error
    ({"tokens": GOOD["tokens"].astype(np.int32), "mask": np.ones(2, bool)},
     ["element type int32, expected float32", "?n = 2 here but 3 in 'tokens'"]),
])
def test_bad_inputs_raise_one_error_and_run_nothing(counting_runtime, inputs, fragments):
    rt, calls = counting_runtime
    p = _dynamic_program()
    with pytest.raises(RuntimeInputError) as info:
        rt.run(p, inputs)
    for fragment in fragments:
        assert fragment in str(info.value)
    assert "nothing was run" in str(info.value)
    assert calls == []
    rt.run(p, GOOD)  # the same runtime and plan still work
    assert calls == [1, 1]


def test_python_values_must_fit_the_input_kind():
    p = Program()
    with p.graph("main", inputs={"i": TensorType((2,), "int64")}) as g:
        g.outputs({"o": coreai.neg(g["i"])})
    np.testing.assert_array_equal(p.run({"i": [1, 2]})["o"], [-1, -2])
    with pytest.raises(RuntimeInputError, match="cannot be given as int64"):
        p.run({"i": [1.5, 2.0]})


# -- plan errors ---------------------------------------------------------------------------------

def test_missing_kernels_are_all_listed_when_planning(scale_op):
    @defop(name="test_rt.other")
    def other(x: Value) -> TensorType:
        """Another op without a kernel."""
        return x.type

    try:
        p = Program()
        with p.graph("main", inputs={"x": TensorType((2,), "float32"),
                                     "c": TensorType((), "bool")}) as g:
            a = scale_op(g["x"], loc=Location("model.py", 12))
            (b,) = coreai.if_(g["c"], [a], lambda v: other(v), lambda v: scale_op(v))
            g.outputs({"y": other(b)})
        with pytest.raises(MissingKernelError) as info:
            Runtime().plan(p)
        text = str(info.value)
        assert "test_rt.other: no kernel (2 op(s)" in text
        assert "test_rt.scale: no kernel (2 op(s); first: test_rt.scale at " in text
        assert '"model.py":12' in text and "register_kernel" in text
    finally:
        OPS.unregister("test_rt.other")


def test_unbound_weight_is_reported_by_name():
    p = Program()
    p.add_weight("encoder.weight", None, TensorType((3,), "float32"))
    with p.graph("main", inputs={"x": TensorType((3,), "float32")}) as g:
        w = coreai.constant(WeightRef("encoder.weight"))
        g.outputs({"y": coreai.broadcasting_mul(g["x"], w)})
    with pytest.raises(PlanError, match=r"weight @encoder\.weight .*bind_weights"):
        p.run({"x": np.ones(3, np.float32)})
    p.weights["encoder.weight"] = np.array([1, 2, 3], np.float32)
    np.testing.assert_array_equal(p.run({"x": np.ones(3, np.float32)})["y"], [1, 2, 3])


def test_kernel_exceptions_name_the_op_and_location(scale_op):
    rt = Runtime()

    @rt.register_kernel("test_rt.scale")
    def broken(x, *, factor):
        raise ValueError("bad factor")

    p = Program()
    with p.graph("main", inputs={"x": TensorType((2,), "float32")}) as g:
        g.outputs({"y": scale_op(g["x"], loc=Location("net.py", 7, "encoder.layer0"))})
    with pytest.raises(KernelError) as info:
        rt.run(p, {"x": np.ones(2, np.float32)})
    assert 'test_rt.scale at loc("net.py":7 in "encoder.layer0")' in str(info.value)
    assert "ValueError: bad factor" in str(info.value)
    assert isinstance(info.value.__cause__, ValueError)
    assert info.value.op is p.graphs["main"].ops[0]


def test_a_kernel_returning_the_wrong_dtype_is_caught(scale_op):
    rt = Runtime({"test_rt.scale": lambda x, *, factor: (x * factor).astype(np.float64)})
    p = Program()
    with p.graph("main", inputs={"x": TensorType((2,), "float32")}) as g:
        g.outputs({"y": scale_op(g["x"])})
    with pytest.raises(KernelError, match="returned float64, but the op's type says float32"):
        rt.run(p, {"x": np.ones(2, np.float32)})


# -- state ---------------------------------------------------------------------------------------

def _counter() -> Program:
    p = Program()
    with p.graph("main", inputs={"step": TensorType((), "int64")},
                 state={"count": np.array(0, np.int64)}) as g:
        new = coreai.broadcasting_add(g["count"], g["step"])
        g.outputs({"value": new}, state={"count": new})
    return p


def test_counter_state_continues_across_calls_and_resets():
    p = _counter()
    assert p.input_names == ["step"] and p.state_names == ["count"]
    values = [int(p.run({"step": np.array(2)})["value"]) for _ in range(5)]
    assert values == [2, 4, 6, 8, 10]
    assert int(p.state["count"]) == 10
    p.reset_state()
    assert int(p.run({"step": np.array(1)})["value"]) == 1


def test_explicit_state_is_used_and_updated_instead():
    p = _counter()
    mine = {"count": np.array(100, np.int64)}
    assert int(p.run({"step": np.array(1)}, state=mine)["value"]) == 101
    assert int(mine["count"]) == 101
    assert int(p.state["count"]) == 0  # the program's own state is untouched
    with pytest.raises(RuntimeInputError, match="unknown state 'cont'; did you mean 'count'"):
        p.run({"step": np.array(1)}, state={"cont": np.array(1)})
    with pytest.raises(RuntimeInputError, match=r"state count.*element type int32, expected int64"):
        p.run({"step": np.array(1)}, state={"count": np.array(1, np.int32)})


def test_cache_append_state_like_a_decode_loop():
    """A fixed-size cache written at a position that advances every call."""
    p = Program()
    with p.graph("main", inputs={"token": TensorType((1, 2), "float32")},
                 state={"cache": np.zeros((8, 2), np.float32),
                        "pos": np.zeros(1, np.int64)}) as g:
        pos = g["pos"]
        end = coreai.broadcasting_add(pos, 1)
        cache = coreai.slice_update(g["cache"], g["token"], pos, end, axes=[0], strides=[1])
        g.outputs({"seen": coreai.reduce_sum(cache, axes=[0])},
                  state={"cache": cache, "pos": end})
    tokens = [np.full((1, 2), i + 1, np.float32) for i in range(5)]
    sums = [p.run({"token": t})["seen"] for t in tokens]
    np.testing.assert_array_equal(p.state["cache"][:5, 0], [1, 2, 3, 4, 5])
    np.testing.assert_array_equal(p.state["cache"][5:], 0)
    assert [s[0] for s in sums] == [1, 3, 6, 10, 15]
    p.reset_state()
    assert int(p.state["pos"][0]) == 0 and not p.state["cache"].any()


def test_state_is_not_written_when_a_kernel_fails():
    p = Program()
    with p.graph("main", inputs={"d": TensorType((), "int32")},
                 state={"n": np.array(10, np.int32)}) as g:
        new = coreai.broadcasting_divide(g["n"], g["d"])
        g.outputs({"q": new}, state={"n": new})
    with pytest.raises(KernelError, match="division by zero"):
        p.run({"d": np.array(0, np.int32)})
    assert int(p.state["n"]) == 10
    assert int(p.run({"d": np.array(2, np.int32)})["q"]) == 5


def test_state_with_a_dynamic_type_shares_symbols_with_the_inputs():
    """A mutated input with a dynamic dim: its state keeps the dim (the initial array is one
    value of it), so later runs pass state of other sizes; a size disagreeing with an input's
    binding of the same symbol is reported before anything runs."""
    n = Dim("n", min=1)
    p = Program()
    with p.graph("main", inputs={"row": TensorType((n,), "float32")}) as g:
        table = p.declare_state(g, "table", np.zeros((2, 3), np.float32),
                                type=TensorType((2, n), "float32"))
        zero, one = coreai.constant(np.zeros(1, np.int64)), coreai.constant(np.ones(1, np.int64))
        new = coreai.slice_update(table, coreai.expand_dims(g["row"], [0]), zero, one,
                                  axes=[0], strides=[1])
        g.outputs({"total": coreai.reduce_sum(new, axes=[0])}, state={"table": new})
    assert p.graphs["main"].state_inputs["table"].type == TensorType((2, n), "float32")
    np.testing.assert_array_equal(p.run({"row": np.ones(3, np.float32)})["total"], [1, 1, 1])
    mine = {"table": np.full((2, 5), 2, np.float32)}
    out = p.run({"row": np.arange(5, dtype=np.float32)}, state=mine)["total"]
    np.testing.assert_array_equal(out, np.arange(5) + 2)
    np.testing.assert_array_equal(mine["table"][0], np.arange(5))
    with pytest.raises(RuntimeInputError, match=r"state table.*\?n = 3 here but 4 in 'row'"):
        p.run({"row": np.ones(4, np.float32)})  # the held state is still 2 x 3
    with pytest.raises(ValueError, match="not a value of the declared type"):
        p.declare_state(g, "other", np.zeros((3, 3), np.float32),
                        type=TensorType((2, n), "float32"))


# -- plan once -----------------------------------------------------------------------------------

def test_plans_are_built_once_and_invalidated_on_request(monkeypatch):
    p = _affine_program()
    rt = Runtime()
    lookups = []
    real_get = rt.kernels.get
    monkeypatch.setattr(rt.kernels, "get", lambda name: lookups.append(name) or real_get(name))
    inputs = {"x": np.ones((2, 3), np.float32), "b": np.zeros(3, np.float32)}
    rt.run(p, inputs)
    first = rt.plan(p)
    n = len(lookups)
    assert n == 4  # mul, add, relu, and the constant (evaluated once, when planning)
    for _ in range(5):
        rt.run(p, inputs)
    assert len(lookups) == n and rt.plan(p) is first
    p.invalidate()
    assert rt.plan(p) is not first and len(lookups) == 2 * n
    rt.register_kernel("coreai.relu", lambda x: x, allow_override=True)  # kernels changed
    assert rt.plan(p) is not first
    np.testing.assert_array_equal(rt.run(p, inputs)["z"], np.full((2, 3), 2, np.float32))


def test_a_long_chain_does_not_hold_its_intermediates():
    """1000 ops: each intermediate is released after its last use."""
    rt = Runtime()
    alive: list[weakref.ref] = []
    peak = [0]

    @rt.register_kernel("coreai.neg", allow_override=True)
    def neg(x):
        gc.collect() if len(alive) % 250 == 0 else None
        peak[0] = max(peak[0], sum(r() is not None for r in alive[-20:]))
        out = -x
        alive.append(weakref.ref(out))
        return out

    p = Program()
    with p.graph("main", inputs={"x": TensorType((64,), "float32")}) as g:
        v = g["x"]
        for _ in range(1000):
            v = coreai.neg(v)
        g.outputs({"y": v})
    out = rt.run(p, {"x": np.ones(64, np.float32)})
    np.testing.assert_array_equal(out["y"], np.ones(64, np.float32))
    assert len(alive) == 1000
    assert peak[0] <= 1  # only the operand of the running op is alive
    assert sum(r() is not None for r in alive) == 1  # the output


# -- custom kernels ------------------------------------------------------------------------------

def _scaled(scale_op) -> Program:
    p = Program()
    with p.graph("main", inputs={"x": TensorType((3,), "float32")}) as g:
        g.outputs({"y": scale_op(g["x"], factor=1.0)})
    return p


def test_runtime_kernels_are_isolated(scale_op):
    p = _scaled(scale_op)
    a, b = Runtime(), Runtime()
    a.register_kernel("test_rt.scale", lambda x, *, factor: x * 2)
    b.register_kernel("test_rt.scale", lambda x, *, factor: x * 3)
    x = np.ones(3, np.float32)
    np.testing.assert_array_equal(a.run(p, {"x": x})["y"], 2 * x)
    np.testing.assert_array_equal(b.run(p, {"x": x})["y"], 3 * x)
    for rt in (default_runtime(), Runtime()):
        assert rt.kernel_for("test_rt.scale") is None
        with pytest.raises(MissingKernelError):
            rt.run(p, {"x": x})
    with pytest.raises(MissingKernelError):
        p.run({"x": x})


def test_duplicate_and_malformed_registrations(scale_op):
    rt = Runtime()

    @rt.register_kernel("test_rt.scale")
    def first(x, *, factor):
        return x * factor

    with pytest.raises(ValueError, match=r"already registered .*first.*allow_override"):
        rt.register_kernel("test_rt.scale", lambda x, *, factor: x)
    with pytest.raises(ValueError, match="already registered"):
        rt.register_kernel("coreai.relu", lambda x: x)  # a default kernel
    rt.register_kernel("coreai.relu", lambda x: x + 1, allow_override=True)
    assert default_runtime().kernel_for("coreai.relu") is DEFAULT_TABLE.get("coreai.relu")
    for bad in ("scale", "test rt.scale", "", "ns."):
        with pytest.raises(ValueError, match=r"namespace\.op_name"):
            rt.register_kernel(bad, lambda x: x)


def test_default_table_is_frozen(scale_op):
    """Like the built-in lowering table: kernels go on a Runtime, never process-wide."""
    with pytest.raises(RuntimeError, match=r"default table kernel registry is frozen.*Runtime"):
        DEFAULT_TABLE.register("test_rt.scale", lambda x, *, factor: x * factor)
    with pytest.raises(RuntimeError, match="frozen"):
        DEFAULT_TABLE.register("coreai.relu", lambda x: x, allow_override=True)
    with pytest.raises(RuntimeError, match="frozen"):
        DEFAULT_TABLE.update(Runtime(kernels={"test_rt.scale": lambda x, *, factor: x}).kernels)
    assert "test_rt.scale" not in DEFAULT_TABLE


def test_runtimes_in_threads_keep_their_own_kernels(scale_op):
    p = _scaled(scale_op)
    errors: list[BaseException] = []
    barrier = threading.Barrier(6)

    def work(factor: int) -> None:  # the op's own factor attribute is 1.0
        try:
            rt = Runtime()
            rt.register_kernel("test_rt.scale",
                               lambda x, *, factor, mine=factor: x * np.float32(mine))
            barrier.wait()
            for i in range(30):
                x = np.full(3, i, np.float32)
                np.testing.assert_array_equal(rt.run(p, {"x": x})["y"], x * factor)
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(f,)) for f in range(2, 8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert DEFAULT_TABLE.get("test_rt.scale") is None
