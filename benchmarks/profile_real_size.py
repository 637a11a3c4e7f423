"""Where the runtime's time goes on the real-size models, op kind by op kind, next to torch.

For each model of ``bench_real_size.py`` (same builders, random weights, default environment:
the runtime sets its BLAS threads itself), the converted and optimized program is timed with
``program.run`` (median) and profiled with ``Runtime.profile`` (per-op wall time, median per
op over the repeats). The table lists, per op kind: how many ops, their total milliseconds,
their share of the profiled run, and for the matmul-like kinds (``batch_matmul``, ``conv``)
the same calls timed with torch on one thread: the operands' shapes and memory layout
(a transposed weight stays a transposed view), convolution attributes included. ``ours/torch``
is how far each kind is from torch; the ``torch ms`` column summed with the other kinds'
``ms`` is what the run would take with torch's matmuls.

Run: ``python benchmarks/profile_real_size.py [--models bert,vit] [--repeat 3] [--top 12]``
(models: those of ``bench_real_size.py``; the Llamas take minutes and ~10 GB).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median_time, print_table
from bench_real_size import MODELS

from coreai_core import Program
from coreai_core.runtime import Runtime
from coreai_torch import TorchConverter, get_decomp_table

MATMUL_LIKE = ("coreai.batch_matmul", "coreai.conv")

# (shape, strides) per operand, then the attributes: enough to rebuild a call for torch
CallKey = tuple[Any, ...]


def _layout(a: np.ndarray) -> tuple[tuple[int, ...], tuple[int, ...]]:
    return a.shape, a.strides


def _recording_runtime(calls: list[CallKey]) -> Runtime:
    """A runtime whose matmul-like kernels note each call's operand layouts and attributes."""
    base = Runtime()
    kernels: dict[str, Callable[..., Any]] = {}
    for name in MATMUL_LIKE:
        fn = base.kernel_for(name)
        assert fn is not None

        def record(*args: Any, _fn: Callable[..., Any] = fn, _name: str = name,
                   **kw: Any) -> Any:
            arrays = tuple(None if a is None else (_layout(a), str(a.dtype)) for a in args)
            calls.append((_name, arrays, tuple(sorted(kw.items()))))
            return _fn(*args, **kw)

        kernels[name] = record
    return Runtime(kernels, allow_override=True)


def _tensor(layout: tuple[tuple[int, ...], tuple[int, ...]], dtype: str,
            rng: np.random.Generator) -> torch.Tensor:
    """A random tensor with ``layout``'s shape and, where it is a permutation of a contiguous
    array (a transposed weight), the same memory order; broadcast axes are expanded."""
    shape, strides = layout
    order = sorted(range(len(shape)), key=lambda i: -strides[i])
    dense = rng.standard_normal([shape[i] for i in order]).astype(dtype)
    return torch.from_numpy(dense).permute(*np.argsort(order).tolist())


def _torch_call(key: CallKey, rng: np.random.Generator) -> Callable[[], Any]:
    name, arrays, attrs = key
    ts = [None if a is None else _tensor(a[0], a[1], rng) for a in arrays]
    if name == "coreai.batch_matmul":
        return lambda: torch.matmul(ts[0], ts[1])
    kw = dict(attrs)
    x, w, b = ts
    assert x is not None and w is not None
    n = x.ndim - 2
    pads = kw.get("pads") or [0] * (2 * n)
    torch_pads = [p for i in reversed(range(n)) for p in (pads[2 * i], pads[2 * i + 1])]
    x = F.pad(x, torch_pads)  # before timing: torch pads inside its kernel, symmetric only
    conv = (F.conv1d, F.conv2d, F.conv3d)[n - 1]
    return lambda: conv(x, w, b, stride=kw.get("strides") or 1,
                        dilation=kw.get("dilation") or 1, groups=kw.get("groups", 1))


def torch_ms(calls: Sequence[CallKey], repeat: int) -> dict[str, float]:
    """Per op kind, the summed median milliseconds of torch on each recorded call."""
    rng = np.random.default_rng(0)
    cache: dict[CallKey, float] = {}
    totals: dict[str, float] = defaultdict(float)
    for key in calls:
        if key not in cache:
            cache[key] = 1e3 * median_time(_torch_call(key, rng), repeat=max(repeat, 5))
        totals[key[0]] += cache[key]
    return totals


def profile_rows(program: Program, feeds: dict[str, np.ndarray], repeat: int,
                 top: int) -> tuple[list[list[Any]], float, float]:
    """The table rows, the median ``run()`` seconds and the profiled total seconds."""
    runtime = Runtime()
    t_run = median_time(lambda: program.run(feeds), repeat=repeat)
    per_step: list[list[float]] = []
    kinds: list[str] = []
    for _ in range(repeat):
        _, timings = runtime.profile(program, feeds)
        if not per_step:
            per_step = [[] for _ in timings]
            kinds = [op.name for op, _ in timings]
        for times, (_, seconds) in zip(per_step, timings, strict=True):
            times.append(seconds)
    ms: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for kind, times in zip(kinds, per_step, strict=True):
        ms[kind] += 1e3 * statistics.median(times)
        count[kind] += 1
    total = sum(ms.values())
    calls: list[CallKey] = []
    _recording_runtime(calls).run(program, feeds)
    reference = torch_ms(calls, repeat)
    rows: list[list[Any]] = []
    ranked = sorted(ms, key=lambda k: -ms[k])
    for kind in ranked[:top]:
        ref = reference.get(kind)
        rows.append([kind.removeprefix("coreai."), count[kind], ms[kind],
                     f"{100 * ms[kind] / total:.1f}%", "" if ref is None else ref,
                     "" if ref is None else ms[kind] / ref])
    rest = ranked[top:]
    if rest:
        rest_ms = sum(ms[k] for k in rest)
        rows.append([f"({len(rest)} other kinds)", sum(count[k] for k in rest), rest_ms,
                     f"{100 * rest_ms / total:.1f}%", "", ""])
    return rows, t_run, total / 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="bert,vit",
                        help=f"comma-separated, from {', '.join(MODELS)}")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per median")
    parser.add_argument("--top", type=int, default=12, help="op kinds listed per model")
    args = parser.parse_args()
    keys = [k for k in args.models.split(",") if k]
    unknown = [k for k in keys if k not in MODELS]
    if unknown:
        parser.error(f"unknown model(s) {unknown}; choose from {list(MODELS)}")
    torch.set_num_threads(1)
    for key in keys:
        label, build = MODELS[key]
        torch.manual_seed(0)
        model, inputs = build()
        model.eval()
        ep = torch.export.export(model, inputs).run_decompositions(get_decomp_table())
        program = TorchConverter(progress=False).add_exported_program(ep).to_coreai()
        del ep
        program.optimize()
        feeds = dict(zip(program.input_names, [t.numpy() for t in inputs], strict=True))
        with torch.inference_mode():
            t_eager = median_time(lambda: model(*inputs), repeat=args.repeat)
        rows, t_run, t_profiled = profile_rows(program, feeds, args.repeat, args.top)
        print(f"\n## {label}: run() {t_run * 1e3:.0f} ms (median), torch eager "
              f"{t_eager * 1e3:.0f} ms (1 thread), profiled ops {t_profiled * 1e3:.0f} ms\n")
        print_table(["op kind", "count", "ms", "share", "torch ms", "ours/torch"], rows)
        del program, model
        print(f"{key}: done", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
