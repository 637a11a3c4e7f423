"""Schema-bound lowerings: arguments bound by name from the op's schema, and the FX-node form."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from coreai_core import DType, Value
from coreai_core.dialects import coreai
from coreai_torch import LoweringError, TorchConverter
from coreai_torch.utils import dtype_of, get_operand, result_dtype, result_type
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
               dtype: DType | None = None, *, node: torch.fx.Node) -> Value:
        seen.update(self=self, bias=bias, dims=dims, scale=scale, dtype=dtype, node=node)
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
    assert isinstance(seen["node"], torch.fx.Node)
    (got,) = program.run({"x": x.numpy(), "b": b.numpy()}).values()
    want = model(x, b)
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


@pytest.mark.parametrize("form", ["values_map", "short_names"])
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
    else:
        converter.register_torch_lowering("coreai_test::shift.default")(
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
