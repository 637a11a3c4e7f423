"""Evaluation of an exported LLM (placeholder until the perplexity evaluation lands here)."""

from __future__ import annotations

import os
from typing import Any

__all__ = ["perplexity"]


def perplexity(bundle: Any, text: str | os.PathLike[str], **options: Any) -> Any:
    """The perplexity of ``bundle`` on ``text`` (not implemented yet)."""
    raise NotImplementedError("llm perplexity evaluation is not implemented yet")
