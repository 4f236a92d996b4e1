"""The coding step: optimality (B6 KKT), the l1 threshold (C3), agreement with references."""

import numpy as np
import pytest
import tensorly as tl
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import nnls

from tensorstream.coders.lasso import sparse_code


def _problem(rng, d=30, R=5, b=8):
    W, X = rng.random((d, R)), rng.random((b, d))
    return W, X, tl.tensor(W.T @ W), tl.tensor(X @ W)


def _kkt_violation(W, X, H, alpha):
    """Largest violation of the nonnegative-LASSO optimality conditions (eq. (9) convention)."""
    G = 2 * (H @ W.T - X) @ W + alpha
    active = H > 0
    return max(np.abs(G[active]).max(initial=0.0), (-G[~active]).max(initial=0.0))


@pytest.mark.parametrize("alpha", [0.0, 0.5, 3.0])
def test_b6_codes_satisfy_kkt(backend, rng, alpha):
    W, X, G, P = _problem(rng)
    H, _ = sparse_code(G, P, alpha=alpha, tol=1e-12, max_iter=20000)
    H = tl.to_numpy(H)
    assert H.min() >= 0
    scale = np.abs(2 * X @ W).max()
    assert _kkt_violation(W, X, H, alpha) <= 1e-6 * scale


def test_nonnegative_least_squares_matches_scipy(rng):
    W, X, G, P = _problem(rng)
    H, _ = sparse_code(G, P, tol=1e-12, max_iter=20000)
    expected = np.array([nnls(W, x)[0] for x in X])
    np.testing.assert_allclose(H, expected, atol=1e-7)


def test_signed_lasso_matches_scikit_learn(rng):
    from sklearn.linear_model import Lasso

    W, X = rng.standard_normal((40, 6)), rng.standard_normal((5, 40))
    alpha = 2.0
    H, _ = sparse_code(W.T @ W, X @ W, alpha=alpha, nonnegative=False, tol=1e-12, max_iter=5000)
    # sklearn's Lasso minimises ||x - W h||^2 / (2 d) + a ||h||_1, i.e. alpha = 2 d a
    lasso = Lasso(alpha=alpha / (2 * 40), fit_intercept=False, tol=1e-12, max_iter=100000)
    expected = np.array([lasso.fit(W, x).coef_ for x in X])
    np.testing.assert_allclose(H, expected, atol=1e-6)
    assert (H < 0).any()


def test_ridge_codes_solve_the_regularised_normal_equations(rng):
    W, X = rng.standard_normal((40, 6)), rng.standard_normal((5, 40))
    H, _ = sparse_code(W.T @ W, X @ W, ridge=0.7, nonnegative=False, tol=1e-13, max_iter=5000)
    expected = np.linalg.solve(W.T @ W + 0.7 * np.eye(6), W.T @ X.T).T
    np.testing.assert_allclose(H, expected, atol=1e-8)


def test_c3_l1_threshold_zeroes_the_codes_exactly(rng):
    W, X, G, P = _problem(rng)
    threshold = float(np.max(2 * X @ W))
    H, _ = sparse_code(G, P, alpha=threshold)
    assert np.all(tl.to_numpy(H) == 0)
    H, _ = sparse_code(G, P, alpha=0.99 * threshold)
    assert np.any(tl.to_numpy(H) > 0)


def test_dead_atom_gets_zero_code_without_nan(rng):
    W, X = rng.random((20, 4)), rng.random((3, 20))
    W[:, 2] = 0
    H, _ = sparse_code(W.T @ W, X @ W, tol=1e-10, max_iter=2000)
    assert np.all(np.isfinite(H)) and np.all(H[:, 2] == 0)


def test_warm_start_at_the_solution_stops_at_once(rng):
    W, X, G, P = _problem(rng)
    H, _ = sparse_code(G, P, tol=1e-12, max_iter=20000)
    _, sweeps = sparse_code(G, P, init=H, tol=1e-6)
    assert sweeps == 1


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**16), alpha=st.floats(0, 5), R=st.integers(1, 6))
def test_codes_never_worse_than_zero_and_feasible(seed, alpha, R):
    """Coordinate descent from 0 only lowers the objective, so it beats the zero code."""
    rng = np.random.default_rng(seed)
    W, X = rng.random((15, R)), rng.random((4, 15))
    H, _ = sparse_code(W.T @ W, X @ W, alpha=alpha, max_iter=50)
    objective = np.sum((X - H @ W.T) ** 2, axis=1) + alpha * H.sum(1)
    assert np.all(H >= 0)
    assert np.all(objective <= np.sum(X**2, axis=1) + 1e-9)


def test_a_sample_is_coded_the_same_in_any_batch():
    """Per-sample stopping: a code does not depend on the other samples of its batch (which
    makes a batch coded in shards on a cluster equal the batch coded at once)."""
    import numpy as np

    from tensorstream.coders.lasso import sparse_code

    rng = np.random.default_rng(0)
    W = rng.random((30, 6))
    X = rng.random((40, 30))
    X[::7] *= 50  # samples of very different sizes converge at different sweeps
    G, P = W.T @ W, X @ W
    whole, _ = sparse_code(G, P, alpha=0.1, tol=1e-4)
    order = rng.permutation(40)
    shuffled, _ = sparse_code(G, P[order], alpha=0.1, tol=1e-4)
    # to rounding: BLAS blocks products of different batch sizes differently
    np.testing.assert_allclose(shuffled, whole[order], rtol=0, atol=1e-13)
    for part in (slice(0, 13), slice(13, 40), slice(5, 6)):
        alone, _ = sparse_code(G, P[part], alpha=0.1, tol=1e-4)
        np.testing.assert_allclose(alone, whole[part], rtol=0, atol=1e-13)
