"""Accuracy of the antialiased upsampling on float32: the runtime computes the resampling
weights in float64 and rounds them once, so its result stays within a few float32 ulp of
torch's float64 result (``aa_reference``; measured: at most 2 ulp). torch's float32 kernel
computes the weights in float32 and is up to ~8e-5 (86 ulp) off on inputs of magnitude 9; the
op database's tolerance (1e-5 + 1e-5 relative) cannot tell the two apart, this test can."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.torch.harness import FnModule, convert, export, to_numpy
from tests.torch.op_db.nn_resample_general import aa_reference

ULP = 2.0**-20  # a float32 ulp on [8, 16)


@settings(max_examples=8, deadline=None)
@given(mode=st.sampled_from(("bilinear", "bicubic")),
       h=st.sampled_from((1, 5, 10, 47)), w=st.sampled_from((3, 20, 47)),
       scale=st.tuples(st.sampled_from((0.3, 0.9, 1.7)), st.sampled_from((0.45, 0.9, 2.3))),
       corners=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_antialiased_resize_is_float64_accurate(mode: str, h: int, w: int,
                                                scale: tuple[float, float], corners: bool,
                                                seed: int) -> None:
    if min(int(h * scale[0]), int(w * scale[1])) < 1:
        return  # torch rejects an empty output
    g = torch.Generator().manual_seed(seed)
    x = (torch.rand(2, 3, h, w, generator=g) * 18 - 9).float()
    kwargs = {"scale_factor": list(scale), "mode": mode, "align_corners": corners,
              "antialias": True}
    module = FnModule(F.interpolate, (x,), kwargs)
    program = convert(export(module, [x]))
    (got,) = program.run([to_numpy(x)]).values()
    with torch.no_grad():  # torch's float64 result rounded to float32 (+-half an ulp)
        exact = aa_reference(F.interpolate)(x, **kwargs).double()
    # each output is a normalized weighted sum of |x| <= 9: the rounding of the weights and
    # of the two float32 matmul passes stays within a few ulp
    bound = 4 * ULP
    err = float((torch.from_numpy(got).double() - exact).abs().max())
    assert err <= bound, f"{mode} {h}x{w} scale {scale}: max error {err:.3g} > {bound:.3g}"
