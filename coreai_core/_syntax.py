"""Lexical pieces of the text form shared by the IR's ``__str__``, the printer and the parser.

It sits below :mod:`coreai_core._ir` (it imports no IR class), so every layer above may use it.
"""

from __future__ import annotations

import json
import re

import numpy as np

__all__ = ["DIM_NAME", "IDENT", "MAX_NESTING", "TERMINATORS", "UINT_OF_SIZE", "quote"]

# Deepest nesting of regions and `[...]` lists the parser accepts.
MAX_NESTING = 48
TERMINATORS = ("coreai.output", "coreai.yield")  # graph terminators (not ops of OPS)

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_.$]*")
DIM_NAME = re.compile(r"[A-Za-wyz_][A-Za-wyz0-9_]*")  # no 'x': it separates dimensions
UINT_OF_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def quote(s: str) -> str:
    """A name or string as a JSON string literal."""
    return json.dumps(s)
