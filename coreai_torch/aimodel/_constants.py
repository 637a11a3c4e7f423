"""Constants of the ``.aimodel``; sub-byte ones packed the way Core AI stores them.

Core AI's runtime reads a tensor of a sub-byte element type (``ui1`` .. ``ui6``, ``si4``,
``f4E2M1FN``) as a little-endian bit stream: element ``i`` occupies bits ``i*nbits ..`` of the
buffer. That is the layout of :mod:`coreai_core.packing` (``pack_bits`` streams, and
``pack_nibbles`` for 4-bit arrays), so our packed data goes into the asset as it is and a
4-bit weight takes half a byte per element there too.

Apple's public ``coreai.authoring.constant`` stores a sub-byte array one byte per element,
which the interpreter then reads as packed data (wrong values; found with coreai-core's
interpreter, see docs/coreai-interop.md), so packed constants are built one level down,
with the same attribute builder that ``constant`` uses, given the packed bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from coreai_core import DType
from coreai_core.packing import pack_nibbles
from coreai_torch.aimodel._apple import (
    RawConstantOp,
    constant,
    from_raw,
    raw_elements_attr,
    raw_ir,
)

__all__ = ["apple_constant", "packed_constant", "packed_index_constant"]

# Our 4-bit element types and the Core AI element type of each (built in the active context).
_FOUR_BIT: dict[DType, Any] = {
    DType.int4: lambda: raw_ir.IntegerType.get_signed(4),
    DType.uint4: lambda: raw_ir.IntegerType.get_unsigned(4),
    DType.float4_e2m1fn: raw_ir.Float4E2M1FNType.get,
}


def packed_constant(stream: np.ndarray, shape: Sequence[int], element_type: Any) -> Any:
    """A Core AI constant of ``shape`` whose elements of the sub-byte ``element_type`` (an
    MLIR type) are the packed little-endian bit ``stream`` (uint8)."""
    tensor_type = raw_ir.RankedTensorType.get(list(shape), element_type)
    attr = raw_elements_attr(raw_ir.Location.unknown(), tensor_type,
                                np.ascontiguousarray(stream, dtype=np.uint8))
    return from_raw(RawConstantOp(value=attr).result)


def packed_index_constant(stream: np.ndarray, shape: Sequence[int], nbits: int) -> Any:
    """A constant of unsigned ``nbits``-bit integers (``ui{nbits}``) held by ``stream``."""
    return packed_constant(stream, shape, raw_ir.IntegerType.get_unsigned(nbits))


def apple_constant(array: np.ndarray) -> Any:
    """``array`` (already in an exported element type) as a Core AI constant; 4-bit arrays
    are stored packed, half a byte per element."""
    element = _FOUR_BIT.get(DType.of(array.dtype))
    if element is None:
        return constant(array)
    return packed_constant(pack_nibbles(array), array.shape, element())
