"""Apple's ``coreai_torch._compression._floatx``: packed float4 tensors
(:mod:`coreai_torch.compression.subbyte`)."""

from coreai_torch.compression.ops import FP4_CODE_VALUES, unpack_fp4
from coreai_torch.compression.subbyte import (
    Float4Tensor,
    SubbyteTensor,
    byte_shape_to_fp4_shape,
    fp4_shape_to_byte_shape,
)

__all__ = ["FP4_CODE_VALUES", "Float4Tensor", "SubbyteTensor", "byte_shape_to_fp4_shape",
           "fp4_shape_to_byte_shape", "unpack_fp4"]
