"""Op-database entries (resample_ext family): grid_sampler_3d."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from tests.torch.op_db._entry import OpEntry, Sample, tensors

ENTRIES: list[OpEntry] = []


@st.composite
def grid_sample_3d_samples(draw: Any) -> Sample:
    """Volumes with sizes 1, odd and 47 on some axis; grids reaching past [-1, 1] so every
    padding mode matters."""
    dtype = draw(st.sampled_from((torch.float32, torch.float64)))
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    d, h = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    w = draw(st.sampled_from((1, 3, 4, 7, 47)))
    x = draw(tensors((n, c, d, h, w), dtype))
    out = tuple(draw(st.integers(1, 4)) for _ in range(3))
    grid = draw(tensors((n, *out, 3), dtype, low=-1.3, high=1.3))
    return Sample((x, grid), {
        "mode": draw(st.sampled_from(("bilinear", "nearest"))),
        "padding_mode": draw(st.sampled_from(("zeros", "border", "reflection"))),
        "align_corners": draw(st.booleans())})


ENTRIES.append(OpEntry("aten::grid_sampler_3d.default", F.grid_sample, grid_sample_3d_samples()))
