"""The text form of a program: a deterministic MLIR-like printer and the parser that reads it.

Both sides are generic: they know the IR classes and read op definitions from ``OPS`` (operand
roles, attribute names, kinds and defaults); no op has code of its own here. The parser rebuilds
every op with :func:`~coreai_core._opdef.build_operation`, so the op's type rule runs again and
the printed result types are checked against it. Grammar (informal)::

    program    := 'coreai.program' '{' item* '}'
    item       := 'weight' SYM ':' type ['=' dense]          data elided unless small or full=True
                | 'state' SYM ':' type '=' dense              initial value, always in full
                | 'graph' SYM [composite] signature body
    composite  := 'composite' STRING 'version' INT ['{' NAME '=' attr {',' ...} '}']
    signature  := '(' [VAL ':' type {',' ...}] ')' ['state' '(' VAL ':' type {',' ...} ')']
    body       := '{' op* terminator '}'
    op         := [VAL {',' VAL} '='] OPNAME '(' [VAL {',' VAL}] ')' ['{' attr {',' attr} '}']
                  ':' (type {',' type} | '()') [loc]
    terminator := ('coreai.output' | 'coreai.yield') '(' [[KEY '='] VAL {',' ...}] ')'
                  ['state' '(' KEY '=' VAL {',' ...} ')']
    attr       := NAME '=' (INT | FLOAT | 'true' | 'false' | 'none' | STRING | NAME | SYM
                           | '[' ... ']' | dense ':' type | 'graph' signature body)
    type       := 'tensor<' {dim 'x'} ELEMENT '>'          e.g. tensor<2x?batch[1:64]xf32>
    dim        := INT | '?' [NAME | STRING] ['[' [INT] ':' [INT] ']']
    dense      := 'dense<' (scalar | nested list) '>'       a bare scalar is a splat
    scalar     := INT | FLOAT | 'true' | 'false' | '(' FLOAT ',' FLOAT ')'   complex: (real, imag)
    loc        := 'loc(' [STRING [':' INT]] ['in' STRING] ')'

Names that are not identifiers are JSON-quoted (``%"x-1"``, ``@"my weight"``); a dynamic
dimension's name is printed bare only when it contains no ``x``. Floats print as the shortest
decimal that reads back to the same value in their element type; NaNs other than the canonical
one print their bits (``nan(0xffc00000)``), so data round-trips bit for bit. Results are numbered
``%0, %1, ...`` across an entrypoint and its regions; regions see only their own inputs.
Whitespace (ASCII) and ``//`` comments separate tokens. Graphs are read in order, so a graph
may ``invoke`` only graphs printed before it (as when they were built in that order).

Bounds: parsing takes time linear in the text (no pattern backtracks over what it scanned).
The tensor data a text may make the parser allocate is bounded in total by ``max_bytes``
(:data:`DEFAULT_MAX_BYTES`, 1 GiB, unless ``parse``/``load`` are given another value; None
removes the bound), checked before allocating. A splat ``dense<v>`` of more than
``INLINE_LIMIT`` elements allocates nothing: it is a read-only ``numpy.broadcast_to`` view of
its element (a state's running copy, made by ``reset_state``, is allocated and counted).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from coreai_core._builder import INLINE_LIMIT
from coreai_core._dtypes import DType
from coreai_core._ir import Graph, Operation, ProgramData, TensorType, Value, WeightRef, format_type
from coreai_core._opdef import OPS
from coreai_core._syntax import IDENT as _IDENT
from coreai_core._syntax import MAX_NESTING, TERMINATORS
from coreai_core._syntax import UINT_OF_SIZE as _UINT_OF_SIZE
from coreai_core._syntax import quote as _quote
from coreai_core._text_parser import DEFAULT_MAX_BYTES, parse_type

__all__ = ["DEFAULT_MAX_BYTES", "MAX_NESTING", "format_type", "parse_type", "print_program",
           "result_names"]

_NUMPY_FLOATS = frozenset({DType.float16, DType.float32, DType.float64})


# ============================================================================== printing

def print_program(program: ProgramData, *, locations: bool = False, full: bool = False) -> str:
    """The text form of ``program``.

    Weights with more than ``INLINE_LIMIT`` elements print as a typed declaration unless
    ``full``; unbound weights always do. Op locations print only with ``locations``.
    """
    lines = ["coreai.program {"]
    types = dict(program.weight_types)
    for name, data in program.weights.items():
        if name not in types and data is not None:
            types[name] = TensorType(np.shape(data), DType.of(np.asarray(data).dtype))
    for name, t in types.items():
        data = program.weights.get(name)
        text = f"  weight {_sym(name)} : {format_type(t)}"
        if data is not None and (full or np.size(data) <= INLINE_LIMIT):
            text += f" = {_dense(np.asarray(data))}"
        lines.append(text)
    for name, data in program.initial_state.items():
        arr = np.asarray(data)
        lines.append(f"  state {_sym(name)} : {_array_type(arr)} = {_dense(arr)}")
    for name, g in program.graphs.items():
        printer = _Printer(locations)
        head = f"graph {_sym(name)}"
        if g.composite is not None:
            head += " " + printer.composite(g)
        lines.append("  " + printer.graph(g, head, "  "))
    lines.append("}")
    return "\n".join(lines)


def result_names(graph: Graph) -> dict[Value, str]:
    """The names the printer gives the op results of ``graph`` and its regions (``%0``, ...).

    Numbered as in ``print_program``: a name read from a printed program finds its Value here.
    """
    printer = _Printer(locations=False)
    printer.number(graph)
    return {r: printer.names[id(r)] for op in graph.walk() for r in op.results}


def _name(s: str) -> str:
    return s if _IDENT.fullmatch(s) else _quote(s)


def _sym(s: str) -> str:
    return "@" + _name(s)


def _array_type(a: np.ndarray) -> str:
    return format_type(TensorType(a.shape, DType.of(a.dtype)))


def _dense(a: np.ndarray) -> str:
    dtype = DType.of(a.dtype)
    if a.size > 1 and all(s == 0 for s, n in zip(a.strides, a.shape) if n > 1):
        # a broadcast view of one element (a parsed splat): print it without copying it
        return f"dense<{_elements(a[(slice(0, 1),) * a.ndim].reshape(1), dtype)[0]}>"
    flat = np.ascontiguousarray(a).reshape(-1)
    if a.ndim == 0 or (flat.size > 1 and _is_splat(flat)):
        return f"dense<{_elements(flat[:1], dtype)[0]}>"
    return f"dense<{_nest(_elements(flat, dtype), a.shape)}>"


def _is_splat(flat: np.ndarray) -> bool:
    if flat.dtype.kind == "c":  # compare the bits of both parts
        flat = flat.view(flat.real.dtype).reshape(flat.size, 2)
    bits = flat.view(_UINT_OF_SIZE[flat.itemsize])
    return bool((bits == bits[0]).all())


def _elements(flat: np.ndarray, dtype: DType) -> list[str]:
    if dtype is DType.bool:
        return ["true" if x else "false" for x in flat.tolist()]
    if dtype.is_int:
        return [str(x) for x in flat.tolist()]
    if dtype.is_complex:  # `(real, imag)`, each part printed like a float of its width
        part = dtype.real_dtype
        re, im = _elements(flat.real.copy(), part), _elements(flat.imag.copy(), part)
        return [f"({r}, {i})" for r, i in zip(re, im)]
    # the shortest decimal that reads back to the same value in its own width; bfloat16 goes
    # through float32, which holds it exactly (numpy has no bfloat16 formatting); so do the
    # ml_dtypes float8/float4 types
    shown = flat if dtype in _NUMPY_FLOATS else flat.astype(np.float32)
    canonical = _canonical_nan(dtype)
    bits = flat.view(_UINT_OF_SIZE[flat.itemsize]).tolist()
    out = []
    for x, b in zip(shown, bits):
        if x != x:
            out.append("nan" if b == canonical else f"nan(0x{b:x})")
        else:
            out.append(_shortest(x))
    return out


def _shortest(x: np.floating) -> str:
    """Shortest round-tripping text of a finite or infinite float, like ``repr(float)``."""
    if np.isinf(x):
        return "inf" if x > 0 else "-inf"
    magnitude = abs(float(x))  # a Python float: 1e16 overflows float16
    if magnitude == 0 or 1e-4 <= magnitude < 1e16:
        return np.format_float_positional(x, unique=True, trim="0")
    return np.format_float_scientific(x, unique=True, trim="-")


def _canonical_nan(dtype: DType) -> int:
    arr = np.array(np.nan, dtype=dtype.numpy)
    return int(arr.view(_UINT_OF_SIZE[arr.itemsize]))


def _nest(items: list[str], shape: tuple[int, ...]) -> str:
    if len(shape) <= 1 or shape[0] == 0:
        return "[" + ", ".join(items) + "]"
    step = len(items) // shape[0]
    return "[" + ", ".join(_nest(items[i * step:(i + 1) * step], shape[1:])
                           for i in range(shape[0])) + "]"


def _float(x: float) -> str:
    return "nan" if x != x else repr(x)


class _Printer:
    """Prints one entrypoint graph; result numbers run across its nested regions."""

    def __init__(self, locations: bool) -> None:
        self.locations = locations
        self.names: dict[int, str] = {}
        self.counter = 0

    def number(self, g: Graph) -> None:
        """Number results in print order (up front, so a use before definition still prints)."""
        for op in g.ops:
            for r in op.results:
                self.names[id(r)] = f"%{self.counter}"
                self.counter += 1
            for _, v in _ordered_attrs(op):
                if isinstance(v, Graph):
                    self.number(v)

    def graph(self, g: Graph, head: str, indent: str, region: bool = False) -> str:
        if not region:
            self.number(g)
        for k, v in [*g.inputs.items(), *g.state_inputs.items()]:
            self.names[id(v)] = "%" + _name(k)
        text = f"{head}({self.typed(g.inputs)})"
        if g.state_inputs:
            text += f" state({self.typed(g.state_inputs)})"
        lines = [text + " {"]
        inner = indent + "  "
        lines.extend(inner + self.op(op, inner) for op in g.ops)
        lines.append(inner + self.terminator(g, region))
        lines.append(indent + "}")
        return "\n".join(lines)

    def composite(self, g: Graph) -> str:
        """``composite "rms_norm" version 1 {eps = 1e-06}``: the declaration of a composite."""
        c = g.composite
        assert c is not None
        text = f"composite {_quote(c.name)} version {c.version}"
        if c.attributes:
            text += " {" + ", ".join(f"{_name(k)} = {self.attr(v, '')}"
                                     for k, v in c.attributes.items()) + "}"
        return text + " "

    def typed(self, values: dict[str, Value]) -> str:
        return ", ".join(f"{self.names[id(v)]}: {format_type(v.type)}" for v in values.values())

    def ref(self, v: Any) -> str:
        return self.names.get(id(v), "%<undefined>")

    def terminator(self, g: Graph, region: bool) -> str:
        outs = g.output_values
        if list(outs) == [f"out{i}" for i in range(len(outs))]:
            items = [self.ref(v) for v in outs.values()]
        else:
            items = [f"{_name(k)} = {self.ref(v)}" for k, v in outs.items()]
        text = f"{TERMINATORS[region]}({', '.join(items)})"
        if g.state_outputs:
            text += " state(" + ", ".join(f"{_name(k)} = {self.ref(v)}"
                                          for k, v in g.state_outputs.items()) + ")"
        return text

    def op(self, op: Operation, indent: str) -> str:
        head = ", ".join(self.ref(r) for r in op.results)
        head = f"{head} = " if head else ""
        attrs = [f"{k} = {self.attr(v, indent)}" for k, v in _ordered_attrs(op)]
        text = f"{head}{op.name}({', '.join(self.ref(v) for v in op.operands)})"
        if attrs:
            text += " {" + ", ".join(attrs) + "}"
        text += " : " + (", ".join(format_type(r.type) for r in op.results) or "()")
        if self.locations and op.location.is_known:
            text += f"  {op.location.to_text()}"
        return text

    def attr(self, v: Any, indent: str) -> str:
        if v is None:
            return "none"
        if isinstance(v, bool | np.bool_):
            return "true" if v else "false"
        if isinstance(v, Graph):
            return self.graph(v, "graph", indent, region=True)
        if isinstance(v, WeightRef):
            return _sym(v.name)
        if isinstance(v, DType):
            return v.value
        if isinstance(v, str):
            return _quote(v)
        if isinstance(v, int | np.integer):
            return str(int(v))
        if isinstance(v, float | np.floating):
            return _float(float(v))
        if isinstance(v, tuple | list):
            return "[" + ", ".join(self.attr(x, indent) for x in v) + "]"
        try:
            arr = np.asarray(v)
            return f"{_dense(arr)} : {_array_type(arr)}"
        except (TypeError, ValueError):  # not representable; keep the text readable
            return _quote(repr(v))


def _ordered_attrs(op: Operation) -> list[tuple[str, Any]]:
    """Attributes in definition order; ``None`` values of params defaulting to None omitted."""
    opdef = OPS.get(op.name)
    params = {p.name: p for p in opdef.attributes} if opdef else {}
    out = [(k, op.attributes[k]) for k in params if k in op.attributes]
    out = [(k, v) for k, v in out if not (v is None and params[k].default is None)]
    return out + sorted(((k, v) for k, v in op.attributes.items() if k not in params),
                        key=lambda kv: kv[0])
