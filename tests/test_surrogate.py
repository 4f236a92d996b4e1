"""Spec 004, section 5.1: sufficient statistics (A3), block form (A4), gradient (A5) and
weights (A6)."""

import importlib.util

import numpy as np
import pytest
import tensorly as tl

from tensorstream import schedules
from tensorstream.coders.lasso import sample_losses
from tensorstream.core import dictionary as cpd
from tensorstream.steps.surrogate import block_statistics, surrogate_value

SHAPE, R, B_SIZE = (4, 5, 3), 3, 6


def _loss(X, loadings, H, alpha):
    """Mean per-sample loss computed from the dense reconstruction (the definition)."""
    residual = X - cpd.reconstruct(loadings, H)
    per_sample = np.sum(residual.reshape(len(X), -1) ** 2, axis=1) + alpha * np.abs(H).sum(1)
    return per_sample.mean()


def _accumulate(batches, codes, schedule, alpha):
    A, B, c = np.zeros((R, R)), np.zeros((*SHAPE, R)), 0.0
    for t, (X, H) in enumerate(zip(batches, codes), 1):
        w, b = schedule(t), len(X)
        A = (1 - w) * A + w * H.T @ H / b
        B = (1 - w) * B + w * cpd.outer_statistic(X, H) / b
        c = (1 - w) * c + w * (np.sum(X**2) / b + alpha * np.abs(H).sum() / b)
    return A, B, c


@pytest.mark.parametrize("schedule", [schedules.Balanced(), lambda t: min(1.0, 0.9 * t**-0.75)])
def test_statistics_reproduce_weighted_past_losses(schedule, rng):
    # spec item(s): spec 004 A3
    alpha = 0.3
    batches = [rng.random((B_SIZE, *SHAPE)) for _ in range(7)]
    codes = [rng.random((B_SIZE, R)) for _ in range(7)]
    A, B, c = _accumulate(batches, codes, schedule, alpha)
    T = len(batches)
    w = [schedule(t) for t in range(1, T + 1)]
    effective = [w[k] * np.prod([1 - w[i] for i in range(k + 1, T)]) for k in range(T)]
    for _ in range(5):
        loadings = [rng.random((size, R)) for size in SHAPE]
        expected = sum(e * _loss(X, loadings, H, alpha)
                       for e, X, H in zip(effective, batches, codes))
        np.testing.assert_allclose(surrogate_value(A, B, c, loadings), expected, rtol=1e-10)


def test_block_form_differs_by_a_constant(rng):
    # spec item(s): spec 004 A4
    A = rng.random((R, R))
    A = A @ A.T
    B = rng.random((*SHAPE, R))
    loadings = [rng.random((size, R)) for size in SHAPE]
    for mode in range(3):
        A_i, B_i = block_statistics(A, B, loadings, mode)
        gaps = []
        for _ in range(5):
            U = rng.random((SHAPE[mode], R))
            trial = list(loadings)
            trial[mode] = U
            block = np.trace(U @ A_i @ U.T) - 2 * np.trace(U @ B_i.T)
            gaps.append(surrogate_value(A, B, 0.0, trial) - block)
        np.testing.assert_allclose(gaps, gaps[0], rtol=1e-10, atol=1e-10)


def test_block_gradient_matches_finite_differences(rng):
    # spec item(s): spec 004 A5
    A = rng.random((R, R))
    A = A @ A.T
    B = rng.random((*SHAPE, R))
    loadings = [rng.random((size, R)) for size in SHAPE]
    mode, eps = 1, 1e-6
    A_i, B_i = block_statistics(A, B, loadings, mode)
    gradient = 2 * (loadings[mode] @ A_i - B_i)
    numeric = np.zeros_like(gradient)
    for idx in np.ndindex(*gradient.shape):
        plus, minus = [list(loadings) for _ in range(2)]
        plus[mode], minus[mode] = loadings[mode].copy(), loadings[mode].copy()
        plus[mode][idx] += eps
        minus[mode][idx] -= eps
        difference = surrogate_value(A, B, 0, plus) - surrogate_value(A, B, 0, minus)
        numeric[idx] = difference / (2 * eps)
    np.testing.assert_allclose(gradient, numeric, rtol=1e-6, atol=1e-6)


@pytest.mark.skipif(not importlib.util.find_spec("torch"), reason="needs torch")
def test_block_gradient_matches_autograd(rng):
    # spec item(s): spec 004 A5
    import torch

    from tensorstream.core.backend import using

    with using("pytorch"):
        A = torch.tensor(rng.random((R, R)))
        A = A @ A.T
        B = torch.tensor(rng.random((*SHAPE, R)))
        loadings = [torch.tensor(rng.random((size, R))) for size in SHAPE]
        U = loadings[2].clone().requires_grad_(True)
        trial = [loadings[0], loadings[1], U]
        value = tl.sum(A * cpd.gram(trial)) - 2 * cpd.inner_with_dictionary(B, trial)
        value.backward()
        A_i, B_i = block_statistics(A, B, loadings, 2)
        np.testing.assert_allclose(U.grad.numpy(), (2 * (loadings[2] @ A_i - B_i)).numpy(),
                                   rtol=1e-10)


@pytest.mark.parametrize("schedule", [schedules.Balanced(), schedules.Power(0.75),
                                      schedules.PowerLog(0.8, 1.0), schedules.Forgetting(0.1),
                                      schedules.make_weights(0.9)])
def test_effective_weights_sum_to_one(schedule):
    # spec item(s): spec 004 A6
    assert schedule(1) == 1.0
    total = 0.0
    for t in range(1, 1001):
        w = schedule(t)
        assert 0 < w <= 1
        total = (1 - w) * total + w  # sum_k w_k^t, updated recursively
        assert abs(total - 1) < 1e-12


def test_powerlog_satisfies_the_theory_for_beta_below_one():
    schedule = schedules.PowerLog(0.8, 1.0)
    w = np.array([schedule(t) for t in range(1, 20001)])
    assert np.all(np.diff(w) <= 0)
    # w_{t+1}^-1 - w_t^-1 decreases to 0, slowly (like t^-0.2 log t): below 1 from t ~ 1e6
    gaps = [1 / schedule(t + 1) - 1 / schedule(t) for t in (10**3, 10**6, 10**9, 10**12)]
    assert np.all(np.diff(gaps) < 0) and gaps[-1] < 0.2 and gaps[1] < 1


def test_sample_losses_match_dense_definition(rng):
    loadings = [rng.random((size, R)) for size in SHAPE]
    X, H = rng.random((B_SIZE, *SHAPE)), rng.random((B_SIZE, R))
    G, P = cpd.gram(loadings), cpd.project(X, loadings)
    sq = np.sum(X.reshape(B_SIZE, -1) ** 2, axis=1)
    losses = sample_losses(sq, G, P, H, alpha=0.2, ridge=0.1)
    dense = np.sum((X - cpd.reconstruct(loadings, H)).reshape(B_SIZE, -1) ** 2, axis=1)
    np.testing.assert_allclose(losses, dense + 0.2 * H.sum(1) + 0.1 * (H**2).sum(1), rtol=1e-10)


@pytest.mark.parametrize("bad", [0.0, 1.5, -0.1])
def test_schedule_parameters_are_validated(bad):
    with pytest.raises(ValueError, match="rate"):
        schedules.Forgetting(bad)
    with pytest.raises(ValueError, match="beta"):
        schedules.Power(bad if bad != 0.0 else 2.0)


# -- the accelerated dictionary step (dict_step="fista", issue 14 goal 3) ------------------------


def _block_problem(rng, size=7, rank=4):
    """A block problem ``(U, A_i, B_i)`` of a loading, ``A_i`` of rank-one-heavy codes."""
    H = rng.random((40, rank)) + np.eye(40, rank)
    A = H.T @ H / 40
    return rng.random((size, rank)), A, rng.random((size, rank)) - 0.3


def _block_objective(U, A, B, l1=0.0, l2=0.0):
    return 0.5 * np.sum((U @ A) * U) - np.sum(B * U) + l1 * np.abs(U).sum() + 0.5 * l2 * np.sum(
        U * U)


@pytest.mark.parametrize("nonnegative, bound, l1, l2", [
    (True, 1.0, 0.0, 0.0), (True, 0.5, 0.05, 0.1), (False, 0.8, 0.0, 0.0), (False, None, 0.1, 0.0),
])
def test_accelerated_descent_reaches_the_block_minimiser(nonnegative, bound, l1, l2, backend):
    """Run long, the accelerated step lands where many exact column passes do (the block problem
    is strongly convex here, so both reach its one minimiser)."""
    from tensorstream.steps.surrogate import accelerated_descent, column_descent

    U, A, B = _block_problem(np.random.default_rng(1))
    U = np.clip(U, 0, None) / np.linalg.norm(U, axis=0)
    options = dict(nonnegative=nonnegative, column_bound=bound, l1=l1, l2=l2)
    U, A, B = (tl.tensor(V) for V in (U, A, B))
    exact = column_descent(U, A, B, n_passes=2000, **options)
    fast = accelerated_descent(U, A, B, max_iter=3000, tol=1e-13, **options)
    np.testing.assert_allclose(tl.to_numpy(fast), tl.to_numpy(exact), atol=1e-7)


def test_accelerated_descent_never_raises_the_block_value(rng):
    """Forward monotonicity (the convergence proof's Lemma 4.2 i) after any number of
    iterations: accelerated iterates are not monotone, the step's result is."""
    from tensorstream.steps.surrogate import accelerated_descent

    for trial in range(20):
        U, A, B = _block_problem(np.random.default_rng(trial), rank=6)
        U = np.clip(U, 0, None) / np.linalg.norm(U, axis=0)
        start = _block_objective(U, A, B)
        for n_iter in (1, 2, 5):
            new = accelerated_descent(U, A, B, nonnegative=True, column_bound=1.0,
                                      max_iter=n_iter, tol=0.0)
            assert _block_objective(new, A, B) <= start + 1e-12
            assert np.all(new >= 0) and np.all(np.linalg.norm(new, axis=0) <= 1 + 1e-12)


def test_accelerated_descent_leaves_an_unused_dictionary_alone():
    from tensorstream.steps.surrogate import accelerated_descent

    U = np.full((3, 2), 0.5)
    new = accelerated_descent(U, np.zeros((2, 2)), np.zeros((3, 2)), nonnegative=True,
                              column_bound=1.0)
    np.testing.assert_array_equal(new, U)


def test_ocpdl_fista_step_matches_across_backends_and_learns():
    """``OnlineCPDL(dict_step="fista")``: numpy and torch give the same loadings (1e-8), and it
    learns the planted tensor (error 0.035 here; the column sweep's 0.013, a random
    dictionary's after one step above 0.1)."""
    pytest.importorskip("torch")
    import torch

    from tensorstream import OnlineCPDL

    rng = np.random.default_rng(0)
    factors = [rng.random((300, 3)), rng.random((8, 3)), rng.random((6, 3))]
    X = np.einsum("sr,ir,jr->sij", *factors)
    errors, loadings = {}, {}
    for n_steps in (None, 1):
        model = OnlineCPDL(3, dict_step="fista", max_iter=3, random_state=0).fit(
            X, n_steps=n_steps)
        errors[n_steps] = np.linalg.norm(X - model.reconstruct(X)) / np.linalg.norm(X)
        loadings[n_steps] = model.loadings_
    torch_model = OnlineCPDL(3, dict_step="fista", max_iter=3, random_state=0).fit(
        torch.tensor(X))
    for U, V in zip(loadings[None], torch_model.loadings_):
        np.testing.assert_allclose(U, V.numpy(), atol=1e-8)
    assert errors[None] < 0.05 < 0.1 < errors[1], errors


@pytest.mark.parametrize("params, message", [
    (dict(dict_step="mu"), "dict_step must be one of"),
    (dict(dict_step="newton"), "dict_step"),
    (dict(dict_tol=-1.0), "dict_tol"),
    (dict(dict_step="fista", dict_passes=0), "dict_passes"),
])
def test_ocpdl_dict_step_parameters_are_checked(params, message):
    from tensorstream import OnlineCPDL

    model = OnlineCPDL(2, **params)
    with pytest.raises(ValueError, match=message):
        model.fit(np.ones((4, 3, 2)))
    assert not hasattr(model, "loadings_")


def test_surrogate_bcd_step_rejects_an_unknown_method():
    from tensorstream.steps.surrogate import surrogate_bcd_step

    loadings = [np.ones((3, 2)), np.ones((4, 2))]
    with pytest.raises(ValueError, match="method must be 'columns' or 'fista'"):
        surrogate_bcd_step(loadings, np.eye(2), np.ones((3, 4, 2)), nonnegative=True,
                           column_bound=None, method="newton")


def _planted_cp(n=200):
    rng = np.random.default_rng(0)
    factors = [rng.random((n, 3)), rng.random((6, 3)), rng.random((5, 3))]
    return np.einsum("sr,ir,jr->sij", *factors) + 0.05 * rng.random((n, 6, 5))


def _cp_loadings(X, **params):
    from tensorstream import OnlineCPDL

    model = OnlineCPDL(3, batch_size=20, max_iter=1, random_state=0, **params).fit(X)
    return np.concatenate([np.ravel(U) for U in model.loadings_])


@pytest.mark.parametrize("dict_step, defaults, moved", [
    # None is each step's own default: one column pass, no stop; 20 FISTA iterations, 1e-3
    ("columns", dict(dict_passes=1, dict_tol=0.0), [dict(dict_passes=3),
                                                    dict(dict_passes=20, dict_tol=0.3)]),
    ("fista", dict(dict_passes=20, dict_tol=1e-3), [dict(dict_passes=3), dict(dict_tol=0.0)]),
])
def test_ocpdl_dict_passes_and_dict_tol_mean_the_same_for_both_dict_steps(dict_step, defaults,
                                                                          moved):
    """``dict_passes`` (passes or iterations per mode) and ``dict_tol`` (a relative-move stop)
    move the loadings of both dictionary steps; None is the step's own default."""
    X = _planted_cp()
    base = _cp_loadings(X, dict_step=dict_step)
    np.testing.assert_array_equal(_cp_loadings(X, dict_step=dict_step, **defaults), base)
    for params in moved:
        assert np.abs(_cp_loadings(X, dict_step=dict_step, **params) - base).max() > 1e-3, params
    if dict_step == "columns":  # the stop itself moves them: 20 passes with it and without
        stopped = _cp_loadings(X, dict_step="columns", dict_passes=20, dict_tol=0.3)
        unstopped = _cp_loadings(X, dict_step="columns", dict_passes=20, dict_tol=0.0)
        assert np.abs(stopped - unstopped).max() > 1e-3


def test_column_passes_stop_at_the_relative_move():
    """With ``tol`` the column passes stop after the first pass that moves the loading by
    less than ``tol`` times its norm: a loose tol runs one pass, tol=0 all of them."""
    from tensorstream.steps.surrogate import column_descent, surrogate_bcd_step

    rng = np.random.default_rng(3)
    loadings = [rng.random((6, 4))]
    H = rng.random((30, 4))
    A, B = H.T @ H / 30, rng.random((6, 4))
    options = dict(nonnegative=True, column_bound=1.0)
    one = column_descent(loadings[0], A, B, n_passes=1, **options)
    ten = column_descent(loadings[0], A, B, n_passes=10, **options)
    assert np.abs(one - ten).max() > 1e-6
    loose = surrogate_bcd_step(loadings, A, B, n_passes=10, tol=10.0, **options)[0]
    full = surrogate_bcd_step(loadings, A, B, n_passes=10, tol=0.0, **options)[0]
    np.testing.assert_allclose(loose, one, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(full, ten, rtol=1e-12, atol=1e-14)
