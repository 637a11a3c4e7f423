"""Numpy kernels of the complex-number ops (building complex tensors and taking them apart)."""

from __future__ import annotations

import numpy as np

from coreai_core.runtime.kernels._registry import KernelSet

KERNELS = KernelSet("complex")
kernel = KERNELS.register


@kernel("coreai.complex")
def complex_(real: np.ndarray, imag: np.ndarray) -> np.ndarray:
    """real + i * imag, broadcast; the parts are stored exactly (NaN and -0.0 included)."""
    shape = np.broadcast_shapes(real.shape, imag.shape)
    out = np.empty(shape, np.result_type(real.dtype, np.complex64))
    out.real = real
    out.imag = imag
    return out


@kernel("coreai.real")
def real(x: np.ndarray) -> np.ndarray:
    """The real part."""
    return x.real.copy()


@kernel("coreai.imag")
def imag(x: np.ndarray) -> np.ndarray:
    """The imaginary part."""
    return x.imag.copy()


@kernel("coreai.conj")
def conj(x: np.ndarray) -> np.ndarray:
    """Complex conjugate."""
    return np.conjugate(x)


@kernel("coreai.view_as_real")
def view_as_real(x: np.ndarray) -> np.ndarray:
    """(..., 2) float array of (real, imag) pairs."""
    parts = np.ascontiguousarray(x).view(x.real.dtype)
    return parts.reshape(*x.shape, 2)


@kernel("coreai.view_as_complex")
def view_as_complex(x: np.ndarray) -> np.ndarray:
    """Pairs along the last axis read as complex numbers."""
    pairs = np.ascontiguousarray(x)
    return pairs.view(np.result_type(x.dtype, np.complex64)).reshape(x.shape[:-1])
