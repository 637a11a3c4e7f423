"""The parser of the text form (see :mod:`coreai_core.text` for the grammar).

A recursive-descent parser working directly on the string (types and dense data have their own
small lexical rules). Every op is rebuilt with ``build_operation`` inside an insertion context
of the graph being built, so type rules run again; anything wrong becomes a ParseError at the
offending position.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from coreai_core._builder import insertion_point
from coreai_core._dtypes import SHORT_NAME, DType
from coreai_core._ir import (
    UNKNOWN_LOC,
    Dim,
    Graph,
    Location,
    ProgramData,
    TensorType,
    Value,
    WeightRef,
    format_type,
)
from coreai_core._opdef import OPS, OpDef, build_operation, normalize_attr
from coreai_core._syntax import DIM_NAME as _DIM_NAME
from coreai_core._syntax import IDENT as _IDENT
from coreai_core._syntax import MAX_NESTING, TERMINATORS
from coreai_core._syntax import UINT_OF_SIZE as _UINT_OF_SIZE
from coreai_core.errors import ParseError, TypeRuleError

__all__ = ["MAX_SPLAT", "Parser", "parse_into", "parse_type"]

# A splat `dense<v>` may describe at most this many elements (guards against absurd allocations).
MAX_SPLAT = 1 << 28

# Whitespace and digits are ASCII only (re.ASCII): the text form is ASCII.
_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\.)*"', re.ASCII)
_WS = re.compile(r"(?:\s|//[^\n]*)+", re.ASCII)
_SPACE_OR_SLASH = frozenset(" \t\n\r\f\v/")  # what _WS can start with
_UINT = re.compile(r"\d+", re.ASCII)
_SINT = re.compile(r"[-+]?\d+", re.ASCII)
_NUMBER = re.compile(r"[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|inf|nan)(?![A-Za-z0-9_.$])",
                     re.ASCII)
_FLOAT_TOKEN = re.compile(r"[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|inf)", re.ASCII)
_NAN_BITS = re.compile(r"nan\(0x([0-9a-fA-F]{1,16})\)", re.ASCII)
_DENSE_TOKEN = re.compile(r"\[|\]|,|[^\s\[\],]+|\s+", re.ASCII)
_ELEMENT = re.compile(r"[a-z]+\d*(?:E\d+M\d+(?:FN)?)?", re.ASCII)  # f8E4M3FN
_FROM_SHORT = {v: k for k, v in SHORT_NAME.items()}


class _Scope:
    """Values visible in one graph; regions see only their own (no capture)."""

    def __init__(self, parent: _Scope | None = None) -> None:
        self.values: dict[tuple[str, str], Value] = {}
        self.parent = parent


class _Dense:
    """Raw `dense<...>` contents: one splat token or a rectangular list of tokens."""

    def __init__(self, tokens: list[str], shape: tuple[int, ...] | None, pos: int) -> None:
        self.tokens, self.shape, self.pos = tokens, shape, pos


class Parser:
    """Parses one text; ``program()`` or ``type()`` + ``end()``."""

    def __init__(self, text: str, weights: Mapping[str, Any] | None,
                 program: ProgramData | None = None) -> None:
        self.text = text
        self.pos = 0
        self.weights = weights
        self.prog = program if program is not None else ProgramData()
        self.depth = 0

    # -- scanning -------------------------------------------------------------------------
    def error(self, message: str, pos: int | None = None) -> ParseError:
        pos = self.pos if pos is None else pos
        line = self.text.count("\n", 0, pos) + 1
        column = pos - (self.text.rfind("\n", 0, pos) + 1) + 1
        return ParseError(message, line, column)

    def found(self) -> str:
        self.skip()
        if self.pos >= len(self.text):
            return "end of text"
        m = _IDENT.match(self.text, self.pos) or _NUMBER.match(self.text, self.pos)
        return repr(m.group() if m else self.text[self.pos])

    @contextlib.contextmanager
    def nested(self) -> Iterator[None]:
        """One level deeper into lists or regions; refuses to go past MAX_NESTING."""
        if self.depth >= MAX_NESTING:
            raise self.error(f"nested more than {MAX_NESTING} levels deep")
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    def skip(self) -> None:
        """Skip whitespace and // comments (the parser's hot path: avoid the regex if we can)."""
        if self.text[self.pos:self.pos + 1] in _SPACE_OR_SLASH:
            m = _WS.match(self.text, self.pos)
            if m:
                self.pos = m.end()

    def peek(self, lit: str) -> bool:
        self.skip()
        return self.text.startswith(lit, self.pos)

    def accept(self, lit: str) -> bool:
        self.skip()
        if self.text.startswith(lit, self.pos):
            self.pos += len(lit)
            return True
        return False

    def expect(self, lit: str, context: str = "") -> None:
        if not self.accept(lit):
            where = f" {context}" if context else ""
            raise self.error(f"expected {lit!r}{where}, found {self.found()}")

    def match(self, regex: re.Pattern[str]) -> re.Match[str] | None:
        self.skip()
        m = regex.match(self.text, self.pos)
        if m:
            self.pos = m.end()
        return m

    def word(self, what: str = "a name") -> str:
        m = self.match(_IDENT)
        if m is None:
            raise self.error(f"expected {what}, found {self.found()}")
        return m.group()

    def peek_word(self, word: str) -> bool:
        self.skip()
        m = _IDENT.match(self.text, self.pos)
        return m is not None and m.group() == word

    def string(self) -> str:
        m = self.match(_STRING)
        if m is None:
            raise self.error(f"expected a quoted string, found {self.found()}")
        try:
            return json.loads(m.group())
        except ValueError as e:
            raise self.error(f"bad string literal: {e}", m.start()) from None

    def name(self, what: str) -> str:
        """An identifier or a quoted string."""
        return self.string() if self.peek('"') else self.word(what)

    def integer(self, regex: re.Pattern[str] = _SINT) -> int:
        m = self.match(regex)
        if m is None or len(m.group()) > 40:
            raise self.error(f"expected an integer, found {self.found()}")
        return int(m.group())

    def symbol(self) -> str:
        self.expect("@", "before a symbol name")
        return self.name("a symbol name")

    def value_key(self) -> tuple[tuple[str, str], int]:
        """`%name`, `%"name"` or `%7`: the scope key and where it starts."""
        self.skip()
        start = self.pos
        self.expect("%", "for a value")
        if self.text.startswith('"', self.pos):
            return ("s", self.string()), start
        m = _UINT.match(self.text, self.pos) or _IDENT.match(self.text, self.pos)
        if m is None:
            raise self.error(f"expected a value name after '%', found {self.found()}")
        self.pos = m.end()
        return ("n" if m.group()[0].isdigit() else "s", m.group()), start

    def end(self) -> None:
        self.skip()
        if self.pos != len(self.text):
            raise self.error(f"unexpected {self.found()} after the end")

    # -- types ----------------------------------------------------------------------------
    def type(self) -> TensorType:
        self.skip()
        if not self.text.startswith("tensor<", self.pos):
            raise self.error(f"expected a type 'tensor<...>', found {self.found()}")
        self.pos += len("tensor<")
        dims: list[int | Dim] = []
        while True:
            start = self.pos
            if self.text.startswith("?", self.pos):
                self.pos += 1
                dims.append(self.dynamic_dim())
            elif (m := _UINT.match(self.text, self.pos)) is not None:
                if len(m.group()) > 18:
                    raise self.error("dimension is too large", start)
                self.pos = m.end()
                dims.append(int(m.group()))
            else:
                m = _ELEMENT.match(self.text, self.pos)
                if m is None or m.group() not in _FROM_SHORT:
                    raise self.error(f"expected a dimension or an element type "
                                     f"({', '.join(_FROM_SHORT)})", start)
                self.pos = m.end()
                if not self.text.startswith(">", self.pos):
                    raise self.error("expected '>' after the element type")
                self.pos += 1
                return TensorType(tuple(dims), _FROM_SHORT[m.group()])
            if not self.text.startswith("x", self.pos):
                raise self.error("expected 'x' after a dimension")
            self.pos += 1

    def dynamic_dim(self) -> Dim:
        name = "?"
        if self.text.startswith('"', self.pos):
            name = self.string()
        elif (m := _DIM_NAME.match(self.text, self.pos)) is not None:
            name = m.group()
            self.pos = m.end()
        lo = hi = None
        if self.text.startswith("[", self.pos):
            self.pos += 1
            lo = None if self.peek(":") else self.integer()
            self.expect(":", "in dimension bounds")
            hi = None if self.peek("]") else self.integer()
            self.expect("]", "after dimension bounds")
        return Dim(name, lo, hi)

    def types(self) -> list[TensorType]:
        if self.accept("("):
            self.expect(")", "in an empty type list")
            return []
        out = [self.type()]
        while self.accept(","):
            out.append(self.type())
        return out

    # -- dense data -----------------------------------------------------------------------
    def dense_body(self) -> _Dense:
        self.skip()
        start = self.pos
        self.expect("dense")
        self.expect("<", "after 'dense'")
        end = self.text.find(">", self.pos)
        if end < 0:
            raise self.error("unterminated 'dense<'")
        body, base = self.text[self.pos:end], self.pos
        self.pos = end + 1
        stack: list[list[Any]] = [[]]
        expect_item = True
        for m in _DENSE_TOKEN.finditer(body):
            tok, at = m.group(), base + m.start()
            if tok.isspace():
                continue
            if tok == "[":
                if not expect_item or len(stack) > MAX_NESTING:
                    raise self.error("unexpected '[' in dense data", at)
                stack.append([])
            elif tok == "]":
                if len(stack) == 1 or (expect_item and stack[-1]):
                    raise self.error("unexpected ']' in dense data", at)
                done = stack.pop()
                stack[-1].append(done)
                expect_item = False
            elif tok == ",":
                if expect_item or len(stack) == 1:
                    raise self.error("unexpected ',' in dense data", at)
                expect_item = True
            else:
                if not expect_item:
                    raise self.error("expected ',' between dense elements", at)
                stack[-1].append(tok)
                expect_item = False
        if len(stack) != 1 or len(stack[0]) != 1:
            raise self.error("malformed dense data", start)
        top = stack[0][0]
        if isinstance(top, str):
            return _Dense([top], None, start)
        tokens: list[str] = []
        shape = self.rectangular(top, tokens, start)
        return _Dense(tokens, shape, start)

    def rectangular(self, lst: list[Any], out: list[str], at: int) -> tuple[int, ...]:
        """Flatten a nested list of tokens into ``out``; its shape, checking it is regular."""
        shapes: set[tuple[int, ...]] = set()
        for item in lst:
            if isinstance(item, str):
                out.append(item)
                shapes.add(())
            else:
                shapes.add(self.rectangular(item, out, at))
        if len(shapes) > 1:
            raise self.error("dense data is not rectangular", at)
        return (len(lst), *(shapes.pop() if shapes else ()))

    def materialize(self, raw: _Dense, t: TensorType) -> np.ndarray:
        shape = t.static_shape
        if shape is None:
            raise self.error(f"dense data needs a static type, got {format_type(t)}", raw.pos)
        numel = math.prod(shape)
        if raw.shape is None:
            if numel > MAX_SPLAT:
                raise self.error(f"splat of {numel} elements is too large", raw.pos)
                # broadcast + copy keeps the element's exact bits (NaN payloads included)
            # broadcast + copy keeps the element's exact bits (NaN payloads included)
            one = self.elements(raw, t.element_type).reshape(())
            return np.broadcast_to(one, shape).copy()
        if raw.shape != t.shape and not (numel == 0 and not raw.tokens):
            raise self.error(f"dense data of shape {list(raw.shape)} does not match "
                             f"{format_type(t)}", raw.pos)
        return self.elements(raw, t.element_type).reshape(shape)

    def elements(self, raw: _Dense, dtype: DType) -> np.ndarray:
        toks = raw.tokens
        try:
            if dtype is DType.bool:
                bad = next((i for i, s in enumerate(toks) if s not in ("true", "false")), None)
                if bad is None:
                    return np.array([s == "true" for s in toks], dtype=np.bool_)
            elif dtype.is_int:
                bad = next((i for i, s in enumerate(toks)
                            if not _SINT.fullmatch(s) or len(s) > 40), None)
                if bad is None:
                    return np.array([int(s) for s in toks], dtype=dtype.numpy)
            else:
                return self.float_elements(raw, dtype)
        except OverflowError:
            raise self.error(f"a dense element is out of range for {dtype}", raw.pos) from None
        raise self.error(f"bad {dtype} element {toks[bad]!r} in dense data", raw.pos)

    def float_elements(self, raw: _Dense, dtype: DType) -> np.ndarray:
        values: list[float] = []
        patches: list[tuple[int, int]] = []
        for i, s in enumerate(raw.tokens):
            if _FLOAT_TOKEN.fullmatch(s) and len(s) < 400:
                values.append(float(s))
            elif s == "nan":
                values.append(math.nan)
            elif (m := _NAN_BITS.fullmatch(s)) is not None:
                values.append(math.nan)
                patches.append((i, int(m.group(1), 16)))
            else:
                raise self.error(f"bad {dtype} element {s!r} in dense data", raw.pos)
        with np.errstate(over="ignore"):
            arr = np.array(values, dtype=np.float64).astype(dtype.numpy)
        if patches:
            uint = _UINT_OF_SIZE[arr.itemsize]
            view = arr.view(uint)
            for i, b in patches:
                if b >= 1 << (8 * arr.itemsize):
                    raise self.error(f"NaN bits 0x{b:x} do not fit {dtype}", raw.pos)
                view[i] = b
            with np.errstate(invalid="ignore"):
                patched = arr[[i for i, _ in patches]].astype(np.float64)
            if not np.isnan(patched).all():
                raise self.error("nan(0x...) bits must encode a NaN", raw.pos)
        return arr

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
            data = self.materialize(self.dense_body(), t)
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
        self.prog.initial_state[name] = self.materialize(self.dense_body(), t)

    def graph_decl(self, start: int) -> None:
        name = self.symbol()
        if name in self.prog.graphs:
            raise self.error(f"graph @{name} is defined twice", start)
        g = Graph(name, program=self.prog)
        self.prog.graphs[name] = g  # like Program.graph: visible to invoke while being built
        scope = _Scope()
        self.signature(g, scope)
        self.body(g, scope)

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
            raise self.error(f"unknown op {opname!r}{hint}", at)
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
            m = self.match(_NUMBER)
            if m is None or len(m.group()) > 400:
                raise self.error(f"bad number {self.found()}")
            s = m.group()
            return int(s) if _SINT.fullmatch(s.lstrip("+")) else float(s)
        start = self.pos
        word = self.word("an attribute value")
        keywords = {"true": True, "false": False, "none": None, "nan": math.nan, "inf": math.inf}
        if word in keywords:
            return keywords[word]
        if word == "dense" and self.text.startswith("<", self.pos):
            self.pos = start
            raw = self.dense_body()
            self.expect(":", "before the type of dense data")
            return self.materialize(raw, self.type())
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
        self.expect(")", "to close the location")
        return Location(file, line, module)


def parse_into(program: ProgramData, text: str | bytes,
               weights: Mapping[str, Any] | None = None) -> None:
    """Parse the text form into the empty ``program`` (``coreai_core.parse`` makes it).

    ``weights`` binds the data of weights printed as declarations (a mapping name -> array;
    extra names are ignored). Malformed text raises :class:`ParseError` with line and column.
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ParseError(f"text is not UTF-8: {e}", 1, 1) from None
    if not isinstance(text, str):
        raise TypeError(f"parse expects a str, got {type(text).__name__}")
    Parser(text, weights, program).program()


def parse_type(text: str) -> TensorType:
    """Parse one tensor type such as ``tensor<2x?batchxf32>`` (ParseError if malformed)."""
    p = Parser(text, None)
    t = p.type()
    p.end()
    return t
