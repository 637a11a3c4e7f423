"""Compression of an LLM before export (placeholder until coreai-opt recipes land here).

Only ``None`` (no compression) is handled; any scheme raises ``NotImplementedError`` naming it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import torch

__all__ = ["compress"]


def compress(model: torch.nn.Module, compression: str | Mapping[str, Any] | os.PathLike[str] | None
             ) -> tuple[torch.nn.Module, dict[str, Any]]:
    """``model`` compressed by ``compression`` and the manifest record of what was done.

    ``None`` returns ``model`` unchanged with ``{"scheme": "none"}``.
    """
    if compression is None or compression == "none":
        return model, {"scheme": "none"}
    raise NotImplementedError(f"compression {compression!r} is not implemented yet; export "
                              f"with compression=None")
