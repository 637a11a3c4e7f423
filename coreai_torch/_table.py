"""Lowering tables keyed by qualified op names (``namespace::op_name.overload``).

The default table holds the built-in lowerings; each converter owns a ``LoweringTable``
whose parent is the default table: reads fall through, writes stay local, so a registration
never leaks into the defaults or into another converter.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from typing import Any

from coreai_core.registry import Registry

Lowering = Callable[..., Any]

BUILTIN_NAMESPACES = ("aten", "higher_order", "coreai", "coreaix", "quantized_decomposed")
_NAME = re.compile(r"(?P<ns>[A-Za-z_][A-Za-z0-9_]*)::(?P<op>[A-Za-z_][A-Za-z0-9_]*)"
                   r"\.(?P<overload>[A-Za-z_][A-Za-z0-9_]*)")


def check_qualified_name(name: Any) -> str:
    """Validate ``namespace::op_name.overload``; raise ValueError explaining the format."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        hint = ""
        if isinstance(name, str) and "::" in name and "." not in name.split("::", 1)[1]:
            hint = f" (did you mean {name + '.default'!r}? every op carries an overload suffix)"
        elif isinstance(name, str) and "::" not in name and "." in name:
            ns, _, rest = name.partition(".")
            hint = f" (did you mean {ns + '::' + rest!r}?)"
        raise ValueError(
            f"malformed lowering name {name!r}: expected 'namespace::op_name.overload', "
            f"e.g. 'my_lib::scaled_add.default' or 'aten::add.Tensor'{hint}")
    return name


def qualified_name(target: Any) -> str:
    """The qualified name of an FX call target.

    OpOverloads give ``ns::op.overload``; higher-order ops ``higher_order::name.default``;
    Python operator targets (``operator.add``, ``math.ceil``, ``torch.sym_float``, ...)
    ``coreaix::name.default``.
    """
    schema = getattr(target, "_schema", None)
    if schema is not None:
        overload = target._overloadname or "default"
        return f"{schema.name}.{overload}"
    import torch

    if isinstance(target, torch._ops.HigherOrderOperator):
        return f"higher_order::{target.name()}.default"
    name = getattr(target, "__name__", None) or type(target).__name__
    return f"coreaix::{name.strip('_') or name}.default"


PYTHON_OPERATORS = {
    operator.getitem, operator.add, operator.sub, operator.mul, operator.floordiv,
    operator.truediv, operator.mod, operator.neg, operator.pow, operator.eq, operator.ne,
    operator.lt, operator.le, operator.gt, operator.ge, operator.and_, operator.or_,
}


class LoweringTable(Registry[Lowering]):
    """Qualified op name -> lowering function, optionally over a parent table.

    The built-in table is filled from the family modules' ``LoweringSet``s and frozen; each
    converter owns a table whose parent is the built-in one.
    """

    def __init__(self, parent: LoweringTable | None = None, *,
                 owner: str = "this converter (a user lowering)") -> None:
        super().__init__("lowering", owner, parent=parent, check_name=check_qualified_name)

    def lookup(self, name: str) -> Lowering | None:
        """The lowering used for ``name`` (own entries first, then the parent's), or None."""
        return self.get(name)


class LoweringSet(Registry[Lowering]):
    """Built-in lowerings of one family, registered with the same decorator style users see."""

    def __init__(self, family: str) -> None:
        super().__init__("lowering", f"the {family} family", check_name=check_qualified_name)
        self.family = family

    def register_torch_lowering(self, *names: str) -> Callable[[Lowering], Lowering]:
        """Decorator: ``@reg("aten::op.overload", ...)`` registers one function for each name."""
        def wrap(fn: Lowering) -> Lowering:
            for name in names:
                self.register(name, fn)
            return fn

        return wrap
