"""The text form: print -> parse -> print is the identity, for every op and random programs.

Malformed text and fuzzing live in test_text_errors.py.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given

from coreai_core import Dim, Location, ParseError, Program, TensorType, WeightRef, parse
from coreai_core._opdef import OPS
from coreai_core.dialects import coreai
from coreai_core.dialects._elementwise import _constant
from coreai_core.text import format_type, parse_type, print_program
from tests.core.op_samples import SAMPLES, build_sample, showcase_program, t
from tests.core.strategies import programs


def assert_round_trip(p: Program, **options: bool) -> Program:
    """parse(print(p)) == p and printing the parsed program gives the same text."""
    text = print_program(p, **options)
    q = parse(text, weights=p.weights)
    assert q == p
    assert print_program(q, **options) == text
    return q


# -- every op ------------------------------------------------------------------------------------

def test_every_op_has_a_sample():
    assert sorted(set(OPS) - set(SAMPLES)) == []


@pytest.mark.parametrize("name", sorted(OPS))
def test_round_trip_of_each_op(name):
    p = build_sample(name)
    assert name in {op.name for g in p.graphs.values() for op in g.walk()}
    p.verify()
    for options in ({}, {"full": True}, {"locations": True}, {"full": True, "locations": True}):
        assert_round_trip(p, **options)
    q = parse(p.to_text(full=True, locations=True))
    assert q == p
    assert [op.location for op in q.graphs["main"].walk()] == \
        [op.location for op in p.graphs["main"].walk()]


# -- random programs -----------------------------------------------------------------------------

@given(programs())
def test_round_trip_of_random_programs(p):
    q = assert_round_trip(p)
    assert q.state.keys() == p.initial_state.keys()
    for name, value in p.initial_state.items():
        np.testing.assert_array_equal(q.state[name], value)
    assert_round_trip(p, full=True)
    assert parse(p.to_text(full=True)) == p  # no weights needed when printed in full


@given(programs(dynamic=True))
def test_round_trip_of_random_dynamic_programs(p):
    assert "?batch[1:8]" in str(p)
    assert_round_trip(p, locations=True)


# -- format --------------------------------------------------------------------------------------

GOLDEN = """\
coreai.program {
  weight @fc.weight : tensor<4x5xf32>
  weight @bias : tensor<2xf32> = dense<[0.5, -1.0]>
  state @cache : tensor<2x1xf32> = dense<0.0>
  graph @main(%x: tensor<?batch[1:64]x5xf32>, %"x-1": tensor<i1>) state(%cache: tensor<2x1xf32>) {
    %0 = coreai.constant() {value = @fc.weight} : tensor<4x5xf32>
    %1 = coreai.transpose(%0) {perm = [1, 0]} : tensor<5x4xf32>
    %2 = coreai.batch_matmul(%x, %1) : tensor<?batch[1:64]x4xf32>
    %3, %4 = coreai.topk(%2) {k = 2, axis = -1, largest = true, sorted = true} : \
tensor<?batch[1:64]x2xf32>, tensor<?batch[1:64]x2xi64>  loc("model.py":12 in "fc")
    %5 = coreai.if(%"x-1", %3) {then_branch = graph(%arg0: tensor<?batch[1:64]x2xf32>) {
      %6 = coreai.neg(%arg0) : tensor<?batch[1:64]x2xf32>
      coreai.yield(%6)
    }, else_branch = graph(%arg0: tensor<?batch[1:64]x2xf32>) {
      coreai.yield(%arg0)
    }} : tensor<?batch[1:64]x2xf32>
    %7 = coreai.constant() {value = dense<1.0> : tensor<f32>} : tensor<f32>
    %8 = coreai.broadcasting_add(%cache, %7) : tensor<2x1xf32>
    %9 = coreai.constant() {value = @bias} : tensor<2xf32>
    coreai.output(y = %5, indices.0 = %4) state(cache = %8)
  }
}"""


def test_golden_text():
    p = showcase_program()
    assert p.to_text(locations=True) == GOLDEN
    assert str(p) == GOLDEN.replace('  loc("model.py":12 in "fc")', "")
    assert parse(GOLDEN, weights=p.weights) == p


def test_parsed_program_keeps_state_and_names():
    q = parse(GOLDEN)
    assert q.input_names == ["x", "x-1"]
    assert q.output_names == ["y", "indices.0"]
    assert q.state_names == ["cache"]
    np.testing.assert_array_equal(q.state["cache"], np.zeros((2, 1), np.float32))
    assert q.weights == {"fc.weight": None, "bias": q.weights["bias"]}
    np.testing.assert_array_equal(q.weights["bias"], [0.5, -1.0])


# -- weights -------------------------------------------------------------------------------------

def weighted_program(data: np.ndarray | None) -> Program:
    """``y = x + @"big w"``; ``data`` None leaves the weight unbound."""
    p = Program()
    p.add_weight("big w", data, type=t(3, 8))
    with p.graph("main", inputs={"x": t(3, 8)}) as g:
        g.outputs({"y": coreai.broadcasting_add(g["x"], _constant(WeightRef("big w")))})
    return p


def test_large_weights_are_elided_unless_full():
    data = np.arange(24, dtype=np.float32).reshape(3, 8)
    p = weighted_program(data)
    elided, full = str(p), p.to_text(full=True)
    assert 'weight @"big w" : tensor<3x8xf32>\n' in elided and "23.0" not in elided
    assert "23.0" in full
    unbound = parse(elided)
    assert unbound.weights == {"big w": None} and unbound != p
    assert parse(elided, weights=p.weights) == p
    assert parse(elided, weights={"big w": data, "unrelated": 1}) == p
    assert parse(full) == p


def test_unbound_weight_prints_as_declaration_and_stays_unbound():
    p = weighted_program(None)
    assert str(p) == p.to_text(full=True)
    q = assert_round_trip(p)
    assert q.weights == {"big w": None} and q.weight_types == {"big w": t(3, 8)}


def test_bound_weight_of_wrong_type_is_rejected():
    p = weighted_program(np.zeros((3, 8), np.float32))
    with pytest.raises(ParseError, match=r"weight @big w: bound data float64\[3, 8\]"):
        parse(str(p), weights={"big w": np.zeros((3, 8))})


# -- locations, types ----------------------------------------------------------------------------

def test_locations_only_when_asked():
    p = build_sample("coreai.topk")
    assert "loc(" not in str(p)
    assert 'loc("model.py":7 in "blocks.coreai.topk")' in p.to_text(locations=True)
    assert all(not op.location.is_known for op in parse(str(p)).graphs["main"].ops)


@pytest.mark.parametrize("location, text", [
    (Location("a.py", 3, None), 'loc("a.py":3)'),
    (Location("a.py", None, "m.n"), 'loc("a.py" in "m.n")'),
    (Location(None, None, "layers.0"), 'loc(in "layers.0")'),
    (Location('we"ird.py', 1, "x y"), r'loc("we\"ird.py":1 in "x y")'),
])
def test_location_forms(location, text):
    p = Program()
    with p.graph("main", inputs={"x": t(2)}) as g:
        g.outputs({"y": coreai.neg(g["x"], loc=location)})
    assert text in p.to_text(locations=True)
    q = parse(p.to_text(locations=True))
    assert q.graphs["main"].ops[0].location == location


@pytest.mark.parametrize("typ, text", [
    (t(), "tensor<f32>"),
    (t(2, 3, dtype="bfloat16"), "tensor<2x3xbf16>"),
    (TensorType((Dim(), 4), "int64"), "tensor<?x4xi64>"),
    (TensorType((Dim("batch"), Dim("seq", 1, None)), "bool"), "tensor<?batchx?seq[1:]xi1>"),
    (TensorType((Dim("max_len", None, 9),), "uint64"), 'tensor<?"max_len"[:9]xu64>'),
    (TensorType((Dim("a b", 0, 0), 0), "float16"), 'tensor<?"a b"[0:0]x0xf16>'),
])
def test_tensor_types(typ, text):
    assert format_type(typ) == text
    assert parse_type(text) == typ


def test_dynamic_dims_flow_through_type_rules():
    p = Program()
    n = Dim("n", 1, 128)
    with p.graph("main", inputs={"x": TensorType((n, 3), "float32"), "y": t(1, 3)}) as g:
        s = coreai.broadcasting_mul(g["x"], g["y"])
        g.outputs({"s": s, "c": coreai.concat([s, s], axis=0), "z": coreai.non_zero(s)})
    text = str(p)
    assert "tensor<?n[1:128]x3xf32>" in text and "tensor<?x3xf32>" in text
    assert "tensor<?nnzx2xi64>" in text
    assert_round_trip(p)


# -- exact data ----------------------------------------------------------------------------------

def constant_program(data: np.ndarray) -> Program:
    p = Program()
    with p.graph("main") as g:
        g.outputs({"c": coreai.constant(data, name="data")})
    return p


def _round_trip_data(data: np.ndarray) -> np.ndarray:
    out = parse(constant_program(data).to_text(full=True)).weights["data"]
    assert out.dtype == data.dtype and out.shape == data.shape
    assert out.tobytes() == data.tobytes()
    return out


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_every_16_bit_float_round_trips(dtype):
    _round_trip_data(np.arange(1 << 16, dtype=np.uint16).view(dtype))


def test_float32_and_float64_round_trip_exactly():
    rng = np.random.default_rng(0)
    bits32 = rng.integers(0, 1 << 32, 4000, dtype=np.uint64).astype(np.uint32)
    _round_trip_data(bits32.view(np.float32))
    f32 = np.finfo(np.float32)
    _round_trip_data(np.array([f32.max, f32.tiny, f32.smallest_subnormal, -0.0, 0.1, np.inf,
                               -np.inf, np.nan], np.float32))
    _round_trip_data(rng.integers(0, 1 << 63, 4000, dtype=np.int64).view(np.float64))
    f64 = np.finfo(np.float64)
    _round_trip_data(np.array([f64.max, f64.smallest_subnormal, -f64.tiny, 1 / 3], np.float64))


def test_nan_payloads_print_their_bits():
    data = np.array([0x7FC00000, 0xFFC00000, 0x7F800001], np.uint32).view(np.float32)
    text = constant_program(data).to_text(full=True)
    assert "dense<[nan, nan(0xffc00000), nan(0x7f800001)]>" in text
    _round_trip_data(data)


@pytest.mark.parametrize("data", [
    np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max, 0, -1], np.int64),
    np.array([np.iinfo(np.uint64).max, 0], np.uint64),
    np.array([-128, 127], np.int8),
    np.array([[True, False], [False, True]]),
    np.zeros((0, 3), np.float32),
    np.zeros((2, 0), np.int32),
    np.full((3, 2), -0.0, np.float32),
    np.array(7, np.uint16),
], ids=lambda a: f"{a.dtype}{list(a.shape)}")
def test_integer_bool_empty_and_splat_data(data):
    _round_trip_data(data)


def test_float_attributes_round_trip_exactly():
    p = Program()
    with p.graph("main", inputs={"x": t(1, 1, 4, 4)}) as g:
        a = coreai.pad(g["x"], [0, 0, 0, 0, 1, 1, 1, 1], value=float("nan"))
        b = coreai.pad(g["x"], [0, 0, 0, 0, 1, 1, 1, 1], value=-0.0)
        c = coreai.interpolate(g["x"], sizes=[3, 3], mode="linear",
                               scales=[float("inf"), 1 / 3])
        d = coreai.pad(g["x"], [0] * 8, value=5e-324)
        g.outputs([a, b, c, d])
    text = str(p)
    assert "value = nan" in text and "value = -0.0" in text and "scales = [inf, 0.3333" in text
    q = assert_round_trip(p)
    assert str(q.graphs["main"].ops[1].attributes["value"]) == "-0.0"
    q.verify()


def test_comments_and_layout_do_not_matter():
    p = showcase_program()
    squeezed = "// a comment\n" + GOLDEN.replace("\n    ", "\n// another\n  \t  ").replace(
        " = coreai.", "=coreai.")
    assert parse(squeezed, weights=p.weights) == p


def test_state_without_initial_value_round_trips():
    p = Program()
    with p.graph("main", inputs={"x": t(2)}) as g:
        s = p.declare_state(g, "s", t(2))
        g.outputs({"y": g["x"]}, state={"s": coreai.broadcasting_add(s, g["x"])})
    assert "  state @s" not in str(p) and "state(%s: tensor<2xf32>)" in str(p)
    assert assert_round_trip(p).initial_state == {}
