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
