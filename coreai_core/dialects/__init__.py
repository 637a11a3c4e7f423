"""Dialects of coreai_core. ``from coreai_core.dialects import coreai`` gives the builders.

``SpecialFn`` and ``SpecialBinaryFn`` are the ``fn`` choices of ``coreai.special`` and
``coreai.special_binary`` (``typing.Literal`` types), for code that picks the function by name.
"""

from coreai_core.dialects import coreai
from coreai_core.dialects._special import BinaryFn as SpecialBinaryFn
from coreai_core.dialects._special import UnaryFn as SpecialFn

__all__ = ["SpecialBinaryFn", "SpecialFn", "coreai"]
