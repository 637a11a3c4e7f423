"""Op definitions: type rules (broadcasting, dynamic dims, attributes), builder behaviour and
the errors of ill-typed builds."""

from __future__ import annotations

import numpy as np
import pytest

from coreai_core import Dim, DType, Location, Program, TensorType, TypeRuleError
from coreai_core._opdef import OPS, normalize_attr
from coreai_core.dialects import coreai
from coreai_core.text import format_type
from tests.core.op_samples import t

N = Dim("n", 1, 64)
M = Dim("m")


def infer(inputs: tuple[TensorType, ...], build) -> list[str]:
    """Build ``build(*inputs)`` in a fresh graph; the text of its result types."""
    p = Program()
    with p.graph("main", inputs={f"x{i}": typ for i, typ in enumerate(inputs)}) as g:
        out = build(*g.inputs.values())
    outs = out if isinstance(out, tuple) else (out,)
    return [format_type(v.type) for v in outs]


# (id, input types, build, expected result types)
RULES = [
    ("broadcast", (t(2, 1, 3), t(4, 1)), coreai.broadcasting_add, ["tensor<2x4x3xf32>"]),
    ("broadcast scalar", (t(), t(2)), coreai.broadcasting_sub, ["tensor<2xf32>"]),
    ("broadcast dynamic vs 1", (t(N, 3), t(1, 3)), coreai.broadcasting_mul,
     ["tensor<?n[1:64]x3xf32>"]),
    ("broadcast dynamic vs static", (t(N, 1), t(5, 4)), coreai.broadcasting_maximum,
     ["tensor<5x4xf32>"]),
    ("broadcast two symbols", (t(N), t(M)), coreai.broadcasting_add, ["tensor<?n[1:64]xf32>"]),
    ("compare", (t(2, 3), t(3)), coreai.broadcasting_less, ["tensor<2x3xi1>"]),
    ("where", (t(2, 1, dtype="bool"), t(N, 1, 3), t(3)), coreai.where,
     ["tensor<?n[1:64]x2x3xf32>"]),
    ("same-shape add", (t(N, 2), t(N, 2)), coreai.add, ["tensor<?n[1:64]x2xf32>"]),
    ("isnan", (t(2, dtype="float16"),), coreai.isnan, ["tensor<2xi1>"]),
    ("cast from numpy dtype", (t(2),), lambda x: coreai.cast(x, np.dtype("int8")),
     ["tensor<2xi8>"]),
    ("cast from name", (t(2),), lambda x: coreai.cast(x, "bfloat16"), ["tensor<2xbf16>"]),
    ("cast a scalar", (), lambda: coreai.cast(3, DType.float16), ["tensor<f16>"]),
    ("matmul batch", (t(5, 1, 2, 3), t(4, 3, 6)), coreai.batch_matmul, ["tensor<5x4x2x6xf32>"]),
    ("matmul vector", (t(3), t(N, 3, 4)), coreai.batch_matmul, ["tensor<?n[1:64]x4xf32>"]),
    ("matmul dot", (t(3), t(3)), coreai.batch_matmul, ["tensor<f32>"]),
    ("reduce all", (t(2, 3),), coreai.reduce_sum, ["tensor<f32>"]),
    ("reduce keep", (t(N, 3, 4),), lambda x: coreai.reduce_max(x, axes=[-1, 0], keep_dims=True),
     ["tensor<1x3x1xf32>"]),
    ("argmax flat", (t(2, 3),), coreai.argmax, ["tensor<i64>"]),
    ("any", (t(2, 3, dtype="int32"),), lambda x: coreai.any_(x, axes=[1]), ["tensor<2xi1>"]),
    ("topk dynamic", (t(N, 8),), lambda x: coreai.topk(x, 3),
     ["tensor<?n[1:64]x3xf32>", "tensor<?n[1:64]x3xi64>"]),
    ("reshape -1", (t(2, 3, 4),), lambda x: coreai.reshape(x, [-1, 6]), ["tensor<4x6xf32>"]),
    ("reshape dynamic -1", (t(N, 4),), lambda x: coreai.reshape(x, [-1, 2]), ["tensor<?x2xf32>"]),
    ("reshape computed shape", (t(N, 4), t(2, dtype="int64")), coreai.reshape,
     ["tensor<?x?xf32>"]),
    ("transpose", (t(N, 3, 4),), lambda x: coreai.transpose(x, np.array([2, 0, 1])),
     ["tensor<4x?n[1:64]x3xf32>"]),
    ("expand_dims", (t(2, 3),), lambda x: coreai.expand_dims(x, [0, -1]), ["tensor<1x2x3x1xf32>"]),
    ("shrink dynamic", (t(M, 3),), lambda x: coreai.shrink_dims(x, [0]), ["tensor<3xf32>"]),
    ("concat dynamic", (t(2, 3), t(2, N)), lambda a, b: coreai.concat([a, b], axis=1),
     ["tensor<2x?xf32>"]),
    ("concat static", (t(2, 3), t(2, 1)), lambda a, b: coreai.concat([a, b], axis=-1),
     ["tensor<2x4xf32>"]),
    ("split", (t(N, 6),), lambda x: coreai.split(x, [2, 4], axis=1),
     ["tensor<?n[1:64]x2xf32>", "tensor<?n[1:64]x4xf32>"]),
    ("slice clamps", (t(5, 6),), lambda x: coreai.slice_(x, [-2, 10], [100, 0], axes=[0, 1],
                                                       strides=[1, -3]), ["tensor<2x2xf32>"]),
    ("slice computed bounds", (t(5, 6), t(1, dtype="int64")),
     lambda x, b: coreai.slice_(x, b, [4], axes=[1], strides=[1]), ["tensor<5x?xf32>"]),
    ("pad crops", (t(4, N),), lambda x: coreai.pad(x, [1, -2, 0, 0]), ["tensor<3x?n[1:64]xf32>"]),
    ("tile", (t(2, N),), lambda x: coreai.tile(x, [3, 2]), ["tensor<6x?xf32>"]),
    ("get_shape", (t(N, 2, 1),), coreai.get_shape, ["tensor<3xi64>"]),
    ("range constant", (), lambda: coreai.range_(1.0, 2.0, 0.25), ["tensor<4xf32>"]),
    ("range computed", (t(dtype="int64"),), lambda e: coreai.range_(0, e, 1), ["tensor<?xi64>"]),
    ("gather", (t(4, 5, 6), t(2, 3, dtype="int32")), lambda x, i: coreai.gather(x, i, axis=1),
     ["tensor<4x2x3x6xf32>"]),
    ("gather_nd", (t(4, 5, 6), t(7, 2, dtype="int64")), coreai.gather_nd, ["tensor<7x6xf32>"]),
    ("non_zero", (t(N, 3),), coreai.non_zero, ["tensor<?nnzx2xi64>"]),
    ("conv", (t(N, 4, 9, 9), t(8, 4, 3, 3)), lambda x, w: coreai.conv2d(
        x, w, strides=[2, 2], pads=[1, 1], dilation=[2, 2]), ["tensor<?n[1:64]x8x4x4xf32>"]),
    ("conv1d dynamic length", (t(1, 2, M), t(3, 2, 3)), coreai.conv, ["tensor<1x3x?xf32>"]),
    ("conv_transpose", (t(1, 4, 5, 5), t(4, 2, 3, 3)), lambda x, w: coreai.conv_transpose(
        x, w, strides=[2], pads=[1, 1], output_padding=[1], groups=2),
     ["tensor<1x4x10x10xf32>"]),
    ("maxpool ceil", (t(1, 1, 5, 5),), lambda x: coreai.maxpool2d(
        x, kernel_size=[2, 2], strides=[2, 2], ceil_mode=True), ["tensor<1x1x3x3xf32>"]),
    ("avgpool 3d", (t(1, 1, 4, 4, 4),), lambda x: coreai.avgpool(x, kernel_size=[2]),
     ["tensor<1x1x2x2x2xf32>"]),
    ("interpolate", (t(1, 3, 4, 4),), lambda x: coreai.interpolate(x, sizes=[8, 2]),
     ["tensor<1x3x8x2xf32>"]),
    ("quantize per axis", (t(2, 3), t(3), t(3, dtype="int8")),
     lambda x, s, z: coreai.quantize(x, s, z, axis=-1, dtype=np.uint8), ["tensor<2x3xu8>"]),
    ("dequantize", (t(2, 3, dtype="int8"), t(dtype="float16"), t(dtype="int8")),
     coreai.dequantize, ["tensor<2x3xf16>"]),
]


@pytest.mark.parametrize("inputs, build, expected", [r[1:] for r in RULES],
                         ids=[r[0] for r in RULES])
def test_type_rule(inputs, build, expected):
    assert infer(inputs, build) == expected


def test_python_scalars_follow_the_tensor_they_meet():
    assert infer((t(2, dtype="float16"),), lambda x: coreai.broadcasting_add(x, 1)) == \
        ["tensor<2xf16>"]
    assert infer((t(2, dtype="int32"),), lambda x: coreai.broadcasting_mul(x, 3)) == \
        ["tensor<2xi32>"]
    assert infer((), lambda: coreai.constant([1, 2])) == ["tensor<2xi64>"]
    assert infer((), lambda: coreai.constant(1.5, dtype="float64")) == ["tensor<f64>"]


# -- attribute normalization -----------------------------------------------------------------------

def _pool_attrs(build) -> dict:
    p = Program()
    with p.graph("main", inputs={"x": t(1, 1, 6, 6)}) as g:
        build(g["x"])
    return p.graphs["main"].ops[-1].attributes


@pytest.mark.parametrize("kernel_size", [
    [2, 2], (2, 2), np.array([2, 2], dtype=np.uint32), np.array([2, 2], dtype=np.int64), 2,
], ids=["list", "tuple", "uint32 array", "int64 array", "scalar"])
def test_kernel_size_forms_normalize_to_ints(kernel_size):
    attrs = _pool_attrs(lambda x: coreai.sumpool2d(x, kernel_size=kernel_size))
    assert attrs["kernel_size"] in ((2, 2), (2,))
    assert all(type(k) is int for k in attrs["kernel_size"])


def test_compile_time_attributes_from_constant_values():
    attrs = _pool_attrs(lambda x: coreai.sumpool2d(
        x, kernel_size=np.array([3, 3], np.uint32), strides=[1, 1],
        dilation=coreai.constant([1, 1], dtype=np.uint32)))
    assert attrs["kernel_size"] == (3, 3) and attrs["dilation"] == (1, 1)
    assert all(type(d) is int for d in attrs["dilation"])


def test_computed_value_is_not_a_compile_time_attribute():
    with pytest.raises(TypeRuleError, match=r"coreai.sumpool: attribute 'kernel_size' needs a "
                                            r"compile-time constant"):
        _pool_attrs(lambda x: coreai.sumpool2d(x, kernel_size=coreai.get_shape(x)))


@pytest.mark.parametrize("op, attr, value, expected", [
    ("coreai.quantize", "dtype", np.int8, DType.int8),
    ("coreai.quantize", "dtype", "uint8", DType.uint8),
    ("coreai.softmax", "axis", np.int64(-1), -1),
    ("coreai.sort", "descending", np.bool_(True), True),
    ("coreai.interpolate", "scales", np.array([0.5, 2], np.float32), (0.5, 2.0)),
    ("coreai.pad", "value", np.float16(1.5), 1.5),
    ("coreai.gelu", "approximate", "tanh", "tanh"),
    ("coreai.conv", "strides", None, None),
])
def test_normalize_attr_canonical_forms(op, attr, value, expected):
    param = next(p for p in OPS[op].attributes if p.name == attr)
    out = normalize_attr(param, value, op)
    assert out == expected and type(out) is type(expected)


@pytest.mark.parametrize("op, attr, value, message", [
    ("coreai.softmax", "axis", 1.5, "attribute 'axis' expects int, got 1.5"),
    ("coreai.softmax", "axis", True, "attribute 'axis' expects int"),
    ("coreai.sort", "descending", [], "attribute 'descending' expects bool"),
    ("coreai.sort", "descending", 2, "attribute 'descending' expects bool"),
    ("coreai.gelu", "approximate", "fast", "attribute 'approximate' must be one of"),
    ("coreai.quantize", "dtype", "int3", "attribute 'dtype' expects dtype"),
    ("coreai.transpose", "perm", [[0, 1]], "attribute 'perm' expects ints"),
    ("coreai.topk", "k", None, "attribute 'k' is required"),
    ("coreai.invoke", "callee", 3, "attribute 'callee' expects str"),
])
def test_bad_attributes_raise_type_rule_errors(op, attr, value, message):
    param = next(p for p in OPS[op].attributes if p.name == attr)
    with pytest.raises(TypeRuleError, match=message) as info:
        normalize_attr(param, value, op)
    assert info.value.op == op


# -- ill-typed builds ------------------------------------------------------------------------------

# (id, input types, build, message that names the op and the operand or attribute)
BAD = [
    ("no broadcast", (t(2, 3), t(4)), coreai.broadcasting_add,
     r"coreai.broadcasting_add: shapes .*\[2, 3\].*\[4\].* do not broadcast \(axis -1\)"),
    ("dtype mismatch", (t(2), t(2, dtype="int32")), coreai.broadcasting_add,
     r"coreai.broadcasting_add: operands must share one element type, got tensor<2xf32>, "
     r"tensor<2xi32>"),
    ("float op on ints", (t(2, dtype="int32"),), coreai.sin,
     r"coreai.sin: operand .x. must be a float or complex tensor, got tensor<2xi32>"),
    ("ordered op on complex", (t(2, dtype="complex64"), t(2, dtype="complex64")),
     coreai.broadcasting_maximum,
     r"coreai.broadcasting_maximum: operand .lhs. must be a non-complex tensor"),
    ("reduce_max of complex", (t(2, dtype="complex64"),), coreai.reduce_max,
     r"coreai.reduce_max: expects a non-complex tensor \(complex numbers have no order\)"),
    ("cumulative min of complex", (t(2, dtype="complex128"),),
     lambda x: coreai.scan(x, axis=0, kind="min"),
     r"coreai.scan: scan kind='min' expects a non-complex tensor"),
    ("complex part of a float", (t(2),), coreai.real,
     r"coreai.real: x must be a complex tensor, got tensor<2xf32>"),
    ("complex from halves", (t(2, dtype="float16"), t(2, dtype="float16")), coreai.complex_,
     r"coreai.complex: real must be a float32 or float64 tensor"),
    ("view_as_complex pairs", (t(2, 3),), coreai.view_as_complex,
     r"coreai.view_as_complex: the last axis of x must have size 2"),
    ("fft axes", (t(4, dtype="complex64"),),
     lambda x: coreai.fft_c2c(x, axes=[0, -1], forward=True),
     r"coreai.fft_c2c: axes \[0, -1\] repeat an axis"),
    ("fft_c2r size", (t(4, 4, dtype="complex64"),),
     lambda x: coreai.fft_c2r(x, axes=[1], last_dim_size=8),
     r"coreai.fft_c2r: axis 1 of x must hold last_dim_size // 2 \+ 1 = 5 entries"),
    ("same-shape op", (t(2, 3), t(3)), coreai.add,
     r"coreai.add: operands must have the same shape"),
    ("where condition", (t(2), t(2), t(2)), coreai.where,
     r"coreai.broadcasting_where: condition must be bool, got tensor<2xf32>"),
    ("gather indices", (t(4), t(2)), coreai.gather,
     r"coreai.gather: indices must be integers, got tensor<2xf32>"),
    ("reshape shape", (t(4), t(2)), coreai.reshape,
     r"coreai.reshape: shape must be a 1-d integer tensor, got tensor<2xf32>"),
    ("reshape numel", (t(4),), lambda x: coreai.reshape(x, [3]),
     r"coreai.reshape: cannot reshape tensor<4xf32> into \[3\]"),
    ("conv weight", (t(1, 2, 5, 5), t(3, 2, 3)), coreai.conv,
     r"coreai.conv: weight tensor<3x2x3xf32> must have rank 4"),
    ("conv bias", (t(1, 2, 5, 5), t(3, 2, 3, 3), t(3, 1)), coreai.conv,
     r"coreai.conv: bias must be 1-d, got tensor<3x1xf32>"),
    ("slice begin", (t(5, 6),), lambda x: coreai.slice_(x, [0, 1], [2], axes=[0], strides=[1]),
     r"coreai.slice: begin must have 1 elements, got 2"),
    ("axis range", (t(2, 3),), lambda x: coreai.softmax(x, axis=2),
     r"coreai.softmax: axis 2 is out of range for rank 2"),
    ("transpose perm", (t(2, 3),), lambda x: coreai.transpose(x, [0, 0]),
     r"coreai.transpose: perm \[0, 0\] is not a permutation of 2 axes"),
    ("if predicate", (t(2), t(2)), lambda p, x: coreai.if_(p, [x], lambda a: a, lambda a: a),
     r"coreai.if: predicate must be a one-element bool tensor, got tensor<2xf32>"),
    ("if branches", (t(dtype="bool"), t(2)), lambda p, x: coreai.if_(
        p, [x], lambda a: a, lambda a: coreai.cast(a, "int32")),
     r"coreai.if: branches yield different types"),
    ("invoke callee", (t(2),), lambda x: coreai.invoke([x], callee="nowhere"),
     r"coreai.invoke: callee @nowhere is not a graph of this program"),
    ("missing operand", (), lambda: coreai.neg(),
     r"coreai.neg: bad arguments: .*signature is coreai.neg\(x\)"),
    ("unknown keyword", (t(2),), lambda x: coreai.softmax(x, dim=0),
     r"coreai.softmax: bad arguments: .*unexpected keyword argument 'dim'"),
]


@pytest.mark.parametrize("inputs, build, message", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_ill_typed_builds_raise_before_adding_the_op(inputs, build, message):
    p = Program()
    with p.graph("main", inputs={f"x{i}": typ for i, typ in enumerate(inputs)}) as g:
        before = list(g.ops)
        with pytest.raises(TypeRuleError, match=message) as info:
            build(*g.inputs.values())
        assert [op.name for op in g.ops if op not in before] in ([], ["coreai.constant"] * 2,
                                                                 ["coreai.constant"])
    assert info.value.op is not None and str(info.value).startswith(info.value.op)


def test_type_errors_carry_the_location():
    loc = Location("model.py", 41, "encoder.layers.0")
    p = Program()
    with p.graph("main", inputs={"x": t(2, dtype="int32")}), pytest.raises(TypeRuleError) as info:
        coreai.sqrt(p.graphs["main"]["x"], loc=loc)
    assert info.value.location == loc
    assert str(info.value).startswith('coreai.sqrt at loc("model.py":41 in "encoder.layers.0"): ')


# -- builders and their context --------------------------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda v: coreai.neg(v),
    lambda v: coreai.constant(1.0),
    lambda v: coreai.constant(np.zeros(100, np.float32)),
    lambda v: coreai.broadcasting_add(v, 1.0),
    lambda v: coreai.output(y=v),
], ids=["unary", "constant", "weight", "binary with scalar", "output"])
def test_builders_outside_a_context_raise_a_clear_error(call):
    p = Program()
    with p.graph("main", inputs={"x": t(2)}) as g:
        x = g["x"]
    with pytest.raises(RuntimeError, match="coreai builders must be called inside an insertion "
                                           "context"):
        call(x)


def test_builders_return_values_with_types():
    p = Program()
    with p.graph("main", inputs={"x": t(2, 5)}) as g:
        y = coreai.relu(g["x"])
        values, indices = coreai.topk(y, 2)
        pieces = coreai.split(y, [5], axis=1)
    assert y.type.shape == (2, 5) and y.type.element_type is DType.float32
    assert indices.type.element_type is DType.int64 and values.owner is indices.owner
    assert isinstance(pieces, tuple) and len(pieces) == 1
    assert [op.name for op in g.ops] == ["coreai.relu", "coreai.topk", "coreai.split"]


def test_large_constants_become_weights():
    p = Program()
    with p.graph("main") as g:
        small = coreai.constant(np.ones(16, np.float32))
        big = coreai.constant(np.ones(17, np.float32))
        named = coreai.constant([1.0], name="w")
        again = coreai.constant([2.0], name="w")
    assert isinstance(small.owner.attributes["value"], np.ndarray)
    assert list(p.weights) == ["const", "w", "w_1"]
    assert big.type == t(17) and named.type == again.type == t(1)
    assert g.ops[-1].attributes["value"].name == "w_1"


def _dialect_ops():
    # OPS also holds ops users define at run time (the guides define some): only the dialect's
    return {n: d for n, d in OPS.items() if d.rule.__module__.startswith("coreai_core.")}


def test_every_op_has_a_documented_definition():
    for name, opdef in _dialect_ops().items():
        assert name.startswith("coreai.") and opdef.doc, name
        assert opdef.signature_text().startswith(name + "(")
