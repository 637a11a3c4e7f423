"""Size of compressed models exported as .aimodel assets, against the float32 export.

Each model (random weights, no downloads) is converted as is and after each compression
helper, exported with ``export_aimodel`` and run once on Apple's interpreter against our
runtime (the largest relative error is printed, so a small asset is also a right one).
Needs the ``coreai`` extra (Apple's coreai-core).
Run: ``python benchmarks/bench_aimodel_compression.py``.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np
import torch
from _common import print_table
from torch import nn

from coreai_torch import TorchConverter, get_decomp_table
from coreai_torch.aimodel import export_aimodel, run_aimodel
from coreai_torch.compression import palettize, quantize_weights

VARIANTS: dict[str, Callable[[nn.Module], nn.Module]] = {
    "float32": lambda m: m,
    "int4 blockwise (32)": lambda m: quantize_weights(m, "int4", 32),
    "palettized 4-bit (groups of 16)": lambda m: palettize(m, 4, 16),
    "palettized 2-bit": lambda m: palettize(m, 2),
}


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.convs = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(),
                                   nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(),
                                   nn.Conv2d(128, 128, 3, padding=1), nn.ReLU())
        self.head = nn.Linear(128 * 8 * 8, 512)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.convs(x).flatten(1))


MODELS: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...]]] = {
    "MLP 4 x Linear(1024, 1024)": (lambda: nn.Sequential(
        *[m for _ in range(4) for m in (nn.Linear(1024, 1024), nn.GELU())]), (2, 1024)),
    "ConvNet (3 convs + Linear(8192, 512))": (ConvNet, (1, 3, 8, 8)),
}


def _asset_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def measure(name: str, variant: str, tmp: Path) -> tuple[int, float]:
    """Bytes of the variant's .aimodel and its largest error against our runtime."""
    build, shape = MODELS[name]
    torch.manual_seed(0)
    model = VARIANTS[variant](build().eval())
    x = torch.randn(shape, generator=torch.Generator().manual_seed(1))
    ep = torch.export.export(model, (x,)).run_decompositions(get_decomp_table())
    program = TorchConverter(progress=False).add_exported_program(
        ep, input_names=["x"], output_names=["y"]).to_coreai()
    program.optimize()
    path = tmp / f"{len(list(tmp.iterdir()))}.aimodel"
    export_aimodel(program, path)
    got = run_aimodel(path, {"x": x.numpy()})["y"]
    want = program.run({"x": x.numpy()})["y"]
    return _asset_bytes(path), float(np.abs(got - want).max() / np.abs(want).max())


def main() -> None:
    rows = []
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for name in MODELS:
            results = {v: measure(name, v, Path(tmp)) for v in VARIANTS}
            worst = max(worst, *(err for _, err in results.values()))
            base = results["float32"][0]
            row: list[object] = [name, base]
            for variant in list(VARIANTS)[1:]:
                row += [results[variant][0], results[variant][0] / base]
            rows.append(row)
    headers = ["model", "float32 bytes"]
    for variant in list(VARIANTS)[1:]:
        headers += [f"{variant} bytes", "x float32"]
    print_table(headers, rows)
    print(f"largest relative error of Apple's interpreter against our runtime: {worst:.2g}")


if __name__ == "__main__":
    main()
