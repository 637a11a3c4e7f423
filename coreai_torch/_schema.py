"""An op's schema arguments and a call node's raw arguments bound to them by name.

The binder (:mod:`coreai_torch._binding`) and the lowering helpers that read an argument's torch
metadata (:func:`coreai_torch.utils.arg_meta`) both read a node's arguments through here.
"""

from __future__ import annotations

import keyword
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import torch
import torch.fx

__all__ = [
    "IGNORED_ARGUMENTS", "IgnoredArgument", "SchemaArg", "bind_arguments", "has_schema",
    "schema_args",
]

TENSOR, TENSORS, DTYPE, INTS, PLAIN = "tensor", "tensors", "dtype", "ints", "plain"


def _any_value(value: object) -> bool:
    return True


def _dense_layout(value: object) -> bool:
    return value is None or value == torch.strided


@attrs.frozen
class IgnoredArgument:
    """A schema argument that cannot change a Core AI result, so a lowering need not declare it.

    ``type`` is the schema type it must have, optional or not (a custom op's ``str layout``
    is not ignored); ``accepts`` tells which values are ignorable (the others need a lowering
    that reads them).
    """

    type: str
    accepts: Callable[[object], bool] = _any_value


# Core AI tensors are dense values without a device, strides or a torch generator (the random
# ops draw from the run's generator), so these arguments describe nothing a program holds.
IGNORED_ARGUMENTS: Mapping[str, IgnoredArgument] = {
    "layout": IgnoredArgument("Layout", _dense_layout),
    "device": IgnoredArgument("Device"),
    "pin_memory": IgnoredArgument("bool"),
    "memory_format": IgnoredArgument("MemoryFormat"),
    "generator": IgnoredArgument("Generator"),
    "non_blocking": IgnoredArgument("bool"),
}
"""Schema arguments (by name) that schema-bound lowerings receive only if they declare them."""


@attrs.frozen
class SchemaArg:
    """One argument of an op's schema, as a lowering parameter."""

    schema_name: str
    name: str  # the Python parameter name (a Python keyword gets a trailing underscore)
    kind: str  # TENSOR, TENSORS, DTYPE, INTS or PLAIN: how the binder converts it
    type: str  # the schema's type, e.g. "Optional[Tensor]"
    kwarg_only: bool
    has_default: bool
    default: Any
    length: int | None  # N of ``int[N]``

    def ignorable(self, value: object) -> bool:
        """True if a lowering that does not declare this argument may ignore ``value``."""
        ignored = IGNORED_ARGUMENTS.get(self.schema_name)
        return (ignored is not None and _strip_optional(self.type) == ignored.type
                and ignored.accepts(value))


def _strip_optional(t: str) -> str:
    return t[len("Optional["):-1] if t.startswith("Optional[") and t.endswith("]") else t


def _kind(real_type: str) -> str:
    t = _strip_optional(real_type)
    if t == "Tensor":
        return TENSOR
    if t in ("List[Tensor]", "List[Optional[Tensor]]"):
        return TENSORS
    if t == "ScalarType":
        return DTYPE
    if t in ("List[int]", "List[SymInt]"):
        return INTS
    return PLAIN


_SCHEMAS: dict[Any, tuple[SchemaArg, ...]] = {}  # a cache: an op's schema never changes


def has_schema(target: object) -> bool:
    """True if ``target`` (an FX call target) has an ATen-style schema to bind against."""
    return getattr(target, "_schema", None) is not None


def schema_args(target: Any) -> tuple[SchemaArg, ...]:
    """The schema arguments of ``target`` in order (TypeError if it has no schema)."""
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
        real_type = str(a.real_type)
        args.append(SchemaArg(a.name, name, _kind(real_type), real_type, a.kwarg_only,
                              has_default, a.default_value if has_default else None,
                              getattr(a, "N", None)))
    _SCHEMAS[target] = out = tuple(args)
    return out


def bind_arguments(node: torch.fx.Node) -> dict[str, Any]:
    """The node's raw FX arguments by Python parameter name, with schema defaults filled."""
    specs = schema_args(node.target)
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
