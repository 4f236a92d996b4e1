"""core.products: the batch products in each backend's fastest form give the plain products'
values, in row-major order, on every shape and layout they meet."""

import numpy as np
import pytest
import tensorly as tl
from hypothesis import given
from hypothesis import strategies as st

from tensorstream.core.backend import contiguous, to_numpy
from tensorstream.core.products import narrow_dot, row_sq_norms

#: (rows, shared, columns): both branches of narrow_dot (short sides and a tensor's last mode
#: keep the plain product; long shared dimensions are transposed)
SHAPES = [(1024, 64, 16), (200, 625, 25), (64, 1024, 16), (5, 1000, 10), (30720, 30, 5),
          (4096, 40, 3), (33, 32, 1)]


def _is_row_major(T):
    return bool(T.flags["C_CONTIGUOUS"]) if isinstance(T, np.ndarray) else T.is_contiguous()


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("transposed", [False, True], ids=["X", "X^T"])
def test_narrow_dot_is_the_product_in_row_major_order(backend, shape, transposed):
    rows, shared, columns = shape
    rng = np.random.default_rng(rows + shared)
    A = rng.standard_normal((shared, rows)).T if transposed else rng.standard_normal(shape[:2])
    B = rng.standard_normal((shared, columns))
    At, Bt = tl.tensor(A), tl.tensor(B)
    if transposed:  # the statistic's X^T: a transposed view, as outer_statistic passes it
        At = tl.transpose(tl.tensor(np.ascontiguousarray(A.T)))
    result = narrow_dot(At, Bt)
    assert tuple(result.shape) == (rows, columns) and _is_row_major(result)
    # equal to rounding only: whether a layout's kernel sums in the same order depends on the
    # BLAS build and the processor (OpenBLAS's Haswell kernels on one machine gave the same bits
    # for (200, 625, 25), on another not), so no bitwise claim is machine-independent
    np.testing.assert_allclose(to_numpy(result), A @ B, rtol=1e-12, atol=1e-12 * shared)


@given(st.integers(1, 80), st.integers(1, 80), st.integers(1, 6), st.booleans())
def test_narrow_dot_equals_dot_on_any_shape(rows, shared, columns, transposed):
    rng = np.random.default_rng(rows * 1000 + shared)
    A = rng.standard_normal((shared, rows)).T if transposed else rng.standard_normal(
        (rows, shared))
    B = rng.standard_normal((shared, columns))
    result = narrow_dot(A, B)
    assert result.flags["C_CONTIGUOUS"]
    np.testing.assert_allclose(result, A @ B, rtol=1e-12, atol=1e-12 * shared)


def test_contiguous_copies_only_what_is_not_row_major():
    A = np.ones((3, 4))
    assert contiguous(A) is A
    F = np.asfortranarray(A)
    assert contiguous(F).flags["C_CONTIGUOUS"] and np.array_equal(contiguous(F), A)


@pytest.mark.parametrize("shape", [(1, 1), (7, 3), (1024, 64), (3, 1000)])
def test_row_sq_norms_are_the_rows_sums_of_squares(backend, shape):
    X = np.random.default_rng(shape[0]).standard_normal(shape)
    result = to_numpy(row_sq_norms(tl.tensor(X)))
    assert result.shape == (shape[0],)
    np.testing.assert_allclose(result, np.sum(X * X, axis=1), rtol=1e-13)


def test_row_sq_norms_of_zero_rows_and_a_transposed_view(backend):
    X = np.zeros((4, 5))
    X[1] = 3.0
    np.testing.assert_allclose(to_numpy(row_sq_norms(tl.tensor(X))), [0, 45, 0, 0], rtol=1e-15)
    Y = np.random.default_rng(1).standard_normal((6, 9))
    view = tl.transpose(tl.tensor(Y))  # (9, 6), not row-major
    np.testing.assert_allclose(to_numpy(row_sq_norms(view)), np.sum(Y * Y, axis=0),
                               rtol=1e-13)


@pytest.mark.parametrize("shape", [(40,), (2, 40, 40), (40, 40, 3)])
def test_narrow_dot_of_what_is_not_a_matrix_is_tl_dot(backend, shape):
    """A single sample (1-D) or a 3-D batch reaches ``narrow_dot`` through the coders'
    adjoint; it must get ``tl.dot``'s result, not an unpacking error."""
    rng = np.random.default_rng(len(shape))
    A, B = rng.standard_normal(shape), rng.standard_normal((shape[-1], 3))
    result = narrow_dot(tl.tensor(A), tl.tensor(B))
    np.testing.assert_allclose(to_numpy(result), to_numpy(tl.dot(tl.tensor(A), tl.tensor(B))),
                               rtol=1e-12)
