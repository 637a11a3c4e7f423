"""Built-in lowerings, one module per op family, collected into the default table.

The families are listed explicitly below; each module owns a ``LOWERINGS`` LoweringSet filled
with ``@LOWERINGS.register_torch_lowering("aten::op.overload")``.
"""

from __future__ import annotations

from coreai_core.registry import frozen_union
from coreai_torch._table import LoweringTable
from coreai_torch.lowerings import (
    attention,
    backward,
    complex,
    compression,
    control,
    counting,
    creation,
    elementwise,
    embedding,
    fft,
    indexing,
    linalg,
    nn,
    norm,
    padding,
    pooling,
    pooling_ext,
    quantized,
    random,
    reduction,
    resample,
    resample_ext,
    scatter,
    shape,
    sorting,
    special,
    symbolic,
    tail,
)

FAMILIES = (
    elementwise, reduction, sorting, shape, creation, indexing, scatter, embedding, nn, norm,
    pooling, resample, attention, symbolic, control, backward, compression, quantized, random,
    special,
    complex, fft,
    linalg,
    resample_ext, pooling_ext,
    counting, tail,
    padding,
)

# Every family's lowerings, frozen like the runtime's default kernel table: a converter's own
# table has this one as parent and takes the user's registrations.
DEFAULT_TABLE: LoweringTable = frozen_union(
    LoweringTable(owner="the built-in lowerings"), (family.LOWERINGS for family in FAMILIES))


def default_table() -> LoweringTable:
    """The frozen table of built-in lowerings (shared read-only)."""
    return DEFAULT_TABLE
