"""The scanner of the text form: tokens, names, numbers, types and dense literals.

:class:`coreai_core._text_parser.Parser` adds the grammar of programs on top of it.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Iterator
from typing import Any

import numpy as np

from coreai_core._builder import INLINE_LIMIT
from coreai_core._dtypes import SHORT_NAME, DType
from coreai_core._ir import (
    Dim,
    TensorType,
    format_type,
)
from coreai_core._syntax import DIM_NAME as _DIM_NAME
from coreai_core._syntax import IDENT as _IDENT
from coreai_core._syntax import MAX_NESTING
from coreai_core._syntax import UINT_OF_SIZE as _UINT_OF_SIZE
from coreai_core.errors import ParseError

__all__ = ["DEFAULT_MAX_BYTES", "Scanner", "clip"]

# The most bytes of tensor data one text may make the parser allocate unless the caller passes
# another ``max_bytes`` (see ``Scanner.allocate``). Data bound from a ``weights`` mapping does
# not count: the parser does not allocate it.
DEFAULT_MAX_BYTES = 1 << 30

# Every pattern is linear in what it scans: repetitions are possessive (``++``, ``*+``) or the
# token is matched as one atomic group ``(?>...)`` before the check that follows it, so a long
# run of digits followed by a letter fails in one pass instead of retrying every split of the
# run (that retrying made `9999...9x` quadratic). Patterns applied with ``finditer`` also
# never rescan what an earlier match consumed. Whitespace and digits are ASCII only (re.ASCII):
# the text form is ASCII.
_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]++|\\.)*+"', re.ASCII)
_WS = re.compile(r"(?:\s++|//[^\n]*+)++", re.ASCII)
_SPACE_OR_SLASH = frozenset(" \t\n\r\f\v/")  # what _WS can start with
_UINT = re.compile(r"\d++", re.ASCII)
SIGNED_INT = re.compile(r"[-+]?+\d++", re.ASCII)
_FLOAT_BODY = r"[-+]?+(?:(?:\d++\.?+\d*+|\.\d++)(?:[eE][-+]?+\d++)?+|inf)"
NUMBER = re.compile(rf"(?>{_FLOAT_BODY}|[-+]?+nan)(?![A-Za-z0-9_.$])", re.ASCII)
_FLOAT_TOKEN = re.compile(_FLOAT_BODY, re.ASCII)
_NAN_BITS = re.compile(r"nan\(0x([0-9a-fA-F]{1,16})\)", re.ASCII)
# a complex element `(real, imag)` is one token; its parts may be `nan(0x...)`
_DENSE_TOKEN = re.compile(r"\[|\]|,|\((?:[^()]++|\([^()]*+\))*+\)|[^\s\[\],]++|\s++",
                          re.ASCII)
# each part stops at a space or comma; the imaginary part gives back only the closing ')'
_COMPLEX_TOKEN = re.compile(r"\(\s*+([^\s,]++)\s*+,\s*+([^\s,]+)\s*+\)", re.ASCII)
_ELEMENT = re.compile(r"[a-z]++\d*+(?:E\d++M\d++(?:FN)?+)?+", re.ASCII)  # f8E4M3FN
_FROM_SHORT = {v: k for k, v in SHORT_NAME.items()}
_TOKEN = re.compile(r"[^\s,(){}\[\]<>:=%@\"]++", re.ASCII)  # an offending token, for messages
_MAX_ARRAY_RANK = 64  # numpy's limit
_MAX_MESSAGE = 1000  # characters of an error message


class _Dense:
    """Raw `dense<...>` contents: one splat token or a rectangular list of tokens."""

    def __init__(self, tokens: list[str], shape: tuple[int, ...] | None, pos: int) -> None:
        self.tokens, self.shape, self.pos = tokens, shape, pos


def clip(token: str, limit: int = 40) -> str:
    """``repr(token)``, shortened for an error message (a token may be megabytes long)."""
    if len(token) <= limit:
        return repr(token)
    return f"{token[:limit]!r}... ({len(token):,} characters)"


class Scanner:
    """A position in one text, the lexical rules read from it and its allocation budget.

    ``max_bytes`` bounds the bytes of tensor data the text may make the parser allocate, in
    total (None: no bound); :meth:`allocate` charges it before anything is allocated.
    """

    def __init__(self, text: str, max_bytes: int | None = DEFAULT_MAX_BYTES) -> None:
        if max_bytes is not None and (isinstance(max_bytes, bool)
                                      or not isinstance(max_bytes, int | np.integer)
                                      or max_bytes < 0):
            raise TypeError(f"max_bytes must be a non-negative int or None, got {max_bytes!r}")
        self.text = text
        self.pos = 0
        self.depth = 0
        self.max_bytes = max_bytes
        self.allocated = 0

    def allocate(self, nbytes: int, what: str, pos: int) -> None:
        """Charge ``nbytes`` of ``what`` to the budget; ParseError at ``pos`` past the limit."""
        if self.max_bytes is not None and self.allocated + nbytes > self.max_bytes:
            before = f" after {self.allocated:,} bytes of earlier data" if self.allocated else ""
            raise self.error(
                f"{what} needs {nbytes:,} bytes{before}, over this parse's limit of "
                f"max_bytes={self.max_bytes:,}; if you trust this text, raise the limit with "
                "parse(text, max_bytes=...) or load(path, max_bytes=...) "
                "(None: no limit)", pos)
        self.allocated += nbytes

    # -- scanning -------------------------------------------------------------------------
    def error(self, message: str, pos: int | None = None) -> ParseError:
        if len(message) > _MAX_MESSAGE:  # it quotes a name from the text: keep both ends
            message = (f"{message[:_MAX_MESSAGE // 2]} [... {len(message):,} characters "
                       f"in all ...] {message[-_MAX_MESSAGE // 4:]}")
        pos = self.pos if pos is None else pos
        line = self.text.count("\n", 0, pos) + 1
        column = pos - (self.text.rfind("\n", 0, pos) + 1) + 1
        return ParseError(message, line, column)

    def found(self) -> str:
        self.skip()
        if self.pos >= len(self.text):
            return "end of text"
        m = (_IDENT.match(self.text, self.pos) or NUMBER.match(self.text, self.pos)
             or _TOKEN.match(self.text, self.pos))
        return clip(m.group() if m else self.text[self.pos])

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

    def integer(self, regex: re.Pattern[str] = SIGNED_INT) -> int:
        self.skip()
        start = self.pos
        m = self.match(regex)
        if m is None:
            raise self.error(f"expected an integer, found {self.found()}")
        if len(m.group()) > 40:
            raise self.error(f"integer {clip(m.group())} is too large", start)
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

    def materialize(self, raw: _Dense, t: TensorType, what: str, *,
                    running_copy: bool = False) -> np.ndarray:
        """The array of dense data ``raw`` typed ``t``, charged to the budget as ``what``.

        A splat of more than ``INLINE_LIMIT`` elements becomes a read-only broadcast view of
        its one element, so it allocates nothing; any other data is allocated in full.
        ``running_copy`` also charges the full copy the caller will make (a state's current
        value, which ``reset_state`` copies from the initial one).
        """
        shape = t.static_shape
        if shape is None:
            raise self.error(f"dense data needs a static type, got {format_type(t)}", raw.pos)
        if len(shape) > _MAX_ARRAY_RANK:
            raise self.error(f"dense data of rank {len(shape)}: numpy arrays have at most "
                             f"{_MAX_ARRAY_RANK} dimensions", raw.pos)
        numel = math.prod(shape)
        nbytes = numel * t.element_type.numpy.itemsize
        view = raw.shape is None and numel > INLINE_LIMIT
        if raw.shape is not None and raw.shape != t.shape and not (numel == 0 and not raw.tokens):
            raise self.error(f"dense data of shape {list(raw.shape)} does not match "
                             f"{format_type(t)}", raw.pos)
        self.allocate((0 if view else nbytes) + (nbytes if running_copy else 0), what, raw.pos)
        if raw.shape is None:
            # the element's exact bits (NaN payloads included) are kept by broadcasting
            one = self.elements(raw, t.element_type).reshape(())
            splat = np.broadcast_to(one, shape)
            return splat if view else splat.copy()
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
                            if len(s) > 40 or not SIGNED_INT.fullmatch(s)), None)
                if bad is None:
                    return np.array([int(s) for s in toks], dtype=dtype.numpy)
            elif dtype.is_complex:
                return self.complex_elements(raw, dtype)
            else:
                return self.float_elements(raw, dtype)
        except OverflowError:
            raise self.error(f"a dense element is out of range for {dtype}", raw.pos) from None
        raise self.error(f"bad {dtype} element {clip(toks[bad])} in dense data", raw.pos)

    def complex_elements(self, raw: _Dense, dtype: DType) -> np.ndarray:
        """``(real, imag)`` pairs; each part is read like a float of the part's width."""
        parts: list[str] = []
        for s in raw.tokens:
            m = _COMPLEX_TOKEN.fullmatch(s)
            if m is None:
                raise self.error(f"bad {dtype} element {clip(s)} in dense data; expected "
                                 "(real, imag)", raw.pos)
            parts += m.groups()
        pairs = self.float_elements(_Dense(parts, None, raw.pos), dtype.real_dtype)
        return pairs.view(dtype.numpy).reshape(len(raw.tokens))

    def float_elements(self, raw: _Dense, dtype: DType) -> np.ndarray:
        values: list[float] = []
        patches: list[tuple[int, int]] = []
        for i, s in enumerate(raw.tokens):
            if len(s) < 400 and _FLOAT_TOKEN.fullmatch(s):
                values.append(float(s))
            elif s == "nan":
                values.append(math.nan)
            elif (m := _NAN_BITS.fullmatch(s)) is not None:
                values.append(math.nan)
                patches.append((i, int(m.group(1), 16)))
            else:
                raise self.error(f"bad {dtype} element {clip(s)} in dense data", raw.pos)
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
