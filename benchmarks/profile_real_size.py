"""Where the runtime's time goes on the real-size models, op kind by op kind, next to torch.

For each model of ``bench_real_size.py`` (same builders, random weights, default environment:
the runtime sets its BLAS threads itself), the converted and optimized program is timed with
``program.run`` (median) and profiled with ``Runtime.profile`` (per-op wall time, median per
op over the repeats). The table lists, per op kind: how many ops, their total milliseconds,
their share of the profiled run, and for the matmul-like kinds (``batch_matmul``, ``conv``)
the same calls timed with torch on one thread: the operands' shapes and memory layout
(a transposed weight stays a transposed view), convolution attributes included. ``ours/torch``
is how far each kind is from torch. A second table breaks the matmul-like calls down by
operand shapes (``T``: a transposed view, e.g. a linear layer's weight), with our kernel
also timed alone on fresh operands of the same layout (``alone``), like torch is: where
``ours/torch`` exceeds ``alone/torch``, the difference comes from the context (caches, the
machine's load), not from the kernel. A third table sums the ops by the module they came
from (layer indices merged: ``encoder.layer.*.output.LayerNorm``).

Run: ``python benchmarks/profile_real_size.py [--models bert,vit] [--repeat 3] [--top 12]``
(models: those of ``bench_real_size.py``; the Llamas take minutes and ~10 GB).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median_time, print_table
from bench_real_size import MODELS, built_model, model_keys, optimized_program

from coreai_core import Operation, Program
from coreai_core.runtime import Runtime

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


def _operand(layout: tuple[tuple[int, ...], tuple[int, ...]], dtype: str,
             rng: np.random.Generator) -> tuple[np.ndarray, torch.Tensor]:
    """A random array with ``layout``'s shape and, where it is a permutation of a contiguous
    array (a transposed weight), the same memory order (broadcast axes are expanded); and
    a torch tensor on the same memory."""
    shape, strides = layout
    order = sorted(range(len(shape)), key=lambda i: -strides[i])
    dense = rng.standard_normal([shape[i] for i in order]).astype(dtype)
    back = np.argsort(order).tolist()
    return dense.transpose(back), torch.from_numpy(dense).permute(*back)


def _calls(key: CallKey, rng: np.random.Generator,
           kernel: Callable[..., Any]) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """The recorded call on fresh operands of the same layout: with our kernel, with torch."""
    name, arrays, attrs = key
    kw = dict(attrs)
    pairs = [(None, None) if a is None else _operand(a[0], a[1], rng) for a in arrays]
    ours = [a for a, _ in pairs]

    def run_ours() -> Any:
        return kernel(*ours, **kw)

    ts = [t for _, t in pairs]
    if name == "coreai.batch_matmul":
        lhs, rhs = ts
        assert lhs is not None and rhs is not None
        return run_ours, lambda: torch.matmul(lhs, rhs)
    x, w, b = ts
    assert x is not None and w is not None
    n = x.ndim - 2
    pads = list(kw.get("pads") or [0] * n)
    if len(pads) == n:  # one entry per axis pads both sides
        pads = [p for v in pads for p in (v, v)]
    torch_pads = [p for i in reversed(range(n)) for p in (pads[2 * i], pads[2 * i + 1])]
    x = F.pad(x, torch_pads)  # before timing: torch pads inside its kernel, symmetric only
    conv = (F.conv1d, F.conv2d, F.conv3d)[n - 1]
    return run_ours, lambda: conv(x, w, b, stride=kw.get("strides") or 1,
                                  dilation=kw.get("dilation") or 1, groups=kw.get("groups", 1))


def _module_key(path: str | None) -> str:
    """A module path with its layer indices replaced by ``*``: the layers' ops add up."""
    if not path:
        return "(no module)"
    return ".".join("*" if part.isdigit() else part for part in path.split("."))


def _describe(key: CallKey) -> str:
    """``[128,768] x [768,3072]T``: operand shapes, ``T`` where the last two axes are
    transposed in memory (a weight used as ``w.T``), then the attributes."""
    parts = []
    for a in key[1]:
        if a is None:
            continue
        (shape, strides), _ = a
        transposed = len(shape) >= 2 and strides[-1] > strides[-2] > 0
        parts.append(f"[{','.join(map(str, shape))}]{'T' if transposed else ''}")
    attrs = ", ".join(f"{k}={v}" for k, v in key[2] if v not in (None, 1, [1, 1], [0] * 4))
    return " x ".join(parts) + (f" ({attrs})" if attrs else "")


def profile_rows(program: Program, feeds: dict[str, np.ndarray], repeat: int,
                 top: int) -> tuple[list[list[Any]], list[list[Any]], list[list[Any]], float,
                                    float]:
    """The per-kind rows, the per-call-shape rows of the matmul-like kinds, the per-module
    rows, the median ``run()`` seconds and the profiled total seconds."""
    runtime = Runtime()
    t_run = median_time(lambda: program.run(feeds), repeat=repeat)
    per_step: list[list[float]] = []
    kinds: list[str] = []
    step_ops: list[Operation] = []
    for _ in range(repeat):
        _, timings = runtime.profile(program, feeds)
        if not per_step:
            per_step = [[] for _ in timings]
            step_ops = [op for op, _ in timings]
            kinds = [op.name for op in step_ops]
        for times, (_, seconds) in zip(per_step, timings, strict=True):
            times.append(seconds)
    step_ms = [1e3 * statistics.median(times) for times in per_step]
    modules: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for op, t in zip(step_ops, step_ms, strict=True):
        acc = modules[_module_key(op.location.module_path)]
        acc[0] += t
        acc[1] += 1
    ms: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for kind, t in zip(kinds, step_ms, strict=True):
        ms[kind] += t
        count[kind] += 1
    total = sum(ms.values())

    # the matmul-like calls in step order, as the recording runtime saw them
    calls: list[CallKey] = []
    _recording_runtime(calls).run(program, feeds)
    ours = [t for kind, t in zip(kinds, step_ms, strict=True) if kind in MATMUL_LIKE]
    rng = np.random.default_rng(0)
    # per call layout: ours ms summed, ours alone and torch ms per call, count
    by_call: dict[CallKey, list[float]] = {}
    for key, t in zip(calls, ours, strict=True):
        entry = by_call.get(key)
        if entry is None:
            kernel = runtime.kernel_for(key[0])
            assert kernel is not None
            run_ours, run_torch = _calls(key, rng, kernel)
            with threadpool_limits(1, user_api="blas"):  # as during a run
                alone = 1e3 * median_time(run_ours, repeat=max(repeat, 5))
            entry = by_call[key] = [0.0, alone, 1e3 * median_time(run_torch,
                                                                  repeat=max(repeat, 5)), 0]
        entry[0] += t
        entry[3] += 1
    reference: dict[str, float] = defaultdict(float)
    for key, (_, _, torch_t, n) in by_call.items():
        reference[key[0]] += torch_t * n

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
    shape_rows = [[key[0].removeprefix("coreai."), _describe(key), n, our_t,
                   f"{100 * our_t / total:.1f}%", alone * n, torch_t * n,
                   our_t / (torch_t * n), alone / torch_t]
                  for key, (our_t, alone, torch_t, n) in sorted(by_call.items(),
                                                                key=lambda kv: -kv[1][0])[:top]]
    module_rows = [[name, int(n), t, f"{100 * t / total:.1f}%"]
                   for name, (t, n) in sorted(modules.items(), key=lambda kv: -kv[1][0])[:top]]
    return rows, shape_rows, module_rows, t_run, total / 1e3


def profile_model(key: str, repeat: int, top: int) -> None:
    """Build, convert and optimize model ``key``, then print its two tables."""
    label, model, inputs = built_model(key)
    program, feeds = optimized_program(model, inputs)
    with torch.inference_mode():
        t_eager = median_time(lambda: model(*inputs), repeat=repeat)
    rows, shape_rows, module_rows, t_run, t_profiled = profile_rows(program, feeds, repeat,
                                                                    top)
    print(f"\n## {label}: run() {t_run * 1e3:.0f} ms (median), torch eager "
          f"{t_eager * 1e3:.0f} ms (1 thread), profiled ops {t_profiled * 1e3:.0f} ms\n")
    print_table(["op kind", "count", "ms", "share", "torch ms", "ours/torch"], rows)
    print()
    print_table(["op", "operands", "count", "ms", "share", "alone ms", "torch ms",
                 "ours/torch", "alone/torch"], shape_rows)
    print()
    print_table(["module (layers merged)", "ops", "ms", "share"], module_rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="bert,vit",
                        help=f"comma-separated, from {', '.join(MODELS)}")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per median")
    parser.add_argument("--top", type=int, default=12, help="rows listed per table")
    args = parser.parse_args()
    keys = model_keys(parser, args.models)
    torch.set_num_threads(1)
    for key in keys:
        profile_model(key, args.repeat, args.top)
        print(f"{key}: done", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
