"""The registry every mapping module fills: op name -> :class:`OpMapping`, one per family
module, merged into :data:`coreai_torch.aimodel.mappings.MAPPINGS` (a name two modules map
is an error naming both)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

from coreai_core.registry import Registry, describe_entry
from coreai_torch.aimodel._context import Emit, OpMapping

__all__ = ["describe_mapping", "family_mappings", "mapping_decorator", "mapping_registry"]

E = TypeVar("E", bound=Callable[..., Any])  # an emitter: (ctx, op, xs, ...) -> results


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


def mapping_decorator(registry: Registry[OpMapping],
                      ) -> Callable[[str, str], Callable[[E], E]]:
    """``@mapping(op_name, core_ai)`` over an emitter registers it in ``registry`` (a family
    module's ``MAPPINGS``), as ``@kernel`` and ``@lowering`` do; ``core_ai`` is the Core AI
    form for the documentation table."""
    def mapping(op_name: str, core_ai: str) -> Callable[[E], E]:
        def register(emit: E) -> E:
            registry.register(op_name, OpMapping(cast(Emit, emit), core_ai))
            return emit
        return register
    return mapping
