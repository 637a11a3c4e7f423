"""The runtime never returns silently wrong results (issue 18, part B and D.13).

Each test reproduces a failure the reliability campaign found: stale plans after an edit,
state aliasing caller arrays, lost state updates under threads, activations at infinities,
out-of-range indices wrapping, and raw exceptions from odd inputs.
"""

from __future__ import annotations

import copy
import threading
import time
import warnings
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest
import scipy.special
import torch

from coreai_core import Program, RuntimeInputError, TensorType, parse
from coreai_core._builder import insertion_point
from coreai_core.dialects import coreai
from coreai_core.runtime import KernelError, Runtime

F32 = TensorType((2, 3), "float32")
X = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5


def _program() -> Program:
    """y = relu(x + 1) and z = softmax(x, axis=1)."""
    p = Program()
    with p.graph("main", inputs={"x": F32}) as g:
        g.outputs({"y": coreai.relu(coreai.broadcasting_add(g["x"], 1.0)),
                   "z": coreai.softmax(g["x"], axis=1)})
    return p


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _op(p: Program, name: str):
    return next(op for op in p.graphs["main"].ops if op.name == name)


# -- 4. every public edit makes the next run fresh ----------------------------------------------

def _set_attribute(p: Program) -> np.ndarray:
    _op(p, "coreai.softmax").attributes["axis"] = 0
    return _softmax(X, 0)


def _replace_attributes(p: Program) -> np.ndarray:
    _op(p, "coreai.softmax").attributes = {"axis": 0}
    return _softmax(X, 0)


def _set_operand(p: Program) -> np.ndarray:
    relu = _op(p, "coreai.relu")
    relu.operands[0] = p.graphs["main"]["x"]
    return _softmax(X, 1)  # z unchanged; y checked by the caller below


def _replace_operands(p: Program) -> np.ndarray:
    softmax = _op(p, "coreai.softmax")
    softmax.operands = [_op(p, "coreai.relu").result]
    return _softmax(np.maximum(X + 1, 0), 1)


def _builder_append_and_outputs(p: Program) -> np.ndarray:
    g = p.graphs["main"]
    with insertion_point(g):
        z = coreai.neg(g.output_values["z"])
    g.outputs({"y": g.output_values["y"], "z": z})
    return -_softmax(X, 1)


def _remove_op(p: Program) -> np.ndarray:
    g = p.graphs["main"]
    softmax = _op(p, "coreai.softmax")
    g.outputs({"y": g.output_values["y"], "z": g["x"]})
    g.ops.remove(softmax)
    return X


def _output_dict_edit(p: Program) -> np.ndarray:
    g = p.graphs["main"]
    g.output_values["z"] = g["x"]
    return X


def _rebind_weight(p: Program) -> np.ndarray:
    return np.full((2, 3), 7.0, np.float32)  # see test_weight_edits_make_runs_fresh


EDITS: list[Callable[[Program], np.ndarray]] = [
    _set_attribute, _replace_attributes, _set_operand, _replace_operands,
    _builder_append_and_outputs, _remove_op, _output_dict_edit,
]


@pytest.mark.parametrize("edit", EDITS, ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "interpreted"])
def test_every_public_edit_makes_the_next_run_fresh(edit, compiled: bool) -> None:
    p = _program()
    runtime = Runtime(compiled=compiled)
    before = runtime.run(p, {"x": X})
    np.testing.assert_allclose(before["z"], _softmax(X, 1), rtol=1e-6)
    want_z = edit(p)
    after = runtime.run(p, {"x": X})
    np.testing.assert_allclose(after["z"], want_z, rtol=1e-6)
    want_y = np.maximum(X, 0) if edit is _set_operand else np.maximum(X + 1, 0)
    np.testing.assert_array_equal(after["y"], want_y)
    assert p == parse(str(p))  # the edited program is still a well-formed program


def test_weight_edits_make_runs_fresh() -> None:
    p = Program()
    ref = p.add_weight("w", np.ones((2, 3), np.float32))
    with p.graph("main", inputs={"x": F32}) as g:
        g.outputs({"y": coreai.broadcasting_add(g["x"], coreai.constant(ref))})
    np.testing.assert_array_equal(p.run({"x": X})["y"], X + 1)
    p.weights["w"] = np.full((2, 3), 7.0, np.float32)
    np.testing.assert_array_equal(p.run({"x": X})["y"], X + 7)
    # writing into a weight's array in place is invisible to the IR: invalidate() says so
    p.weights["w"][...] = 3.0
    p.invalidate()
    np.testing.assert_array_equal(p.run({"x": X})["y"], X + 3)


def test_added_input_and_region_edits_make_runs_fresh() -> None:
    p = Program()
    with p.graph("main", inputs={"x": F32}) as g:
        (y,) = coreai.if_(coreai.constant(True), [g["x"]], then_branch=coreai.neg,
                          else_branch=lambda a: a)
        g.outputs({"y": y})
    np.testing.assert_array_equal(p.run({"x": X})["y"], -X)
    region = p.graphs["main"].ops[-1].attributes["then_branch"]
    region.ops[0].name = "coreai.exp"
    np.testing.assert_allclose(p.run({"x": X})["y"], np.exp(X), rtol=1e-6)
    g = p.graphs["main"]
    b = g.add_input("b", F32)
    with insertion_point(g):
        g.outputs({"y": coreai.broadcasting_add(g.output_values["y"], b)})
    np.testing.assert_allclose(p.run({"x": X, "b": X})["y"], np.exp(X) + X, rtol=1e-6)


def test_a_copied_program_reports_its_edits_to_the_copy() -> None:
    p = _program()
    p.run({"x": X})
    q = copy.deepcopy(p)
    q.run({"x": X})
    _op(q, "coreai.softmax").attributes["axis"] = 0
    np.testing.assert_allclose(q.run({"x": X})["z"], _softmax(X, 0), rtol=1e-6)
    np.testing.assert_allclose(p.run({"x": X})["z"], _softmax(X, 1), rtol=1e-6)


def test_runs_without_edits_reuse_the_plan() -> None:
    p = _program()
    runtime = Runtime()
    runtime.run(p, {"x": X})
    plan = runtime.plan(p)
    runtime.run(p, {"x": X})
    assert runtime.plan(p) is plan
    _op(p, "coreai.softmax").attributes["axis"] = 0
    assert runtime.plan(p) is not plan


# -- 5. state never shares memory with the caller's arrays --------------------------------------

def _copy_into_state() -> Program:
    """buf <- x (what torch's buf.copy_(x) converts to); outputs buf's new value."""
    p = Program()
    with p.graph("main", inputs={"x": TensorType((3,), "float32")},
                 state={"buf": np.zeros(3, np.float32)}) as g:
        g.outputs({"out": g["x"]}, state={"buf": g["x"]})
    return p


def test_state_never_aliases_inputs_outputs_or_a_state_dict() -> None:
    p = _copy_into_state()
    x = np.array([1, 2, 3], np.float32)
    out = p.run({"x": x})["out"]  # the input itself, as torch's `return x` would give
    assert not np.shares_memory(p.state["buf"], x)
    assert not np.shares_memory(p.state["buf"], out)
    x[:] = 100
    out[:] = -100
    np.testing.assert_array_equal(p.state["buf"], [1, 2, 3])
    mine = {"buf": np.zeros(3, np.float32)}
    y = np.array([4, 5, 6], np.float32)
    p.run({"x": y}, state=mine)
    assert not np.shares_memory(mine["buf"], y)
    y[:] = 0
    np.testing.assert_array_equal(mine["buf"], [4, 5, 6])


def test_declared_initial_state_is_the_programs_own_copy() -> None:
    init = np.zeros(3, np.float32)
    p = Program()
    with p.graph("main", inputs={"x": TensorType((3,), "float32")},
                 state={"buf": init}) as g:
        new = coreai.broadcasting_add(g["buf"], g["x"])
        g.outputs({"y": new}, state={"buf": new})
    init[:] = 9
    p.reset_state()
    np.testing.assert_array_equal(p.state["buf"], np.zeros(3, np.float32))


# -- 9. concurrent runs never lose a state update -----------------------------------------------

def test_concurrent_runs_on_one_program_keep_every_state_update() -> None:
    p = Program()
    with p.graph("main", inputs={"step": TensorType((), "int64")},
                 state={"count": np.zeros((), np.int64)}) as g:
        new = coreai.broadcasting_add(g["count"], g["step"])
        g.outputs({"count": new}, state={"count": new})
    runtime = Runtime(compiled=False)

    @runtime.register_kernel("coreai.broadcasting_add", allow_override=True)
    def slow_add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        time.sleep(1e-4)  # lets the other threads run between reading and writing the state
        return np.add(a, b)

    threads, runs = 6, 200
    start = threading.Barrier(threads)

    def work() -> None:
        start.wait()
        for _ in range(runs):
            runtime.run(p, {"step": np.int64(1)})

    pool = [threading.Thread(target=work) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert int(p.state["count"]) == threads * runs


# -- 8. activations at +-inf and NaN take their mathematical limits -----------------------------

FLOATS = [np.float16, np.float32, np.float64]


def _at_extremes(fn64: Callable[[np.ndarray], np.ndarray], dtype: type) -> np.ndarray:
    """The limits at +inf and -inf, from the function at float64's largest finite magnitudes:
    a value the dtype cannot hold means the function grows without bound there (+-inf);
    otherwise these functions have saturated (to 1, 0 or -0.0) and the value is the limit."""
    big = float(np.finfo(np.float64).max)
    with np.errstate(all="ignore"):
        v = fn64(np.array([big, -big], np.float64))
        return np.where(np.abs(v) >= float(np.finfo(dtype).max), np.sign(v) * np.inf,
                        v).astype(dtype)


ACTIVATIONS: list[tuple[str, Callable[..., object], Callable[[np.ndarray], np.ndarray]]] = [
    ("relu", coreai.relu, lambda x: np.maximum(x, 0)),
    ("sigmoid", coreai.sigmoid, scipy.special.expit),
    ("tanh", coreai.tanh, np.tanh),
    ("silu", coreai.silu, lambda x: x * scipy.special.expit(x)),
    ("gelu", coreai.gelu, lambda x: x * scipy.special.ndtr(x)),
    ("gelu_tanh", lambda v: coreai.gelu(v, approximate="tanh"),
     lambda x: x * scipy.special.ndtr(x)),  # same limits as the exact form
]


def _run_unary(build: Callable[..., object], x: np.ndarray) -> np.ndarray:
    p = Program()
    with p.graph("main", inputs={"x": TensorType(x.shape, x.dtype)}) as g:
        g.outputs({"y": build(g["x"])})
    return p.run({"x": x})["y"]


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.__name__)
@pytest.mark.parametrize("name,build,fn64", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activations_take_their_limits_at_infinity(name, build, fn64, dtype) -> None:
    got = _run_unary(build, np.array([np.inf, -np.inf, np.nan], dtype))
    want = _at_extremes(fn64, dtype)
    np.testing.assert_array_equal(got[:2], want)
    np.testing.assert_array_equal(np.signbit(got[:2]), np.signbit(want))  # -0.0, not +0.0
    assert np.isnan(got[2])


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_of_a_row_with_one_inf_is_its_limit(op: str) -> None:
    x = np.array([[np.inf, 1.0, -2.0], [1.0, 2.0, 3.0], [np.inf, np.inf, 0.0]], np.float32)
    got = _run_unary(lambda v: getattr(coreai, op)(v, axis=1), x)
    # the limit as the +inf entry grows: the value with the largest finite float there
    big = x[:1].astype(np.float64)
    big[0, 0] = np.finfo(np.float64).max
    with np.errstate(all="ignore"):
        want_first = torch.__dict__[op](torch.from_numpy(big), 1).numpy()[0].astype(np.float32)
    np.testing.assert_array_equal(got[0], want_first)
    ref = torch.__dict__[op](torch.from_numpy(x[1:2]), 1).numpy()[0]
    np.testing.assert_allclose(got[1], ref, rtol=1e-6)
    assert np.isnan(got[2]).all()  # two +inf: no limit


# -- 6. out-of-range indices are errors, naming the op, the index and the range -----------------

def _gather(build: Callable[..., object], x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    p = Program()
    with p.graph("main", inputs={"x": TensorType(x.shape, "float32"),
                                 "i": TensorType(idx.shape, "int64")}) as g:
        g.outputs({"y": build(g["x"], g["i"])})
    return p.run({"x": x, "i": idx})["y"]


INDEXERS = {
    "gather": lambda x, i, w: coreai.gather(x, i, axis=0, wrap_negative=w),
    "gather_along_axis": lambda x, i, w: coreai.gather_along_axis(x, i, axis=0,
                                                                   wrap_negative=w),
    "scatter_along_axis": lambda x, i, w: coreai.scatter_along_axis(
        x, i, coreai.broadcast_to(coreai.constant(9.0), [1, 2]), axis=0, wrap_negative=w),
}


@pytest.mark.parametrize("name", list(INDEXERS))
def test_negative_indices_wrap_only_when_asked(name: str) -> None:
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    idx = np.array([[-1, 0]]) if name != "gather" else np.array([-1])
    build = INDEXERS[name]
    wrapped = _gather(lambda a, i: build(a, i, True), x, idx)
    positive = _gather(lambda a, i: build(a, i, True), x, idx % 3)
    np.testing.assert_array_equal(wrapped, positive)
    with pytest.raises(KernelError, match=rf"coreai\.{name}.*index -1 is out of range for "
                                          r"axis 0 of size 3; valid indices: \[0, 3\)"):
        _gather(lambda a, i: build(a, i, False), x, idx)
    for bad, valid in ((3, r"\[-3, 3\)"), (-4, r"\[-3, 3\)")):
        with pytest.raises(KernelError, match=rf"index {bad} is out of range.*{valid}"):
            _gather(lambda a, i: build(a, i, True), x, np.full_like(idx, bad))


@pytest.mark.parametrize("op", ["gather_nd", "scatter_nd"])
def test_nd_indices_out_of_range_are_errors(op: str) -> None:
    x = np.arange(6, dtype=np.float32).reshape(3, 2)

    def build(a, i):
        if op == "gather_nd":
            return coreai.gather_nd(a, i)
        return coreai.scatter_nd(a, i, coreai.broadcast_to(coreai.constant(9.0), [1, 2]))

    np.testing.assert_array_equal(_gather(build, x, np.array([[-1]])),
                                  _gather(build, x, np.array([[2]])))
    with pytest.raises(KernelError, match=rf"coreai\.{op}.*index -4 is out of range for axis 0 "
                                          r"of size 3; valid indices: \[-3, 3\)"):
        _gather(build, x, np.array([[-4]]))


# -- 13. odd run() inputs give one clear RuntimeInputError -------------------------------------

def _exp_program() -> Program:
    p = Program()
    with p.graph("main", inputs={"x": TensorType((2, 2), "float32")}) as g:
        g.outputs({"y": coreai.exp(g["x"])})
    return p


def _sparse(layout: str) -> torch.Tensor:
    with warnings.catch_warnings():  # "sparse CSR support is in beta"
        warnings.simplefilter("ignore", UserWarning)
        return getattr(torch.eye(2), {"coo": "to_sparse"}.get(layout, f"to_sparse_{layout}"))()


@pytest.mark.parametrize("value,message", [
    ([[1.0, 2.0], [3.0]], "ragged list"),
    (torch.zeros(2, 2, device="meta"), "meta tensor"),
    (np.ma.masked_array(np.zeros((2, 2), np.float32), mask=[[0, 1], [0, 0]]),
     r"masked arrays are not accepted; pass x\.filled\(value\)"),
    (_sparse("coo"), r"layout torch\.sparse_coo\): sparse tensors are not accepted "
                               r"\(the runtime computes on dense arrays\); pass "
                               r"x\.to_dense\(\)"),
    (_sparse("csr"), r"torch\.sparse_csr\): sparse tensors .*x\.to_dense\(\)"),
    (_sparse("csc"), r"torch\.sparse_csc\): sparse tensors .*x\.to_dense\(\)"),
], ids=["ragged", "meta", "masked", "sparse-coo", "sparse-csr", "sparse-csc"])
def test_odd_inputs_raise_a_clear_input_error(value: object, message: str) -> None:
    with pytest.raises(RuntimeInputError, match=message):
        _exp_program().run({"x": value})


def test_an_output_too_large_to_allocate_names_the_op_and_the_size() -> None:
    p = Program()
    with p.graph("main", inputs={"x": TensorType((), "float64")}) as g:
        huge = coreai.broadcast_to(g["x"], [2**22, 2**22])  # a view until copied: 128 TiB
        g.outputs({"view": huge, "computed": coreai.exp(huge)})
    with pytest.raises(KernelError, match=r"coreai\.exp .*ran out of memory.*128\.? ?TiB"):
        p.run({"x": np.float64(1.0)})
    q = Program()
    with q.graph("main", inputs={"x": TensorType((), "float64")}) as g:
        g.outputs({"view": coreai.broadcast_to(g["x"], [2**22, 2**22])})
    with pytest.raises(KernelError, match=r"output 'view' .*coreai\.broadcast_to does not fit "
                                          r"in memory: 131072\.00 GiB"):
        q.run({"x": np.float64(1.0)})


@pytest.mark.parametrize("pivot", [0, 4])
def test_lu_pivots_out_of_range_are_errors_as_in_torch(pivot: int) -> None:
    pivots = np.array([pivot, 2, 3], np.int32)
    with pytest.raises(RuntimeError, match="between 1 and"):
        torch.lu_unpack(torch.eye(3), torch.from_numpy(pivots))
    p = Program()
    with p.graph("main", inputs={"p": TensorType((3,), "int32")}) as g:
        g.outputs({"perm": coreai.pivots_to_permutation(g["p"], size=3)})
    np.testing.assert_array_equal(p.run({"p": np.array([1, 2, 3], np.int32)})["perm"],
                                  [0, 1, 2])
    with pytest.raises(KernelError, match=rf"coreai\.pivots_to_permutation .*pivot {pivot} is "
                                          r"out of range.*valid pivots: \[1, 3\]"):
        p.run({"p": pivots})


# -- 14. an intermediate beyond float32's range: each op's exact result, rounded once ----------

def test_an_overflowing_layer_norm_gives_the_programs_exact_float32_value() -> None:
    """Linear -> LayerNorm -> softmax at inputs near 3e38 (issue 28). LayerNorm converts to
    float32 ops; its variance, the mean of squared deviations near 1e76, is beyond float32's
    range, so the op's exact result rounded to float32 is +inf (IEEE rounding, not an error
    of the runtime), rsqrt(+inf) is exactly 0, the normalized values exactly 0, and the
    output is exactly LayerNorm's bias: softmax(bias). torch's fused layer_norm kernel gives
    NaN instead (how depends on its CPU kernel); the runtime promises the program's value."""
    from coreai_torch import TorchConverter

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3),
                                torch.nn.Softmax(-1)).eval()
    with torch.no_grad():
        model[1].weight.uniform_(0.5, 2.0)
        model[1].bias.uniform_(-3.0, 3.0)
    x = np.array([[3e38, 3e38, 3e38, 3e38], [3e38, -1e38, 2e38, 0.5]], np.float32)
    ep = torch.export.export(model, (torch.zeros(2, 4),))
    program = TorchConverter().add_exported_program(ep).to_coreai()
    got = program.run([x])["softmax"]

    # independently: the Linear output in float64 (its rounding to float32 cannot bring the
    # squared deviations below float32's largest value: checked exactly, with Fractions)
    w, b = (t.detach().double().numpy() for t in (model[0].weight, model[0].bias))
    y = (x.astype(np.float64) @ w.T + b).astype(np.float32)
    largest = Fraction(float(np.finfo(np.float32).max))
    for row in y:
        exact = [Fraction(float(v)) for v in row]
        mean = sum(exact) / len(exact)
        assert sum((v - mean) ** 2 for v in exact) / len(exact) > largest
    beta = model[1].bias.detach().double().numpy()
    want = np.exp(beta - beta.max()) / np.exp(beta - beta.max()).sum()
    # the runtime's softmax computes exp, sum and divide in float32, each within an ulp or
    # two, where ``want`` is float64: 4 float32 epsilons
    np.testing.assert_allclose(got, np.broadcast_to(want, got.shape),
                               rtol=4 * np.finfo(np.float32).eps, atol=0)
    assert np.isfinite(got).all()
