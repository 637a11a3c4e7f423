"""The per-graph lowerer: walks one exported program's FX graph and builds one entrypoint.

Also holds the staging record, the weight store shared by a conversion's entrypoints and the
progress bar; :class:`coreai_torch.TorchConverter` drives it.
"""

from __future__ import annotations

import enum
import operator
import sys
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np
import torch
import torch.fx
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind
from torch.fx.experimental.symbolic_shapes import statically_known_true

from coreai_core import (
    Composite,
    Dim,
    Graph,
    Program,
    TensorType,
    Value,
    current_graph,
    default_location,
)
from coreai_core.dialects import coreai
from coreai_core.registry import describe_entry
from coreai_torch import utils as _utils
from coreai_torch._binding import NodeValues, call_lowering
from coreai_torch._io_names import STATE_KINDS, IONames, io_names
from coreai_torch._locations import describe, location_of
from coreai_torch._table import LoweringTable, qualified_name
from coreai_torch.composite_lowering import COMPOSITE_OPS, CompositeBuilder
from coreai_torch.errors import LoweringError, UnsupportedOp, UnsupportedOpsError
from coreai_torch.externalize import CALL_MODULE, ExternalSession

# Nodes that only assert facts torch already checked at export time.
DROPPED_TARGETS = {
    "aten::_assert_async.msg", "aten::_assert_async.default", "aten::_assert_scalar.default",
    "aten::sym_constrain_range_for_size.default", "aten::sym_constrain_range.default",
    "aten::_assert_tensor_metadata.default", "aten::_print.default",
    # raises on a nonzero LAPACK info in eager torch; the runtime returns info instead
    "aten::_linalg_check_errors.default",
}
_PROGRESS_MIN_NODES = 2000


@attrs.define
class Staged:
    """A program staged as one entrypoint (or one externalized module's graph).

    ``session`` is the externalization that produced the program's ``call_module`` nodes
    (None when nothing is externalized); the staged entry is its one owner.
    """

    program: ExportedProgram
    input_names: list[str] | None
    output_names: list[str] | None
    state_names: list[str] | None
    composite: Composite | None = None
    session: ExternalSession | None = None


GETITEM = operator.getitem


class NoLowering(enum.Enum):
    """How a call node that needs no lowering from the table is handled."""

    GETITEM = "picks one result of a multi-result node"
    DROPPED = "asserts a fact torch checked at export time, or prints"
    CALL_MODULE = "calls an externalized module: an invoke of its graph"


def handled_without_lowering(node: torch.fx.Node) -> NoLowering | None:
    """Whether ``node`` (a ``call_function``) is handled without a lowering, and how.

    The one rule for both the converter's check for unsupported ops and the lowerer.
    """
    if node.target is GETITEM:
        return NoLowering.GETITEM
    qn = qualified_name(node.target)
    if qn in DROPPED_TARGETS:
        return NoLowering.DROPPED
    if qn == CALL_MODULE:
        return NoLowering.CALL_MODULE
    return None


def all_call_nodes(gm: torch.fx.GraphModule) -> Any:
    for node in gm.graph.nodes:
        if node.op == "call_function":
            yield node
        elif node.op == "get_attr":
            sub = getattr(gm, str(node.target), None)
            if isinstance(sub, torch.fx.GraphModule):
                yield from all_call_nodes(sub)


class WeightStore:
    """Program weights keyed by FQN; identical tensors shared by entrypoints are stored once,
    and so is one tensor under several FQNs (a tied ``lm_head`` and embedding)."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self._by_fqn: dict[str, list[tuple[torch.Tensor, str]]] = {}
        self._by_memory: dict[tuple[Any, ...], str] = {}

    def ref(self, fqn: str, tensor: torch.Tensor) -> Any:
        for known, name in self._by_fqn.get(fqn, []):
            if known is tensor or _same_tensor(known, tensor):
                return _ref(name)
        memory = _memory_key(tensor)
        if memory in self._by_memory:
            name = self._by_memory[memory]
            self._by_fqn.setdefault(fqn, []).append((tensor, name))
            return _ref(name)
        name = self.program.unique_weight_name(fqn)
        data = _utils.to_numpy(tensor)
        if data is None:
            self.program.add_weight(name, None, TensorType(tuple(tensor.shape),
                                                           _utils.dtype_of(tensor.dtype)))
        else:
            self.program.add_weight(name, data)
        self._by_fqn.setdefault(fqn, []).append((tensor, name))
        if memory is not None:
            self._by_memory[memory] = name
        return _ref(name)


def _memory_key(t: torch.Tensor) -> tuple[Any, ...] | None:
    """Where a CPU tensor's elements are: two tensors with the same key hold the same values."""
    if t.is_meta or t.numel() == 0 or type(t).__name__ == "FakeTensor" or t.device.type != "cpu":
        return None
    return (t.data_ptr(), tuple(t.shape), t.stride(), t.dtype)


def _ref(name: str) -> Any:
    from coreai_core import WeightRef

    return WeightRef(name)


def _same_tensor(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype or a.is_meta or b.is_meta:
        return a.is_meta and b.is_meta and a.shape == b.shape and a.dtype == b.dtype
    return bool(a.data_ptr() == b.data_ptr() or torch.equal(a, b))


class _GraphIndex:
    """The results of ``graph.ops[:seen]``."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.values: set[Value] = set()  # Values compare by identity
        self.seen = 0


class DefinedValues:
    """Which Values each graph being built defines (its inputs and its ops' results), to check
    that a lowering returns Values of the graph it lowers into. Each graph's ops are indexed
    incrementally, so checking every node's results stays linear in the graph's size."""

    def __init__(self) -> None:
        self._by_graph: dict[int, _GraphIndex] = {}  # by id: graphs compare by structure

    def __contains__(self, item: tuple[Graph, Value]) -> bool:
        graph, value = item
        if value.owner is None:  # an input (a rare result: only identity-like lowerings)
            return any(v is value for d in (graph.inputs, graph.state_inputs)
                       for v in d.values())
        index = self._by_graph.get(id(graph))
        if index is None or index.graph is not graph or index.seen > len(graph.ops):
            index = self._by_graph[id(graph)] = _GraphIndex(graph)
        for op in graph.ops[index.seen:]:
            index.values.update(op.results)
        index.seen = len(graph.ops)
        return value in index.values


def _known_to_be(size: Any, value: int) -> bool:
    """True when torch proves its symbolic ``size`` equal to ``value``.

    A static result size is then a refinement, not a specialization: broadcasting a static 16
    against ``Min(16, u0)`` (an unbacked size) is 16 in every run, and torch asserts
    ``Eq(Min(16, u0), 16)`` at run time while keeping the unsimplified expression as the size.
    """
    return isinstance(size, torch.SymInt) and statically_known_true(size == value)


class GraphLowerer:
    """Lowers one exported program into one entrypoint graph.

    ``table`` gives the lowerings; ``progress`` is the converter's progress setting (see
    :class:`~coreai_torch.TorchConverter`).
    """

    def __init__(self, table: LoweringTable, progress: bool | None, program: Program,
                 weights: WeightStore, entrypoint: str, staged: Staged, *,
                 composites: CompositeBuilder | None = None) -> None:
        self.table = table
        self.progress = progress
        self.composites = composites
        self.program = program
        self.weights = weights
        self.entrypoint = entrypoint
        self.staged = staged
        self.ep = staged.program
        self.ctx = _utils.ConversionContext(_symbols(self.ep))
        self.ctx.lower_subgraph = self.lower_subgraph
        self.ctx.lower_call = self.lower_call
        self.defined = DefinedValues()

    def run(self) -> None:
        token = _utils.set_context(self.ctx)
        try:
            self._run()
        finally:
            _utils.reset_context(token)

    def _run(self) -> None:
        ep, staged = self.ep, self.staged
        sig = ep.graph_signature
        specs = {s.arg.name: s for s in sig.input_specs if hasattr(s.arg, "name")}
        names = io_names(ep, staged.input_names, staged.state_names)
        example = _example_inputs(ep)

        with self.program.graph(self.entrypoint, composite=staged.composite) as g:
            values = NodeValues()
            for node in ep.graph.nodes:
                if node.op != "placeholder":
                    continue
                spec = specs.get(node.name)
                kind = spec.kind if spec is not None else InputKind.USER_INPUT
                target = getattr(spec, "target", None)
                if kind == InputKind.USER_INPUT and node.name in names.state:
                    # typed like the input (dynamic dims stay dynamic); every state needs an
                    # initial value (the verifier's rule), the export's example is the one
                    init = example.get(node.name)
                    values.bind(node, self.program.declare_state(
                        g, names.state[node.name],
                        _utils.to_numpy(init) if init is not None else _utils.result_type(node),
                        type=_utils.result_type(node)))
                elif kind == InputKind.USER_INPUT:
                    values.bind(node, g.add_input(names.inputs[node.name],
                                                  _utils.result_type(node)))
                elif kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
                    target = str(target)
                    tensor = _lookup_tensor(ep, target)
                    if node.name in names.state:
                        data = _utils.to_numpy(tensor)
                        values.bind(node, self.program.declare_state(
                            g, names.state[node.name],
                            data if data is not None else _utils.result_type(node)))
                    else:
                        with default_location(location_of(node)):
                            values.bind(node, coreai.constant(self.weights.ref(target, tensor)))
                elif kind == InputKind.TOKEN:
                    values.bind(node, coreai.constant(np.zeros((0,), np.float32)))
                elif kind == InputKind.CUSTOM_OBJ and isinstance(ep.constants.get(target),
                                                                 torch.Generator):
                    # a torch.Generator passed to random ops: they draw from the run's own
                    # generator (run(..., seed=)), so this placeholder carries nothing
                    values.bind(node, coreai.constant(np.zeros((0,), np.float32)))
                else:
                    raise LoweringError(f"unsupported input kind {kind}", node=node.name,
                                        target=str(target), source=None, lowering=None)
            outputs = self._lower_nodes(ep.graph_module, values)
            self._set_outputs(g, outputs, names, sig)

    def _set_outputs(self, g: Any, outputs: list[Any], io: IONames, sig: Any) -> None:
        user: dict[str, Value] = {}
        state: dict[str, Value] = {}
        output_node = next(n for n in reversed(self.ep.graph.nodes) if n.op == "output")
        user_specs = [(s, v, a) for s, v, a in zip(sig.output_specs, outputs, output_node.args[0],
                                                   strict=True)
                      if s.kind == OutputKind.USER_OUTPUT]
        names = self.staged.output_names or _default_output_names([a for _, _, a in user_specs])
        for (_spec, value, _), name in zip(user_specs, names, strict=True):
            user[name] = self._as_value(value)
        for spec, value in zip(sig.output_specs, outputs, strict=True):
            if spec.kind in STATE_KINDS:
                state[io.state_written_by(spec)] = self._as_value(value)
        g.outputs(user, state=state)

    @staticmethod
    def _as_value(v: Any) -> Value:
        if isinstance(v, Value):
            return v
        if v is None:
            raise NotImplementedError("a None output cannot be represented; return tensors only")
        return coreai.constant(v)

    # -- the walk ------------------------------------------------------------------------------
    def _lower_nodes(self, gm: torch.fx.GraphModule, values: NodeValues) -> list[Any]:
        nodes = list(gm.graph.nodes)
        bar = _Progress(len(nodes), self.progress, self.entrypoint)
        for i, node in enumerate(nodes):
            bar.update(i)
            if node.op == "call_function":
                self._lower_call(node, values)
            elif node.op == "get_attr":
                attr = getattr(gm, str(node.target))
                if isinstance(attr, torch.Tensor):
                    with default_location(location_of(node)):
                        values.bind(node, coreai.constant(self.weights.ref(str(node.target),
                                                                           attr)))
            elif node.op == "output":
                bar.close()
                return [self._output_value(a, values) for a in _flat_outputs(node.args[0])]
            elif node.op == "placeholder":
                if not values.has(node):
                    raise LoweringError("placeholder has no bound value", node=node.name,
                                        target="placeholder", source=None, lowering=None)
            else:
                raise LoweringError(f"unsupported FX node kind {node.op!r}", node=node.name,
                                    target=str(node.target), source=describe(node), lowering=None)
        bar.close()
        return []

    @staticmethod
    def _output_value(arg: Any, values: NodeValues) -> Any:
        if isinstance(arg, torch.fx.Node):
            return values.value(arg)
        return arg

    def _lower_call(self, node: torch.fx.Node, values: NodeValues) -> None:
        how = handled_without_lowering(node)
        if how is NoLowering.GETITEM:
            src, idx = node.args
            if isinstance(src, torch.fx.Node) and isinstance(idx, int) and values.has(src, idx):
                values.bind(node, values.value(src, idx))
                return
        elif how is NoLowering.DROPPED:
            return
        elif how is NoLowering.CALL_MODULE:
            with default_location(location_of(node)):
                self._store_call(node, values)
            return
        qn = qualified_name(node.target)
        lowering = self.table.get(qn)
        loc = location_of(node)
        if lowering is None:  # only reachable for ops inside subgraphs added after preflight
            raise UnsupportedOpsError([UnsupportedOp(qn, 1, node.name, describe(node))])
        with default_location(loc):
            try:
                if self.composites is not None and self._as_composite(qn):
                    result = self.composites.lower(qn, lowering, values, node, loc)
                else:
                    result = call_lowering(lowering, values, node, loc)
            except (LoweringError, UnsupportedOpsError):
                raise
            except Exception as e:
                raise LoweringError(f"{type(e).__name__}: {e}", node=node.name, target=qn,
                                    source=describe(node),
                                    lowering=describe_entry(lowering.fn)) from e
        self._store(node, qn, lowering.fn, result, values)

    def _store_call(self, node: torch.fx.Node, values: NodeValues) -> None:
        """An externalized module's call: ``invoke`` of the graph of its signature."""
        args, key = node.args
        session = self.staged.session
        callee = None if session is None else session.callee(str(key))
        if callee is None:
            raise LoweringError(f"call_module {key!r} belongs to no externalization of this "
                                "entrypoint; stage the module with add_pytorch_module("
                                "..., externalize_modules=[...]) rather than its exported "
                                "program", node=node.name, target=CALL_MODULE,
                                source=describe(node), lowering=None)
        assert isinstance(args, (list, tuple))
        operands = [values.value(a) for a in args if isinstance(a, torch.fx.Node)]
        if len(operands) != len(args):
            raise LoweringError("an externalized module call takes tensors only",
                                node=node.name, target=CALL_MODULE, source=describe(node),
                                lowering=None)
        results = coreai.invoke(operands, callee=callee)
        for i, r in enumerate(results):
            _name_value(r, f"{node.name}#{i}")
            values.bind(node, r, i)

    def _as_composite(self, qn: str) -> bool:
        # a user's own lowering for the op wins: it is lowered as the user wrote it
        return qn in COMPOSITE_OPS and qn not in self.table.own_names()

    def _store(self, node: torch.fx.Node, qn: str, fn: Callable, result: Any,
               values: NodeValues) -> None:
        val: Any = node.meta.get("val")
        multi = isinstance(val, (list, tuple))

        def fail(msg: str) -> None:
            raise LoweringError(msg, node=node.name, target=qn, source=describe(node),
                                lowering=describe_entry(fn))

        if multi:
            if not isinstance(result, (list, tuple)) or len(result) != len(val):
                fail(f"expected a list of {len(val)} Values, got {result!r}")
            for i, (r, v) in enumerate(zip(result, val, strict=True)):
                if r is None:
                    continue
                self._check(r, v, fail, f"result {i}")
                _name_value(r, f"{node.name}#{i}")
                values.bind(node, r, i)
            if result and result[0] is not None:
                values.bind(node, result[0])
            return
        if isinstance(result, (list, tuple)) and len(result) == 1:
            result = result[0]
        if not isinstance(result, Value):
            fail(f"expected a Value, got {type(result).__name__} {result!r}")
        self._check(result, val, fail, "result")
        _name_value(result, node.name)
        values.bind(node, result)

    def _check(self, value: Any, val: Any, fail: Callable[[str], None], what: str) -> None:
        if not isinstance(value, Value):
            fail(f"{what} is {type(value).__name__}, not a Value")
        graph = current_graph()
        if (graph, value) not in self.defined:
            fail(f"{what} {value!r} is not defined in graph @{graph.name}, the graph "
                 "being built: it comes from another program, another graph or an earlier "
                 "conversion. Build results with coreai builders inside the lowering (or "
                 "return one of its operands); never keep Values across calls")
        if val is None:
            return
        try:
            expected = _utils.type_of_value(val)
        except TypeError:
            return
        got = value.type
        if got.element_type != expected.element_type:
            fail(f"{what} has element type {got.element_type}, torch says "
                 f"{expected.element_type}")
        shapes = f"{what} has shape {_shape(got)}, torch says {_shape(expected)}"
        if got.rank != expected.rank:
            fail(shapes)
        for axis, (g_dim, e_dim) in enumerate(zip(got.shape, expected.shape, strict=True)):
            if isinstance(g_dim, int) and isinstance(e_dim, int) and g_dim != e_dim:
                fail(shapes)
            if (isinstance(g_dim, int) and isinstance(e_dim, Dim)
                    and not _known_to_be(val.shape[axis], g_dim)):
                fail(f"{what} has static size {g_dim} where torch has the dynamic size "
                     f"{e_dim.name}; the lowering specialized a dynamic shape")

    def lower_call(self, like: torch.fx.Node, target: Any, args: Sequence[Any],
                   kwargs: dict[str, Any], val: Any, values: NodeValues) -> Any:
        """Lower a call of ``target`` that is not a graph node (the op a higher-order wrapper
        such as ``with_effects`` carries): a temporary node like ``like`` with torch's result
        ``val`` is lowered with the table's lowering. Returns its Value(s), or None for a
        dropped op (prints, asserts)."""
        graph = torch.fx.Graph()
        node = graph.create_node("call_function", target, tuple(args), dict(kwargs),
                                 name=like.name)
        node.meta = {**like.meta, "val": val}
        try:
            self._lower_call(node, values)
            if isinstance(val, (list, tuple)):
                return [values.value(node, i) if values.has(node, i) else None
                        for i in range(len(val))]
            return values.value(node) if values.has(node) else None
        finally:
            graph.erase_node(node)

    def lower_subgraph(self, gm: torch.fx.GraphModule, args: Sequence[Value]) -> list[Value]:
        """Lower a higher-order op's subgraph with its placeholders bound to ``args``."""
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(args):
            raise ValueError(f"subgraph takes {len(placeholders)} inputs, got {len(args)}")
        values = NodeValues()
        for p, a in zip(placeholders, args, strict=True):
            values.bind(p, a)
        outs = self._lower_nodes(gm, values)
        return [self._as_value(o) for o in outs]


def _shape(t: TensorType) -> str:
    return "[" + ", ".join(str(d) for d in t.shape) + "]"


def _name_value(value: Value, fx_name: str) -> None:
    # Debug info: op results remember the FX node they compute, so verification tools can
    # line up torch's and the runtime's intermediates (also after optimize()).
    if value.owner is not None and value.name is None:
        value.name = fx_name


def _flat_outputs(args: Any) -> list[Any]:
    if isinstance(args, (list, tuple)):
        return list(args)
    return [args]


def _default_output_names(args: Sequence[Any]) -> list[str]:
    names: list[str] = []
    for i, a in enumerate(args):
        name = a.name if isinstance(a, torch.fx.Node) else f"output_{i}"
        if name in names:
            name = f"output_{i}"
        names.append(name)
    return names


def _lookup_tensor(ep: ExportedProgram, target: str) -> torch.Tensor:
    if target in ep.state_dict:
        return ep.state_dict[target]
    if target in ep.constants:
        c = ep.constants[target]
        if isinstance(c, torch.Tensor):
            return c
    raise KeyError(f"exported program has no tensor for {target!r}")


def _example_inputs(ep: ExportedProgram) -> dict[str, torch.Tensor]:
    """The export's example value of each user input, by placeholder name."""
    try:
        args, kwargs = ep.example_inputs
    except (AttributeError, TypeError, ValueError):
        return {}
    flat = list(torch.utils._pytree.tree_leaves((args, kwargs)))
    user = [s.arg.name for s in ep.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
    return {n: t for n, t in zip(user, flat, strict=False) if isinstance(t, torch.Tensor)}


def _symbols(ep: ExportedProgram) -> dict[str, Dim]:
    """Dynamic dims of the program: symbol name -> Dim with its export-time bounds."""
    out = {}
    for sym, vr in ep.range_constraints.items():
        out[str(sym)] = Dim(str(sym), _finite_int(vr.lower), _finite_int(vr.upper))
    return out


def _finite_int(bound: Any) -> int | None:
    """An export range bound as an int; None for unbounded (sympy oo or torch's int_oo)."""
    if bound is None or str(bound).lstrip("-") in ("oo", "int_oo"):
        return None
    try:
        return int(bound)
    except (TypeError, ValueError, AttributeError, OverflowError):
        return None


class _Progress:
    """A minimal progress bar on stderr for large graphs (silent unless a terminal)."""

    def __init__(self, total: int, enabled: bool | None, label: str) -> None:
        if enabled is None:
            enabled = total >= _PROGRESS_MIN_NODES and sys.stderr.isatty()
        self.enabled = enabled
        self.total = max(total, 1)
        self.label = label
        self._last = -1

    def update(self, i: int) -> None:
        if not self.enabled:
            return
        pct = 100 * i // self.total
        if pct != self._last:
            self._last = pct
            bar = "#" * (pct // 4)
            sys.stderr.write(f"\rconverting {self.label}: [{bar:<25}] {pct:3d}%")
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled and self._last >= 0:
            sys.stderr.write(f"\rconverting {self.label}: [{'#' * 25}] 100%\n")
            self._last = -1

