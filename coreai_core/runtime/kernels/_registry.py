"""Kernel sets: numpy implementations attached to ops by name.

A kernel mirrors its op's definition: it is called with the operands in the op's parameter
order (a variadic operand as a list, a missing optional operand as None) followed by the
attributes as keyword arguments, and returns one array or a tuple/list of arrays (one per
result). Each family module owns a ``KernelSet`` and registers with
``@KERNELS.register("coreai.<op>")``; ``coreai_core.runtime.kernels`` lists the
family modules explicitly to build the default table.

A kernel whose work depends on shapes in ways worth deciding once (window geometry, index
plans) can carry a ``prepare`` function (:func:`prepared_by`): planning calls it once per op
with the operand types and attributes, and the plan then runs what it returns.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from coreai_core.registry import Registry

Kernel = Callable[..., Any]
# prepare(operand_types, **attributes) -> a callable with the kernel's signature, or None
Prepare = Callable[..., Kernel | None]

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


def prepared_by(prepare: Prepare) -> Callable[[Kernel], Kernel]:
    """A decorator attaching ``prepare`` to a kernel (as its ``prepare`` attribute).

    When a plan is built, ``prepare(types, **attributes)`` is called once per op running this
    kernel: ``types`` holds the operand types in the op's parameter order (None for a missing
    optional operand, a list for a variadic one), the attributes are the decoded ones the
    kernel receives. It returns a callable taking exactly the kernel's arguments and computing
    the same results (bit for bit), which the plan calls instead of the kernel, or None (the
    plan then calls the kernel). A kernel registered under another name or by a user keeps
    its own ``prepare`` or has none: the function object carries it.
    """

    def attach(fn: Kernel) -> Kernel:
        fn.prepare = prepare  # type: ignore[attr-defined]
        return fn

    return attach


def preparer_of(fn: Kernel) -> Prepare | None:
    """The ``prepare`` function attached to kernel ``fn`` by :func:`prepared_by`, or None."""
    prepare = getattr(fn, "prepare", None)
    return prepare if callable(prepare) else None
