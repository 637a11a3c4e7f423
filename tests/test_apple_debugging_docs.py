"""Apple's API pages ``docs/api/debugging.md`` and ``docs/api/TorchConverter.md`` run here.

The fixtures ``tests/apple_guides/api-*.md`` are Apple's pages with only the dialect import
changed (``extract_api_docs.py`` there writes them). Each page's ``python`` blocks run in
order in one namespace, like a reader pasting them into a notebook (top-level ``await``
included). The pages use names they never define (``MyModel``, ``model``, ``example_input``,
a deployed ``my_model.aimodel``, ...): the namespace starts with small models of the shapes
the blocks feed them, defined below. A block that is a signature listing (a ``def`` line
without a body, which is not Python) is checked instead: the function it lists exists here.
The Metal kernel example needs a Mac and must stop with the clear ``MetalUnavailableError``.
"""

from __future__ import annotations

import ast
import asyncio
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

import coreai_torch
from coreai_torch import TorchConverter, get_decomp_table
from coreai_torch.errors import MetalUnavailableError

GUIDES = Path(__file__).resolve().parent / "apple_guides"
PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.S)
LISTED_DEF = re.compile(r"^def (\w+)\(", re.M)


def python_blocks(page: str) -> list[str]:
    return PYTHON_BLOCK.findall((GUIDES / f"api-{page}.md").read_text())


def is_listing(source: str) -> bool:
    try:
        compile(source, "<block>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except SyntaxError:
        return bool(LISTED_DEF.search(source))
    return False


def run_block(source: str, namespace: dict[str, Any], where: str) -> None:
    code = compile(source, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    try:
        result = eval(code, namespace)
        if asyncio.iscoroutine(result):
            asyncio.run(result)
    except Exception as e:
        e.add_note(f"---- {where} ----\n{source}")
        raise


class AnyShape(nn.Module):
    """debugging.md's ``MyModel``. The page exports it at (1, 10), then (rebinding ``model``
    to it) at ``example_input``, whose converted program it feeds ``{"x": randn(2, 4)}``: so
    it takes any shape (elementwise ops and a reduction, with learned scalars)."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.tensor([1.5]))
        self.shift = nn.Parameter(torch.tensor([-0.25]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(x * self.scale + self.shift)
        return torch.relu(h) * 2.0 + x.mean(-1, keepdim=True)


class TenFeatures(nn.Module):
    """A linear model fed ``torch.randn(1, 10)``."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(10, 16), nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


class FourFeatures(nn.Module):
    """debugging.md's ``model``: its converted program is fed ``{"x": torch.randn(2, 4)}``."""

    def __init__(self, extra: bool = False) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(4, 8), nn.Linear(8, 4)
        self.extra = extra

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc1(x))
        if self.extra:
            h = torch.sigmoid(h) * h
        return self.fc2(h)


class SmallConvNet(nn.Module):
    """TorchConverter.md's ``MyModel``: fed images, (1, 3, 224, 224) among them."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, stride=2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(torch.relu(self.conv(x))), 1))


def _decomposed(model: nn.Module, args: tuple[Any, ...]) -> torch.export.ExportedProgram:
    return torch.export.export(model, args).run_decompositions(get_decomp_table())


def deploy(model: nn.Module, args: tuple[Any, ...], path: Path) -> None:
    """``my_model.aimodel`` as a user deploys it: exported, then compiled for Apple's
    interpreter (with debug info) in place, so ``coreai.runtime.AIModel.load`` loads it on
    Linux too."""
    from coreai_torch.aimodel import export_aimodel
    from coreai_torch.debugging.inspector import compile_for_interpreter

    program = TorchConverter().add_exported_program(_decomposed(model, args)).to_coreai()
    export_aimodel(program, path)
    compile_for_interpreter(path, path)


def debugging_namespace(tmp: Path) -> dict[str, Any]:
    from coreai_torch.debugging.graph import create_graph_from_exported_program

    torch.manual_seed(0)
    model = AnyShape().eval()
    example_input = (torch.randn(2, 4),)
    deploy(model, example_input, tmp / "my_model.aimodel")
    return {"__name__": "apple_debugging_md", "torch": torch, "np": np, "sys": sys,
            "Path": Path, "TorchConverter": TorchConverter, "MyModel": AnyShape,
            "model": model, "example_input": example_input,
            "model_v1": FourFeatures().eval(), "model_v2": FourFeatures(extra=True).eval(),
            "graph": create_graph_from_exported_program(
                torch.export.export(model, example_input))}


def converter_namespace() -> dict[str, Any]:
    torch.manual_seed(0)
    return {"__name__": "apple_torchconverter_md", "torch": torch, "nn": nn,
            "coreai_torch": coreai_torch, "MyModel": SmallConvNet,
            "model": SmallConvNet().eval(), "example_inputs": (torch.randn(1, 3, 32, 32),),
            "ep_a": _decomposed(TenFeatures().eval(), (torch.randn(1, 10),)),
            "ep_b": _decomposed(FourFeatures().eval(), (torch.randn(2, 4),))}


def test_fixtures_change_only_the_dialect_import() -> None:
    for page in ("debugging", "TorchConverter"):
        text = (GUIDES / f"api-{page}.md").read_text()
        assert not any("coreai._compiler.dialects" in b for b in python_blocks(page))
        assert text.startswith(f"<!-- Apple's coreai-torch page docs/api/{page}.md")


def test_debugging_page_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    namespace = debugging_namespace(tmp_path)
    blocks = python_blocks("debugging")
    assert len(blocks) == 13 and not any(is_listing(b) for b in blocks)
    for i, source in enumerate(blocks):
        run_block(source, namespace, f"api-debugging.md python block {i + 1}")
    out = capsys.readouterr().out
    # healthy models: no NaN, no mismatch; model_v2 has two ops model_v1 lacks
    assert namespace["result"].failed_nodes == [] or "NaN detected" not in out
    assert namespace["nan_result"].failed_nodes == []
    assert namespace["inf_result"].failed_nodes == []
    assert "Mismatch" not in out
    assert "✗ Found" in out  # Apple counts the unpaired source nodes: here 0
    assert namespace["diff"].summary.unmapped_target_node_count == 2
    # the benchmark timed every op of the program on the runtime, 50 runs each
    timings = namespace["result"]
    assert "Intermediates:" in out and "ms avg" in out
    assert namespace["debug_trace"].intermediates
    assert timings is not None


def is_mutated_input_example(source: str) -> bool:
    """The page's last block: a user input mutated in place is state (its own test)."""
    return "y.mul_(2)" in source and "state_names=" in source


def test_torchconverter_page_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace = converter_namespace()
    ran, listed, metal = 0, [], 0
    for i, source in enumerate(python_blocks("TorchConverter")):
        where = f"api-TorchConverter.md python block {i + 1}"
        if is_mutated_input_example(source):
            continue
        if is_listing(source):
            listed += LISTED_DEF.findall(source)
            continue
        if "TorchMetalKernel(" in source:
            with pytest.raises(MetalUnavailableError, match="need macOS with Metal"):
                run_block(source, namespace, where)
            metal += 1
            continue
        run_block(source, namespace, where)
        ran += 1
    assert (ran, metal) == (12, 1)
    # each listed signature is a name of the API here (the callback's is the lowering form)
    for name in listed:
        assert name == "lowering_func" or hasattr(TorchConverter, name) \
            or hasattr(coreai_torch, name), name
    assert sorted(listed) == sorted(["add_exported_program", "add_pytorch_module", "to_coreai",
                                     "clear", "register_torch_lowering", "lowering_func",
                                     "register_custom_kernels", "get_decomp_table"])


def test_torchconverter_page_mutated_user_input_is_state() -> None:
    """Apple's stateful example: buffers mutated in place and a user input mutated in place
    (``y.mul_(2)``) are the program's state, named by ``state_names``."""
    (source,) = [b for b in python_blocks("TorchConverter") if is_mutated_input_example(b)]
    namespace = converter_namespace()
    namespace["get_decomp_table"] = get_decomp_table
    namespace["TorchConverter"] = TorchConverter
    run_block(source, namespace, "api-TorchConverter.md, the stateful example")
