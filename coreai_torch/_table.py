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
from coreai_torch._binding import Lowering, LoweringFn, LoweringForm, as_lowering, check_form

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
    """Qualified op name -> :class:`~coreai_torch._binding.Lowering`, optionally over a parent.

    The built-in table is the frozen union of the family modules' ``LoweringSet``s; each
    converter owns a table whose parent is the built-in one. Entries are added with
    :meth:`register_torch_lowering`, the one registration verb of converters and families
    alike, which decides the lowering's form once and stores it with the function.
    """

    def __init__(self, parent: LoweringTable | None = None, *,
                 owner: str = "this converter (a user lowering)") -> None:
        super().__init__("lowering", owner, parent=parent, check_name=check_qualified_name,
                         callable_entries=False)

    def register_torch_lowering(self, qualified_name: str, allow_override: bool = False, *,
                                form: LoweringForm | None = None) -> Callable[[LoweringFn],
                                                                               LoweringFn]:
        """Decorator: lower FX nodes calling ``qualified_name`` with the decorated function.

        ``form`` is decided here, once (see :func:`~coreai_torch._binding.as_lowering`):
        ``"node"``, ``"schema"``, or None for the FX-node form exactly when the parameters are
        ``(values_map, node, loc)``. Replacing a name that already resolves requires
        ``allow_override=True``. The decorator returns the function unchanged.
        """
        if callable(qualified_name):
            raise TypeError("register_torch_lowering takes the op's name: write "
                            "@register_torch_lowering('namespace::op.overload') above the "
                            "function")
        check_qualified_name(qualified_name)
        if not isinstance(allow_override, bool):
            raise TypeError(f"allow_override must be True or False, got {allow_override!r}")
        check_form(form)

        def register(fn: LoweringFn) -> LoweringFn:
            if not callable(fn):
                raise TypeError(f"register_torch_lowering({qualified_name!r}) decorates a "
                                f"function, got {type(fn).__name__}")
            self.register(qualified_name, as_lowering(fn, form), allow_override=allow_override)
            return fn

        return register

    def _add(self, name: str, entry: Lowering, allow_override: bool) -> Lowering:
        if not isinstance(entry, Lowering):
            raise TypeError(f"a lowering table holds Lowering records, got {entry!r}: register "
                            "a function with register_torch_lowering(name)(fn)")
        return super()._add(name, entry, allow_override)


class LoweringSet(LoweringTable):
    """Built-in lowerings of one family, registered with the converter's own verb:
    ``@LOWERINGS.register_torch_lowering("aten::op.overload")`` (stacked for several names)."""

    def __init__(self, family: str) -> None:
        super().__init__(owner=f"the {family} family")
        self.family = family
