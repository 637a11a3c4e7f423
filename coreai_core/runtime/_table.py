"""Kernel tables: op name -> numpy kernel, with per-runtime overlays on the default table."""

from __future__ import annotations

from collections.abc import Mapping

from coreai_core.registry import Registry, frozen_union
from coreai_core.runtime.kernels import FAMILIES
from coreai_core.runtime.kernels._registry import Kernel, check_op_name

__all__ = ["DEFAULT_TABLE", "KernelTable"]


class KernelTable(Registry[Kernel]):
    """Op name -> kernel. Reads fall through to ``parent``; writes stay in this table.

    ``generation`` grows whenever this table or a parent changes, so cached plans can tell
    that a kernel they resolved may have been replaced.
    """

    def __init__(self, kernels: Mapping[str, Kernel] | None = None,
                 parent: KernelTable | None = None, *, owner: str = "a runtime") -> None:
        super().__init__("kernel", owner, parent=parent, entries=kernels,
                         check_name=check_op_name)


# The kernels of every family, frozen like the built-in lowering table: register a kernel on
# a Runtime (``Runtime.register_kernel``), whose table has this one as parent.
DEFAULT_TABLE: KernelTable = frozen_union(KernelTable(owner="the default table"), FAMILIES)
