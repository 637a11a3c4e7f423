"""Interop with Apple's Core AI: export a ``Program`` as an ``.aimodel`` and run it there.

Needs Apple's ``coreai-core`` package (``pip install 'coreai-torch[coreai]'``); importing this
package without it raises :class:`~coreai_torch.errors.MissingExtraError` saying so. Nothing
else in coreai_torch or coreai_core imports it, and within this package only ``_apple.py``
does. See docs/coreai-interop.md.
"""

from __future__ import annotations

# the adapter first: without Apple's package it raises MissingExtraError saying how to install
from coreai_torch.aimodel import _apple  # noqa: F401  (isort: skip)
from coreai_torch.aimodel._checks import (
    AimodelAssetError,
    AimodelEntrypointError,
    AimodelInterpreterError,
)
from coreai_torch.aimodel.export import build_module, export_aimodel
from coreai_torch.aimodel.loaded import LoadedAimodel, load_aimodel, run_aimodel
from coreai_torch.aimodel.ops import MAPPINGS, mapping_table_markdown
from coreai_torch.aimodel.verify import AimodelVerifyReport, verify_aimodel

__all__ = [
    "MAPPINGS", "AimodelAssetError", "AimodelEntrypointError", "AimodelInterpreterError",
    "AimodelVerifyReport", "LoadedAimodel", "build_module", "export_aimodel",
    "load_aimodel", "mapping_table_markdown", "run_aimodel", "verify_aimodel",
]
