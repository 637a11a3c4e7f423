"""Matrix products with a shared right operand (a linear layer's weight), laid out for BLAS.

A stack of matrices times one matrix runs as one 2-D product of the stacked rows, in fixed
row blocks: ``np.matmul`` would read the shared operand once per matrix of the stack (an
LSTM's input projection over 100 time steps is 100 matrix-vector products, 10x slower), and
fixed blocks keep the bits independent of the runtime's thread count.

A product with few rows whose right operand is a transposed view (how a torch weight
arrives: ``weight.T``) is computed as ``(weight @ rows.T).T``: OpenBLAS's kernel for a
transposed right operand is up to 1.9x slower with 2 to 32 rows, and the swapped form takes
the same dot products (the same bits with OpenBLAS).
"""

from __future__ import annotations

import math

import numpy as np

from coreai_core.runtime import _threads

__all__ = ["MATMUL_ROW_BLOCK", "MIN_SHARED_SIZE", "shared_rhs_matmul", "shares_rhs"]

# Rows of one BLAS call of a stacked product: the shared operand is read once per block.
MATMUL_ROW_BLOCK = 512
# Smaller shared operands take numpy's own path: the layout saves less than the Python costs.
MIN_SHARED_SIZE = 1 << 12
# Where the swapped form is faster (OpenBLAS 0.3.31, float32, one thread: 1.1-1.9x for 2 to
# 32 rows when the sum has >= 128 terms and the weight >= 1024 columns; with short sums or few
# columns it can be slower, 12x with 2 terms).
_SWAP_ROWS = range(2, 33)
_SWAP_MIN_SUM = 128
_SWAP_MIN_COLUMNS = 1024


def shares_rhs(lhs: np.ndarray, rhs: np.ndarray) -> bool:
    """Whether ``lhs @ rhs`` multiplies matrices (or a stack of them) by one matrix of at
    least ``MIN_SHARED_SIZE`` elements."""
    return (rhs.size >= MIN_SHARED_SIZE and lhs.ndim > 1 and rhs.ndim > 1
            and (rhs.ndim == 2 or all(d == 1 for d in rhs.shape[:-2])))


def _matmul_2d(rows: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    if (rows.shape[0] in _SWAP_ROWS and matrix.shape[0] >= _SWAP_MIN_SUM
            and matrix.shape[1] >= _SWAP_MIN_COLUMNS
            and matrix.flags.f_contiguous and not matrix.flags.c_contiguous):
        return np.ascontiguousarray(np.matmul(matrix.T, rows.T).T)
    return np.matmul(rows, matrix)


def shared_rhs_matmul(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """``np.matmul(lhs, rhs)`` for ``shares_rhs(lhs, rhs)``: the rows of ``lhs`` in blocks of
    ``MATMUL_ROW_BLOCK``, the blocks on the run's pool."""
    if lhs.ndim == 2 and rhs.ndim == 2:
        rows, matrix, shape = lhs, rhs, None
    else:
        shape = (*np.broadcast_shapes(lhs.shape[:-2], rhs.shape[:-2]), lhs.shape[-2],
                 rhs.shape[-1])
        # a copy when lhs is a strided view, e.g. a transposed sequence
        rows = lhs.reshape(math.prod(lhs.shape[:-1]), lhs.shape[-1])
        matrix = rhs.reshape(rhs.shape[-2:])
    if rows.shape[0] <= MATMUL_ROW_BLOCK:
        out = _matmul_2d(rows, matrix)
    else:
        out = np.empty((rows.shape[0], matrix.shape[1]), np.result_type(lhs, rhs))
        starts = range(0, rows.shape[0], MATMUL_ROW_BLOCK)

        def block(i: int) -> None:
            part = slice(starts[i], starts[i] + MATMUL_ROW_BLOCK)
            np.matmul(rows[part], matrix, out=out[part])

        _threads.parallel_blocks(len(starts), out.size * rows.shape[1], block)
    return out if shape is None else out.reshape(shape)
