"""Complex numbers: building complex tensors from parts and taking them apart.

complex64 holds float32 parts, complex128 float64 parts (``DType.real_dtype``). Elementwise
arithmetic and transcendental ops accept complex operands directly (see ``_elementwise``);
the ops here convert between complex tensors and their real parts.
"""

from __future__ import annotations

from coreai_core._dtypes import DType
from coreai_core._ir import TensorType, Value
from coreai_core._opdef import builder_names, defop
from coreai_core._shapes import broadcast_shapes, expect, same_dtype


def _expect_complex(x: Value, what: str = "x") -> DType:
    dtype = x.type.element_type
    expect(dtype.is_complex, f"{what} must be a complex tensor, got {x.type}")
    return dtype


def _expect_parts(x: Value, what: str) -> DType:
    dtype = x.type.element_type
    expect(dtype in (DType.float32, DType.float64),
           f"{what} must be a float32 or float64 tensor (the parts of complex64 or "
           f"complex128), got {x.type}")
    return dtype


@defop(traits=("elementwise",))
def complex_(real: Value, imag: Value) -> TensorType:
    """``real + i * imag``; float32 parts give complex64, float64 complex128. Numpy
    broadcasting."""
    _expect_parts(real, "real")
    _expect_parts(imag, "imag")
    dtype = same_dtype(real, imag)
    return TensorType(broadcast_shapes(real.type.shape, imag.type.shape), dtype.complex_dtype)


@defop(traits=("elementwise", "unary"))
def real(x: Value) -> TensorType:
    """The real part of a complex tensor (float32 for complex64, float64 for complex128)."""
    return x.type.with_dtype(_expect_complex(x).real_dtype)


@defop(traits=("elementwise", "unary"))
def imag(x: Value) -> TensorType:
    """The imaginary part of a complex tensor (float32 for complex64, float64 for complex128)."""
    return x.type.with_dtype(_expect_complex(x).real_dtype)


@defop(traits=("elementwise", "unary"))
def conj(x: Value) -> TensorType:
    """Complex conjugate ``real - i * imag`` (the imaginary part's sign flips, NaN included)."""
    _expect_complex(x)
    return x.type


@defop()
def view_as_real(x: Value) -> TensorType:
    """A complex tensor of shape ``S`` as its parts, shape ``S + [2]`` (real at index 0,
    imaginary at index 1), like ``torch.view_as_real``."""
    return TensorType((*x.type.shape, 2), _expect_complex(x).real_dtype)


@defop()
def view_as_complex(x: Value) -> TensorType:
    """The inverse of ``view_as_real``: a float32/float64 tensor of shape ``S + [2]`` read as
    complex numbers of shape ``S`` (index 0 of the last axis is the real part)."""
    dtype = _expect_parts(x, "x")
    expect(x.type.rank >= 1 and x.type.shape[-1] == 2,
           f"the last axis of x must have size 2 (real, imag), got {x.type}")
    return TensorType(x.type.shape[:-1], dtype.complex_dtype)


# the builders of the ops defined above (see builder_names)
__all__ = [*builder_names(__name__)]
