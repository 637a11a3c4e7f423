"""Translation validation: optimize(check=...), the bisection to one rewrite, random inputs."""

from __future__ import annotations

from collections.abc import Sequence

import ml_dtypes
import numpy as np
import pytest

from coreai_core import (
    Dim,
    Location,
    Operation,
    Program,
    RuntimeInputError,
    TensorType,
    Value,
    WeightRef,
)
from coreai_core._ir import ProgramData
from coreai_core.dialects import coreai
from coreai_core.optimizer import (
    Check,
    OptimizationMismatchError,
    PassStats,
    RewritePass,
    Rewriter,
    ValidationReport,
    copy_program,
    default_passes,
    optimize,
    random_inputs,
    validate_optimization,
)

LOCS = [Location("model.py", 10 + i, f"blocks.{i}") for i in range(5)]


def relu_chain() -> Program:
    """y = relu(...relu(relu(x + 0) + 1)... + 4), each relu with its own location."""
    p = Program()
    with p.graph("main", inputs={"x": TensorType((3, 4), "float32")}) as g:
        v = g["x"]
        for i, loc in enumerate(LOCS):
            v = coreai.relu(coreai.broadcasting_add(v, float(i)), loc=loc)
        g.outputs({"y": v})
    return p


def numpy_chain(x: np.ndarray, negate: int | None = None) -> np.ndarray:
    """The relu chain in numpy; relu number ``negate`` (from 0) computes -v instead."""
    v = x
    for i in range(len(LOCS)):
        v = v + np.float32(i)
        v = -v if i == negate else np.maximum(v, 0)
    return v


class WrongThirdRewrite(RewritePass):
    """Rewrites every relu into a new relu, except the third, which becomes a neg (wrong)."""

    name = "wrong_third"

    def begin(self, ctx: object) -> None:
        self.count = 0

    def visit(self, op: Operation, rw: Rewriter) -> Sequence[Value] | None:
        if op.name != "coreai.relu":
            return None
        self.count += 1
        return rw.replacement(op, "coreai.neg" if self.count == 3 else "coreai.relu",
                              op.operands, {})


def test_the_wrong_rewrite_is_named_with_its_op_location_and_error() -> None:
    p = relu_chain()
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    with pytest.raises(OptimizationMismatchError) as info:
        p.optimize(["canonicalize", WrongThirdRewrite(), "dce"], check={"x": x})
    culprit = info.value.report.culprit
    assert culprit is not None
    assert culprit.pass_name == "wrong_third" and culprit.check.pass_index == 1
    assert culprit.rewrite_index == 3
    assert culprit.op == "coreai.relu" and culprit.location == str(LOCS[2])
    assert culprit.graph == "main"
    expected_error = np.abs(numpy_chain(x, negate=2) - numpy_chain(x)).max()
    assert culprit.output.name == "y" and not culprit.output.passed
    np.testing.assert_allclose(culprit.output.max_abs, expected_error, rtol=1e-6)
    text = str(info.value)
    assert "rewrite #3 of 'wrong_third'" in text and "coreai.relu" in text
    assert 'loc("model.py":12 in "blocks.2")' in text
    marked = [line for line in culprit.before.splitlines() if line.startswith(">>")]
    assert len(marked) == 1 and "coreai.relu" in marked[0] and "model.py\":12" in marked[0]
    assert "coreai.neg" in next(line for line in culprit.after.splitlines()
                                if line.startswith(">>"))
    # the program is left as before the failing pass run: canonicalize's result, still right
    assert not any(op.name == "coreai.neg" for op in p.graphs["main"].ops)
    np.testing.assert_allclose(p.run({"x": x})["y"], numpy_chain(x), rtol=1e-6)


def test_a_correct_pipeline_passes_and_reports_each_pass_run() -> None:
    p = relu_chain()
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    report = p.optimize(check=True)
    assert report.validation is not None and report.validation.passed
    names = [c.pass_name for c in report.validation.checks]
    assert names[:5] == ["canonicalize", "constant_folding", "fold_affine", "cse", "dce"]
    assert len(names) == 5 * report.iterations
    assert "PASS" in str(report)
    np.testing.assert_allclose(p.run({"x": x})["y"], numpy_chain(x), rtol=1e-6)


def test_validate_optimization_leaves_the_program_unchanged() -> None:
    p = relu_chain()
    before = copy_program(p)
    report = validate_optimization(p, ["canonicalize", WrongThirdRewrite()])
    assert isinstance(report, ValidationReport) and not report.passed
    assert report.culprit is not None and report.culprit.rewrite_index == 3
    assert p == before
    assert validate_optimization(p).passed and p == before


class BreakAllPass:
    """Not a RewritePass: swaps every relu for a neg in one go."""

    name = "break_all"

    def run(self, program: ProgramData) -> PassStats:
        for op in program.graphs["main"].ops:
            if op.name == "coreai.relu":
                op.name = "coreai.neg"
        program.invalidate()
        return PassStats(rewritten=1)


def test_a_pass_that_is_not_a_rewrite_pass_is_checked_as_a_whole() -> None:
    p = relu_chain()
    with pytest.raises(OptimizationMismatchError) as info:
        p.optimize(["cse", BreakAllPass()], check=Check(seed=3))
    culprit = info.value.report.culprit
    assert culprit is not None and culprit.pass_name == "break_all"
    assert culprit.rewrite_index is None and culprit.op is None
    assert "not a RewritePass" in str(info.value)


def test_bisection_can_be_switched_off() -> None:
    with pytest.raises(OptimizationMismatchError) as info:
        relu_chain().optimize([WrongThirdRewrite()], check=Check(bisect=False))
    culprit = info.value.report.culprit
    assert culprit is not None and culprit.rewrite_index is None
    assert "bisect=False" in culprit.note


def test_state_updates_are_checked() -> None:
    p = Program()
    with p.graph("main", inputs={"x": TensorType((4,), "float32")},
                 state={"total": np.zeros(4, np.float32)}) as g:
        new_total = coreai.relu(coreai.add(g["total"], g["x"]), loc=LOCS[0])
        g.outputs({"y": coreai.add(g["x"], g["x"])}, state={"total": new_total})

    class NegEveryRelu(WrongThirdRewrite):
        name = "neg_relu"

        def visit(self, op: Operation, rw: Rewriter) -> Sequence[Value] | None:
            if op.name != "coreai.relu":
                return None
            return rw.replacement(op, "coreai.neg", op.operands, {})

    with pytest.raises(OptimizationMismatchError) as info:
        p.optimize([NegEveryRelu()], check=True)
    culprit = info.value.report.culprit
    assert culprit is not None and culprit.output.name == "state total"
    assert culprit.rewrite_index == 1 and culprit.location == str(LOCS[0])
    assert [o.name for o in culprit.check.outputs] == ["y", "state total"]
    assert culprit.check.outputs[0].passed


def test_the_reference_is_the_unoptimized_program_on_the_check_inputs() -> None:
    p = relu_chain()
    bad = {"x": np.zeros((2, 2), np.float32)}
    with pytest.raises(RuntimeInputError, match="unoptimized program fails on the given"):
        p.optimize(check=bad)
    with pytest.raises(TypeError, match="check must be True"):
        p.optimize(check="yes")  # type: ignore[arg-type]
    assert not optimize(p, check=False).validation


def test_the_observer_budget_stops_a_pass_after_k_visits() -> None:
    class Budget:
        def __init__(self, k: int) -> None:
            self.k, self.visited, self.rewritten = k, 0, 0

        def visiting(self, op: Operation) -> bool:
            self.visited += 1
            return self.visited <= self.k

        def rewrote(self, op: Operation, new: list[Value]) -> None:
            self.rewritten += 1

    x = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    for k, rewrites in [(0, 0), (3, 1), (8, 2), (9, 3), (100, 5)]:
        p = relu_chain()  # ops: const, add, relu per block: relu i is visit 3 * i + 3
        budget = Budget(k)
        WrongThirdRewrite().run(p, observer=budget)
        assert budget.rewritten == rewrites
        negated = 2 if rewrites >= 3 else None
        np.testing.assert_allclose(p.run({"x": x})["y"], numpy_chain(x, negate=negated),
                                   rtol=1e-6)


# -- random inputs ------------------------------------------------------------------------------

def one_input(t: TensorType) -> Program:
    p = Program()
    with p.graph("main", inputs={"a": t}) as g:
        g.outputs({"y": g["a"]})
    return p


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64", "complex64",
                                   "int8", "int32", "int64", "uint8", "bool"])
def test_random_inputs_follow_the_input_types(dtype: str) -> None:
    t = TensorType((64, 32), dtype)
    a = random_inputs(one_input(t), seed=5)["a"]
    assert a.shape == (64, 32) and a.dtype == t.element_type.numpy
    values = a.astype(np.complex128 if dtype.startswith("complex") else np.float64)
    if dtype == "bool":
        assert 0.4 < values.mean() < 0.6
    elif dtype.startswith(("int", "uint")):
        assert set(np.unique(values)) == {0, 1, 2, 3}
    else:  # standard normal (both parts of a complex)
        for part in (values.real, values.imag) if dtype.startswith("complex") else (values,):
            assert abs(part.mean()) < 0.1 and 0.9 < part.std() < 1.1
    np.testing.assert_array_equal(random_inputs(one_input(t), seed=5)["a"].view(np.uint8),
                                  a.view(np.uint8))  # reproducible by seed


def test_random_inputs_need_sizes_for_dynamic_dims() -> None:
    p = one_input(TensorType((Dim("batch", 1, 8), 3), "float32"))
    with pytest.raises(RuntimeInputError, match=r"input 'a' of @main.*Check\(dims=\{'batch'"):
        random_inputs(p)
    assert random_inputs(p, dims={"batch": 5})["a"].shape == (5, 3)
    with pytest.raises(RuntimeInputError, match="outside its bounds"):
        random_inputs(p, dims={"batch": 9})
    with pytest.raises(RuntimeInputError, match="pass the inputs"):
        random_inputs(one_input(TensorType((Dim(), 3), "float32")))
    report = p.optimize(check=Check(dims={"batch": 2}))
    assert report.validation is not None and report.validation.passed


def test_a_bfloat16_program_passes_its_own_rounding() -> None:
    p = Program()
    with p.graph("main", inputs={"x": TensorType((8,), "bfloat16")}) as g:
        g.outputs({"y": coreai.mul(coreai.mul(g["x"], coreai.constant(
            np.full(8, 3, ml_dtypes.bfloat16))), coreai.constant(
            np.full(8, 1 / 3, ml_dtypes.bfloat16)))})
    report = p.optimize(default_passes(), check=True)
    assert report.validation is not None and report.validation.passed
    # x * 3 * (1/3) -> x: one bfloat16 rounding less, beyond a float32 tolerance of 1e-4
    assert max(o.max_rel for c in report.validation.checks for o in c.outputs) > 1e-3
    assert [op.name for op in p.graphs["main"].ops] == []


def test_copies_share_weight_arrays_but_not_graphs() -> None:
    p = Program()
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    p.add_weight("w", w)
    with p.graph("main", inputs={"x": TensorType((3, 4), "float32")}) as g:
        g.outputs({"y": coreai.add(g["x"], coreai.constant(WeightRef("w")))})
    q = copy_program(p)
    assert q == p and q.weights["w"] is w and q.graphs["main"] is not p.graphs["main"]
    q.graphs["main"].ops.clear()
    assert p.graphs["main"].ops


def test_a_visit_that_edits_a_weight_without_a_replacement_is_named() -> None:
    p = Program()
    p.add_weight("w", np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))
    with p.graph("main", inputs={"x": TensorType((3, 4), "float32")}) as g:
        h = coreai.relu(coreai.add(g["x"], coreai.constant(WeightRef("w"))), loc=LOCS[0])
        g.outputs({"y": coreai.exp(h, loc=LOCS[1])})

    class ShiftWeightAtExp(RewritePass):
        name = "shift_weight"

        def visit(self, op: Operation, rw: Rewriter) -> Sequence[Value] | None:
            if op.name == "coreai.exp":
                data = rw.program.weights["w"]
                assert data is not None
                rw.program.weights["w"] = data + np.float32(1)  # a side effect
            return None

    with pytest.raises(OptimizationMismatchError) as info:
        p.optimize([ShiftWeightAtExp()], check=True)
    culprit = info.value.report.culprit
    assert culprit is not None and culprit.op == "coreai.exp"
    assert culprit.location == str(LOCS[1]) and culprit.rewrite_index is None
    assert culprit.visit_index == 4  # constant, add, relu, exp
    assert "without returning a replacement" in str(culprit)


def test_every_entrypoint_is_checked_and_a_misnamed_one_is_reported() -> None:
    p = Program()
    with p.graph("main", inputs={"x": TensorType((4,), "float32")}) as g:
        g.outputs({"y": coreai.relu(g["x"])})
    with p.graph("decode", inputs={"t": TensorType((2,), "float32")}) as g:
        g.outputs({"z": coreai.relu(g["t"], loc=LOCS[4])})

    class NegDecodeRelu(WrongThirdRewrite):
        def visit(self, op: Operation, rw: Rewriter) -> Sequence[Value] | None:
            if op.name != "coreai.relu" or op.location != LOCS[4]:
                return None
            return rw.replacement(op, "coreai.neg", op.operands, {})

    with pytest.raises(OptimizationMismatchError) as info:
        p.optimize([NegDecodeRelu()], check={"x": np.ones(4, np.float32)})
    culprit = info.value.report.culprit
    assert culprit is not None and culprit.graph == "decode"
    assert culprit.output.name == "@decode z" and culprit.rewrite_index == 1
    with pytest.raises(RuntimeInputError, match="no entrypoint"):
        p.optimize(check=Check(entrypoints=["prefill"]))
    with pytest.raises(RuntimeInputError, match="not among the entrypoints checked"):
        p.optimize(check=Check(inputs={"x": np.ones(4, np.float32)}, entrypoints=["decode"]))
