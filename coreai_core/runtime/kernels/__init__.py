"""Numpy kernels of the Core AI dialect, one module per op family.

The default kernel table is built from the family modules listed here, explicitly; a kernel
registered twice (in two families) is an error naming both owners.
"""

from __future__ import annotations

from coreai_core.registry import Registry
from coreai_core.runtime.kernels import (
    complex,
    compression,
    control,
    elementwise,
    fft,
    linalg,
    nn,
    random,
    special,
    tensor,
)
from coreai_core.runtime.kernels._registry import Kernel, KernelSet

__all__ = ["FAMILIES", "Kernel", "KernelSet", "default_kernels"]

FAMILIES: tuple[KernelSet, ...] = (
    elementwise.KERNELS,
    tensor.KERNELS,
    nn.KERNELS,
    control.KERNELS,
    complex.KERNELS,
    fft.KERNELS,
    compression.KERNELS,
    random.KERNELS,
    special.KERNELS,
    linalg.KERNELS,
)


def default_kernels() -> dict[str, Kernel]:
    """Op name -> kernel for every family, merged; duplicates across families raise."""
    merged: Registry[Kernel] = Registry("kernel", "the default table")
    for family in FAMILIES:
        merged.update(family)
    return dict(merged.own_items())
