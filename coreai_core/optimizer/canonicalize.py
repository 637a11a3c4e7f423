"""Canonicalization: local rewrite rules, kept as data indexed by op name.

:data:`RULES` is the registry of rules, by rule name; each :class:`RewriteRule` names the ops
it is tried on, and :func:`rules_by_op` indexes them by op name, in registration order. A
rule is a function ``rule(op, rw)`` returning the value(s) replacing the op's results, or None
when it does not apply; it may build new ops with ``rw.replacement`` / ``rw.constant``. Each
rule states its rewrite in a ``# before -> after`` line and its assumptions in its docstring.
Rules never change a value's type and are exact, except ``x + 0 -> x``, which turns
``-0.0 + 0.0 = +0.0`` into ``-0.0`` (equal as numbers).

What every rule assumes, checked through the :class:`~coreai_core.optimizer.Rewriter` queries:

- An op a rule reads through (the inner reshape of a reshape chain, ...) comes from
  :meth:`~coreai_core.optimizer.Rewriter.producer`: it has the expected name and a single result.
  Such an op may have other readers; the rule builds a new op from its operands and leaves it to
  them, so a rule never needs a single use and never copies anything but a cheap shape or cast op.
- A rule returning an existing value (``x * 1 -> x``) checks that the value has the op's
  type (no broadcast, no dtype change); a rule building an op uses ``rw.replacement``, which
  checks the new op's inferred type.
- Constant operands are read with ``rw.const`` (None when not a bound constant).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import attrs
import ml_dtypes
import numpy as np

from coreai_core._dtypes import DType
from coreai_core._ir import Operation, Value
from coreai_core._shapes import lo_hi_pads
from coreai_core.optimizer._context import PassContext
from coreai_core.optimizer._predicates import at_most_one_dynamic
from coreai_core.optimizer._rewriter import RewritePass, Rewriter
from coreai_core.registry import Registry

Rule = Callable[[Operation, Rewriter], "Value | Sequence[Value] | None"]


@attrs.frozen
class RewriteRule:
    """A rewrite rule and the names of the ops it is tried on."""

    fn: Rule
    ops: tuple[str, ...]


#: The built-in rewrite rules, by rule name, frozen once they are all defined. A second rule
#: of the same name is an error naming both. A pass with extra rules takes a registry whose
#: parent is this one, ``CanonicalizePass(rules=...)``.
RULES: Registry[RewriteRule] = Registry("rewrite rule", "canonicalize", callable_entries=False)


def rule(*op_names: str) -> Callable[[Rule], Rule]:
    """Register the decorated rule in ``RULES``, under its name, for each of ``op_names``."""
    if not op_names:
        raise TypeError("@rule needs the names of the ops the rule is tried on")

    def add(fn: Rule) -> Rule:
        RULES.register(fn.__name__, RewriteRule(fn, op_names))
        return fn

    return add


def rules_by_op(rules: Registry[RewriteRule]) -> dict[str, tuple[Rule, ...]]:
    """Op name -> the rules tried on it, in registration order (the parent's first)."""
    by_op: dict[str, list[Rule]] = {}
    for entry in rules.values():
        for name in entry.ops:
            by_op.setdefault(name, []).append(entry.fn)
    return {name: tuple(fns) for name, fns in by_op.items()}


def _all_equal(rw: Rewriter, v: Value, scalar: float) -> bool:
    data = rw.const(v)
    return data is not None and data.size > 0 and bool(np.all(data == scalar))


# -- shape-only ops ----------------------------------------------------------------------------

SHAPE_ONLY = ("coreai.reshape", "coreai.expand_dims", "coreai.shrink_dims")


@rule(*SHAPE_ONLY)
def identity_reshape(op: Operation, rw: Rewriter) -> Value | None:
    """Assumes the result type equals ``x``'s with at most one dynamic dim (so the element
    count fixes the shape)."""
    # reshape(x : T, s) : T -> x   (also expand_dims/shrink_dims with no axes)
    x = op.operands[0]
    if op.result.type == x.type and at_most_one_dynamic(x.type):
        return x
    return None


@rule(*SHAPE_ONLY)
def reshape_of_reshape(op: Operation, rw: Rewriter) -> Value | Sequence[Value] | None:
    """Reads through the inner shape op (kept for its other readers); a new reshape must
    infer the op's type."""
    # reshape(reshape(x, s1), s2) -> reshape(x, s2); a chain back to x's type -> x
    inner = rw.producer(op.operands[0], *SHAPE_ONLY)
    if inner is None:
        return None
    x = inner.operands[0]
    if op.result.type == x.type and at_most_one_dynamic(x.type):
        return x
    if op.name != "coreai.reshape":
        return None
    return rw.replacement(op, "coreai.reshape", [x, op.operands[1]], dict(op.attributes))


# -- transpose ---------------------------------------------------------------------------------

@rule("coreai.transpose")
def identity_transpose(op: Operation, rw: Rewriter) -> Value | None:
    """Assumes nothing beyond the identity permutation."""
    # transpose(x, [0, 1, ..., n-1]) -> x
    if list(op.attributes["perm"]) == list(range(len(op.attributes["perm"]))):
        return op.operands[0]
    return None


@rule("coreai.transpose")
def transpose_of_transpose(op: Operation, rw: Rewriter) -> Value | Sequence[Value] | None:
    """Reads through the inner transpose (kept for its other readers)."""
    # transpose(transpose(x, p), q) -> transpose(x, [p[i] for i in q])
    inner = rw.producer(op.operands[0], "coreai.transpose")
    if inner is None:
        return None
    p, q = inner.attributes["perm"], op.attributes["perm"]
    perm = tuple(p[i] for i in q)
    x = inner.operands[0]
    if perm == tuple(range(len(perm))):
        return x
    return rw.replacement(op, "coreai.transpose", [x], {"perm": perm})


# -- casts -------------------------------------------------------------------------------------

# Significand bits (with the implicit one) and exponent bits of the float types.
_MANTISSA = {DType.float16: 11, DType.bfloat16: 8, DType.float32: 24, DType.float64: 53,
             DType.float4_e2m1fn: 2, DType.float8_e4m3fn: 4, DType.float8_e5m2: 3}
_EXPONENT = {DType.float16: 5, DType.bfloat16: 8, DType.float32: 8, DType.float64: 11,
             DType.float4_e2m1fn: 2, DType.float8_e4m3fn: 4, DType.float8_e5m2: 5}


def _int_range(d: DType) -> tuple[int, int]:
    info = ml_dtypes.iinfo(d.numpy)  # numpy's iinfo does not know int4/uint4
    return int(info.min), int(info.max)


def exact_cast(src: DType, dst: DType) -> bool:
    """True when every ``src`` value converts to ``dst`` and back unchanged."""
    if src == dst or src is DType.bool:
        return True
    if dst is DType.bool:
        return False
    if src.is_complex or dst.is_complex:
        # a complex value survives only a complex round trip; a real one its parts' type
        return dst.is_complex and exact_cast(src.real_dtype, dst.real_dtype)
    if src.is_float:
        if not dst.is_float:
            return False
        # wider mantissa and exponent range: f16/bf16 -> f32 -> f64
        return _MANTISSA[dst] >= _MANTISSA[src] and _EXPONENT[dst] >= _EXPONENT[src]
    lo, hi = _int_range(src)
    if dst.is_float:
        return max(hi, -lo).bit_length() <= _MANTISSA[dst]
    dlo, dhi = _int_range(dst)
    return dlo <= lo and hi <= dhi


@rule("coreai.cast")
def identity_cast(op: Operation, rw: Rewriter) -> Value | None:
    """Assumes the cast's result type is ``x``'s type."""
    # cast(x : T, T) -> x
    x = op.operands[0]
    return x if x.type == op.result.type else None


@rule("coreai.cast")
def exact_cast_chain(op: Operation, rw: Rewriter) -> Value | None:
    """Reads through the inner cast; assumes :func:`exact_cast` of ``x``'s dtype to the
    inner one (every value survives the round trip)."""
    # cast(cast(x : T, U), T) -> x   when U holds every value of T (f32 -> f64 -> f32)
    inner = rw.producer(op.operands[0], "coreai.cast")
    if inner is None:
        return None
    x = inner.operands[0]
    if x.type == op.result.type and exact_cast(x.type.element_type,
                                                inner.result.type.element_type):
        return x
    return None


# -- broadcast_to, slicing, padding ------------------------------------------------------------

@rule("coreai.broadcast_to")
def identity_broadcast(op: Operation, rw: Rewriter) -> Value | None:
    """Assumes a static type equal to ``x``'s (a dynamic one could hide a real broadcast)."""
    # broadcast_to(x : T, s) : T -> x   (static T)
    x = op.operands[0]
    return x if x.type == op.result.type and x.type.is_static else None


@rule("coreai.broadcast_to")
def broadcast_of_broadcast(op: Operation, rw: Rewriter) -> Sequence[Value] | None:
    """Reads through the inner broadcast; the new one must infer the op's type."""
    # broadcast_to(broadcast_to(x, s1), s2) -> broadcast_to(x, s2)
    inner = rw.producer(op.operands[0], "coreai.broadcast_to")
    if inner is None:
        return None
    return rw.replacement(op, "coreai.broadcast_to", [inner.operands[0], op.operands[1]], {})


@rule("coreai.slice")
def identity_slice(op: Operation, rw: Rewriter) -> Value | None:
    """Assumes a static type equal to ``x``'s and positive strides."""
    # slice(x : T, ...) : T -> x   (static T, positive strides: the whole tensor in order)
    x = op.operands[0]
    if x.type == op.result.type and x.type.is_static and \
            all(s > 0 for s in op.attributes["strides"]):
        return x
    return None


@rule("coreai.pad")
def identity_pad(op: Operation, rw: Rewriter) -> Value | None:
    """Assumes every pad amount is zero (any mode)."""
    # pad(x, [0, 0, ...]) -> x
    return op.operands[0] if not any(op.attributes["pads"]) else None


@rule("coreai.conv")
def pad_into_conv(op: Operation, rw: Rewriter) -> Sequence[Value] | None:
    """Reads through the inner ``pad`` (kept for its other readers). Assumes a constant pad
    of +0.0 (the value conv pads with), of the spatial axes only, by non-negative amounts.
    Exact up to the sign of a zero result: a window of +0.0 padding and -0.0 inputs sums
    the same terms either way."""
    # conv(pad(x, [0, 0, 0, 0, a, b, ...], 'constant', 0.0), w, pads=q)
    #   -> conv(x, w, pads=q + [a, b, ...])
    inner = rw.producer(op.operands[0], "coreai.pad")
    if inner is None or inner.attributes.get("mode", "constant") != "constant":
        return None
    value = float(inner.attributes.get("value", 0.0))
    amounts = list(inner.attributes["pads"])
    if value != 0.0 or math.copysign(1.0, value) < 0 or any(amounts[:4]) or min(amounts) < 0:
        return None
    spatial = len(amounts) // 2 - 2
    own = lo_hi_pads(op.attributes.get("pads"), spatial)
    pads = tuple(a + b for a, b in zip(own, amounts[4:], strict=True))
    return rw.replacement(op, "coreai.conv", [inner.operands[0], *op.operands[1:]],
                          {**op.attributes, "pads": pads})


@rule("coreai.tile")
def identity_tile(op: Operation, rw: Rewriter) -> Value | None:
    """Assumes every repetition count is one."""
    # tile(x, [1, 1, ...]) -> x
    return op.operands[0] if all(r == 1 for r in op.attributes["reps"]) else None


@rule("coreai.concat")
def single_concat(op: Operation, rw: Rewriter) -> Value | None:
    """Assumes a single operand (its type is the result's)."""
    # concat([x], axis) -> x
    return op.operands[0] if len(op.operands) == 1 else None


@rule("coreai.reverse")
def identity_reverse(op: Operation, rw: Rewriter) -> Value | None:
    """Assumes every reversed axis exists and has static size 1."""
    # reverse(x, axes) -> x   when every reversed axis has size 1
    x = op.operands[0]
    rank = x.type.rank
    if all(-rank <= a < rank and x.type.shape[a] == 1 for a in op.attributes["axes"]):
        return x
    return None


@rule("coreai.get_shape")
def static_shape(op: Operation, rw: Rewriter) -> Value | None:
    """Assumes a static ``x`` (the constant is int64, get_shape's result type)."""
    # get_shape(x : static T) -> constant(T.shape)
    x = op.operands[0]
    if not x.type.is_static:
        return None
    return rw.constant(np.array(x.type.shape, dtype=np.int64), "shape", op.location)


# -- arithmetic identities ---------------------------------------------------------------------

def _keeps(op: Operation, x: Value) -> bool:
    """``op``'s result has ``x``'s type: the other operand neither broadcasts nor casts it."""
    return op.result.type == x.type


@rule("coreai.mul", "coreai.broadcasting_mul")
def mul_one(op: Operation, rw: Rewriter) -> Value | None:
    """Assumes the ones neither broadcast nor cast ``x`` and ``x`` is not complex
    (``(inf+0j) * (1+0j)`` is ``inf+nanj``)."""
    # x * 1 -> x ; 1 * x -> x
    if op.result.type.element_type.is_complex:
        return None
    a, b = op.operands
    for x, one in ((a, b), (b, a)):
        if _keeps(op, x) and _all_equal(rw, one, 1):
            return x
    return None


@rule("coreai.add", "coreai.broadcasting_add")
def add_zero(op: Operation, rw: Rewriter) -> Value | None:
    """Assumes the zeros neither broadcast nor cast ``x``."""
    # x + 0 -> x ; 0 + x -> x
    a, b = op.operands
    for x, zero in ((a, b), (b, a)):
        if _keeps(op, x) and _all_equal(rw, zero, 0):
            return x
    return None


@rule("coreai.sub", "coreai.broadcasting_sub")
def sub_zero(op: Operation, rw: Rewriter) -> Value | None:
    """Assumes the zeros neither broadcast nor cast ``x``."""
    # x - 0 -> x
    x, zero = op.operands
    return x if _keeps(op, x) and _all_equal(rw, zero, 0) else None


@rule("coreai.divide", "coreai.broadcasting_divide")
def divide_one(op: Operation, rw: Rewriter) -> Value | None:
    """Assumes the ones neither broadcast nor cast ``x`` and ``x`` is not complex (a
    complex division by ``1+0j`` turns infinite parts into NaN)."""
    # x / 1 -> x
    if op.result.type.element_type.is_complex:
        return None
    x, one = op.operands
    return x if _keeps(op, x) and _all_equal(rw, one, 1) else None


@rule("coreai.neg", "coreai.not", "coreai.bitwise_not")
def involution(op: Operation, rw: Rewriter) -> Value | None:
    """Reads through the inner op (same name, a single result); exact for every dtype
    (integer negation wraps both ways)."""
    # neg(neg(x)) -> x ; not(not(x)) -> x ; bitwise_not(bitwise_not(x)) -> x
    inner = rw.producer(op.operands[0], op.name)
    return inner.operands[0] if inner is not None else None


@rule("coreai.broadcasting_where")
def where_same(op: Operation, rw: Rewriter) -> Value | None:
    """Assumes both branches are one value whose type the condition does not broadcast."""
    # where(c, x, x) -> x   (when c does not broadcast x)
    _, a, b = op.operands
    return a if a is b and _keeps(op, a) else None


RULES.freeze()  # every built-in rule is defined above


class CanonicalizePass(RewritePass):
    """Apply :data:`~coreai_core.optimizer.canonicalize.RULES` (or ``rules``) to every op; the
    first rule that matches wins."""

    name = "canonicalize"

    def __init__(self, rules: Registry[RewriteRule] | None = None) -> None:
        self.rules = RULES if rules is None else rules
        self._index()

    def _index(self) -> None:
        # the op-name index is what visit reads, rebuilt only when the registry changes
        self._generation = self.rules.generation
        self._by_op = rules_by_op(self.rules)

    def begin(self, ctx: PassContext) -> None:
        if self.rules.generation != self._generation:
            self._index()

    def visit(self, op: Operation, rw: Rewriter) -> Value | Sequence[Value] | None:
        for fn in self._by_op.get(op.name, ()):
            new = fn(op, rw)
            if new is not None:
                return new
        return None
