"""Built-in lowerings, one module per op family, collected into the default table.

The families are listed explicitly below; each module owns a ``LOWERINGS`` LoweringSet filled
with ``@LOWERINGS.register_torch_lowering("aten::op.overload")``.
"""

from __future__ import annotations

import threading

from coreai_torch._table import LoweringTable
from coreai_torch.lowerings import (
    backward,
    control,
    elementwise,
    indexing,
    nn,
    reduction,
    shape,
    symbolic,
)

FAMILIES = (elementwise, reduction, shape, indexing, nn, symbolic, control, backward)

_DEFAULT: LoweringTable | None = None
_LOCK = threading.Lock()


def default_table() -> LoweringTable:
    """The frozen table of built-in lowerings (built once, shared read-only)."""
    global _DEFAULT
    if _DEFAULT is None:
        with _LOCK:
            if _DEFAULT is None:
                table = LoweringTable(owner="built-in")
                for family in FAMILIES:
                    for name, fn in family.LOWERINGS.lowerings.items():
                        table.register(name, fn)
                _DEFAULT = table.freeze()
    return _DEFAULT
