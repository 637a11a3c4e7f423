"""Op-database entries (nn family): the nn-side ops torch runs on complex64/complex128 tensors
— matrix products, convolution, col2im, padding, embedding, _trilinear, addbmm, dropout (eval), and
bincount's weights — as complex variants (``complex_variant``) of the real entries in the family
modules. Random ops on complex tensors are in ``random_complex.py``.

Left out although the dtype audit lists them: ``native_layer_norm_backward`` (torch's CPU
kernel rejects complex; eager only "accepts" empty inputs that never reach it),
``_upsample_bilinear2d_aa`` (no complex kernel either), training-mode ``native_dropout``
(torch.export cannot trace it on complex: see ``random_complex.py``).
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs
import torch
import torch.nn.functional as F

from tests.torch.op_db import nn, nn_pooling, tensor_counting, tensor_indexing, tensor_shape
from tests.torch.op_db._entry import OpEntry, Sample, complex_variant

aten = torch.ops.aten


def _by_id(entries: Iterable[OpEntry], ids: Iterable[str]) -> list[OpEntry]:
    """The entries named by ``ids`` (an entry's ``id``: its name, else its target)."""
    wanted = list(ids)
    found = {e.id: e for e in entries if e.id in wanted}
    missing = [i for i in wanted if i not in found]
    if missing:
        raise ValueError(f"complex_nn: no entries with ids {missing}")
    return [found[i] for i in wanted]


ENTRIES: list[OpEntry] = [complex_variant(e) for e in _by_id(nn.ENTRIES, (
    "aten::bmm.default", "aten::matmul.default", "aten::addmm.default", "aten::linear.default",
    "aten::convolution.default", "convolution[transposed]", "aten::col2im.default",
    "aten::native_dropout.default"))]
ENTRIES += [complex_variant(e) for e in _by_id(tensor_shape.ENTRIES, (
    "aten::constant_pad_nd.default",
    *(f"aten::{mode}_pad{n}d.default" for mode in ("reflection", "replication")
      for n in (1, 2, 3))))]
ENTRIES += [complex_variant(e) for e in _by_id(tensor_indexing.ENTRIES, (
    "aten::embedding.default", "aten::embedding_dense_backward.default"))]
ENTRIES.append(complex_variant(_by_id(nn.ENTRIES, ["aten::addbmm.default"])[0]))
# the _trilinear entries' tolerances are for their float32/half sums: the complex variants,
# with parts of at most 4 in magnitude, meet the default one
ENTRIES += [complex_variant(e, atol=None, rtol=None, tol_reason="") for e in _by_id(
    nn.ENTRIES, ("aten::_trilinear.default", "_trilinear.direct"))]


def _complex_fill(sample: Sample) -> Sample:
    return Sample(sample.args, {**sample.kwargs,
                                "value": complex(sample.kwargs["value"], -1.25)})


# a complex fill value: aten.constant_pad_nd takes any Scalar (F.pad only floats)
_pad = _by_id(ENTRIES, ["aten::constant_pad_nd.default[complex]"])[0]
ENTRIES.append(attrs.evolve(
    _pad, name="constant_pad_nd[complex value]", samples=_pad.samples.map(_complex_fill),
    fn=lambda x, pad, value: aten.constant_pad_nd(x, pad, value)))

# torch casts complex weights to float64, discarding the imaginary part (with a warning): the
# lowering does the same, and this entry pins it. Not on an empty input: there torch's eager
# kernel returns int64 zeros whatever the weights while its meta (which the exported graph
# and so the lowering follow) says float64.
_bincount = complex_variant(_by_id(tensor_counting.ENTRIES, ["aten::bincount.default"])[0])
ENTRIES.append(attrs.evolve(
    _bincount, samples=_bincount.samples.filter(lambda s: s.args[0].numel() > 0)))


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


for _e in _by_id(nn_pooling.ENTRIES, ("aten::_adaptive_avg_pool2d.default",
                             "aten::_adaptive_avg_pool3d.default")):
    _v = complex_variant(_e)
    ENTRIES.append(attrs.evolve(_v, samples=_v.samples.map(_global)))
    ENTRIES.append(attrs.evolve(_v, name=f"{_e.id}[complex, by parts]", reference=_pool_parts))
