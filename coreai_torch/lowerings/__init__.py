"""Built-in lowerings, one module per op family or family part, collected into the default table.

Modules mirror the dialect's families (``coreai_core/dialects/_<family>.py``): a module is
named ``<family>.py`` or, where a family needs several files, ``<family>_<part>.py``
(``nn_pooling.py``, ``tensor_shape.py``); modules starting with ``_`` are shared helpers.
``tests/test_family_names.py`` checks the rule. The modules are listed explicitly below; each
owns a ``LOWERINGS`` LoweringSet filled with
``@LOWERINGS.register_torch_lowering("aten::op.overload")``, the converter's own verb with the
same signature (one name per call, stacked for several; ``form="node"`` where needed).
"""

from __future__ import annotations

from coreai_core.registry import frozen_union
from coreai_torch._table import LoweringTable
from coreai_torch.lowerings import (
    complex,
    compression,
    compression_packed,
    compression_quantized,
    control,
    elementwise,
    fft,
    linalg,
    nn,
    nn_attention,
    nn_backward,
    nn_norm,
    nn_pooling,
    nn_pooling_fractional,
    nn_resample,
    nn_resample_general,
    random,
    special,
    tensor_counting,
    tensor_creation,
    tensor_embedding,
    tensor_indexing,
    tensor_padding,
    tensor_reduction,
    tensor_scatter,
    tensor_shape,
    tensor_sorting,
    tensor_strided,
    tensor_symbolic,
)

FAMILIES = (
    complex,
    compression, compression_packed, compression_quantized,
    control,
    elementwise,
    fft,
    linalg,
    nn, nn_attention, nn_backward, nn_norm, nn_pooling, nn_pooling_fractional, nn_resample,
    nn_resample_general,
    random,
    special,
    tensor_counting, tensor_creation, tensor_embedding, tensor_indexing, tensor_padding,
    tensor_reduction, tensor_scatter, tensor_shape, tensor_sorting, tensor_strided,
    tensor_symbolic,
)

# Every family's lowerings, frozen like the runtime's default kernel table: a converter's own
# table has this one as parent and takes the user's registrations.
DEFAULT_TABLE: LoweringTable = frozen_union(
    LoweringTable(owner="the built-in lowerings"), (family.LOWERINGS for family in FAMILIES))


def default_table() -> LoweringTable:
    """The frozen table of built-in lowerings (shared read-only)."""
    return DEFAULT_TABLE
