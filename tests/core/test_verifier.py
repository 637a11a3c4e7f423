"""The verifier: well-formed programs pass; each kind of corruption is reported with the op's name,
its graph and its location."""

from __future__ import annotations

import numpy as np
import pytest

from coreai_core import Location, Program, TensorType, Value, VerificationError, parse
from coreai_core.dialects import coreai
from tests.core.op_samples import showcase_program, t

LOC = Location("model.py", 3, "blocks.0")
WHERE = 'coreai.{op} (op in graph @{graph}) at loc("model.py":3 in "blocks.0")'


def small_program() -> Program:
    """``main(x: f32[2, 3]) -> y = softmax(neg(x) + 1)``, every op located at model.py:3."""
    p = Program()
    with p.graph("main", inputs={"x": t(2, 3)}) as g:
        n = coreai.neg(g["x"], loc=LOC)
        s = coreai.broadcasting_add(n, coreai.constant(1.0, loc=LOC), loc=LOC)
        g.outputs({"y": coreai.softmax(s, axis=1, loc=LOC)})
    return p


def problems(p: Program) -> list[str]:
    with pytest.raises(VerificationError) as info:
        p.verify()
    assert str(info.value).startswith("program failed verification:\n  ")
    return info.value.problems


def test_well_formed_programs_pass():
    small_program().verify()
    showcase_program().verify()
    parse(str(small_program())).verify()


def test_use_before_definition():
    p = small_program()
    ops = p.graphs["main"].ops
    ops[0], ops[2] = ops[2], ops[0]  # broadcasting_add now precedes neg
    where = WHERE.format(op="broadcasting_add", graph="main")
    assert problems(p) == [f"{where}: operand 0 is used before it is defined",
                           f"{where}: operand 1 is used before it is defined"]


def test_wrong_result_type():
    p = small_program()
    p.graphs["main"].ops[0].results[0].type = t(3, 2)
    assert any(m.startswith(WHERE.format(op="neg", graph="main") + ": result types "
                            "['tensor<3x2xf32>'] differ from the op's rule ['tensor<2x3xf32>']")
               for m in problems(p))


@pytest.mark.parametrize("value, message", [
    ("a", "attribute 'axis' expects int, got 'a'"),
    (2, "axis 2 is out of range for rank 2"),
])
def test_bad_attribute(value, message):
    p = small_program()
    p.graphs["main"].ops[-1].attributes["axis"] = value
    assert problems(p) == [WHERE.format(op="softmax", graph="main") + ": " + message]


def test_list_attribute_is_not_canonical():
    p = Program()
    with p.graph("main", inputs={"x": t(2, 3)}) as g:
        g.outputs({"y": coreai.transpose(g["x"], [1, 0], loc=LOC)})
    p.graphs["main"].ops[0].attributes["perm"] = [1, 0]
    assert problems(p) == [WHERE.format(op="transpose", graph="main")
                           + ": attribute 'perm' is not in canonical form"]


def test_missing_or_extra_attributes():
    p = small_program()
    softmax = p.graphs["main"].ops[-1]
    softmax.attributes = {"dim": 1}
    assert problems(p) == [WHERE.format(op="softmax", graph="main")
                           + ": attributes ['dim'] != ['axis']"]


def test_wrong_operand_count_and_type():
    p = small_program()
    neg = p.graphs["main"].ops[0]
    neg.operands = [*neg.operands, neg.operands[0]]
    assert problems(p) == [WHERE.format(op="neg", graph="main") + ": expected 1 operands, got 2"]
    neg.operands = [Value(t(2, 3, dtype="bool"))]
    assert WHERE.format(op="neg", graph="main") + ": operand 0 is used before it is defined" \
        in problems(p)


def test_outputs_not_defined():
    p = small_program()
    g = p.graphs["main"]
    g.output_values["z"] = Value(t(2, 3))
    assert problems(p) == ["graph @main: output 'z' uses a value not defined in this graph"]


def test_region_capturing_an_outer_value():
    p = Program()
    with p.graph("main", inputs={"p": t(dtype="bool"), "x": t(2)}) as g:
        x = g["x"]
        (y,) = coreai.if_(g["p"], [x], lambda a: coreai.broadcasting_add(a, x, loc=LOC),
                          lambda a: a, loc=LOC)
        g.outputs({"y": y})
    assert problems(p) == [WHERE.format(op="broadcasting_add", graph="coreai.if.then_branch")
                           + ": operand 1 is used before it is defined"]


def test_unknown_op():
    p = small_program()
    p.graphs["main"].ops[0].name = "coreai.negate"
    assert problems(p) == [WHERE.format(op="negate", graph="main")
                           + ": unknown op (no definition registered)"]


def test_every_problem_is_listed():
    p = small_program()
    ops = p.graphs["main"].ops
    ops[0].name = "coreai.bogus"
    ops[-1].attributes["axis"] = 5
    p.graphs["main"].output_values["z"] = Value(t(1))
    found = problems(p)
    assert len(found) == 3
    assert [m.split(" ")[0] for m in found] == ["coreai.bogus", "coreai.softmax", "graph"]


def test_state_problems():
    p = Program()
    with p.graph("main", inputs={"x": t(2)}, state={"acc": np.zeros(2, np.float32)}) as g:
        g.outputs({"y": g["x"]}, state={"acc": coreai.cast(g["x"], "float16")})
    assert problems(p) == ["graph @main: state 'acc' is updated with tensor<2xf16>, declared "
                           "tensor<2xf32>"]
    p.initial_state.clear()
    assert "state 'acc' has no initial value" in problems(p)


def test_weight_data_must_match_its_type():
    p = showcase_program()
    p.weights["bias"] = np.zeros(3, np.float64)
    assert problems(p) == ["weight @bias: data float64[3] != type tensor<2xf32>"]


def test_location_is_omitted_when_unknown():
    p = Program()
    with p.graph("main", inputs={"x": TensorType((2,), "float32")}) as g:
        g.outputs({"y": coreai.neg(g["x"])})
    p.graphs["main"].ops[0].name = "coreai.bogus"
    assert problems(p) == ["coreai.bogus (op in graph @main): unknown op (no definition "
                           "registered)"]


def test_nan_float_attribute_is_canonical():
    p = Program()
    with p.graph("main", inputs={"x": t(2, 2)}) as g:
        g.outputs({"y": coreai.pad(g["x"], [1, 1, 0, 0], value=float("nan"))})
    p.verify()
