"""Weight-free conversion: export on the meta device, convert, bind real weights, verify."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from coreai_torch import TorchConverter, get_decomp_table, verify
from tests.models.builders import HF


def _llama(device: str) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaModel

    cfg = LlamaConfig(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      hidden_size=32, intermediate_size=64, vocab_size=96, use_cache=False)
    torch.manual_seed(0)
    with torch.device(device):
        return HF(LlamaModel(cfg).eval(), "last_hidden_state", ("input_ids",)).eval()


@pytest.mark.slow
def test_meta_export_converts_to_unbound_weights_then_binds(tmp_path) -> None:
    real, meta = _llama("cpu"), _llama("meta")
    ids = torch.randint(0, 96, (1, 8), generator=torch.Generator().manual_seed(0))
    ep = torch.export.export(meta, (ids.to("meta"),)).run_decompositions(get_decomp_table())
    program = TorchConverter().add_exported_program(ep).to_coreai()
    assert program.weights and all(w is None for w in program.weights.values())
    assert program.weight_types["model.embed_tokens.weight"].shape == (96, 32)
    with pytest.raises(Exception, match="bind_weights"):
        program.run({"input_ids": ids.numpy()})
    # non-persistent buffers (rotary inv_freq) are not in the state dict: bind them too
    weights = {**real.state_dict(), **dict(real.named_buffers())}
    with pytest.raises(ValueError, match=r"missing weight 'model\.rotary_emb\.inv_freq'"):
        program.bind_weights(real.state_dict())
    bad = dict(weights)
    bad["model.norm.weight"] = torch.zeros(31)
    with pytest.raises(ValueError, match=r"model\.norm\.weight"):
        program.bind_weights(bad)
    # from a safetensors file too
    from safetensors.torch import save_file

    path = tmp_path / "w.safetensors"
    save_file({k: v.contiguous() for k, v in weights.items()}, str(path))
    program.bind_weights(str(path))
    program.optimize()
    report = verify(real, program, (ids,), rtol=1e-3, atol=1e-4)
    assert report.passed, str(report)
    assert np.isfinite(report.outputs[0].max_abs)
