"""Schema-bound lowerings: arguments bound by name from the op's schema, and the FX-node form."""

from __future__ import annotations

import inspect
import operator

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from coreai_core import DType, Value
from coreai_core.dialects import coreai
from coreai_torch import LoweringError, TorchConverter
from coreai_torch._binding import NodeValues, as_lowering, call_lowering
from coreai_torch._schema import schema_args
from coreai_torch.lowerings import default_table
from coreai_torch.utils import (
    arg_meta,
    dtype_of,
    get_operand,
    get_operands,
    promoted_dtype,
    result_dtype,
    result_meta,
    result_type,
)
from tests.torch.harness import export

torch.library.define(
    "coreai_test::affine",
    "(Tensor self, Tensor? bias, int[] dims, *, float scale=1., ScalarType? dtype=None, "
    "bool clip=False) -> Tensor")
torch.library.define("coreai_test::shift", "(Tensor self, float lambda=2.) -> Tensor")
torch.library.define("coreai_test::pair", "(Tensor self) -> (Tensor, Tensor)")


@torch.library.impl("coreai_test::affine", "CompositeExplicitAutograd")
def _affine(self, bias, dims, *, scale=1.0, dtype=None, clip=False):
    out = self.sum(dims, keepdim=True) * scale
    if bias is not None:
        out = out + bias
    if clip:
        out = out.clamp(-1, 1)
    return out if dtype is None else out.to(dtype)


@torch.library.impl("coreai_test::shift", "CompositeExplicitAutograd")
def _shift(self, lambd=2.0):
    return self + lambd


@torch.library.impl("coreai_test::pair", "CompositeExplicitAutograd")
def _pair(self):
    return self * 2, self - 1


class Affine(torch.nn.Module):
    def __init__(self, dims, scale, dtype, with_bias):
        super().__init__()
        self.dims, self.scale, self.dtype, self.with_bias = dims, scale, dtype, with_bias

    def forward(self, x, b):
        return torch.ops.coreai_test.affine(x, b if self.with_bias else None, self.dims,
                                            scale=self.scale, dtype=self.dtype)


def _affine_converter(seen: dict) -> TorchConverter:
    converter = TorchConverter()

    @converter.register_torch_lowering("coreai_test::affine.default")
    def affine(self: Value, bias: Value | None, dims: list[int], scale: float = 1.0,
               dtype: DType | None = None) -> Value:
        seen.update(self=self, bias=bias, dims=dims, scale=scale, dtype=dtype,
                    self_meta=arg_meta("self"), bias_meta=arg_meta("bias"),
                    dims_meta=arg_meta("dims"), result_meta=result_meta())
        out = coreai.broadcasting_mul(coreai.reduce_sum(self, axes=dims, keep_dims=True),
                                      scale)
        if bias is not None:
            out = coreai.broadcasting_add(out, bias)
        return coreai.cast(out, result_dtype())

    return converter


@settings(max_examples=6)  # each example exports and converts a module
@given(dims=st.sampled_from(([0], [1], [0, 1])), scale=st.sampled_from((0.5, 3.0)),
       dtype=st.sampled_from((None, torch.float64)), with_bias=st.booleans(),
       rows=st.sampled_from((1, 3, 47)))
def test_arguments_arrive_converted_by_schema_name(dims, scale, dtype, with_bias, rows):
    x, b = torch.randn(rows, 5), torch.randn(1, 1)
    model = Affine(dims, scale, dtype, with_bias)
    seen: dict = {}
    program = _affine_converter(seen).add_exported_program(export(model, (x, b))).to_coreai()
    assert isinstance(seen["self"], Value)
    assert (seen["bias"] is None) == (not with_bias)
    assert seen["dims"] == dims and seen["scale"] == scale
    assert seen["dtype"] == (None if dtype is None else DType.float64)
    (got,) = program.run({"x": x.numpy(), "b": b.numpy()}).values()
    want = model(x, b)
    # torch's metadata, read by schema name: the traced input, the Python list, the result
    assert seen["self_meta"].shape == x.shape and seen["self_meta"].dtype == x.dtype
    assert (seen["bias_meta"] is None) == (not with_bias)
    assert seen["dims_meta"] == dims
    assert seen["result_meta"].shape == want.shape and seen["result_meta"].dtype == want.dtype
    assert got.dtype == want.numpy().dtype
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-6, atol=1e-6)


def test_an_undeclared_argument_off_its_default_is_an_error():
    class Clipped(torch.nn.Module):
        def forward(self, x):
            return torch.ops.coreai_test.affine(x, None, [0], clip=True)

    converter = TorchConverter()

    @converter.register_torch_lowering("coreai_test::affine.default")
    def affine(self, bias, dims, scale=1.0, dtype=None):
        return coreai.reduce_sum(self, axes=dims, keep_dims=True)

    with pytest.raises(LoweringError, match=r"clip=True is not supported by this lowering"):
        converter.add_exported_program(export(Clipped(), (torch.randn(2, 3),))).to_coreai()


def test_a_misnamed_parameter_names_the_schema():
    class Shift(torch.nn.Module):
        def forward(self, x):
            return torch.ops.coreai_test.shift(x, 0.5)

    converter = TorchConverter()

    @converter.register_torch_lowering("coreai_test::shift.default")
    def shift(self, lamda=2.0):
        return coreai.broadcasting_add(self, lamda)

    with pytest.raises(LoweringError, match=r"'lamda' is not an argument of .*did you mean "
                                            r"'lambda_'"):
        converter.add_exported_program(export(Shift(), (torch.randn(2, 3),))).to_coreai()


def test_python_keywords_get_a_trailing_underscore():
    class Shift(torch.nn.Module):
        def forward(self, x):
            return torch.ops.coreai_test.shift(x, 0.25)

    converter = TorchConverter()

    @converter.register_torch_lowering("coreai_test::shift.default")
    def shift(self, lambda_=2.0):
        return coreai.broadcasting_add(self, lambda_)

    x = torch.randn(2, 3)
    program = converter.add_exported_program(export(Shift(), (x,))).to_coreai()
    (got,) = program.run({"x": x.numpy()}).values()
    np.testing.assert_allclose(got, (x + 0.25).numpy(), rtol=1e-6)


@pytest.mark.parametrize("form", ["values_map", "declared"])
def test_the_fx_node_form_keeps_working(form):
    class Pair(torch.nn.Module):
        def forward(self, x):
            a, b = torch.ops.coreai_test.pair(x)
            return torch.ops.coreai_test.shift(a) * b

    converter = TorchConverter()

    @converter.register_torch_lowering("coreai_test::pair.default")
    def pair(self):  # schema-bound
        return coreai.broadcasting_mul(self, 2.0), coreai.broadcasting_sub(self, 1.0)

    if form == "values_map":
        @converter.register_torch_lowering("coreai_test::shift.default")
        def shift(values_map, node, loc):
            # multi-result values are reachable as "name#i" in the FX-node form
            src = node.args[0]
            assert values_map[f"{src.args[0].name}#0"] is values_map[src.name]
            x = get_operand(values_map, node, 0, loc)
            assert result_type(node).shape == x.type.shape
            return coreai.broadcasting_add(x, 2.0, loc=loc)
    else:  # other names: the form is declared, never guessed
        converter.register_torch_lowering("coreai_test::shift.default", form="node")(
            lambda v, n, loc: coreai.broadcasting_add(get_operand(v, n, 0, loc), 2.0))

    x = torch.randn(3, 4)
    program = converter.add_exported_program(export(Pair(), (x,))).to_coreai()
    (got,) = program.run({"x": x.numpy()}).values()
    np.testing.assert_allclose(got, Pair()(x).numpy(), rtol=1e-6)


torch.library.define("coreai_test::typed", "(Tensor self, ScalarType dtype=long) -> Tensor")


@torch.library.impl("coreai_test::typed", "CompositeExplicitAutograd")
def _typed(self, dtype=torch.int64):
    return self.to(dtype)


@pytest.mark.parametrize("dtype", [None, torch.int64, torch.float64, torch.bool])
def test_a_scalar_type_default_binds_as_a_dtype(dtype):
    # the schema stores ``dtype=long`` as c10's enum code; the lowering receives a DType
    class Typed(torch.nn.Module):
        def forward(self, x):
            if dtype is None:
                return torch.ops.coreai_test.typed(x)
            return torch.ops.coreai_test.typed(x, dtype)

    seen = []
    converter = TorchConverter()

    @converter.register_torch_lowering("coreai_test::typed.default")
    def typed(self: Value, dtype: DType = DType.int64) -> Value:
        seen.append(dtype)
        return coreai.cast(self, dtype)

    x = torch.tensor([1.5, -2.0, 0.0])
    program = converter.add_exported_program(export(Typed(), (x,))).to_coreai()
    (got,) = program.run([x.numpy()]).values()
    want = Typed()(x)
    assert seen == [dtype_of(want.dtype)]
    np.testing.assert_array_equal(got, want.numpy())


# -- the form is explicit ------------------------------------------------------------------------

# addcmul's schema (aten::addcmul itself is decomposed before the converter sees it)
torch.library.define("coreai_test::addcmul",
                     "(Tensor self, Tensor tensor1, Tensor tensor2, *, float value=1.) -> Tensor")


@torch.library.impl("coreai_test::addcmul", "CompositeExplicitAutograd")
def _addcmul(self, tensor1, tensor2, *, value=1.0):
    return torch.addcmul(self, tensor1, tensor2, value=value)


class Addcmul(torch.nn.Module):
    def forward(self, x, a, b):
        return torch.ops.coreai_test.addcmul(x, a, b, value=0.5)


def _addcmul_ep():
    return export(Addcmul(), (torch.randn(2, 3), torch.randn(2, 3), torch.randn(2, 3)))


def test_three_parameters_are_not_taken_for_the_node_form():
    # three positional parameters used to be guessed as fn(values_map, node, loc)
    converter = TorchConverter()

    @converter.register_torch_lowering("coreai_test::addcmul.default")
    def addcmul(x, t1, t2):
        raise AssertionError("never called")

    with pytest.raises(LoweringError, match=r"'x' is not an argument of coreai_test::addcmul.*"
                                            r"its arguments: self, tensor1, tensor2, value"):
        converter.add_exported_program(_addcmul_ep()).to_coreai()


def test_a_close_misnamed_parameter_gets_did_you_mean():
    converter = TorchConverter()

    @converter.register_torch_lowering("coreai_test::addcmul.default")
    def addcmul(self, tensor_1, tensor2, value=1):
        raise AssertionError("never called")

    with pytest.raises(LoweringError, match=r"'tensor_1' is not an argument .*did you mean "
                                            r"'tensor1'"):
        converter.add_exported_program(_addcmul_ep()).to_coreai()


def test_a_node_parameter_is_pointed_to_the_accessors():
    converter = TorchConverter()

    @converter.register_torch_lowering("coreai_test::addcmul.default")
    def addcmul(self, tensor1, tensor2, value=1, *, node=None):
        raise AssertionError("never called")

    with pytest.raises(LoweringError, match=r"does not receive the FX node.*arg_meta"):
        converter.add_exported_program(_addcmul_ep()).to_coreai()


def test_the_node_form_is_declared_or_named_exactly():
    x, a, b = (torch.randn(2, 3) for _ in range(3))
    want = Addcmul()(x, a, b).numpy()
    ep = export(Addcmul(), (x, a, b))

    def by_node(values_map, node, loc):
        s, t1, t2 = get_operands(values_map, node, [0, 1, 2], loc)
        return coreai.broadcasting_add(s, coreai.broadcasting_mul(
            coreai.broadcasting_mul(t1, t2), node.kwargs["value"]))

    def short(v, n, loc):
        return by_node(v, n, loc)

    for fn, form in ((by_node, None), (short, "node")):
        converter = TorchConverter()
        registered = converter.register_torch_lowering("coreai_test::addcmul.default",
                                                       form=form)(fn)
        assert registered is fn
        assert converter.lowering_for("coreai_test::addcmul.default") is fn
        program = converter.add_exported_program(ep).to_coreai()
        (got,) = program.run([x.numpy(), a.numpy(), b.numpy()]).values()
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_an_unknown_form_is_rejected_at_registration():
    with pytest.raises(ValueError, match=r"form='nodes' is not a lowering form"):
        TorchConverter().register_torch_lowering("my_lib::op.default", form="nodes")  # type: ignore[arg-type]


def test_an_op_without_schema_needs_the_node_form():
    graph = torch.fx.Graph()
    a, b = graph.placeholder("a"), graph.placeholder("b")
    node = graph.call_function(operator.add, (a, b))
    with pytest.raises(TypeError, match=r"has no schema.*fn\(values_map, node, loc\)"):
        call_lowering(as_lowering(lambda self, other: None), NodeValues(), node, None)


def test_builtin_lowerings_take_the_node_only_where_the_op_has_no_schema():
    for name, entry in default_table().items():
        fn = entry.fn
        if entry.form == "node":
            assert name.split("::")[0] in ("coreaix", "higher_order"), name
        else:
            params = inspect.signature(fn).parameters
            assert "node" not in params and "values_map" not in params, name


# -- ignored schema arguments ----------------------------------------------------------------------

class Full(torch.nn.Module):
    def forward(self, x):
        return x + torch.full((2, 3), 1.5, device="cpu", dtype=torch.float32, pin_memory=False)


def test_device_and_layout_arguments_need_no_declaration():
    x = torch.randn(2, 3)
    ep = export(Full(), (x,))
    (full,) = [n for n in ep.graph.nodes if n.target is torch.ops.aten.full.default]
    assert {"device", "pin_memory"} <= set(full.kwargs)  # they are in the graph
    converter = TorchConverter()

    @converter.register_torch_lowering("aten::full.default", allow_override=True)
    def full_(size, fill_value, dtype=None):
        return coreai.broadcast_to(coreai.constant(fill_value, dtype=dtype), size)

    (got,) = converter.add_exported_program(ep).to_coreai().run([x.numpy()]).values()
    np.testing.assert_allclose(got, Full()(x).numpy(), rtol=1e-6)


torch.library.define("coreai_test::laid_out", "(Tensor self, str layout='NCHW') -> Tensor")


@torch.library.impl("coreai_test::laid_out", "CompositeExplicitAutograd")
def _laid_out(self, layout="NCHW"):
    return self.clone()


def test_only_the_torch_meaning_of_an_ignored_name_is_ignored():
    # a custom op's own ``str layout`` is a real argument: undeclared, it must hold its default
    class LaidOut(torch.nn.Module):
        def forward(self, x):
            return torch.ops.coreai_test.laid_out(x, "NHWC")

    converter = TorchConverter()

    @converter.register_torch_lowering("coreai_test::laid_out.default")
    def laid_out(self):
        return self

    with pytest.raises(LoweringError, match=r"layout='NHWC' is not supported"):
        converter.add_exported_program(export(LaidOut(), (torch.randn(2),))).to_coreai()


def test_a_sparse_layout_is_not_ignored():
    (layout,) = [a for a in schema_args(torch.ops.aten.full.default) if a.name == "layout"]
    assert layout.ignorable(None) and layout.ignorable(torch.strided)
    assert not layout.ignorable(torch.sparse_coo)


# -- torch's metadata of the node being lowered ----------------------------------------------------

_DTYPES = [torch.bool, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16,
           torch.float32, torch.float64, torch.complex64]


def _meta_operand(draw, can_be_number):
    if can_be_number and draw(st.booleans()):
        return draw(st.sampled_from([True, 3, -2, 2.5, 1j]))
    return torch.empty([2] * draw(st.integers(0, 2)), dtype=draw(st.sampled_from(_DTYPES)),
                       device="meta")


@settings(max_examples=200)
@given(data=st.data())
def test_promoted_dtype_is_torch_result_type(data):
    a = _meta_operand(data.draw, can_be_number=False)
    b = _meta_operand(data.draw, can_be_number=True)
    graph = torch.fx.Graph()
    pa = graph.placeholder("a")
    pa.meta["val"] = a
    if isinstance(b, torch.Tensor):
        other = graph.placeholder("b")
        other.meta["val"] = b
    else:
        other = b  # a wrapped Python number, as add.Tensor(x, 2.5) records it
    node = graph.call_function(torch.ops.aten.add.Tensor, (pa, other))
    want = torch.result_type(a, b)

    def promoted() -> DType:
        return call_lowering(
            as_lowering(lambda values_map, node, loc: promoted_dtype("self", "other")),
            NodeValues(), node, None)

    if want == torch.complex32:  # float16 with a complex number: no Core AI type to name
        with pytest.raises(TypeError, match="complex32 has no Core AI element type"):
            promoted()
    else:
        assert promoted() == dtype_of(want)


def test_arg_meta_names_the_schema_and_suggests():
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    x.meta["val"] = torch.empty(4, 5, device="meta")
    node = graph.call_function(torch.ops.aten.squeeze.dim, (x, 1))
    seen = []
    call_lowering(as_lowering(lambda values_map, node, loc: seen.append(
        (arg_meta("self").shape, arg_meta("dim")))), NodeValues(), node, None)
    assert seen == [(torch.Size([4, 5]), 1)]
    with pytest.raises(KeyError, match="did you mean 'dim'"):
        call_lowering(as_lowering(lambda values_map, node, loc: arg_meta("dims")), NodeValues(),
                      node, None)
    with pytest.raises(RuntimeError, match="only while a lowering runs"):
        arg_meta("self")
