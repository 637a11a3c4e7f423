"""Apple's ``coreai_torch._compression._types``: the integer element types coreai-opt's
``coreai_utils`` passes name by string (``"int4"``, ``"uint8"``, ...).

coreai-opt reads a type's width and signedness from it and the numpy dtype that holds its
values (sub-byte values are held one per byte, in int8 or uint8, and packed by
:mod:`coreai_torch._compression._intx` when a constant is built). Only what those passes use
is here.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

__all__ = ["IntegerType", "builtin_to_string", "is_int", "nptype_from_builtin",
           "string_to_builtin"]


@attrs.frozen
class IntegerType:
    """An integer element type of ``bits`` bits."""

    name: str
    bits: int
    signed: bool

    def get_bitwidth(self) -> int:
        return self.bits

    def is_unsigned(self) -> bool:
        return not self.signed

    def __str__(self) -> str:
        return self.name


_TYPES = {t.name: t for t in [
    *(IntegerType(f"int{b}", b, True) for b in (2, 4, 8, 16, 32, 64)),
    *(IntegerType(f"uint{b}", b, False) for b in (1, 2, 3, 4, 6, 8, 16, 32, 64))]}


def string_to_builtin(name: str) -> IntegerType:
    """The type named ``name`` (``"int4"``, ``"uint8"``, ...)."""
    found = _TYPES.get(str(name))
    if found is None:
        raise KeyError(f"no integer element type {name!r}; known: {', '.join(_TYPES)}")
    return found


def builtin_to_string(builtin: Any) -> str:
    """The name of ``builtin`` (inverse of :func:`string_to_builtin`)."""
    if not isinstance(builtin, IntegerType):
        raise TypeError(f"expected an integer element type, got {builtin!r}")
    return builtin.name


def is_int(builtin: Any) -> bool:
    """Whether ``builtin`` is an integer element type."""
    return isinstance(builtin, IntegerType)


def nptype_from_builtin(builtin: Any) -> np.dtype[Any]:
    """The numpy dtype holding values of ``builtin``: the smallest integer type of its
    signedness that fits (sub-byte types in int8 / uint8, one value per byte)."""
    if not isinstance(builtin, IntegerType):
        raise TypeError(f"expected an integer element type, got {builtin!r}")
    bits = max(8, 1 << (builtin.bits - 1).bit_length())
    return np.dtype(f"{'i' if builtin.signed else 'u'}{bits // 8}")
