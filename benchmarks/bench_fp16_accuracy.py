"""Float16 accuracy over the model zoo: torch's float16 CPU eager vs the converted program,
each as the normwise error against the float32 result (tests/models/half_precision.py).

Run: ``python benchmarks/bench_fp16_accuracy.py [--dtype bfloat16] [--only gpt2[sdpa],mlp]``.
Prints a markdown table (model, torch err, ours err, ratio) and the outliers with their reason.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table

from tests.models.half_precision import OUTLIERS, half_errors, half_models


def main(argv: list[str] | None = None) -> list[list[object]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtype", default="float16", choices=("float16", "bfloat16"))
    parser.add_argument("--only", default="", help="comma-separated model names")
    args = parser.parse_args(argv)
    dtype = getattr(torch, args.dtype)
    names = args.only.split(",") if args.only else sorted(half_models())
    rows: list[list[object]] = []
    for name in names:
        e = half_errors(name, dtype)
        rows.append([name, f"{e.torch_err:.3e}", f"{e.ours_err:.3e}", f"{e.ratio:.2f}"])
    print_table(["model", f"torch {args.dtype} err", f"ours {args.dtype} err", "ratio"], rows)
    for name in names:
        if name in OUTLIERS:
            print(f"\n{name}: {OUTLIERS[name]}")
    return rows


if __name__ == "__main__":
    main()
