"""The converter behind ``Program.to_aiprogram()`` (registered by ``coreai_torch``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from coreai_torch.errors import MissingExtraError

__all__ = ["aiprogram_of"]


def aiprogram_of(program: Any, *, entrypoints: Sequence[str] | None = None) -> Any:
    """Apple's ``AIProgram`` of ``program`` (``coreai_torch.aimodel.aiprogram.to_aiprogram``),
    with a clear error when Apple's package is missing."""
    try:
        from coreai_torch.aimodel.aiprogram import to_aiprogram
    except ImportError as e:  # MissingExtraError, or Apple's package half installed
        raise MissingExtraError(
            "program.to_aiprogram() builds Apple's coreai.authoring.AIProgram with Apple's "
            "Core AI package (coreai-core), which is not installed: pip install "
            "'coreai-torch[coreai]'") from e
    return to_aiprogram(program, entrypoints=entrypoints)
