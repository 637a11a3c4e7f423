"""Built-in lowerings (fft family): torch's ``_fft_r2c``, ``_fft_c2r`` and ``_fft_c2c``, the
Core ATen ops every ``torch.fft`` function, ``stft`` and ``istft`` decompose into.

torch's ``normalization`` integer scales the result whatever the direction: 0 by 1, 1 by
``1/sqrt(n)``, 2 by ``1/n`` (n the number of points transformed), which is the dialect's
``normalization`` attribute of the ``fft_*`` ops.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from coreai_core import Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.utils import normalize_dim

LOWERINGS = LoweringSet("fft")
reg = LOWERINGS.register_torch_lowering

Normalization = Literal["none", "by_root_n", "by_n"]
_NORMALIZATION: tuple[Normalization, ...] = ("none", "by_root_n", "by_n")


def _normalization(value: int) -> Normalization:
    if value not in range(len(_NORMALIZATION)):
        raise ValueError(f"FFT normalization must be 0 (none), 1 (1/sqrt(n)) or 2 (1/n), "
                         f"got {value}")
    return _NORMALIZATION[value]


def _axes(x: Value, dim: Sequence[int | Value]) -> list[int]:
    axes = [d for d in dim if isinstance(d, int)]
    if len(axes) != len(dim):
        raise NotImplementedError("FFT dims must be static ints")
    return [normalize_dim(d, x.type.rank) for d in axes]


@reg("aten::_fft_r2c.default")
def aten__fft_r2c_default(self: Value, dim: list[int], normalization: int,
                          onesided: bool) -> Value:
    """_fft_r2c(Tensor self, int[] dim, int normalization, bool onesided) -> Tensor"""
    return coreai.fft_r2c(self, axes=_axes(self, dim),
                          normalization=_normalization(normalization), onesided=onesided)


@reg("aten::_fft_c2r.default")
def aten__fft_c2r_default(self: Value, dim: list[int], normalization: int,
                          last_dim_size: int | Value) -> Value:
    """_fft_c2r(Tensor self, int[] dim, int normalization, SymInt last_dim_size) -> Tensor"""
    if isinstance(last_dim_size, Value):
        raise NotImplementedError("_fft_c2r needs a static last_dim_size (the output length)")
    return coreai.fft_c2r(self, axes=_axes(self, dim), last_dim_size=last_dim_size,
                          normalization=_normalization(normalization))


@reg("aten::_fft_c2c.default")
def aten__fft_c2c_default(self: Value, dim: list[int | Value], normalization: int,
                          forward: bool) -> Value:
    """_fft_c2c(Tensor self, SymInt[] dim, int normalization, bool forward) -> Tensor"""
    return coreai.fft_c2c(self, axes=_axes(self, dim), forward=forward,
                          normalization=_normalization(normalization))
