"""Compressed and quantized weights on the torch side.

``coreai_torch.compression.ops`` defines the five ``torch.ops.coreai.*`` compression ops with
the schemas of Apple's ``coreai-torch`` (what Apple's ``coreai-opt`` emits);
``coreai_torch.compression.packed_ops`` the ``torch.ops.coreaix.*`` ops of this project that
keep the torch-side storage packed; ``coreai_torch.compression.helpers`` compresses an
``nn.Module``'s Linear, Conv and Embedding weights in place with the latter, and
``coreai_torch.compression.modules`` holds the weight modules (``PalettizeModule``, ...) that
coreai-opt's ``finalize()`` swaps in (through ``coreai_torch._compression``). The ops are
registered with torch when this package is imported, which ``import coreai_torch`` does.
"""

from coreai_torch.compression import modules, ops, packed_ops
from coreai_torch.compression.helpers import (
    compressed_size,
    palettize,
    prune,
    quantize_weights,
)

__all__ = ["compressed_size", "modules", "ops", "packed_ops", "palettize", "prune",
           "quantize_weights"]
