"""Numpy runtime vs torch eager, one thread each: per-op overhead and heavy ops.

Each row of ``CASES`` builds a Program and the equivalent torch eager computation; the
script prints the median of several runs of each and their ratio. Targets: <= 20 us per op
on the 1,000-op chain of tiny tensors; <= 1.5x torch on matmul/conv.
Run: ``python benchmarks/bench_runtime.py``.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # numpy's BLAS on one thread, like torch below

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median_time, print_table

from coreai_core import Program, TensorType
from coreai_core.dialects import coreai
from coreai_core.runtime import Runtime


@dataclass
class Case:
    """One benchmark row: a program with its inputs, and the same computation in torch."""

    name: str
    build: Callable[[], tuple[Program, dict[str, np.ndarray]]]
    torch_fn: Callable[[dict[str, torch.Tensor]], Any]
    ops: int = 1  # ops per run, for the per-op column
    target: str = ""
    repeat: int = 7


def _chain(n: int = 1000) -> tuple[Program, dict[str, np.ndarray]]:
    p = Program()
    with p.graph("main", inputs={"x": TensorType((4,), "float32")}) as g:
        v = g["x"]
        for i in range(n):
            v = coreai.broadcasting_mul(v, 0.5) if i % 2 else coreai.broadcasting_add(v, 1.0)
        g.outputs({"y": v})
    return p, {"x": np.ones(4, np.float32)}


def _torch_chain(inputs: dict[str, torch.Tensor], n: int = 1000) -> torch.Tensor:
    v = inputs["x"]
    for i in range(n):
        v = torch.mul(v, 0.5) if i % 2 else torch.add(v, 1.0)
    return v


def _softmax() -> tuple[Program, dict[str, np.ndarray]]:
    p = Program()
    with p.graph("main", inputs={"x": TensorType((32, 4096), "float32")}) as g:
        g.outputs({"y": coreai.softmax(g["x"], axis=-1)})
    return p, {"x": np.random.default_rng(0).standard_normal((32, 4096), np.float32)}


def _layer_norm() -> tuple[Program, dict[str, np.ndarray]]:
    """(x - mean) * rsqrt(var + eps) * gamma + beta over the last axis, op by op."""
    p = Program()
    rng = np.random.default_rng(0)
    with p.graph("main", inputs={"x": TensorType((64, 1024), "float32")}) as g:
        x = g["x"]
        gamma = coreai.constant(rng.standard_normal(1024, np.float32), name="gamma")
        beta = coreai.constant(rng.standard_normal(1024, np.float32), name="beta")
        centered = coreai.broadcasting_sub(x, coreai.reduce_mean(x, axes=[-1], keep_dims=True))
        var = coreai.reduce_mean(coreai.broadcasting_mul(centered, centered), axes=[-1],
                                 keep_dims=True)
        scale = coreai.rsqrt(coreai.broadcasting_add(var, 1e-5))
        y = coreai.broadcasting_add(
            coreai.broadcasting_mul(coreai.broadcasting_mul(centered, scale), gamma), beta)
        g.outputs({"y": y})
    return p, {"x": rng.standard_normal((64, 1024), np.float32)}


def _torch_layer_norm(inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    rng = np.random.default_rng(0)
    gamma = torch.from_numpy(rng.standard_normal(1024, np.float32))
    beta = torch.from_numpy(rng.standard_normal(1024, np.float32))
    x = inputs["x"]
    centered = x - x.mean(-1, keepdim=True)
    var = (centered * centered).mean(-1, keepdim=True)
    return centered * torch.rsqrt(var + 1e-5) * gamma + beta


_RNG_W = 1  # seed of the convolution weights, shared by both sides


def _matmul() -> tuple[Program, dict[str, np.ndarray]]:
    p = Program()
    t = TensorType((1024, 1024), "float32")
    with p.graph("main", inputs={"a": t, "b": t}) as g:
        g.outputs({"y": coreai.batch_matmul(g["a"], g["b"])})
    rng = np.random.default_rng(0)
    return p, {k: rng.standard_normal((1024, 1024), np.float32) for k in ("a", "b")}


def _conv_weights() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(_RNG_W)
    return (rng.standard_normal((64, 64, 3, 3), np.float32) * 0.05,
            rng.standard_normal(64, np.float32))


def _conv3x3() -> tuple[Program, dict[str, np.ndarray]]:
    """3x3 convolution 64 -> 64 channels on 56x56, batch 1, padding 1, with bias."""
    p = Program()
    w, b = _conv_weights()
    with p.graph("main", inputs={"x": TensorType((1, 64, 56, 56), "float32")}) as g:
        y = coreai.conv(g["x"], coreai.constant(w, name="w"), coreai.constant(b, name="b"),
                        pads=[1, 1])
        g.outputs({"y": y})
    return p, {"x": np.random.default_rng(0).standard_normal((1, 64, 56, 56), np.float32)}


def _torch_conv3x3(inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    w, b = (torch.from_numpy(a) for a in _conv_weights())
    return torch.nn.functional.conv2d(inputs["x"], w, b, padding=1)


CASES: list[Case] = [
    Case("1,000-op elementwise chain, 4 floats", _chain, _torch_chain, ops=1000,
         target="<= 20 us/op"),
    Case("softmax over 4096 (32 rows)", _softmax, lambda i: torch.softmax(i["x"], -1)),
    Case("layer-norm-like chain (64x1024)", _layer_norm, _torch_layer_norm, ops=8),
    Case("matmul 1024x1024 @ 1024x1024", _matmul, lambda i: torch.matmul(i["a"], i["b"]),
         target="<= 1.5x torch"),
    Case("conv 3x3, 64->64 ch, 56x56, batch 1", _conv3x3, _torch_conv3x3,
         target="<= 1.5x torch", repeat=21),
]


def run(cases: list[Case]) -> list[list[Any]]:
    """Time every case; returns the table rows."""
    torch.set_num_threads(1)
    rows = []
    one_thread = Runtime(threads=1)  # one thread each, like torch
    for case in cases:
        program, inputs = case.build()
        tensors = {k: torch.from_numpy(v) for k, v in inputs.items()}
        ours = median_time(lambda p=program, i=inputs: one_thread.run(p, i), repeat=case.repeat)
        with torch.inference_mode():
            theirs = median_time(lambda c=case, t=tensors: c.torch_fn(t), repeat=case.repeat)
        rows.append([case.name, ours * 1e3, theirs * 1e3, ours / theirs,
                     ours / case.ops * 1e6, case.target])
    return rows


def main() -> None:
    rows = run(CASES)
    print_table(["case", "coreai run (ms)", "torch eager (ms)", "ratio", "per op (us)",
                 "target"], rows)


if __name__ == "__main__":
    main()
