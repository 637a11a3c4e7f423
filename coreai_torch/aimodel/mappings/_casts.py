"""``coreai.cast`` in a form Apple's compiler keeps exact.

Two behaviours of Apple's Core AI (coreai-core 1.0.0b3) make a plain ``cast`` differ from
ours (numpy's, torch's) semantics; ``tests/interop/test_aimodel_cast_quirks.py`` shows each:

- its compiler folds chains of casts: ``cast(cast(x, int32), float32)`` comes back as ``x``
  (the truncation is lost), and so do float -> int -> bool, int32 -> uint32 -> float32,
  float32 -> bfloat16 -> float16 (the bfloat16 rounding is lost), ...;
- its integer casts saturate where ours wrap around (int32 -300 -> int8 gives -128, ours -44;
  a negative value -> an unsigned type gives 0, ours the value modulo 2**bits).

So every cast is emitted as arithmetic that does the lossy part (truncation, wrapping) in the
source type, followed by a cast of a value the target type holds exactly: folding two such
casts gives the same values as running them one after the other. A cast that rounds (to a
narrower float) is followed by ``+ -0.0``, which the compiler keeps and which stops the fold.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from coreai_core import DType
from coreai_torch.aimodel._apple import ca, constant
from coreai_torch.aimodel._context import APPLE_DTYPES

__all__ = ["cast_exactly"]

_INT32 = DType.int32
# significand bits (with the implicit one) of the float types a cast can target
_DIGITS = {DType.float32: 24, DType.float16: 11, DType.bfloat16: 8}


def _const(value: int | float, dtype: DType) -> Any:
    return constant(np.asarray(value, dtype=dtype.numpy))


def _bits(dtype: DType) -> int:
    return np.dtype(dtype.numpy).itemsize * 8


def _signed(dtype: DType) -> bool:
    return np.dtype(dtype.numpy).kind == "i"


def _holds(dst: DType, src: DType) -> bool:
    """Whether every value of integer type ``src`` is one of ``dst``."""
    return bool(np.can_cast(np.dtype(src.numpy), np.dtype(APPLE_DTYPES[dst]), "safe"))


def _may_round(src: DType, dst: DType) -> bool:
    """Whether casting ``src`` to float type ``dst`` can change a value (round or overflow)."""
    if src is DType.bool:
        return False
    if src.is_float:
        return not (dst is DType.float32 and _bits(src) == 16)
    value_bits = _bits(src) - _signed(src)
    return value_bits > _DIGITS[dst]


def _truncated(x: Any, src: DType) -> Any:
    """``trunc(x)`` of a float: ``x - fmod(x, 1)`` (Core AI's modulo is C's ``fmod``), exact
    for every finite ``x``."""
    return ca.broadcasting_sub(x, ca.broadcasting_modulo(x, _const(1, src)))


def _wrapped(x: Any, src: DType, bits: int, signed: bool) -> Any:
    """``x`` (an integer type wider than ``bits``, signed if ``signed``) modulo ``2**bits``,
    into the range of the ``bits``-wide type: the low bits, sign-extended for a signed
    target."""
    low = ca.broadcasting_bitwise_and(x, _const((1 << bits) - 1, src))
    if not signed:
        return low
    sign = _const(1 << (bits - 1), src)
    return ca.broadcasting_sub(ca.broadcasting_bitwise_xor(low, sign), sign)


def _int32_to_uint32(x: Any) -> Any:
    # the low 31 bits cast exactly; the sign bit is put back as the top bit
    low = ca.cast(ca.broadcasting_bitwise_and(x, _const(0x7FFFFFFF, _INT32)), np.uint32)
    top = ca.broadcasting_where(ca.broadcasting_greater(_const(0, _INT32), x),
                                _const(0x80000000, DType.uint32), _const(0, DType.uint32))
    return ca.broadcasting_bitwise_or(low, top)


def _uint32_to_int32(x: Any) -> Any:
    # the low 31 bits cast exactly; a set top bit adds -2**31 (no overflow: low < 2**31)
    low = ca.cast(ca.broadcasting_bitwise_and(x, _const(0x7FFFFFFF, DType.uint32)), np.int32)
    top = ca.broadcasting_greater(x, _const(0x7FFFFFFF, DType.uint32))
    return ca.broadcasting_where(top, ca.broadcasting_add(low, _const(-(2**31), _INT32)), low)


def _int_to_int(x: Any, src: DType, dst: DType) -> Any:
    if _holds(dst, src):
        return ca.cast(x, APPLE_DTYPES[dst])
    if _bits(src) < 32 and _bits(src) <= _bits(dst):
        # a sign change at the same or a wider size: wrap from int32, which holds src exactly
        return _int_to_int(ca.cast(x, np.int32), _INT32, dst)
    if _bits(src) == _bits(dst) == 32:
        return _int32_to_uint32(x) if _signed(src) else _uint32_to_int32(x)
    if _signed(dst) and not _signed(src):
        # the low bits first (the sign extension needs a signed type): they fit int32
        low = ca.broadcasting_bitwise_and(x, _const((1 << _bits(dst)) - 1, src))
        return _int_to_int(ca.cast(low, np.int32), _INT32, dst)
    return ca.cast(_wrapped(x, src, _bits(dst), _signed(dst)), APPLE_DTYPES[dst])


def cast_exactly(x: Any, src: DType, dst: DType) -> Any:
    """Apple value ``x`` of exported element type ``src`` cast to ``dst`` with our semantics:
    floats truncate toward zero into integers, integers wrap around, nonzero is true."""
    if src is dst:
        return x
    if src.is_complex or dst.is_complex:
        return ca.cast(x, APPLE_DTYPES[dst])  # inside graphs only (mappings/complex.py)
    if dst is DType.bool:
        return ca.broadcasting_not_equal(x, _const(0, src))
    if dst.is_float:
        y = ca.cast(x, APPLE_DTYPES[dst])
        # + -0.0 is the identity on every float (-0.0 and NaN included); it stops the compiler
        # from folding this rounding cast into the next cast
        return ca.broadcasting_add(y, _const(-0.0, dst)) if _may_round(src, dst) else y
    if src.is_float:
        whole = ca.cast(_truncated(x, src), np.int32)
        return _int_to_int(whole, _INT32, dst)
    return _int_to_int(x, src, dst)
