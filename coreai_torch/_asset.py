"""The ``.aimodel`` writer behind ``Program.save_asset`` (registered by ``coreai_torch``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from coreai_core import Program
from coreai_torch.errors import MissingExtraError

__all__ = ["save_aimodel_asset"]


def save_aimodel_asset(program: Any, path: Path, *,
                       entrypoints: Sequence[str] | None = None) -> Any:
    """Write ``program`` as an ``.aimodel`` (:func:`coreai_torch.aimodel.export_aimodel`) and
    return Apple's ``coreai.authoring.AIModelAsset`` of it, as Apple's
    ``AIProgram.save_asset`` does."""
    try:
        from coreai_torch.aimodel import export_aimodel
    except ImportError as e:  # MissingExtraError, or Apple's package half installed
        raise MissingExtraError(
            f"program.save_asset({str(path)!r}) writes an .aimodel with Apple's Core AI "
            "package (coreai-core), which is not installed: pip install "
            "'coreai-torch[coreai]'") from e
    from coreai_torch.aimodel._apple import ca

    if not isinstance(program, Program):
        raise TypeError(f"save_asset writes a coreai_core.Program, got {type(program).__name__}")
    return ca.AIModelAsset.load(export_aimodel(program, path, entrypoints=entrypoints))
