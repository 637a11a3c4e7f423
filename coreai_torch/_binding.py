"""How lowerings receive their arguments: bound by name from the op's schema, or the FX node.

Two forms of lowering are accepted, by built-ins and users alike:

* **Schema-bound** (the default): parameters are named after the op's schema arguments and
  receive converted values::

      @reg("aten::hardtanh.default")
      def aten_hardtanh_default(self: Value, min_val: float = -1.0, max_val: float = 1.0):
          return coreai.clip(self, min_val, max_val)

  ``Tensor`` arguments arrive as ``Value`` (``Tensor?`` may be None; ``Tensor[]`` is a list;
  a Python number where the schema says Tensor, as in ``add.Tensor(x, 2)``, stays a number:
  :func:`coreai_torch.utils.cast_to` makes either a Value of the computation's dtype, with no
  double rounding), ``ScalarType`` as a :class:`~coreai_core.DType`, ``int[]`` as a list of
  ints, other arguments as Python values. A symbolic argument (a SymInt/SymFloat FX node)
  arrives as its 0-d Value. Missing arguments take the schema default. A Python keyword among
  the schema names gets a trailing underscore (``lambda_``). A keyword-only parameter named
  ``node`` receives the FX node. A schema argument the lowering does not declare must hold its
  default value, or the conversion fails naming it (so nothing is silently ignored). A
  parameter with a default that the schema lacks keeps its default, so one function can serve
  several overloads (``mean.dim`` and ``mean.default``).
* **FX-node**: ``fn(values_map, node, loc)`` - three positional parameters without defaults,
  the second named ``node`` (or names that are not all schema arguments). The function reads
  ``node.args`` itself, e.g. with :func:`coreai_torch.utils.get_operand`. Ops without a schema
  (Python operators, higher-order ops) are always lowered in this form.
"""

from __future__ import annotations

import contextlib
import difflib
import inspect
import keyword
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs
import torch
import torch.fx

from coreai_core import Value
from coreai_core.dialects import coreai
from coreai_torch import utils

__all__ = ["NodeValues", "call_lowering", "is_node_form"]

ValueKey = torch.fx.Node | tuple[torch.fx.Node, int]


class NodeValues(Mapping[str, Value]):
    """The Values lowered so far, keyed by FX node (``(node, i)`` for a multi-result node).

    FX-node-form lowerings see this object as ``values_map``: there, keys are node names and
    ``"name#i"`` names the i-th result of a multi-result node.
    """

    def __init__(self) -> None:
        self._values: dict[ValueKey, Value] = {}
        self._by_name: dict[str, torch.fx.Node] = {}

    def bind(self, node: torch.fx.Node, value: Value, index: int | None = None) -> None:
        self._values[node if index is None else (node, index)] = value
        self._by_name[node.name] = node

    def value(self, node: torch.fx.Node, index: int | None = None) -> Value:
        return self._values[node if index is None else (node, index)]

    def has(self, node: torch.fx.Node, index: int | None = None) -> bool:
        return (node if index is None else (node, index)) in self._values

    def _key(self, key: object) -> ValueKey:
        if isinstance(key, torch.fx.Node):
            return key
        if isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], torch.fx.Node):
            return (key[0], int(key[1]))
        if not isinstance(key, str):
            raise KeyError(key)
        name, sep, index = key.rpartition("#")
        if sep and index.isdigit() and name in self._by_name:
            return (self._by_name[name], int(index))
        return self._by_name[key]

    def __getitem__(self, key: object) -> Value:
        return self._values[self._key(key)]

    def __contains__(self, key: object) -> bool:
        try:
            return self._key(key) in self._values
        except KeyError:
            return False

    def __iter__(self) -> Iterator[str]:
        for key in self._values:
            yield key.name if isinstance(key, torch.fx.Node) else f"{key[0].name}#{key[1]}"

    def __len__(self) -> int:
        return len(self._values)


# -- the two forms ---------------------------------------------------------------------------

def is_node_form(fn: Callable[..., Any], target: Any = None) -> bool:
    """True if ``fn`` is called as ``fn(values_map, node, loc)`` for ``target``.

    That is a function of exactly three positional parameters without defaults, whose second
    is named ``node`` or whose names are not all arguments of the target's schema.
    """
    sig = _signature_of(fn)
    if not sig.three_positional:
        return False
    if sig.params[1] == "node" or target is None or getattr(target, "_schema", None) is None:
        return True
    return not set(sig.params) <= {a.name for a in _schema_args(target)}


@attrs.frozen
class _FnSignature:
    three_positional: bool
    params: tuple[str, ...]  # parameters bound by name
    optional: frozenset[str]  # those with a default
    wants_node: bool
    var_keyword: bool


_SIGNATURES: weakref.WeakKeyDictionary[Callable[..., Any], _FnSignature] = (
    weakref.WeakKeyDictionary())


def _signature_of(fn: Callable[..., Any]) -> _FnSignature:
    try:
        return _SIGNATURES[fn]
    except (KeyError, TypeError):
        pass
    params = list(inspect.signature(fn).parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    sig = _FnSignature(
        three_positional=(len(params) == 3 and len(positional) == 3
                          and all(p.default is p.empty for p in positional)),
        params=tuple(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                     and not (p.name == "node" and p.kind is p.KEYWORD_ONLY)),
        optional=frozenset(p.name for p in params if p.default is not p.empty),
        wants_node=any(p.name == "node" and p.kind is p.KEYWORD_ONLY for p in params),
        var_keyword=any(p.kind is p.VAR_KEYWORD for p in params),
    )
    # a builtin is not weak-referenceable: then the signature is recomputed next time
    with contextlib.suppress(TypeError):
        _SIGNATURES[fn] = sig
    return sig


# -- schema binding --------------------------------------------------------------------------

TENSOR, TENSORS, DTYPE, INTS, PLAIN = "tensor", "tensors", "dtype", "ints", "plain"


@attrs.frozen
class _Arg:
    schema_name: str
    name: str  # the Python parameter name
    kind: str
    kwarg_only: bool
    has_default: bool
    default: Any
    length: int | None  # N of ``int[N]``


def _kind(real_type: str) -> str:
    t = real_type
    if t.startswith("Optional[") and t.endswith("]"):
        t = t[len("Optional["):-1]
    if t == "Tensor":
        return TENSOR
    if t in ("List[Tensor]", "List[Optional[Tensor]]"):
        return TENSORS
    if t == "ScalarType":
        return DTYPE
    if t in ("List[int]", "List[SymInt]"):
        return INTS
    return PLAIN


_SCHEMAS: dict[Any, tuple[_Arg, ...]] = {}


def _schema_args(target: Any) -> tuple[_Arg, ...]:
    try:
        return _SCHEMAS[target]
    except KeyError:
        pass
    schema = getattr(target, "_schema", None)
    if schema is None:
        raise TypeError(f"{target} has no schema; lower it with the FX-node form "
                        "fn(values_map, node, loc)")
    args = []
    for a in schema.arguments:
        name = a.name + "_" if keyword.iskeyword(a.name) else a.name
        has_default = a.has_default_value()
        args.append(_Arg(a.name, name, _kind(str(a.real_type)), a.kwarg_only, has_default,
                         a.default_value if has_default else None, getattr(a, "N", None)))
    _SCHEMAS[target] = out = tuple(args)
    return out


def bind_arguments(node: torch.fx.Node) -> dict[str, Any]:
    """The node's raw FX arguments by Python parameter name, with schema defaults filled."""
    specs = _schema_args(node.target)
    raw: dict[str, Any] = {}
    positional = [s for s in specs if not s.kwarg_only]
    if len(node.args) > len(positional):
        raise TypeError(f"{len(node.args)} positional arguments for a schema with "
                        f"{len(positional)} positional parameters")
    for spec, arg in zip(positional, node.args, strict=False):
        raw[spec.name] = arg
    for spec in specs:
        if spec.name in raw:
            continue
        if spec.schema_name in node.kwargs:
            raw[spec.name] = node.kwargs[spec.schema_name]
        elif spec.has_default:
            raw[spec.name] = spec.default
        else:
            raise TypeError(f"the node gives no value for the required argument "
                            f"{spec.schema_name!r}")
    return raw


# A schema default of type ScalarType is its c10::ScalarType code (``randint``'s ``dtype=4``).
_SCALAR_TYPE_CODES = {0: torch.uint8, 1: torch.int8, 2: torch.int16, 3: torch.int32,
                      4: torch.int64, 5: torch.float16, 6: torch.float32, 7: torch.float64,
                      11: torch.bool, 15: torch.bfloat16}


def _torch_dtype(arg: Any) -> torch.dtype:
    if not isinstance(arg, int):
        return arg
    if arg not in _SCALAR_TYPE_CODES:
        raise TypeError(f"ScalarType code {arg} has no Core AI element type")
    return _SCALAR_TYPE_CODES[arg]


def _convert(spec: _Arg, arg: Any, values: NodeValues, node: torch.fx.Node) -> Any:
    if arg is None:
        return None
    if spec.kind == TENSOR:
        return _tensor(arg, values, node)
    if spec.kind == TENSORS:
        return [None if a is None else _tensor(a, values, node) for a in arg]
    if spec.kind == DTYPE:
        return utils.dtype_of(_torch_dtype(arg))
    if spec.kind == INTS and isinstance(arg, (int, torch.fx.Node)):
        arg = [arg] * (spec.length or 1)
    return _plain(arg, values)


def _tensor(arg: Any, values: NodeValues, node: torch.fx.Node,
            ) -> Value | bool | int | float | complex:
    if isinstance(arg, torch.fx.Node):
        return values.value(arg)
    if isinstance(arg, (bool, int, float, complex)):
        return arg  # a wrapped number: the lowering picks its dtype (utils.cast_to)
    if isinstance(arg, torch.Tensor):
        return coreai.constant(utils.tensor_data(arg))
    raise TypeError(f"cannot use {arg!r} as a tensor")


def _plain(arg: Any, values: NodeValues) -> Any:
    if isinstance(arg, torch.fx.Node):
        return values.value(arg)
    if isinstance(arg, (list, tuple)) and any(isinstance(a, torch.fx.Node) for a in arg):
        return [values.value(a) if isinstance(a, torch.fx.Node) else a for a in arg]
    return list(arg) if isinstance(arg, tuple) else arg


def _is_default(value: Any, default: Any) -> bool:
    if isinstance(value, (list, tuple)) and isinstance(default, (list, tuple)):
        return list(value) == list(default)
    if isinstance(value, (torch.fx.Node, torch.Tensor)):
        return False
    return value is default or (type(value) is not bool and value == default)


def _misnamed(param: str, by_name: Mapping[str, _Arg], node: torch.fx.Node) -> str:
    close = difflib.get_close_matches(param, list(by_name), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    schema = getattr(node.target, "_schema", node.target)
    return f"lowering parameter {param!r} is not an argument of {schema}{hint}"


def call_lowering(fn: Callable[..., Any], values: NodeValues, node: torch.fx.Node,
                  loc: Any) -> Any:
    """Call ``fn`` for ``node`` in its form (see the module docstring), with ``node`` as the
    conversion context's current node (what ``result_type()`` describes)."""
    ctx = utils.active_context()
    token = None
    if ctx is None:  # called outside a conversion, e.g. from a test
        ctx = utils.ConversionContext()
        token = utils.set_context(ctx)
    outer, ctx.node = ctx.node, node
    try:
        return _call(fn, values, node, loc)
    finally:
        ctx.node = outer
        if token is not None:
            utils.reset_context(token)


def _call(fn: Callable[..., Any], values: NodeValues, node: torch.fx.Node, loc: Any) -> Any:
    if is_node_form(fn, node.target):
        return fn(values, node, loc)
    sig = _signature_of(fn)
    specs = _schema_args(node.target)
    raw = bind_arguments(node)
    by_name = {s.name: s for s in specs}
    extra = [p for p in sig.params if p not in by_name]
    unknown = [p for p in extra if p not in sig.optional]
    if unknown:
        raise TypeError(_misnamed(unknown[0], by_name, node) + "; name the parameters after "
                        "the schema, or write the lowering in the FX-node form "
                        "fn(values_map, node, loc)")
    kwargs: dict[str, Any] = {}
    for spec in specs:
        if spec.name in sig.params or sig.var_keyword:
            kwargs[spec.name] = _convert(spec, raw[spec.name], values, node)
        elif not spec.has_default or not _is_default(raw[spec.name], spec.default):
            what = (f"argument {spec.schema_name}={raw[spec.name]!r} is not supported by this "
                    f"lowering (it handles only the default, {spec.default!r})"
                    if spec.has_default else
                    f"the lowering does not declare the required argument {spec.schema_name!r}")
            # a misspelt optional parameter is the likely cause: name it
            hints = [_misnamed(p, by_name, node) for p in extra]
            raise NotImplementedError("; ".join([what, *hints]))
    if sig.wants_node:
        kwargs["node"] = node
    return fn(**kwargs)
