"""Numpy kernels of the Core AI dialect, one module per op family.

The default kernel table (``coreai_core.runtime.DEFAULT_TABLE``) is the frozen union of the
family modules listed here, explicitly; a kernel registered twice (in two families) is an
error naming both owners.
"""

from __future__ import annotations

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

__all__ = ["FAMILIES", "Kernel", "KernelSet"]

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

