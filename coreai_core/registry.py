"""One small registry: names -> entries, optionally layered over a parent registry.

Runtime kernel tables, kernel families, converter lowering tables and lowering families are
all this structure. Reads fall through to the parent; writes stay local, so a registration on
one runtime or converter never reaches the defaults or another instance. Registering a name
that already resolves raises, naming the existing owner, unless ``allow_override=True``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Generic, TypeVar

__all__ = ["Registry", "describe_entry"]

T = TypeVar("T")


def describe_entry(entry: object) -> str:
    """``module.qualname`` of a registered function (for error messages)."""
    mod = getattr(entry, "__module__", "?")
    return f"{mod}.{getattr(entry, '__qualname__', repr(entry))}"


class Registry(Generic[T]):
    """Name -> entry with an optional parent.

    ``kind`` names the entries in messages ("kernel", "lowering"); ``owner`` names this
    registry ("built-in", "converter", a family name). ``check_name`` validates names (it
    returns the name or raises ValueError). ``generation`` grows whenever this registry or a
    parent changes, so caches of resolved entries can tell when to refresh.
    """

    def __init__(self, kind: str, owner: str, *, parent: Registry[T] | None = None,
                 entries: Mapping[str, T] | None = None,
                 check_name: Callable[[str], object] | None = None) -> None:
        self.kind = kind
        self.owner = owner
        self.parent = parent
        self._check_name = check_name
        self._own: dict[str, T] = {}
        self._sources: dict[str, str] = {}  # name -> the registry update() copied it from
        self._changes = 0
        self._frozen = False
        self._lock = threading.Lock()
        for name, entry in (entries or {}).items():
            self.register(name, entry)

    # -- reads -------------------------------------------------------------------------------
    def get(self, name: str) -> T | None:
        """The entry for ``name`` (own entries first, then the parent's), or None."""
        entry = self._own.get(name)
        if entry is None and self.parent is not None:
            return self.parent.get(name)
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

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    @property
    def generation(self) -> int:
        return self._changes + (self.parent.generation if self.parent is not None else 0)

    # -- writes ------------------------------------------------------------------------------
    def register(self, name: str, entry: T, *, allow_override: bool = False) -> T:
        """Add ``entry`` under ``name``; a name that already resolves needs ``allow_override``."""
        if self._frozen:
            raise RuntimeError(f"the {self.owner} {self.kind} registry is frozen; register on "
                               "an instance (a Runtime or a TorchConverter) instead")
        if self._check_name is not None:
            self._check_name(name)
        if not callable(entry):
            raise TypeError(f"{self.kind} for {name!r} must be callable, got {entry!r}")
        with self._lock:
            existing = self.get(name)
            if existing is not None and not allow_override:
                raise ValueError(
                    f"{name!r} is already registered by {self._owner_of(name)} "
                    f"({describe_entry(existing)}); pass allow_override=True to replace it")
            self._own[name] = entry
            self._changes += 1
        return entry

    def decorator(self, *names: str, allow_override: bool = False,
                  ) -> Callable[[T], T]:
        """``@registry.decorator("a", "b")`` registers the function under every name."""
        def wrap(entry: T) -> T:
            for name in names:
                self.register(name, entry, allow_override=allow_override)
            return entry

        return wrap

    def unregister(self, name: str) -> T:
        """Remove and return this registry's own entry for ``name`` (KeyError if none)."""
        with self._lock:
            entry = self._own.pop(name)
            self._changes += 1
        return entry

    def update(self, other: Registry[T]) -> None:
        """Copy ``other``'s own entries here; a name both define raises, naming both owners."""
        for name, entry in other.own_items():
            if name in self._own:
                raise ValueError(
                    f"{self.kind} for {name!r} is defined by both {self._owner_of(name)} "
                    f"({describe_entry(self._own[name])}) and {other.owner} "
                    f"({describe_entry(entry)})")
            self.register(name, entry)
            self._sources[name] = other.owner

    def freeze(self) -> Registry[T]:
        """Refuse further registrations (the shared default registries are frozen)."""
        self._frozen = True
        return self

    def _owner_of(self, name: str) -> str:
        if name in self._own:
            return self._sources.get(name, self.owner)
        return self.parent._owner_of(name) if self.parent is not None else "?"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.owner}: {len(self._own)} own {self.kind}s>"
