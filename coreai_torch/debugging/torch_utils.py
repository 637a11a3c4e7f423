"""Intermediate values of an exported program: read them, save them, load them back.

:func:`save_intermediates` runs the program in torch node by node and writes the values a
filter keeps to ``<output_dir>/<model_name>.aimodelintermediates`` (a JSON index) beside a
safetensors file holding the tensors (never a pickle); :func:`load_intermediates` reads them
back as a :class:`DebugTrace`. :func:`get_torch_to_ops_mapping` and
:func:`get_torch_to_coreai_output_mapping` say which ops of a converted program compute an FX
node's values (the converter names op results after their FX node).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.fx
from safetensors.torch import load_file, save_file
from torch.export import ExportedProgram

from coreai_core import Operation, Program
from coreai_torch.debugging.debug_info import CompilationMappings, OutputMapping
from coreai_torch.debugging.utils import torch_args

__all__ = ["DebugTrace", "fetch_intermediate_values", "get_torch_to_coreai_output_mapping",
           "get_torch_to_ops_mapping", "load_intermediates", "save_intermediates"]

logger = logging.getLogger(__name__)
SUFFIX = ".aimodelintermediates"
FORMAT = "coreai-torch intermediates 1"


@dataclass
class DebugTrace:
    """Saved inputs, outputs and intermediates (by FX node name) of one run."""

    inputs: dict[str, torch.Tensor]
    outputs: dict[str, torch.Tensor]
    intermediates: dict[str, torch.Tensor]
    mappings: CompilationMappings | None = None


class _Watcher(torch.fx.Interpreter):
    def __init__(self, gm: torch.fx.GraphModule, callback: Callable[[torch.fx.Node, Any], None]):
        super().__init__(gm)
        self.callback = callback

    def run_node(self, n: torch.fx.Node) -> Any:
        result = super().run_node(n)
        if n.op == "call_function":
            self.callback(n, result)
        return result


def fetch_intermediate_values(exported_program: ExportedProgram,
                              inputs: tuple[Any, ...] | list[Any],
                              callback: Callable[[torch.fx.Node, Any], None],
                              enable_autocast: bool = False) -> Any:
    """Run ``exported_program`` in torch, calling ``callback(node, result)`` after every
    ``call_function`` node; returns the outputs. ``enable_autocast`` runs under CPU
    autocast (bfloat16), as a mixed-precision run would."""
    gm = exported_program.module()
    autocast = (torch.autocast("cpu", dtype=torch.bfloat16) if enable_autocast
                else contextlib.nullcontext())
    with torch.no_grad(), autocast:
        return _Watcher(gm, callback).run(*torch_args(inputs))


def _default_node_filter(node: torch.fx.Node, result: Any) -> bool:
    return isinstance(result, torch.Tensor)


def _tensors(prefix: str, value: Any) -> dict[str, torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return {prefix: value.detach().contiguous().clone()}
    if isinstance(value, (list, tuple)):
        out = {}
        for i, v in enumerate(value):
            out.update(_tensors(f"{prefix}#{i}", v))
        return out
    return {}


def save_intermediates(program: ExportedProgram, inputs: tuple[Any, ...] | list[Any],
                       output_dir: str | Path,
                       node_filter: Callable[[torch.fx.Node, Any], bool] = _default_node_filter,
                       coreai_program: Program | None = None, enable_autocast: bool = False,
                       model_name: str = "main") -> str:
    """Save the inputs, outputs and the intermediates ``node_filter`` keeps; returns the
    index file's path. With ``coreai_program``, the FX node -> op mapping is saved too."""
    out_dir = Path(output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    intermediates: dict[str, torch.Tensor] = {}

    def keep(node: torch.fx.Node, result: Any) -> None:
        if node_filter(node, result):
            intermediates.update(_tensors(node.name, result))

    outputs = fetch_intermediate_values(program, inputs, keep, enable_autocast)
    names = [s.arg.name for s in program.graph_signature.input_specs
             if s.kind == torch.export.graph_signature.InputKind.USER_INPUT]
    tensors: dict[str, torch.Tensor] = {}
    for name, value in zip(names, torch_args(inputs), strict=False):
        tensors.update({f"input/{k}": v for k, v in _tensors(name, value).items()})
    out_names = [str(getattr(s.arg, "name", i)) for i, s in
                 enumerate(program.graph_signature.output_specs)]
    flat = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    for name, value in zip(out_names, flat, strict=False):
        tensors.update({f"output/{k}": v for k, v in _tensors(name, value).items()})
    tensors.update({f"intermediate/{k}": v for k, v in intermediates.items()})
    weights = out_dir / f"{model_name}.safetensors"
    save_file(tensors, str(weights))
    mapping = ([m.to_dict() for m in get_torch_to_coreai_output_mapping(coreai_program).values()]
               if coreai_program is not None else None)
    index = out_dir / f"{model_name}{SUFFIX}"
    index.write_text(json.dumps({
        "format": FORMAT, "tensors": weights.name,
        "inputs": [k for k in tensors if k.startswith("input/")],
        "outputs": [k for k in tensors if k.startswith("output/")],
        "intermediates": list(intermediates), "mappings": mapping}, indent=1))
    return str(index)


def load_intermediates(metadata_path: str | Path,
                       device: str | torch.device | None = None) -> DebugTrace:
    """What :func:`save_intermediates` wrote (tensors on ``device``, default CPU)."""
    path = Path(metadata_path)
    index = json.loads(path.read_text())
    if index.get("format") != FORMAT:
        raise ValueError(f"{path} is not an intermediates index written by save_intermediates "
                         f"(format {index.get('format')!r})")
    tensors = load_file(str(path.parent / index["tensors"]),
                        device=str(device) if device is not None else "cpu")

    def part(prefix: str) -> dict[str, torch.Tensor]:
        return {k.split("/", 1)[1]: v for k, v in tensors.items() if k.startswith(prefix + "/")}

    mappings = None
    if index.get("mappings") is not None:
        mappings = CompilationMappings({}, [OutputMapping.from_dict(m)
                                            for m in index["mappings"]])
    return DebugTrace(part("input"), part("output"), part("intermediate"), mappings)


def get_torch_to_ops_mapping(coreai_program: Program) -> dict[str, list[Operation]]:
    """FX node name -> the ops (of every graph) whose results carry it."""
    out: dict[str, list[Operation]] = {}
    for graph in coreai_program.graphs.values():
        for op in graph.ops:
            for name in dict.fromkeys(r.name.split("#")[0] for r in op.results if r.name):
                out.setdefault(name, []).append(op)
    return out


def get_torch_to_coreai_output_mapping(coreai_program: Program) -> dict[str, OutputMapping]:
    """FX value name (``name`` or ``name#k``) -> where it is in the program: op id and result
    index in the graph that computes it first (the "coreai" level). The torch side has no
    integer id here: ``source_op_id`` is -1 and the key names the node."""
    out: dict[str, OutputMapping] = {}
    for graph in coreai_program.graphs.values():
        if graph.composite is not None:
            continue
        for i, op in enumerate(graph.ops):
            for k, r in enumerate(op.results):
                if r.name and r.name not in out:
                    index = int(r.name.split("#")[1]) if "#" in r.name else 0
                    out[r.name] = OutputMapping("torch", -1, index, "coreai", i, k)
    return out
