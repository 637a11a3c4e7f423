"""Models compressed by Apple's coreai-opt, converted here: error and ``.aimodel`` size.

For each compression x model of ``tests/interop/coreai_opt_cases.py``: the program's largest
difference from the finalized torch model (numpy runtime), the ``.aimodel``'s largest
difference from the program (Apple's interpreter), and the ``.aimodel`` size against the
float32 model's. Run: ``python benchmarks/bench_coreai_opt.py [model ...]``.
"""

from __future__ import annotations

import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coreai_torch import TorchConverter, get_decomp_table
from coreai_torch.aimodel import export_aimodel, run_aimodel
from tests.interop.coreai_opt_cases import CASES, compressed, model


def convert(m: torch.nn.Module, inputs: tuple) -> object:
    ep = torch.export.export(m, inputs).run_decompositions(get_decomp_table())
    return TorchConverter().add_exported_program(ep).to_coreai()


def size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main() -> None:
    wanted = sys.argv[1:]
    float_sizes: dict[str, int] = {}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, compression in CASES:
            if wanted and name not in wanted:
                continue
            if name not in float_sizes:
                m, inputs = model(name)
                export_aimodel(convert(m, inputs), Path(tmp, f"{name}.aimodel"))
                float_sizes[name] = size(Path(tmp, f"{name}.aimodel"))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                m, inputs = compressed(name, compression)
                program = convert(m, inputs)
            feed = {n: t.numpy() for n, t in zip(program.input_names, inputs)}
            got = next(iter(program.run(feed).values()))
            want = m(*inputs).detach().numpy()
            path = Path(tmp, f"{name}-{compression}.aimodel")
            export_aimodel(program, path)
            apple = next(iter(run_aimodel(path, feed).values()))
            rows.append((compression, name, float(np.abs(got - want).max()),
                         float(np.abs(apple - got).max()), size(path) / float_sizes[name]))
    print("| compression | model | max error vs torch | .aimodel vs runtime | size / float32 |")
    print("|---|---|---|---|---|")
    for c, n, e, a, s in rows:
        print(f"| {c} | {n} | {e:.2g} | {a:.2g} | {s:.2f} |")


if __name__ == "__main__":
    main()
