"""The parser of the text form (see :mod:`coreai_core.text` for the grammar).

A recursive-descent parser working directly on the string (types and dense data have their own
small lexical rules). Every op is rebuilt with ``build_operation`` inside an insertion context
of the graph being built, so type rules run again; anything wrong becomes a ParseError at the
offending position.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from coreai_core._builder import insertion_point
from coreai_core._ir import (
    UNKNOWN_LOC,
    Composite,
    Graph,
    Location,
    ProgramData,
    TensorType,
    Value,
    WeightRef,
    format_type,
)
from coreai_core._opdef import OPS, OpDef, build_operation, normalize_attr
from coreai_core._syntax import TERMINATORS
from coreai_core._text_scanner import DEFAULT_MAX_BYTES, NUMBER, SIGNED_INT, Scanner, clip
from coreai_core.errors import ParseError, TypeRuleError

__all__ = ["DEFAULT_MAX_BYTES", "Parser", "parse_into", "parse_type"]


class _Scope:
    """Values visible in one graph; regions see only their own (no capture)."""

    def __init__(self, parent: _Scope | None = None) -> None:
        self.values: dict[tuple[str, str], Value] = {}
        self.parent = parent


class Parser(Scanner):
    """Parses one text; ``program()`` or ``type()`` + ``end()``."""

    def __init__(self, text: str, weights: Mapping[str, Any] | None,
                 program: ProgramData | None = None, *,
                 max_bytes: int | None = DEFAULT_MAX_BYTES) -> None:
        super().__init__(text, max_bytes)
        self.weights = weights
        self.prog = program if program is not None else ProgramData()

    # -- program --------------------------------------------------------------------------
    def program(self) -> ProgramData:
        self.skip()
        if not self.peek_word("coreai.program"):
            raise self.error(f"expected 'coreai.program', found {self.found()}")
        self.word()
        self.expect("{", "after 'coreai.program'")
        while not self.accept("}"):
            self.skip()
            start = self.pos
            kind = self.word("'weight', 'state', 'graph' or '}'")
            if kind == "weight":
                self.weight_decl(start)
            elif kind == "state":
                self.state_decl(start)
            elif kind == "graph":
                self.graph_decl(start)
            else:
                raise self.error(f"expected 'weight', 'state', 'graph' or '}}', found {kind!r}",
                                 start)
        self.end()
        self.prog.reset_state()
        return self.prog

    def weight_decl(self, start: int) -> None:
        name = self.symbol()
        if name in self.prog.weight_types:
            raise self.error(f"weight @{name} is declared twice", start)
        self.expect(":", "after the weight name")
        t = self.type()
        data = None
        if self.accept("="):
            data = self.materialize(self.dense_body(), t, f"weight @{name}")
        elif self.weights is not None and self.weights.get(name) is not None:
            data = np.asarray(self.weights[name])
            if data.dtype != t.element_type.numpy or data.shape != t.shape:
                raise self.error(f"weight @{name}: bound data {data.dtype}{list(data.shape)} "
                                 f"does not match {format_type(t)}", start)
        self.prog.weights[name] = data
        self.prog.weight_types[name] = t

    def state_decl(self, start: int) -> None:
        name = self.symbol()
        if name in self.prog.initial_state:
            raise self.error(f"state @{name} is declared twice", start)
        self.expect(":", "after the state name")
        t = self.type()
        self.expect("=", "before the state's initial value")
        self.prog.initial_state[name] = self.materialize(self.dense_body(), t,
                                                         f"state @{name}", running_copy=True)

    def graph_decl(self, start: int) -> None:
        name = self.symbol()
        if name in self.prog.graphs:
            raise self.error(f"graph @{name} is defined twice", start)
        g = Graph(name, program=self.prog)
        if self.peek_word("composite"):
            g.composite = self.composite_decl()
        self.prog.graphs[name] = g  # like Program.graph: visible to invoke while being built
        scope = _Scope()
        self.signature(g, scope)
        self.body(g, scope)

    def composite_decl(self) -> Composite:
        """``composite "name" version N {key = value, ...}`` (the attributes are optional)."""
        self.word()
        self.skip()
        at = self.pos
        name = self.string()
        if not self.peek_word("version"):
            raise self.error(f"expected 'version' after the composite name, found {self.found()}")
        self.word()
        version = self.integer()
        attributes: dict[str, Any] = {}
        if self.accept("{"):
            with self.nested():
                while not self.accept("}"):
                    key = self.name("a composite attribute name")
                    if key in attributes:
                        raise self.error(f"composite attribute {key!r} is given twice")
                    self.expect("=", "after a composite attribute name")
                    attributes[key] = self.literal(_Scope(), "composite", key)
                    if not self.accept(","):
                        self.expect("}", "to close the composite attributes")
                        break
        try:
            return Composite(name, version, attributes)
        except (TypeError, ValueError) as e:
            raise self.error(f"bad composite declaration: {e}", at) from None

    def signature(self, g: Graph, scope: _Scope) -> None:
        self.expect("(", "to open the graph's inputs")
        self.typed_values(g, g.inputs, scope)
        if self.peek_word("state"):
            self.word()
            self.expect("(", "after 'state'")
            self.typed_values(g, g.state_inputs, scope)

    def typed_values(self, g: Graph, target: dict[str, Value], scope: _Scope) -> None:
        """``%name: type, ...)`` (the opening parenthesis is already read)."""
        while not self.accept(")"):
            key, at = self.value_key()
            self.expect(":", "after an input name")
            t = self.type()
            if key in scope.values or key[1] in g.inputs or key[1] in g.state_inputs:
                raise self.error(f"input %{key[1]} is declared twice", at)
            scope.values[key] = target[key[1]] = Value(t, name=key[1])
            if not self.accept(","):
                self.expect(")", "to close the inputs")
                break

    def body(self, g: Graph, scope: _Scope) -> None:
        self.expect("{", "to open the graph body")
        with insertion_point(g):
            while True:
                self.skip()
                start = self.pos
                if self.peek("%"):
                    self.operation(g, scope)
                    continue
                word = self.word("an op or 'coreai.output'")
                if word in TERMINATORS:
                    self.terminator(g, scope)
                    break
                self.pos = start
                self.operation(g, scope)
        self.expect("}", "after the graph's terminator")

    def lookup(self, scope: _Scope, key: tuple[str, str], at: int) -> Value:
        v = scope.values.get(key)
        if v is not None:
            return v
        outer = scope.parent
        while outer is not None:
            if key in outer.values:
                raise self.error(f"region uses %{key[1]} of the enclosing graph; pass it as an "
                                 "operand instead", at)
            outer = outer.parent
        raise self.error(f"undefined value %{key[1]}", at)

    def terminator(self, g: Graph, scope: _Scope) -> None:
        self.expect("(", "after the terminator")
        outputs: dict[str, Value] = {}
        while not self.accept(")"):
            self.skip()
            at = self.pos
            if self.peek("%"):
                key = f"out{len(outputs)}"
            else:
                key = self.name("an output name")
                self.expect("=", "after an output name")
            if key in outputs:
                raise self.error(f"output {key!r} is given twice", at)
            outputs[key] = self.lookup(scope, *self.value_key())
            if not self.accept(","):
                self.expect(")", "to close the outputs")
                break
        state: dict[str, Value] = {}
        if self.peek_word("state"):
            self.word()
            self.expect("(", "after 'state'")
            while not self.accept(")"):
                self.skip()
                at = self.pos
                key = self.name("a state name")
                if key not in g.state_inputs or key in state:
                    raise self.error(f"state {key!r} is not declared by the graph or is "
                                     "given twice", at)
                self.expect("=", "after a state name")
                state[key] = self.lookup(scope, *self.value_key())
                if not self.accept(","):
                    self.expect(")", "to close the state outputs")
                    break
        g.output_values, g.state_outputs = outputs, state

    def operation(self, g: Graph, scope: _Scope) -> None:
        results: list[tuple[tuple[str, str], int]] = []
        if self.peek("%"):
            results.append(self.value_key())
            while self.accept(","):
                results.append(self.value_key())
            self.expect("=", "after the result names")
        self.skip()
        at = self.pos
        opname = self.word("an op name")
        opdef = OPS.get(opname)
        if opdef is None:
            close = difflib.get_close_matches(opname, OPS, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise self.error(f"unknown op {clip(opname)}{hint}", at)
        self.expect("(", f"after {opname}")
        operands: list[Value] = []
        while not self.accept(")"):
            operands.append(self.lookup(scope, *self.value_key()))
            if not self.accept(","):
                self.expect(")", "to close the operands")
                break
        raw: dict[str, tuple[Any, int]] = {}
        if self.accept("{"):
            while not self.accept("}"):
                self.skip()
                key_at = self.pos
                key = self.word("an attribute name")
                if key in raw:
                    raise self.error(f"attribute {key!r} is given twice", key_at)
                self.expect("=", f"after attribute {key!r}")
                self.skip()
                value_at = self.pos
                raw[key] = (self.literal(scope, opname, key), value_at)
                if not self.accept(","):
                    self.expect("}", "to close the attributes")
                    break
        self.expect(":", f"before the result types of {opname}")
        types = self.types()
        loc = self.location() if self.peek_word("loc") else UNKNOWN_LOC
        attributes = self.normalize(opdef, raw, at)
        if len(results) != len(types):
            raise self.error(f"{opname} names {len(results)} results but declares "
                             f"{len(types)} result types", at)
        try:
            op = build_operation(opdef, operands, attributes, loc, types)
        except TypeRuleError as e:
            raise self.error(f"{opname}: {e.message}", at) from None
        except Exception as e:  # a type rule tripped over odd input: still a parse error
            raise self.error(f"{opname}: invalid operands or attributes ({e!r})", at) from e
        for (value_key, key_at), r in zip(results, op.results, strict=True):
            if value_key in scope.values:
                raise self.error(f"value %{value_key[1]} is defined twice", key_at)
            scope.values[value_key] = r
        g.ops.append(op)

    def normalize(self, opdef: OpDef, raw: dict[str, tuple[Any, int]], at: int) -> dict[str, Any]:
        params = {p.name: p for p in opdef.attributes}
        for key, (_, value_at) in raw.items():
            if key not in params:
                raise self.error(f"{opdef.name} has no attribute {key!r}; it has "
                                 f"{list(params) or 'none'}", value_at)
        out: dict[str, Any] = {}
        for name, p in params.items():
            if name not in raw:
                if not p.has_default:
                    raise self.error(f"{opdef.name} needs attribute {name!r}", at)
                value, value_at = p.default, at
            else:
                value, value_at = raw[name]
            if (p.role == "region") != isinstance(value, Graph):
                what = "a region 'graph(...) {...}'" if p.role == "region" else "a plain value"
                raise self.error(f"attribute {name!r} of {opdef.name} must be {what}", value_at)
            if p.role == "region":
                out[name] = value
                continue
            try:
                out[name] = normalize_attr(p, value, opdef.name)
            except TypeRuleError as e:
                raise self.error(f"{opdef.name}: {e.message}", value_at) from None
            except Exception as e:
                raise self.error(f"{opdef.name}: bad attribute {name!r} ({e!r})",
                                 value_at) from e
        return out

    def literal(self, scope: _Scope, opname: str, key: str) -> Any:
        self.skip()
        c = self.text[self.pos:self.pos + 1]
        if c == "[":
            self.pos += 1
            items: list[Any] = []
            with self.nested():
                while not self.accept("]"):
                    items.append(self.literal(scope, opname, key))
                    if not self.accept(","):
                        self.expect("]", "to close the list")
                        break
            return items
        if c == '"':
            return self.string()
        if c == "@":
            return WeightRef(self.symbol())
        if c and c in "-+.0123456789":
            start = self.pos
            m = self.match(NUMBER)
            if m is None:
                raise self.error(f"bad number {self.found()}")
            if len(m.group()) > 400:
                raise self.error(f"number {clip(m.group())} is too long", start)
            s = m.group()
            return int(s) if SIGNED_INT.fullmatch(s.lstrip("+")) else float(s)
        start = self.pos
        word = self.word("an attribute value")
        keywords = {"true": True, "false": False, "none": None, "nan": math.nan, "inf": math.inf}
        if word in keywords:
            return keywords[word]
        if word == "dense" and self.text.startswith("<", self.pos):
            self.pos = start
            raw = self.dense_body()
            self.expect(":", "before the type of dense data")
            return self.materialize(raw, self.type(), f"attribute {key!r} of {opname}")
        if word == "graph" and self.peek("("):
            region = Graph(f"{opname}.{key}", program=self.prog)
            inner = _Scope(scope)
            with self.nested():
                self.signature(region, inner)
                self.body(region, inner)
            return region
        return word  # a bare name, e.g. an element type

    def location(self) -> Location:
        self.word()
        self.expect("(", "after 'loc'")
        file = line = module = None
        if self.peek('"'):
            file = self.string()
            if self.accept(":"):
                line = self.integer()
        if self.peek_word("in"):
            self.word()
            module = self.string()
        op_id, stack = None, list[str]()
        if self.peek_word("id"):
            self.word()
            op_id = self.string()
        if self.peek_word("stack"):
            self.word()
            self.expect("[", "after 'stack'")
            while not self.accept("]"):
                if stack:
                    self.expect(",", "between stack frames")
                stack.append(self.string())
        self.expect(")", "to close the location")
        return Location(file, line, module, op_id, tuple(stack))


def parse_into(program: ProgramData, text: str | bytes,
               weights: Mapping[str, Any] | None = None, *,
               max_bytes: int | None = DEFAULT_MAX_BYTES) -> None:
    """Parse the text form into the empty ``program`` (``coreai_core.parse`` makes it).

    ``weights`` binds the data of weights printed as declarations (a mapping name -> array;
    extra names are ignored; their data is not copied). ``max_bytes`` bounds the bytes of
    tensor data the text itself may make the parser allocate, in total over its dense
    literals (weights, state initial values and their running copies, constant attributes);
    it is checked before anything is allocated and raises :class:`ParseError` when exceeded.
    None means no bound. Large splats ``dense<v>`` cost nothing: they become read-only
    broadcast views. Malformed text raises :class:`ParseError` with line and column.
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ParseError(f"text is not UTF-8: {e}", 1, 1) from None
    if not isinstance(text, str):
        raise TypeError(f"parse expects a str, got {type(text).__name__}")
    Parser(text, weights, program, max_bytes=max_bytes).program()


def parse_type(text: str) -> TensorType:
    """Parse one tensor type such as ``tensor<2x?batchxf32>`` (ParseError if malformed)."""
    p = Parser(text, None)
    t = p.type()
    p.end()
    return t
