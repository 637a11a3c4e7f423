"""Kernel sets: numpy implementations attached to ops by name.

A kernel mirrors its op's definition: it is called with the operands in the op's parameter
order (a variadic operand as a list, a missing optional operand as None) followed by the
attributes as keyword arguments, and returns one array or a tuple/list of arrays (one per
result). Each family module owns a ``KernelSet`` and registers with
``@KERNELS.register("coreai.<op>")``; ``coreai_core.runtime.kernels`` lists the
family modules explicitly to build the default table.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from coreai_core.registry import Registry

Kernel = Callable[..., Any]

_OP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")


def check_op_name(op_name: str) -> str:
    """Validate a dialect op name (``namespace.op_name``)."""
    if not isinstance(op_name, str) or not _OP_NAME.fullmatch(op_name):
        raise ValueError(f"kernel op name must look like 'namespace.op_name', got {op_name!r}")
    return op_name


class KernelSet(Registry[Kernel]):
    """Kernels of one op family, keyed by op name."""

    def __init__(self, family: str) -> None:
        super().__init__("kernel", f"the {family} family", check_name=check_op_name)
        self.family = family
