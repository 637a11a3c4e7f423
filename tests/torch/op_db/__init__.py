"""The op database: one entry per lowered target, grouped by family.

Each family module exposes ``ENTRIES``; ``ENTRIES`` here is their concatenation and
``COVERED_ELSEWHERE`` names built-in lowerings that cannot be reached by exporting a small
module and are tested by the named test instead.
"""

from tests.torch.op_db import (
    backward,
    complex,
    complex_data,
    complex_nn,
    complex_random,
    compression,
    control,
    counting,
    elementwise,
    fft,
    indexing,
    linalg,
    nn,
    pooling_ext,
    random,
    reduction,
    resample_ext,
    shape,
    special,
    symbolic,
    tail,
)
from tests.torch.op_db._entry import OpEntry, Sample

FAMILIES = (elementwise, reduction, shape, indexing, nn, symbolic, control, backward,
            compression, random, special, complex, fft, linalg, resample_ext, pooling_ext,
            counting, tail, complex_data, complex_nn, complex_random)
ENTRIES: list[OpEntry] = [e for family in FAMILIES for e in family.ENTRIES]

COVERED_ELSEWHERE: dict[str, str] = {
    k: v for family in FAMILIES for k, v in getattr(family, "COVERED_ELSEWHERE", {}).items()}

__all__ = ["COVERED_ELSEWHERE", "ENTRIES", "FAMILIES", "OpEntry", "Sample"]
