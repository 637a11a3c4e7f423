"""Misuse of the converter API and lowerings that return foreign Values: clear errors, at once.

Issue 18, items 15 and 16: a lowering returning a Value of another program was accepted and
failed only at ``run()``; ``to_coreai(entrypoints="main")`` iterated the string ("entrypoint
'm' is not staged") and ``add_pytorch_module(..., export_fn=lambda m: None)`` raised a raw
AttributeError.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from coreai_core import Program, TensorType, Value
from coreai_core.dialects import coreai
from coreai_torch import LoweringError, TorchConverter
from coreai_torch.utils import get_operand
from tests.torch.harness import export


class Linear(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x))


class Counter(torch.nn.Module):
    """A module with a mutated buffer (state) named like the input would be by default."""

    count: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.zeros(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.count.add_(x)
        return self.count * 2


X = torch.randn(2, 8)


@pytest.fixture(scope="module")
def ep() -> torch.export.ExportedProgram:
    torch.manual_seed(0)
    return export(Linear().eval(), (X,))


# -- item 15: what a lowering returns -----------------------------------------------------------

def _foreign_value() -> Value:
    other = Program()
    with other.graph("main", inputs={"a": TensorType((2, 4), "float32")}) as g:
        v = coreai.relu(g["a"])
        g.outputs({"b": v})
    return v


def test_a_value_of_another_program_is_rejected_at_once(ep: Any) -> None:
    converter = TorchConverter()
    foreign = _foreign_value()

    @converter.register_torch_lowering("aten::relu.default", allow_override=True)
    def leaky_relu_lowering(values_map: Any, node: Any, loc: Any) -> Value:
        return foreign

    with pytest.raises(LoweringError) as info:
        converter.add_exported_program(ep).to_coreai()
    e = info.value
    assert e.target == "aten::relu.default" and e.node == "relu"
    assert e.lowering is not None and e.lowering.endswith("leaky_relu_lowering")
    assert "is not defined in graph @main" in str(e) and "coreai.relu" in str(e)


def test_a_value_kept_from_an_earlier_conversion_is_rejected(ep: Any) -> None:
    converter = TorchConverter()
    kept: list[Value] = []

    @converter.register_torch_lowering("aten::relu.default", allow_override=True)
    def caching_relu(values_map: Any, node: Any, loc: Any) -> Value:
        if not kept:
            kept.append(coreai.relu(get_operand(values_map, node, 0, loc), loc=loc))
        return kept[0]

    converter.add_exported_program(ep)
    first = converter.to_coreai()
    np.testing.assert_allclose(first.run({"x": X.numpy()})["relu"],
                               torch.relu(ep.module()(X)).detach().numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(LoweringError, match=r"caching_relu: result Value\(coreai.relu#0"):
        converter.to_coreai()


def test_a_value_of_another_graph_of_the_same_program_is_rejected(ep: Any) -> None:
    """Two entrypoints: a lowering of the second returns a Value of the first."""
    converter = TorchConverter()
    seen: dict[str, Value] = {}

    @converter.register_torch_lowering("aten::relu.default", allow_override=True)
    def shared_relu(values_map: Any, node: Any, loc: Any) -> Value:
        return seen.setdefault("v", coreai.relu(get_operand(values_map, node, 0, loc)))

    converter.add_exported_program(ep, entrypoint_name="a")
    converter.add_exported_program(ep, entrypoint_name="b")
    with pytest.raises(LoweringError, match="is not defined in graph @b"):
        converter.to_coreai()


@pytest.mark.parametrize("result", [np.zeros((2, 4), np.float32), 3, None, "x"])
def test_a_lowering_returning_a_non_value_is_rejected(ep: Any, result: Any) -> None:
    converter = TorchConverter()

    @converter.register_torch_lowering("aten::relu.default", allow_override=True)
    def bad_relu(values_map: Any, node: Any, loc: Any) -> Any:
        return result

    with pytest.raises(LoweringError, match=r"bad_relu: expected a Value, got"):
        converter.add_exported_program(ep).to_coreai()


def test_returning_an_operand_is_fine(ep: Any) -> None:
    converter = TorchConverter()

    @converter.register_torch_lowering("aten::relu.default", allow_override=True)
    def identity(values_map: Any, node: Any, loc: Any) -> Value:
        return get_operand(values_map, node, 0, loc)

    program = converter.add_exported_program(ep).to_coreai()
    got = program.run({"x": X.numpy()})["relu"]  # relu lowered as the identity
    linear = torch.nn.functional.linear(X, ep.state_dict["fc.weight"], ep.state_dict["fc.bias"])
    np.testing.assert_allclose(got, linear.detach().numpy(), rtol=1e-5, atol=1e-6)


# -- item 16: API misuse ------------------------------------------------------------------------

def test_entrypoints_as_a_string(ep: Any) -> None:
    converter = TorchConverter().add_exported_program(ep)
    with pytest.raises(TypeError, match=r"entrypoints must be a list of names, got the string "
                                        r"'main'; write entrypoints=\['main'\]"):
        converter.to_coreai(entrypoints="main")
    with pytest.raises(TypeError, match="got the string 'main'"):
        converter.clear("main")
    assert converter.to_coreai(entrypoints=["main"]).entrypoints == ["main"]


def test_entrypoints_empty_repeated_or_unknown(ep: Any) -> None:
    converter = TorchConverter().add_exported_program(ep)
    with pytest.raises(ValueError, match=r"entrypoints is empty.*\['main'\]"):
        converter.to_coreai(entrypoints=[])
    with pytest.raises(ValueError, match=r"entrypoints repeats \['main'\]"):
        converter.to_coreai(entrypoints=["main", "main"])
    with pytest.raises(KeyError, match="entrypoint 'mian' is not staged; did you mean 'main'"):
        converter.to_coreai(entrypoints=["mian"])
    with pytest.raises(TypeError, match="every entry of entrypoints must be a str, got int"):
        converter.to_coreai(entrypoints=[0])  # type: ignore[list-item]


@pytest.mark.parametrize(("fn", "message"), [
    (lambda m: None, "export_fn returned NoneType, not a torch.export.ExportedProgram"),
    (lambda m: m, "export_fn returned Linear, not a torch.export.ExportedProgram"),
])
def test_export_fn_must_return_an_exported_program(fn: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        TorchConverter().add_pytorch_module(Linear(), export_fn=fn)


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda c: c.add_pytorch_module(Linear(), (X,)), TypeError,
     r"export_fn must be a function .* got tuple; pass example inputs as args=\(\.\.\.\)"),
    (lambda c: c.add_pytorch_module(Linear(), args=X), TypeError,
     r"args must be a tuple of example inputs, got Tensor; write args=\(x,\)"),
    (lambda c: c.add_pytorch_module(Linear(), args=(X,), kwargs=[1]), TypeError,
     "kwargs must be a mapping"),
    (lambda c: c.add_pytorch_module(Linear(), args=(X,), input_name=["x"]), TypeError,
     "unexpected keyword argument 'input_name'"),
    (lambda c: c.add_pytorch_module(Linear(), args=(X,), decompose="yes"), TypeError,
     "decompose must be True or False"),
    (lambda c: c.add_pytorch_module(lambda x: x, args=(X,)), TypeError,
     "expects a torch.nn.Module, got function"),
])
def test_add_pytorch_module_misuse(call: Any, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        call(TorchConverter())


@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"input_names": "x"}, TypeError, r"input_names must be a list of names, got the string "
                                      r"'x'; write input_names=\['x'\]"),
    ({"output_names": "y"}, TypeError, "output_names must be a list of names"),
    ({"input_names": [1]}, TypeError, "every entry of input_names must be a str, got int"),
    ({"input_names": [""]}, ValueError, "every entry of input_names must not be empty"),
    ({"input_names": {"x": 1}}, TypeError, "input_names must be a list of names, got dict"),
    ({"input_names": 3}, TypeError, "input_names must be a list of names, got int"),
    ({"entrypoint_name": ["main"]}, TypeError, "entrypoint_name must be a str, got list"),
    ({"entrypoint_name": ""}, ValueError, "entrypoint_name must not be empty"),
])
def test_add_exported_program_name_misuse(ep: Any, kwargs: dict, error: type,
                                          message: str) -> None:
    with pytest.raises(error, match=message):
        TorchConverter().add_exported_program(ep, **kwargs)


def test_input_and_state_names_must_differ() -> None:
    counter_ep = export(Counter(), (torch.ones(2),))
    with pytest.raises(ValueError, match=r"input_names and state_names share \['a'\]"):
        TorchConverter().add_exported_program(counter_ep, input_names=["a"], state_names=["a"])
    program = TorchConverter().add_exported_program(
        counter_ep, input_names=["a"], state_names=["total"]).to_coreai()
    program.run({"a": np.ones(2, np.float32)})
    out = program.run({"a": np.ones(2, np.float32)})
    np.testing.assert_array_equal(program.state["total"], [2, 2])
    np.testing.assert_array_equal(next(iter(out.values())), [4, 4])


def test_register_torch_lowering_misuse() -> None:
    converter = TorchConverter()

    def lowering(values_map: Any, node: Any, loc: Any) -> Value:
        return get_operand(values_map, node, 0, loc)

    with pytest.raises(TypeError, match="takes the op's name"):
        converter.register_torch_lowering(lowering)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="allow_override must be True or False"):
        converter.register_torch_lowering("my_lib::f.default", allow_override="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="decorates a function, got int"):
        converter.register_torch_lowering("my_lib::f.default")(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="progress must be True, False or None"):
        TorchConverter(progress="yes")  # type: ignore[arg-type]
