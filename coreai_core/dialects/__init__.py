"""Dialects of coreai_core. ``from coreai_core.dialects import coreai`` gives the builders."""

from coreai_core.dialects import coreai

__all__ = ["coreai"]
