"""Apple's names outside the composite ops: ``Program.save_asset``, the Metal kernel names,
``MetalParameter``, ``__version__`` and ``add_pytorch_module``'s parameter order."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from coreai.authoring import AIModelAsset
from coreai.runtime import NDArray

import coreai_torch
from coreai_core import Program, TensorType
from coreai_core.assets import ASSET_WRITERS, register_asset_writer
from coreai_core.dialects import coreai
from coreai_torch import MetalUnavailableError, TorchConverter, TorchMetalKernel
from coreai_torch.errors import MissingExtraError


def _program() -> Program:
    program = Program()
    with program.graph("main", inputs={"x": TensorType((2, 3), "float32")}) as g:
        g.outputs({"y": coreai.tanh(coreai.broadcasting_mul(g["x"], 3.0))})
    return program


async def _run(asset: AIModelAsset, x: np.ndarray) -> dict[str, np.ndarray]:
    async with asset.executable() as model:
        outputs = await model.load_function("main")({"x": NDArray(x)})
        return {k: v.numpy() for k, v in outputs.items()}


def test_save_asset_writes_an_aimodel_and_returns_apples_asset(tmp_path: Path) -> None:
    program = _program()
    asset = program.save_asset(tmp_path / "m.aimodel")
    assert isinstance(asset, AIModelAsset)
    assert AIModelAsset.is_valid(tmp_path / "m.aimodel")
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    got = asyncio.run(_run(asset, x))
    # Apple's interpreter and the numpy runtime: float32 tanh, a few ulp apart
    np.testing.assert_allclose(got["y"], program.run({"x": x})["y"], rtol=1e-6, atol=1e-6)


def test_save_asset_names_the_extra_when_apples_package_is_missing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "coreai_torch.aimodel", None)  # as if not importable
    with pytest.raises(MissingExtraError, match=r"pip install 'coreai-torch\[coreai\]'"):
        _program().save_asset(tmp_path / "m.aimodel")
    assert not (tmp_path / "m.aimodel").exists()


def test_save_asset_refuses_a_suffix_without_a_writer(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"no asset writer for files ending in '\.mlpackage' "
                                         r"\(registered: \.aimodel\)"):
        _program().save_asset(tmp_path / "m.mlpackage")
    with pytest.raises(ValueError, match="already registered"):
        register_asset_writer(".aimodel", lambda program, path: None)
    assert ASSET_WRITERS[".aimodel"].__module__ == "coreai_torch._asset"


def test_metal_kernels_need_a_mac() -> None:
    with pytest.raises(MetalUnavailableError, match=r"TorchMetalKernel\('add'\): custom Metal "
                                                    r"kernels need macOS with Metal"):
        TorchMetalKernel("add", ["x"], ["y"], "y[id] = x[id];", torch.neg)
    converter = TorchConverter()
    assert converter.register_custom_kernels([]) is converter
    with pytest.raises(MetalUnavailableError, match="register_custom_kernels"):
        converter.register_custom_kernels([object()])


def test_apples_other_public_names() -> None:
    from coreai.authoring import MetalParameter

    assert coreai_torch.MetalParameter is MetalParameter
    assert coreai_torch.__version__ and "MetalParameter" in coreai_torch.__all__
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        coreai_torch.nothing  # noqa: B018


def test_add_pytorch_module_takes_apples_positional_order() -> None:
    """(module, export_fn, externalize_modules, input_names, output_names, state_names,
    entrypoint_name), as Apple's API page lists them."""
    model = torch.nn.Linear(3, 2).eval()
    x = torch.randn(4, 3)
    converter = TorchConverter().add_pytorch_module(
        model, lambda m: torch.export.export(m, (x,)), None, ["features"], ["logits"], None,
        "encode")
    program = converter.to_coreai()
    assert list(program.graphs) == ["encode"]
    assert (program.input_names, program.output_names) == (["features"], ["logits"])


@torch.library.custom_op("apple_api_test::scaled_mix", mutates_args=())
def scaled_mix(x: torch.Tensor, y: torch.Tensor, weight: float) -> torch.Tensor:
    return weight * x + y * y


@scaled_mix.register_fake
def _(x: torch.Tensor, y: torch.Tensor, weight: float) -> torch.Tensor:
    return torch.empty_like(x)


def test_generate_composite_decl_with_coreai_graph_builds_a_composite_in_a_lowering(
        tmp_path: Path) -> None:
    """Apple's API page pattern: a lowering declares a composite and builds its body with the
    ``coreai.graph`` decorator it defines, so each call site gets its graph (as with Apple's
    converter), named after the composite and made unique."""
    from coreai_core import Value
    from coreai_torch import generate_composite_decl

    converter = TorchConverter()

    @converter.register_torch_lowering("apple_api_test::scaled_mix.default")
    def lower(values_map, node, loc):
        arg0, arg1 = values_map[node.args[0].name], values_map[node.args[1].name]
        decl = generate_composite_decl(arg0.context, "scaled_mix", ["argument0", "argument1"],
                                       ["output"], {"weight": node.args[2]}, version=1)

        @coreai.graph(no_inline=True, composite_decl=decl)
        def scaled_mix_impl(argument0: Value, argument1: Value) -> Value:
            weight = coreai.constant(node.args[2], dtype=argument0.type.element_type)
            return coreai.broadcasting_add(coreai.broadcasting_mul(argument0, weight),
                                           coreai.broadcasting_mul(argument1, argument1))

        return scaled_mix_impl(arg0, arg1)[0]

    class Model(torch.nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return scaled_mix(scaled_mix(x, y, 0.5), y, 0.5) - scaled_mix(x, x[:1], 2.0)

    x, y = torch.randn(3, 4), torch.randn(3, 4)
    program = converter.add_exported_program(torch.export.export(Model(), (x, y))).to_coreai()
    declared = sorted((g.composite.name, g.composite.attributes["weight"], list(g.inputs),
                       list(g.output_values)) for g in program.composites.values())
    assert declared == [("scaled_mix", 0.5, ["argument0", "argument1"], ["output"])] * 2 + [
        ("scaled_mix", 2.0, ["argument0", "argument1"], ["output"])]
    assert sorted(program.composites) == ["scaled_mix", "scaled_mix_1", "scaled_mix_2"]
    got = program.run({"x": x.numpy(), "y": y.numpy()})["sub"]
    np.testing.assert_allclose(got, Model()(x, y).numpy(), rtol=1e-6, atol=1e-6)
    program.save_asset(tmp_path / "mix.aimodel")  # composites export as Core AI composites


def test_generate_composite_decl_takes_apples_version_argument() -> None:
    """Apple's signature: ``version`` (default 1) is an argument; the ``op_attributes``
    entry this package took before still works and must agree with it."""
    from coreai_torch import generate_composite_decl

    decl = generate_composite_decl(None, "op", ["a"], ["out"], {"eps": 0.1})
    assert decl.composite.version == 1
    decl = generate_composite_decl(None, composite_name="op", input_names=["a"],
                                   output_names=["out"], op_attributes={"eps": 0.1}, version=2)
    assert (decl.composite.version, decl.composite.attributes) == (2, {"eps": 0.1})
    with pytest.warns(DeprecationWarning, match="pass version="):
        old_form = generate_composite_decl(None, "op", ["a"], ["out"], {"version": 3})
    assert old_form.composite.version == 3
    with pytest.raises(ValueError, match="give the version once"), \
            pytest.warns(DeprecationWarning):
        generate_composite_decl(None, "op", ["a"], ["out"], {"version": 3}, version=2)
