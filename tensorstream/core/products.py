"""Products on a batch of samples, in the form each backend computes fastest.

The same product can cost twice as much in one memory layout or formulation as in another, and
which is faster differs between numpy (OpenBLAS) and torch (MKL). The hot paths call these
functions so that the choice is made, measured and documented in one place. Timings: one
thread, float64, this project's 2-core benchmark machine.
"""

from __future__ import annotations

from typing import Any

import tensorly as tl

from .backend import backend_of, contiguous

Tensor = Any


def narrow_dot(A: Tensor, B: Tensor) -> Tensor:
    """``A @ B`` for a ``B`` with few columns (data times a dictionary, data times codes), in
    row-major order. The values equal the plain product's to rounding (to the bit where the BLAS
    kernels of both layouts sum in the same order, which depends on the build and processor).

    The product is computed as ``(B^T A^T)^T``, short side first, which both numpy's OpenBLAS
    and torch's MKL run faster (one thread, float64, 1024 x 1000 data, 20 columns: ``X W``
    numpy 1.14 -> 1.08 ms, torch 2.40 -> 1.05 ms; ``X^T H`` numpy 1.44 -> 1.00 ms, torch 2.83 ->
    1.22 ms), except where ``A`` has under 128 rows or columns (the digits' 1024 x 64 data by
    64 x 16: 37 against 52 us with OpenBLAS's SkylakeX kernels, 50 against 64 with its Haswell
    ones; ``X^T H`` 44 against 41 and 52 against 66), or many more rows than columns
    (a tensor's last mode: 30720 x 30 by 30 x 5, numpy 0.6 against 2.0 ms), which keep the
    plain product, as does an ``A`` that is not a matrix (``tl.dot``'s result, as it is).
    """
    shape = tl.shape(A)
    if len(shape) != 2:  # a single sample, or a batch of tensors: tl.dot's meaning, unchanged
        return tl.dot(A, B)
    rows, shared = shape
    if min(rows, shared) < 128 or 64 * shared < rows:
        return tl.dot(A, B)
    return contiguous(tl.transpose(tl.dot(tl.transpose(B), tl.transpose(A))))


def row_sq_norms(X: Tensor) -> Tensor:
    """``||x_j||^2`` of every row of a ``(b, n)`` matrix, shape ``(b,)``, without a temporary of
    the matrix's size.

    numpy runs it as ``b`` row-by-row products (``matmul`` of ``(b, 1, n)`` by ``(b, n, 1)``),
    torch as a vector norm: on 1024 x 1000, numpy 0.10 ms against ``einsum``'s 0.40, torch 0.21
    against ``einsum``'s 1.19 (torch's batched product takes 1.18).
    """
    if backend_of(X) == "numpy":
        b, n = tl.shape(X)
        return tl.reshape(tl.matmul(tl.reshape(X, (b, 1, n)), tl.reshape(X, (b, n, 1))), (b,))
    return tl.norm(X, 2, axis=1) ** 2
