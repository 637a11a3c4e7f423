"""Apple's compiled debug info: which compiled (odix) instruction computes which Core AI op.

An ``.aimodel`` compiled for Apple's interpreter with debug info carries, per function, a JSON
list of records (``AIModel._debug_infos``): each compiled op with its source locations and
metadata, among them ``op_id`` per level (``"coreai"``, ``"odix"``, ...) and ``output_maps``
(which output of which source op an output of this instruction holds). Values in that JSON
are tagged with their type (``{"integer": {"_0": 3}}``); :class:`Metadata.Value` keeps both.

:func:`get_operation_id` and :func:`strip_debug_info` work on this project's programs.
"""

from __future__ import annotations

import enum
import json
import sys
from dataclasses import dataclass
from typing import Any, TextIO

from coreai_core import Location, Operation, Program
from coreai_torch.debugging.table_writer import Row, write_table

__all__ = ["CompilationMappings", "DebugInfo", "DebugInfoRecord", "Metadata", "OutputMapping",
           "SourceInfo", "SourceLocation", "get_operation_id", "parse_debug_infos",
           "strip_debug_info"]

FALLBACK_IDENTIFIER = "fallback"


@dataclass(frozen=True)
class SourceInfo:
    """A source op of a compilation level: its dialect, id and identifiers."""

    dialect: str
    id: int
    identifiers: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"dialect": self.dialect, "id": self.id, "identifiers": list(self.identifiers)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SourceInfo:
        return cls(data["dialect"], int(data["id"]), tuple(data.get("identifiers", ())))


@dataclass(frozen=True)
class OutputMapping:
    """Output ``source_output`` of op ``source_op_id`` (level ``source_level``) is output
    ``target_output`` of op ``target_op_id`` (level ``target_level``)."""

    source_level: str
    source_op_id: int
    source_output: int
    target_level: str
    target_op_id: int
    target_output: int

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OutputMapping:
        return cls(str(data["source_level"]), int(data["source_op_id"]),
                   int(data["source_output"]), str(data["target_level"]),
                   int(data["target_op_id"]), int(data["target_output"]))


@dataclass
class CompilationMappings:
    """Source ops by level and name, and the output mappings between levels."""

    sources: dict[str, dict[str, SourceInfo]]
    outputs: list[OutputMapping]


@dataclass(frozen=True)
class SourceLocation:
    file_name: str
    line: int
    column: int

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SourceLocation:
        return cls(str(data.get("fileName", "")), int(data.get("line", 0)),
                   int(data.get("column", 0)))

    def __str__(self) -> str:
        return f"{self.file_name}:{self.line}"


@dataclass(frozen=True)
class Metadata:
    """One metadata entry of a compiled op."""

    @dataclass(frozen=True)
    class Value:
        value: int | str | list[Metadata.Value] | dict[str, Metadata.Value] | None
        value_type: str

        @classmethod
        def from_tagged(cls, data: Any) -> Metadata.Value:
            """``{"integer": {"_0": 3}}`` -> Value(3, "integer"), recursively."""
            if not isinstance(data, dict) or len(data) != 1:
                return cls(None, "unknown")
            (kind, body), = data.items()
            inner = body.get("_0") if isinstance(body, dict) else body
            if kind == "dictionary":
                return cls({k: cls.from_tagged(v) for k, v in (inner or {}).items()}, kind)
            if kind == "array":
                return cls([cls.from_tagged(v) for v in (inner or [])], kind)
            if kind == "integer":
                return cls(int(inner or 0), kind)
            return cls(None if inner is None else str(inner), kind)

        @classmethod
        def from_dict(cls, data: dict[str, Any]) -> Metadata.Value | None:
            """A tagged JSON value (``{"integer": {"_0": 3}}``), None for anything else."""
            value = cls.from_tagged(data)
            return None if value.value_type == "unknown" else value

        def field(self, key: str) -> Metadata.Value | None:
            return self.value.get(key) if isinstance(self.value, dict) else None

        def plain(self) -> Any:
            if isinstance(self.value, dict):
                return {k: v.plain() for k, v in self.value.items()}
            if isinstance(self.value, list):
                return [v.plain() for v in self.value]
            return self.value

    key: str
    value: Metadata.Value

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Metadata:
        return cls(str(data["key"]), Metadata.Value.from_tagged(data.get("value")))


def _int(value: Metadata.Value | None) -> int | None:
    return value.value if value is not None and isinstance(value.value, int) else None


def _str(value: Metadata.Value | None) -> str | None:
    return value.value if value is not None and isinstance(value.value, str) else None


@dataclass(frozen=True)
class DebugInfo:
    """A compiled op: its odix id, name, source locations and metadata."""

    class SymbolType(enum.Enum):
        FUNCTION = "function"
        DELEGATE = "delegate"

    odix_id: int
    name: str
    source_locations: tuple[SourceLocation, ...]
    metadatas: tuple[Metadata, ...]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DebugInfo:
        return cls(int(data.get("odixId", -1)), str(data.get("name", "")),
                   tuple(SourceLocation.from_dict(s) for s in data.get("sourceLocations", [])),
                   tuple(Metadata.from_dict(m) for m in data.get("metadatas", [])))

    def get_metadata(self, key: str) -> Metadata.Value | None:
        return next((m.value for m in self.metadatas if m.key == key), None)

    def get_all_metadata(self, key: str) -> list[Metadata.Value]:
        return [m.value for m in self.metadatas if m.key == key]

    def get_op_ids(self, level: str) -> list[int]:
        """The ``op_id`` entries of ``level`` (several when ops were fused)."""
        out = []
        for v in self.get_all_metadata("op_id"):
            op_id = _int(v.field("value"))
            if _str(v.field("type")) == level and op_id is not None:
                out.append(op_id)
        return out

    def get_op_id(self, level: str) -> int | None:
        ids = self.get_op_ids(level)
        return ids[0] if ids else None

    def get_symbol_names(self, symbol_type: DebugInfo.SymbolType) -> list[str]:
        out = []
        for v in self.get_all_metadata("symbol"):
            name = _str(v.field("value"))
            if _str(v.field("type")) == symbol_type.value and name is not None:
                out.append(name)
        return out

    def get_symbol_name(self, symbol_type: DebugInfo.SymbolType) -> str | None:
        names = self.get_symbol_names(symbol_type)
        return names[0] if names else None

    def get_residency(self) -> str | None:
        return _str(self.get_metadata("residency"))

    def is_symbol(self) -> bool:
        return any(self.get_symbol_name(t) is not None for t in DebugInfo.SymbolType)

    def get_source(self) -> str | None:
        return _str(self.get_metadata("source"))

    def format_source_locations(self) -> str:
        return ", ".join(str(s) for s in self.source_locations)

    def metadata_keys(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(m.key for m in self.metadatas))

    def op_id_levels(self) -> tuple[str, ...]:
        levels = (_str(v.field("type")) for v in self.get_all_metadata("op_id"))
        return tuple(dict.fromkeys(x for x in levels if x is not None))

    def format_op_ids(self, level: str) -> str:
        return ",".join(str(i) for i in self.get_op_ids(level))

    def format_metadata(self, key: str) -> str:
        return "; ".join(json.dumps(v.plain()) if not isinstance(v.value, (int, str))
                         else str(v.value) for v in self.get_all_metadata(key))

    def to_row(self, metadata_keys: Any, op_id_levels: Any = ()) -> Row:
        return Row((str(self.odix_id), self.name, *(self.format_op_ids(lv) for lv in op_id_levels),
                    *(self.format_metadata(k) for k in metadata_keys),
                    self.format_source_locations()))

    def get_output_mappings(self, source_level: str) -> list[OutputMapping]:
        """The outputs of this op that hold an output of a ``source_level`` op."""
        out = []
        for maps in self.get_all_metadata("output_maps"):
            for entry in maps.value if isinstance(maps.value, list) else []:
                source, target = entry.field("source"), entry.field("target")
                if source is None or target is None:
                    continue
                if _str(source.field("level")) != source_level:
                    continue
                op_id = _int(source.field("id"))
                if op_id is None:
                    continue
                target_id = _int(target.field("id"))
                out.append(OutputMapping(
                    source_level, op_id, _int(source.field("output")) or 0,
                    _str(target.field("level")) or "odix",
                    self.odix_id if target_id is None else target_id,
                    _int(target.field("output")) or 0))
        return out


@dataclass(frozen=True)
class DebugInfoRecord:
    """The debug info of one compiled unit (a function, or a delegate)."""

    identifier: str
    operations: tuple[DebugInfo, ...]

    @property
    def is_fallback(self) -> bool:
        return FALLBACK_IDENTIFIER in self.identifier.lower()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DebugInfoRecord:
        return cls(str(data.get("identifier", "")),
                   tuple(DebugInfo.from_dict(d) for d in data.get("operations", [])))

    def find_by_odix_id(self, odix_id: int) -> DebugInfo | None:
        return next((o for o in self.operations if o.odix_id == odix_id), None)

    def find_by_torch_op_id(self, torch_op_id: int) -> list[DebugInfo]:
        return [o for o in self.operations if o.get_op_id("torch") == torch_op_id]

    def metadata_keys(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(k for o in self.operations for k in o.metadata_keys()))

    def op_id_levels(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(lv for o in self.operations for lv in o.op_id_levels()))

    def write_summary(self, output: TextIO | None = None, *,
                      metadata_keys: Any = None, op_id_levels: Any = None,
                      max_operations: int | None = None, width: int | None = None) -> None:
        """A table of the compiled ops: odix id, name, op ids per level, metadata, source."""
        levels = tuple(op_id_levels if op_id_levels is not None else self.op_id_levels())
        keys = tuple(metadata_keys if metadata_keys is not None else
                     [k for k in self.metadata_keys() if k != "op_id"])
        ops = sorted(self.operations, key=lambda o: o.odix_id)[:max_operations]
        write_table(output or sys.stdout,
                    ["odix", "name", *(f"{lv} id" for lv in levels), *keys, "source"],
                    [o.to_row(keys, levels) for o in ops], width=width,
                    title=f"debug info {self.identifier!r}: {len(self.operations)} operations")


def parse_debug_infos(debug_infos_bytes: bytes) -> list[DebugInfoRecord]:
    """The records of Apple's debug-info JSON (``AIModel._debug_infos``); [] for none."""
    if not debug_infos_bytes:
        return []
    try:
        data = json.loads(debug_infos_bytes)
    except json.JSONDecodeError as e:
        raise ValueError(f"debug info is not JSON ({e}); was the model compiled with debug "
                         "info?") from e
    if isinstance(data, dict):
        data = [data]
    return [DebugInfoRecord.from_dict(d) for d in data]


def get_operation_id(operation: Operation, level: str = "coreai") -> int | None:
    """The id of an op of this project's programs: its position in its graph (the "coreai"
    level); None for an op in no graph or another level."""
    graph = operation.graph
    if level != "coreai" or graph is None:
        return None
    return next((i for i, op in enumerate(graph.ops) if op is operation), None)


def strip_debug_info(program: Program) -> None:
    """Drop every op's source location (file, line, module path), in place."""
    for graph in program.graphs.values():
        for op in graph.walk():
            op.location = Location()
