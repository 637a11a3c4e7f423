"""Kernel tables: op name -> numpy kernel, with per-runtime overlays on the default table."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from coreai_core.registry import Registry
from coreai_core.runtime.kernels import FAMILIES
from coreai_core.runtime.kernels._registry import Kernel, check_op_name

__all__ = ["DEFAULT_TABLE", "KernelTable", "register_default_kernel"]


class KernelTable(Registry[Kernel]):
    """Op name -> kernel. Reads fall through to ``parent``; writes stay in this table.

    ``generation`` grows whenever this table or a parent changes, so cached plans can tell
    that a kernel they resolved may have been replaced.
    """

    def __init__(self, kernels: Mapping[str, Kernel] | None = None,
                 parent: KernelTable | None = None, *, owner: str = "a runtime") -> None:
        super().__init__("kernel", owner, parent=parent, entries=kernels,
                         check_name=check_op_name)

    def decorator(self, op_name: str, fn: Kernel | None = None, *,  # type: ignore[override]
                  allow_override: bool = False) -> Callable[[Kernel], Kernel] | Kernel:
        """``register`` usable as ``@table.decorator("ns.op")`` or called with ``fn``."""
        if fn is not None:
            return self.register(op_name, fn, allow_override=allow_override)
        return super().decorator(op_name, allow_override=allow_override)


def _build_default() -> KernelTable:
    table = KernelTable(owner="the default table")
    for family in FAMILIES:
        table.update(family)
    return table


DEFAULT_TABLE: KernelTable = _build_default()


def register_default_kernel(op_name: str, fn: Kernel | None = None, *,
                            allow_override: bool = False) -> Callable[[Kernel], Kernel] | Kernel:
    """Register a kernel in the process-wide default table (every runtime sees it).

    Usable as a decorator, ``@register_default_kernel("my_lib.op")``, or called with the
    function. Registering an op that already has a kernel raises ``ValueError`` unless
    ``allow_override=True``. Prefer ``Runtime().register_kernel`` to keep a registration
    local to one runtime.
    """
    return DEFAULT_TABLE.decorator(op_name, fn, allow_override=allow_override)
