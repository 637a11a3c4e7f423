"""Op-database entries (nn family): scaled dot-product attention, with dropout included."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from tests.random_stats import check_mean
from tests.torch.harness import to_numpy
from tests.torch.op_db._entry import FLOAT_DTYPES, EntrySet, OpEntry, Sample, half_variant, tensors
from tests.torch.op_db.random import f64, same_layout

aten = torch.ops.aten
ENTRIES = EntrySet()


def _bool_mask(draw: Any, shape: tuple[int, ...]) -> torch.Tensor:
    mask = draw(tensors(shape, torch.bool))
    if draw(st.booleans()):
        mask[..., 0] = True  # usually keep every row attending somewhere
    return mask


@st.composite
def sdpa_samples(draw: Any, flash: bool = False) -> Sample:
    dtype = draw(st.sampled_from((torch.float32, torch.float64) if flash else FLOAT_DTYPES))
    batch = (draw(st.integers(1, 2)),)
    kv_heads = draw(st.integers(1, 2))
    gqa = not flash and draw(st.booleans())
    heads = kv_heads * (draw(st.integers(1, 2)) if gqa else 1)
    if not flash and draw(st.integers(0, 3)) == 0:
        batch, heads, kv_heads = (), None, None  # rank-3 inputs [B, L, E]
    length, source = draw(st.sampled_from((1, 3, 5, 47))), draw(st.integers(1, 6))
    embed = draw(st.integers(1, 8))
    value_embed = embed if flash else draw(st.integers(1, 8))  # flash needs one head size
    qh = (heads,) if heads else ()
    kh = (kv_heads,) if kv_heads else ()
    q = draw(tensors((*batch, *qh, length, embed), dtype, low=-2.0, high=2.0))
    k = draw(tensors((*batch, *kh, source, embed), dtype, low=-2.0, high=2.0))
    v = draw(tensors((*batch, *kh, source, value_embed), dtype))
    kind = draw(st.sampled_from(("none", "causal", "bool", "float")))
    if flash and kind == "bool":
        kind = "float"
    mask = None
    mask_shape = draw(st.sampled_from(((length, source), (*batch, *(1,) * len(qh), length,
                                                          source))))
    if kind == "bool":
        mask = _bool_mask(draw, mask_shape)
    elif kind == "float":
        mask = draw(tensors(mask_shape, dtype, low=-3.0, high=1.0))
        if draw(st.booleans()):
            mask = mask.masked_fill(~_bool_mask(draw, mask_shape), float("-inf"))
    # torch's CPU flash kernel returns NaN for causal rows under a negative scale
    scale = draw(st.sampled_from((None, 0.3) if flash else (None, 0.3, -0.5)))
    if flash:
        return Sample((q, k, v, 0.0, kind == "causal"), {"attn_mask": mask, "scale": scale})
    kwargs = {"scale": scale, "is_causal": kind == "causal"}
    if gqa and heads:
        kwargs["enable_gqa"] = True
    return Sample((q, k, v, mask), kwargs)


ENTRIES.append(OpEntry("aten::scaled_dot_product_attention.default",
                       F.scaled_dot_product_attention, sdpa_samples()))
ENTRIES.append(OpEntry("aten::_scaled_dot_product_flash_attention_for_cpu.default",
                       aten._scaled_dot_product_flash_attention_for_cpu.default,
                       sdpa_samples(flash=True)))
# float16/bfloat16 (the mask in the same dtype, as the flash kernel requires)
ENTRIES.append(half_variant(ENTRIES[-1]))


# -- with dropout: random, so the compare checks the dropout rate (as in op_db/random.py) -----

@st.composite
def sdpa_dropout_samples(draw: Any) -> Sample:
    dtype = draw(st.sampled_from((torch.float32, torch.float64)))
    batch = draw(st.sampled_from(((), (2,), (1, 3))))
    length, source = draw(st.sampled_from((1, 3, 47))), draw(st.integers(1, 6))
    q = draw(tensors((*batch, length, source), dtype, low=-2.0, high=2.0))
    k = draw(tensors((*batch, source, source), dtype, low=-2.0, high=2.0))
    # value = identity: the output is the attention weights themselves, after dropout
    v = torch.eye(source, dtype=dtype).expand(*batch, source, source).contiguous()
    return Sample((q, k, v), {"dropout_p": draw(st.sampled_from((0.2, 0.5))),
                              "is_causal": draw(st.booleans()) and length == source})


def _sdpa_dropout(got: list[np.ndarray], sample: Sample) -> None:
    q, k, v = sample.args
    p = sample.kwargs["dropout_p"]
    weights = F.scaled_dot_product_attention(q, k, v, is_causal=sample.kwargs["is_causal"])
    w = f64(to_numpy(weights))
    out = f64(got[0])
    kept = out != 0
    # half inputs (tests/torch/test_op_db_half.py): torch rounds the weights to the half type
    # before scaling by 1/(1-p), the runtime rounds the scaled float32 weight once: 2 ulps
    tol = {torch.float32: 1e-5, torch.float64: 1e-12}.get(q.dtype) or \
        2 * torch.finfo(q.dtype).eps
    np.testing.assert_allclose(out[kept], w[kept] / (1 - p), rtol=tol, atol=tol)
    nonzero = w > 0
    check_mean(~kept[nonzero], p, p * (1 - p), "attention dropout rate")


ENTRIES.append(OpEntry(
    "aten::scaled_dot_product_attention.default",
    lambda q, k, v, dropout_p, is_causal: F.scaled_dot_product_attention(
        q, k, v, dropout_p=dropout_p, is_causal=is_causal),
    sdpa_dropout_samples(), name="aten::scaled_dot_product_attention.default[dropout]",
    compare=lambda expected, got, s: (same_layout(expected, [np.asarray(g) for g in got],
                                                  "sdpa dropout"),
                                      _sdpa_dropout([np.asarray(g) for g in got], s))))
