"""Program.to_precision: a float32 program computing in float16/bfloat16 like a device.

The arithmetic model (coreai_core/precision.py, docs/float16.md): every op rounds its result to
the reduced type; reductions, matmuls and convolutions accumulate in float32. The expected
values below are computed with numpy from that model, independently of the runtime.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coreai_core import Composite, Dim, DType, Location, Program, TensorType, WeightRef, parse
from coreai_core.dialects import coreai
from coreai_core.precision import reduce_precision
from coreai_core.runtime import Runtime
from coreai_core.text import result_names

F16, F32 = np.float16, np.float32
BF16 = ml_dtypes.bfloat16


def _mlp(n: int = 5, k: int = 47) -> Program:
    """y = softmax(exp(x) @ w + b), with a weight, a small constant, located ops."""
    rng = np.random.default_rng(0)
    p = Program()
    p.add_weight("w", rng.standard_normal((k, 3)).astype(F32))
    with p.graph("main", inputs={"x": TensorType((n, k), F32)}) as g:
        w = coreai.constant(p.add_weight("b", rng.standard_normal(3).astype(F32)))
        e = coreai.exp(g["x"], loc=Location("model.py", 3, "enc.act"))
        m = coreai.batch_matmul(e, coreai.constant(WeightRef("w")),
                                loc=Location("model.py", 4, "enc.fc"))
        s = coreai.softmax(coreai.broadcasting_add(m, w), axis=1,
                           loc=Location("model.py", 5, "head"))
        g.outputs({"y": s})
    return p


def _model(x: np.ndarray, w: np.ndarray, b: np.ndarray, dtype: type = F16) -> np.ndarray:
    """The arithmetic model in numpy: operands rounded, float32 (or float64 for the exact
    accumulation) compute, result rounded once."""
    def r(a: np.ndarray) -> np.ndarray:
        return np.asarray(a, F32).astype(dtype)

    with np.errstate(all="ignore"):  # large x: exp overflows to inf, as in the program
        x, w, b = r(x), r(w), r(b)
        e = r(np.exp(x.astype(F32)))
        m = r(e.astype(np.float64) @ w.astype(np.float64))
        a = r(m.astype(F32) + b.astype(F32))
        z = a.astype(np.float64)
        z = np.exp(z - z.max(axis=1, keepdims=True))
        return r(z / z.sum(axis=1, keepdims=True)).astype(F32)


def test_to_precision_types_every_float32_value_and_keeps_the_boundary() -> None:
    p = _mlp()
    before = str(p)
    h = p.to_precision("float16")
    assert str(p) == before  # the original is untouched
    h.verify()
    g = h.graphs["main"]
    assert g.inputs["x"].type.element_type is DType.float32
    assert g.output_values["y"].type.element_type is DType.float32
    inner = [op for op in g.ops if op.name != "coreai.cast"]
    assert all(r.type.element_type is DType.float16 for op in inner for r in op.results)
    assert {k: v.dtype for k, v in h.weights.items()} == {"w": F16, "b": F16}
    assert parse(str(h), dict(h.weights)) == h


def test_to_precision_computes_the_documented_model() -> None:
    p = _mlp()
    x = np.random.default_rng(1).uniform(-3, 3, (5, 47)).astype(F32)
    got = p.to_precision("float16").run({"x": x})["y"]
    want = _model(x, p.weights["w"], p.weights["b"])
    # float32 accumulation vs the model's float64: the rounded results may differ where the
    # exact value lies within float32 rounding of a float16 tie (one float16 ulp at most)
    np.testing.assert_allclose(got, want, rtol=2 ** -10, atol=0)


@pytest.mark.parametrize("kind", ["batch_matmul", "reduce_sum", "reduce_mean", "conv", "scan"])
def test_reductions_accumulate_in_float32_and_round_once(kind: str) -> None:
    """4096 ones sum to 4096 in float32; a float16 accumulator stops at 2048 (2048 + 1 rounds
    back to 2048), so only float32 accumulation gives the exact, representable result."""
    n = 4096
    p = Program()
    with p.graph("main", inputs={"x": TensorType((1, 1, n), F32)}) as g:
        x = g["x"]
        y = {"batch_matmul": lambda: coreai.batch_matmul(x, coreai.constant(np.ones((n, 1),
                                                                                 F32))),
             "reduce_sum": lambda: coreai.reduce_sum(x, axes=[2]),
             "reduce_mean": lambda: coreai.broadcasting_mul(
                 coreai.reduce_mean(x, axes=[2]), float(n)),
             "conv": lambda: coreai.conv(x, coreai.constant(np.ones((1, 1, n), F32))),
             "scan": lambda: coreai.scan(x, axis=2)}[kind]()
        g.outputs({"y": y})
    ones = np.ones((1, 1, n), F32)
    got = p.to_precision("float16").run({"x": ones})["y"]
    assert float(np.max(got)) == float(n)


def test_keep_forms_name_ops_kinds_locations_and_module_paths() -> None:
    p = _mlp()
    names = {op.name: n for op in p.graphs["main"].ops
             for r, n in result_names(p.graphs["main"]).items() if r.owner is op}

    def kept(keep: object) -> set[str]:
        h = p.to_precision("float16", keep=keep)
        return {op.name for op in h.graphs["main"].ops
                if op.name not in ("coreai.cast", "coreai.constant")
                and op.results[0].type.element_type is DType.float32}

    assert kept(None) == set()
    assert kept(names["coreai.exp"]) == {"coreai.exp"}
    assert kept(f"main:{names['coreai.exp']}") == {"coreai.exp"}
    assert kept("coreai.softmax") == {"coreai.softmax"}
    assert kept("model.py:4") == {"coreai.batch_matmul"}
    assert kept("src/model.py:4") == {"coreai.batch_matmul"}
    assert kept("enc") == {"coreai.exp", "coreai.batch_matmul"}
    assert kept(["enc.fc", "head"]) == {"coreai.batch_matmul", "coreai.softmax"}
    with pytest.raises(ValueError, match=r"\['nowhere'\] match no op"):
        p.to_precision("float16", keep=["head", "nowhere"])


def test_a_kept_op_reads_the_float32_weight_and_its_result_is_rounded_for_float16_users(
        ) -> None:
    p = _mlp()
    h = p.to_precision("float16", keep="enc.fc")
    # the kept matmul reads @w in float32; nothing else uses @w, so only the float32 one stays
    assert h.weights["w"].dtype == F32 and h.weights["b"].dtype == F16
    x = np.random.default_rng(2).uniform(-3, 3, (5, 47)).astype(F32)
    e = np.exp(x.astype(F16).astype(F32)).astype(F16)
    m = (e.astype(np.float64) @ p.weights["w"].astype(np.float64)).astype(F32)
    b = p.weights["b"].astype(F16).astype(F32)
    a = (m.astype(F16).astype(F32) + b).astype(F16).astype(np.float64)
    z = np.exp(a - a.max(axis=1, keepdims=True))
    want = (z / z.sum(axis=1, keepdims=True)).astype(F16).astype(F32)
    np.testing.assert_allclose(h.run({"x": x})["y"], want, rtol=2 ** -10, atol=0)


def test_keep_io_types_false_declares_float16_inputs_and_outputs() -> None:
    h = _mlp().to_precision("float16", keep_io_types=False)
    g = h.graphs["main"]
    assert g.inputs["x"].type.element_type is DType.float16
    assert g.output_values["y"].type.element_type is DType.float16
    assert not any(op.name == "coreai.cast" for op in g.ops)
    out = h.run({"x": np.zeros((5, 47), F16)})["y"]
    assert out.dtype == F16


def test_bfloat16_precision() -> None:
    p = _mlp()
    x = np.random.default_rng(3).uniform(-3, 3, (5, 47)).astype(F32)
    got = p.to_precision("bfloat16").run({"x": x})["y"]
    want = _model(x, p.weights["w"], p.weights["b"], BF16)
    np.testing.assert_allclose(got, want, rtol=2 ** -7, atol=0)  # one bfloat16 ulp, as above
    with pytest.raises(ValueError, match="precision must be one of"):
        p.to_precision("int8")


def test_integer_and_bool_ops_are_untouched() -> None:
    p = Program()
    with p.graph("main", inputs={"i": TensorType((4,), "int32"),
                                 "x": TensorType((4,), F32)}) as g:
        j = coreai.broadcasting_add(g["i"], 3)
        big = coreai.broadcasting_greater(g["x"], 0.5)
        g.outputs({"j": j, "big": big, "f": coreai.cast(j, F32)})
    h = p.to_precision("float16")
    ops = h.graphs["main"].ops
    add = next(op for op in ops if op.name == "coreai.broadcasting_add")
    assert add.results[0].type == p.graphs["main"].ops[1].results[0].type
    cast = [op for op in ops if op.name == "coreai.cast"]
    # int -> float16 (the program's float), float16 -> float32 at the output
    assert [op.attributes["dtype"] for op in cast][-2:] == [DType.float16, DType.float32]
    i = np.array([1, 2, 3, 2047], np.int32)
    x = np.array([0.1, 0.5, 0.50024, 2.0], F32)
    out = h.run({"i": i, "x": x})
    np.testing.assert_array_equal(out["j"], i + 3)
    # the comparison reads x rounded to float16: 0.50024 rounds to 0.5
    np.testing.assert_array_equal(out["big"], x.astype(F16) > F16(0.5))
    np.testing.assert_array_equal(out["f"], (i + 3).astype(F16).astype(F32))


def test_state_keeps_its_declared_type() -> None:
    p = Program()
    with p.graph("main", inputs={"x": TensorType((3,), F32)},
                 state={"acc": np.zeros(3, F32)}) as g:
        new = coreai.broadcasting_add(g["acc"], coreai.exp(g["x"]))
        g.outputs({"y": new}, state={"acc": new})
    h = p.to_precision("float16")
    h.verify()
    x = np.array([0.1, 1.0, 2.0], F32)
    h.run({"x": x})
    second = h.run({"x": x})["y"]
    e = np.exp(x.astype(F16).astype(F32)).astype(F16).astype(F32)
    first = (np.zeros(3, F32) + e).astype(F16).astype(F32)
    np.testing.assert_array_equal(second, (first + e).astype(F16).astype(F32))
    assert h.state["acc"].dtype == F32 and p.state["acc"].tolist() == [0, 0, 0]


def _control_and_call() -> Program:
    p = Program()
    with p.graph("sq", inputs={"x": TensorType((3,), F32)}, composite=Composite("square")) as g:
        g.outputs({"y": coreai.broadcasting_mul(g["x"], g["x"])})
    with p.graph("main", inputs={"c": TensorType((), "bool"),
                                 "x": TensorType((3,), F32)}) as g:
        (y,) = coreai.if_(g["c"], [g["x"]], lambda v: coreai.broadcasting_mul(v, 1e3),
                          lambda v: coreai.neg(v))
        (z,) = coreai.invoke([coreai.exp(y)], callee="sq")
        g.outputs({"z": z})
    return p


def test_control_flow_runs_in_float32_and_composites_are_called_reduced() -> None:
    p = _control_and_call()
    h = p.to_precision("float16")
    h.verify()
    ops = {op.name: op for op in h.graphs["main"].ops}
    assert ops["coreai.if"].results[0].type.element_type is DType.float32
    assert ops["coreai.exp"].results[0].type.element_type is DType.float16
    assert ops["coreai.invoke"].attributes["callee"] == "sq.float16"
    assert ops["coreai.invoke"].results[0].type.element_type is DType.float16
    assert list(h.graphs) == ["sq.float16", "main"]  # nothing calls the float32 one any more
    assert h.graphs["sq.float16"].composite == p.graphs["sq"].composite
    assert h.graphs["sq.float16"].inputs["x"].type.element_type is DType.float16
    assert parse(str(h)) == h
    x = np.array([0.001, 0.002, 0.0035], F32)
    y = (x * F32(1e3))  # the if runs in float32
    e = np.exp(y.astype(F16).astype(F32)).astype(F16).astype(F32)
    want = (e * e).astype(F16).astype(F32)
    np.testing.assert_array_equal(h.run({"c": np.bool_(True), "x": x})["z"], want)


def test_a_kept_call_runs_its_float32_composite() -> None:
    p = _control_and_call()
    h = p.to_precision("float16", keep="coreai.invoke")
    h.verify()
    call = next(op for op in h.graphs["main"].ops if op.name == "coreai.invoke")
    assert call.attributes["callee"] == "sq" and list(h.graphs) == ["sq", "main"]
    x = np.array([0.001, 0.002, 0.0035], F32)
    e = np.exp((x * F32(1e3)).astype(F16).astype(F32)).astype(F16).astype(F32)
    np.testing.assert_array_equal(h.run({"c": np.bool_(True), "x": x})["z"], e * e)


@settings(max_examples=15, deadline=None)
@given(rows=st.sampled_from([1, 2, 7]), k=st.sampled_from([1, 3, 47]),
       scale=st.sampled_from([1e-3, 1.0, 30.0]))
def test_float16_results_follow_the_model_over_shapes(rows: int, k: int, scale: float) -> None:
    rng = np.random.default_rng(rows * 100 + k)
    p = _mlp(rows, k)
    x = (rng.standard_normal((rows, k)) * scale).astype(F32)
    got = p.to_precision("float16").run({"x": x})["y"]
    want = _model(x, p.weights["w"], p.weights["b"])
    np.testing.assert_allclose(got, want, rtol=2 ** -10, atol=0)  # see the test above


def test_the_runtime_runs_reduced_programs_with_its_own_kernels() -> None:
    h = _mlp().to_precision("float16")
    x = np.ones((5, 47), F32)
    assert Runtime().run(h, {"x": x})["y"].tobytes() == h.run({"x": x})["y"].tobytes()


def _two_entrypoints() -> Program:
    """prefill and decode over a dynamic row count: y = softmax(exp(x))."""
    p = Program()
    rows = Dim("n", 1, 64)
    for name in ("prefill", "decode"):
        with p.graph(name, inputs={"x": TensorType((rows, 4), F32)}) as g:
            g.outputs({"y": coreai.softmax(coreai.exp(g["x"]), axis=1)})
    return p


def test_dynamic_dimensions_and_entrypoint_qualified_names() -> None:
    p = _two_entrypoints()
    h = p.to_precision("float16", keep=["decode:%0", "decode:%1"])
    h.verify()
    for name, exp_type in (("prefill", DType.float16), ("decode", DType.float32)):
        g = h.graphs[name]
        exp = next(op for op in g.ops if op.name == "coreai.exp")
        assert exp.results[0].type.element_type is exp_type
        assert exp.results[0].type.shape == p.graphs[name].inputs["x"].type.shape
    x = np.full((3, 4), 12.0, F32)  # exp(12) = 162755: beyond float16, fine in float32
    assert np.isnan(h.run({"x": x}, entrypoint="prefill")["y"]).all()  # softmax of infs
    np.testing.assert_allclose(h.run({"x": x}, entrypoint="decode")["y"], 0.25)
    assert reduce_precision(p, "float16", "%0").kept == ("prefill:%0", "decode:%0")
