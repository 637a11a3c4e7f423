"""The ``.aimodel`` exporter's op mappings, one module per op family or family part.

Modules mirror the dialect's families (``coreai_core/dialects/_<family>.py``): a module is
named ``<family>.py`` or ``<family>_<part>.py`` and maps exactly the ops of its family, each
emitter registered by ``@mapping(op_name, core_ai)`` over it (``_registry.py``); helpers two
families share are in ``coreai_torch/aimodel/_emit.py``. ``tests/test_family_names.py`` checks
the rule, and that no module takes another's ``_``-private names. Each module owns a
``MAPPINGS`` registry; :data:`MAPPINGS` is their union, frozen (an op two modules map is an
error naming both).
"""

from __future__ import annotations

from coreai_core.registry import Registry, frozen_union
from coreai_torch.aimodel._context import OpMapping
from coreai_torch.aimodel.mappings import (
    complex,
    compression,
    control,
    elementwise,
    elementwise_elementary,
    elementwise_math,
    fft,
    nn,
    nn_windows,
    special,
    tensor,
    tensor_expansions,
)
from coreai_torch.aimodel.mappings._registry import mapping_registry

__all__ = ["FAMILIES", "MAPPINGS"]

FAMILIES = (
    complex,
    compression,
    control,
    elementwise, elementwise_elementary, elementwise_math,
    fft,
    nn, nn_windows,
    special,
    tensor, tensor_expansions,
)

MAPPINGS: Registry[OpMapping] = frozen_union(
    mapping_registry("the aimodel op mappings"), (family.MAPPINGS for family in FAMILIES))
