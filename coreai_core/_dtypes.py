"""Element types of the Core AI dialect and their numpy / torch equivalents."""

from __future__ import annotations

import builtins
import enum
from typing import Any

import ml_dtypes
import numpy as np


class DType(enum.Enum):
    """Element type of a tensor. The value is the canonical name used in text and APIs."""

    bool = "bool"
    int8 = "int8"
    int16 = "int16"
    int32 = "int32"
    int64 = "int64"
    uint8 = "uint8"
    uint16 = "uint16"
    uint32 = "uint32"
    uint64 = "uint64"
    float16 = "float16"
    bfloat16 = "bfloat16"
    float32 = "float32"
    float64 = "float64"
    complex64 = "complex64"
    complex128 = "complex128"
    # narrow types of compressed weights and quantized tensors (numpy via ml_dtypes; a 4-bit
    # element takes one byte in memory and half a byte in a saved artifact)
    int4 = "int4"
    uint4 = "uint4"
    float4_e2m1fn = "float4_e2m1fn"
    float8_e4m3fn = "float8_e4m3fn"
    float8_e5m2 = "float8_e5m2"

    def __repr__(self) -> str:
        return f"DType.{self.value}"

    def __str__(self) -> str:
        return self.value

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype holding this element type (ml_dtypes for bfloat16)."""
        return _TO_NUMPY[self]

    @property
    def torch(self) -> Any:
        """The torch dtype of this element type (None where torch has no usable one)."""
        # torch is imported only when torch is asked for: importing coreai_core never loads it
        import torch

        if self in SUB_BYTE:
            return None  # torch's 4-bit dtypes are placeholders without kernels
        return getattr(torch, self.value)

    @property
    def bits(self) -> int:
        """Width of one element in bits (4 for the sub-byte types)."""
        return 4 if self in SUB_BYTE else 8 * self.itemsize

    @property
    def is_float(self) -> builtins.bool:
        return self in _FLOATS

    @property
    def is_complex(self) -> builtins.bool:
        """True for complex64 and complex128 (``is_float`` is False for them)."""
        return self in _COMPLEX_PART

    @property
    def real_dtype(self) -> DType:
        """The type of a complex type's real and imaginary parts; other types unchanged."""
        return _COMPLEX_PART.get(self, self)

    @property
    def complex_dtype(self) -> DType:
        """The complex type whose parts are this float type (complex types unchanged)."""
        if self.is_complex:
            return self
        for c, part in _COMPLEX_PART.items():
            if part is self:
                return c
        raise TypeError(f"no complex element type has {self} parts; use float32 or float64")

    @property
    def is_int(self) -> builtins.bool:
        """True for signed and unsigned integers (not bool)."""
        return self in _INTS

    @property
    def is_signed(self) -> builtins.bool:
        return self in _FLOATS or self in _COMPLEX_PART or self.value.startswith("int")

    @property
    def itemsize(self) -> int:
        return self.numpy.itemsize

    @classmethod
    def of(cls, value: Any) -> DType:
        """Convert a DType, its name, a numpy dtype/type or a torch dtype to a DType."""
        if type(value) is DType:
            return value
        if isinstance(value, str):
            try:
                return cls(_ALIASES.get(value, value))
            except ValueError:
                raise ValueError(
                    f"unknown element type {value!r}; expected one of {[d.value for d in cls]}"
                ) from None
        if value is bool:
            return cls.bool
        if value is int:
            return cls.int64
        if value is float:
            return cls.float32
        mod = type(value).__module__
        if mod.startswith("torch"):
            name = str(value).removeprefix("torch.")
            return cls.of(name)
        try:
            dt = np.dtype(value)
        except TypeError:
            raise TypeError(f"cannot interpret {value!r} as an element type") from None
        found = _FROM_NUMPY.get(dt)
        if found is None:
            raise TypeError(f"numpy dtype {dt} has no Core AI element type")
        return found


_TO_NUMPY = {
    DType.bool: np.dtype(np.bool_),
    DType.int8: np.dtype(np.int8),
    DType.int16: np.dtype(np.int16),
    DType.int32: np.dtype(np.int32),
    DType.int64: np.dtype(np.int64),
    DType.uint8: np.dtype(np.uint8),
    DType.uint16: np.dtype(np.uint16),
    DType.uint32: np.dtype(np.uint32),
    DType.uint64: np.dtype(np.uint64),
    DType.float16: np.dtype(np.float16),
    DType.bfloat16: np.dtype(ml_dtypes.bfloat16),
    DType.float32: np.dtype(np.float32),
    DType.float64: np.dtype(np.float64),
    DType.complex64: np.dtype(np.complex64),
    DType.complex128: np.dtype(np.complex128),
    DType.int4: np.dtype(ml_dtypes.int4),
    DType.uint4: np.dtype(ml_dtypes.uint4),
    DType.float4_e2m1fn: np.dtype(ml_dtypes.float4_e2m1fn),
    DType.float8_e4m3fn: np.dtype(ml_dtypes.float8_e4m3fn),
    DType.float8_e5m2: np.dtype(ml_dtypes.float8_e5m2),
}
_FROM_NUMPY = {v: k for k, v in _TO_NUMPY.items()}
_FLOATS = frozenset({DType.float16, DType.bfloat16, DType.float32, DType.float64,
                     DType.float4_e2m1fn, DType.float8_e4m3fn, DType.float8_e5m2})
# Element types narrower than a byte: stored packed two per byte in saved artifacts.
SUB_BYTE = frozenset({DType.int4, DType.uint4, DType.float4_e2m1fn})
_COMPLEX_PART = {DType.complex64: DType.float32, DType.complex128: DType.float64}
_INTS = frozenset(
    d for d in DType if d.value.startswith(("int", "uint"))
)
_ALIASES = {
    "f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
    "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64", "i1": "bool",
    "half": "float16", "float": "float32", "double": "float64", "long": "int64", "int": "int32",
    "c64": "complex64", "c128": "complex128", "cfloat": "complex64", "cdouble": "complex128",
}

# Short spellings used in the text form, e.g. tensor<2x3xf32>.
SHORT_NAME = {
    DType.bool: "i1", DType.int8: "i8", DType.int16: "i16", DType.int32: "i32",
    DType.int64: "i64", DType.uint8: "u8", DType.uint16: "u16", DType.uint32: "u32",
    DType.uint64: "u64", DType.float16: "f16", DType.bfloat16: "bf16", DType.float32: "f32",
    DType.float64: "f64",
    DType.complex64: "c64", DType.complex128: "c128",
    DType.int4: "i4", DType.uint4: "u4", DType.float4_e2m1fn: "f4E2M1FN",
    DType.float8_e4m3fn: "f8E4M3FN", DType.float8_e5m2: "f8E5M2",
}


def promote_types(a: DType, b: DType) -> DType:
    """PyTorch's promotion of two tensor element types (category first, then width).

    A complex type meeting a float type takes parts wide enough for both
    (complex64 with float64 gives complex128, as in torch).
    """
    if a == b:
        return a
    if a.is_complex or b.is_complex:
        parts = [d.real_dtype for d in (a, b) if d.is_complex or d.is_float]
        part = promote_types(*parts) if len(parts) == 2 else parts[0]
        return DType.complex128 if part is DType.float64 else DType.complex64
    ca, cb = _category(a), _category(b)
    if ca != cb:
        return a if ca > cb else b
    if ca == 2:
        if {a, b} == {DType.float16, DType.bfloat16}:
            return DType.float32
        return a if a.itemsize >= b.itemsize else b
    if a.is_signed == b.is_signed:
        return a if a.itemsize >= b.itemsize else b
    signed, unsigned = (a, b) if a.is_signed else (b, a)
    if signed.itemsize > unsigned.itemsize:
        return signed
    wider = {1: DType.int16, 2: DType.int32, 4: DType.int64}.get(unsigned.itemsize)
    if wider is None:
        raise TypeError(f"no common element type for {a} and {b}")
    return wider


def _category(d: DType) -> int:
    return 0 if d is DType.bool else (2 if d.is_float else 1)
