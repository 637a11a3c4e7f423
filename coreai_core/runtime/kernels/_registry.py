"""Kernel sets: numpy implementations attached to ops by name.

A kernel mirrors its op's definition: it is called with the operands in the op's parameter
order (a variadic operand as a list, a missing optional operand as None) followed by the
attributes as keyword arguments, and returns one array or a tuple/list of arrays (one per
result). Each family module owns a ``KernelSet``; ``coreai_core.runtime.kernels`` lists the
family modules explicitly to build the default table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Kernel = Callable[..., Any]


class KernelSet:
    """Kernels of one op family, keyed by op name."""

    def __init__(self, family: str) -> None:
        self.family = family
        self.kernels: dict[str, Kernel] = {}

    def kernel(self, op_name: str) -> Callable[[Kernel], Kernel]:
        def register(fn: Kernel) -> Kernel:
            if op_name in self.kernels:
                raise ValueError(f"{self.family}: kernel for {op_name!r} is already defined "
                                 f"by {self.kernels[op_name].__qualname__}")
            self.kernels[op_name] = fn
            return fn

        return register
