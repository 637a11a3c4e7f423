"""Lists and dicts that tell their owner when they change: how IR edits reach the run plans.

A graph's ops, an op's operands and attributes, a program's graphs and weights are held in
these containers, so an edit through any of their methods (``append``, ``op.attributes[k] =
v``, ``del``, ...) calls ``owner._edited()``; the IR classes pass that on to the program, whose
``generation`` then moves on and cached run plans are rebuilt. Building a container (and
copying or unpickling one) reports nothing: only edits do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol, SupportsIndex, TypeVar

__all__ = ["Owner", "TrackedDict", "TrackedList", "tracked_dict", "tracked_list"]

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")


class Owner(Protocol):
    def _edited(self) -> None: ...


def tracked_list(items: Iterable[T] = (), owner: Owner | None = None,
                 adopt: Callable[[T], None] | None = None) -> TrackedList[T]:
    """A :class:`TrackedList` of ``items`` reporting to ``owner`` (``adopt`` each item)."""
    tracked: TrackedList[T] = TrackedList(items)
    tracked._owner = owner
    tracked._adopt = adopt
    if adopt is not None:
        for item in tracked:
            adopt(item)
    return tracked


def tracked_dict(items: Any = (), owner: Owner | None = None) -> TrackedDict[Any, Any]:
    """A :class:`TrackedDict` of ``items`` reporting to ``owner``."""
    tracked: TrackedDict[Any, Any] = TrackedDict(items)
    tracked._owner = owner
    return tracked


class TrackedList(list[T]):
    """A list that calls ``owner._edited()`` after every change (and ``adopt(item)`` for each
    item it gains, when given: a graph's op list makes each op point to its graph)."""

    __slots__ = ("_adopt", "_owner")
    _owner: Owner | None
    _adopt: Callable[[T], None] | None

    def _changed(self, gained: Iterable[T] = ()) -> None:
        if self._adopt is not None:
            for item in gained:
                self._adopt(item)
        if self._owner is not None:
            self._owner._edited()

    # copies and pickles rebuild the list without reporting, then restore the owner
    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        return (tracked_list, (list(self),), (self._owner, self._adopt))

    def __setstate__(self, state: tuple[Owner | None, Callable[[T], None] | None]) -> None:
        self._owner, self._adopt = state

    def append(self, item: T) -> None:  # the builders' path: kept short
        super().append(item)
        if self._adopt is not None:
            self._adopt(item)
        if self._owner is not None:
            self._owner._edited()

    def extend(self, items: Iterable[T]) -> None:
        items = list(items)
        super().extend(items)
        self._changed(items)

    def insert(self, index: SupportsIndex, item: T) -> None:
        super().insert(index, item)
        self._changed((item,))

    def __setitem__(self, index: Any, value: Any) -> None:
        if isinstance(index, slice):
            value = list(value)
        super().__setitem__(index, value)
        self._changed(value if isinstance(index, slice) else (value,))

    def __iadd__(self, items: Iterable[T]) -> TrackedList[T]:  # type: ignore[override,misc]
        self.extend(items)
        return self

    def __imul__(self, n: SupportsIndex) -> TrackedList[T]:
        super().__imul__(n)
        self._changed()
        return self

    def __delitem__(self, index: Any) -> None:
        super().__delitem__(index)
        self._changed()

    def pop(self, index: SupportsIndex = -1) -> T:
        item = super().pop(index)
        self._changed()
        return item

    def remove(self, item: T) -> None:
        super().remove(item)
        self._changed()

    def clear(self) -> None:
        super().clear()
        self._changed()

    def sort(self, *args: Any, **kwargs: Any) -> None:
        super().sort(*args, **kwargs)
        self._changed()

    def reverse(self) -> None:
        super().reverse()
        self._changed()


class TrackedDict(dict[K, V]):
    """A dict that calls ``owner._edited()`` after every change."""

    __slots__ = ("_owner",)
    _owner: Owner | None

    def _changed(self) -> None:
        if self._owner is not None:
            self._owner._edited()

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        return (tracked_dict, (dict(self),), (self._owner,))

    def __setstate__(self, state: tuple[Owner | None]) -> None:
        (self._owner,) = state

    def __setitem__(self, key: K, value: V) -> None:
        super().__setitem__(key, value)
        self._changed()

    def __delitem__(self, key: K) -> None:
        super().__delitem__(key)
        self._changed()

    def __ior__(self, other: Any) -> TrackedDict[K, V]:  # type: ignore[override,misc]
        self.update(other)
        return self

    def update(self, *args: Any, **kwargs: Any) -> None:
        super().update(*args, **kwargs)
        self._changed()

    def setdefault(self, key: K, default: Any = None) -> V:
        changed = key not in self
        value = super().setdefault(key, default)
        if changed:
            self._changed()
        return value

    def pop(self, key: K, *default: Any) -> Any:
        value = super().pop(key, *default)
        self._changed()
        return value

    def popitem(self) -> tuple[K, V]:
        item = super().popitem()
        self._changed()
        return item

    def clear(self) -> None:
        super().clear()
        self._changed()
