"""The op database: one entry per lowered target, grouped by family.

Modules mirror the lowerings (``coreai_torch/lowerings/``) and the dialect's families: a module
is named ``<family>.py`` or ``<family>_<part>.py``; modules starting with ``_`` are shared
helpers (``tests/test_family_names.py`` checks the rule). Each family module exposes
``ENTRIES``; ``ENTRIES`` here is their concatenation and ``COVERED_ELSEWHERE`` names built-in
lowerings that cannot be reached by exporting a small module and are tested by the named test
instead.
"""

from tests.torch.op_db import (
    complex,
    complex_data,
    complex_nn,
    complex_random,
    compression,
    control,
    elementwise,
    fft,
    linalg,
    nn,
    nn_attention,
    nn_backward,
    nn_pooling,
    nn_pooling_fractional,
    nn_resample,
    nn_resample_general,
    random,
    special,
    tensor_counting,
    tensor_indexing,
    tensor_reduction,
    tensor_shape,
    tensor_symbolic,
)
from tests.torch.op_db._entry import OpEntry, Sample

FAMILIES = (
    complex, complex_data, complex_nn, complex_random,
    compression,
    control,
    elementwise,
    fft,
    linalg,
    nn, nn_attention, nn_backward, nn_pooling, nn_pooling_fractional, nn_resample,
    nn_resample_general,
    random,
    special,
    tensor_counting, tensor_indexing, tensor_reduction, tensor_shape, tensor_symbolic,
)
ENTRIES: list[OpEntry] = [e for family in FAMILIES for e in family.ENTRIES]

COVERED_ELSEWHERE: dict[str, str] = {
    k: v for family in FAMILIES for k, v in getattr(family, "COVERED_ELSEWHERE", {}).items()}

__all__ = ["COVERED_ELSEWHERE", "ENTRIES", "FAMILIES", "OpEntry", "Sample"]
