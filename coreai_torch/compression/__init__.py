"""Compressed and quantized weights on the torch side.

``coreai_torch.compression.ops`` defines the ``torch.ops.coreai.*`` custom ops that rebuild
compressed weights (palettized, blockwise-quantized, sparse) and quantize/dequantize tensors;
``coreai_torch.compression.helpers`` compresses an ``nn.Module``'s Linear, Conv and Embedding
weights in place so that the exported model carries those ops. The ops are registered with
torch when this package is imported, which ``import coreai_torch`` does.
"""

from coreai_torch.compression import ops
from coreai_torch.compression.helpers import (
    compressed_size,
    palettize,
    prune,
    quantize_weights,
)

__all__ = ["compressed_size", "ops", "palettize", "prune", "quantize_weights"]
