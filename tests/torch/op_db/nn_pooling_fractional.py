"""Op-database entries (nn family): fractional_max_pool2d / fractional_max_pool3d."""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from tests.torch.op_db._entry import FLOAT_DTYPES, EntrySet, OpEntry, Sample, tensors

aten = torch.ops.aten
ENTRIES = EntrySet()


def fractional_samples(n: int) -> st.SearchStrategy[Sample]:
    """Batched and unbatched inputs with sizes 1, odd and 47; kernel and output sizes that fit
    (output + kernel - 1 <= input, and < input in 3-d where torch demands it); random_samples
    in [0, 1) as an input tensor."""

    @st.composite
    def build(draw: Any) -> Sample:
        dtype = draw(st.sampled_from(FLOAT_DTYPES))
        choices = (2, 3, 5, 7) if n == 3 else (1, 3, 4, 8, 47)
        room = 0 if n == 3 else 1
        sizes = [draw(st.sampled_from(choices)) for _ in range(n)]
        pools = [draw(st.integers(1, min(s - 1 + room, 3))) for s in sizes]
        outs = [draw(st.integers(1, s - k + room)) for s, k in zip(sizes, pools, strict=True)]
        batch, channels = draw(st.integers(1, 2)), draw(st.integers(1, 3))
        lead = (batch, channels) if draw(st.booleans()) else (channels,)
        x = draw(tensors((*lead, *sizes), dtype, special=draw(st.booleans())))
        samples = draw(tensors((batch if len(lead) == 2 else 1, channels, n), dtype,
                               low=0.0, high=0.999))
        return Sample((x, pools, outs, samples))

    return build()


for _n in (2, 3):
    ENTRIES.append(OpEntry(f"aten::fractional_max_pool{_n}d.default",
                           getattr(aten, f"fractional_max_pool{_n}d").default,
                           fractional_samples(_n)))
