"""Deployable assets: ``Program.save_asset(path)`` writes one with the writer registered for
the path's suffix.

coreai_core itself writes only its own artifact (``Program.save``). A device format belongs to
the package that speaks it: ``coreai_torch`` registers the writer of Apple's ``.aimodel``
(``coreai_torch.aimodel.export_aimodel``, returning Apple's ``AIModelAsset``) when it is
imported. This is the extension point that lets ``Program`` offer Apple's
``program.save_asset(path)`` without coreai_core importing anything above it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from coreai_core._ir import ProgramData
from coreai_core.registry import Registry

__all__ = ["ASSET_WRITERS", "AssetWriter", "register_asset_writer", "save_asset"]


AssetWriter = Callable[..., Any]
"""``writer(program, path, **options)``: writes ``program`` at ``path`` (a ``Path``) and returns
the written asset; the options are the writer's own keyword arguments."""


def _check_suffix(suffix: str) -> str:
    if not (suffix.startswith(".") and len(suffix) > 1 and "/" not in suffix):
        raise ValueError(f"an asset writer is registered for a file suffix such as "
                         f"'.aimodel', got {suffix!r}")
    return suffix


ASSET_WRITERS: Registry[AssetWriter] = Registry("asset writer", "coreai_core",
                                                check_name=_check_suffix)
"""File suffix -> the function writing a program as an asset of that kind."""

_PROVIDERS = {".aimodel": "import coreai_torch (its writer needs Apple's coreai-core package: "
                          "pip install 'coreai-torch[coreai]')"}


def register_asset_writer(suffix: str, writer: AssetWriter, *,
                          allow_override: bool = False) -> AssetWriter:
    """Make ``save_asset`` write paths ending in ``suffix`` with ``writer(program, path,
    **options)``, which returns the written asset (whatever object its format has)."""
    return ASSET_WRITERS.register(suffix, writer, allow_override=allow_override)


def save_asset(program: ProgramData, path: str | os.PathLike[str], **options: Any) -> Any:
    """Write ``program`` to ``path`` with the writer of its suffix; return the writer's asset."""
    target = Path(path)
    writer = ASSET_WRITERS.get(target.suffix) if target.suffix else None
    if writer is None:
        known = ", ".join(ASSET_WRITERS.names()) or "none yet"
        how = _PROVIDERS.get(target.suffix)
        hint = (f"; to write {target.suffix} assets, {how}" if how
                else "; register one with coreai_core.assets.register_asset_writer")
        raise ValueError(f"save_asset({str(target)!r}): no asset writer for files ending in "
                         f"{target.suffix or '(no suffix)'!r} (registered: {known}){hint}. "
                         "Program.save writes coreai_core's own artifact.")
    return writer(program, target, **options)
