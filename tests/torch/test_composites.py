"""Composites from the converter: built-in lowerings (composites=True) and externalized modules.

Every case runs the converted program and compares with torch eager.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from coreai_core.optimizer import InlineCompositesPass
from coreai_torch import ExternalizeSpec, TorchConverter, find_first_divergence, get_decomp_table
from coreai_torch.composite_ops import SDPA, ExpertLinear, RMSNorm, RoPE
from coreai_torch.errors import LoweringError

RTOL, ATOL = 1e-5, 1e-5


def run(program, inputs):
    return [np.asarray(v) for v in program.run({k: v.numpy() for k, v in inputs.items()}).values()]


def assert_close(program, module, inputs, rtol=RTOL, atol=ATOL):
    got = run(program, inputs)
    with torch.no_grad():
        want = module(*inputs.values())
    want = [want] if isinstance(want, torch.Tensor) else list(want)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == tuple(w.shape)
        np.testing.assert_allclose(g, w.numpy(), rtol=rtol, atol=atol)


# -- built-in lowerings emitting composites --------------------------------------------------

class NormGeluAttention(torch.nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(width)
        self.ln2 = torch.nn.LayerNorm(width)
        for p in self.parameters():
            torch.nn.init.uniform_(p, -1, 1)

    def forward(self, x: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> tuple:
        y = F.gelu(self.ln1(x), approximate="tanh")
        a = F.scaled_dot_product_attention(q, k, k, is_causal=True)
        return self.ln2(y) * 2, a, F.gelu(x)


@settings(max_examples=4)
@given(rows=st.sampled_from([1, 5, 47]), width=st.sampled_from([1, 8, 13]),
       seq=st.sampled_from([1, 6]), seed=st.integers(0, 2**16))
def test_builtin_composites_match_torch(rows, width, seq, seed):
    torch.manual_seed(seed)
    m = NormGeluAttention(width).eval()
    inputs = {"x": torch.randn(rows, width), "q": torch.randn(2, 3, seq, 4),
              "k": torch.randn(2, 3, seq, 4)}
    program = (TorchConverter(composites=True)
               .add_pytorch_module(m, args=tuple(inputs.values())).to_coreai())
    # one graph per signature: both layer norms share one; exact gelu stays flat
    names = sorted(g.composite.name for g in program.composites.values())
    assert names == ["gelu_tanh", "layer_norm", "sdpa"]
    assert_close(program, m, inputs)
    program.optimize([InlineCompositesPass(keep={"sdpa"})])
    assert [g.composite.name for g in program.composites.values()] == ["sdpa"]
    assert_close(program, m, inputs)


def test_default_conversion_stays_flat():
    m = NormGeluAttention(8).eval()
    args = (torch.randn(3, 8), torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4))
    program = TorchConverter().add_pytorch_module(m, args=args).to_coreai()
    assert program.composites == {} and "coreai.invoke" not in str(program)


def test_composite_declaration_carries_the_attributes():
    m = torch.nn.LayerNorm(6, eps=1e-3)
    program = (TorchConverter(composites=True)
               .add_pytorch_module(m, args=(torch.randn(2, 6),)).to_coreai())
    (g,) = program.composites.values()
    assert g.composite.attributes == {"normalized_shape": [6], "eps": 1e-3}
    assert g.input_names == ["input", "weight", "bias"]


def test_find_first_divergence_looks_inside_composites():
    m = NormGeluAttention(8).eval()
    args = (torch.randn(3, 8), torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4))
    program = TorchConverter(composites=True).add_pytorch_module(m, args=args).to_coreai()
    ep = torch.export.export(m, args).run_decompositions(get_decomp_table())
    inputs = dict(zip(program.input_names, [a.numpy() for a in args], strict=True))
    report = find_first_divergence(ep, program, inputs)
    assert report.first is None
    compared = {row.node for row in report.nodes}
    assert {"native_layer_norm#0", "gelu", "scaled_dot_product_attention"} <= compared
    # a wrong value inside a composite is found at the composite's result
    layer_norm = next(g for g in program.composites.values()
                      if g.composite.name == "layer_norm")
    add = [op for op in layer_norm.ops if op.name == "coreai.broadcasting_add"][-1]  # + bias
    add.name = "coreai.broadcasting_sub"
    program.invalidate()
    bad = find_first_divergence(ep, program, inputs)
    assert bad.first is not None and bad.first.node.startswith("native_layer_norm")


# -- externalized modules -------------------------------------------------------------------

class Blocks(torch.nn.Module):
    """Two RMSNorm instances of one signature, one of another; RoPE, SDPA and ExpertLinear."""

    def __init__(self) -> None:
        super().__init__()
        self.n1, self.n2, self.n3 = RMSNorm(8), RMSNorm(8), RMSNorm(4, eps=1e-6)
        self.rope, self.attn, self.experts = RoPE(), SDPA(is_causal=True), ExpertLinear(3, 8, 4)
        for p in self.parameters():
            torch.nn.init.uniform_(p, -1, 1)

    def forward(self, x, cos, sin, index):
        h = self.n2(self.n1(x) + 1)                        # [b, s, 8]
        q = self.rope(h.unflatten(-1, (2, 4)).transpose(1, 2), cos, sin)  # [b, 2, s, 4]
        a = self.attn(q, q, q).transpose(1, 2).flatten(2)  # [b, s, 8]
        e = self.experts(a.flatten(0, 1), index)           # [b*s, 4]
        return self.n3(e)


def blocks_inputs(seq: int) -> dict[str, torch.Tensor]:
    return {"x": torch.randn(2, seq, 8), "cos": torch.randn(seq, 4), "sin": torch.randn(seq, 4),
            "index": torch.randint(0, 3, (2 * seq,))}


def test_externalized_composite_ops_match_torch_and_flat_conversion():
    torch.manual_seed(0)
    m = Blocks().eval()
    inputs = blocks_inputs(5)
    specs = [RMSNorm, RoPE, SDPA, ExternalizeSpec(ExpertLinear, "moe_matmul", {"experts": 3})]
    program = (TorchConverter()
               .add_pytorch_module(m, args=tuple(inputs.values()), externalize_modules=specs)
               .to_coreai())
    decls = sorted((g.composite.name, tuple(sorted(g.composite.attributes.items())))
                   for g in program.composites.values())
    assert decls == [("moe_matmul", (("experts", 3),)),
                     ("rms_norm", (("axes", -1), ("eps", 1e-6))),
                     ("rms_norm", (("axes", -1), ("eps", 1e-5))),
                     ("rope", (("base", 1e4), ("dims", None), ("interleaved", False),
                               ("scale", 1.0))),
                     ("scaled_dot_product_attention", (("is_causal", True), ("scale", None),
                                                       ("window_size", 0)))]
    # each parameter is stored once, under its own name (the causal sdpa adds its mask)
    for name, param in m.named_parameters():
        same = [k for k, v in program.weights.items()
                if v is not None and v.shape == param.shape and np.array_equal(v, param.detach())]
        assert same == [name]
    assert_close(program, m, inputs)
    flat = TorchConverter().add_pytorch_module(m, args=tuple(inputs.values())).to_coreai()
    for a, b in zip(run(program, inputs), run(flat, inputs), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_externalized_graph_serves_dynamic_sizes():
    torch.manual_seed(1)
    m = Blocks().eval()
    inputs = blocks_inputs(6)
    seq = torch.export.Dim("seq", min=2, max=32)
    dyn = ({1: seq}, {0: seq}, {0: seq}, {0: 2 * seq})

    def export(mod):
        return torch.export.export(mod, tuple(inputs.values()), dynamic_shapes=dyn)

    program = (TorchConverter().add_pytorch_module(m, export, externalize_modules=[RMSNorm])
               .to_coreai())
    assert len(program.composites) == 2  # rms_norm over 8 and over 4 features
    for n in (2, 9):
        assert_close(program, m, blocks_inputs(n))


def test_externalize_rejects_non_module_classes():
    with pytest.raises(TypeError, match=r"nn\.Module classes or ExternalizeSpec"):
        TorchConverter().add_pytorch_module(torch.nn.Linear(2, 2), args=(torch.randn(1, 2),),
                                            externalize_modules=[int])


def test_a_program_with_module_calls_converts_only_with_its_own_externalization():
    """The staged entry owns its externalization: another converter has no graph for the
    placeholder calls and says which call and what to do."""
    m = Blocks().eval()
    inputs = blocks_inputs(5)
    owner = TorchConverter()
    owner.add_pytorch_module(m, args=tuple(inputs.values()), externalize_modules=[RMSNorm])
    other = TorchConverter().add_exported_program(owner._staged["main"].program)
    with pytest.raises(LoweringError, match=r"call_module .* belongs to no externalization.*"
                                            r"externalize_modules"):
        other.to_coreai()
    assert_close(owner.to_coreai(), m, inputs)


def test_two_entrypoints_externalizing_one_class_get_distinct_graph_names():
    torch.manual_seed(2)
    m = Blocks().eval()
    inputs = blocks_inputs(4)
    converter = TorchConverter()
    for entry in ("first", "second"):
        converter.add_pytorch_module(m, args=tuple(inputs.values()), entrypoint_name=entry,
                                     externalize_modules=[RMSNorm])
    program = converter.to_coreai()
    assert sorted(program.composites) == ["rms_norm", "rms_norm_1", "rms_norm_2", "rms_norm_3"]
    assert program.input_names == list(inputs)  # the default entrypoint is not a composite
    for entry in ("first", "second"):
        got = program.run({k: v.numpy() for k, v in inputs.items()}, entrypoint=entry)
        with torch.no_grad():
            np.testing.assert_allclose(next(iter(got.values())), m(*inputs.values()).numpy(),
                                       rtol=RTOL, atol=ATOL)


def test_find_first_divergence_looks_inside_externalized_modules():
    torch.manual_seed(3)
    m = Blocks().eval()
    inputs = blocks_inputs(5)
    converter = TorchConverter()
    converter.add_pytorch_module(m, args=tuple(inputs.values()), externalize_modules=[RMSNorm])
    program = converter.to_coreai()
    ep = converter._staged["main"].program
    arrays = {k: v.numpy() for k, v in inputs.items()}
    report = find_first_divergence(ep, program, arrays)
    assert report.first is None
    inner = [row.node for row in report.nodes if "/" in row.node]
    assert inner and all(name.startswith("call_module") for name in inner)
    # break the rms_norm graph's rsqrt: the first divergence is inside the first call
    norm = next(g for g in program.composites.values() if g.input_names[0] == "x"
                and g.inputs["x"].type.shape[-1] == 8)
    next(op for op in norm.ops if op.name == "coreai.rsqrt").name = "coreai.sqrt"
    program.invalidate()
    first = find_first_divergence(ep, program, arrays).first
    assert first is not None and first.node.startswith("call_module/")


def test_one_instance_called_with_two_shapes_invokes_two_graphs():
    class Twice(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = RMSNorm(6)
            torch.nn.init.uniform_(self.norm.weight, -1, 1)

        def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple:
            return self.norm(a), self.norm(b) * 2

    m = Twice().eval()
    inputs = {"a": torch.randn(3, 6), "b": torch.randn(2, 5, 6)}
    program = (TorchConverter()
               .add_pytorch_module(m, args=tuple(inputs.values()), externalize_modules=[RMSNorm])
               .to_coreai())
    assert len(program.composites) == 2
    assert_close(program, m, inputs)


def test_builtin_composites_with_a_dynamic_dimension():
    torch.manual_seed(4)
    m = NormGeluAttention(8).eval()
    args = (torch.randn(5, 8), torch.randn(1, 2, 6, 4), torch.randn(1, 2, 6, 4))
    rows, seq = torch.export.Dim("rows", min=2, max=64), torch.export.Dim("seq", min=2, max=64)
    ep = torch.export.export(m, args, dynamic_shapes=({0: rows}, {2: seq}, {2: seq}))
    program = (TorchConverter(composites=True)
               .add_exported_program(ep.run_decompositions(get_decomp_table())).to_coreai())
    assert len(program.composites) == 3
    for n, s in ((2, 3), (9, 11)):
        inputs = {"x": torch.randn(n, 8), "q": torch.randn(1, 2, s, 4),
                  "k": torch.randn(1, 2, s, 4)}
        assert_close(program, m, inputs)
