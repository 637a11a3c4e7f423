"""Size, accuracy and memory of compressed Llama-shaped models against float32.

A LlamaForCausalLM (4 layers, hidden 512, random weights, no downloads) is converted as is and
after each compression helper; every artifact is saved, then loaded and run in a fresh
process (numpy runtime only, no torch) whose peak RSS is measured. Accuracy compares the
program with the torch model carrying the same compressed weights.
Run: ``python benchmarks/bench_compression.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table

SEQ = 32


def _peak_rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def run_artifact(path: str, ids_file: str) -> None:
    """Child process: load ``path``, run it three times, print peak RSS, time and logits."""
    import numpy as np

    from coreai_core import load

    ids = np.load(ids_file)
    program = load(path)
    t0 = time.perf_counter()
    for _ in range(3):
        out = next(iter(program.run({"input_ids": ids}).values()))
    ms = (time.perf_counter() - t0) / 3 * 1e3
    np.save(Path(path).with_suffix(".out.npy"), out)
    print(json.dumps({"peak_rss": _peak_rss(), "ms": ms}))


def main() -> None:
    import numpy as np
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from coreai_torch import TorchConverter, get_decomp_table
    from coreai_torch.compression import palettize, prune, quantize_weights

    cfg = LlamaConfig(num_hidden_layers=4, hidden_size=512, intermediate_size=1408,
                      num_attention_heads=8, num_key_value_heads=4, vocab_size=8000,
                      max_position_embeddings=128, use_cache=False, attn_implementation="sdpa")
    variants = {
        "float32": lambda m: m,
        "int8 blockwise (32)": lambda m: quantize_weights(m, "int8", 32),
        "int4 blockwise (32)": lambda m: quantize_weights(m, "int4", 32),
        "float4_e2m1fn blockwise (32)": lambda m: quantize_weights(m, "float4_e2m1fn", 32),
        "palettized 4-bit (groups of 16)": lambda m: palettize(m, 4, 16),
        "pruned 50%": lambda m: prune(m, 0.5),
    }
    ids = torch.randint(0, cfg.vocab_size, (1, SEQ), generator=torch.Generator().manual_seed(0))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        ids_file = str(Path(tmp) / "ids.npy")
        np.save(ids_file, ids.numpy())
        base = None
        for name, compress in variants.items():
            torch.manual_seed(0)
            model = compress(LlamaForCausalLM(cfg).eval())
            with torch.no_grad():
                expected = model(ids).logits.numpy()
            ep = torch.export.export(model, (ids,)).run_decompositions(get_decomp_table())
            program = TorchConverter(progress=False).add_exported_program(
                ep, input_names=["input_ids"]).to_coreai()
            path = Path(tmp) / f"v{len(rows)}"
            program.save(path)
            size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
            del program, ep, model
            child = subprocess.run([sys.executable, __file__, "--run", str(path), ids_file],
                                   capture_output=True, text=True)
            if child.returncode:
                raise RuntimeError(f"running {name} failed:\n{child.stderr}")
            stats = json.loads(child.stdout.strip().splitlines()[-1])
            got = np.load(path.with_suffix(".out.npy"))
            err = float(np.abs(got - expected).max() / np.abs(expected).max())
            base = base or (size, stats["peak_rss"])
            rows.append([name, size / 2**20, size / base[0], err, stats["peak_rss"] / 2**20,
                         stats["peak_rss"] / base[1], stats["ms"]])
    print(f"LlamaForCausalLM: {cfg.num_hidden_layers} layers, hidden {cfg.hidden_size}, "
          f"vocab {cfg.vocab_size}, sequence {SEQ}; run in a fresh process after load()")
    print_table(["weights", "artifact MB", "x float32", "max rel. error vs torch",
                 "peak RSS MB", "x float32", "run ms"], rows)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--run":
        run_artifact(sys.argv[2], sys.argv[3])
    else:
        main()
