"""Memory of converting (and optimizing) a model with real weights, relative to the weights.

A GPT-2-shaped model (8 layers, width 512, 32k vocabulary: ~170 MB of float32 weights) is
exported, then converted; the peak RSS growth during conversion is compared with the weight
bytes (target <= 1.3x: weights are shared with torch, not copied).
Run: ``python benchmarks/bench_real_weights.py``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, reset_peak_rss, rss

from coreai_torch import TorchConverter, get_decomp_table
from tests.models.builders import HF


def main() -> None:
    from transformers import GPT2Config, GPT2Model

    cfg = GPT2Config(n_layer=8, n_head=8, n_embd=512, vocab_size=32000, n_positions=128,
                     use_cache=False, bos_token_id=0, eos_token_id=0)
    model = HF(GPT2Model(cfg).eval(), "last_hidden_state", ("input_ids",)).eval()
    ids = torch.randint(0, 32000, (1, 16))
    ep = torch.export.export(model, (ids,)).run_decompositions(get_decomp_table())
    weight_bytes = sum(t.numel() * t.element_size() for t in ep.state_dict.values())
    reset_peak_rss()
    r0 = rss("VmRSS")
    t0 = time.perf_counter()
    program = TorchConverter(progress=False).add_exported_program(ep).to_coreai()
    t1 = time.perf_counter()
    convert_growth = rss("VmHWM") - r0
    reset_peak_rss()
    r0 = rss("VmRSS")
    program.optimize()
    optimize_growth = rss("VmHWM") - r0
    print_table(["weights MB", "FX nodes", "convert s", "convert peak RSS growth / weights",
                 "optimize peak RSS growth / weights"],
                [[weight_bytes / 1e6, len(ep.graph.nodes), t1 - t0,
                  convert_growth / weight_bytes, optimize_growth / weight_bytes]])


if __name__ == "__main__":
    main()
