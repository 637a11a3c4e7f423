"""Op-database entries (nn family): grid_sampler_3d, antialiased upsampling."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from tests.torch.op_db._entry import EntrySet, OpEntry, Sample, half_variant, in_float32, tensors

aten = torch.ops.aten

ENTRIES = EntrySet()


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
# float16/bfloat16: torch computes coordinates and weights in the half type (see
# grid_sampler_2d); the reference computes in float32 and rounds once, as the runtime does
ENTRIES.append(half_variant(ENTRIES[-1], reference=in_float32(F.grid_sample)))


AA_SCALES = (0.3, 0.5, 0.75, 1.0, 1.3, 2.0)


def _aa_sizes(draw: Any) -> tuple[int, int]:
    return draw(st.sampled_from((1, 2, 5, 8))), draw(st.sampled_from((1, 3, 7, 47)))


def aa_samples(mode: str, vec: bool) -> st.SearchStrategy[Sample]:
    """Down- and upscales (the filter support grows with the downscale factor), by size or
    by scale factor, to and from sizes 1, odd sizes and 47."""

    @st.composite
    def build(draw: Any) -> Sample:
        dtype = draw(st.sampled_from((torch.float32, torch.float64)))
        h, w = _aa_sizes(draw)
        x = draw(tensors((draw(st.integers(1, 2)), draw(st.integers(1, 3)), h, w), dtype))
        corners = draw(st.booleans())
        size = [draw(st.sampled_from((1, 2, 3, 4, 9))), draw(st.sampled_from((1, 2, 5, 13, 47)))]
        if vec:
            if draw(st.booleans()):
                scale = [draw(st.sampled_from(AA_SCALES)) for _ in range(2)]
                if min(int(s * f) for s, f in zip((h, w), scale, strict=True)) >= 1:
                    return Sample((x,), {"scale_factor": scale, "mode": mode,
                                         "align_corners": corners, "antialias": True})
            return Sample((x,), {"size": size, "mode": mode, "align_corners": corners,
                                 "antialias": True})
        # a scale comes with the size it gives (as F.interpolate passes them): with a scale
        # that does not match the size, torch's kernel reads uninitialized weights for
        # outputs whose window misses the input (NaN or garbage, varying from run to run)
        scales: list[float | None] = [None, None]
        for axis, n_in in enumerate((h, w)):
            factor = draw(st.sampled_from((None, *AA_SCALES)))
            if factor is not None and int(n_in * factor) >= 1:
                scales[axis], size[axis] = factor, int(n_in * factor)
        return Sample((x, size, corners, *scales))

    return build()


def aa_reference(op: Any) -> Any:
    """torch's antialiased resize on a float64 copy of the input, rounded to the input's dtype
    (torch's float32 kernel computes its weights in float32, ~2e-5 off on outputs of size 9;
    the runtime computes them in float64), with the axes swapped when the output width is 1:
    torch's CPU kernel then copies output row 0 into every row (torch 2.13: resizing [4, 1]
    to [2, 1] gives [0.71, 0.71] for the column 0..3 instead of [0.71, 2.29]), while resizing
    along the width is correct."""

    def swap(t: torch.Tensor) -> torch.Tensor:
        return t.transpose(-1, -2)

    def reference(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        return resize(x.double(), *args, **kwargs).to(x.dtype)

    def resize(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        if op is F.interpolate:
            size = kwargs.get("size")
            out_w = size[1] if size is not None else int(x.shape[3] * kwargs["scale_factor"][1])
            if out_w != 1:
                return F.interpolate(x, **kwargs)
            swapped = dict(kwargs)
            for key in ("size", "scale_factor"):
                if swapped.get(key) is not None:
                    swapped[key] = list(swapped[key])[::-1]
            return swap(F.interpolate(swap(x), **swapped))
        size, corners, scale_h, scale_w = args
        if size[1] != 1:
            return op(x, size, corners, scale_h, scale_w)
        return swap(op(swap(x), size[::-1], corners, scale_w, scale_h))

    return reference


for _mode in ("bilinear", "bicubic"):
    _op = getattr(aten, f"_upsample_{_mode}2d_aa").default
    ENTRIES.append(OpEntry(f"aten::_upsample_{_mode}2d_aa.vec", F.interpolate,
                           aa_samples(_mode, True), reference=aa_reference(F.interpolate)))
    ENTRIES.append(OpEntry(f"aten::_upsample_{_mode}2d_aa.default", _op,
                           aa_samples(_mode, False), reference=aa_reference(_op)))
