"""The registry every mapping module fills: op name -> :class:`OpMapping`, one per family
module, merged into :data:`coreai_torch.aimodel.mappings.MAPPINGS` (a name two modules map
is an error naming both)."""

from __future__ import annotations

from collections.abc import Mapping

from coreai_core.registry import Registry, describe_entry
from coreai_torch.aimodel._context import OpMapping

__all__ = ["describe_mapping", "family_mappings", "mapping_registry"]


def describe_mapping(mapping: OpMapping) -> str:
    """The emitting function of ``mapping`` (for duplicate-name errors)."""
    return describe_entry(mapping.emit)


def mapping_registry(owner: str) -> Registry[OpMapping]:
    """An empty registry of op mappings named ``owner`` in messages."""
    return Registry("op mapping", owner, callable_entries=False, describe=describe_mapping)


def family_mappings(module: str, entries: Mapping[str, OpMapping]) -> Registry[OpMapping]:
    """The registry of one mapping module (``module`` is its ``__name__``)."""
    registry = mapping_registry(module)
    for name, mapping in entries.items():
        registry.register(name, mapping)
    return registry
