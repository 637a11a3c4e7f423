"""Op definitions: one decorated type-rule function per op.

The rule's signature *is* the builder's signature. Parameters annotated ``Value`` (or
``Value | None``, or ``Sequence[Value]``) are operands; ``Graph`` parameters are regions; every
other parameter is an attribute whose annotation says how to normalize it (``Ints``,
``Floats``, ``int``, ``float``, ``bool``, ``str``, ``DType``, ``Literal[...]``, ``Array``).
A numeric attribute may carry its accepted range as ``Annotated`` metadata,
``strides: Annotated[Ints | None, Range(lo=1)]``: every path that makes an op (builder,
parser, passes through ``build_operation``, verifier) checks it before the type rule runs, so
a rule never sees a stride of 0. The builder, the verifier, the printer and the parser all read
this definition.

Typing: a builder accepts more than its rule receives (a Python number or array where the rule
takes a Value, a list where it takes ``Ints``, a dtype name where it takes ``DType``) and adds
``loc``. Python cannot derive such a signature from the rule's, so :func:`defop` is typed to
return a :class:`Builder` whose result type follows the rule's return annotation, and the exact
builder signatures a type checker sees for ``coreai_core.dialects.coreai`` are generated from
the op definitions into ``coreai.pyi`` (``tools/gen_dialect_stub.py``, kept in sync by a test),
with the caller-facing types below (``ValueLike``, ``IntsLike``, ...).
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal, Protocol, TypeAlias, TypeVar, cast, overload

import attrs
import numpy as np

from coreai_core._builder import (
    INLINE_LIMIT,
    current,
    current_program,
    default_dtype_of,
    insertion_point,
)
from coreai_core._dtypes import DType
from coreai_core._ir import Graph, Location, Operation, TensorType, Value, WeightRef
from coreai_core.errors import TypeRuleError
from coreai_core.registry import Registry, describe_entry

Ints = tuple[int, ...]
Floats = tuple[float, ...]
Array: TypeAlias = np.ndarray | WeightRef  # attribute: numpy data, or a program weight by name

# What builders accept (the rule receives the normalized form).
ValueLike: TypeAlias = Value | bool | int | float | np.ndarray | np.generic | Sequence[Any]
IntsLike: TypeAlias = Sequence[int] | int | np.ndarray | Value
FloatsLike: TypeAlias = Sequence[float] | float | np.ndarray | Value
DTypeLike: TypeAlias = DType | str | np.dtype[Any] | type  # a torch dtype is accepted too
ArrayLike: TypeAlias = np.ndarray | np.generic | WeightRef | bool | int | float | Sequence[Any]
RegionLike: TypeAlias = Graph | Callable[..., Any]

R_co = TypeVar("R_co", covariant=True)


class Builder(Protocol[R_co]):
    """What :func:`defop` returns: calling it (inside an insertion context) appends the op to
    the current graph and returns its result Value, or a tuple of Values for a multi-result op.
    ``loc`` overrides the context's location."""

    opdef: OpDef

    def __call__(self, *args: Any, loc: Location | None = None, **kwargs: Any) -> R_co: ...


class _Define(Protocol):
    @overload
    def __call__(self, rule: Callable[..., TensorType]) -> Builder[Value]: ...
    @overload
    def __call__(self, rule: Callable[..., tuple[TensorType, TensorType]],
                 ) -> Builder[tuple[Value, Value]]: ...
    @overload
    def __call__(self, rule: Callable[..., Sequence[TensorType]],
                 ) -> Builder[tuple[Value, ...]]: ...


def _describe(opdef: OpDef) -> str:
    return describe_entry(opdef.rule)


# Every op definition by name: the dialect's (registered when coreai_core.dialects is
# imported) and any a user defines with @defop.
OPS: Registry[OpDef] = Registry("op definition", "the op definitions", callable_entries=False,
                                describe=_describe)


# The traits an op definition may carry, and what each one tells the code reading it. A trait
# outside this list is rejected by :func:`defop`: a misspelt "heavy" would silently let a
# rewrite copy a convolution.
TRAITS: dict[str, str] = {
    "elementwise": "each result element depends on the operand elements at its index only",
    "unary": "an elementwise op of one operand (the docs probe these with complex operands)",
    "binary": "an elementwise op of two operands",
    "commutative": "the two operands may be swapped (CSE merges ``a + b`` with ``b + a``)",
    "reduction": "reduces its operand over axes (``keep_dims`` keeps them, as size 1)",
    "multi_result": "the builder returns a tuple of Values, even of one result",
    "control": "control flow (regions or a callee): never constant-folded",
    "decompression": "expands compressed weights: never constant-folded (the folded data "
                     "would take the space the compression saved)",
    "random": "results differ between runs: never folded or merged, removed when dead",
    "heavy": "costs a contraction, a factorization or a transform: a rewrite may replace one "
             "but never leave two where there was one",
    "impure": "has an effect beyond its results: never folded, merged or deleted",
    "side_effects": "the same as ``impure`` (the name other IRs use)",
}


@attrs.frozen
class Range:
    """The accepted values of a numeric attribute (each entry of an ``Ints``/``Floats`` one):
    ``lo <= x <= hi`` (a None bound is open) and ``x != 0`` when ``nonzero``. Declared as
    ``Annotated`` metadata on the type rule's parameter."""

    lo: float | None = None
    hi: float | None = None
    nonzero: bool = False

    def admits(self, x: float) -> bool:
        return ((self.lo is None or x >= self.lo) and (self.hi is None or x <= self.hi)
                and not (self.nonzero and x == 0))

    def __str__(self) -> str:
        parts = [f">= {self.lo}" if self.lo is not None else "",
                 f"<= {self.hi}" if self.hi is not None else "", "!= 0" if self.nonzero else ""]
        return " and ".join(p for p in parts if p)


@attrs.frozen
class Param:
    name: str
    role: str  # "operand", "optional", "variadic", "region", "attr"
    kind: str = ""  # attribute kind: int float bool str dtype ints floats array choice
    optional: bool = False  # attribute may be None
    choices: tuple[str, ...] = ()
    default: Any = inspect.Parameter.empty
    range: Range | None = None  # accepted values of an int/ints/float/floats attribute

    @property
    def has_default(self) -> bool:
        return self.default is not inspect.Parameter.empty


@attrs.frozen
class OpDef:
    """The single definition of a dialect op."""

    name: str
    rule: Callable[..., Any]
    params: tuple[Param, ...]
    traits: frozenset[str]
    signature: inspect.Signature
    doc: str

    operands: tuple[Param, ...] = attrs.field(init=False)
    attributes: tuple[Param, ...] = attrs.field(init=False)
    builder: Builder[Any] = attrs.field(init=False, eq=False, repr=False)
    """The op's builder function (what :func:`defop` returns)."""

    def __attrs_post_init__(self) -> None:
        # derived once: builders read them on every call
        object.__setattr__(self, "operands", tuple(
            p for p in self.params if p.role in ("operand", "optional", "variadic")))
        object.__setattr__(self, "attributes", tuple(
            p for p in self.params if p.role in ("attr", "region")))
        object.__setattr__(self, "builder", _make_builder(self))

    def split_operands(self, values: Sequence[Value]) -> dict[str, Any]:
        """Map a flat operand list back to the rule's operand parameters."""
        specs = self.operands
        fixed = sum(1 for p in specs if p.role == "operand")
        extra = len(values) - fixed
        if extra < 0 or (extra and not any(p.role != "operand" for p in specs)):
            raise TypeRuleError(f"expected {fixed} operands, got {len(values)}", op=self.name)
        out: dict[str, Any] = {}
        i = 0
        for p in specs:
            if p.role == "operand":
                out[p.name] = values[i]
                i += 1
            elif p.role == "optional":
                if extra > 1:
                    raise TypeRuleError(f"too many operands ({len(values)})", op=self.name)
                out[p.name] = values[i] if extra else None
                i += extra
            else:
                out[p.name] = list(values[i:i + extra])
                i += extra
        return out

    def infer(self, operands: dict[str, Any], attributes: dict[str, Any]) -> list[TensorType]:
        """Check the attributes' ranges, run the type rule; always returns the list of result
        types."""
        self.check_attributes(attributes)
        result = self.rule(**operands, **attributes)
        if isinstance(result, TensorType):
            return [result]
        return list(result)

    def check_attributes(self, attributes: dict[str, Any]) -> None:
        """Raise TypeRuleError if a normalized attribute lies outside its declared range."""
        for p in self.attributes:
            if p.range is not None and p.name in attributes:
                check_range(p, attributes[p.name], self.name)

    def signature_text(self) -> str:
        """``name(operands, attrs) -> results`` as documented in docs/dialect.md."""
        parts = []
        for p in self.params:
            if p.role == "operand":
                parts.append(p.name)
            elif p.role == "optional":
                parts.append(f"{p.name}?")
            elif p.role == "variadic":
                parts.append(f"*{p.name}")
            else:
                t = "|".join(repr(c) for c in p.choices) if p.kind == "choice" else p.kind
                t = t or "graph"  # regions have no attribute kind
                default = f" = {p.default!r}" if p.has_default else ""
                accepted = f" ({'each ' if p.kind in ('ints', 'floats') else ''}{p.range})" \
                    if p.range is not None else ""
                parts.append(f"{p.name}: {t}{'?' if p.optional else ''}{accepted}{default}")
        return f"{self.name}({', '.join(parts)})"


def _classify(name: str, hint: Any, default: Any) -> Param:
    accepted = None
    if typing.get_origin(hint) is Annotated:
        ranges = [m for m in hint.__metadata__ if isinstance(m, Range)]
        if len(ranges) != 1 or len(hint.__metadata__) != 1:
            raise TypeError(f"parameter {name!r}: Annotated takes exactly one Range")
        accepted, hint = ranges[0], hint.__origin__
    param = _classify_plain(name, hint, default)
    if accepted is None:
        return param
    if param.kind not in ("int", "ints", "float", "floats"):
        raise TypeError(f"parameter {name!r}: a Range applies to numeric attributes only")
    return attrs.evolve(param, range=accepted)


def _classify_plain(name: str, hint: Any, default: Any) -> Param:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    optional = False
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        optional = True
        rest = [a for a in args if a is not type(None)]
        hint = rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]  # noqa: UP007
        origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Value:
        return Param(name, "optional" if optional else "operand", default=default)
    if origin in (list, Sequence, typing.Sequence) and args == (Value,):
        return Param(name, "variadic", default=default)
    if hint is Graph:
        return Param(name, "region", optional=optional, default=default)
    if origin is Literal:
        return Param(name, "attr", "choice", optional, tuple(args), default)
    kinds = {int: "int", float: "float", bool: "bool", str: "str", DType: "dtype",
             Ints: "ints", Floats: "floats", Array: "array"}
    kind = kinds.get(hint)
    if kind is None:
        raise TypeError(f"parameter {name!r}: unsupported annotation {hint!r}")
    return Param(name, "attr", kind, optional, (), default)


def defop(name: str | None = None, *, traits: Sequence[str] = ()) -> _Define:
    """Declare an op from its type rule; returns the op's builder function."""

    def wrap(rule: Callable[..., Any]) -> Builder[Any]:
        op_name = name or "coreai." + rule.__name__.rstrip("_")
        unknown = sorted(set(traits) - TRAITS.keys())
        if unknown:
            raise ValueError(f"op {op_name!r} ({describe_entry(rule)}): unknown trait(s) "
                             f"{unknown}; the known traits are {sorted(TRAITS)}, each described "
                             "in coreai_core._opdef.TRAITS")
        existing = OPS.get(op_name)
        if existing is not None:
            raise ValueError(f"op {op_name!r} is already defined by "
                             f"{describe_entry(existing.rule)}")
        hints = typing.get_type_hints(rule, include_extras=True)
        sig = inspect.signature(rule)
        params = tuple(_classify(p.name, hints[p.name], p.default) for p in sig.parameters.values())
        opdef = OpDef(op_name, rule, params, frozenset(traits), sig,
                      inspect.cleandoc(rule.__doc__ or ""))
        OPS.register(op_name, opdef)
        return opdef.builder

    return cast(_Define, wrap)


def builder_names(module: str) -> list[str]:
    """The public builders of the ops whose type rules ``module`` defines, in definition order.

    A dialect family module starts its ``__all__`` from this, so a new op is exported by its
    definition alone. A builder named with a leading ``_`` is not listed: its public face is a
    wrapper the family names itself (``constant`` over ``_constant``).
    """
    return [d.rule.__name__ for d in OPS.values()
            if d.rule.__module__ == module and not d.rule.__name__.startswith("_")]


# -- attribute normalization ---------------------------------------------------------------------

def constant_data(v: Value) -> np.ndarray | None:
    """The data of a Value produced by ``coreai.constant``, or None for any other Value."""
    op = v.owner
    if op is None or op.name != "coreai.constant":
        return None
    data = op.attributes["value"]
    if isinstance(data, WeightRef):
        prog = current_program()
        return None if prog is None else prog.weights.get(data.name)
    return data


def _scalar_list(value: Any, p: Param, op: str) -> list[Any]:
    if isinstance(value, Value):
        data = constant_data(value)
        if data is None:
            raise TypeRuleError(f"attribute {p.name!r} needs a compile-time constant, "
                                f"got a computed value {value!r}", op=op)
        value = data
    if isinstance(value, np.ndarray):
        return value.reshape(-1).tolist() if p.kind in ("ints", "floats") else [value.item()]
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def normalize_attr(p: Param, value: Any, op: str) -> Any:
    """Bring a user-supplied attribute value to its canonical form, validating it."""
    if value is None:
        if p.optional:
            return None
        raise TypeRuleError(f"attribute {p.name!r} is required", op=op)
    try:
        if p.kind == "array":
            if isinstance(value, WeightRef):
                return value
            return np.asarray(value)
        if p.kind == "dtype":
            return DType.of(value)
        if p.kind == "str":
            if not isinstance(value, str):
                raise TypeError
            return value
        if p.kind == "choice":
            if value not in p.choices:
                raise TypeRuleError(f"attribute {p.name!r} must be one of {list(p.choices)}, "
                                    f"got {value!r}", op=op)
            return value
        items = _scalar_list(value, p, op)
        out: list[Any]
        if p.kind in ("ints", "int"):
            out = []
            for x in items:
                if isinstance(x, (bool, np.bool_)) or int(x) != x:
                    raise TypeError
                out.append(int(x))
        elif p.kind in ("floats", "float"):
            out = [float(x) for x in items]
        elif p.kind == "bool":
            # an empty list would make items[0] raise IndexError, which callers do not expect
            if len(items) != 1 or not isinstance(items[0], (bool, np.bool_, int, np.integer)) \
                    or items[0] not in (0, 1):
                raise TypeError
            out = [bool(items[0])]
        else:  # pragma: no cover - _classify admits no other kind
            raise AssertionError(p.kind)
        if p.kind not in ("ints", "floats") and len(out) != 1:
            raise TypeError
        result = tuple(out) if p.kind in ("ints", "floats") else out[0]
        if p.range is not None:
            check_range(p, result, op)
        return result
    except (TypeError, ValueError, OverflowError) as e:
        if isinstance(e, TypeRuleError):
            raise
        raise TypeRuleError(f"attribute {p.name!r} expects {p.kind}, got {value!r}",
                            op=op) from None


def check_range(p: Param, value: Any, op: str) -> None:
    """Raise TypeRuleError naming ``op``, the attribute and its range if ``value`` (normalized;
    None for an absent optional attribute) has an entry outside ``p.range``."""
    if p.range is None or value is None:
        return
    items = value if isinstance(value, tuple) else (value,)
    if not all(p.range.admits(x) for x in items):
        must = "must have every entry" if isinstance(value, tuple) else "must be"
        shown = list(value) if isinstance(value, tuple) else value
        raise TypeRuleError(f"attribute {p.name!r} {must} {p.range}, got {shown}", op=op)


# -- builders ------------------------------------------------------------------------------------

def _peer_dtype(values: list[Any]) -> DType | None:
    vals = [v for v in values if isinstance(v, Value)]
    non_bool = [v for v in vals if v.type.element_type is not DType.bool]
    chosen = (non_bool or vals)[:1]
    return chosen[0].type.element_type if chosen else None


def _scalar_dtype(value: Any, peer: DType | None) -> DType | None:
    """Dtype for a Python number (or list of floats) used as an operand next to ``peer``.

    Scalars follow the tensor they meet, like PyTorch's wrapped numbers; integer lists keep
    their default int64 so that shapes and indices given as lists stay integers.
    """
    if isinstance(value, Value | np.ndarray | np.generic) or peer is None:
        return None
    kind = np.asarray(value).dtype.kind
    is_scalar = np.ndim(value) == 0
    if peer.is_float and (kind == "f" or (kind in "iu" and is_scalar)):
        return peer
    if peer.is_complex and (kind in "fc" or (kind in "iu" and is_scalar)):
        return peer
    if peer.is_int and kind in "iu" and is_scalar:
        return peer
    if peer is DType.bool and kind == "b":
        return peer
    return None


def _build_region(fn: Any, input_types: list[TensorType], op: str, pname: str) -> Graph:
    if isinstance(fn, Graph):
        return fn
    if not callable(fn):
        raise TypeRuleError(f"region {pname!r} must be a Graph or a callable", op=op)
    g = Graph(f"{op}.{pname}", program=current_program())
    args = [g.add_input(f"arg{i}", t) for i, t in enumerate(input_types)]
    with insertion_point(g):
        out = fn(*args)
        outs = [out] if isinstance(out, Value) or not isinstance(out, (list, tuple)) else out
        g.outputs([as_value(v) for v in outs])
    return g


def _binder(sig: inspect.Signature) -> Callable[[tuple, dict], dict[str, Any]]:
    """``inspect.Signature.bind`` + ``apply_defaults`` for plain parameters, without its
    overhead (builders run for every op a conversion creates)."""
    names = [p.name for p in sig.parameters.values()]
    if any(p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
           for p in sig.parameters.values()):
        raise TypeError(f"type rules take plain parameters, got {sig}")
    positional = [p.name for p in sig.parameters.values() if p.kind == p.POSITIONAL_OR_KEYWORD]
    defaults = {p.name: p.default for p in sig.parameters.values()
                if p.default is not inspect.Parameter.empty}

    def bind(args: tuple, kwargs: dict) -> dict[str, Any]:
        if len(args) > len(positional):
            raise TypeError(f"takes {len(positional)} positional arguments, got {len(args)}")
        raw = dict(zip(positional, args))
        for k, v in kwargs.items():
            if k in raw:
                raise TypeError(f"got multiple values for argument {k!r}")
            if k not in defaults and k not in names:
                raise TypeError(f"got an unexpected keyword argument {k!r}")
            raw[k] = v
        for n in names:
            if n not in raw:
                if n not in defaults:
                    raise TypeError(f"missing a required argument: {n!r}")
                raw[n] = defaults[n]
        return raw

    return bind


def _make_builder(opdef: OpDef) -> Builder[Any]:
    sig = opdef.signature
    bind = _binder(sig)

    def builder(*args: Any, loc: Location | None = None, **kwargs: Any) -> Any:
        ip = current()
        try:
            raw = bind(args, kwargs)
        except TypeError as e:
            raise TypeRuleError(f"bad arguments: {e}; signature is {opdef.signature_text()}",
                                op=opdef.name) from None
        peer = _peer_dtype([raw[p.name] for p in opdef.operands if p.role != "variadic"]
                           + [v for p in opdef.operands if p.role == "variadic"
                              for v in (raw[p.name] or [])])
        operands: dict[str, Any] = {}
        flat: list[Value] = []
        for p in opdef.operands:
            v = raw[p.name]
            if p.role == "variadic":
                vs = [as_value(x, _scalar_dtype(x, peer)) for x in (v or [])]
                operands[p.name] = vs
                flat.extend(vs)
            elif v is None and p.role == "optional":
                operands[p.name] = None
            else:
                if v is None:
                    raise TypeRuleError(f"operand {p.name!r} is required", op=opdef.name)
                val = as_value(v, _scalar_dtype(v, peer))
                operands[p.name] = val
                flat.append(val)
        region_inputs = [v.type for p in opdef.operands if p.role == "variadic"
                         for v in operands[p.name]]
        attributes: dict[str, Any] = {}
        location = loc if loc is not None else ip.location
        for p in opdef.attributes:
            v = raw[p.name]
            if p.role == "region":
                attributes[p.name] = _build_region(v, region_inputs, opdef.name, p.name)
                continue
            try:
                attributes[p.name] = normalize_attr(p, v, opdef.name)
            except TypeRuleError as e:
                raise e.located(opdef.name, location) from None
        try:
            result_types = opdef.infer(operands, attributes)
        except TypeRuleError as e:
            raise e.located(opdef.name, location) from None
        op = Operation(opdef.name, flat, attributes, [], location)
        op.results = [Value(t, op, i) for i, t in enumerate(result_types)]
        ip.graph.ops.append(op)
        if len(op.results) == 1 and not opdef.traits & {"multi_result"}:
            return op.results[0]
        return tuple(op.results)

    builder.__name__ = opdef.rule.__name__
    builder.__qualname__ = opdef.rule.__qualname__
    builder.__doc__ = opdef.rule.__doc__
    builder.__module__ = opdef.rule.__module__
    # help() and inspect show the rule's parameters plus ``loc``
    setattr(builder, "__signature__", sig.replace(parameters=[  # noqa: B010
        *sig.parameters.values(),
        inspect.Parameter("loc", inspect.Parameter.KEYWORD_ONLY, default=None),
    ]))
    typed = cast(Builder[Any], builder)
    typed.opdef = opdef
    return typed


def as_value(v: Any, dtype: DType | None = None) -> Value:
    """Return ``v`` if it is a Value, otherwise build a ``coreai.constant`` from it."""
    if isinstance(v, Value):
        return v
    return build_constant(v, dtype)


def build_constant(value: Any, dtype: Any = None, *, name: str | None = None,
                   loc: Location | None = None) -> Value:
    """Build a ``coreai.constant`` from a Python scalar/list, a numpy array or a WeightRef.

    The logic behind :func:`coreai.constant <coreai_core.dialects.coreai.constant>`; it lives
    here because every builder turns non-Value operands into constants.
    """
    opdef = OPS.get("coreai.constant")
    if opdef is None:  # pragma: no cover - the dialect package defines it on import
        raise RuntimeError("coreai.constant is not defined; import coreai_core.dialects")
    constant = opdef.builder
    if isinstance(value, WeightRef):
        return constant(value, loc=loc)
    if isinstance(value, Value):
        raise TypeError("coreai.constant expects data, not a Value; use coreai.cast instead")
    target = DType.of(dtype) if dtype is not None else default_dtype_of(value)
    arr = np.asarray(value)
    if arr.dtype != target.numpy:
        arr = arr.astype(target.numpy)
    if arr.size > INLINE_LIMIT or name is not None:
        program = current().graph.program
        if program is None:
            raise RuntimeError("large constants need a graph that belongs to a Program")
        ref = program.add_weight(program.unique_weight_name(name or current().weight_prefix),
                                 arr)
        return constant(ref, loc=loc)
    return constant(arr, loc=loc)


def build_operation(opdef: OpDef, operands: list[Value], attributes: dict[str, Any],
                    location: Location, result_types: list[TensorType] | None = None,
                    ) -> Operation:
    """Create an op from already-normalized parts (used by the parser and passes)."""
    try:
        inferred = opdef.infer(opdef.split_operands(operands), attributes)
    except TypeRuleError as e:
        raise e.located(opdef.name, location) from None
    if result_types is not None and list(result_types) != inferred:
        raise TypeRuleError(
            f"declared result types {[str(t) for t in result_types]} differ from the inferred "
            f"{[str(t) for t in inferred]}", op=opdef.name, location=location)
    op = Operation(opdef.name, list(operands), attributes, [], location)
    op.results = [Value(t, op, i) for i, t in enumerate(result_types or inferred)]
    return op
