"""Matrix products in fixed blocks, laid out for BLAS and spread over the run's threads.

Every product above ``_threads.BLOCK_WORK`` multiply-adds runs as blocks whose boundaries
depend on the shapes only (see ``_threads``), each one BLAS call on one thread writing its own
part of the result, so the bits do not depend on the runtime's thread count:

- a stack of matrices times one matrix (a linear layer's weight) runs as one 2-D product of
  the stacked rows: ``np.matmul`` would read the shared operand once per matrix of the stack
  (an LSTM's input projection over 100 time steps is 100 matrix-vector products, 10x slower).
  Many rows: blocks of ``MATMUL_ROW_BLOCK`` rows (each reads the shared operand once); few
  rows (a transformer at sequence 128, a decode step's single row): blocks of columns of the
  shared operand;
- a stack times a stack of the same batch shape (attention's scores and context): blocks of
  whole matrices of the stack.

A product with few rows whose right operand is a transposed view (how a torch weight
arrives: ``weight.T``) is computed as ``(weight @ rows.T).T``: OpenBLAS's kernel for a
transposed right operand is up to 1.9x slower with 2 to 32 rows, and the swapped form takes
the same dot products (the same bits with OpenBLAS).
"""

from __future__ import annotations

import math

import numpy as np

from coreai_core.runtime import _threads

__all__ = ["MATMUL_ROW_BLOCK", "MIN_SHARED_SIZE", "shared_rhs_matmul", "shares_rhs",
           "stacked_matmul"]

# Rows of one BLAS call of a stacked product: the shared operand is read once per block.
MATMUL_ROW_BLOCK = 512
# Smaller shared operands take numpy's own path: the layout saves less than the Python costs.
MIN_SHARED_SIZE = 1 << 12
# Columns of a column block come in multiples of this (whole SIMD panels of the BLAS kernel).
_COLUMN_QUANTUM = 64
# A product with fewer rows than this streams its right operand from memory (a matrix-vector
# product does one multiply-add per element loaded): its work counts as this many rows when
# cutting blocks, so that a decode step's large matrix-vector products are split too.
_STREAMING_ROWS = 8
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


def _swapped(rows: np.ndarray, matrix: np.ndarray) -> bool:
    return (rows.shape[0] in _SWAP_ROWS and matrix.shape[0] >= _SWAP_MIN_SUM
            and matrix.shape[1] >= _SWAP_MIN_COLUMNS
            and matrix.flags.f_contiguous and not matrix.flags.c_contiguous)


def shared_rhs_matmul(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """``np.matmul(lhs, rhs)`` for ``shares_rhs(lhs, rhs)``: the rows of ``lhs`` in blocks of
    ``MATMUL_ROW_BLOCK`` or the columns of ``rhs`` in fixed blocks, on the run's pool."""
    if lhs.ndim == 2 and rhs.ndim == 2:
        rows, matrix, shape = lhs, rhs, None
    else:
        shape = (*np.broadcast_shapes(lhs.shape[:-2], rhs.shape[:-2]), lhs.shape[-2],
                 rhs.shape[-1])
        # a copy when lhs is a strided view, e.g. a transposed sequence
        rows = lhs.reshape(math.prod(lhs.shape[:-1]), lhs.shape[-1])
        matrix = rhs.reshape(rhs.shape[-2:])
    m, k = rows.shape
    n = matrix.shape[1]
    work = max(m, _STREAMING_ROWS) * k * n
    swap = _swapped(rows, matrix)
    if m > MATMUL_ROW_BLOCK:
        bounds = [*range(0, m, MATMUL_ROW_BLOCK), m]
        out = np.empty((m, n), np.result_type(lhs, rhs))

        def row_block(a: int, b: int) -> None:
            np.matmul(rows[a:b], matrix, out=out[a:b])

        _threads.parallel_chunks(bounds, row_block)
    elif work < 2 * _threads.BLOCK_WORK:
        out = _matmul_2d(rows, matrix, swap)
    else:
        out = np.empty((m, n), np.result_type(lhs, rhs))

        def column_block(a: int, b: int) -> None:
            if swap:
                out[:, a:b] = np.matmul(matrix[:, a:b].T, rows.T).T
            else:
                np.matmul(rows, matrix[:, a:b], out=out[:, a:b])

        _threads.parallel_chunks(_threads.fixed_bounds(n, work, _COLUMN_QUANTUM), column_block)
    return out if shape is None else out.reshape(shape)


def _matmul_2d(rows: np.ndarray, matrix: np.ndarray, swap: bool) -> np.ndarray:
    if swap:
        return np.ascontiguousarray(np.matmul(matrix.T, rows.T).T)
    return np.matmul(rows, matrix)


def stacked_matmul(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """``np.matmul(lhs, rhs)`` of two stacks of matrices: blocks of whole matrices when both
    have the same batch shape and the product is large, numpy's own call otherwise."""
    if (lhs.ndim < 3 or lhs.ndim != rhs.ndim or lhs.shape[:-2] != rhs.shape[:-2]
            or lhs.shape[-1] != rhs.shape[-2]):
        return np.matmul(lhs, rhs)
    batch, (m, k), n = lhs.shape[:-2], lhs.shape[-2:], rhs.shape[-1]
    count = math.prod(batch)
    work = count * max(m, _STREAMING_ROWS) * k * n
    if count < 2 or work < 2 * _threads.BLOCK_WORK:
        return np.matmul(lhs, rhs)
    left, right = lhs.reshape(count, m, k), rhs.reshape(count, k, n)
    out = np.empty((count, m, n), np.result_type(lhs, rhs))

    def block(a: int, b: int) -> None:
        np.matmul(left[a:b], right[a:b], out=out[a:b])

    _threads.parallel_chunks(_threads.fixed_bounds(count, work), block)
    return out.reshape(*batch, m, n)
