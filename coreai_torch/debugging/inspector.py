"""Read the intermediate values of a program: torch's, this project's runtime's, Apple's.

Every inspector answers :meth:`Inspector.get_intermediates_for_ops`: op ids in, for each id
the list of its result arrays (``None`` for a value it could not read, or for the whole op).

- :class:`TorchFXInspector`: an exported program run node by node in torch (ids: FX names).
- :class:`RuntimeInspector`: a :class:`coreai_core.Program` on the numpy runtime (ids: op
  positions, see :mod:`.utils`).
- :class:`CoreAIInspector`: a model on Apple's interpreter. Given Apple's ``AIModel`` (ids:
  the "coreai" op ids of its debug info), values come from Apple's ``IntermediateLogger``.
  On Linux, Apple's interpreter (coreai-core 1.0.0b3) calls the logger back with no arrays,
  so no intermediate can be read that way; :meth:`CoreAIInspector.explain_missing` says so.
  Given this project's ``Program`` instead, the inspector exports it to an ``.aimodel`` with
  the requested ops' results added as extra outputs and runs that on Apple's interpreter: the
  values are Apple's, for the ids of :class:`RuntimeInspector`. Given an ``.aimodel`` path,
  it compiles the asset for the interpreter with debug info and loads it as an ``AIModel``.
- :class:`CachingInspector` remembers another inspector's answers per inputs.
"""

from __future__ import annotations

import copy
import enum
import hashlib
import logging
import tempfile
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from coreai_core import Program
from coreai_core.runtime import run_graph_collect
from coreai_torch.debugging.debug_info import DebugInfoRecord, OutputMapping, parse_debug_infos
from coreai_torch.debugging.utils import as_numpy, entry_graph, input_dict, unwrap_inputs
from coreai_torch.verify import torch_intermediates

__all__ = ["CachingInspector", "CoreAIInspector", "Inspector", "IntermediateKind",
           "MissingValue", "RuntimeInspector", "TorchFXInspector", "compile_for_interpreter"]

logger = logging.getLogger(__name__)
EXTRA_OUTPUT = "_inspect_{op}_{index}"


class MissingValue:
    """Why an inspector returned no value for an op."""

    class Reason(enum.Enum):
        MERGED_INTO_ANOTHER_OPERATION = 1
        NO_PRODUCER_FOUND = 2
        NOT_EXPOSED_BY_INTERPRETER = 3

    @dataclass(frozen=True)
    class Explanation:
        op_id: int
        reason: MissingValue.Reason
        merged_with: tuple[int, ...] = ()
        observable_op_id: int | None = None

        def to_dict(self) -> dict[str, Any]:
            return {"op_id": self.op_id, "reason": self.reason.name,
                    "merged_with": list(self.merged_with),
                    "observable_op_id": self.observable_op_id}

        def describe(self) -> str:
            r = MissingValue.Reason
            if self.reason is r.MERGED_INTO_ANOTHER_OPERATION:
                return (f"op {self.op_id} was compiled into one kernel with ops "
                        f"{list(self.merged_with)}; compare op {self.observable_op_id} instead")
            if self.reason is r.NO_PRODUCER_FOUND:
                return (f"no compiled instruction computes op {self.op_id} (folded away, or "
                        "the model was compiled without debug info)")
            return (f"Apple's interpreter does not hand out the value of op {self.op_id} on "
                    "this platform; give CoreAIInspector the Program to read it as an extra "
                    "output of a re-exported model")


class IntermediateKind(enum.Enum):
    INPUT = "input"
    OUTPUT = "output"
    UNKNOWN = "unknown"


class Inspector(ABC):
    """Reads intermediate values of a program by op id."""

    OpID = int | str

    @abstractmethod
    async def get_intermediates_for_ops(self, op_ids: list[OpID], inputs: Any,
                                        ) -> dict[OpID, list[NDArray[Any] | None] | None]:
        """Each op id's result arrays on ``inputs`` (None where not readable)."""

    @classmethod
    def convert_to_numpy(cls, arr: Any) -> NDArray[Any]:
        return as_numpy(arr)


def _fingerprint(inputs: Any) -> str:
    digest = hashlib.sha256()

    def feed(value: Any) -> None:
        if isinstance(value, dict):
            for k in sorted(value):
                digest.update(str(k).encode())
                feed(value[k])
        elif isinstance(value, (list, tuple)):
            for v in value:
                feed(v)
        else:
            a = np.ascontiguousarray(as_numpy(value))
            digest.update(f"{a.dtype}{a.shape}".encode())
            digest.update(a.tobytes())

    feed(inputs)
    return digest.hexdigest()


class CachingInspector(Inspector):
    """Remembers what ``inspector`` returned, per op and inputs (at most ``max_cache_size``
    entries, the oldest dropped first)."""

    def __init__(self, inspector: Inspector, max_cache_size: int | None = None):
        self._inspector = inspector
        self._max = max_cache_size
        self._cache: dict[tuple[Any, str], list[NDArray[Any] | None] | None] = {}

    async def get_intermediates_for_ops(self, op_ids: list[Inspector.OpID], inputs: Any,
                                        ) -> dict[Inspector.OpID, list[NDArray[Any] | None] | None]:
        key = _fingerprint(inputs)
        missing = [i for i in op_ids if (i, key) not in self._cache]
        if missing:
            found = await self._inspector.get_intermediates_for_ops(missing, inputs)
            for i in missing:
                self._cache[(i, key)] = found.get(i)
            while self._max is not None and len(self._cache) > self._max:
                self._cache.pop(next(iter(self._cache)))
        return {i: self._cache.get((i, key)) for i in op_ids}

    def clear_cache(self) -> None:
        self._cache.clear()


class TorchFXInspector(Inspector):
    """An exported program's values in torch, by FX node name (``name#k`` values of a
    multi-output node are its list)."""

    def __init__(self, exported_program: torch.export.ExportedProgram):
        self.exported_program = exported_program
        self._last: tuple[str, dict[str, torch.Tensor]] | None = None  # the last run's values

    async def get_intermediates_for_ops(self, op_ids: list[Inspector.OpID], inputs: Any,
                                        ) -> dict[Inspector.OpID, list[NDArray[Any] | None] | None]:
        inputs = unwrap_inputs(inputs)
        key = _fingerprint(inputs)
        if self._last is None or self._last[0] != key:
            self._last = (key, torch_intermediates(self.exported_program, inputs))
        values = self._last[1]
        out: dict[Inspector.OpID, list[NDArray[Any] | None] | None] = {}
        for op_id in op_ids:
            name = str(op_id)
            if name in values:
                out[op_id] = [self.convert_to_numpy(values[name])]
                continue
            parts: list[NDArray[Any] | None] = []
            while f"{name}#{len(parts)}" in values:
                parts.append(self.convert_to_numpy(values[f"{name}#{len(parts)}"]))
            out[op_id] = list(parts) if parts else None
        return out

    @classmethod
    def convert_to_numpy(cls, value: Any) -> NDArray[Any]:
        return as_numpy(value)


class RuntimeInspector(Inspector):
    """A program's values on this project's numpy runtime, by op id. The program's state is
    not changed (the run reads a copy of its initial state)."""

    def __init__(self, program: Program, entry_point: str = "main"):
        self.program = program
        self.entry_point = entry_point
        # the last run's inputs and results: a search asks for batch after batch of one run
        self._last: tuple[str, dict[str, np.ndarray], dict[int, list[np.ndarray]]] | None = None

    def run(self, inputs: Any) -> tuple[dict[str, np.ndarray], dict[int, list[np.ndarray]]]:
        """The outputs and every op's results (by op id) on ``inputs``."""
        graph = entry_graph(self.program, self.entry_point)
        # the program counts its edits (optimize() included): a new count, a new run
        key = f"{_fingerprint(inputs)}:{self.program.generation}"
        if self._last is not None and self._last[0] == key:
            return self._last[1], self._last[2]
        state = {k: v.copy() for k, v in self.program.initial_state.items()}
        outputs, record = run_graph_collect(
            self.program, {k: as_numpy(v) for k, v in input_dict(graph, inputs).items()},
            entrypoint=self.entry_point, state=state)
        values = {i: [record[r] for r in op.results if r in record]
                  for i, op in enumerate(graph.ops)}
        self._last = (key, outputs, values)
        return outputs, values

    async def get_intermediates_for_ops(self, op_ids: list[Inspector.OpID], inputs: Any,
                                        ) -> dict[Inspector.OpID, list[NDArray[Any] | None] | None]:
        _, values = self.run(inputs)
        return {i: (list(values[i]) if isinstance(i, int) and values.get(i) else None)
                for i in op_ids}


def compile_for_interpreter(asset_path: str | Path, output_dir: str | Path) -> Path:
    """Compile the ``.aimodel`` at ``asset_path`` for Apple's interpreter, with debug info,
    into ``output_dir`` (what ``coreai.runtime.AIModel.load`` loads on Linux)."""
    from coreai_torch.aimodel._apple import ca
    from coreai_torch.aimodel._checks import check_asset

    check_asset(Path(asset_path))  # a damaged asset is an error here, never an abort in Apple's
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    # Apple's own route (AIModelAsset.executable) compiles like this into a temporary folder,
    # without debug info and without a way to keep it
    ca.AIModelAsset.load(asset_path)._write_odix(out, enable_debug_info=True)
    return out


class CoreAIInspector(Inspector):
    """A model's values on Apple's interpreter (see the module docstring for the three forms
    of ``model``: Apple's ``AIModel``, this project's ``Program``, an ``.aimodel`` path)."""

    IntermediateCallback = Callable[[list[Any], str, Any], None]

    def __init__(self, model: Any, function_name: str = "main", temp_dir: Any = None):
        self._function_name = function_name
        self._temp_dir = temp_dir  # kept alive as long as the inspector
        self._last_outputs: dict[str, NDArray[Any]] | None = None
        self._program: Program | None = model if isinstance(model, Program) else None
        self._asset: Path | None = Path(model) if isinstance(model, (str, Path)) else None
        self._model: Any = None if self._program is not None or self._asset else model
        self._records: list[DebugInfoRecord] = []
        self._maps: dict[int, list[OutputMapping]] = {}
        if self._model is not None:
            self._read_debug_info()

    def _read_debug_info(self) -> None:
        self._records = parse_debug_infos(bytes(self._model._debug_infos or b""))
        self._maps = defaultdict(list)
        for record in self._records:
            for info in record.operations:
                for m in info.get_output_mappings("coreai"):
                    self._maps[m.source_op_id].append(m)

    async def _load_asset(self) -> None:
        from coreai_torch.aimodel._apple import apple_runtime

        assert self._asset is not None
        if self._temp_dir is None:
            self._temp_dir = tempfile.TemporaryDirectory(suffix=".aimodelx")
        compiled = compile_for_interpreter(self._asset, Path(self._temp_dir.name) / "model")
        self._model = await apple_runtime.AIModel.load(compiled)
        self._read_debug_info()

    def _merged(self) -> dict[int, set[int]]:
        """Compiled instruction -> the coreai op ids whose outputs it holds."""
        groups: dict[int, set[int]] = defaultdict(set)
        for op_id, maps in self._maps.items():
            for m in maps:
                groups[m.target_op_id].add(op_id)
        return groups

    def explain_missing(self, op_id: int) -> MissingValue.Explanation:
        """Why no value came back for ``op_id``."""
        reason = MissingValue.Reason
        if self._program is not None:
            return MissingValue.Explanation(op_id, reason.NO_PRODUCER_FOUND)
        if op_id not in self._maps:
            return MissingValue.Explanation(op_id, reason.NO_PRODUCER_FOUND)
        for members in self._merged().values():
            if op_id in members and len(members) > 1 and op_id != max(members):
                return MissingValue.Explanation(op_id, reason.MERGED_INTO_ANOTHER_OPERATION,
                                                tuple(sorted(members)), max(members))
        return MissingValue.Explanation(op_id, reason.NOT_EXPOSED_BY_INTERPRETER)

    async def get_intermediates_for_ops(self, op_ids: list[Inspector.OpID], inputs: Any,
                                        ) -> dict[Inspector.OpID, list[NDArray[Any] | None] | None]:
        inputs = unwrap_inputs(inputs)
        if not isinstance(inputs, dict):
            raise TypeError("CoreAIInspector: inputs must be a dict of input name -> array, "
                            f"got {type(inputs).__name__}")
        if self._program is not None:
            return self._as_extra_outputs(op_ids, inputs)
        if self._model is None:
            await self._load_asset()
        return await self._from_logger(op_ids, inputs)

    def _as_extra_outputs(self, op_ids: list[Inspector.OpID], inputs: dict[str, Any],
                          ) -> dict[Inspector.OpID, list[NDArray[Any] | None] | None]:
        from coreai_torch.aimodel import export_aimodel, run_aimodel

        assert self._program is not None
        program = copy.deepcopy(self._program)
        graph = entry_graph(program, self._function_name)
        extra: dict[str, Any] = {}
        for op_id in op_ids:
            if not isinstance(op_id, int) or not 0 <= op_id < len(graph.ops):
                continue
            for k, r in enumerate(graph.ops[op_id].results):
                extra[EXTRA_OUTPUT.format(op=op_id, index=k)] = r
        graph.outputs({**graph.output_values, **extra}, state=graph.state_outputs or None)
        with tempfile.TemporaryDirectory() as tmp:
            path = export_aimodel(program, Path(tmp) / "inspect.aimodel",
                                  entrypoints=[self._function_name])
            state = {k: v.copy() for k, v in program.initial_state.items()} or None
            got = run_aimodel(path, {k: as_numpy(v) for k, v in inputs.items()},
                              entrypoint=self._function_name, state=state)
        self._last_outputs = {k: v for k, v in got.items() if k not in extra}
        out: dict[Inspector.OpID, list[NDArray[Any] | None] | None] = {}
        for op_id in op_ids:
            n = len(graph.ops[op_id].results) if isinstance(op_id, int) and \
                0 <= op_id < len(graph.ops) else 0
            values = [got.get(EXTRA_OUTPUT.format(op=op_id, index=k)) for k in range(n)]
            out[op_id] = values if any(v is not None for v in values) else None
        return out

    async def _from_logger(self, op_ids: list[Inspector.OpID], inputs: dict[str, Any],
                           ) -> dict[Inspector.OpID, list[NDArray[Any] | None] | None]:
        from coreai_torch.aimodel._apple import apple_runtime

        wanted = {m.target_op_id for i in op_ids if isinstance(i, int)
                  for m in self._maps.get(i, [])}
        captured: dict[tuple[int, int], np.ndarray] = {}

        def on_value(arrays: list[Any], kind: str, ids: Any) -> None:
            if kind == IntermediateKind.OUTPUT.value:
                for k, a in enumerate(arrays):
                    if a is not None:
                        captured[(ids.id, k)] = np.asarray(a.numpy())

        intermediate_logger = apple_runtime.IntermediateLogger(
            [apple_runtime.CompileIdentifiers(i) for i in sorted(wanted)], on_value, True)
        function = self._model.load_function(self._function_name,
                                             intermediate_logger=intermediate_logger)
        arrays = {k: v if isinstance(v, apple_runtime.NDArray)
                  else apple_runtime.NDArray(np.ascontiguousarray(as_numpy(v)))
                  for k, v in inputs.items()}
        outputs = await function(inputs=arrays)
        self._last_outputs = {k: np.asarray(v.numpy()) for k, v in outputs.items()}
        out: dict[Inspector.OpID, list[NDArray[Any] | None] | None] = {}
        for op_id in op_ids:
            maps = self._maps.get(op_id, []) if isinstance(op_id, int) else []
            if not maps:
                out[op_id] = None
                continue
            values: list[NDArray[Any] | None] = [None] * (max(m.source_output for m in maps) + 1)
            for m in maps:
                values[m.source_output] = captured.get((m.target_op_id, m.target_output))
            out[op_id] = values if any(v is not None for v in values) else None
        return out

    @classmethod
    def convert_to_numpy(cls, arr: Any) -> NDArray[Any]:
        return as_numpy(arr)

    @property
    def last_outputs(self) -> dict[str, NDArray[Any]] | None:
        """The model's outputs of the last run, or None before one."""
        return self._last_outputs

    @staticmethod
    def get_compile_identifiers_for_op(source_level: str, source_op_id: int,
                                       debug_info_records: list[DebugInfoRecord],
                                       ) -> dict[int, Any]:
        """Output index of the source op -> the interpreter's identifiers of the instruction
        that holds it."""
        from coreai_torch.aimodel._apple import apple_runtime

        out = {}
        for record in debug_info_records:
            for info in record.operations:
                for m in info.get_output_mappings(source_level):
                    if m.source_op_id == source_op_id:
                        out[m.source_output] = apple_runtime.CompileIdentifiers(m.target_op_id)
        return out

    @staticmethod
    def get_all_compile_identifiers(debug_info_records: list[DebugInfoRecord],
                                    ) -> dict[int, Any]:
        """Compiled instruction id -> its identifiers, for every instruction holding a value
        of a "coreai" op."""
        from coreai_torch.aimodel._apple import apple_runtime

        return {m.target_op_id: apple_runtime.CompileIdentifiers(m.target_op_id)
                for record in debug_info_records for info in record.operations
                for m in info.get_output_mappings("coreai")}
