"""Interop with Apple's Core AI: export a ``Program`` as an ``.aimodel`` and run it there.

Needs Apple's ``coreai-core`` package (``pip install 'coreai-torch[coreai]'``); importing this
package without it raises :class:`~coreai_torch.errors.MissingExtraError` saying so. Nothing
else in coreai_torch or coreai_core imports it. See docs/coreai-interop.md.
"""

from __future__ import annotations

from coreai_torch.errors import MissingExtraError

try:
    import coreai.authoring  # noqa: F401
except ImportError as e:
    raise MissingExtraError(
        "exporting to .aimodel needs Apple's Core AI Python package (coreai-core), which is "
        "not installed: pip install 'coreai-torch[coreai]'") from e

from coreai_torch.aimodel.export import build_module, export_aimodel
from coreai_torch.aimodel.ops import MAPPINGS, mapping_table_markdown
from coreai_torch.aimodel.verify import (
    AimodelVerifyReport,
    run_aimodel,
    verify_aimodel,
)

__all__ = [
    "MAPPINGS", "AimodelVerifyReport", "build_module", "export_aimodel",
    "mapping_table_markdown", "run_aimodel", "verify_aimodel",
]
