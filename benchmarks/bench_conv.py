"""Convolution layers at real sizes: the runtime's ``coreai.conv`` against torch eager.

Layers of ResNet-50, MobileNetV2, ConvNeXt-T and ResNeXt at 224x224 input, the tiny zoo's
UNet, and wav2vec2's 1-d convolutions; one thread each (torch ``set_num_threads(1)``, BLAS
held on one thread like a run). The runtime's kernel runs prepared, as a plan step calls it.
Both are timed alternately in one process; the table gives each one's minimum and median
and the ratio of the minima (a loaded machine disturbs minima least).
Run: ``python benchmarks/bench_conv.py [--repeat 30] [--only mb2,cnx]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table

from coreai_core import TensorType
from coreai_core.runtime.kernels import _conv, nn

# name, input [N, C, *S], weight [O, C/groups, *k], stride, padding, dilation, groups
LAYERS = [
    ("unet.enc1", (1, 3, 16, 16), (8, 3, 3, 3), 1, 1, 1, 1),
    ("unet.enc2", (1, 8, 16, 16), (16, 8, 3, 3), 2, 1, 1, 1),
    ("unet.dec2", (1, 32, 8, 8), (8, 32, 3, 3), 1, 1, 1, 1),
    ("r50.stem 7x7/2", (1, 3, 224, 224), (64, 3, 7, 7), 2, 3, 1, 1),
    ("r50 3x3 56", (1, 64, 56, 56), (64, 64, 3, 3), 1, 1, 1, 1),
    ("r50 1x1 56", (1, 256, 56, 56), (64, 256, 1, 1), 1, 0, 1, 1),
    ("r50 3x3/2 56", (1, 128, 56, 56), (128, 128, 3, 3), 2, 1, 1, 1),
    ("r50 3x3 14", (1, 256, 14, 14), (256, 256, 3, 3), 1, 1, 1, 1),
    ("mb2.stem 3x3/2", (1, 3, 224, 224), (32, 3, 3, 3), 2, 1, 1, 1),
    ("mb2 dw 112", (1, 32, 112, 112), (32, 1, 3, 3), 1, 1, 1, 32),
    ("mb2 dw/2 112", (1, 96, 112, 112), (96, 1, 3, 3), 2, 1, 1, 96),
    ("mb2 dw 56", (1, 144, 56, 56), (144, 1, 3, 3), 1, 1, 1, 144),
    ("mb2 dw/2 56", (1, 144, 56, 56), (144, 1, 3, 3), 2, 1, 1, 144),
    ("mb2 dw/2 14", (1, 576, 14, 14), (576, 1, 3, 3), 2, 1, 1, 576),
    ("mb2 dw 7", (1, 960, 7, 7), (960, 1, 3, 3), 1, 1, 1, 960),
    ("cnx.stem 4x4/4", (1, 3, 224, 224), (96, 3, 4, 4), 4, 0, 1, 1),
    ("cnx dw7x7 56", (1, 96, 56, 56), (96, 1, 7, 7), 1, 3, 1, 96),
    ("cnx dw7x7 28", (1, 192, 28, 28), (192, 1, 7, 7), 1, 3, 1, 192),
    ("cnx dw7x7 14", (1, 384, 14, 14), (384, 1, 7, 7), 1, 3, 1, 384),
    ("cnx dw7x7 7", (1, 768, 7, 7), (768, 1, 7, 7), 1, 3, 1, 768),
    ("rnx g32 56", (1, 128, 56, 56), (128, 4, 3, 3), 1, 1, 1, 32),
    ("rnx g32/2 56", (1, 256, 56, 56), (256, 8, 3, 3), 2, 1, 1, 32),
    ("w2v fe0 k10/5", (1, 1, 16000), (512, 1, 10), 5, 0, 1, 1),
    ("w2v fe1 k3/2", (1, 512, 3199), (512, 512, 3), 2, 0, 1, 1),
    ("w2v pos k128 g16", (1, 768, 500), (768, 48, 128), 1, 64, 1, 16),
]


def measure(layer: tuple, repeat: int, rng: np.random.Generator) -> list:
    """One table row: the layer's method, minimum and median times, and the ratio."""
    name, xs, ws, s, p, d, g = layer
    x = rng.standard_normal(xs, dtype=np.float32)
    w = rng.standard_normal(ws, dtype=np.float32)
    b = rng.standard_normal(ws[0], dtype=np.float32)
    n = len(xs) - 2
    attrs = dict(strides=(s,) * n, pads=(p,) * (2 * n), dilation=(d,) * n, groups=g)
    method = _conv.conv_plan(xs[1:], ws, np.dtype(np.float32), attrs["strides"], attrs["pads"],
                             attrs["dilation"], g).method
    prepared = nn.conv.prepare([TensorType(xs, "float32"), TensorType(ws, "float32"),
                                TensorType(b.shape, "float32")], **attrs)
    tx, tw, tb = (torch.from_numpy(a) for a in (x, w, b))
    conv = (F.conv1d, F.conv2d, F.conv3d)[n - 1]
    fns = [lambda: prepared(x, w, b, **attrs),
           lambda: conv(tx, tw, tb, stride=s, padding=p, dilation=d, groups=g)]
    times: list[list[float]] = [[], []]
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            times[i].append(time.perf_counter() - t0)
    ours, theirs = min(times[0]), min(times[1])
    return [name, method, ours * 1e3, statistics.median(times[0]) * 1e3, theirs * 1e3,
            statistics.median(times[1]) * 1e3, ours / theirs]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    with threadpool_limits(1, user_api="blas"):
        rows = [measure(layer, args.repeat, rng) for layer in LAYERS
                if not args.only or any(layer[0].startswith(o) for o in args.only.split(","))]
    print_table(["layer", "method", "run min ms", "run median ms", "torch min ms",
                 "torch median ms", "run/torch (min)"], rows)


if __name__ == "__main__":
    main()
