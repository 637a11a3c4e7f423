"""Op-database entries (nn family): upsampling and grid_sampler_2d."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from tests.torch.op_db._entry import (
    FLOAT_DTYPES,
    EntrySet,
    OpEntry,
    Sample,
    half_variant,
    in_float32,
    tensors,
)

aten = torch.ops.aten
ENTRIES = EntrySet()

# aten name -> (F.interpolate mode, spatial dims)
UPSAMPLE = {
    "upsample_nearest1d": ("nearest", 1), "upsample_nearest2d": ("nearest", 2),
    "upsample_nearest3d": ("nearest", 3), "_upsample_nearest_exact1d": ("nearest-exact", 1),
    "_upsample_nearest_exact2d": ("nearest-exact", 2),
    "_upsample_nearest_exact3d": ("nearest-exact", 3), "upsample_linear1d": ("linear", 1),
    "upsample_bilinear2d": ("bilinear", 2), "upsample_trilinear3d": ("trilinear", 3),
    "upsample_bicubic2d": ("bicubic", 2),
}
SCALES = (0.5, 0.75, 1.0, 1.7, 2.0, 3.0)


def upsample_samples(mode: str, n: int, vec: bool) -> st.SearchStrategy[Sample]:
    nearest = mode.startswith("nearest")
    dtypes = (*FLOAT_DTYPES, torch.uint8) if nearest else FLOAT_DTYPES
    top = (9, 6, 4)[n - 1]

    @st.composite
    def build(draw: Any) -> Sample:
        dtype = draw(st.sampled_from(dtypes))
        spatial = [draw(st.integers(2, top)) for _ in range(n)]
        if n == 1 and draw(st.integers(0, 4)) == 0:
            spatial = [47]
        lead = (draw(st.integers(1, 2)), draw(st.integers(1, 3)))
        low, high = (0, 255) if dtype == torch.uint8 else (-4.0, 4.0)
        x = draw(tensors((*lead, *spatial), dtype, low=low, high=high))
        corners = None if nearest else draw(st.booleans())
        if vec:
            if draw(st.booleans()):
                scale = [draw(st.sampled_from(SCALES)) for _ in range(n)]
                return Sample((x,), {"scale_factor": scale, "mode": mode,
                                     "align_corners": corners})
            size = [draw(st.integers(1, 2 * s + 1)) for s in spatial]
            return Sample((x,), {"size": size, "mode": mode, "align_corners": corners})
        size = [draw(st.integers(1, 2 * s + 1)) for s in spatial]
        scales = [draw(st.sampled_from((None, *SCALES))) for _ in range(n)]
        args = (x, size) if nearest else (x, size, corners)
        return Sample((*args, *scales))

    return build()


# torch's Autograd py_impl decomposes these .default overloads inside run_decompositions
# whatever the table says; tests/torch/test_nn_lowerings.py converts them undecomposed.
DECOMPOSED_BY_TORCH = ("upsample_bilinear2d", "upsample_bicubic2d")
COVERED_ELSEWHERE = {
    f"aten::{name}.default": "tests/torch/test_nn_lowerings.py::"
                             "test_upsample_default_without_decomposition"
    for name in DECOMPOSED_BY_TORCH}
COVERED_ELSEWHERE["aten::adaptive_avg_pool1d.default"] = (
    "tests/torch/test_nn_lowerings.py::test_adaptive_avg_pool1d_without_decomposition")

for _name, (_mode, _n) in UPSAMPLE.items():
    ENTRIES.append(OpEntry(f"aten::{_name}.vec", F.interpolate,
                           upsample_samples(_mode, _n, True)))
    if _name not in DECOMPOSED_BY_TORCH:
        ENTRIES.append(OpEntry(f"aten::{_name}.default", getattr(aten, _name).default,
                               upsample_samples(_mode, _n, False)))


@st.composite
def grid_sample_samples(draw: Any) -> Sample:
    dtype = draw(st.sampled_from((torch.float32, torch.float64)))
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    h, w = draw(st.integers(1, 6)), draw(st.sampled_from((1, 3, 5, 8, 47)))
    x = draw(tensors((n, c, h, w), dtype))
    grid = draw(tensors((n, draw(st.integers(1, 5)), draw(st.integers(1, 5)), 2), dtype,
                        low=-1.3, high=1.3))
    return Sample((x, grid), {
        "mode": draw(st.sampled_from(("bilinear", "nearest", "bicubic"))),
        "padding_mode": draw(st.sampled_from(("zeros", "border", "reflection"))),
        "align_corners": draw(st.booleans())})


ENTRIES.append(OpEntry("aten::grid_sampler_2d.default", F.grid_sample, grid_sample_samples()))
# torch's CPU kernel for float16/bfloat16 computes the source coordinates and interpolation
# weights in the half type, each step rounded (off by up to 0.05 on values of about 1); the
# runtime computes in float32 and rounds once, as the float32 reference does
ENTRIES.append(half_variant(ENTRIES[-1], reference=in_float32(F.grid_sample)))
