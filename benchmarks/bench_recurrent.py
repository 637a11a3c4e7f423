"""LSTM and GRU: ``run()`` against torch eager, and against the kernels before the
shared-weight matmul layout, interleaved in one process (default environment, 1 torch thread).

"previous kernels" runs the same program with ``coreai.batch_matmul`` as a plain
``np.matmul`` (a stack times a weight is one matrix product per stacked matrix) and
``coreai.split`` as a kernel call (so the compiled plan does not slice it inline): the
runtime as it was before ``coreai_core/runtime/kernels/_matmul.py``. Models: 2-layer
``nn.LSTM``/``nn.GRU`` (input 256, hidden 512, 100 steps) at batch 1 and 8, and the tiny
zoo's ``lstm``/``gru``.

Run: ``python benchmarks/bench_recurrent.py [--repeat 15]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table

from coreai_core.runtime import Runtime
from coreai_core.runtime.kernels import tensor
from coreai_torch import TorchConverter, get_decomp_table
from tests.models.zoo import all_models

Built = tuple[torch.nn.Module, tuple[torch.Tensor, ...]]


class _Sequence(torch.nn.Module):
    def __init__(self, rnn: torch.nn.Module) -> None:
        super().__init__()
        self.rnn = rnn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rnn(x)[0]


def _real(kind: str, batch: int) -> Callable[[], Built]:
    def build() -> Built:
        torch.manual_seed(0)
        rnn = getattr(torch.nn, kind)(256, 512, 2, batch_first=True)
        return _Sequence(rnn), (torch.randn(batch, 100, 256),)
    return build


def _previous_matmul(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    return np.matmul(lhs, rhs)


def _split_call(x: np.ndarray, *, split_sizes: list[int], axis: int) -> list[np.ndarray]:
    return tensor.split(x, split_sizes=split_sizes, axis=axis)


def measure(name: str, build: Callable[[], Built], repeat: int) -> list[Any]:
    model, inputs = build()
    model.eval()
    ep = torch.export.export(model, inputs).run_decompositions(get_decomp_table())
    program = TorchConverter(progress=False).add_exported_program(ep).to_coreai()
    program.optimize()
    feeds = dict(zip(program.input_names, [t.numpy() for t in inputs], strict=True))
    runtimes = {"previous": Runtime({"coreai.batch_matmul": _previous_matmul,
                                     "coreai.split": _split_call}, allow_override=True,
                                    threads=1),
                "now": Runtime(threads=1)}  # one thread each, like torch
    with torch.inference_mode():
        expected = model(*inputs).numpy()
    err = max(float(np.max(np.abs(next(iter(rt.run(program, feeds).values())) - expected)))
              for rt in runtimes.values())
    times: dict[str, list[float]] = {"previous": [], "now": [], "eager": []}
    for _ in range(repeat):
        for key, rt in runtimes.items():
            t0 = time.perf_counter()
            rt.run(program, feeds)
            times[key].append(time.perf_counter() - t0)
        with torch.inference_mode():
            t0 = time.perf_counter()
            model(*inputs)
            times["eager"].append(time.perf_counter() - t0)
    med = {k: float(np.median(v)) for k, v in times.items()}
    return [name, med["eager"] * 1e3, med["now"] / med["eager"],
            med["previous"] / med["eager"], med["previous"] / med["now"], f"{err:.1e}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15, help="interleaved runs per median")
    args = parser.parse_args()
    torch.set_num_threads(1)
    zoo = all_models()
    cases: dict[str, Callable[[], Built]] = {
        f"{kind} 2x512, 100 steps, batch {b}": _real(kind, b)
        for kind in ("LSTM", "GRU") for b in (1, 8)}
    cases.update({"zoo lstm": zoo["lstm"], "zoo gru": zoo["gru"]})
    rows = [measure(name, build, args.repeat if "steps" in name else 20 * args.repeat)
            for name, build in cases.items()]
    print_table(["model", "eager ms", "run/eager", "previous kernels/eager", "speedup",
                 "max abs err"], rows)


if __name__ == "__main__":
    main()
