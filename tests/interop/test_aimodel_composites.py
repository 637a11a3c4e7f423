"""Composites exported as Core AI composites (coreai_torch/aimodel/_composites.py): the asset
declares each one once (``composite_decl`` on a private ``noinline`` graph) and invokes it at
every call site; Apple's interpreter runs it (its decomposition body) and matches our runtime,
an independent numpy computation and torch eager. Declarations that do not map are inlined."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import coreai.authoring as ca
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from coreai._compiler import ir as apple_ir

from coreai_core import Composite, Program, TensorType
from coreai_core.dialects import coreai
from coreai_torch import ExternalizeSpec, TorchConverter
from coreai_torch.aimodel import build_module, export_aimodel, run_aimodel, verify_aimodel
from coreai_torch.aimodel._composites import unmapped_reason
from coreai_torch.composite_ops import SDPA, RMSNorm
from tests.interop.helpers import ATOL, RTOL, check_matches_runtime
from tests.models.zoo import all_models

WEIGHT = np.array([1.0, 2.0, 0.5, -1.0], np.float32)
# Every kind of attribute value a declaration holds, with values MLIR prints exactly.
ATTRIBUTES: dict[str, Any] = {"eps": 0.5, "axis": -1, "affine": True, "mode": "mean",
                              "bias": None, "dims": [4, 2]}
# How Core AI's dialect prints ATTRIBUTES (its dictionary sorts the names; None is a unit).
DECLARED = ('#coreai.composite_declaration<"my.rms_norm" = {affine = true, axis = -1 : i64, '
            'bias, dims = [4, 2], eps = 5.000000e-01 : f64, mode = "mean"}>')


def _t(*shape: int) -> TensorType:
    return TensorType(shape, "float32")


def _with_norm(decl: Composite) -> Program:
    """A program with composite graph ``norm``: an rms norm with eps = 0.5."""
    program = Program()
    with program.graph("norm", inputs={"x": _t(3, 4), "weight": _t(4)}, composite=decl) as g:
        x = g["x"]
        mean_square = coreai.reduce_mean(coreai.broadcasting_mul(x, x), axes=[-1],
                                         keep_dims=True)
        scale = coreai.rsqrt(coreai.broadcasting_add(mean_square, 0.5))
        g.outputs({"y": coreai.broadcasting_mul(coreai.broadcasting_mul(x, scale), g["weight"])})
    return program


def _norm_program(decl: Composite) -> Program:
    """main invokes composite graph ``norm`` twice."""
    program = _with_norm(decl)
    with program.graph("main", inputs={"h": _t(3, 4)}) as g:
        weight = coreai.constant(WEIGHT)
        (once,) = coreai.invoke([g["h"], weight], callee="norm")
        (twice,) = coreai.invoke([coreai.relu(once), weight], callee="norm")
        g.outputs({"y": twice})
    return program


@contextmanager
def _logged(name: str) -> Iterator[list[str]]:
    """The messages ``name``'s logger emits at INFO and above (pytest's capture is off)."""
    messages: list[str] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: messages.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger(name)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield messages
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _numpy_norm(x: np.ndarray) -> np.ndarray:
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + 0.5) * WEIGHT


def _graph_lines(module: Any) -> list[str]:
    return [line.strip() for line in str(module).splitlines()
            if line.strip().startswith("coreai.graph")]


def _asset_text(path: Path) -> str:
    """The functions the asset stores, in Apple's serialized form (read with its raw layer)."""
    with ca.Context():
        return "\n".join(str(apple_ir.Module.parse(f.read_bytes()))
                         for f in sorted(path.glob("*.mlirb")))


def test_user_composite_is_declared_once_and_invoked_twice(tmp_path: Path) -> None:
    program = _norm_program(Composite("my.rms_norm", attributes=ATTRIBUTES))
    module = build_module(program)
    graphs = _graph_lines(module)
    assert len(graphs) == 2
    assert graphs[0].startswith("coreai.graph private noinline @norm(")
    assert f"composite_decl = {DECLARED}" in graphs[0]
    assert "composite_decl" not in graphs[1]
    assert len(re.findall(r"coreai\.invoke @norm\(", str(module))) == 2

    path = export_aimodel(program, tmp_path / "norm.aimodel")
    stored = _asset_text(path)
    assert 'compositeDecl = #aicode.serialization.opaque<"my.rms_norm"' in stored
    h = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    got = run_aimodel(path, {"h": h})["y"]
    np.testing.assert_allclose(got, program.run({"h": h})["y"], rtol=RTOL, atol=ATOL)
    want = _numpy_norm(np.maximum(_numpy_norm(h), 0))
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize(("decl", "reason"), [
    (Composite("my.rms_norm", version=2), "has no version"),
    (Composite("batch_norm"), "a meaning of its own"),
    (Composite("my.rms_norm", attributes={"op_attributes": "eps=0.5"}), "rewritten by Core AI"),
    (Composite("my.rms_norm", attributes={"big": 2**70}), "does not fit a 64-bit integer"),
])
def test_declaration_that_does_not_map_is_inlined(decl: Composite, reason: str,
                                                  tmp_path: Path) -> None:
    program = _norm_program(decl)
    with _logged("coreai_torch.aimodel") as messages:
        module = build_module(program)
    assert [m for m in messages if "'norm' is inlined" in m and reason in m], messages
    text = str(module)
    assert "composite_decl" not in text and "coreai.invoke" not in text
    assert len(_graph_lines(module)) == 1
    h = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    check_matches_runtime(program, tmp_path / "inlined.aimodel", {"h": h})


def test_unmapped_reason_names_a_dynamic_signature() -> None:
    program = Program()
    with program.graph("neg", inputs={"x": TensorType(("n",), "float32")},
                       composite=Composite("my.neg")) as g:
        g.outputs({"y": coreai.neg(g["x"])})
    reason = unmapped_reason(program.graphs["neg"])
    assert reason is not None and "dynamic signature" in reason


def test_composite_also_exported_as_an_entrypoint(tmp_path: Path) -> None:
    program = _norm_program(Composite("my.rms_norm"))
    path = export_aimodel(program, tmp_path / "both.aimodel", entrypoints=["main", "norm"])
    graphs = _graph_lines(build_module(program, ["main", "norm"]))
    assert any(g.startswith("coreai.graph private noinline @norm_composite(") for g in graphs)
    h = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    got = run_aimodel(path, {"h": h})["y"]
    np.testing.assert_allclose(got, _numpy_norm(np.maximum(_numpy_norm(h), 0)),
                               rtol=RTOL, atol=ATOL)
    alone = run_aimodel(path, {"x": h, "weight": WEIGHT}, entrypoint="norm")["y"]
    np.testing.assert_allclose(alone, _numpy_norm(h), rtol=RTOL, atol=ATOL)


def test_composite_invoked_in_a_branch(tmp_path: Path) -> None:
    main = _with_norm(Composite("my.rms_norm"))
    with main.graph("main", inputs={"p": TensorType((1,), "bool"), "h": _t(3, 4)}) as g:
        weight = coreai.constant(WEIGHT)
        (y,) = coreai.if_(g["p"], [g["h"]],
                          lambda h: tuple(coreai.invoke([h, weight], callee="norm")),
                          lambda h: (coreai.neg(h),))
        g.outputs({"y": y})
    text = str(build_module(main))
    assert "composite_decl" in text and text.count("coreai.invoke @norm(") == 1
    h = np.random.default_rng(3).standard_normal((3, 4)).astype(np.float32)
    path = export_aimodel(main, tmp_path / "branch.aimodel")
    for pred, want in ((True, _numpy_norm(h)), (False, -h)):
        got = run_aimodel(path, {"p": np.array([pred]), "h": h})["y"]
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


class _Block(torch.nn.Module):
    """layer_norm (twice), gelu_tanh and sdpa: the converter's composites."""

    def __init__(self) -> None:
        super().__init__()
        self.norm1, self.norm2 = torch.nn.LayerNorm(16), torch.nn.LayerNorm(16)
        self.qkv = torch.nn.Linear(16, 48)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.norm1(x), approximate="tanh")
        q, k, v = self.qkv(h).unflatten(-1, (3, 2, 8)).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.norm2(x + a.transpose(1, 2).flatten(2))


def test_converter_composites_run_like_torch(tmp_path: Path) -> None:
    torch.manual_seed(0)
    block = _Block().eval()
    with torch.no_grad():  # distinct norms, so that each call passes its own weights
        block.norm2.weight.uniform_(0.5, 1.5)
    x = torch.randn(1, 5, 16)
    program = TorchConverter(composites=True).add_pytorch_module(block, args=(x,)).to_coreai()
    assert sorted(program.composites) == ["gelu_tanh", "layer_norm", "sdpa"]
    module = build_module(program)
    text = str(module)
    for name in program.composites:
        assert f'composite_decl = #coreai.composite_declaration<"{name}" = {{' in text
    assert len(re.findall(r"coreai\.invoke @layer_norm\(", text)) == 2
    path = export_aimodel(program, tmp_path / "block.aimodel")
    report = verify_aimodel(block, path, (x,), program=program, rtol=RTOL, atol=1e-5)
    assert report.passed, str(report)


class _Layer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm_in, self.norm_out = RMSNorm(16), RMSNorm(16)
        self.qkv = torch.nn.Linear(16, 48)
        self.attention = SDPA(is_causal=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(self.norm_in(x)).unflatten(-1, (3, 2, 8)).permute(2, 0, 3, 1, 4)
        a = self.attention(q, k, v).transpose(1, 2).flatten(2)
        return self.norm_out(x + a)


class _Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList([_Layer(), _Layer()])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def test_externalized_composites_nest(tmp_path: Path) -> None:
    """A decoder layer composite invokes the rms_norm and scaled_dot_product_attention
    composites inside it."""
    torch.manual_seed(1)
    model = _Model().eval()
    x = torch.randn(1, 6, 16)
    converter = TorchConverter()
    converter.add_pytorch_module(
        model, lambda m: torch.export.export(m, (x,)),
        externalize_modules=[RMSNorm, SDPA, ExternalizeSpec(_Layer, "decoder_layer",
                                                            {"heads": 2})])
    program = converter.to_coreai()
    assert sorted(program.composites) == ["decoder_layer", "rms_norm",
                                          "scaled_dot_product_attention"]
    text = str(build_module(program))
    layer = text[text.index("@decoder_layer("):]
    layer = layer[:layer.index("coreai.output")]
    assert len(re.findall(r"coreai\.invoke @rms_norm\(", layer)) == 2
    assert len(re.findall(r"coreai\.invoke @scaled_dot_product_attention\(", layer)) == 1
    assert len(re.findall(r"coreai\.invoke @decoder_layer\(", text)) == 2
    path = export_aimodel(program, tmp_path / "model.aimodel")
    report = verify_aimodel(model, path, (x,), program=program, rtol=RTOL, atol=1e-5)
    assert report.passed, str(report)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["bert[sdpa]", "gpt2[sdpa]", "vit[sdpa]"])
def test_zoo_model_with_composites_matches_torch(name: str, tmp_path: Path) -> None:
    model, inputs = all_models()[name]()
    with torch.no_grad():
        ep = torch.export.export(model, inputs)
    program = TorchConverter(composites=True).add_exported_program(ep).to_coreai()
    program.optimize()
    assert sorted(program.composites) == ["layer_norm", "sdpa"]
    graphs = _graph_lines(build_module(program))
    assert sorted(g.split("@")[1].split("(")[0] for g in graphs
                  if "composite_decl" in g) == ["layer_norm", "sdpa"]
    path = export_aimodel(program, tmp_path / "model.aimodel")
    # the zoo's float32 tolerances (tests/interop/test_aimodel_models.py)
    report = verify_aimodel(model, path, inputs, program=program, rtol=1e-3, atol=1e-4)
    assert report.passed, f"{name}:\n{report}"
