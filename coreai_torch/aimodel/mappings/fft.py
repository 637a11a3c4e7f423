"""Op mappings (fft family): transforms of static size as DFT products.

Core AI has no FFT op, so a transform of static size is a DFT product: along each
transformed axis the real and imaginary parts, side by side, are multiplied by one real
matrix of the DFT's cosines and sines (``[re, im] @ [[C, S], [-S, C]]``), computed in
float64 (angles reduced exactly: ``2*pi*(j*k mod n)/n``), scaled by the normalization and
rounded once to float32. Error: each output of an axis of length ``n`` is a float32 dot
product of length ``2n`` (``n`` for the real half of ``fft_r2c``, ``2 * (n//2 + 1)`` for
``fft_c2r``) with entries rounded once, so ``|error| <= (2n + 1) * u * sum_j |x_j| * s``
(``u = 2**-24``, ``s`` the normalization scale, ``|W| = s``) in the worst summation order;
over several axes the bounds add (each applied to the previous axis' result). Measured on
random data (tests/interop/test_aimodel_fft.py) the error is far below: about
``sqrt(n) * u * sum|x| * s`` (docs/coreai-interop.md). The work is ``O(n**2)`` per axis, not
``O(n log n)``: fine for the sequence and hidden sizes of models such as FNet.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from coreai_core import Operation
from coreai_torch.aimodel._apple import ca, constant
from coreai_torch.aimodel._context import ExportContext, Refused
from coreai_torch.aimodel._emit import complex_parts, slice_axis, u32
from coreai_torch.aimodel.mappings._registry import mapping_decorator, mapping_registry

__all__ = ["MAPPINGS", "dft_matrix"]

MAPPINGS = mapping_registry(__name__)
mapping = mapping_decorator(MAPPINGS)

F32 = np.float32
Pair = tuple[Any, Any]  # the real and imaginary parts, Apple float32 values
_DFT = "DFT product: [re, im] @ a float32 [[cos, sin], [-sin, cos]] matrix along each axis"


def dft_matrix(n: int, forward: bool, scale: float, rows: int | None = None,
               cols: int | None = None) -> np.ndarray:
    """``scale * exp(-+2*pi*i * j*k / n)`` for ``j < rows``, ``k < cols`` (complex128), the
    angle reduced exactly (``j*k mod n``) before the float64 sine and cosine."""
    j = np.arange(n if rows is None else rows)[:, None]
    k = np.arange(n if cols is None else cols)[None, :]
    angle = 2 * np.pi * ((j * k) % n) / n
    return scale * np.exp((-1j if forward else 1j) * angle)


def _scale(normalization: str, n: int) -> float:
    return {"none": 1.0, "by_root_n": 1 / np.sqrt(n), "by_n": 1.0 / n}[normalization]


def _along(x: Any, axis: int, matrix: np.ndarray) -> Any:
    """``x`` with its ``axis`` multiplied by ``matrix`` (float64 -> float32): x @ matrix there."""
    rank = len(x.type.shape)
    perm = [a for a in range(rank) if a != axis] + [axis]
    moved = x if axis == rank - 1 else ca.transpose(x, u32(perm))
    out = ca.broadcasting_batch_matmul(moved, constant(matrix.astype(F32)))
    if axis == rank - 1:
        return out
    return ca.transpose(out, u32([perm.index(a) for a in range(rank)]))


def _split(x: Any, axis: int, n: int) -> Pair:
    return slice_axis(x, axis, 0, n), slice_axis(x, axis, n, 2 * n)


def _c2c_axis(pair: Pair, axis: int, n: int, forward: bool, scale: float) -> Pair:
    w = dft_matrix(n, forward, scale)
    matrix = np.block([[w.real, w.imag], [-w.imag, w.real]])  # [re, im] @ this = [re', im']
    both = ca.concat(np.int32(axis), list(pair))
    return _split(_along(both, axis, matrix), axis, n)


def _axes(ctx: ExportContext, op: Operation) -> list[int]:
    rank = op.operands[0].type.rank
    return [a % rank for a in op.attributes["axes"]]


@mapping("coreai.fft_c2c", f"{_DFT} (<= (2n + 1) u sum|x| per axis)")
def fft_c2c(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    shape = ctx.static_shape(op.operands[0])
    axes = _axes(ctx, op)
    scale = _scale(op.attributes["normalization"], int(np.prod([shape[a] for a in axes])))
    pair = complex_parts(xs[0])
    for i, a in enumerate(axes):
        pair = _c2c_axis(pair, a, shape[a], op.attributes["forward"], scale if i == 0 else 1.0)
    return [ca.create_complex(*pair)]


@mapping("coreai.fft_r2c", f"{_DFT} (the real signal: [cos, sin] only)")
def fft_r2c(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    shape = ctx.static_shape(op.operands[0])
    axes = _axes(ctx, op)
    scale = _scale(op.attributes["normalization"], int(np.prod([shape[a] for a in axes])))
    last, n = axes[-1], shape[axes[-1]]
    m = n // 2 + 1 if op.attributes["onesided"] else n
    w = dft_matrix(n, True, scale, cols=m)
    pair = _split(_along(xs[0], last, np.concatenate([w.real, w.imag], axis=1)), last, m)
    for a in axes[:-1]:
        pair = _c2c_axis(pair, a, shape[a], True, 1.0)
    return [ca.create_complex(*pair)]


@mapping("coreai.fft_c2r", f"{_DFT} (the Hermitian half, weighted 1 or 2)")
def fft_c2r(ctx: ExportContext, op: Operation, xs: Sequence[Any]) -> list[Any]:
    shape = ctx.static_shape(op.operands[0])
    axes = _axes(ctx, op)
    last, length = axes[-1], op.attributes["last_dim_size"]
    entries = shape[last]
    if entries != length // 2 + 1:
        raise Refused(f"fft_c2r with {entries} entries for last_dim_size {length}")
    n = length * int(np.prod([shape[a] for a in axes[:-1]]))
    pair = complex_parts(xs[0])
    for a in axes[:-1]:
        pair = _c2c_axis(pair, a, shape[a], False, 1.0)
    # the Hermitian extension: entries 0 < k < length/2 count twice, and the imaginary parts
    # of entry 0 and of the Nyquist entry are ignored
    k = np.arange(entries)
    weight = np.where((k == 0) | (2 * k == length), 1.0, 2.0)[:, None]
    w = dft_matrix(length, False, _scale(op.attributes["normalization"], n), rows=entries)
    sines = -weight * w.imag
    sines[(k == 0) | (2 * k == length)] = 0.0
    matrix = np.concatenate([weight * w.real, sines], axis=0)
    return [_along(ca.concat(np.int32(last), list(pair)), last, matrix)]
