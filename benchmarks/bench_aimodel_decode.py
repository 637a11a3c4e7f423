"""Time per decode step of a tiny Llama (2 layers, KV cache as state) on Apple's interpreter:
``run_aimodel`` (a load per call) against one asset loaded with ``load_aimodel``.

Needs the ``coreai`` extra (Apple's coreai-core).
Run: ``python benchmarks/bench_aimodel_decode.py [--steps N]``.
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np
import torch
from _common import print_table

from coreai_torch import TorchConverter, get_decomp_table
from coreai_torch.aimodel import export_aimodel, load_aimodel, run_aimodel
from tests.models.llm import LlamaDecodeStep, tiny_llama


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=8)
    steps = parser.parse_args().steps
    step = LlamaDecodeStep(tiny_llama(), max_len=max(steps, 16)).eval()
    ep = torch.export.export(copy.deepcopy(step), (torch.tensor([[3]]), torch.tensor([0])))
    program = TorchConverter().add_exported_program(
        ep.run_decompositions(get_decomp_table()), output_names=["logits"]).to_coreai()
    program.optimize()
    tokens = np.random.default_rng(0).integers(0, 96, steps)

    def feed(n: int) -> dict[str, np.ndarray]:
        return {"ids": np.array([[tokens[n]]]), "pos": np.array([n])}

    with tempfile.TemporaryDirectory() as tmp:
        path = export_aimodel(program, Path(tmp) / "decode.aimodel")
        state = {k: v.copy() for k, v in program.state.items()}
        start = time.perf_counter()
        reloaded = [run_aimodel(path, feed(n), state=state)["logits"] for n in range(steps)]
        per_call = (time.perf_counter() - start) / steps
        with load_aimodel(path, state=program.state) as asset:
            start = time.perf_counter()
            loaded = [asset.run(feed(n))["logits"] for n in range(steps)]
            per_step = (time.perf_counter() - start) / steps
    same = all(np.array_equal(a, b) for a, b in zip(reloaded, loaded, strict=True))
    print_table(["way", "ms per decode step", "same logits"],
                [["run_aimodel (load per call)", f"{per_call * 1e3:.1f}", ""],
                 ["load_aimodel, .run", f"{per_step * 1e3:.2f}", str(same)]])


if __name__ == "__main__":
    main()
