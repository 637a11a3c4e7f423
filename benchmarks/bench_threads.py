"""What a second core buys each kind of kernel, and the floor of the exact elementwise kernels.

Each row times one kernel on a real-size operand (BERT-base's shapes at sequence 128,
MobileNetV2's depthwise layer, an LSTM step) through ``Runtime(threads=1)`` and ``Runtime()``
(every core), and the same call in torch eager at one thread and at its default threads. The
speedup columns are one thread's time over all cores'. The second table times, per element,
what the exact GELU and sigmoid cost in each library: the runtime's kernels return the
correctly rounded result (float64 evaluation rounded once), so scipy's float64 normal CDF is
their floor; torch evaluates in float32 with vector instructions (a few ulps).

Run: ``python benchmarks/bench_threads.py [--repeat 15]`` (default environment: no thread
variables; medians of ``--repeat`` runs).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import scipy.special
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import median_time, print_table

from coreai_core import Program, TensorType, Value
from coreai_core.dialects import coreai
from coreai_core.runtime import Runtime
from coreai_core.runtime._threads import available_cores
from coreai_core.runtime.kernels import elementwise

Case = tuple[str, Program, dict[str, np.ndarray], Callable[[], Any]]
F32 = "float32"


def _program(inputs: dict[str, tuple[int, ...]], body: Callable[..., Value]) -> Program:
    p = Program()
    with p.graph("main", inputs={k: TensorType(s, F32) for k, s in inputs.items()}) as g:
        g.outputs({"y": body(*(g[k] for k in inputs))})
    return p


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def _case(label: str, feeds: dict[str, np.ndarray], body: Callable[..., Value],
          eager: Callable[..., torch.Tensor], *weights: np.ndarray) -> Case:
    """A one-op program of ``body`` over ``feeds`` and the same op in torch: ``eager``
    called with the feeds then ``weights`` as tensors."""
    program = _program({k: v.shape for k, v in feeds.items()}, body)
    args = [torch.from_numpy(v) for v in (*feeds.values(), *weights)]
    return label, program, feeds, lambda: eager(*args)


def cases() -> list[Case]:
    """(label, program, feeds, torch call) for each kernel kind."""
    x, w = _rand(1, 128, 768), _rand(3072, 768, seed=1)  # BERT's FFN up-projection
    h, wh = _rand(8, 512), _rand(2048, 512, seed=2)  # an LSTM step's hidden product
    a, b = _rand(12, 128, 64), _rand(12, 64, 128, seed=3)  # attention scores
    img, k3 = _rand(1, 256, 56, 56), _rand(256, 256, 3, 3, seed=4)  # ResNet's 3x3 layer
    dw_in, dw = _rand(1, 144, 56, 56), _rand(144, 1, 3, 3, seed=5)  # MobileNetV2's depthwise
    act, bias, scores = _rand(1, 128, 3072), _rand(3072, seed=6), _rand(12, 128, 128, seed=7)
    conv2d = torch.nn.functional.conv2d
    return [
        _case("matmul 128x768 @ 768x3072 (weight.T)", {"x": x},
              lambda v: coreai.batch_matmul(v, w.T), lambda tx, tw: tx @ tw.T, w),
        _case("matmul 8x512 @ 512x2048 (LSTM step)", {"h": h},
              lambda v: coreai.batch_matmul(v, wh.T), lambda th, tw: th @ tw.T, wh),
        _case("batched matmul 12x(128x64 @ 64x128)", {"a": a, "b": b}, coreai.batch_matmul,
              torch.matmul),
        _case("conv 3x3 256->256 at 56x56", {"x": img},
              lambda v: coreai.conv(v, k3, pads=[1] * 4),
              lambda t, tk: conv2d(t, tk, padding=1), k3),
        _case("depthwise 3x3, 144 channels at 56x56", {"x": dw_in},
              lambda v: coreai.conv(v, dw, pads=[1] * 4, groups=144),
              lambda t, tk: conv2d(t, tk, padding=1, groups=144), dw),
        _case("exact GELU on 128x3072", {"x": act},
              lambda v: coreai.gelu(v, approximate="none"), torch.nn.functional.gelu),
        _case("softmax on 12x128x128", {"x": scores}, lambda v: coreai.softmax(v, axis=-1),
              lambda t: torch.softmax(t, -1)),
        _case("add 128x3072 + 3072 (bias)", {"x": act},
              lambda v: coreai.broadcasting_add(v, bias), torch.add, bias),
    ]


def per_element(repeat: int) -> list[list[Any]]:
    """ns per element of the exact kernels' building blocks, one thread each."""
    x64 = np.random.default_rng(0).standard_normal(1 << 13) * 3  # one float64 block (in cache)
    x32, out64 = x64.astype(np.float32), np.empty_like(x64)
    t32 = torch.from_numpy(x32)
    n = x64.size
    rows: list[list[Any]] = []
    with torch.no_grad():
        torch_threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            for label, fn in [
                ("scipy ndtr, float64 (the exact GELU's floor)",
                 lambda: scipy.special.ndtr(x64, out=out64)),
                ("numpy exp, float64 (the exact sigmoid's floor)",
                 lambda: np.exp(x64, out=out64)),
                ("runtime's exact GELU kernel, float32 in and out",
                 lambda: elementwise.gelu(x32, approximate="none")),
                ("torch GELU, float32", lambda: torch.nn.functional.gelu(t32)),
                ("torch sigmoid, float32", lambda: torch.sigmoid(t32)),
            ]:
                rows.append([label, median_time(fn, repeat) / n * 1e9])
        finally:
            torch.set_num_threads(torch_threads)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15, help="runs per median")
    args = parser.parse_args()
    cores = available_cores()
    one, every = Runtime(threads=1), Runtime()
    default_threads = torch.get_num_threads()
    rows = []
    for label, program, feeds, eager in cases():
        ours1 = median_time(lambda p=program, f=feeds: one.run(p, f), args.repeat)
        ours = median_time(lambda p=program, f=feeds: every.run(p, f), args.repeat)
        with torch.no_grad():
            torch.set_num_threads(1)
            eager1 = median_time(eager, args.repeat)
            torch.set_num_threads(default_threads)
            eager_all = median_time(eager, args.repeat)
        rows.append([label, ours1 * 1e3, ours * 1e3, ours1 / ours, eager1 * 1e3,
                     eager_all * 1e3, eager1 / eager_all, ours / eager_all])
    print(f"runtime: {cores} core(s); torch eager: {default_threads} thread(s) by default")
    print_table(["kernel", "ours 1 thr ms", f"ours {cores} thr ms", "our speedup",
                 "eager 1 thr ms", f"eager {default_threads} thr ms", "eager speedup",
                 "ours/eager (all cores)"], rows)
    print()
    print_table(["per element, one thread", "ns"], per_element(args.repeat))


if __name__ == "__main__":
    main()
