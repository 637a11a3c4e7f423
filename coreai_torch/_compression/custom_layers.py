"""Apple's ``coreai_torch._compression.custom_layers``: the compression ops and weight modules
(defined in :mod:`coreai_torch.compression.ops` and :mod:`coreai_torch.compression.modules`)."""

from coreai_torch.compression.modules import (
    ActivationDequantizeModule,
    ActivationQuantizeModule,
    PalettizeModule,
    ScaledPalettizeModule,
    SparseModule,
    WeightDequantizeModule,
)
from coreai_torch.compression.ops import (
    constexpr_blockwise_shift_scale,
    dequantize,
    lut_to_dense,
    quantize,
    sparse_to_dense,
)
from coreai_torch.compression.ops import (
    is_fp4_data as is_fp4_quantization,
)

__all__ = [
    "ActivationDequantizeModule", "ActivationQuantizeModule", "PalettizeModule",
    "ScaledPalettizeModule", "SparseModule", "WeightDequantizeModule",
    "constexpr_blockwise_shift_scale", "dequantize", "is_fp4_quantization", "lut_to_dense",
    "quantize", "sparse_to_dense",
]
