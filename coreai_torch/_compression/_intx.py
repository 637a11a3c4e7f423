"""Apple's ``coreai_torch._compression._intx`` packing functions, which coreai-opt's
``coreai_utils`` passes call to store sub-byte constants: ``nbits``-wide values as a
little-endian bit stream (:func:`coreai_core.packing.pack_bits`, Core AI's layout)."""

from __future__ import annotations

import numpy as np
import torch

from coreai_core.packing import pack_bits

__all__ = ["pack_intx", "pack_uintx"]


def _values(data: torch.Tensor | np.ndarray) -> np.ndarray:
    array = data.detach().cpu().numpy() if isinstance(data, torch.Tensor) else np.asarray(data)
    if array.dtype.kind not in "iu" and not np.array_equal(array, np.round(array)):
        raise ValueError(f"packing takes integer values, got {array.dtype} data")
    return array.astype(np.int64).reshape(-1)


def pack_uintx(uint8_data: torch.Tensor | np.ndarray, nbits: int) -> torch.Tensor:
    """Values in ``[0, 2**nbits)`` packed ``nbits`` to the bit stream, as a uint8 tensor."""
    values = _values(uint8_data)
    if values.size and (values.min() < 0 or values.max() >= 1 << nbits):
        raise ValueError(f"pack_uintx: values must lie in [0, {1 << nbits}) for {nbits} bits, "
                         f"got [{values.min()}, {values.max()}]")
    return torch.from_numpy(pack_bits(values.astype(np.uint8), nbits))


def pack_intx(int8_data: torch.Tensor | np.ndarray, nbits: int) -> torch.Tensor:
    """Signed values in ``[-2**(nbits-1), 2**(nbits-1))`` packed as their ``nbits``-bit two's
    complement, as a uint8 tensor."""
    values = _values(int8_data)
    low, high = -(1 << (nbits - 1)), 1 << (nbits - 1)
    if values.size and (values.min() < low or values.max() >= high):
        raise ValueError(f"pack_intx: values must lie in [{low}, {high}) for {nbits} bits, got "
                         f"[{values.min()}, {values.max()}]")
    return torch.from_numpy(pack_bits((values & ((1 << nbits) - 1)).astype(np.uint8), nbits))
