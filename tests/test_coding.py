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
def test_codes_satisfy_the_kkt_conditions(backend, rng, alpha):
    # spec item(s): spec 004 B6
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


def test_the_l1_threshold_zeroes_the_codes_exactly(rng):
    # spec item(s): spec 004 C3
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


def _nnls_reference(G, q):
    """Exact ``argmin_{h >= 0} h^T G h - 2 q^T h`` by scipy's NNLS on a square root of ``G``
    (eigenvalues floored: the reference must also handle collinear atoms)."""
    values, vectors = np.linalg.eigh(G)
    values = np.clip(values, 1e-14 * values.max(), None)
    return nnls(np.sqrt(values)[:, None] * vectors.T, (vectors.T @ q) / np.sqrt(values),
                maxiter=10000)[0]


def _objective(G, q, h):
    return h @ G @ h - 2 * q @ h


@pytest.mark.parametrize("case", ["correlated", "collinear", "dead", "sparse"])
def test_exact_on_hard_dictionaries(rng, case):
    """Strongly correlated, (near) collinear and dead atoms, large l1: the codes reach the
    minimum (scipy NNLS on the same quadratic) to rounding."""
    R, alpha, ridge = 12, 0.2, 0.0
    W = rng.random((40, R))
    if case == "correlated":
        W[:, :6] += 4.0
    elif case == "collinear":
        W[:, 1] = W[:, 0] * (1 + 1e-10)
        ridge = 1e-3
    elif case == "dead":
        W[:, [2, 7]] = 0
    else:
        alpha = 20.0
    X = rng.random((25, 40)) * rng.exponential(1.0, (25, 1))
    G, P = W.T @ W, X @ W
    H, _ = sparse_code(G, P, alpha=alpha, ridge=ridge, tol=1e-12)
    regularised = G + ridge * np.eye(R)
    for h, p in zip(H, P):
        best = _nnls_reference(regularised, p - alpha / 2)
        optimum = _objective(regularised, p - alpha / 2, best)
        assert _objective(regularised, p - alpha / 2, h) <= optimum + 1e-11 * abs(optimum)
    assert H.min() >= 0 and np.all(np.isfinite(H))
    if case == "dead":
        assert np.all(H[:, [2, 7]] == 0)


def test_per_sample_grams_match_scipy(rng):
    """Missing entries: sample j solves against its own Gram ``W^T diag(m_j) W``."""
    W, X = rng.random((30, 7)), rng.random((10, 30))
    M = (rng.random((10, 30)) < 0.5).astype(float)
    M[0, :] = 0  # a sample with nothing observed gets the zero code
    G = np.einsum("dr,sd,dq->srq", W, M, W)
    H, _ = sparse_code(G, (M * X) @ W, alpha=0.1, tol=1e-12)
    assert np.all(H[0] == 0)
    for j in range(1, 10):
        observed = M[j] > 0
        best = _nnls_reference(G[j], X[j, observed] @ W[observed] - 0.05)
        np.testing.assert_allclose(H[j], best, atol=1e-9)


def test_rounds_exhausted_still_feasible(rng):
    W, X, G, P = _problem(rng, R=10)
    H, rounds = sparse_code(G, P, alpha=0.5, max_iter=1)
    assert rounds == 1 and np.all(H >= 0)
    signed, _ = sparse_code(G, P - 5.0, alpha=0.5, nonnegative=False, max_iter=1)
    assert np.all(np.isfinite(signed))


def test_numpy_and_torch_agree(rng):
    torch = pytest.importorskip("torch")
    W, X = rng.random((30, 9)), rng.random((64, 30))
    W[:, :4] += 2.0
    G, P = W.T @ W, X @ W
    expected, _ = sparse_code(G, P, alpha=0.3, tol=1e-10)
    tl.set_backend("pytorch")
    try:
        got, _ = sparse_code(torch.tensor(G), torch.tensor(P), alpha=0.3, tol=1e-10)
    finally:
        tl.set_backend("numpy")
    np.testing.assert_allclose(got.numpy(), expected, atol=1e-10)


def _count_calls(function):
    """Python and C function calls made by ``function()`` (a deterministic cost measure)."""
    import sys

    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        count += event in ("call", "c_call")

    sys.setprofile(tracer)
    try:
        result = function()
    finally:
        sys.setprofile(None)
    return count, result


def _calls_and_rounds():
    for R, b in ((3, 8), (40, 8), (3, 1024), (40, 1024)):
        rng = np.random.default_rng(R + b)
        W, X = rng.random((60, R)), rng.random((b, 60))
        W[:, : R // 2] += 2.0  # correlated atoms: several rounds
        G, P = W.T @ W, X @ W
        calls, (_, rounds) = _count_calls(lambda G=G, P=P: sparse_code(G, P, alpha=0.5))
        yield calls, rounds


def test_calls_per_round_do_not_grow_with_rank_or_batch(monkeypatch):
    """Issue 14, goal 3: the Python work of a pivoting round (the tl.* rounds) is the same for
    any rank and batch (the rank and the batch only enter the batched backend calls)."""
    monkeypatch.setenv("TENSORSTREAM_JIT", "0")
    per_round = [calls / rounds for calls, rounds in _calls_and_rounds()]
    assert max(per_round) <= 1.25 * min(per_round), per_round


def test_compiled_pivoting_makes_the_same_calls_whatever_the_rank_batch_and_rounds(
        monkeypatch):
    """With numba the rounds run in one kernel call: a fixed number of calls in all."""
    pytest.importorskip("numba")
    monkeypatch.setenv("TENSORSTREAM_JIT", "1")
    list(_calls_and_rounds())  # numba's import and the kernel's compile or load, once a process
    measured = list(_calls_and_rounds())
    assert len({rounds for _, rounds in measured}) > 1  # rounds differ, the calls do not
    calls = [count for count, _ in measured]
    assert max(calls) - min(calls) <= 5, measured
