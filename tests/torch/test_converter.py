"""TorchConverter: staging, naming, errors, weights, entrypoints, locations, progress."""

from __future__ import annotations

import copy
import io

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from coreai_core import DType
from coreai_core.dialects import coreai
from coreai_torch import LoweringError, TorchConverter, UnsupportedOpsError
from coreai_torch.utils import get_operand
from tests.torch.harness import FnModule, export


class Linear(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x))


def _linear_ep():
    torch.manual_seed(0)
    model = Linear().eval()
    x = torch.randn(2, 8)
    return model, x, export(model, (x,))


def test_default_names_come_from_the_graph() -> None:
    _, _, ep = _linear_ep()
    program = TorchConverter().add_exported_program(ep).to_coreai()
    assert program.input_names == ["x"]
    assert program.output_names == ["relu"]


def test_custom_names_and_count_mismatch() -> None:
    model, x, ep = _linear_ep()
    program = TorchConverter().add_exported_program(
        ep, input_names=["inp"], output_names=["out"]).to_coreai()
    out = program.run({"inp": x.numpy()})
    np.testing.assert_allclose(out["out"], model(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="input_names has 2 names but the program has 1"):
        TorchConverter().add_exported_program(ep, input_names=["a", "b"])
    with pytest.raises(ValueError, match="output_names has 0 names"):
        TorchConverter().add_exported_program(ep, output_names=[])
    with pytest.raises(ValueError, match="repeats"):
        TorchConverter().add_exported_program(_dup_outputs_ep(), output_names=["z", "z"])


def _dup_outputs_ep():
    class Two(torch.nn.Module):
        def forward(self, x):
            return x + 1, x * 2

    return export(Two(), (torch.randn(2),))


def test_staging_errors() -> None:
    _, _, ep = _linear_ep()
    converter = TorchConverter()
    with pytest.raises(ValueError, match="nothing to convert"):
        converter.to_coreai()
    converter.add_exported_program(ep)
    with pytest.raises(ValueError, match="already staged"):
        converter.add_exported_program(ep)
    with pytest.raises(KeyError, match="did you mean 'main'"):
        converter.to_coreai(["mian"])
    with pytest.raises(TypeError, match="ExportedProgram"):
        converter.add_exported_program(Linear())  # type: ignore[arg-type]
    converter.clear(["main"])
    with pytest.raises(KeyError):
        converter.clear(["main"])


def test_add_pytorch_module() -> None:
    model, x, _ = _linear_ep()
    program = TorchConverter().add_pytorch_module(model, args=(x,)).to_coreai()
    (out,) = program.run({"x": x.numpy()}).values()
    np.testing.assert_allclose(out, model(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    program = TorchConverter().add_pytorch_module(
        model, lambda m: torch.export.export(m, (x,))).to_coreai()
    (out,) = program.run({"x": x.numpy()}).values()
    np.testing.assert_allclose(out, model(x).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_multiple_entrypoints_share_weights() -> None:
    model, _x, ep = _linear_ep()
    ep2 = export(model, (torch.randn(5, 8),))
    program = (TorchConverter().add_exported_program(ep, entrypoint_name="prefill")
               .add_exported_program(ep2, entrypoint_name="decode").to_coreai())
    assert program.entrypoints == ["prefill", "decode"]
    assert sorted(program.weights) == ["fc.bias", "fc.weight"]
    x5 = torch.randn(5, 8)
    out = program.run({"x": x5.numpy()}, entrypoint="decode")
    np.testing.assert_allclose(next(iter(out.values())), model(x5).detach().numpy(),
                               rtol=1e-5, atol=1e-6)


def test_weights_are_not_copied_and_keep_dtypes() -> None:
    class Mixed(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(4, 4, dtype=torch.float64))
            self.register_buffer("idx", torch.arange(4, dtype=torch.int64) * (2**40))

        def forward(self, x):
            return x @ self.w, self.idx + 1

    model = Mixed()
    ep = export(model, (torch.randn(2, 4, dtype=torch.float64),))
    program = TorchConverter().add_exported_program(ep).to_coreai()
    assert program.weights["w"].dtype == np.float64
    assert program.weights["idx"].dtype == np.int64
    assert np.shares_memory(program.weights["w"], ep.state_dict["w"].detach().numpy())
    x = torch.randn(2, 4, dtype=torch.float64)
    a, b = program.run({"x": x.numpy()}).values()
    assert a.dtype == np.float64 and b.dtype == np.int64
    np.testing.assert_array_equal(b, (model.idx + 1).numpy())


def test_unsupported_ops_listed_before_lowering() -> None:
    @torch.library.custom_op("test_conv::mystery", mutates_args=())
    def mystery(x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    @mystery.register_fake
    def _(x):
        return torch.empty_like(x)

    @torch.library.custom_op("test_conv::enigma", mutates_args=())
    def enigma(x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    @enigma.register_fake
    def _(x):
        return torch.empty_like(x)

    class M(torch.nn.Module):
        def forward(self, x):
            y = torch.ops.test_conv.mystery(x)
            y = torch.ops.test_conv.mystery(y)
            return torch.ops.test_conv.enigma(y) + 1

    ep = export(M(), (torch.randn(3),))
    converter = TorchConverter()
    called = []
    converter.register_torch_lowering("aten::add.Tensor", allow_override=True)(
        lambda v, n, loc: called.append(n))
    with pytest.raises(UnsupportedOpsError) as info:
        converter.add_exported_program(ep).to_coreai()
    msg = str(info.value)
    assert not called, "a lowering ran before the preflight check"
    assert "test_conv::mystery.default: 2 node(s)" in msg
    assert "test_conv::enigma.default: 1 node(s)" in msg
    assert "test_converter.py:" in msg  # the user's source line
    assert '@converter.register_torch_lowering("test_conv::enigma.default")' in msg
    assert {o.qualified_name for o in info.value.ops} == {
        "test_conv::mystery.default", "test_conv::enigma.default"}


def test_lowering_that_raises_names_node_target_source_and_function() -> None:
    _, _, ep = _linear_ep()
    converter = TorchConverter()

    @converter.register_torch_lowering("aten::relu.default", allow_override=True)
    def broken_relu(values_map, node, loc):
        raise RuntimeError("boom")

    with pytest.raises(LoweringError) as info:
        converter.add_exported_program(ep).to_coreai()
    msg = str(info.value)
    assert "'relu'" in msg and "aten::relu.default" in msg and "boom" in msg
    assert "broken_relu" in msg and "test_converter.py:" in msg


def test_lowering_returning_wrong_type_is_reported() -> None:
    _, _, ep = _linear_ep()
    converter = TorchConverter()

    @converter.register_torch_lowering("aten::relu.default", allow_override=True)
    def wrong_dtype(values_map, node, loc):
        return coreai.cast(get_operand(values_map, node, 0, loc), DType.float16)

    with pytest.raises(LoweringError, match="element type float16, torch says float32"):
        converter.add_exported_program(ep).to_coreai()

    converter = TorchConverter()

    @converter.register_torch_lowering("aten::relu.default", allow_override=True)
    def wrong_shape(values_map, node, loc):
        return coreai.reduce_sum(get_operand(values_map, node, 0, loc), axes=[0])

    with pytest.raises(LoweringError, match="torch says"):
        converter.add_exported_program(ep).to_coreai()

    converter = TorchConverter()
    converter.register_torch_lowering("aten::relu.default", allow_override=True, form="node")(
        lambda v, n, loc: 3)
    with pytest.raises(LoweringError, match="expected a Value, got int"):
        converter.add_exported_program(ep).to_coreai()


def test_locations_are_relative_and_hidden_by_default() -> None:
    _, _, ep = _linear_ep()
    program = TorchConverter().add_exported_program(ep).to_coreai()
    assert "loc(" not in str(program)
    text = program.to_text(locations=True)
    assert 'loc("tests/torch/test_converter.py":' in text
    assert 'in "fc"' in text
    assert "/work/" not in text and "/root/" not in text and "site-packages" not in text


def test_progress_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    _, _, ep = _linear_ep()
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    TorchConverter().add_exported_program(ep).to_coreai()
    assert err.getvalue() == ""  # not a terminal: silent
    TorchConverter(progress=True).add_exported_program(ep).to_coreai()
    assert "100%" in err.getvalue()
    err.truncate(0)
    TorchConverter(progress=False).add_exported_program(ep).to_coreai()
    assert err.getvalue() == ""


def test_auto_decomposition_fallback_is_logged() -> None:
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.addcmul(x, x, x, value=0.5) + torch.nn.functional.silu(x)

    x = torch.randn(3, 4)
    ep = torch.export.export(M(), (x,))  # not decomposed: addcmul has no lowering
    converter = TorchConverter()
    program = converter.add_exported_program(ep).to_coreai()
    assert any("decomposed aten::addcmul.default (1 node(s)) on the fly" in line
               for line in converter.conversion_log)
    (out,) = program.run([x.numpy()]).values()
    np.testing.assert_allclose(out, M()(x).numpy(), rtol=1e-5, atol=1e-6)


def _copy_into_select(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = x.clone()
    out[0].copy_(y[: x.shape[1]])
    return out


def _setitem_column(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = x.clone()
    out[:, 1] = y[: x.shape[0]]
    return out


def _copy_into_input_view(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x.select(1, 0).copy_(y[: x.shape[0]] * 2)
    return x + 1


class _BufferRowWrite(torch.nn.Module):
    def __init__(self, rows: int, cols: int) -> None:
        super().__init__()
        self.register_buffer("buf", torch.zeros(rows, cols))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        self.buf[-1].copy_(y[: x.shape[1]])
        return self.buf + x


@settings(max_examples=12, deadline=None)
@given(data=st.data(), case=st.sampled_from(("select", "setitem", "input_view", "buffer")),
       decompose=st.booleans())
def test_in_place_writes_into_views_are_functionalized(data: st.DataObject, case: str,
                                                        decompose: bool) -> None:
    """copy_ into a select view (and ``out[:, 1] = y``) inside forward, on a clone, a user
    input or a buffer, exported as torch.export leaves it (in-place ops in the graph) or
    decomposed: converted as functional writes like torch's functionalization."""
    rows, cols = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 5))
    x = torch.randn(rows, cols)
    y = torch.randn(max(rows, cols))
    module: torch.nn.Module
    if case == "buffer":
        module = _BufferRowWrite(rows, cols)
    else:
        fn = {"select": _copy_into_select, "setitem": _setitem_column,
              "input_view": _copy_into_input_view}[case]
        module = FnModule(fn, [x, y], {})
    reference = copy.deepcopy(module)
    program = TorchConverter().add_pytorch_module(module, args=(x.clone(), y),
                                                  decompose=decompose).to_coreai()
    feeds = [x.numpy().copy(), y.numpy()]
    state = None
    if case == "input_view":  # the mutated input is state of the program
        state = {program.state_names[0]: feeds[0]}
        feeds = feeds[1:]
    x_eager = x.clone()
    with torch.no_grad():
        expected = reference(x_eager, y)
    (got,) = program.run(feeds, state=state).values()
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-6, atol=1e-6)
    if state is not None:
        np.testing.assert_allclose(next(iter(state.values())), x_eager.numpy(), rtol=1e-6)
    if case == "buffer":
        np.testing.assert_allclose(program.state["buf"], reference.buf.numpy(), rtol=1e-6)
