"""One small registry: names -> entries, optionally layered over a parent registry.

Op definitions (``coreai.OPS``), runtime kernel tables, kernel families, the elementwise ufunc
rows, the canonicalization rules, converter lowering tables and lowering families are all this
structure. Reads fall through to the parent; writes stay local, so a registration on one runtime
or converter never reaches the defaults or another instance. Registering a name that already
resolves raises, naming the existing owner and entry and the new entry, unless
``allow_override=True``. ``register`` is the one registration verb: called with an entry it
registers it, called without one it is a decorator.

The shared defaults (the default kernel table, the built-in lowering table) are each the union
of family registries, built by :func:`frozen_union` and frozen: a registration goes on an
instance (a ``Runtime``, a ``TorchConverter``) whose table has the default as parent.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar, overload

__all__ = ["Registry", "describe_entry", "frozen_union"]

T = TypeVar("T")
R = TypeVar("R", bound="Registry[Any]")


def describe_entry(entry: object) -> str:
    """``module.qualname`` of a registered function (for error messages); a record of a
    function (a lowering, a rewrite rule: an entry with a callable ``fn``) names its function."""
    fn = getattr(entry, "fn", None)
    if callable(fn) and not callable(entry):
        entry = fn
    mod = getattr(entry, "__module__", "?")
    return f"{mod}.{getattr(entry, '__qualname__', repr(entry))}"


class Registry(Generic[T]):
    """Name -> entry with an optional parent.

    ``kind`` names the entries in messages ("kernel", "lowering"); ``owner`` names this
    registry ("built-in", "converter", a family name). ``check_name`` validates names (it
    returns the name or raises ValueError). ``generation`` grows whenever this registry or a
    parent changes, so caches of resolved entries can tell when to refresh. Entries are
    functions unless ``callable_entries=False`` (op definitions are data); ``describe`` names
    an entry in messages.
    """

    def __init__(self, kind: str, owner: str, *, parent: Registry[T] | None = None,
                 entries: Mapping[str, T] | None = None,
                 check_name: Callable[[str], object] | None = None,
                 callable_entries: bool = True,
                 describe: Callable[[T], str] = describe_entry) -> None:
        self.kind = kind
        self.owner = owner
        self.parent = parent
        self._check_name = check_name
        self._callable_entries = callable_entries
        self._describe = describe
        self._own: dict[str, T] = {}
        self._sources: dict[str, str] = {}  # name -> the registry update() copied it from
        self._changes = 0
        self._frozen = False
        self._lock = threading.Lock()
        if parent is None:
            # nothing to fall through to: a read is the dict's own get, with no Python frame
            # (op definitions and ufunc rows are read once per op when planning and verifying)
            self.get = self._own.get  # type: ignore[method-assign, assignment]
        for name, entry in (entries or {}).items():
            self.register(name, entry)

    # -- reads -------------------------------------------------------------------------------
    def get(self, name: str) -> T | None:
        """The entry for ``name`` (own entries first, then the parent's), or None."""
        entry = self._own.get(name)
        if entry is None and self.parent is not None:
            return self.parent.get(name)
        return entry

    def __getitem__(self, name: str) -> T:
        """The entry for ``name``; KeyError naming the registry if there is none."""
        entry = self.get(name)
        if entry is None:
            raise KeyError(f"no {self.kind} named {name!r} in {self.owner}")
        return entry

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def own_names(self) -> list[str]:
        """Names registered on this registry itself, sorted."""
        return sorted(self._own)

    def own_items(self) -> Iterable[tuple[str, T]]:
        return self._own.items()

    def names(self) -> list[str]:
        """Every name this registry resolves (own and inherited), sorted."""
        inherited = self.parent.names() if self.parent is not None else []
        return sorted(set(inherited) | set(self._own))

    def items(self) -> list[tuple[str, T]]:
        """(name, entry) for every name this registry resolves, in registration order (the
        parent's first; an own entry that overrides one keeps the parent's place)."""
        merged = dict(self.parent.items()) if self.parent is not None else {}
        merged.update(self._own)
        return list(merged.items())

    def values(self) -> list[T]:
        """The entry of every name this registry resolves, in registration order."""
        return [entry for _, entry in self.items()]

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    @property
    def generation(self) -> int:
        return self._changes + (self.parent.generation if self.parent is not None else 0)

    # -- writes ------------------------------------------------------------------------------
    @overload
    def register(self, name: str, entry: T, *, allow_override: bool = False) -> T: ...
    @overload
    def register(self, name: str, entry: None = None, *, allow_override: bool = False,
                 ) -> Callable[[T], T]: ...

    def register(self, name: str, entry: T | None = None, *, allow_override: bool = False,
                 ) -> T | Callable[[T], T]:
        """Add ``entry`` under ``name``; a name that already resolves needs ``allow_override``.

        Without ``entry`` it is a decorator: ``@registry.register("ns.op")``.
        """
        if entry is None:
            def wrap(fn: T) -> T:
                return self._add(name, fn, allow_override)

            return wrap
        return self._add(name, entry, allow_override)

    def _check_writable(self) -> None:
        if self._frozen:
            raise RuntimeError(f"the {self.owner} {self.kind} registry is frozen; register on "
                               "an instance (a Runtime or a TorchConverter) instead")

    def _add(self, name: str, entry: T, allow_override: bool) -> T:
        self._check_writable()
        if self._check_name is not None:
            self._check_name(name)
        if self._callable_entries and not callable(entry):
            raise TypeError(f"{self.kind} for {name!r} must be callable, got {entry!r}")
        with self._lock:
            existing = self.get(name)
            if existing is not None and not allow_override:
                raise ValueError(
                    f"{name!r} is already registered by {self._owner_of(name)} "
                    f"({self._describe(existing)}); pass allow_override=True to replace it "
                    f"with {self._describe(entry)}")
            self._own[name] = entry
            self._changes += 1
        return entry

    def unregister(self, name: str) -> T:
        """Remove and return this registry's own entry for ``name`` (KeyError if none)."""
        self._check_writable()
        with self._lock:
            entry = self._own.pop(name)
            self._changes += 1
        return entry

    def update(self, other: Registry[T]) -> None:
        """Copy ``other``'s own entries here; a name both define raises, naming both owners."""
        self._check_writable()
        for name, entry in other.own_items():
            if name in self._own:
                raise ValueError(
                    f"{self.kind} for {name!r} is defined by both {self._owner_of(name)} "
                    f"({self._describe(self._own[name])}) and {other.owner} "
                    f"({self._describe(entry)})")
            self.register(name, entry)
            self._sources[name] = other.owner

    def freeze(self: R) -> R:
        """Refuse further registrations (the shared default registries are frozen)."""
        self._frozen = True
        return self

    def _owner_of(self, name: str) -> str:
        if name in self._own:
            return self._sources.get(name, self.owner)
        return self.parent._owner_of(name) if self.parent is not None else "?"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.owner}: {len(self._own)} own {self.kind}s>"


def frozen_union(table: R, parts: Iterable[Registry[Any]]) -> R:
    """Fill ``table`` with the own entries of every part (a name two parts define raises,
    naming both), freeze it and return it: how each shared default table is built."""
    for part in parts:
        table.update(part)
    return table.freeze()
