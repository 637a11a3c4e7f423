"""Bit packing of compressed weights, shared by the runtime kernels and the artifact format.

- :func:`pack_bits` / :func:`unpack_bits`: unsigned ``nbits``-wide codes (1 to 8 bits) as a
  little-endian bit stream: code ``i`` occupies bits ``i*nbits .. i*nbits+nbits-1`` of the
  stream, bit ``b`` of the stream being bit ``b % 8`` of byte ``b // 8``. Palettization
  indices (``coreai.lut_to_dense``) and sparsity masks (1 bit, ``coreai.sparse_to_dense``)
  use this layout.
- :func:`pack_nibbles` / :func:`unpack_nibbles`: an array of a 4-bit element type (``int4``,
  ``uint4``, ``float4_e2m1fn``) two per byte, element ``2k`` in the low nibble of byte ``k``.
  ``numpy`` holds such arrays one element per byte (ml_dtypes); saved artifacts hold them
  packed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from coreai_core._dtypes import SUB_BYTE, DType

__all__ = ["pack_bits", "packed_size", "pack_nibbles", "unpack_bits", "unpack_nibbles"]


def packed_size(count: int, nbits: int) -> int:
    """Bytes holding ``count`` codes of ``nbits`` bits."""
    return (count * nbits + 7) // 8


def _check_nbits(nbits: int) -> None:
    if not isinstance(nbits, int) or not 1 <= nbits <= 8:
        raise ValueError(f"nbits must be an int from 1 to 8, got {nbits!r}")


def pack_bits(codes: np.ndarray, nbits: int) -> np.ndarray:
    """Pack unsigned integer codes (each < 2**nbits) into a uint8 bit stream."""
    _check_nbits(nbits)
    flat = np.asarray(codes).reshape(-1)
    if flat.size and (flat.dtype.kind not in "iu" or flat.min() < 0 or flat.max() >= 1 << nbits):
        raise ValueError(f"codes must be integers in [0, {1 << nbits}) to pack in {nbits} bits")
    bits = (flat.astype(np.uint8)[:, None] >> np.arange(nbits, dtype=np.uint8)) & 1
    return np.packbits(bits.reshape(-1), bitorder="little")


def unpack_bits(packed: np.ndarray, nbits: int, count: int) -> np.ndarray:
    """The first ``count`` ``nbits``-wide codes of a bit stream, as uint8."""
    _check_nbits(nbits)
    packed = np.asarray(packed)
    if packed.dtype != np.uint8 or packed.ndim != 1:
        raise ValueError(f"a packed bit stream is a 1-D uint8 array, got {packed.dtype}"
                         f"{list(packed.shape)}")
    if packed.size != packed_size(count, nbits):
        raise ValueError(f"{count} codes of {nbits} bits take {packed_size(count, nbits)} "
                         f"bytes, got {packed.size}")
    bits = np.unpackbits(packed, count=count * nbits, bitorder="little").reshape(count, nbits)
    codes = bits[:, 0].copy()
    for b in range(1, nbits):
        codes |= bits[:, b] << b
    return codes


def pack_nibbles(data: np.ndarray) -> np.ndarray:
    """A 4-bit array (int4, uint4, float4_e2m1fn) as a 1-D uint8 array of half its size."""
    data = np.asarray(data)
    if DType.of(data.dtype) not in SUB_BYTE:
        raise ValueError(f"pack_nibbles packs 4-bit element types, got {data.dtype}")
    nib = np.ascontiguousarray(data).reshape(-1).view(np.uint8) & 0x0F
    if nib.size % 2:
        nib = np.concatenate([nib, np.zeros(1, np.uint8)])
    return (nib[0::2] | (nib[1::2] << 4)).astype(np.uint8)


def unpack_nibbles(packed: np.ndarray, dtype: DType | str, shape: Sequence[int]) -> np.ndarray:
    """Inverse of :func:`pack_nibbles`: the array of ``dtype`` and ``shape``.

    Raises ValueError for a wrong size or a non-zero padding nibble (a malformed stream).
    """
    dtype = DType.of(dtype)
    if dtype not in SUB_BYTE:
        raise ValueError(f"unpack_nibbles unpacks 4-bit element types, got {dtype}")
    packed = np.asarray(packed)
    count = int(np.prod(shape, dtype=np.int64))
    if packed.dtype != np.uint8 or packed.shape != ((count + 1) // 2,):
        raise ValueError(f"{count} 4-bit elements take a uint8[{(count + 1) // 2}] array, got "
                         f"{packed.dtype}{list(packed.shape)}")
    nib = np.empty(2 * packed.size, np.uint8)
    nib[0::2] = packed & 0x0F
    nib[1::2] = packed >> 4
    if count % 2 and nib[-1]:
        raise ValueError("the padding nibble of an odd-sized 4-bit array is not zero")
    nib = nib[:count]
    if dtype is DType.int4:
        nib = np.where(nib >= 8, nib.astype(np.int16) - 16, nib).astype(np.int8)
        return nib.astype(dtype.numpy).reshape(tuple(shape))
    # uint4 and float4_e2m1fn hold their 4-bit code in the low bits of their byte
    return nib.view(dtype.numpy).reshape(tuple(shape))
