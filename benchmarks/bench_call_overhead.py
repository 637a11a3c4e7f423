"""The fixed cost of ``program.run()`` per call and its cost per elementwise op.

Programs: chains of 1, 10 and 100 elementwise ops on a 4-element float32 vector (inputs
checked as on every call), a one-op stateful counter (state read, updated and written back),
and the zoo's MLP (3 linear layers, GELU, tanh, LayerNorm on [3, 16]) against torch eager.
The per-op cost is the slope of the 1/10/100-op times, the fixed cost their intercept; the
same slope for the ufunc calls alone in straight-line Python (``numpy_chain``) is numpy's
floor, below which no runtime built on numpy ufuncs can go.
Targets: <= 15 us fixed, <= 0.3 us per op. Each figure is the minimum over ``--repeat``
batches of ``--number`` calls (the minimum: a busy machine only adds time).

Run: ``python benchmarks/bench_call_overhead.py [--number 2000] [--repeat 7] [--profile]``;
``--profile`` prints cProfile's top functions of the 1-op chain.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table

from coreai_core import Program, TensorType
from coreai_core.dialects import coreai
from coreai_torch import TorchConverter, get_decomp_table


def chain(n: int) -> tuple[Program, dict[str, np.ndarray]]:
    """``n`` alternating adds and multiplies by scalars."""
    p = Program()
    with p.graph("main", inputs={"x": TensorType((4,), "float32")}) as g:
        v = g["x"]
        for i in range(n):
            v = coreai.broadcasting_mul(v, 0.5) if i % 2 else coreai.broadcasting_add(v, 1.0)
        g.outputs({"y": v})
    return p, {"x": np.ones(4, np.float32)}


def counter() -> tuple[Program, dict[str, np.ndarray]]:
    """count += step, the count held as program state."""
    p = Program()
    with p.graph("main", inputs={"step": TensorType((), "int64")},
                 state={"count": np.zeros((), np.int64)}) as g:
        new = coreai.broadcasting_add(g["count"], g["step"])
        g.outputs({"count": new}, state={"count": new})
    return p, {"step": np.array(1, np.int64)}


def mlp() -> tuple[Program, dict[str, np.ndarray], Callable[[], Any]]:
    """The zoo's MLP, converted and optimized, and its eager call."""
    from tests.models.zoo import MLP

    torch.manual_seed(0)
    model = MLP().eval()
    x = torch.randn(3, 16)
    ep = torch.export.export(model, (x,)).run_decompositions(get_decomp_table())
    program = TorchConverter(progress=False).add_exported_program(ep).to_coreai()
    program.optimize()

    def eager() -> Any:
        with torch.inference_mode():
            return model(x)

    return program, {program.input_names[0]: x.numpy()}, eager


def numpy_chain(n: int) -> Callable[[], Any]:
    """numpy's own floor for ``chain(n)``: the same ufuncs on the same 4-element vector, as
    straight-line calls writing into one buffer (0-d array constants: numpy's fastest call),
    with no plan, checks or outputs around them."""
    lines = [f"    {'mul' if i % 2 else 'add'}(v, {'half' if i % 2 else 'one'}, v)"
             for i in range(n)]
    source = "def run(v):\n" + "\n".join(lines) + "\n"
    namespace = {"add": np.add, "mul": np.multiply, "one": np.array(1.0, np.float32),
                 "half": np.array(0.5, np.float32)}
    exec(compile(source, f"<numpy chain of {n}>", "exec"), namespace)
    v = np.ones(4, np.float32)
    return lambda: namespace["run"](v)


def per_call(fn: Callable[[], Any], number: int, repeat: int) -> float:
    """Seconds per call: the minimum over ``repeat`` batches of ``number`` calls."""
    fn()
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--number", type=int, default=2000, help="calls per batch")
    parser.add_argument("--repeat", type=int, default=7, help="batches (the minimum counts)")
    parser.add_argument("--profile", action="store_true", help="cProfile the 1-op chain")
    args = parser.parse_args()
    us = 1e6
    rows: list[list[Any]] = []
    times = {}
    for n in (1, 10, 100):
        p, feeds = chain(n)
        times[n] = per_call(lambda p=p, feeds=feeds: p.run(feeds), args.number, args.repeat)
        rows.append([f"{n}-op elementwise chain", times[n] * us, "-"])
    slope, intercept = np.polyfit(list(times), list(times.values()), 1)
    floor = {n: per_call(numpy_chain(n), args.number, args.repeat) for n in (1, 10, 100)}
    floor_slope = np.polyfit(list(floor), list(floor.values()), 1)[0]
    p, feeds = counter()
    t_counter = per_call(lambda: p.run(feeds), args.number, args.repeat)
    rows.append(["1-op stateful counter", t_counter * us, "-"])
    program, mlp_feeds, eager = mlp()
    t_mlp = per_call(lambda: program.run(mlp_feeds), args.number, args.repeat)
    t_eager = per_call(eager, args.number, args.repeat)
    rows.append(["zoo MLP", t_mlp * us, t_eager * us])
    print_table(["program", "run() us", "torch eager us"], rows)
    print(f"\nfixed cost per call: {intercept * us:.1f} us (target <= 15); per elementwise op: "
          f"{slope * us:.2f} us (target <= 0.3); numpy's own ufunc call, straight-line code: "
          f"{floor_slope * us:.2f} us per op")
    if args.profile:
        p, feeds = chain(1)
        profiler = cProfile.Profile()
        profiler.runcall(lambda: [p.run(feeds) for _ in range(args.number * 5)])
        pstats.Stats(profiler).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
