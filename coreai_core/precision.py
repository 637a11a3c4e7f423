"""Device precision: a float32 program rewritten to compute in float16 (or bfloat16).

``Program.to_precision("float16", keep=...)`` calls :func:`to_precision`. The arithmetic model
(what a Core AI device does, and what the reference runtime computes for the result):

- Every float32 value becomes a float16 value: weights and constants are rounded to float16
  once (round to nearest even; beyond 65504 they become inf), and every op computing on
  float32 values computes on their float16 values and **rounds its result to float16**.
- Inside one op the runtime computes in float32 (its kernels widen float16/bfloat16 operands)
  and rounds once: elementwise ops, softmax/log_softmax, and the **accumulations** of
  reductions (sum, mean, var, cumsum), matmuls and convolutions run in float32 and only their
  result is rounded. So an op's result is the float32 result of its rounded operands, rounded.
- Values of other element types (integers, bools, float64) are untouched; ops on them only
  are copied unchanged. Comparisons and casts of float values compare and convert the float16
  values.
- Inputs and outputs keep their declared types (``keep_io_types=True``): a float32 input is
  rounded to float16 where it is first used and a float16 output is widened back, so the
  program is called exactly like the original; ``keep_io_types=False`` declares them float16
  instead. State is a boundary too: it keeps its declared type.
- ``keep`` names ops that stay float32: their float operands are widened back to float32 (a
  value rounded upstream stays rounded), they compute in float32, and their float32 results
  are rounded where a float16 op uses them. An entry is a result name as printed
  (``"%12"``, or ``"main:%12"`` for one entrypoint only), an op kind (``"coreai.softmax"``),
  a source location ``"file.py:12"`` (the file as printed, or a path ending in it) or a module
  path (``"encoder.layers.0"``: that module and everything inside it).
- A ``coreai.invoke`` of a composite calls a reduced copy of the composite
  (``@rms_norm.float16``: the same declaration, with reduced inputs, outputs and body); kept,
  it calls the float32 original. Ops with regions (control flow) run in float32 with their
  regions unchanged.

The result is a new program (the original is not modified) that passes the verifier.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import numpy as np

from coreai_core._builder import insertion_point
from coreai_core._dtypes import DType
from coreai_core._ir import Graph, Location, Operation, ProgramData, Value, WeightRef
from coreai_core._opdef import OPS, build_operation
from coreai_core.errors import TypeRuleError
from coreai_core.optimizer import all_graphs, weight_refs
from coreai_core.text import result_names
from coreai_core.verifier import verify

__all__ = ["PRECISIONS", "ReducedProgram", "keep_matches", "keep_name", "reduce_precision",
           "to_precision"]

PRECISIONS = (DType.float16, DType.bfloat16)
_SOURCE = DType.float32
_FILE_LINE = re.compile(r"(?P<file>.+):(?P<line>\d+)")


@attrs.frozen
class ReducedProgram:
    """What :func:`reduce_precision` returns.

    ``program`` is the reduced program; ``values`` maps each op result of the source program's
    entrypoint graphs to the Value holding it in ``program`` (in the reduced type, or float32
    for a kept op); ``names`` gives each such source result its printed name (``%12``);
    ``kept`` lists the printed names of the ops that stay float32 because ``keep`` named them.
    """

    program: ProgramData
    values: Mapping[Value, Value]
    names: Mapping[Value, str]
    kept: tuple[str, ...]


def to_precision(program: ProgramData, dtype: Any = "float16",
                 keep: str | Iterable[str] | None = None, *,
                 keep_io_types: bool = True) -> ProgramData:
    """A copy of ``program`` computing in ``dtype`` (float16 or bfloat16): see the module doc."""
    return reduce_precision(program, dtype, keep, keep_io_types=keep_io_types).program


def reduce_precision(program: ProgramData, dtype: Any = "float16",
                     keep: str | Iterable[str] | None = None, *,
                     keep_io_types: bool = True) -> ReducedProgram:
    """:func:`to_precision`, also returning how the source values map to the new program."""
    target = DType.of(dtype)
    if target not in PRECISIONS:
        raise ValueError(f"to_precision: precision must be one of "
                         f"{[d.value for d in PRECISIONS]}, got {target.value!r}")
    entries = [keep] if isinstance(keep, str) else list(keep or ())
    # weights are shared with the source (read-only data), everything else is copied
    memo: dict[int, Any] = {id(a): a for a in program.weights.values() if a is not None}
    reduced = copy.deepcopy(program, memo)
    values: dict[Value, Value] = {}
    names: dict[Value, str] = {}
    kept: list[str] = []
    matched: set[str] = set()
    weights = _WeightCopies(reduced, target)
    callees = _Callees(reduced, target, weights)
    for gname, graph in program.graphs.items():
        if graph.composite is not None:
            continue
        graph_names = result_names(graph)
        keep_ops: set[int] = set()
        for op in graph.ops:
            name = graph_names[op.results[0]] if op.results else ""
            hits = {e for e in entries if keep_matches(e, op, name, gname)}
            if hits:
                matched |= hits
                keep_ops.add(id(memo[id(op)]))
                kept.append(keep_name(program, gname, name))
        target_graph = reduced.graphs[gname]
        rewriter = _GraphRewriter(target_graph, target, keep_ops, weights, keep_io_types,
                                  callees)
        with insertion_point(target_graph):  # constants look up weight types in the program
            rewriter.run()
        for op in graph.ops:
            for r in op.results:
                names[r] = graph_names[r]
                new = rewriter.primary(memo[id(r)])
                if new is not None:
                    values[r] = new
    unmatched = [e for e in entries if e not in matched]
    if unmatched:
        raise ValueError(f"to_precision: keep entries {unmatched} match no op; an entry is a "
                         "result name as printed ('%12'), an op kind ('coreai.softmax'), a "
                         "source location ('model.py:12') or a module path ('encoder.layers.0')")
    weights.finish()
    callees.finish()
    verify(reduced)
    return ReducedProgram(reduced, values, names, tuple(kept))


def keep_name(program: ProgramData, graph: str, name: str) -> str:
    """How a keep set names result ``name`` of entrypoint ``graph``: ``"%12"``, or
    ``"main:%12"`` when the program has several entrypoints (composites do not count)."""
    entrypoints = [g for g in program.graphs.values() if g.composite is None]
    return name if len(entrypoints) <= 1 else f"{graph}:{name}"


def keep_matches(entry: str, op: Operation, name: str, graph: str = "main") -> bool:
    """Whether ``keep`` entry ``entry`` names ``op`` (printed result name ``name``, in entrypoint
    ``graph``): see :func:`to_precision` for the forms an entry takes."""
    if entry.startswith("%") or ":%" in entry:
        where, _, result = entry.rpartition(":")
        return result == name and where in ("", graph)
    if entry == op.name:
        return True
    loc = op.location
    m = _FILE_LINE.fullmatch(entry)
    if m is not None and loc.file is not None and loc.line == int(m["line"]):
        return _same_file(loc, m["file"])
    path = loc.module_path
    return path is not None and (path == entry or path.startswith(entry + "."))


def _same_file(loc: Location, file: str) -> bool:
    assert loc.file is not None
    return loc.file == file or file.endswith("/" + loc.file) or loc.file.endswith("/" + file)


class _WeightCopies:
    """Reduced copies of float32 weights, made once per weight; :meth:`finish` gives a copy
    its weight's name when nothing uses the float32 original any more."""

    def __init__(self, program: ProgramData, target: DType) -> None:
        self.program, self.target = program, target
        self.copies: dict[str, str] = {}

    def reduced(self, name: str) -> WeightRef:
        if name not in self.copies:
            data = self.program.weights[name]
            new = self.program.unique_weight_name(f"{name}.{self.target.value}")
            if data is None:
                t = self.program.weight_types[name]
                self.program.add_weight(new, None, t.with_dtype(self.target))
            else:
                self.program.add_weight(new, _rounded(np.asarray(data), self.target))
            self.copies[name] = new
        return WeightRef(self.copies[name])

    def finish(self) -> None:
        refs = weight_refs(self.program)
        renames = {new: old for old, new in self.copies.items() if refs.get(old, 0) == 0}
        if not renames:
            return
        for old in renames.values():
            del self.program.weights[old]
            del self.program.weight_types[old]
        for new, old in renames.items():
            self.program.weights[old] = self.program.weights.pop(new)
            self.program.weight_types[old] = self.program.weight_types.pop(new)
        for g in all_graphs(self.program):
            for op in g.ops:
                ref = op.attributes.get("value") if op.name == "coreai.constant" else None
                if isinstance(ref, WeightRef) and ref.name in renames:
                    op.attributes["value"] = WeightRef(renames[ref.name])


def _rounded(data: np.ndarray, target: DType) -> np.ndarray:
    with np.errstate(over="ignore"):  # beyond the type's range is inf, as on a device
        return data.astype(target.numpy)


def _is_source(v: Value) -> bool:
    return v.type.element_type is _SOURCE


class _Callees:
    """Reduced copies of composite graphs (``@rms_norm`` -> ``@rms_norm.float16``, with
    float16 inputs and outputs), made once per callee for the ``invoke`` ops that are not kept;
    :meth:`finish` drops the float32 originals nothing calls any more."""

    def __init__(self, program: ProgramData, target: DType, weights: _WeightCopies) -> None:
        self.program, self.target, self.weights = program, target, weights
        self.copies: dict[str, str | None] = {}

    def reduced(self, name: str) -> str | None:
        """The reduced copy of composite graph ``name`` (None for another graph: an entrypoint
        called with ``invoke`` is called in float32)."""
        if name not in self.copies:
            source = self.program.graphs[name]
            if source.state_inputs or source.composite is None:
                self.copies[name] = None
                return None
            copy_ = copy.deepcopy(source, {id(self.program): self.program})
            new = f"{name}.{self.target.value}"
            while new in self.program.graphs:
                new += "_"
            copy_.name = new
            self.program.add_graph(copy_, before=name)
            self.copies[name] = new
            with insertion_point(copy_):
                _GraphRewriter(copy_, self.target, set(), self.weights, False, self).run()
        return self.copies[name]

    def finish(self) -> None:
        called = {op.attributes["callee"] for g in all_graphs(self.program) for op in g.ops
                  if op.name == "coreai.invoke"}
        for name, copy_ in self.copies.items():
            if copy_ is not None and name not in called:
                del self.program.graphs[name]


class _GraphRewriter:
    """Rewrites one entrypoint graph in place: each op on float32 values in ``target``
    (unless kept), casts where a value is needed in the other type."""

    def __init__(self, graph: Graph, target: DType, keep: set[int], weights: _WeightCopies,
                 keep_io_types: bool, callees: _Callees) -> None:
        self.graph, self.target, self.keep = graph, target, keep
        self.weights, self.keep_io_types, self.callees = weights, keep_io_types, callees
        self.ops: list[Operation] = []
        # a value's forms in the new graph by element type; the first is the one it computes
        self.forms: dict[Value, dict[DType, Value]] = {}
        self.constants: dict[Value, Operation] = {}

    def primary(self, v: Value) -> Value | None:
        forms = self.forms.get(v)
        return next(iter(forms.values())) if forms else None

    def run(self) -> None:
        g = self.graph
        inputs = {}
        for name, v in g.inputs.items():
            if not self.keep_io_types and _is_source(v):
                new = Value(v.type.with_dtype(self.target), name=name)
                inputs[name] = new
                self.forms[v] = {self.target: new}
            else:
                inputs[name] = v
                self.forms[v] = {v.type.element_type: v}
        for v in g.state_inputs.values():
            self.forms[v] = {v.type.element_type: v}
        for op in list(g.ops):
            self.rewrite(op)
        outputs = {name: self.get(v, self.target if not self.keep_io_types and _is_source(v)
                                  else v.type.element_type)
                   for name, v in g.output_values.items()}
        state = {name: self.get(v, g.state_inputs[name].type.element_type)
                 for name, v in g.state_outputs.items()}
        g.ops = self.ops
        g.inputs = inputs
        g.output_values = outputs
        g.state_outputs = state

    def rewrite(self, op: Operation) -> None:
        if op.name == "coreai.constant":
            self.constants[op.results[0]] = op  # emitted where first used, in the type asked
            return
        touches = any(_is_source(v) for v in [*op.operands, *op.results])
        new = None
        if touches and id(op) not in self.keep and not op.regions:
            new = self.reduced(op)
        if new is None:
            opdef = OPS[op.name]
            operands = [self.get(v, v.type.element_type) for v in op.operands]
            new = build_operation(opdef, operands, dict(op.attributes), op.location,
                                  [r.type for r in op.results])
        self.ops.append(new)
        for old, r in zip(op.results, new.results, strict=True):
            self.forms[old] = {r.type.element_type: r}

    def reduced(self, op: Operation) -> Operation | None:
        """``op`` computing in the target type, or None when its definition does not admit
        that (it then stays float32)."""
        opdef = OPS[op.name]
        attributes = {k: self.target if a is _SOURCE else a for k, a in op.attributes.items()}
        wanted = [self.target if _is_source(v) else v.type.element_type for v in op.operands]
        if op.name == "coreai.invoke":
            callee = self.callees.reduced(op.attributes["callee"])
            if callee is None:
                return None
            attributes["callee"] = callee
            wanted = [v.type.element_type for v in self.graph_inputs(callee)]
        operands = [self.get(v, dtype) for v, dtype in zip(op.operands, wanted, strict=True)]
        try:
            new = build_operation(opdef, operands, attributes, op.location)
        except TypeRuleError:
            return None
        for old, r in zip(op.results, new.results, strict=True):
            want = old.type.with_dtype(self.target) if _is_source(old) else old.type
            if r.type != want:
                return None
        return new

    def graph_inputs(self, name: str) -> list[Value]:
        program = self.graph.program
        assert program is not None
        return list(program.graphs[name].inputs.values())

    def get(self, v: Value, dtype: DType) -> Value:
        """``v`` in the new graph as ``dtype``: its own form, a constant made in that type, or
        a cast of its first form."""
        forms = self.forms.setdefault(v, {})
        if dtype in forms:
            return forms[dtype]
        if v in self.constants:
            new = self.constant(self.constants[v], dtype)
        else:
            source = next(iter(forms.values()))
            new = self.emit("coreai.cast", [source], {"dtype": dtype}, _location_of(source))
        forms[dtype] = new
        return new

    def constant(self, op: Operation, dtype: DType) -> Value:
        data = op.attributes["value"]
        if dtype is not op.results[0].type.element_type:
            if isinstance(data, WeightRef):
                data = self.weights.reduced(data.name)
            else:
                data = _rounded(np.asarray(data), dtype)
        return self.emit("coreai.constant", [], {"value": data}, op.location)

    def emit(self, name: str, operands: list[Value], attributes: dict[str, Any],
             location: Location) -> Value:
        new = build_operation(OPS[name], operands, attributes, location)
        self.ops.append(new)
        return new.results[0]


def _location_of(v: Value) -> Location:
    return v.owner.location if v.owner is not None else Location()
