"""How lowerings receive their arguments: bound by name from the op's schema, or the FX node.

Two forms of lowering are accepted, by built-ins and users alike. The form is never guessed and
is decided once, when the function is registered (:func:`as_lowering`): the table stores it with
the function in a :class:`Lowering` record, and :func:`call_lowering` only reads that record.

* **FX-node form**: ``fn(values_map, node, loc)``, recognized by exactly these three parameter
  names (positional, without defaults), or any function registered with ``form="node"``. The
  function reads ``node.args`` itself, e.g. with
  :func:`coreai_torch.utils.get_operand`. Ops without a schema (Python operators, higher-order
  ops) can only be lowered in this form.
* **Schema-bound**: every other function. Its parameters are named after the op's schema
  arguments and receive converted values::

      @reg("aten::leaky_relu.default")
      def aten_leaky_relu_default(self: Value, negative_slope: float = 0.01) -> Value:
          neg = coreai.broadcasting_less(self, scalar_like(0, self))
          return coreai.broadcasting_where(
              neg, coreai.broadcasting_mul(self, scalar_like(negative_slope, self)), self)

  ``Tensor`` arguments arrive as ``Value`` (``Tensor?`` may be None; ``Tensor[]`` is a list;
  a Python number where the schema says Tensor, as in ``add.Tensor(x, 2)``, stays a number:
  :func:`coreai_torch.utils.cast_to` makes either a Value of the computation's dtype, with no
  double rounding), ``ScalarType`` as a :class:`~coreai_core.DType`, ``int[]`` as a list of
  ints, other arguments as Python values. A symbolic argument (a SymInt/SymFloat FX node)
  arrives as its 0-d Value. Missing arguments take the schema default. A Python keyword among
  the schema names gets a trailing underscore (``lambda_``). A parameter that is not a schema
  argument and has no default is an error naming the closest schema argument ("did you
  mean"). A schema argument the lowering does not declare must hold its default value, or the
  conversion fails naming it (so nothing is silently ignored), except the arguments of
  :data:`~coreai_torch._schema.IGNORED_ARGUMENTS` (``layout``, ``device``, ``pin_memory``,
  ``memory_format``, ``generator``, ``non_blocking``), which describe nothing a Core AI
  program holds. A parameter with a default that the schema lacks keeps its default, so one
  function can serve several overloads (``mean.dim`` and ``mean.default``). The FX node is
  not a parameter: torch's metadata of the node being lowered is read with
  :func:`~coreai_torch.utils.result_type`, :func:`~coreai_torch.utils.result_meta`,
  :func:`~coreai_torch.utils.arg_meta` and :func:`~coreai_torch.utils.promoted_dtype`.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal

import attrs
import torch
import torch.fx

from coreai_core import Value
from coreai_core.dialects import coreai
from coreai_torch import utils
from coreai_torch._schema import (
    DTYPE,
    INTS,
    TENSOR,
    TENSORS,
    SchemaArg,
    bind_arguments,
    has_schema,
    schema_args,
)

__all__ = ["FORMS", "NODE_FORM_PARAMETERS", "Lowering", "NodeValues", "as_lowering",
           "call_lowering", "check_form"]

LoweringFn = Callable[..., Any]
LoweringForm = Literal["node", "schema"]

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

NODE_FORM_PARAMETERS = ("values_map", "node", "loc")
"""The parameter names that make a function an FX-node-form lowering (the seed guide's form)."""

FORMS = ("node", "schema")
"""The lowering forms a registration may name (``form=``); None lets the parameters decide."""


@attrs.frozen
class _FnSignature:
    params: tuple[str, ...]  # parameters bound by name
    positional_only: tuple[str, ...]
    optional: frozenset[str]  # those with a default
    var_keyword: bool


@attrs.frozen
class Lowering:
    """A registered lowering: the function and its form, decided once when it is registered.

    ``form`` is ``"node"`` (called ``fn(values_map, node, loc)``) or ``"schema"`` (its
    parameters are bound by name to the op's schema arguments). Lowering tables hold these
    records; :meth:`~coreai_torch.TorchConverter.lowering_for` gives back ``fn`` itself.
    """

    fn: LoweringFn
    form: LoweringForm
    # the schema form's parameters, read once from fn's signature (None for the node form)
    signature: _FnSignature | None = attrs.field(default=None, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        if self.form not in FORMS or (self.form == "schema") != (self.signature is not None):
            raise ValueError("a Lowering record is built by as_lowering(fn, form), which reads "
                             "the signature a schema-bound lowering needs")


def check_form(form: object) -> None:
    """Raise ValueError unless ``form`` is a lowering form: None, ``"node"`` or ``"schema"``."""
    if form is not None and form not in FORMS:
        raise ValueError(f"form={form!r} is not a lowering form; pass form='node' for the "
                         "FX-node form fn(values_map, node, loc), form='schema' for a "
                         "schema-bound lowering (parameters named after the op's schema), or "
                         "leave it out to let exactly (values_map, node, loc) mean the node form")


def as_lowering(fn: LoweringFn, form: LoweringForm | None = None) -> Lowering:
    """The table entry for ``fn`` registered with ``form``: its signature is read here, once.

    None: the FX-node form if the parameters are exactly ``(values_map, node, loc)``
    (positional, without defaults), else schema-bound; ``"node"``: the FX-node form whatever
    the names; ``"schema"``: schema-bound.
    """
    check_form(form)
    if not callable(fn):
        raise TypeError(f"a lowering must be callable, got {fn!r}")
    params = list(inspect.signature(fn).parameters.values())
    if form is None:
        seed = (tuple(p.name for p in params) == NODE_FORM_PARAMETERS
                and all(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                        and p.default is p.empty for p in params))
        form = "node" if seed else "schema"
    if form == "node":
        return Lowering(fn, "node")
    return Lowering(fn, "schema", _FnSignature(
        params=tuple(p.name for p in params
                     if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)),
        positional_only=tuple(p.name for p in params if p.kind is p.POSITIONAL_ONLY),
        optional=frozenset(p.name for p in params if p.default is not p.empty),
        var_keyword=any(p.kind is p.VAR_KEYWORD for p in params),
    ))


# -- schema binding --------------------------------------------------------------------------

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


def _convert(spec: SchemaArg, arg: Any, values: NodeValues) -> Any:
    if arg is None:
        return None
    if spec.kind == TENSOR:
        return _tensor(arg, values)
    if spec.kind == TENSORS:
        return [None if a is None else _tensor(a, values) for a in arg]
    if spec.kind == DTYPE:
        return utils.dtype_of(_torch_dtype(arg))
    if spec.kind == INTS and isinstance(arg, (int, torch.fx.Node)):
        arg = [arg] * (spec.length or 1)
    return _plain(arg, values)


def _tensor(arg: Any, values: NodeValues) -> Value | bool | int | float | complex:
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


def _misnamed(param: str, by_name: Mapping[str, SchemaArg], node: torch.fx.Node) -> str:
    close = difflib.get_close_matches(param, list(by_name), n=1)
    hint = (f" (did you mean {close[0]!r}?)" if close else
            f" (its arguments: {', '.join(by_name) or 'none'})")
    schema = getattr(node.target, "_schema", node.target)
    return f"lowering parameter {param!r} is not an argument of {schema}{hint}"


_HOW_TO_NAME = ("; name the parameters of a schema-bound lowering after the schema, or write "
                "the FX-node form fn(values_map, node, loc) (or register it with form='node')")
_NO_NODE = ("; a schema-bound lowering does not receive the FX node: read torch's metadata of "
            "the node being lowered with coreai_torch.utils (result_type, result_meta, "
            "arg_meta, promoted_dtype), or write the FX-node form fn(values_map, node, loc)")


def call_lowering(lowering: Lowering, values: NodeValues, node: torch.fx.Node,
                  loc: Any) -> Any:
    """Call ``lowering`` for ``node`` in its registered form (see the module docstring), with
    ``node`` as the conversion context's current node (what ``result_type()`` and
    ``arg_meta()`` describe). Nothing about the function is inspected here: the form and the
    parameters were read when it was registered (:func:`as_lowering`)."""
    ctx = utils.active_context()
    token = None
    if ctx is None:  # called outside a conversion, e.g. from a test
        ctx = utils.ConversionContext()
        token = utils.set_context(ctx)
    outer, ctx.node = ctx.node, node
    try:
        return _call(lowering, values, node, loc)
    finally:
        ctx.node = outer
        if token is not None:
            utils.reset_context(token)


def _call(lowering: Lowering, values: NodeValues, node: torch.fx.Node, loc: Any) -> Any:
    fn, sig = lowering.fn, lowering.signature
    if lowering.form == "node":
        return fn(values, node, loc)
    assert sig is not None  # a schema-bound record carries its signature (__attrs_post_init__)
    if not has_schema(node.target):
        raise TypeError(f"{node.target} has no schema, so its lowering must take the FX node: "
                        "write fn(values_map, node, loc), or register the function with "
                        "form='node'")
    specs = schema_args(node.target)
    by_name = {s.name: s for s in specs}
    if sig.positional_only:
        raise TypeError(f"lowering parameter {sig.positional_only[0]!r} is positional-only; a "
                        "schema-bound lowering receives its arguments by name")
    extra = [p for p in sig.params if p not in by_name]
    # a default lets one function serve several overloads, but never makes ``node`` a schema
    # argument: the FX node is read through the accessors
    unknown = [p for p in extra if p not in sig.optional or p == "node"]
    if unknown:
        raise TypeError(_misnamed(unknown[0], by_name, node)
                        + (_NO_NODE if unknown[0] == "node" else _HOW_TO_NAME))
    raw = bind_arguments(node)
    kwargs: dict[str, Any] = {}
    for spec in specs:
        value = raw[spec.name]
        if spec.name in sig.params or sig.var_keyword:
            kwargs[spec.name] = _convert(spec, value, values)
        elif spec.ignorable(value) or (spec.has_default and _is_default(value, spec.default)):
            continue
        else:
            what = (f"argument {spec.schema_name}={value!r} is not supported by this "
                    f"lowering (it handles only the default, {spec.default!r})"
                    if spec.has_default else
                    f"the lowering does not declare the required argument {spec.schema_name!r}")
            # a misspelt optional parameter is the likely cause: name it
            hints = [_misnamed(p, by_name, node) for p in extra]
            raise NotImplementedError("; ".join([what, *hints]))
    return fn(**kwargs)
