"""Apple's composite-op modules (coreai_torch.composite_ops): eager results against float64
numpy references written from the documented definitions, then conversion with Apple's
``ExternalizeSpec`` (the composite names, attributes and input names of Apple's API pages)
against torch eager.

Tolerances: the modules compute in float32; ``F32`` bounds float32 rounding of a few dozen
operations on values of order one compared with a float64 reference.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from coreai_torch import ExternalizeSpec, TorchConverter
from coreai_torch.composite_ops import (
    SDPA,
    ExpertLinear,
    GatedDeltaUpdate,
    GatherMM,
    RMSNorm,
    RMSNormImpl,
    RoPE,
)

F32 = {"rtol": 2e-5, "atol": 2e-5}
SIZES = st.sampled_from([1, 2, 5, 47])


def f64(t: torch.Tensor) -> np.ndarray:
    return t.detach().double().numpy()


def randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


# -- RMSNorm ----------------------------------------------------------------------------------

@settings(max_examples=15, deadline=None)
@given(rows=SIZES, dim=SIZES, eps=st.sampled_from([1e-6, 1e-5, 0.5]), seed=st.integers(0, 99))
def test_rms_norm_matches_its_definition(rows: int, dim: int, eps: float, seed: int) -> None:
    x, scale = randn(rows, dim, seed=seed), randn(dim, seed=seed + 1)
    want = f64(x) / np.sqrt((f64(x) ** 2).mean(-1, keepdims=True) + eps) * f64(scale)
    np.testing.assert_allclose(RMSNormImpl(eps=eps)(x, scale).numpy(), want, **F32)
    norm = RMSNorm(dim, eps=eps)
    norm.weight.data = scale
    np.testing.assert_allclose(norm(x).detach().numpy(), want, **F32)


def test_rms_norm_scale_shapes_and_half_precision() -> None:
    assert RMSNorm(8).weight.shape == (8,) and RMSNorm(8, n_heads=3).weight.shape == (3, 1, 8)
    x = randn(2, 3, 4, 8, seed=0).half()
    norm = RMSNormImpl()
    # float16 input, float32 scale: the product is taken in float32 and rounded once
    scale = randn(8, seed=1)
    exact = f64(x) / np.sqrt((f64(x) ** 2).mean(-1, keepdims=True) + 1e-5) * f64(scale)
    got = norm(x, scale)
    assert got.dtype == torch.float16
    np.testing.assert_array_equal(got.numpy(), exact.astype(np.float32).astype(np.float16)
                                  .astype(np.float32).astype(np.float16))
    # a float16 square of 300 overflows; the mean of squares is taken in float32
    big = torch.full((1, 8), 300.0, dtype=torch.float16)
    assert torch.isfinite(norm(big, torch.ones(8, dtype=torch.float16))).all()


# -- RoPE -------------------------------------------------------------------------------------

def rope_reference(x: np.ndarray, angles: np.ndarray, rotated: int, interleaved: bool,
                   ) -> np.ndarray:
    """Each pair (a, b) as the complex number a + ib, multiplied by exp(i angle)."""
    part = x[..., :rotated]
    if interleaved:
        z = part[..., 0::2] + 1j * part[..., 1::2]
    else:
        z = part[..., :rotated // 2] + 1j * part[..., rotated // 2:]
    z = z * np.exp(1j * angles)
    if interleaved:
        pairs = np.stack([z.real, z.imag], axis=-1).reshape(*z.shape[:-1], rotated)
    else:
        pairs = np.concatenate([z.real, z.imag], axis=-1)
    return np.concatenate([pairs, x[..., rotated:]], axis=-1)


@settings(max_examples=20, deadline=None)
@given(batch=st.sampled_from([1, 2]), heads=st.sampled_from([1, 3]), seq=SIZES,
       half=st.sampled_from([1, 2, 5]), extra=st.sampled_from([0, 3]),
       interleaved=st.booleans(), scale=st.sampled_from([1.0, 0.25]),
       mode=st.sampled_from(["default", "offset", "position_ids", "freqs", "cos_sin"]),
       seed=st.integers(0, 99))
def test_rope_matches_rotation_by_complex_numbers(batch: int, heads: int, seq: int, half: int,
                                                  extra: int, interleaved: bool, scale: float,
                                                  mode: str, seed: int) -> None:
    rotated = 2 * half
    dims = rotated if extra else None
    x = randn(batch, heads, seq, rotated + extra, seed=seed)
    base = 500.0
    positions = np.broadcast_to(np.arange(seq, dtype=np.float64), (batch, seq))
    freqs = base ** (-np.arange(half) / half)
    kwargs: dict = {}
    if mode == "offset":
        offset = torch.arange(batch) * 7 + 3
        kwargs["offset"] = offset
        positions = positions + f64(offset)[:, None]
    elif mode == "position_ids":
        ids = torch.from_numpy(np.random.default_rng(seed).integers(0, 99, (batch, seq)))
        kwargs["position_ids"] = ids
        positions = f64(ids)
    elif mode == "freqs":
        kwargs["freqs"] = torch.rand(half, dtype=torch.float32) * 2
        freqs = f64(kwargs["freqs"])
    angles = positions[:, None, :, None] * freqs * scale        # [batch, 1, seq, half]
    if mode == "cos_sin":
        angles = np.random.default_rng(seed).uniform(-4, 4, (seq, half))
        kwargs = {"cos": torch.from_numpy(np.cos(angles).astype(np.float32)),
                  "sin": torch.from_numpy(np.sin(angles).astype(np.float32))}
        angles = np.float32(angles).astype(np.float64)
    rope = RoPE(scale=scale, base=base, dims=dims, interleaved=interleaved)
    got = rope(x, **kwargs).numpy()
    # angles reach ~100 rad: float32 angle rounding (~1e-5) times the value
    np.testing.assert_allclose(got, rope_reference(f64(x), angles, rotated, interleaved),
                               rtol=1e-4, atol=2e-4)


def test_rope_with_full_width_cos_sin_is_hugging_face_rotary_embedding() -> None:
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    q, k = randn(2, 4, 6, 8, seed=0), randn(2, 4, 6, 8, seed=1)
    angles = torch.outer(torch.arange(6.0), 1e4 ** (-torch.arange(4) / 4))
    cos, sin = torch.cat([angles, angles], -1).cos(), torch.cat([angles, angles], -1).sin()
    want_q, want_k = apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=0)
    torch.testing.assert_close(RoPE()(q, cos, sin), want_q, rtol=0, atol=0)
    torch.testing.assert_close(RoPE()(k), want_k, rtol=1e-6, atol=1e-6)


def test_rope_rejects_an_odd_rotation() -> None:
    with pytest.raises(ValueError, match=r"even number \(>= 2\) of features, got 3"):
        RoPE(dims=3)(torch.randn(1, 1, 2, 6))


# -- SDPA -------------------------------------------------------------------------------------

def sdpa_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float | None,
                   may_attend: np.ndarray | None, sinks: np.ndarray | None) -> np.ndarray:
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = scale * q @ np.swapaxes(k, -1, -2)
    if may_attend is not None:
        scores = scores - 1e4 * ~may_attend
    if sinks is not None:
        column = np.broadcast_to(sinks[None, :, None, None], (*scores.shape[:-1], 1))
        scores = np.concatenate([scores, column], axis=-1)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights = weights / weights.sum(-1, keepdims=True)
    return weights[..., :k.shape[-2]] @ v


def window_mask(tq: int, tk: int, causal: bool, window: int) -> np.ndarray | None:
    """Query i stands at position i + tk - tq; it sees key j if j is not ahead of it (causal)
    and fewer than ``window`` positions away (window > 0)."""
    if not causal and window <= 0:
        return None
    mask = np.zeros((tq, tk), dtype=bool)
    for i in range(tq):
        for j in range(tk):
            ahead = j - (i + tk - tq)
            ok = not (causal and ahead > 0)
            if window > 0:
                ok = ok and abs(ahead) < window and not (causal and ahead > 0)
            mask[i, j] = ok
    return mask


@settings(max_examples=25, deadline=None)
@given(kv_heads=st.sampled_from([1, 2]), group=st.sampled_from([1, 3]),
       tq=st.sampled_from([1, 4, 7]), past=st.sampled_from([0, 5]), d=st.sampled_from([1, 8]),
       causal=st.booleans(), window=st.sampled_from([0, 1, 3]),
       scale=st.sampled_from([None, 0.3]), masked=st.booleans(), sinks=st.booleans(),
       seed=st.integers(0, 99))
def test_sdpa_matches_its_definition(kv_heads: int, group: int, tq: int, past: int, d: int,
                                     causal: bool, window: int, scale: float | None,
                                     masked: bool, sinks: bool, seed: int) -> None:
    tk = tq + past
    q = randn(2, kv_heads * group, tq, d, seed=seed)
    k, v = randn(2, kv_heads, tk, d, seed=seed + 1), randn(2, kv_heads, tk, 5, seed=seed + 2)
    mask = torch.from_numpy(np.random.default_rng(seed).random((tq, tk)) > 0.4) if masked \
        else None
    sink = randn(kv_heads * group, seed=seed + 3) if sinks else None
    got = SDPA(scale, causal, window)(q, k, v, mask, sink)
    may_attend = f64(mask).astype(bool) if mask is not None else window_mask(tq, tk, causal,
                                                                            window)
    want = sdpa_reference(f64(q), f64(k), f64(v), scale, may_attend,
                          f64(sink) if sink is not None else None)
    np.testing.assert_allclose(got.numpy(), want, **F32)


def test_sdpa_agrees_with_torch_where_the_semantics_coincide() -> None:
    q, k, v = randn(1, 6, 5, 8, seed=0), randn(1, 2, 9, 8, seed=1), randn(1, 2, 9, 8, seed=2)
    # lower-right causal is torch's attention with that explicit mask
    lower_right = torch.ones(5, 9, dtype=torch.bool).tril(diagonal=4)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=lower_right, enable_gqa=True)
    torch.testing.assert_close(SDPA(is_causal=True)(q, k, v), want, **F32)
    torch.testing.assert_close(SDPA()(q, k, v),
                               F.scaled_dot_product_attention(q, k, v, enable_gqa=True), **F32)
    hf = SDPA(is_causal=True, _use_hf_impl=True)(q, k, v)
    torch.testing.assert_close(hf, want, **F32)


# -- GatherMM, ExpertLinear ---------------------------------------------------------------------

@settings(max_examples=15, deadline=None)
@given(n=SIZES, e=st.sampled_from([1, 4]), d=st.sampled_from([1, 6]), h=st.sampled_from([1, 5]),
       gather_lhs=st.booleans(), seed=st.integers(0, 99))
def test_gather_mm_is_gather_then_matmul(n: int, e: int, d: int, h: int, gather_lhs: bool,
                                         seed: int) -> None:
    rng = np.random.default_rng(seed)
    x, experts = randn(n, 1, 1, d, seed=seed), randn(e, d, h, seed=seed + 1)
    index = torch.from_numpy(rng.integers(0, e, (n, 2)).astype(np.int32))
    got = GatherMM()(x, experts, rhs_indices=index)
    want = f64(x) @ f64(experts)[f64(index).astype(int)]        # [n, 2, 1, h]
    np.testing.assert_allclose(got.numpy(), want, **F32)
    if gather_lhs:
        table = randn(e, 3, d, seed=seed + 2)
        rows = torch.from_numpy(rng.integers(0, e, (n,)))
        got = GatherMM()(table, experts[0], lhs_indices=rows)
        np.testing.assert_allclose(got.numpy(), f64(table)[f64(rows).astype(int)]
                                   @ f64(experts[0]), **F32)
    fused = randn(2, e, d, h, seed=seed + 3)                    # num_batch_axes=1: gate and up
    got = GatherMM(num_batch_axes=1)(x, fused, rhs_indices=index)
    want = f64(x) @ f64(fused)[:, f64(index).astype(int)]
    np.testing.assert_allclose(got.numpy(), want, **F32)


def test_expert_linear_multiplies_each_row_by_its_expert() -> None:
    layer = ExpertLinear(3, 4, 5)
    x, index = randn(7, 4, seed=0), torch.tensor([0, 2, 1, 1, 0, 2, 2])
    want = np.stack([f64(x)[i] @ f64(layer.weight)[j] for i, j in enumerate(index.tolist())])
    np.testing.assert_allclose(layer(x, index).detach().numpy(), want, **F32)


# -- GatedDeltaUpdate -----------------------------------------------------------------------

def delta_rule_reference(q, k, v, g, beta, state, l2):
    if l2:
        q = q / np.sqrt((q * q).sum(-1, keepdims=True) + 1e-6)
        k = k / np.sqrt((k * k).sum(-1, keepdims=True) + 1e-6)
    group = v.shape[1] // q.shape[1]
    q, k = np.repeat(q, group, axis=1), np.repeat(k, group, axis=1)
    q = q * q.shape[-1] ** -0.5
    b, h, s, _ = k.shape
    out = np.zeros((b, s, h, v.shape[-1]))
    state = state.copy()
    for bi in range(b):
        for hi in range(h):
            m = state[bi, hi]
            for t in range(s):
                m = np.exp(g[bi, hi, t]) * m
                kt = k[bi, hi, t]
                m = m + np.outer(kt, beta[bi, hi, t] * (v[bi, hi, t] - kt @ m))
                out[bi, t, hi] = q[bi, hi, t] @ m
            state[bi, hi] = m
    return out, state


@settings(max_examples=10, deadline=None)
@given(heads=st.sampled_from([(1, 1), (2, 2), (1, 3), (2, 4)]), s=st.sampled_from([1, 6]),
       dk=st.sampled_from([1, 4]), dv=st.sampled_from([1, 3]), l2=st.booleans(),
       seed=st.integers(0, 99))
def test_gated_delta_update_matches_the_recurrence(heads, s, dk, dv, l2, seed) -> None:
    hk, hv = heads
    rng = np.random.default_rng(seed)
    q, k = randn(2, hk, s, dk, seed=seed), randn(2, hk, s, dk, seed=seed + 1)
    v, state = randn(2, hv, s, dv, seed=seed + 2), randn(2, hv, dk, dv, seed=seed + 3)
    g = torch.from_numpy(-rng.random((2, hv, s)).astype(np.float32))
    beta = torch.from_numpy(rng.random((2, hv, s)).astype(np.float32))
    out, final = GatedDeltaUpdate(use_qk_l2_norm=l2)(q, k, v, g, beta, state)
    want_out, want_state = delta_rule_reference(*(f64(t) for t in (q, k, v, g, beta, state)),
                                                l2)
    # without the L2 normalization keys of norm ~sqrt(dk) grow the state over the steps
    tol = F32 if l2 else {"rtol": 1e-4, "atol": 1e-4}
    np.testing.assert_allclose(out.numpy(), want_out, **tol)
    np.testing.assert_allclose(final.numpy(), want_state, **tol)


# -- conversion with Apple's ExternalizeSpec --------------------------------------------------

class Call(torch.nn.Module):
    """``op(*tensors, **keyword_tensors)``: one composite-op module called as a model does."""

    def __init__(self, op: torch.nn.Module, keywords: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.op, self.keywords = op, keywords

    def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
        n = len(tensors) - len(self.keywords)
        return self.op(*tensors[:n], **dict(zip(self.keywords, tensors[n:], strict=True)))


# (module, Apple's documented composite_attrs, inputs, keyword inputs, input names of the docs)
CASES = {
    "rms_norm": (RMSNormImpl(eps=1e-6), ["axes", "eps"],
                 (randn(2, 5, 8, seed=0), randn(8, seed=1)), (), ["input", "scale"]),
    "rope": (RoPE(base=100.0, dims=4), ["scale", "base", "dims", "interleaved"],
             (randn(1, 2, 5, 6, seed=2), torch.tensor([[3, 4, 5, 9, 11]])), ("position_ids",),
             ["input", "position_ids"]),
    "scaled_dot_product_attention": (
        SDPA(is_causal=True, window_size=3), ["scale", "is_causal", "window_size"],
        (randn(1, 4, 3, 8, seed=3), randn(1, 2, 7, 8, seed=4), randn(1, 2, 7, 8, seed=5),
         randn(4, seed=6)), ("sinks",), ["query", "key", "value", "sinks"]),
    "gather_mm": (GatherMM(), ["num_batch_axes"],
                  (randn(1, 6, 1, 1, 8, seed=7), randn(4, 8, 5, seed=8),
                   torch.tensor([[[0, 3], [1, 1], [2, 0], [3, 3], [0, 1], [2, 2]]])),
                  ("rhs_indices",), ["lhs", "rhs", "rhs_indices"]),
    "gated_delta_update": (
        GatedDeltaUpdate(), ["use_qk_l2_norm"],
        (randn(1, 2, 5, 4, seed=9), randn(1, 2, 5, 4, seed=10), randn(1, 2, 5, 3, seed=11),
         -torch.rand(1, 2, 5), torch.rand(1, 2, 5), randn(1, 2, 4, 3, seed=12)), (),
        ["query", "key", "value", "g", "beta", "initial_state"]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_apple_externalize_spec_converts_to_its_composite(name: str) -> None:
    op, attrs, inputs, keywords, input_names = CASES[name]
    model = Call(op, keywords).eval()
    spec = ExternalizeSpec(target_class=type(op), composite_op_name=name, composite_attrs=attrs)
    program = (TorchConverter()
               .add_pytorch_module(model, lambda m: torch.export.export(m, args=inputs),
                                   externalize_modules=[spec])
               .to_coreai())
    (graph,) = program.composites.values()
    assert graph.composite.name == name
    assert graph.composite.attributes == {a: getattr(op, a) for a in attrs}
    assert list(graph.inputs) == input_names
    program.optimize()
    got = program.run(dict(zip(program.input_names, [t.numpy() for t in inputs], strict=True)))
    with torch.no_grad():
        want = model(*inputs)
    want = [want] if isinstance(want, torch.Tensor) else list(want)
    for g, w in zip(got.values(), want, strict=True):
        np.testing.assert_allclose(g, w.numpy(), **F32)


def test_a_bare_composite_class_uses_apples_name_and_attributes() -> None:
    model = Call(SDPA(scale=0.5)).eval()
    inputs = (randn(1, 2, 3, 4, seed=0),) * 3
    program = TorchConverter().add_pytorch_module(model, args=inputs,
                                                  externalize_modules=[SDPA]).to_coreai()
    (graph,) = program.composites.values()
    assert (graph.composite.name, graph.composite.attributes) == (
        "scaled_dot_product_attention", {"scale": 0.5, "is_causal": False, "window_size": 0})


def test_externalize_spec_follows_apples_validation() -> None:
    with pytest.raises(ValueError, match="composite_attrs needs composite_op_name"):
        ExternalizeSpec(RMSNormImpl, composite_attrs=["eps"])
    with pytest.raises(TypeError, match="list of attribute names"):
        ExternalizeSpec(RMSNormImpl, "rms_norm", "eps")
    inputs = (randn(2, 8, seed=0), randn(8, seed=1))
    spec = ExternalizeSpec(RMSNormImpl, "rms_norm", ["eps", "epsilon"])
    with pytest.raises(AttributeError, match=r"no attribute\(s\) \['epsilon'\]"):
        TorchConverter().add_pytorch_module(Call(RMSNormImpl()), args=inputs,
                                            externalize_modules=[spec])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        TorchConverter().add_pytorch_module(Call(RMSNormImpl()), None, [RMSNormImpl, RoPE],
                                            args=inputs)
    assert [str(w.message) for w in caught if w.category is UserWarning] == [
        "externalize_modules: no submodule of Call is a RoPE; nothing is externalized for it"]


def test_instances_configured_differently_get_their_own_composites() -> None:
    """Apple: "two instances configured differently are preserved as distinct composite ops".
    The settings are baked into each exported graph, so sharing one would be wrong; the
    wrapper's setting lives on its inner RMSNormImpl and counts too."""

    class Norms(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = RMSNormImpl(eps=1e-5), RMSNormImpl(eps=0.5)
            self.c, self.d = RMSNorm(4, eps=1e-5), RMSNorm(4, eps=2.0)

        def forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
            return self.a(x, w) + self.b(x, w) + self.c(x) + self.d(x)

    model, inputs = Norms().eval(), (randn(3, 4, seed=0), randn(4, seed=1))
    spec = ExternalizeSpec(RMSNormImpl, "rms_norm", ["axes", "eps"])
    for externalize in ([spec], [RMSNorm, RMSNormImpl]):
        program = TorchConverter().add_pytorch_module(model, args=inputs,
                                                      externalize_modules=externalize
                                                      ).to_coreai()
        eps = sorted({g.composite.attributes["eps"] for g in program.composites.values()})
        assert eps == [1e-5, 0.5, 2.0]
        (got,) = program.run({"x": inputs[0].numpy(), "w": inputs[1].numpy()}).values()
        np.testing.assert_allclose(got, model(*inputs).detach().numpy(), **F32)
