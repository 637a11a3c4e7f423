"""``coreai_torch.llm.compression.compress``: Apple's presets and coreai-opt configs on tiny
``transformers`` models, converted here; the manifest against the saved artifact."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from coreai_torch import TorchConverter, get_decomp_table
from coreai_torch.llm._sizes import asset_bytes, size_report
from coreai_torch.llm.compression import PRESETS, CompressionError, compress

VOCAB, HIDDEN = 96, 64


def _qwen3(tied: bool = True, layers: int = 3, dtype: torch.dtype = torch.float32,
           ) -> torch.nn.Module:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=96,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=16, tie_word_embeddings=tied, max_position_embeddings=64)
    return Qwen3ForCausalLM(config).to(dtype).eval().requires_grad_(False)


class _Logits(torch.nn.Module):
    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.llm = model

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.llm(input_ids=ids, use_cache=False).logits


IDS = torch.tensor([[5, 17, 3, 88, 41, 0, 9]])
DECOMPRESSION = {"int4": {"coreai.constexpr_blockwise_shift_scale"},
                 "palettize4": {"coreai.lut_to_dense", "coreai.constexpr_blockwise_shift_scale"},
                 "palettize8": {"coreai.lut_to_dense", "coreai.constexpr_blockwise_shift_scale"},
                 "mixed-4-8": {"coreai.lut_to_dense", "coreai.constexpr_blockwise_shift_scale"}}


def _convert(model: torch.nn.Module) -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = torch.export.export(_Logits(model), (IDS,)).run_decompositions(get_decomp_table())
    program = TorchConverter().add_exported_program(ep, input_names=["ids"]).to_coreai()
    program.optimize()  # type: ignore[attr-defined]
    return program


@pytest.mark.parametrize(("scheme", "tied"),
                         [(s, True) for s in PRESETS] + [("int4", False), ("palettize8", False)],
                         ids=lambda v: {True: "tied", False: "untied"}.get(v, v))
def test_preset_converts_runs_and_stays_compressed(scheme: str, tied: bool,
                                                   tmp_path: Path) -> None:
    model, manifest = compress(_qwen3(tied), scheme)
    program = _convert(model)
    got = program.run({"ids": IDS.numpy()})  # type: ignore[attr-defined]
    want = model(input_ids=IDS).logits.numpy()
    # the decompressed weights are exact; float32 sums in another order
    np.testing.assert_allclose(next(iter(got.values())), want, rtol=1e-5,
                               atol=1e-5 * float(np.abs(want).max()))
    ops = {op.name for op in program.graphs["main"].ops}  # type: ignore[attr-defined]
    assert DECOMPRESSION[scheme] <= ops, sorted(ops)

    # every matrix is compressed, as the manifest says; only norms stay dense
    tensors = {t["name"]: t for t in manifest["tensors"]}
    matrices = [t for t in tensors.values() if len(t["shape"]) == 2]
    assert matrices and all(not t["scheme"].startswith("dense") for t in matrices), matrices
    emb = tensors["model.embed_tokens.weight"]
    if scheme == "int4":
        assert emb["scheme"] == "quantized int4"
    else:  # Apple's iOS recipe: the embedding is int8 with one scale
        assert emb["scheme"] == "quantized int8" and emb["bits"] < 8.01
    # a tied head computes with the embedding's table: no weight of its own
    assert ("lm_head.weight" in tensors) == (not tied)
    if not tied and scheme == "palettize8":  # an untied head is palettized like the rest
        assert tensors["lm_head.weight"]["scheme"] == "palettized 8-bit"
    dense = [n for n, w in program.weights.items()  # type: ignore[attr-defined]
             if w.dtype.kind == "f" and w.size >= VOCAB * HIDDEN // 2]
    assert not dense, dense

    # the stored bytes: the manifest's count against the saved artifact's weights
    program.save(tmp_path / "p.coreai")  # type: ignore[attr-defined]
    (weights,) = (tmp_path / "p.coreai").rglob("weights.safetensors")
    header = int.from_bytes(weights.read_bytes()[:8], "little")
    data = asset_bytes(weights) - 8 - header
    size = manifest["size"]
    # the artifact also holds the constants the optimizer folded (rotary tables, the causal
    # mask: a few KB) and may fold the all-ones norm weights of a fresh model
    assert abs(data - size["bytes"]) <= 0.05 * size["bytes"] + 4096, (size, data)
    # parameters() yields a tied weight once
    assert size["parameters"] == sum(p.numel() for p in _qwen3(tied).parameters())
    assert size["float32_bytes"] == 4 * size["parameters"]


def test_int4_bits_per_weight_are_apples() -> None:
    """Apple's macOS 4bit: 4 bits plus one float16 scale per 32 weights = 4.5 bits (its model
    cards' "Bits Per Weight" column); symmetric, so no zero point."""
    _, manifest = compress(_qwen3(dtype=torch.float16), "int4")
    for t in manifest["tensors"]:
        if len(t["shape"]) == 2:
            assert t["scheme"] == "quantized int4"
            assert t["bits"] == pytest.approx(4 + 16 / 32), t


def test_mixed_uses_8_bits_on_boundary_layers() -> None:
    _, manifest = compress(_qwen3(layers=6), "mixed-4-8")
    schemes = {t["name"]: t["scheme"] for t in manifest["tensors"]}
    for layer in range(6):
        want = "palettized 8-bit" if layer in (0, 1, 4, 5) else "palettized 4-bit"
        assert schemes[f"model.layers.{layer}.mlp.down_proj.weight"] == want, layer


APPLE_STYLE_YAML = r"""
kmeans_palettization_config:
  global_config:
    op_state_spec:
      weight:
        n_bits: 4
        granularity: {type: per_grouped_channel, axis: 0, group_size: 8}
  module_type_configs:
    torch.nn.modules.sparse.Embedding: null
  module_name_configs:
    'extend\.model\.layers\.(0|2)\.(self_attn|mlp)\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)':
      op_state_spec:
        weight:
          n_bits: 8
          granularity: {type: per_tensor}
"""


def test_apple_style_yaml_recipe_applies(tmp_path: Path) -> None:
    """A recipe written like Apple's qwen3 mixed 4/8-bit YAML (module names of Apple's
    wrapper, ``extend.model...``) applies to the Hugging Face module tree."""
    path = tmp_path / "recipe.yaml"
    path.write_text(APPLE_STYLE_YAML)
    model, manifest = compress(_qwen3(), path)
    schemes = {t["name"]: t["scheme"] for t in manifest["tensors"]}
    assert schemes["model.layers.0.self_attn.q_proj.weight"] == "palettized 8-bit"
    assert schemes["model.layers.1.self_attn.q_proj.weight"] == "palettized 4-bit"
    assert schemes["model.layers.2.mlp.up_proj.weight"] == "palettized 8-bit"
    assert any("matched as" in n for n in manifest["notes"]), manifest["notes"]
    assert manifest["scheme"] == str(path)
    program = _convert(model)
    np.testing.assert_allclose(
        next(iter(program.run({"ids": IDS.numpy()}).values())),  # type: ignore[attr-defined]
        model(input_ids=IDS).logits.numpy(), rtol=1e-5, atol=1e-5)


def test_quantization_config_dict_applies() -> None:
    config = {"quantization_config": {"global_config": {"op_state_spec": {"weight": {
        "dtype": "int8", "granularity": {"type": "per_channel", "axis": 0}}},
        "op_input_spec": None, "op_output_spec": None}}}
    _, manifest = compress(_qwen3(), config)
    matrices = [t for t in manifest["tensors"] if len(t["shape"]) == 2]
    assert {t["scheme"] for t in matrices} == {"quantized int8"}
    assert manifest["size"]["vs_float32"] < 0.3


def test_none_leaves_the_model_alone() -> None:
    model = _qwen3()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    same, manifest = compress(model, None)
    assert same is model and manifest["scheme"] == "none"
    for k, v in same.state_dict().items():
        torch.testing.assert_close(v, before[k], rtol=0, atol=0)
    assert manifest["size"]["vs_float32"] == 1.0


def test_unknown_scheme_lists_the_presets() -> None:
    with pytest.raises(CompressionError, match="unknown compression 'int3'") as e:
        compress(_qwen3(), "int3")
    for name in PRESETS:
        assert repr(name) in str(e.value)


@pytest.mark.parametrize(("config", "match"), [
    ({"palettization": {}}, "one top-level key"),
    ({"kmeans_palettization_config": {"module_name_configs": {r"decoder\.\d+": None}}},
     "matches no module"),
])
def test_bad_configs_are_named(config: dict, match: str) -> None:
    with pytest.raises(CompressionError, match=match):
        compress(_qwen3(), config)


def test_missing_yaml_is_named(tmp_path: Path) -> None:
    with pytest.raises(CompressionError, match="does not exist"):
        compress(_qwen3(), tmp_path / "nope.yaml")


def test_size_report_counts_a_tied_weight_once() -> None:
    model = _qwen3(tied=True)
    report = size_report(model)
    unique = {id(p): p for p in model.parameters()}
    assert report.parameters == sum(p.numel() for p in unique.values())
    assert report.nbytes == 4 * report.parameters
    assert math.isclose(report.bits_per_weight, 32)


def test_tied_embedding_is_stored_once() -> None:
    """The converter stores one tensor held under two names (a tied ``lm_head``) once."""
    model = _qwen3(tied=True)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = torch.export.export(_Logits(model), (IDS,)).run_decompositions(get_decomp_table())
    program = TorchConverter().add_exported_program(ep, input_names=["ids"]).to_coreai()
    table = model.lm_head.weight.numpy()
    tables = [n for n, w in program.weights.items()
              if w.shape == table.shape and np.array_equal(w, table)]
    assert len(tables) == 1, tables
    np.testing.assert_allclose(next(iter(program.run({"ids": IDS.numpy()}).values())),
                               model(input_ids=IDS).logits.numpy(), rtol=1e-5, atol=1e-5)


def test_tied_int4_table_is_stored_once_across_entrypoints() -> None:
    """The int4 embedding a tied head shares is read by the gather and the output projection
    of two entrypoints: the converted 4-bit table is stored once, shared by all four."""
    model, manifest = compress(_qwen3(tied=True), "int4")
    converter = TorchConverter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, ids in (("long", IDS), ("short", IDS[:, :2])):
            ep = torch.export.export(_Logits(model), (ids,)).run_decompositions(
                get_decomp_table())
            converter.add_exported_program(ep, input_names=["ids"], entrypoint_name=name)
    program = converter.to_coreai()
    tables = [n for n, w in program.weights.items()  # (gate/up_proj have that shape too)
              if w.shape == (VOCAB, HIDDEN) and str(w.dtype) == "int4" and "layers" not in n]
    assert len(tables) == 1, tables
    for name, ids in (("long", IDS), ("short", IDS[:, :2])):
        got = next(iter(program.run({"ids": ids.numpy()}, entrypoint=name).values()))
        np.testing.assert_allclose(got, model(input_ids=ids).logits.numpy(), rtol=1e-5,
                                   atol=1e-5)
    assert manifest["size"]["vs_float32"] < 0.2
