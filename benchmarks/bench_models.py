"""Per-model benchmark over the model-test zoo (random weights, 1 torch thread).

Columns: FX nodes, conversion time (median) and µs per node, ops before/after optimize(),
run() median vs torch eager median and their ratio, peak Python-heap allocation during
conversion relative to the weight bytes, and peak allocation of one run().
Run: ``python benchmarks/bench_models.py [--repeat 5] [--only gpt2,...]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tracemalloc
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median_time, print_table

from coreai_core.runtime import Runtime
from coreai_torch import TorchConverter, get_decomp_table
from tests.models.zoo import all_models


def _peak_alloc(fn) -> float:
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def _measure(name: str, build, repeat: int) -> list:
    model, inputs = build()
    ep = torch.export.export(model, inputs).run_decompositions(get_decomp_table())
    nodes = len(ep.graph.nodes)

    def convert():
        return TorchConverter(progress=False).add_exported_program(ep).to_coreai()

    t_convert = median_time(convert, repeat=repeat)
    program = convert()
    weight_bytes = sum(t.numel * t.element_type.itemsize for t in program.weight_types.values())
    conv_peak = _peak_alloc(convert)
    before = sum(len(g.ops) for g in program.graphs.values())
    program.optimize()
    after = sum(len(g.ops) for g in program.graphs.values())
    feeds = dict(zip(program.input_names, [t.numpy() for t in inputs], strict=True))
    state = {k: v.copy() for k, v in program.state.items()}
    one_thread = Runtime(threads=1)

    def run():
        return one_thread.run(program, feeds, state=state)  # like torch: one thread

    def eager():
        with torch.no_grad():
            return model(*inputs)

    t_run = median_time(run, repeat=repeat)
    t_eager = median_time(eager, repeat=repeat)
    return [name, nodes, t_convert * 1e3, t_convert / nodes * 1e6, before, after,
            t_run * 1e3, t_eager * 1e3, t_run / t_eager, conv_peak / max(weight_bytes, 1),
            _peak_alloc(run) / 1e6]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    torch.set_num_threads(1)
    models = all_models()
    names = [n for n in sorted(models) if not args.only or n.split("[")[0] in args.only.split(",")]
    rows = [_measure(name, models[name], args.repeat) for name in names]
    ratios = [r[8] for r in rows]
    per_node = [r[3] for r in rows]
    print_table(["model", "FX nodes", "convert ms", "µs/node", "ops", "ops opt", "run ms",
                 "eager ms", "run/eager", "convert alloc/weights", "run peak MB"], rows)
    print(f"\nmedian run/eager {statistics.median(ratios):.2f}, max {max(ratios):.2f} "
          f"({names[ratios.index(max(ratios))]}); median µs per FX node "
          f"{statistics.median(per_node):.1f}")


if __name__ == "__main__":
    main()
