"""A/B of the elementwise kernels against a git revision, interleaved in one process.

The kernel module as it was at ``--rev`` is loaded next to the current one; each kernel runs
on real-size operands (BERT, ViT and Llama activations, 10^7 elements) alternately old and
new, and the table gives the medians, the speedup and whether the results are bit-identical
(else how many elements differ). Interleaving makes the ratio meaningful on a busy machine,
where absolute times are not. With ``--models``, whole ``program.run`` calls of those
``bench_real_size.py`` models are compared the same way, on a runtime whose kernels for the
compared ops are the old ones.

Run: ``python benchmarks/bench_kernels_ab.py [--rev main] [--repeat 21] [--models bert,vit]``
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table
from bench_real_size import MODELS, built_model, model_keys, optimized_program

from coreai_core.runtime import Runtime

ROOT = Path(__file__).resolve().parents[1]
MODULE = "coreai_core/runtime/kernels/elementwise.py"


def _cases() -> list[tuple[str, str, np.ndarray, dict[str, Any]]]:
    """(label, op, operand, attributes) at the sizes real models run them."""
    rng = np.random.default_rng(0)

    def normal(*shape: int, scale: float = 2.0) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    exact = {"approximate": "none"}
    last = {"axis": -1}
    return [
        ("gelu, BERT MLP 128x3072", "coreai.gelu", normal(1, 128, 3072), exact),
        ("gelu, ViT MLP 197x3072", "coreai.gelu", normal(1, 197, 3072), exact),
        ("gelu, 10^7", "coreai.gelu", normal(10**7), exact),
        ("silu, Llama MLP 128x5632", "coreai.silu", normal(1, 128, 5632, scale=3.0), {}),
        ("silu, 10^7", "coreai.silu", normal(10**7), {}),
        ("sigmoid, 10^6", "coreai.sigmoid", normal(10**6), {}),
        ("softmax, BERT 12x128x128", "coreai.softmax", normal(1, 12, 128, 128, scale=3.0),
         last),
        ("softmax, ViT 12x197x197", "coreai.softmax", normal(1, 12, 197, 197, scale=3.0),
         last),
        ("softmax, Llama 32x128x128", "coreai.softmax", normal(1, 32, 128, 128, scale=3.0),
         last),
    ]


def load_old(rev: str) -> ModuleType:
    """The kernel module as it was at git revision ``rev`` (its imports: today's package)."""
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{MODULE}"], check=True,
                            capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "old_elementwise.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("old_elementwise", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def interleaved(old: Callable[[], Any], new: Callable[[], Any],
                repeat: int) -> tuple[float, float]:
    """Median seconds of ``old`` and of ``new``, timed alternately."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeat):
        for fn, bucket in ((old, times[0]), (new, times[1])):
            t0 = time.perf_counter()
            fn()
            bucket.append(time.perf_counter() - t0)
    return statistics.median(times[0]), statistics.median(times[1])


def _same(a: np.ndarray, b: np.ndarray) -> str:
    if a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes():
        return "yes"
    return f"no: {int(np.sum(a != b))} of {a.size} differ"


def kernel_rows(old_module: ModuleType, repeat: int) -> list[list[Any]]:
    rows: list[list[Any]] = []
    current = Runtime()
    for label, op, x, kw in _cases():
        old, new = old_module.KERNELS.get(op), current.kernel_for(op)
        assert old is not None and new is not None
        reps = max(3, repeat // 4) if x.size >= 10**7 else repeat
        run_old, run_new = partial(old, x, **kw), partial(new, x, **kw)
        t_old, t_new = interleaved(run_old, run_new, reps)
        rows.append([label, 1e3 * t_old, 1e3 * t_new, t_old / t_new, _same(run_old(), run_new())])
    return rows


def model_rows(old_module: ModuleType, keys: list[str], repeat: int) -> list[list[Any]]:
    ops = [op for _, op, _, _ in _cases()]
    old_rt = Runtime({op: old_module.KERNELS.get(op) for op in dict.fromkeys(ops)},
                     allow_override=True, threads=1)
    new_rt = Runtime(threads=1)  # one thread each, like torch
    rows: list[list[Any]] = []
    for key in keys:
        label, model, inputs = built_model(key)
        program, feeds = optimized_program(model, inputs)
        run_old, run_new = partial(old_rt.run, program, feeds), partial(new_rt.run, program, feeds)
        t_old, t_new = interleaved(run_old, run_new, max(3, repeat // 3))
        a, b = (next(iter(run().values())) for run in (run_old, run_new))
        rows.append([f"run(), {label}", 1e3 * t_old, 1e3 * t_new, t_old / t_new, _same(a, b)])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rev", default="main", help="git revision to compare against")
    parser.add_argument("--repeat", type=int, default=21, help="timed runs of each side")
    parser.add_argument("--models", default="", help=f"also whole runs of: {', '.join(MODELS)}")
    args = parser.parse_args()
    keys = model_keys(parser, args.models)
    torch.set_num_threads(1)
    old_module = load_old(args.rev)
    with np.errstate(all="ignore"):  # as inside a run
        rows = kernel_rows(old_module, args.repeat) + model_rows(old_module, keys, args.repeat)
    print_table([f"kernel (old: {args.rev})", "old ms", "new ms", "speedup", "bit-identical"],
                rows)


if __name__ == "__main__":
    main()
