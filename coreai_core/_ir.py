"""Core IR classes: types, values, operations, graphs and program data.

This module is plain data: it imports only the layers below it (``_dtypes``, ``_syntax``,
``_tracked``, ``_types``).
What a user does *with* a program (build graphs in an insertion context, run, optimize, print,
save) lives above, in :mod:`coreai_core._program_api`, whose ``Program`` extends
:class:`ProgramData` with those methods.

Values and operations have identity semantics (they are graph nodes); graphs and programs
compare structurally (see :func:`structure`), ignoring locations, which are debug info.

Every edit of the IR through its attributes or containers reports to the owning program
(``_edited``: an op to its graph, a graph to its program), whose
``generation`` then moves on, so run plans cached for the program are never stale. Ops point
to the graph they were appended to; containers are :mod:`coreai_core._tracked` lists and dicts.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from coreai_core._dtypes import DType
from coreai_core._syntax import IDENT, quote
from coreai_core._tracked import tracked_dict, tracked_list
from coreai_core._types import Dim, TensorType, admits, format_type

__all__ = [
    "Composite", "Dim", "TensorType", "Location", "Value", "Operation", "Graph", "ProgramData",
    "WeightRef", "format_type",
]


def _frames(frames: Iterable[str]) -> tuple[str, ...]:
    return tuple(frames)


@attrs.frozen
class Location:
    """Where an op came from: a relative source file and line, and the nn.Module path.

    ``op_id`` names the source op (for a converted program, the FX node it was lowered
    from); ``stack`` is the user's call stack at that op, outermost frame first, each
    ``"file:line in function"``. ``str`` leaves the stack out (messages stay one line);
    :meth:`to_text` (the printed form) includes it.
    """

    file: str | None = None
    line: int | None = None
    module_path: str | None = None
    op_id: str | None = None
    stack: tuple[str, ...] = attrs.field(default=(), converter=_frames)

    def __str__(self) -> str:
        return self.to_text(stack=False)

    def to_text(self, *, stack: bool = True) -> str:
        """The printed form, ``loc("file":line in "module" id "op" stack [...])``; ``stack``
        includes the call stack."""
        parts = []
        if self.file is not None:
            parts.append(quote(self.file) + (f":{self.line}" if self.line is not None else ""))
        if self.module_path:
            parts.append(f"in {quote(self.module_path)}")
        if self.op_id is not None:
            parts.append(f"id {quote(self.op_id)}")
        if stack and self.stack:
            parts.append(f"stack [{', '.join(quote(f) for f in self.stack)}]")
        return f"loc({' '.join(parts)})"

    @property
    def is_known(self) -> bool:
        return self.file is not None or bool(self.module_path) or self.op_id is not None


UNKNOWN_LOC = Location()


@attrs.frozen
class WeightRef:
    """Reference from a constant op to a named entry of ``Program.weights``."""

    name: str

    def __str__(self) -> str:
        return "@" + (self.name if IDENT.fullmatch(self.name) else quote(self.name))


@attrs.define(eq=False, repr=False)
class Value:
    """A typed SSA value: a graph input or the result of an operation."""

    type: TensorType
    owner: Operation | None = None
    index: int = 0
    name: str | None = None

    def __repr__(self) -> str:
        where = self.name if self.owner is None else f"{self.owner.name}#{self.index}"
        return f"Value({where}: {self.type})"

    @property
    def shape(self) -> tuple[int | Dim, ...]:
        return self.type.shape

    @property
    def element_type(self) -> DType:
        return self.type.element_type

    @property
    def context(self) -> None:
        """None, always. Apple's values carry their MLIR context, which Apple's
        ``generate_composite_decl(value.context, ...)`` takes; here there is none to pass."""
        return None


def _op_set(op: Operation, attribute: Any, new: Any) -> Any:
    if attribute.name == "_graph":
        return new
    graph = op._graph
    if graph is not None:
        graph._edited()
    return _tracked_field(op, attribute.name, new)


def _tracked_field(owner: Any, name: str, new: Any) -> Any:
    """``new`` in a container that reports its edits to ``owner`` (other values unchanged)."""
    kind = _TRACKED.get(name)
    if kind is None:
        return new
    if kind is dict:
        return tracked_dict(new, owner)
    return tracked_list(new, owner, owner._adopt if name == "ops" else None)


# results are not tracked in place (an op's results are set, not edited: building a program
# creates one list per op, and every container costs time there)
_TRACKED: dict[str, type] = {
    "operands": list, "attributes": dict, "inputs": dict, "state_inputs": dict, "ops": list,
    "output_values": dict, "state_outputs": dict,
}


@attrs.define(eq=False, repr=False, on_setattr=_op_set)
class Operation:
    """An instance of a dialect op. Graph-valued attributes are its nested regions.

    Edits (setting a field, or changing ``operands`` or ``attributes`` in place) make the
    owning program's run plans stale automatically.
    """

    name: str
    operands: list[Value]
    attributes: dict[str, Any]
    results: list[Value]
    location: Location = UNKNOWN_LOC
    _graph: Graph | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        setattr_ = object.__setattr__  # the fields as tracked containers, without reporting
        setattr_(self, "operands", tracked_list(self.operands, self))
        setattr_(self, "attributes", tracked_dict(self.attributes, self))

    def _edited(self) -> None:
        if self._graph is not None:
            self._graph._edited()

    def __repr__(self) -> str:
        return f"Operation({self.name}, {len(self.operands)} operands, {self.attributes})"

    @property
    def graph(self) -> Graph | None:
        """The graph that holds this op (None while it is in none)."""
        return self._graph

    @property
    def result(self) -> Value:
        if len(self.results) != 1:
            raise ValueError(f"{self.name} has {len(self.results)} results, not one")
        return self.results[0]

    @property
    def regions(self) -> dict[str, Graph]:
        return {k: v for k, v in self.attributes.items() if isinstance(v, Graph)}


def _plain_attr(v: Any) -> Any:
    if isinstance(v, (tuple, list)):
        return [_plain_attr(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    raise TypeError(f"a composite attribute must be a number, bool, str, None or a list of "
                    f"them, got {type(v).__name__} {v!r}")


def _plain_attrs(attributes: Mapping[str, Any]) -> dict[str, Any]:
    return {str(k): _plain_attr(v) for k, v in attributes.items()}


@attrs.frozen
class Composite:
    """The declaration of a composite op: a graph that stands for one named operation.

    ``name`` is the op's name (``"rms_norm"``, ``"sdpa"``, ...), ``version`` its declaration
    version and ``attributes`` its constant parameters (numbers, bools, strings, None, lists).
    The input and output names are the graph's own. Callers reach the graph with
    ``coreai.invoke``; the optimizer keeps it or inlines it
    (:class:`coreai_core.optimizer.InlineCompositesPass`).
    """

    name: str
    version: int = 1
    attributes: dict[str, Any] = attrs.field(factory=dict, converter=_plain_attrs, hash=False)

    def __attrs_post_init__(self) -> None:
        if not self.name:
            raise ValueError("a composite needs a non-empty name")
        if isinstance(self.version, bool) or not isinstance(self.version, int) \
                or self.version < 0:
            raise ValueError(f"composite {self.name!r}: version must be an int >= 0, "
                             f"got {self.version!r}")


def _weak_program(program: ProgramData | None) -> weakref.ref[ProgramData] | None:
    return None if program is None else weakref.ref(program)


def _graph_set(g: Graph, attribute: Any, new: Any) -> Any:
    g._edited()
    return _tracked_field(g, attribute.name, new)


@attrs.define(eq=False, repr=False, on_setattr=_graph_set)
class Graph:
    """A graph of ops: named typed inputs, state inputs, ops in order, named outputs.

    Top-level graphs are entrypoints of a :class:`~coreai_core.Program`; nested graphs are regions
    of control-flow ops (their inputs are positional, named ``arg0``, ``arg1``, ...). A top-level
    graph with a ``composite`` declaration is a composite op, called with ``coreai.invoke``.

    ``program`` is a back-reference to the program that owns the graph; it is weak (a parent
    pointer), so caches keyed by program that hold graphs, such as a runtime's plans, never keep
    a program alive. Edits (``add_input``, ``outputs``, appending or removing ops, setting a
    field) make the program's run plans stale automatically.
    """

    name: str
    inputs: dict[str, Value] = attrs.field(factory=dict)
    state_inputs: dict[str, Value] = attrs.field(factory=dict)
    ops: list[Operation] = attrs.field(factory=list)
    output_values: dict[str, Value] = attrs.field(factory=dict)
    state_outputs: dict[str, Value] = attrs.field(factory=dict)
    composite: Composite | None = None
    _program_ref: weakref.ref[ProgramData] | None = attrs.field(
        default=None, alias="program", converter=_weak_program, on_setattr=attrs.setters.NO_OP)

    def __attrs_post_init__(self) -> None:
        for name in ("inputs", "state_inputs", "ops", "output_values", "state_outputs"):
            object.__setattr__(self, name, _tracked_field(self, name, getattr(self, name)))

    def _adopt(self, op: Operation) -> None:
        object.__setattr__(op, "_graph", self)

    def _edited(self) -> None:
        ref = self._program_ref
        program = ref() if ref is not None else None
        if program is not None:
            program._edited()

    @property
    def program(self) -> ProgramData | None:
        """The program owning this graph (None for a free graph or once the program is gone)."""
        return None if self._program_ref is None else self._program_ref()

    @program.setter
    def program(self, program: ProgramData | None) -> None:
        self._program_ref = _weak_program(program)
        self._edited()

    # copy.deepcopy and pickle carry the owning program itself (a weak reference cannot be
    # copied into the copy's world), so a copied program's graphs point to the copy
    def __getstate__(self) -> dict[str, Any]:
        state = {a.name: getattr(self, a.name) for a in attrs.fields(type(self))}
        state["_program_ref"] = self.program
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, value)
        self._program_ref = _weak_program(state["_program_ref"])

    def __repr__(self) -> str:
        return f"Graph({self.name}, {len(self.ops)} ops)"

    def __getitem__(self, name: str) -> Value:
        if name in self.inputs:
            return self.inputs[name]
        if name in self.state_inputs:
            return self.state_inputs[name]
        raise KeyError(
            f"graph {self.name!r} has no input or state named {name!r}; "
            f"inputs: {list(self.inputs)}, state: {list(self.state_inputs)}"
        )

    def add_input(self, name: str, type: TensorType | Any) -> Value:
        if name in self.inputs or name in self.state_inputs:
            raise ValueError(f"graph {self.name!r} already has an input named {name!r}")
        value = Value(_as_type(type), name=name)
        self.inputs[name] = value
        return value

    def outputs(self, values: Mapping[str, Value] | Sequence[Value] | None = None, /,
                state: Mapping[str, Value] | None = None, **named: Value) -> None:
        """Set the graph outputs (and, for stateful graphs, the updated state values).

        Outputs are Values; :func:`coreai.output <coreai_core.dialects.coreai.output>` also
        accepts Python numbers and arrays and turns them into constants first.
        """
        if values is None:
            values = {}
        if not isinstance(values, Mapping):
            values = {f"out{i}": v for i, v in enumerate(values)}
        merged = {**values, **named}
        self.output_values = {k: self._checked(v, f"output {k!r}") for k, v in merged.items()}
        if state is not None:
            unknown = set(state) - set(self.state_inputs)
            if unknown:
                raise KeyError(f"state {sorted(unknown)} is not declared by graph {self.name!r}")
            self.state_outputs = {k: self._checked(v, f"state output {k!r}")
                                  for k, v in state.items()}

    def _checked(self, v: Any, what: str) -> Value:
        if not isinstance(v, Value):
            raise TypeError(
                f"graph {self.name!r}: {what} must be a Value, got {type(v).__name__}; build a "
                "constant with coreai.constant(...) or set outputs with coreai.output(...)")
        return v

    @property
    def input_names(self) -> list[str]:
        return list(self.inputs)

    @property
    def output_names(self) -> list[str]:
        return list(self.output_values)

    def walk(self) -> Iterator[Operation]:
        """All ops of this graph and of its nested regions, in order."""
        for op in self.ops:
            yield op
            for region in op.regions.values():
                yield from region.walk()


def _as_type(t: Any) -> TensorType:
    if isinstance(t, TensorType):
        return t
    if isinstance(t, tuple) and len(t) == 2:
        return TensorType(*t)
    raise TypeError(f"expected a TensorType, got {t!r}")


class ProgramData:
    """The data of a Core AI program: entrypoint graphs, named weights and named state.

    ``weights`` maps names to numpy arrays (``None`` for a weight not yet bound);
    ``initial_state`` holds the state's initial values and ``state`` its current values.
    ``generation`` counts edits: every edit of the program's graphs, ops, values, weights and
    weight types (through their fields and containers) moves it on, and so does
    :meth:`invalidate`; caches derived from the program (a runtime's plans) are rebuilt when it
    changes. ``state_lock`` serializes runs that read and update ``state``. Users work with
    :class:`coreai_core.Program`, which adds running, optimizing, printing and saving.
    """

    _TRACKED_FIELDS = frozenset({"graphs", "weights", "weight_types"})

    def __init__(self) -> None:
        self.generation = 0
        self.graphs: dict[str, Graph] = {}
        self.weights: dict[str, np.ndarray | None] = {}
        self.weight_types: dict[str, TensorType] = {}
        self.initial_state: dict[str, np.ndarray] = {}
        self.state: dict[str, np.ndarray] = {}
        self.state_lock = threading.RLock()

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ProgramData._TRACKED_FIELDS:
            value = tracked_dict(value, self)
            self._edited()
        object.__setattr__(self, name, value)

    def _edited(self) -> None:
        self.__dict__["generation"] += 1

    # the lock is not data: copies and pickles get a fresh one
    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "state_lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.state_lock = threading.RLock()

    # -- building -------------------------------------------------------------------------
    def add_graph(self, g: Graph, *, before: str | None = None) -> Graph:
        """Add entrypoint ``g`` (its name must be new) and make ``g.program`` this program.

        ``before`` places it ahead of an existing graph (a callee is printed before its callers,
        so that the text form reads back in order).
        """
        if g.name in self.graphs:
            raise ValueError(f"program already has a graph named {g.name!r}")
        if before is not None and before not in self.graphs:
            raise KeyError(f"program has no graph {before!r} to place {g.name!r} before")
        g.program = self
        if before is None:
            self.graphs[g.name] = g
        else:
            items = list(self.graphs.items())
            at = [k for k, _ in items].index(before)
            self.graphs = dict([*items[:at], (g.name, g), *items[at:]])
        self.invalidate()
        return g

    @property
    def composites(self) -> dict[str, Graph]:
        """The graphs that declare a composite op, by graph name."""
        return {k: g for k, g in self.graphs.items() if g.composite is not None}

    def declare_state(self, g: Graph, name: str, initial: Any,
                      type: TensorType | None = None) -> Value:
        """Add state ``name`` to graph ``g`` with the given initial value (shared by name).

        ``initial`` is an array, or a :class:`TensorType` for state without an initial value.
        ``type`` declares the state's type when it is wider than the initial array's, e.g. a
        mutated input with dynamic dims: the array must be one of its values.
        """
        if isinstance(initial, TensorType):
            t, arr = initial, None
        else:
            arr = np.array(initial)  # the program's own copy: the caller may reuse its array
            t = TensorType(arr.shape, DType.of(arr.dtype))
            if type is not None:
                if not admits(type, arr):
                    raise ValueError(f"state {name!r}: the initial value, {t}, is not a value "
                                     f"of the declared type {type}")
                t = type
        if name in g.inputs or name in g.state_inputs:
            raise ValueError(f"graph {g.name!r} already has an input named {name!r}")
        if name in self.initial_state:
            if arr is not None and not np.array_equal(self.initial_state[name], arr):
                raise ValueError(f"state {name!r} is declared twice with different values")
        elif arr is not None:
            self.initial_state[name] = arr
            self.state[name] = arr.copy()
        value = Value(t, name=name)
        g.state_inputs[name] = value
        return value

    def add_weight(self, name: str, data: np.ndarray | None, type: TensorType | None = None,
                   ) -> WeightRef:
        """Store ``data`` under ``name`` (``None`` for an unbound placeholder of ``type``)."""
        if name in self.weights:
            raise ValueError(f"program already has a weight named {name!r}")
        if data is not None:
            data = np.asarray(data)
            type = TensorType(data.shape, DType.of(data.dtype))
        if type is None:
            raise ValueError(f"weight {name!r}: an unbound weight needs its type")
        self.weights[name] = data
        self.weight_types[name] = type
        return WeightRef(name)

    def unique_weight_name(self, hint: str) -> str:
        if hint not in self.weights:
            return hint
        i = 1
        while f"{hint}_{i}" in self.weights:
            i += 1
        return f"{hint}_{i}"

    def invalidate(self) -> None:
        """Make cached run plans stale: they are rebuilt on next use.

        Edits through the IR's fields and containers do this by themselves; call it only
        after changing data the IR cannot see change: writing into a numpy array held by a
        weight or an attribute in place.
        """
        self._edited()

    # -- introspection --------------------------------------------------------------------
    def entry_graph(self, entrypoint: str | None = None) -> Graph:
        """The graph of ``entrypoint``; None: ``main``, else the first graph that is not a
        composite. A KeyError names the entrypoints when there is no such graph."""
        if entrypoint is None:
            # the default entrypoint: "main", else the first graph that is not a composite
            entrypoint = "main" if "main" in self.graphs else next(
                (k for k, g in self.graphs.items() if g.composite is None),
                next(iter(self.graphs), None))
        if entrypoint not in self.graphs:
            raise KeyError(f"program has no entrypoint {entrypoint!r}; it has {list(self.graphs)}")
        return self.graphs[entrypoint]

    @property
    def input_names(self) -> list[str]:
        return self.entry_graph().input_names

    @property
    def output_names(self) -> list[str]:
        return self.entry_graph().output_names

    @property
    def state_names(self) -> list[str]:
        names: dict[str, None] = {}
        for g in self.graphs.values():
            names.update(dict.fromkeys(g.state_inputs))
        return list(names)

    @property
    def entrypoints(self) -> list[str]:
        return list(self.graphs)

    def reset_state(self) -> None:
        """Restore every state variable to its initial value."""
        with self.state_lock:
            self.state = {k: v.copy() for k, v in self.initial_state.items()}

    def __repr__(self) -> str:
        return f"<Program entrypoints={list(self.graphs)} weights={len(self.weights)}>"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProgramData):
            return NotImplemented
        return structure(self) == structure(other)

    __hash__ = None  # type: ignore[assignment]


# -- structural identity -----------------------------------------------------------------------

def _array_key(a: np.ndarray | None) -> Any:
    if a is None:
        return None
    a = np.asarray(a)
    return (str(a.dtype), a.shape, np.ascontiguousarray(a).tobytes())


def attr_key(v: Any, numbering: dict[int, Any]) -> Any:
    """A hashable key equal for equal attribute values: arrays by dtype, shape and bytes, NaN
    equal to NaN, a region graph by its structure (``numbering`` keys the values of the
    enclosing graphs a region may read)."""
    if isinstance(v, Graph):
        return _graph_key(v, numbering)
    if isinstance(v, np.ndarray):
        return ("array", _array_key(v))
    if isinstance(v, float) and v != v:
        return ("nan",)
    if isinstance(v, (tuple, list)):
        return tuple(attr_key(x, numbering) for x in v)
    return v


def _graph_key(g: Graph, outer: dict[int, Any] | None = None) -> Any:
    numbering: dict[int, Any] = dict(outer or {})
    for k, v in g.inputs.items():
        numbering[id(v)] = ("in", k)
    for k, v in g.state_inputs.items():
        numbering[id(v)] = ("state", k)
    ops = []
    for i, op in enumerate(g.ops):
        operands = tuple(numbering.get(id(v), ("undefined", id(v))) for v in op.operands)
        attrs_key = tuple(sorted((k, attr_key(v, numbering)) for k, v in op.attributes.items()))
        ops.append((op.name, operands, attrs_key, tuple(r.type for r in op.results)))
        for j, r in enumerate(op.results):
            numbering[id(r)] = (i, j)
    return (
        tuple((k, v.type) for k, v in g.inputs.items()),
        tuple((k, v.type) for k, v in g.state_inputs.items()),
        tuple(ops),
        tuple((k, numbering.get(id(v))) for k, v in g.output_values.items()),
        tuple((k, numbering.get(id(v))) for k, v in g.state_outputs.items()),
        None if g.composite is None else (g.composite.name, g.composite.version,
                                          tuple(sorted((k, attr_key(v, numbering))
                                                for k, v in g.composite.attributes.items()))),
    )


def structure(p: ProgramData) -> Any:
    """A hashable-ish key that two structurally equal programs share."""
    return (
        tuple((k, _graph_key(g)) for k, g in p.graphs.items()),
        tuple(sorted((k, p.weight_types[k], _array_key(v)) for k, v in p.weights.items())),
        tuple(sorted((k, _array_key(v)) for k, v in p.initial_state.items())),
    )
