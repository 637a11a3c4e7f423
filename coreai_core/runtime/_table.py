"""Kernel tables: op name -> numpy kernel, with per-runtime overlays on the default table."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Mapping

from coreai_core.runtime.kernels import default_kernels
from coreai_core.runtime.kernels._registry import Kernel

__all__ = ["DEFAULT_TABLE", "KernelTable", "register_default_kernel"]

_OP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")


def _owner(fn: Kernel) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


class KernelTable:
    """Op name -> kernel. Reads fall through to ``parent``; writes stay in this table.

    ``generation`` grows whenever this table or a parent changes, so cached plans can tell
    that a kernel they resolved may have been replaced.
    """

    def __init__(self, kernels: Mapping[str, Kernel] | None = None,
                 parent: KernelTable | None = None) -> None:
        self._own: dict[str, Kernel] = dict(kernels or {})
        self.parent = parent
        self._changes = 0
        self._lock = threading.Lock()

    @property
    def generation(self) -> int:
        return self._changes + (self.parent.generation if self.parent is not None else 0)

    def get(self, op_name: str) -> Kernel | None:
        """The kernel for ``op_name`` (this table first, then the parent), or None."""
        fn = self._own.get(op_name)
        if fn is None and self.parent is not None:
            return self.parent.get(op_name)
        return fn

    def __contains__(self, op_name: object) -> bool:
        return isinstance(op_name, str) and self.get(op_name) is not None

    def names(self) -> set[str]:
        """Every op name with a kernel (own and inherited)."""
        inherited = self.parent.names() if self.parent is not None else set()
        return inherited | set(self._own)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self.names()))

    def register(self, op_name: str, fn: Kernel, *, allow_override: bool = False) -> Kernel:
        """Add ``fn`` as the kernel of ``op_name``; a duplicate raises unless overriding."""
        if not isinstance(op_name, str) or not _OP_NAME.fullmatch(op_name):
            raise ValueError(f"kernel op name must look like 'namespace.op_name', got {op_name!r}")
        if not callable(fn):
            raise TypeError(f"kernel for {op_name!r} must be callable, got {fn!r}")
        with self._lock:
            existing = self.get(op_name)
            if existing is not None and not allow_override:
                raise ValueError(
                    f"a kernel for {op_name!r} is already registered ({_owner(existing)}); "
                    "pass allow_override=True to replace it")
            self._own[op_name] = fn
            self._changes += 1
        return fn

    def unregister(self, op_name: str) -> Kernel:
        """Remove and return this table's own kernel for ``op_name`` (KeyError if none)."""
        with self._lock:
            fn = self._own.pop(op_name)
            self._changes += 1
        return fn

    def decorator(self, op_name: str, fn: Kernel | None = None, *,
                  allow_override: bool = False) -> Callable[[Kernel], Kernel] | Kernel:
        """``register`` usable as ``@table.decorator("ns.op")`` or called with ``fn``."""
        if fn is not None:
            return self.register(op_name, fn, allow_override=allow_override)

        def wrap(f: Kernel) -> Kernel:
            return self.register(op_name, f, allow_override=allow_override)

        return wrap


DEFAULT_TABLE: KernelTable = KernelTable(default_kernels())


def register_default_kernel(op_name: str, fn: Kernel | None = None, *,
                            allow_override: bool = False) -> Callable[[Kernel], Kernel] | Kernel:
    """Register a kernel in the process-wide default table (every runtime sees it).

    Usable as a decorator, ``@register_default_kernel("my_lib.op")``, or called with the
    function. Registering an op that already has a kernel raises ``ValueError`` unless
    ``allow_override=True``. Prefer ``Runtime().register_kernel`` to keep a registration
    local to one runtime.
    """
    return DEFAULT_TABLE.decorator(op_name, fn, allow_override=allow_override)
