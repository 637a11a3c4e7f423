"""Evaluation of an exported LLM (placeholder until the perplexity evaluation lands here)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["perplexity"]


def perplexity(model: Any, token_ids: Sequence[int] | str, *, window: int | None = None
               ) -> float:
    """The perplexity of ``model`` (e.g. a loaded bundle) on ``token_ids`` or a text (not
    implemented yet)."""
    raise NotImplementedError("llm perplexity evaluation is not implemented yet")
