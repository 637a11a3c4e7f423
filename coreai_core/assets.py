"""Deployable assets: ``Program.save_asset(path)`` writes one with the writer registered for
the path's suffix; ``Program.to_aiprogram()`` hands the program to Apple's toolchain with the
converter registered for Apple's program type.

coreai_core itself writes only its own artifact (``Program.save``). A device format belongs to
the package that speaks it: ``coreai_torch`` registers the writer of Apple's ``.aimodel``
(``coreai_torch.aimodel.export_aimodel``, returning Apple's ``AIModelAsset``) when it is
imported, and likewise the converter to Apple's ``coreai.authoring.AIProgram``
(:data:`PROGRAM_CONVERTERS`, kind ``"aiprogram"``). This is the extension point that lets
``Program`` offer Apple's ``program.save_asset(path)`` and ``program.to_aiprogram()`` without
coreai_core importing anything above it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from coreai_core._ir import ProgramData
from coreai_core.registry import Registry

__all__ = [
    "ASSET_WRITERS", "PROGRAM_CONVERTERS", "AssetWriter", "ProgramConverter", "convert_program",
    "register_asset_writer", "register_program_converter", "save_asset",
]


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


ProgramConverter = Callable[..., Any]
"""``converter(program, **options)``: another package's program object for ``program`` (e.g.
Apple's ``AIProgram``), built from it without changing it."""


def _check_kind(kind: str) -> str:
    if not (kind.isidentifier() and kind.islower()):
        raise ValueError(f"a program converter is registered for a lower-case kind such as "
                         f"'aiprogram', got {kind!r}")
    return kind


PROGRAM_CONVERTERS: Registry[ProgramConverter] = Registry("program converter", "coreai_core",
                                                          check_name=_check_kind)
"""Kind (``"aiprogram"``) -> the function converting a program to that kind of object."""

_CONVERTER_PROVIDERS = {
    "aiprogram": "import coreai_torch (its converter needs Apple's coreai-core package: pip "
                 "install 'coreai-torch[coreai]')"}


def register_program_converter(kind: str, converter: ProgramConverter, *,
                               allow_override: bool = False) -> ProgramConverter:
    """Make ``convert_program(program, kind)`` call ``converter(program, **options)``."""
    return PROGRAM_CONVERTERS.register(kind, converter, allow_override=allow_override)


def convert_program(program: ProgramData, kind: str, **options: Any) -> Any:
    """``program`` as the object of ``kind`` made by the converter registered for it."""
    converter = PROGRAM_CONVERTERS.get(kind)
    if converter is None:
        known = ", ".join(PROGRAM_CONVERTERS.names()) or "none yet"
        how = _CONVERTER_PROVIDERS.get(kind)
        hint = (f"; to make one, {how}" if how
                else "; register one with coreai_core.assets.register_program_converter")
        raise ValueError(f"no program converter for {kind!r} (registered: {known}){hint}")
    return converter(program, **options)
