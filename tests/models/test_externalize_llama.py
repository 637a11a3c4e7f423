"""Externalizing RMSNorm and the decoder layer of a tiny random Llama (no hub downloads)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from coreai_torch import ExternalizeSpec, TorchConverter, verify

transformers = pytest.importorskip("transformers")
from transformers.models.llama.modeling_llama import (  # noqa: E402
    LlamaDecoderLayer,
    LlamaRMSNorm,
)


class Logits(torch.nn.Module):
    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=ids, use_cache=False).logits


@pytest.fixture(scope="module")
def llama():
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    model = Logits(transformers.LlamaForCausalLM(config)).eval()
    ids = torch.randint(0, 64, (1, 7))
    seq = torch.export.Dim("seq", min=2, max=32)

    def export(m: torch.nn.Module) -> torch.export.ExportedProgram:
        return torch.export.export(m, (ids,), dynamic_shapes=({1: seq},))

    specs = [ExternalizeSpec(LlamaRMSNorm, "rms_norm", {"eps": config.rms_norm_eps}),
             LlamaDecoderLayer]
    program = (TorchConverter().add_pytorch_module(model, export, externalize_modules=specs)
               .to_coreai())
    return model, program, ids


def test_one_graph_per_module_signature(llama):
    model, program, _ = llama
    # 7 RMSNorm instances (2 per layer and the final one) share one graph; 3 layers share one
    assert sorted(g.composite.name for g in program.composites.values()) == [
        "LlamaDecoderLayer", "rms_norm"]
    layer = next(n for n, g in program.composites.items()
                 if g.composite.name == "LlamaDecoderLayer")
    calls = [op.attributes["callee"] for op in program.graphs["main"].ops
             if op.name == "coreai.invoke"]
    assert calls.count(layer) == 3 and len(calls) == 4  # the layers and the final norm
    inner = [op.attributes["callee"] for op in program.graphs[layer].ops
             if op.name == "coreai.invoke"]
    assert inner == ["rms_norm", "rms_norm"]
    # each parameter is stored once, and only main reads weights (the calls pass them on)
    for name, param in model.named_parameters():
        np.testing.assert_array_equal(program.weights[name], param.detach().numpy())
    stored = sum(w.size for w in program.weights.values() if w is not None)
    held = sum(t.numel() for t in [*model.parameters(), *model.buffers()])
    assert stored <= held
    for name, g in program.graphs.items():
        reads = [op for op in g.ops if op.name == "coreai.constant"
                 and not isinstance(op.attributes.get("value"), np.ndarray)]
        assert name == "main" or reads == []


def test_verify_passes(llama):
    model, program, ids = llama
    assert verify(model, program, {"ids": ids.numpy()})


@pytest.mark.parametrize("seq", [2, 13])
def test_dynamic_sequence_length_matches_torch(llama, seq):
    model, program, _ = llama
    ids = torch.randint(0, 64, (1, seq))
    got = program.run({"ids": ids.numpy()})
    with torch.no_grad():
        want = model(ids).numpy()
    # float32 through 3 decoder layers: numpy's and torch's matmul/softmax summation orders
    # differ by a few ulp per op (the model-zoo tests allow rtol 1e-3 for the same reason)
    np.testing.assert_allclose(next(iter(got.values())), want, rtol=1e-4, atol=1e-5)
