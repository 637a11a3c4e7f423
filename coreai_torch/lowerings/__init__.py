"""Built-in lowerings, one module per op family, collected into the default table.

The families are listed explicitly below; each module owns a ``LOWERINGS`` LoweringSet filled
with ``@LOWERINGS.register_torch_lowering("aten::op.overload")``.
"""

from __future__ import annotations

import threading

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

_DEFAULT: LoweringTable | None = None
_LOCK = threading.Lock()


def default_table() -> LoweringTable:
    """The frozen table of built-in lowerings (built once, shared read-only)."""
    global _DEFAULT
    table = _DEFAULT
    if table is None:
        with _LOCK:
            table = _DEFAULT
            if table is None:
                table = LoweringTable(owner="the built-in lowerings")
                for family in FAMILIES:
                    table.update(family.LOWERINGS)
                table.freeze()
                _DEFAULT = table
    return table
