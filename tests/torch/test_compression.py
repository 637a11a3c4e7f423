"""Compressed and quantized models end to end: the compression helpers, torch's PT2E
quantization flow and a 4-bit Llama-shaped model, each converted, run with the numpy runtime
and compared with torch eager; saved artifacts keep the packed bytes."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from coreai_core import DType, load
from coreai_core.packing import pack_nibbles
from coreai_torch.compression import palettize, prune, quantize_weights
from tests.torch.harness import assert_matches, convert, export, flatten, to_numpy

COMPRESSED_OPS = {"coreai.lut_to_dense", "coreai.constexpr_blockwise_shift_scale",
                  "coreai.sparse_to_dense", "coreai.dequantize"}


class Small(nn.Module):
    """Embedding, 2-d convolution and linear layers (odd sizes)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(47, 12)
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(12 + 8, 5)

    def forward(self, ids: torch.Tensor, image: torch.Tensor) -> torch.Tensor:
        pooled = torch.relu(self.conv(image)).mean((2, 3))
        return self.fc(torch.cat([self.embed(ids).mean(1), pooled], 1))


def _inputs(seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 47, (2, 5), generator=g), torch.randn(2, 3, 7, 7, generator=g)]


def _check(model: nn.Module, inputs: list[torch.Tensor], what: str) -> Any:
    """Convert ``model``; its program matches torch before and after optimize(), stays
    compressed after optimize(); returns the program."""
    with torch.no_grad():
        expected = flatten(model(*inputs))
    program = convert(export(model, inputs))
    feeds = [to_numpy(t) for t in inputs]
    assert_matches(expected, list(program.run(feeds).values()), atol=1e-5, rtol=1e-5, what=what)
    before = sorted(op.name for op in program.graphs["main"].ops if op.name in COMPRESSED_OPS)
    program.optimize()
    after = sorted(op.name for op in program.graphs["main"].ops if op.name in COMPRESSED_OPS)
    assert after == before and after, f"{what}: decompression ops {before} -> {after}"
    assert_matches(expected, list(program.run(feeds).values()), atol=1e-5, rtol=1e-5,
                   what=f"{what} (optimized)")
    return program


HELPERS = st.one_of(
    st.tuples(st.just("palettize"), st.integers(1, 8), st.sampled_from([None, 1, 2, 4])),
    st.tuples(st.just("quantize_weights"),
              st.sampled_from(["int4", "uint4", "int8", "uint8", "float4_e2m1fn",
                               "float8_e4m3fn", "float8_e5m2"]),
              st.sampled_from([2, 4, 6, 32])),
    st.tuples(st.just("prune"), st.sampled_from([0.0, 0.3, 0.75, 1.0]), st.none()),
)


@settings(max_examples=5, deadline=None)
@given(helper=HELPERS, seed=st.integers(0, 1000))
def test_compressed_modules_convert_and_match_torch(helper: tuple, seed: int) -> None:
    name, a, b = helper
    torch.manual_seed(seed)
    model = Small().eval()
    {"palettize": lambda: palettize(model, a, b),
     "quantize_weights": lambda: quantize_weights(model, a, b),
     "prune": lambda: prune(model, a)}[name]()
    kind = {"palettize": "Palettized", "prune": "Pruned", "quantize_weights": "Quantized"}[name]
    assert [type(m).__name__ for m in (model.embed, model.conv, model.fc)] == [
        f"{kind}Embedding", f"{kind}Conv2d", f"{kind}Linear"]
    _check(model, _inputs(seed), f"{name}({a}, {b})")


def test_helpers_reconstruct_the_weights_closely() -> None:
    torch.manual_seed(0)
    for compress, tol in ((lambda m: palettize(m, 6), 0.02),
                          (lambda m: quantize_weights(m, "int8", 4), 0.01),
                          (lambda m: quantize_weights(m, "int4", 4), 0.15)):
        model = Small()
        dense = model.fc.weight.detach().clone()
        compress(model)
        err = (model.fc.weight - dense).abs().max() / dense.abs().max()
        assert err < tol
    model = Small()
    dense = model.fc.weight.detach().clone()
    prune(model, 0.5)
    kept = model.fc.weight != 0
    assert kept.sum() == dense.numel() // 2
    torch.testing.assert_close(model.fc.weight[kept], dense[kept])
    assert dense[kept].abs().min() >= dense[~kept].abs().max()


def test_save_and_load_keep_the_packed_bytes(tmp_path: Path) -> None:
    torch.manual_seed(1)
    model = quantize_weights(Small().eval(), "int4", 4)
    inputs = _inputs(1)
    program = _check(model, inputs, "int4")
    program.save(tmp_path / "m")
    loaded = load(tmp_path / "m")
    assert loaded == program
    for name, data in program.weights.items():
        assert loaded.weights[name].dtype == data.dtype
        assert loaded.weights[name].tobytes() == data.tobytes()
    four_bit = [n for n, d in program.weights.items() if DType.of(d.dtype) is DType.int4]
    assert four_bit, "the 4-bit weights are stored as int4"
    for name in four_bit:  # the program's int4 weight is the module's packed buffer
        buffer = dict(model.named_buffers())[name]
        assert bytes(pack_nibbles(program.weights[name])) == buffer.numpy().tobytes()
    feeds = [to_numpy(t) for t in inputs]
    np.testing.assert_array_equal(next(iter(loaded.run(feeds).values())),
                                  next(iter(program.run(feeds).values())))


# -- torch's PT2E flow -------------------------------------------------------------------------

class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv1(x))
        x = torch.relu(self.conv2(x)).mean((2, 3))
        return self.fc(x)


def _pt2e(per_channel: bool, dynamic: bool) -> tuple[nn.Module, torch.Tensor]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
        from torchao.testing.pt2e._xnnpack_quantizer import (
            XNNPACKQuantizer,
            get_symmetric_quantization_config,
        )
        torch.manual_seed(0)
        x = torch.randn(2, 3, 11, 11)
        graph = torch.export.export(SmallCNN().eval(), (x,)).module()
        quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(
            is_per_channel=per_channel, is_dynamic=dynamic))
        prepared = prepare_pt2e(graph, quantizer)
        prepared(x)
        return convert_pt2e(prepared), x


@pytest.mark.parametrize(("per_channel", "dynamic"), [(True, False), (False, False),
                                                      (True, True)])
def test_pt2e_quantized_cnn_converts_and_matches_torch(per_channel: bool, dynamic: bool) -> None:
    model, x = _pt2e(per_channel, dynamic)
    ep = export(model, [x])
    targets = {str(n.target) for n in ep.graph.nodes if "quantized_decomposed" in str(n.target)}
    assert "quantized_decomposed.dequantize_per_channel.default" in targets or not per_channel
    program = convert(ep)
    expected = to_numpy(model(x))
    got = next(iter(program.run([x.numpy()]).values()))
    # static quantization is exact; dynamic quantization's float32 qparams reductions may
    # add up in another order than torch's
    np.testing.assert_allclose(got, expected, rtol=0, atol=0 if not dynamic else 1e-6)
    int8 = sorted(n for n, w in program.weights.items() if w.dtype == np.int8)
    assert int8, "the quantized weights are stored as int8"
    program.optimize()
    assert sorted(n for n, w in program.weights.items() if w.dtype == np.int8) == int8, \
        "the quantized weights stay int8 after optimize()"
    np.testing.assert_allclose(next(iter(program.run([x.numpy()]).values())), expected, rtol=0,
                               atol=0 if not dynamic else 1e-6)


# -- a 4-bit Llama-shaped model ----------------------------------------------------------------

def _artifact_bytes(program: Any, path: Path) -> int:
    program.save(path)
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def test_int4_llama_artifact_is_small_and_matches_the_quantized_torch_model(
        tmp_path: Path) -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(num_hidden_layers=2, hidden_size=512, intermediate_size=1024,
                      num_attention_heads=8, num_key_value_heads=4, vocab_size=1000,
                      max_position_embeddings=64, use_cache=False, attn_implementation="sdpa")
    model = LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, cfg.vocab_size, (1, 12))
    dense_bytes = _artifact_bytes(convert(export(model, [ids])), tmp_path / "f32")
    quantize_weights(model, "int4", block_size=32)
    with torch.no_grad():
        expected = model(ids).logits.numpy()
    program = convert(export(model, [ids]))
    packed_bytes = _artifact_bytes(program, tmp_path / "int4")
    assert packed_bytes <= 0.3 * dense_bytes, (packed_bytes, dense_bytes)
    got = next(iter(load(tmp_path / "int4").run([ids.numpy()]).values()))
    np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-4)


# -- errors ------------------------------------------------------------------------------------

def test_helpers_reject_bad_arguments() -> None:
    with pytest.raises(ValueError, match="nbits must be an int from 1 to 8"):
        palettize(Small(), 9)
    with pytest.raises(ValueError, match="group_size must be a positive int"):
        palettize(Small(), 4, group_size=0)
    with pytest.raises(ValueError, match="sparsity must be in"):
        prune(Small(), 1.5)
    with pytest.raises(ValueError, match="unsupported dtype 'int3'"):
        quantize_weights(Small(), "int3")


def test_four_bit_data_computed_in_the_graph_is_reported() -> None:
    from coreai_torch import LoweringError

    class Computed(nn.Module):
        def forward(self, packed: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
            return torch.ops.coreaix.constexpr_blockwise_shift_scale(packed, scale, None, "int4",
                                                                    [2, 4])

    args = [torch.tensor([0x21, 0x43, 0x65, 0x87], dtype=torch.uint8), torch.ones(2, 1)]
    with pytest.raises(LoweringError, match="int4 data must be a constant"):
        convert(export(Computed(), args))
