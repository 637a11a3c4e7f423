"""Numpy kernels of the Fourier transforms (computed in double precision, rounded once)."""

from __future__ import annotations

from typing import Literal

import numpy as np

from coreai_core.runtime.kernels._registry import KernelSet

KERNELS = KernelSet("fft")
kernel = KERNELS.register

# numpy's ``norm`` names the direction that carries the scale; ours scales the result
# whatever the direction: forward "none" is numpy's "backward", inverse "none" its "forward".
NumpyNorm = Literal["backward", "ortho", "forward"]
_FORWARD_NORM: dict[str, NumpyNorm] = {"none": "backward", "by_root_n": "ortho", "by_n": "forward"}
_INVERSE_NORM: dict[str, NumpyNorm] = {"none": "forward", "by_root_n": "ortho", "by_n": "backward"}


@kernel("coreai.fft_c2c")
def fft_c2c(x: np.ndarray, *, axes: tuple[int, ...], forward: bool,
            normalization: str) -> np.ndarray:
    """fftn / ifftn over ``axes``."""
    x128 = x.astype(np.complex128)
    if forward:
        out = np.fft.fftn(x128, axes=axes, norm=_FORWARD_NORM[normalization])
    else:
        out = np.fft.ifftn(x128, axes=axes, norm=_INVERSE_NORM[normalization])
    return out.astype(x.dtype)


@kernel("coreai.fft_r2c")
def fft_r2c(x: np.ndarray, *, axes: tuple[int, ...], normalization: str,
            onesided: bool) -> np.ndarray:
    """rfftn (onesided) or fftn of a real tensor over ``axes``."""
    norm = _FORWARD_NORM[normalization]
    x64 = x.astype(np.float64)
    out = np.fft.rfftn(x64, axes=axes, norm=norm) if onesided else \
        np.fft.fftn(x64, axes=axes, norm=norm)
    return out.astype(np.result_type(x.dtype, np.complex64))


@kernel("coreai.fft_c2r")
def fft_c2r(x: np.ndarray, *, axes: tuple[int, ...], last_dim_size: int,
            normalization: str) -> np.ndarray:
    """irfftn over ``axes``; the last listed axis becomes ``last_dim_size`` samples."""
    sizes = [x.shape[a] for a in axes[:-1]] + [last_dim_size]
    out = np.fft.irfftn(x.astype(np.complex128), s=sizes, axes=axes,
                        norm=_INVERSE_NORM[normalization])
    return out.astype(x.real.dtype)
