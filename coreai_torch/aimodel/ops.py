"""The op mapping: each dialect op the exporter handles -> a function emitting Apple's ops.

``MAPPINGS`` is data: op name -> :class:`OpMapping` (the emitting function and a one-line
description of the Core AI ops it produces, which docs/coreai-interop.md shows), a
:class:`~coreai_core.registry.Registry` filled from the family modules of
:mod:`coreai_torch.aimodel.mappings`. An emitter
gets the exporter's context, our op and its operands already emitted as Apple values, and
returns one Apple value per result; it raises :class:`Refused` for an instance it cannot
export exactly (e.g. a 3-d convolution), which the exporter lists with every other refusal.
Results are reshaped to our result type where Core AI keeps reduced dims, so each mapping's
output has exactly our op's shape (the exporter checks it).
"""

from __future__ import annotations

from coreai_torch.aimodel._context import OpMapping
from coreai_torch.aimodel.mappings import MAPPINGS
from coreai_torch.aimodel.not_exported import not_exported_reason

__all__ = ["MAPPINGS", "OpMapping", "mapping_table_markdown"]


def mapping_table_markdown() -> str:
    """Every dialect op and its Core AI form, or "not exported" and why, as a Markdown table
    (docs/coreai-interop.md embeds it: ``python tools/gen_interop_docs.py``; a test checks)."""
    from coreai_core.runtime import DEFAULT_TABLE  # every dialect op has a default kernel

    rows = ["| dialect op | Core AI |", "|---|---|"]
    for name in sorted(DEFAULT_TABLE.names()):
        mapping = MAPPINGS.get(name)
        core_ai = (mapping.core_ai if mapping
                   else f"*not exported*: {not_exported_reason(name)}")
        rows.append(f"| `{name}` | {core_ai} |")
    return "\n".join(rows)
