"""Discrete Fourier transforms over several axes, with torch's ``_fft_*`` semantics.

Over transformed axes ``a`` of (signal) lengths ``n_a``, the unnormalized forward transform is
``X[k] = sum_j x[j] * prod_a exp(-2*pi*i * j_a * k_a / n_a)`` (the sum over every index ``j``
of those axes, the other axes batched), and the inverse uses ``exp(+2*pi*i ...)``.
``normalization`` scales the result, whatever the direction, with ``n = prod_a n_a``:
``"none"`` by 1, ``"by_root_n"`` by ``1/sqrt(n)``, ``"by_n"`` by ``1/n``.
(``torch.fft.fft(norm="backward")`` is a forward transform with ``"none"``;
``torch.fft.ifft(norm="backward")`` an inverse one with ``"by_n"``.)

- ``fft_c2c``: complex to complex, forward or inverse.
- ``fft_r2c``: a real signal's forward transform; ``onesided`` keeps the non-redundant half
  ``n_last // 2 + 1`` of the last listed axis (``rfftn``).
- ``fft_c2r``: the inverse of a onesided transform: the last listed axis holds
  ``last_dim_size // 2 + 1`` entries of a Hermitian-symmetric spectrum and becomes
  ``last_dim_size`` real samples, its signal length ``n_a`` (``irfftn``; the imaginary parts
  of the entries that must be real, index 0 and the Nyquist entry, are ignored).

The runtime computes every transform in double precision (numpy.fft) and rounds the result
once to the output type.
"""

from __future__ import annotations

from typing import Literal

from coreai_core._dtypes import DType
from coreai_core._ir import TensorType, Value
from coreai_core._opdef import Ints, builder_names, defop
from coreai_core._shapes import expect, norm_axis
from coreai_core.errors import TypeRuleError

Normalization = Literal["none", "by_root_n", "by_n"]


def _fft_axes(x: Value, axes: Ints) -> list[int]:
    expect(len(axes) >= 1, "axes must name at least one axis to transform")
    out = [norm_axis(a, x.type.rank) for a in axes]
    expect(len(set(out)) == len(out), f"axes {list(axes)} repeat an axis")
    return out


def _expect_real(x: Value) -> DType:
    dtype = x.type.element_type
    expect(dtype in (DType.float32, DType.float64),
           f"x must be a float32 or float64 tensor, got {x.type}")
    return dtype


@defop(traits=("heavy",))
def fft_c2c(x: Value, axes: Ints, forward: bool, normalization: Normalization = "none",
            ) -> TensorType:
    """Complex-to-complex transform over ``axes`` (forward: ``exp(-2*pi*i ...)``); same type."""
    expect(x.type.element_type.is_complex, f"x must be a complex tensor, got {x.type}")
    _fft_axes(x, axes)
    return x.type


@defop(traits=("heavy",))
def fft_r2c(x: Value, axes: Ints, normalization: Normalization = "none",
            onesided: bool = True) -> TensorType:
    """Forward transform of a real tensor over ``axes``; complex of the same precision. With
    ``onesided`` the last listed axis keeps ``n // 2 + 1`` entries."""
    dtype = _expect_real(x)
    ax = _fft_axes(x, axes)
    shape = list(x.type.shape)
    if onesided:
        last = shape[ax[-1]]
        if not isinstance(last, int):
            raise TypeRuleError(f"a onesided transform needs a static size on axis {ax[-1]}, "
                                f"got {x.type}")
        shape[ax[-1]] = last // 2 + 1
    return TensorType(shape, dtype.complex_dtype)


@defop(traits=("heavy",))
def fft_c2r(x: Value, axes: Ints, last_dim_size: int, normalization: Normalization = "none",
            ) -> TensorType:
    """Inverse transform of a onesided spectrum over ``axes`` into a real tensor whose last
    listed axis has ``last_dim_size`` elements (its input size must be
    ``last_dim_size // 2 + 1``)."""
    dtype = x.type.element_type
    expect(dtype.is_complex, f"x must be a complex tensor, got {x.type}")
    ax = _fft_axes(x, axes)
    expect(last_dim_size >= 1, f"last_dim_size must be positive, got {last_dim_size}")
    shape = list(x.type.shape)
    have = shape[ax[-1]]
    expect(not isinstance(have, int) or have == last_dim_size // 2 + 1,
           f"axis {ax[-1]} of x must hold last_dim_size // 2 + 1 = {last_dim_size // 2 + 1} "
           f"entries, got {x.type}")
    shape[ax[-1]] = last_dim_size
    return TensorType(shape, dtype.real_dtype)


# the builders of the ops defined above (see builder_names)
__all__ = [*builder_names(__name__)]
