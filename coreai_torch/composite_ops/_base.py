"""What every composite-op module shares: its composite's name and attributes."""

from __future__ import annotations

import enum
from typing import Any, ClassVar

import torch

__all__ = ["CompositeModule", "plain_attribute"]


def plain_attribute(value: Any) -> Any:
    """``value`` as a composite attribute (enums by their value, tuples as lists)."""
    if isinstance(value, enum.Enum):
        return plain_attribute(value.value)
    if isinstance(value, (tuple, list)):
        return [plain_attribute(v) for v in value]
    return value


class CompositeModule(torch.nn.Module):
    """An nn.Module that computes one composite op in plain torch.

    ``composite_name`` is the composite it becomes when externalized (Apple's documented name)
    and ``composite_attrs`` the instance attributes recorded on it, the list Apple's
    ``ExternalizeSpec`` examples pass as ``composite_attrs``. Externalized as a bare class
    (``externalize_modules=[RMSNormImpl]``) it becomes that composite; an
    ``ExternalizeSpec`` overrides either.
    """

    composite_name: ClassVar[str]
    composite_attrs: ClassVar[tuple[str, ...]] = ()

    def composite_attributes(self) -> dict[str, Any]:
        return {name: plain_attribute(getattr(self, name)) for name in self.composite_attrs}
