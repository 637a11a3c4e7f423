"""Op-database entries (nn family): the nn ops torch runs on complex64/complex128 tensors —
matrix products, convolution, col2im, _trilinear, addbmm, adaptive average pooling — as complex
variants (``complex_variant``) of the real entries in the family modules. Padding, embedding and
bincount are in ``tensor_complex.py``, dropout and the random ops in ``random_complex.py``.

Left out although the dtype audit lists them: ``native_layer_norm_backward`` (torch's CPU
kernel rejects complex; eager only "accepts" empty inputs that never reach it),
``_upsample_bilinear2d_aa`` (no complex kernel either), training-mode ``native_dropout``
(torch.export cannot trace it on complex: see ``random_complex.py``).
"""

from __future__ import annotations

import attrs
import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from tests.torch.op_db import nn, nn_pooling
from tests.torch.op_db._entry import (
    COMPLEX_NO_HALF,
    OpEntry,
    Sample,
    by_id,
    complex_variant,
    complex_variants,
    tensors,
)

aten = torch.ops.aten


ENTRIES: list[OpEntry] = [complex_variant(e) for e in by_id(nn.ENTRIES, (
    "aten::bmm.default", "aten::matmul.default", "aten::addmm.default", "aten::linear.default",
    "aten::convolution.default", "convolution[transposed]", "aten::col2im.default"))]
ENTRIES.append(complex_variant(by_id(nn.ENTRIES, ["aten::addbmm.default"])[0]))
# the _trilinear entries' tolerances are for their float32/half sums: the complex variants,
# with parts of at most 4 in magnitude, meet the default one
ENTRIES += [complex_variant(e, atol=None, rtol=None, tol_reason="") for e in by_id(
    nn.ENTRIES, ("aten::_trilinear.default", "_trilinear.direct"))]


# adaptive average pooling: torch's CPU kernel has no complex version, but F.adaptive_avg_pool
# with an all-ones output size is a mean, which eager runs on complex; export records it as
# _adaptive_avg_pool. Other sizes are compared with torch pooling the two parts (the
# mathematical value: averaging is linear).
def _global(sample: Sample) -> Sample:
    x, out = sample.args
    return Sample((x, [1] * len(out)))


def _pool_parts(x: torch.Tensor, out: list[int]) -> torch.Tensor:
    pool = F.adaptive_avg_pool2d if len(out) == 2 else F.adaptive_avg_pool3d
    return torch.complex(pool(x.real, out), pool(x.imag, out))


for _e in by_id(nn_pooling.ENTRIES, ("aten::_adaptive_avg_pool2d.default",
                             "aten::_adaptive_avg_pool3d.default")):
    _v = complex_variant(_e)
    ENTRIES.append(attrs.evolve(_v, samples=_v.samples.map(_global)))
    ENTRIES.append(attrs.evolve(_v, name=f"{_e.id}[complex, by parts]", reference=_pool_parts))


# one complex dtype drawn per entry, a 47-term dot product
ENTRIES.append(OpEntry(
    "aten::mm.default", torch.mm, st.builds(
        lambda a, b: Sample((a, b)),
        tensors((3, 47), torch.complex64), tensors((47, 1), torch.complex64)), name="mm[complex]",
    atol=1e-4, tol_reason="a 47-term complex dot product: summation order differs from torch",
    no_half=COMPLEX_NO_HALF))
# the general mm entries on complex inputs
ENTRIES += complex_variants([e for e in nn.ENTRIES if not e.name], ["aten::mm.default"],
                            atol=1e-4, rtol=1e-5,
                            tol_reason="complex dot products of up to 47 terms: numpy and "
                                       "torch sum them in different orders")
