"""Op-database entries (nn family): scaled dot-product attention."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from tests.torch.op_db._entry import FLOAT_DTYPES, EntrySet, OpEntry, Sample, half_variant, tensors

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
