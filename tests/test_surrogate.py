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
