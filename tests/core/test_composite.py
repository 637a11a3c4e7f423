"""Composite ops: the declaration on a graph, its text form, invoke, and inlining."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coreai_core import (
    Composite,
    Dim,
    ParseError,
    Program,
    TensorType,
    TypeRuleError,
    load,
    parse,
)
from coreai_core.dialects import coreai
from coreai_core.optimizer import InlineCompositesPass, default_passes
from coreai_core.text import print_program

F32 = "float32"
attribute_values = st.one_of(
    st.none(), st.booleans(), st.integers(-2**40, 2**40), st.text(max_size=8),
    st.floats(allow_nan=False, width=64), st.lists(st.integers(-9, 9), max_size=4))


def scaled_relu_program(decl: Composite, n: int | Dim = 3) -> Program:
    """main(x) = relu(scaled(x, w)) + scaled(x, w) with ``scaled`` a composite: x * w."""
    p = Program()
    with p.graph("scaled", inputs={"x": TensorType((Dim("n"), 4), F32),
                                   "w": TensorType((4,), F32)}, composite=decl) as g:
        g.outputs({"y": coreai.broadcasting_mul(g["x"], g["w"])})
    with p.graph("main", inputs={"a": TensorType((n, 4), F32)}) as g:
        w = coreai.constant(np.array([1.0, -2.0, 0.5, 3.0], np.float32))
        (y,) = coreai.invoke([g["a"], w], callee="scaled")
        (z,) = coreai.invoke([coreai.relu(y), w], callee="scaled")
        g.outputs({"out": z})
    return p


def expected(a: np.ndarray) -> np.ndarray:
    w = np.array([1.0, -2.0, 0.5, 3.0], np.float32)
    return np.maximum(a * w, 0) * w


@given(name=st.text(min_size=1, max_size=12), version=st.integers(0, 2**31),
       attributes=st.dictionaries(st.text(min_size=1, max_size=6), attribute_values,
                                  max_size=4))
def test_declaration_round_trips(name, version, attributes):
    p = scaled_relu_program(Composite(name, version, attributes))
    text = print_program(p)
    q = parse(text)
    assert q == p
    assert q.graphs["scaled"].composite == Composite(name, version, attributes)
    assert print_program(q) == text


def test_declaration_is_printed_before_the_signature():
    p = scaled_relu_program(Composite("scale", 2, {"eps": 1e-6, "axes": [-1]}))
    assert ('graph @scaled composite "scale" version 2 {eps = 1e-06, axes = [-1]} '
            '(%x: tensor<?nx4xf32>, %w: tensor<4xf32>)') in str(p)
    assert list(p.composites) == ["scaled"]


def test_structure_compares_declarations():
    assert scaled_relu_program(Composite("a")) != scaled_relu_program(Composite("b"))
    assert scaled_relu_program(Composite("a", 1)) != scaled_relu_program(Composite("a", 2))
    assert scaled_relu_program(Composite("a")) == scaled_relu_program(Composite("a"))


@settings(max_examples=6)
@given(n=st.sampled_from([1, 3, 47]), data=st.data())
def test_runtime_executes_composites_and_inlining_keeps_results(n, data):
    a = data.draw(st.lists(st.floats(-4, 4, width=32), min_size=4 * n, max_size=4 * n))
    a = np.array(a, np.float32).reshape(n, 4)
    p = scaled_relu_program(Composite("scaled"), Dim("s"))
    np.testing.assert_array_equal(p.run({"a": a})["out"], expected(a))
    p.optimize([InlineCompositesPass(), *default_passes()])
    assert "coreai.invoke" not in str(p) and list(p.graphs) == ["main"]
    np.testing.assert_array_equal(p.run({"a": a})["out"], expected(a))


def test_inlining_keeps_what_is_asked():
    p = scaled_relu_program(Composite("scaled"))
    report = p.optimize([InlineCompositesPass(keep={"scaled"})])
    assert not report.changed and "scaled" in p.graphs
    p = scaled_relu_program(Composite("scaled"))
    report = p.optimize([InlineCompositesPass(keep=lambda c: c.version > 1)])
    assert report["inline_composites"].removed == 2 and list(p.graphs) == ["main"]


def test_default_pipeline_keeps_composites():
    p = scaled_relu_program(Composite("scaled"))
    p.optimize()
    assert list(p.composites) == ["scaled"]
    a = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(p.run({"a": a})["out"], expected(a))


def test_inlined_ops_take_the_callers_symbols():
    p = scaled_relu_program(Composite("scaled"), Dim("s", 1, 64))
    (call,) = [op for op in p.graphs["main"].ops if op.name == "coreai.invoke"][:1]
    assert call.results[0].type == TensorType((Dim("s", 1, 64), 4), F32)
    InlineCompositesPass().run(p)
    types = {str(r.type) for op in p.graphs["main"].ops for r in op.results}
    assert "tensor<?s[1:64]x4xf32>" in types and not any("?n" in t for t in types)
    p.verify()


def test_nested_composites_inline_completely():
    p = Program()
    with p.graph("inner", inputs={"x": TensorType((2,), F32)}, composite=Composite("neg")) as g:
        g.outputs({"y": coreai.neg(g["x"])})
    with p.graph("outer", inputs={"x": TensorType((2,), F32)},
                 composite=Composite("double_neg")) as g:
        (y,) = coreai.invoke([g["x"]], callee="inner")
        (z,) = coreai.invoke([y], callee="inner")
        g.outputs({"y": coreai.broadcasting_add(z, 1.0)})
    with p.graph("main", inputs={"x": TensorType((2,), F32)}) as g:
        g.outputs({"y": coreai.invoke([g["x"]], callee="outer")[0]})
    x = np.array([1.5, -2.0], np.float32)
    p.optimize([InlineCompositesPass(keep={"neg"})])
    assert set(p.graphs) == {"inner", "main"}
    np.testing.assert_array_equal(p.run({"x": x})["y"], x + 1)
    p.optimize([InlineCompositesPass()])
    assert set(p.graphs) == {"main"}
    np.testing.assert_array_equal(p.run({"x": x})["y"], x + 1)


def test_callee_is_placed_before_its_caller_so_text_reads_back():
    p = Program()
    with p.graph("main", inputs={"x": TensorType((2,), F32)}) as g:
        with p.graph("sq", inputs={"x": TensorType((2,), F32)}, composite=Composite("square"),
                     before="main") as sq:
            sq.outputs({"y": coreai.broadcasting_mul(sq["x"], sq["x"])})
        (y,) = coreai.invoke([g["x"]], callee="sq")
        g.outputs({"y": y})
    assert list(p.graphs) == ["sq", "main"]
    assert parse(str(p)) == p


def test_invoke_rejects_contradicting_sizes():
    p = Program()
    with p.graph("pair", inputs={"a": TensorType((Dim("n"),), F32),
                                 "b": TensorType((Dim("n"),), F32)}, composite=Composite("p")) as g:
        g.outputs({"y": coreai.broadcasting_add(g["a"], g["b"])})
    with (p.graph("main", inputs={"a": TensorType((2,), F32), "b": TensorType((3,), F32)}) as g,
          pytest.raises(TypeRuleError, match=r"dimension \?n is both 2 and 3")):
        coreai.invoke([g["a"], g["b"]], callee="pair")


@pytest.mark.parametrize("text, message", [
    ('graph @c composite "c" (%x: tensor<2xf32>) { coreai.output(%x) }', "expected 'version'"),
    ('graph @c composite "c" version -1 (%x: tensor<2xf32>) { coreai.output(%x) }',
     "version must be an int >= 0"),
    ('graph @c composite "c" version 1 {a = 1, a = 2} (%x: tensor<2xf32>) '
     '{ coreai.output(%x) }', "given twice"),
    ('graph @c composite "c" version 1 {a = dense<1> : tensor<i32>} (%x: tensor<2xf32>) '
     '{ coreai.output(%x) }', "composite attribute must be"),
])
def test_malformed_declarations_are_parse_errors(text, message):
    with pytest.raises(ParseError, match=message):
        parse("coreai.program {\n  " + text + "\n}")


def test_a_composite_cannot_have_state():
    with (pytest.raises(ValueError, match="cannot have state"),
          Program().graph("c", state={"s": np.zeros(2)}, composite=Composite("c"))):
        pass


def test_save_and_load_keep_the_declaration(tmp_path):
    p = scaled_relu_program(Composite("scaled", 3, {"eps": 1e-6, "mode": "x"}))
    p.save(tmp_path / "m.coreai")
    q = load(tmp_path / "m.coreai")
    assert q == p and q.graphs["scaled"].composite == p.graphs["scaled"].composite
    a = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(q.run({"a": a})["out"], expected(a))
    assert "scaled" in p.to_dot()


@pytest.mark.parametrize("name, version, message", [
    ("", 1, "non-empty name"), ("c", True, "version must be an int"),
    ("c", -1, "version must be an int"),
])
def test_bad_declarations_are_rejected(name, version, message):
    with pytest.raises(ValueError, match=message):
        Composite(name, version)


def test_attributes_are_plain_values():
    assert Composite("c", 1, {"axes": (1, 2), "n": np.int64(3)}).attributes == {
        "axes": [1, 2], "n": 3}
    with pytest.raises(TypeError, match="composite attribute must be"):
        Composite("c", 1, {"w": object()})


# -- coreai.graph: a Python function as a graph (Apple's decorator form) ---------------------

def test_graph_decorator_builds_one_graph_per_signature_and_invokes_it() -> None:
    decl = coreai.CompositeDeclaration(Composite("softsign", 1, {"k": 2.0}), ["a"], ["y"])

    @coreai.graph(composite_decl=decl)
    def softsign(a):
        one = coreai.constant(np.float32(1.0))
        return coreai.broadcasting_divide(a, coreai.broadcasting_add(coreai.abs_(a), one))

    @coreai.graph
    def twice(u, v):
        return coreai.broadcasting_mul(u, 2.0), v

    program = Program()
    with program.graph("main", inputs={"x": TensorType((3,), F32),
                                       "z": TensorType((2, 2), F32)}) as g:
        (a,) = softsign(g["x"])
        (b,) = softsign(a)                      # same signature: the same graph
        (c,) = softsign(g["z"])                 # another signature: another graph
        d, e = twice(b, c)
        g.outputs({"d": d, "e": e})
    assert list(program.graphs) == ["softsign", "softsign_1", "twice", "main"]
    assert program.graphs["softsign"].composite == decl.composite
    assert list(program.graphs["twice"].inputs) == ["u", "v"]
    assert list(program.graphs["twice"].output_values) == ["output", "output_1"]
    x = np.array([-3.0, 0.5, 8.0], np.float32)
    z = np.array([[1.0, -1.0], [0.0, 4.0]], np.float32)
    once = x / (1 + np.abs(x))
    out = program.run({"x": x, "z": z})
    np.testing.assert_allclose(out["d"], 2 * once / (1 + np.abs(once)), rtol=1e-6)
    np.testing.assert_allclose(out["e"], z / (1 + np.abs(z)), rtol=1e-6)
    assert parse(str(program)) == program


def test_graph_decorator_checks_its_declaration() -> None:
    decl = coreai.CompositeDeclaration(Composite("pair"), ["a", "b"], ["y"])

    @coreai.graph(composite_decl=decl)
    def pair(a):
        return a

    program = Program()
    with program.graph("main", inputs={"x": TensorType((3,), F32)}) as g, \
            pytest.raises(TypeError, match=r"declares 2 inputs \['a', 'b'\], called with 1"):
        pair(g["x"])
