"""``Program.to_aiprogram()``: a program as Apple's ``coreai.authoring.AIProgram``.

The AIProgram wraps the Core AI module that :func:`~coreai_torch.aimodel.build_module`
emits, the one ``export_aimodel`` writes, so Apple's tools see exactly what an ``.aimodel``
export would contain: coreai-opt's ``coreai_utils`` passes (``quantize_weights``,
``palettize_weights``, ``sparsify_weights``) rewrite its constants, and its ``save_asset``
compiles and writes it. Every op that does not map exactly onto Core AI is refused as in
``export_aimodel`` (:class:`~coreai_torch.errors.UnexportableOpsError`).

What only ``export_aimodel`` adds: the bounds of dynamic dimensions, which it stores in the
asset's metadata for :func:`~coreai_torch.aimodel.load_aimodel` to check; an AIProgram's own
``save_asset`` writes the dynamic dimensions without them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from coreai_core import Program
from coreai_torch.aimodel._apple import ca
from coreai_torch.aimodel.export import build_module

__all__ = ["to_aiprogram"]


def to_aiprogram(program: Program, *, entrypoints: Sequence[str] | None = None) -> Any:
    """Apple's ``coreai.authoring.AIProgram`` of ``program`` (``entrypoints``: as in
    :func:`~coreai_torch.aimodel.export_aimodel`, default every graph but composites)."""
    if not isinstance(program, Program):
        raise TypeError(f"to_aiprogram converts a coreai_core.Program, got "
                        f"{type(program).__name__}")
    return ca.AIProgram(build_module(program, entrypoints))
