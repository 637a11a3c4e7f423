"""Conversion time per FX node for stacks of 2, 4, 8 and 16 transformer blocks.

Conversion must be linear in the number of nodes: the per-node time at 16 blocks should be
within 10 % of the time at 2 blocks. Run: ``python benchmarks/bench_conversion.py``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median_time, print_table

from coreai_torch import TorchConverter, get_decomp_table


class Block(torch.nn.Module):
    """A pre-norm transformer block: attention (sdpa) and an MLP."""

    def __init__(self, dim: int = 64, heads: int = 4) -> None:
        super().__init__()
        self.norm1 = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.out = torch.nn.Linear(dim, dim)
        self.norm2 = torch.nn.LayerNorm(dim)
        self.fc1 = torch.nn.Linear(dim, 4 * dim)
        self.fc2 = torch.nn.Linear(4 * dim, dim)
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.norm2(x))))


def main() -> None:
    torch.manual_seed(0)
    rows = []
    per_node = {}
    for n in (2, 4, 8, 16):
        model = torch.nn.Sequential(*[Block() for _ in range(n)]).eval()
        ep = torch.export.export(model, (torch.randn(1, 16, 64),))
        ep = ep.run_decompositions(get_decomp_table())
        nodes = len(ep.graph.nodes)

        def convert(ep=ep) -> None:
            TorchConverter(progress=False).add_exported_program(ep).to_coreai()

        t = median_time(convert, repeat=7)
        cpu = median_time(convert, repeat=7, clock=time.process_time)
        per_node[n] = cpu / nodes * 1e6
        rows.append([n, nodes, t * 1e3, cpu * 1e3, t / nodes * 1e6, per_node[n]])
    print_table(["blocks", "FX nodes", "wall ms (median)", "CPU ms (median)", "wall µs/node",
                 "CPU µs/node"], rows)
    ratio = per_node[16] / per_node[2]
    print(f"\nCPU per-node time 16 blocks / 2 blocks: {ratio:.2f} (linear if within 1.10)")


if __name__ == "__main__":
    main()
