"""Lowering tables keyed by qualified op names (``namespace::op_name.overload``).

The default table holds the built-in lowerings; each converter owns a ``LoweringTable``
whose parent is the default table: reads fall through, writes stay local, so a registration
never leaks into the defaults or into another converter.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterator
from typing import Any

Lowering = Callable[..., Any]

BUILTIN_NAMESPACES = ("aten", "higher_order", "coreai", "coreaix")
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


class LoweringTable:
    """A mapping from qualified op names to lowering functions, optionally over a parent."""

    def __init__(self, parent: LoweringTable | None = None, *, owner: str = "user") -> None:
        self._own: dict[str, Lowering] = {}
        self._parent = parent
        self._owner = owner
        self._frozen = False

    def register(self, name: str, fn: Lowering, *, allow_override: bool = False) -> Lowering:
        """Add ``fn`` as the lowering of ``name`` in this table."""
        if self._frozen:
            raise RuntimeError(f"the {self._owner} lowering table is frozen; register lowerings "
                               "on a TorchConverter instance instead")
        check_qualified_name(name)
        if not callable(fn):
            raise TypeError(f"lowering for {name!r} must be callable, got {fn!r}")
        existing = self.lookup(name)
        if existing is not None and not allow_override:
            where = "a built-in" if name not in self._own else "a user"
            raise ValueError(
                f"{name!r} already has {where} lowering ({_describe(existing)}); pass "
                f"allow_override=True to register_torch_lowering to replace it")
        self._own[name] = fn
        return fn

    def lookup(self, name: str) -> Lowering | None:
        """The lowering used for ``name`` (own entries first, then the parent's), or None."""
        fn = self._own.get(name)
        if fn is None and self._parent is not None:
            return self._parent.lookup(name)
        return fn

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.lookup(name) is not None

    def own_names(self) -> list[str]:
        return sorted(self._own)

    def names(self) -> list[str]:
        """Every name this table can lower (own and inherited), sorted."""
        inherited = self._parent.names() if self._parent is not None else []
        return sorted(set(inherited) | set(self._own))

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def freeze(self) -> LoweringTable:
        self._frozen = True
        return self

    def __repr__(self) -> str:
        return f"<LoweringTable {self._owner}: {len(self._own)} own entries>"


def _describe(fn: Lowering) -> str:
    mod = getattr(fn, "__module__", "?")
    return f"{mod}.{getattr(fn, '__qualname__', repr(fn))}"


class LoweringSet:
    """Built-in lowerings of one family, registered with the same decorator style users see."""

    def __init__(self, family: str) -> None:
        self.family = family
        self.lowerings: dict[str, Lowering] = {}

    def register_torch_lowering(self, *names: str) -> Callable[[Lowering], Lowering]:
        def register(fn: Lowering) -> Lowering:
            for name in names:
                check_qualified_name(name)
                if name in self.lowerings:
                    raise ValueError(f"{self.family}: {name!r} is already lowered by "
                                     f"{_describe(self.lowerings[name])}")
                self.lowerings[name] = fn
            return fn

        return register
