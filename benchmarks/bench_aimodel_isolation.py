"""What ``load_aimodel(path, isolated=True)`` costs: Apple's interpreter in a child process.

Per call, the inputs and the outputs cross a pipe (pickled) and the child's reply is waited
for; once per load, a Python process starts and imports Apple's package. The programs:
``y = x * 2`` on float32 vectors of 4, 47x47 and 1M elements (the data crossing the pipe grows),
and the asset's checks (file types, ``main.hash`` against ``main.mlirb``) on an asset with a
16 MiB weight. Per call: the median and the minimum over ``--repeat`` calls (the minimum is
what a busy machine disturbs least: it only adds time); per load, medians. Default
environment; torch eager on the same computation gives the scale.

Run: ``python benchmarks/bench_aimodel_isolation.py [--repeat 51]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median_time, print_table

from coreai_core import Program, TensorType
from coreai_core.dialects import coreai
from coreai_torch.aimodel import export_aimodel, load_aimodel
from coreai_torch.aimodel._checks import check_asset

SHAPES = {"4": (4,), "47x47": (47, 47), "1M": (1 << 20,)}


def doubling(shape: tuple[int, ...], folder: Path, name: str) -> Path:
    p = Program()
    with p.graph("main", inputs={"x": TensorType(shape, "float32")}) as g:
        g.outputs({"y": coreai.broadcasting_mul(g["x"], 2.0)})
    return export_aimodel(p, folder / f"{name}.aimodel")


def weighted(folder: Path, n: int) -> Path:
    p = Program()
    w = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    with p.graph("main", inputs={"x": TensorType((n,), "float32")}) as g:
        g.outputs({"y": coreai.broadcasting_mul(g["x"], coreai.constant(w, name="w"))})
    return export_aimodel(p, folder / "weighted.aimodel")


def per_call(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """(median, minimum) seconds of ``fn()`` over ``repeat`` calls after 3 warm-up calls."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=51)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for label, shape in SHAPES.items():
            path = doubling(shape, folder, label)
            x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
            xt = torch.from_numpy(x)
            eager = median_time(lambda xt=xt: xt * 2.0, args.repeat, warmup=3)
            times = {}
            for isolated in (False, True):
                with load_aimodel(path, isolated=isolated) as asset:
                    times[isolated] = per_call(lambda a=asset, x=x: a.run({"x": x}),
                                               args.repeat)
            loads = {iso: median_time(lambda p=path, i=iso: load_aimodel(p, isolated=i).close(),
                                      5, warmup=1)
                     for iso in (False, True)}
            (med, low), (imed, ilow) = times[False], times[True]
            rows.append([label, eager * 1e6, med * 1e6, imed * 1e6, low * 1e6, ilow * 1e6,
                         (ilow - low) * 1e6, ilow / low, loads[False] * 1e3,
                         loads[True] * 1e3])
        print_table(["input", "torch eager us", "in-process us (median)",
                     "isolated us (median)", "in-process us (min)", "isolated us (min)",
                     "isolation us (min)", "ratio (min)", "in-process load ms",
                     "isolated load ms"], rows)
        print()
        n = 4 << 20  # 16 MiB of float32 weight
        path = weighted(folder, n)
        size = (path / "main.mlirb").stat().st_size
        check = median_time(lambda: check_asset(path), args.repeat, warmup=1)
        print_table(["asset", "main.mlirb MB", "checks ms", "hashing GB/s"],
                    [["16 MiB weight", size / 1e6, check * 1e3, size / check / 1e9]])


if __name__ == "__main__":
    main()
