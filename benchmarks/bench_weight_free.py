"""Weight-free conversion of a Llama with 7B-parameter shapes (meta device, no weights).

Prints export time, conversion time, conversion peak RSS growth and the weight bytes the
program describes. Targets: conversion <= 10 s and peak RSS <= 2 GB (weights are ~27 GB).
Run: ``python benchmarks/bench_weight_free.py [--layers 32]``.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table

from coreai_torch import TorchConverter, get_decomp_table


def _rss_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _reset_peak() -> None:
    with contextlib.suppress(OSError):  # Linux: writing 5 resets VmHWM to the current RSS
        Path("/proc/self/clear_refs").write_text("5")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--layers", type=int, default=32)
    args = parser.parse_args()
    from transformers import LlamaConfig, LlamaModel

    cfg = LlamaConfig(hidden_size=4096, intermediate_size=11008, num_hidden_layers=args.layers,
                      num_attention_heads=32, num_key_value_heads=32, vocab_size=32000,
                      use_cache=False)

    class Wrapper(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = LlamaModel(cfg)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.model(input_ids=ids).last_hidden_state

    with torch.device("meta"):
        model = Wrapper().eval()
    ids = torch.zeros(1, 16, dtype=torch.int64, device="meta")
    t0 = time.perf_counter()
    ep = torch.export.export(model, (ids,)).run_decompositions(get_decomp_table())
    t1 = time.perf_counter()
    _reset_peak()
    rss0 = _rss_kb("VmRSS")
    program = TorchConverter(progress=False).add_exported_program(ep).to_coreai()
    t2 = time.perf_counter()
    peak = _rss_kb("VmHWM")
    weight_bytes = sum(t.numel * t.element_type.itemsize for t in program.weight_types.values())
    params = sum(t.numel for t in program.weight_types.values())
    print_table(
        ["layers", "parameters", "weight GB", "FX nodes", "export s", "convert s",
         "convert peak RSS growth MB", "process peak RSS MB"],
        [[args.layers, f"{params / 1e9:.2f}B", weight_bytes / 1e9, len(ep.graph.nodes),
          t1 - t0, t2 - t1, (peak - rss0) / 1024, peak / 1024]])


if __name__ == "__main__":
    main()
