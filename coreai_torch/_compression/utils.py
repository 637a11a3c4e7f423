"""Apple's ``coreai_torch._compression.utils``: :func:`wrap_for_parametrization` and
:func:`inject_subbyte_tensors`."""

from __future__ import annotations

from torch.export import ExportedProgram

from coreai_torch.compression.modules import wrap_for_parametrization


def inject_subbyte_tensors(program: ExportedProgram) -> ExportedProgram:
    """Return ``program`` unchanged: this converter reads the sub-byte types of compressed
    weights from the compression ops themselves (``input_dtype``, the palette count, a bool
    mask, an e8m0 scale), so no state-dict rewrite is needed before ``TorchConverter``. Kept
    so code written for Apple's package runs as written."""
    return program


__all__ = ["inject_subbyte_tensors", "wrap_for_parametrization"]
