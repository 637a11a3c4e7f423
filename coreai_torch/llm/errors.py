"""Errors of :mod:`coreai_torch.llm`; each says what is wrong and how to fix it."""

from __future__ import annotations


class LLMError(ValueError):
    """Base class of the errors raised by :mod:`coreai_torch.llm` for bad input."""


class CheckpointError(LLMError):
    """The checkpoint folder is missing, or lacks its config or safetensors weights."""


class UnsupportedFamilyError(LLMError):
    """The checkpoint's ``model_type`` is not one of the supported families."""


class ContextLengthError(LLMError):
    """``max_context``, a prompt or a generation does not fit the model or the bundle."""


class BundleError(LLMError):
    """A bundle folder is missing, malformed, or in the way of a new one."""
