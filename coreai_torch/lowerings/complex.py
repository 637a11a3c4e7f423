"""Built-in lowerings (complex family): complex tensors from parts and back, conjugates,
``angle``/``sgn``/``polar``.

Core AI complex tensors hold their values physically: torch's lazy conjugate bit (``_conj``)
lowers to an actual conjugate, and views (``view_as_real``) to copies with the same values.
Elementwise math on complex tensors lowers through the elementwise family.
"""

from __future__ import annotations

import math

from coreai_core import Value
from coreai_core.dialects import coreai
from coreai_torch._table import LoweringSet
from coreai_torch.utils import cast_to, result_dtype, scalar_like

LOWERINGS = LoweringSet("complex")
reg = LOWERINGS.register_torch_lowering


@reg("aten::view_as_real.default")
@reg("aten::view_as_real_copy.default")
def aten_view_as_real_default(self: Value) -> Value:
    """view_as_real(Tensor(a) self) -> Tensor(a)"""
    return coreai.view_as_real(self)


@reg("aten::view_as_complex.default")
@reg("aten::view_as_complex_copy.default")
def aten_view_as_complex_default(self: Value) -> Value:
    """view_as_complex(Tensor(a) self) -> Tensor(a)"""
    return coreai.view_as_complex(self)


@reg("aten::complex.default")
def aten_complex_default(real: Value, imag: Value) -> Value:
    """complex(Tensor real, Tensor imag) -> Tensor"""
    return coreai.complex_(real, imag)


@reg("aten::polar.default")
def aten_polar_default(abs: Value, angle: Value) -> Value:
    """polar(Tensor abs, Tensor angle) -> Tensor: abs * cos(angle) + i * abs * sin(angle)"""
    return coreai.complex_(coreai.broadcasting_mul(abs, coreai.cos(angle)),
                           coreai.broadcasting_mul(abs, coreai.sin(angle)))


@reg("aten::_conj.default")
@reg("aten::_conj_physical.default")
@reg("aten::conj_physical.default")
def aten__conj_default(self: Value) -> Value:
    """_conj(Tensor(a) self) -> Tensor(a) (a real tensor is its own conjugate)"""
    return coreai.conj(self) if self.type.element_type.is_complex else self


@reg("aten::resolve_conj.default")
def aten_resolve_conj_default(self: Value) -> Value:
    """resolve_conj(Tensor(a) self) -> Tensor(a): the values unchanged (``_conj`` already
    conjugated them physically)"""
    return self


@reg("aten::angle.default")
def aten_angle_default(self: Value) -> Value:
    """angle(Tensor self) -> Tensor: atan2(imag, real); for real x, pi where x < 0, else 0
    (NaN stays NaN)"""
    if self.type.element_type.is_complex:
        return coreai.broadcasting_atan2(coreai.imag(self), coreai.real(self))
    x = cast_to(self, result_dtype())  # a float type, also for integer inputs
    half_turn = coreai.broadcasting_where(coreai.broadcasting_less(x, scalar_like(0, x)),
                                          scalar_like(math.pi, x), scalar_like(0, x))
    return coreai.broadcasting_where(coreai.isnan(x), x, half_turn)


@reg("aten::sgn.default")
def aten_sgn_default(self: Value) -> Value:
    """sgn(Tensor self) -> Tensor: z / |z| (0 where z == 0) for complex z, sign(x) otherwise"""
    if not self.type.element_type.is_complex:
        return coreai.sign(self)
    modulus = coreai.cast(coreai.abs_(self), self.type.element_type)
    zero = coreai.broadcasting_equal(modulus, scalar_like(0, self))
    safe = coreai.broadcasting_where(zero, scalar_like(1, self), modulus)
    return coreai.broadcasting_where(zero, scalar_like(0, self),
                                     coreai.broadcasting_divide(self, safe))
