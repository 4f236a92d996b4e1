"""Robust NMF building blocks (spec 000, sections 5.1-5.2): proxes and projections (U1-U3),
gradients (U5), ADMM algebra (U6), the (h, r) solvers (S1-S3, S5, S6) and the W-step (S4).

The spec's numpy prototype (its Appendix A) is the oracle of the solvers' iterates.
"""

import numpy as np
import pytest
import scipy.optimize
import tensorly as tl
from tensorly.tenalg import khatri_rao

from tensorstream.coders.lasso import sparse_code
from tensorstream.coders.robust import (
    RobustPenalties,
    code_penalty,
    nonnegative_code_admm,
    outlier_step,
    project_outliers,
    robust_code,
    robust_code_admm,
    robust_code_pgd,
    robust_losses,
)
from tensorstream.core.backend import using
from tensorstream.core.constraints import (
    elastic_net_norm,
    project_columns,
    project_elastic_net_columns,
    project_simplex_columns,
    prox_l1_box,
)
from tensorstream.steps.surrogate import (
    column_descent,
    dictionary_admm,
    dictionary_pgd,
    surrogate_solver_step,
)

F, K = 60, 8



# -- the spec's reference implementation (Appendix A), columns are samples --------------------


def soft(x, lam):
    return np.sign(x) * np.maximum(np.abs(x) - lam, 0.0)


def proj_C(W):
    Wp = np.maximum(W, 0.0)
    return Wp / np.maximum(1.0, np.linalg.norm(Wp, axis=0))


def ell(V, W, H, R, lam):
    E = V - W @ H - R
    return 0.5 * np.sum(E * E) + lam * np.abs(R).sum()


def ftilde(W, A, B, c):
    return 0.5 * np.sum((W.T @ W) * A) - np.sum(W * B) + c


def hr_pgd(V, W, H, R, lam, M, kappa=0.7, eps=1e-3, maxit=50):
    eta = kappa / np.linalg.norm(W, 2) ** 2
    WtW, WtV = W.T @ W, W.T @ V
    prev = ell(V, W, H, R, lam)
    for _ in range(maxit):
        H = np.maximum(H - eta * (WtW @ H - WtV + W.T @ R), 0.0)
        R = np.clip(soft(V - W @ H, lam), -M, M)
        cur = ell(V, W, H, R, lam)
        if abs(cur - prev) / max(prev, 1e-300) < eps:
            break
        prev = cur
    return H, R


def hr_admm(V, W, H, R, lam, M, rho=1.0, eps=1e-3, maxit=50):
    U, Q = np.maximum(H, 0), np.clip(R, -M, M)
    Al, Be = np.zeros_like(H), np.zeros_like(R)
    G = np.linalg.inv(W.T @ W + rho * np.eye(W.shape[1]))
    prev = ell(V, W, U, Q, lam)
    for _ in range(maxit):
        H = G @ (W.T @ (V - R) + rho * U - Al)
        R = soft(rho * Q + V - Be - W @ H, lam) / (1 + rho)
        U, Q = np.maximum(H + Al / rho, 0), np.clip(R + Be / rho, -M, M)
        Al += rho * (H - U)
        Be += rho * (R - Q)
        cur = ell(V, W, U, Q, lam)
        if abs(cur - prev) / max(prev, 1e-300) < eps:
            break
        prev = cur
    return U, Q


def w_pgd(W, A, B, c, kappa=0.7, eps=1e-4, maxit=200):
    eta = kappa / np.linalg.norm(A, "fro")
    prev = ftilde(W, A, B, c)
    for _ in range(maxit):
        W = proj_C(W - eta * (W @ A - B))
        cur = ftilde(W, A, B, c)
        if abs(cur - prev) / max(abs(prev), 1e-300) < eps:
            break
        prev = cur
    return W


def w_admm(W, A, B, c, rho=1.0, eps=1e-4, maxit=200):
    Q, D = W.copy(), np.zeros_like(W)
    Ai = np.linalg.inv(A + rho * np.eye(A.shape[0]))
    prev = ftilde(Q, A, B, c)
    for _ in range(maxit):
        W = (B - D + rho * Q) @ Ai
        Q = proj_C(W + D / rho)
        D += rho * (W - Q)
        cur = ftilde(Q, A, B, c)
        if abs(cur - prev) / max(abs(prev), 1e-300) < eps:
            break
        prev = cur
    return Q


# -- fixtures -------------------------------------------------------------------------------------


def _ball(U):
    return project_columns(U, nonnegative=True, column_bound=1.0)


def _problem(seed=0, b=4, F=F, K=K, density=0.1):
    """A dictionary in C and samples W h + sparse outliers in [0, 1] (rows are samples)."""
    rng = np.random.default_rng(seed)
    W = proj_C(rng.random((F, K)))
    X = np.clip(rng.random((b, K)) @ W.T * 0.5
                + (rng.random((b, F)) < density) * rng.uniform(-1, 1, (b, F)), 0, 1)
    return rng, W, X


def _statistics(rng, F=F, K=K, n=30):
    H = rng.random((n, K))
    V = rng.random((n, F))
    return H.T @ H / n, V.T @ H / n, float(np.mean(np.sum(V * V, axis=1)))


def _reduced_reference(x, W, penalties):
    """A high-accuracy solution by L-BFGS-B on phi(h) = min_r (...), a smooth function of h >= 0."""
    def phi(h):
        fit = W @ h
        r = outlier_step((x - fit)[None], penalties)[0]
        residual = x - fit - r
        value = 0.5 * residual @ residual + penalties.outlier_alpha * np.abs(r).sum()
        value += 0.5 * penalties.ridge * h @ h + penalties.alpha * h.sum()
        return value, -W.T @ residual + penalties.ridge * h + penalties.alpha
    result = scipy.optimize.minimize(phi, np.zeros(W.shape[1]), jac=True, method="L-BFGS-B",
                                     bounds=[(0, None)] * W.shape[1],
                                     options={"ftol": 1e-15, "gtol": 1e-13, "maxiter": 20000})
    return result.x, result.fun


# -- U1-U3: proxes and projections --------------------------------------------------------------


@pytest.mark.parametrize("lam, M", [(0.1, 1.0), (0.5, 0.3), (0.05, None), (1.0, 2.0)])
def test_soft_box_is_the_one_dimensional_minimiser(rng, lam, M):
    # spec item(s): spec 000 U1
    x = rng.uniform(-3, 3, 200)
    r = prox_l1_box(x, lam, M)
    top = 4.0 if M is None else M
    grid = np.linspace(-top, top, 40001)
    values = 0.5 * (x[:, None] - grid[None]) ** 2 + lam * np.abs(grid[None])
    brute = grid[np.argmin(values, axis=1)]
    np.testing.assert_allclose(r, brute, atol=grid[1] - grid[0])
    # the three branches of eq. (17)
    small, middle = np.abs(x) < lam, (np.abs(x) >= lam) & (np.abs(x) <= lam + (M or np.inf))
    assert np.all(r[small] == 0)
    np.testing.assert_allclose(r[middle], x[middle] - np.sign(x[middle]) * lam)
    if M is not None:
        large = np.abs(x) > lam + M
        np.testing.assert_array_equal(r[large], np.sign(x[large]) * M)
    else:
        np.testing.assert_allclose(r, soft(x, lam))


def test_nonnegative_box_prox_and_outlier_step_are_the_minimisers(rng):
    # spec item(s): spec 000 U1
    x = rng.uniform(-2, 2, 300)
    r = prox_l1_box(x, 0.2, 1.0, nonnegative=True)
    grid = np.linspace(0, 1, 20001)
    brute = grid[np.argmin(0.5 * (x[:, None] - grid) ** 2 + 0.2 * grid, axis=1)]
    np.testing.assert_allclose(r, brute, atol=grid[1])
    # Tikhonov on r: argmin 1/2 (x - r)^2 + lam |r| + nu/2 r^2 on the box
    penalties = RobustPenalties(outlier_alpha=0.2, outlier_bound=0.5, outlier_l2=0.7)
    r = outlier_step(x[None], penalties)[0]
    grid = np.linspace(-0.5, 0.5, 20001)
    values = 0.5 * (x[:, None] - grid) ** 2 + 0.2 * np.abs(grid) + 0.35 * grid**2
    np.testing.assert_allclose(r, grid[np.argmin(values, axis=1)], atol=grid[1] - grid[0])
    assert np.all(outlier_step(x[None], RobustPenalties(outlier_alpha=np.inf)) == 0)


def _check_projection(project, Y, feasible, random_feasible, rng):
    P = project(Y)
    assert feasible(P)
    np.testing.assert_allclose(project(P), P, atol=1e-12)  # idempotent
    for _ in range(100):  # variational inequality <y - P(y), z - P(y)> <= 0 for z in the set
        Z = random_feasible(rng)
        assert np.max(np.sum((Y - P) * (Z - P), axis=0)) <= 1e-12


def test_unit_ball_projection_is_feasible_idempotent_and_optimal(rng):
    # spec item(s): spec 000 U2
    Y = rng.normal(size=(12, 9))
    Y[:, 0] = -np.abs(Y[:, 0])  # an all-negative column goes to zero
    Y[:, 1] = np.abs(Y[:, 1]) / (2 * np.linalg.norm(Y[:, 1]))  # already inside: unchanged
    P = _ball(Y)
    np.testing.assert_array_equal(P[:, 0], 0)
    np.testing.assert_allclose(P[:, 1], Y[:, 1])

    def feasible(P):
        return P.min() >= 0 and np.linalg.norm(P, axis=0).max() <= 1 + 1e-12

    def random_feasible(rng):
        Z = np.abs(rng.normal(size=Y.shape))
        return Z / np.maximum(1, np.linalg.norm(Z, axis=0)) * rng.random(Y.shape[1])

    _check_projection(_ball, Y, feasible, random_feasible, rng)


def test_simplex_projection_is_feasible_idempotent_and_optimal(rng):
    # spec item(s): spec 000 U3
    Y = rng.normal(size=(10, 7)) * 2

    def feasible(P):
        return P.min() >= 0 and np.allclose(P.sum(axis=0), 1, atol=1e-12)

    def random_feasible(rng):
        Z = rng.exponential(size=Y.shape) * (rng.random(Y.shape) < 0.6) + 1e-9
        return Z / Z.sum(axis=0)

    _check_projection(project_simplex_columns, Y, feasible, random_feasible, rng)
    np.testing.assert_allclose(project_simplex_columns(np.array([0.5, 2.0, -1.0])),
                               [0.0, 1.0, 0.0])


@pytest.mark.parametrize("gamma1, gamma2", [(0.5, 1.0), (0.0, 2.0), (1.0, 0.0), (0.3, 0.1)])
def test_elastic_net_ball_projection_is_optimal_and_matches_slsqp(rng, gamma1, gamma2):
    # spec item(s): spec 000 U3
    Y = rng.normal(size=(8, 30)) * 3
    Y[:, 0] = np.abs(Y[:, 0]) * 1e-3  # feasible already

    def project(U):
        return project_elastic_net_columns(U, gamma1, gamma2)

    def feasible(P):
        return P.min() >= 0 and elastic_net_norm(P, gamma1, gamma2).max() <= 1 + 1e-12

    def random_feasible(rng):
        Z = np.abs(rng.normal(size=Y.shape)) * (rng.random(Y.shape) < 0.7)
        return Z / np.maximum(1, elastic_net_norm(Z, gamma1, gamma2)) * rng.random(Y.shape[1])

    _check_projection(project, Y, feasible, random_feasible, rng)
    np.testing.assert_allclose(project(Y)[:, 0], Y[:, 0])
    if (gamma1, gamma2) == (0.0, 2.0):  # C3 with these gammas is C
        np.testing.assert_allclose(project(Y), _ball(Y), atol=1e-12)
    # against a generic constrained solver on a few columns
    for j in range(1, 4):
        y = Y[:, j]
        result = scipy.optimize.minimize(
            lambda w, y=y: 0.5 * np.sum((w - y) ** 2), np.zeros(8), method="SLSQP",
            bounds=[(0, None)] * 8, options={"ftol": 1e-14, "maxiter": 500},
            constraints=[{"type": "ineq", "fun": lambda w: 1 - gamma1 * w.sum()
                          - 0.5 * gamma2 * w @ w}])
        np.testing.assert_allclose(project(y), result.x, atol=1e-6)


def test_outlier_box_projections_clip_to_the_box(rng):
    # spec item(s): spec 000 U3
    R = rng.normal(size=(5, 7))
    box = project_outliers(R, RobustPenalties(outlier_alpha=1.0, outlier_bound=0.5))
    assert np.abs(box).max() <= 0.5 and np.all(box[np.abs(R) <= 0.5] == R[np.abs(R) <= 0.5])
    nonneg = project_outliers(R, RobustPenalties(outlier_alpha=1.0, outlier_bound=0.5,
                                                 nonnegative_outliers=True))
    np.testing.assert_array_equal(nonneg, np.clip(R, 0, 0.5))
    unbounded = RobustPenalties(outlier_alpha=1.0, outlier_bound=None)
    np.testing.assert_array_equal(project_outliers(R, unbounded), R)


# -- U5, U6: gradients and the ADMM algebra -----------------------------------------------------


def test_surrogate_and_code_gradients_match_finite_differences(rng):
    # spec item(s): spec 000 U5
    A, B, c = _statistics(rng)
    W = proj_C(rng.random((F, K)))
    step = 1e-6
    direction = rng.normal(size=W.shape)
    numeric = (ftilde(W + step * direction, A, B, c) - ftilde(W - step * direction, A, B, c)) \
        / (2 * step)
    np.testing.assert_allclose(numeric, np.sum((W @ A - B) * direction), rtol=1e-6)
    # grad_h of q(h) = 1/2 ||v - W h - r||^2 is W^T (W h + r - v)
    v, h, r = rng.random(F), rng.random(K), rng.normal(size=F) * 0.1

    def q(h):
        return 0.5 * np.sum((v - W @ h - r) ** 2)

    e = rng.normal(size=K)
    numeric = (q(h + step * e) - q(h - step * e)) / (2 * step)
    np.testing.assert_allclose(numeric, e @ (W.T @ (W @ h + r - v)), rtol=1e-6)


def test_one_code_admm_iteration_minimises_the_augmented_lagrangian(rng):
    # spec item(s): spec 000 U6
    _, W, X = _problem(seed=3, b=1)
    x, lam, rho, M = X[0], 0.05, 1.3, 1.0
    u0, q0 = rng.random(K), np.clip(rng.normal(size=F) * 0.1, -M, M)
    out = robust_code_admm(X, [W], RobustPenalties(outlier_alpha=lam, outlier_bound=M),
                           H0=u0[None], E0=q0[None],
                           rho=rho, tol=0, max_iter=1)
    # h-update: argmin 1/2 ||x - W h - r0||^2 + rho/2 ||h - u0||^2 (zero duals), r0 = q0
    def lagrangian_h(h):
        residual = x - W @ h - q0
        return 0.5 * residual @ residual + 0.5 * rho * np.sum((h - u0) ** 2), \
            -W.T @ residual + rho * (h - u0)
    h_star = scipy.optimize.minimize(lagrangian_h, u0, jac=True, method="BFGS",
                                     options={"gtol": 1e-12}).x
    np.testing.assert_allclose(out.codes[0], np.maximum(h_star, 0), atol=1e-8)
    # r-update: separable, argmin 1/2 (z - r)^2 + lam |r| + rho/2 (r - q0)^2, z = x - W h+
    z = x - W @ h_star
    r_star = np.array([scipy.optimize.minimize_scalar(
        lambda r, i=i: 0.5 * (z[i] - r) ** 2 + lam * abs(r) + 0.5 * rho * (r - q0[i]) ** 2,
        bounds=(-5, 5), method="bounded", options={"xatol": 1e-12}).x for i in range(F)])
    np.testing.assert_allclose(out.outliers[0], np.clip(r_star, -M, M), atol=1e-7)


def test_one_dictionary_admm_iteration_minimises_the_augmented_lagrangian(rng):
    # spec item(s): spec 000 U6
    A, B, c = _statistics(rng)
    Q0, rho = proj_C(rng.random((F, K))), 0.8
    W_one, _ = dictionary_admm(Q0, A, B, project=_ball, rho=rho, tol=0, max_iter=1)

    def lagrangian(w):
        W = w.reshape(F, K)
        value = 0.5 * np.sum((W.T @ W) * A) - np.sum(W * B) + 0.5 * rho * np.sum((W - Q0) ** 2)
        return value, (W @ A - B + rho * (W - Q0)).ravel()
    W_star = scipy.optimize.minimize(lagrangian, Q0.ravel(), jac=True, method="L-BFGS-B",
                                     options={"ftol": 1e-15, "gtol": 1e-12}).x.reshape(F, K)
    np.testing.assert_allclose(W_one, proj_C(W_star), atol=1e-7)


# -- the oracle: iterates equal the spec's prototype, batch = one by one ------------------------


@pytest.mark.parametrize("solver", ["pgd", "admm"])
def test_coding_equals_the_reference_implementation_sample_by_sample(rng, solver):
    _, W, X = _problem(seed=1, b=6)
    H0 = rng.random((6, K))
    penalties = RobustPenalties(outlier_alpha=1 / np.sqrt(F), outlier_bound=1.0)
    out = robust_code(X, [W], penalties, solver=solver, H0=H0, E0=np.zeros_like(X))
    reference = hr_pgd if solver == "pgd" else hr_admm
    for j in range(6):
        H, R = reference(X[j][:, None], W, H0[j][:, None], np.zeros((F, 1)),
                         penalties.outlier_alpha, 1.0)
        np.testing.assert_allclose(out.codes[j], H[:, 0], atol=1e-12)
        np.testing.assert_allclose(out.outliers[j], R[:, 0], atol=1e-12)
        alone = robust_code(X[j:j + 1], [W], penalties, solver=solver, H0=H0[j:j + 1],
                            E0=np.zeros((1, F)))
        np.testing.assert_allclose(out.codes[j], alone.codes[0], atol=1e-13)


@pytest.mark.parametrize("solver", ["pgd", "admm"])
def test_dictionary_steps_equal_the_reference_implementation(rng, solver):
    A, B, c = _statistics(rng)
    W0 = proj_C(rng.random((F, K)))
    if solver == "pgd":
        ours, _ = dictionary_pgd(W0, A, B, project=_ball, constant=c)
        expected = w_pgd(W0, A, B, c)
    else:
        ours, _ = dictionary_admm(W0, A, B, project=_ball, constant=c)
        expected = w_admm(W0, A, B, c)
    np.testing.assert_allclose(ours, expected, atol=1e-13)


# -- S1-S3: the (h, r) solvers --------------------------------------------------------------------


@pytest.mark.parametrize("kappa", [0.1, 0.7, 1.0])
def test_pgd_objective_never_increases(kappa):
    # spec item(s): spec 000 S1
    _, W, X = _problem(seed=2)
    penalties = RobustPenalties(outlier_alpha=0.1, outlier_bound=1.0)
    H, R = np.random.default_rng(5).random((4, K)), np.zeros_like(X)
    previous = robust_losses(X, [W], H, R, penalties)
    for _ in range(60):  # a PGD iteration is a function of (h, r) only: chaining is exact
        out = robust_code_pgd(X, [W], penalties, H0=H, E0=R, kappa=kappa, tol=0, max_iter=1)
        H, R = out.codes, out.outliers
        assert np.all(out.losses <= previous + 1e-12 * np.abs(previous))
        previous = out.losses


def test_accelerated_pgd_is_monotone_too():
    # spec item(s): spec 000 S1
    _, W, X = _problem(seed=4)
    penalties = RobustPenalties(outlier_alpha=0.1, outlier_bound=1.0)
    H0 = np.random.default_rng(1).random((4, K))
    values = [robust_code_pgd(X, [W], penalties, H0=H0, tol=0, max_iter=k,
                              accelerated=True).losses for k in range(1, 40)]
    assert np.all(np.diff(np.array(values), axis=0) <= 1e-12)


@pytest.mark.parametrize("dictionary", ["planted", "random"])
def test_solvers_reach_a_high_accuracy_reference_and_satisfy_kkt(dictionary):
    """PGD and ADMM solve the same problem (objective gaps), and their solutions pass KKT."""
    # spec item(s): spec 000 S2 S3
    rng, W, X = _problem(seed=7, b=3, F=120, K=10)
    if dictionary == "random":
        W = proj_C(rng.random(W.shape))
    penalties = RobustPenalties(outlier_alpha=1 / np.sqrt(120), outlier_bound=1.0)
    H0 = rng.random((3, 10))
    references = [_reduced_reference(x, W, penalties) for x in X]
    best = np.array([value for _, value in references])
    plain = robust_code_pgd(X, [W], penalties, H0=H0, tol=0, max_iter=5000)
    fista = robust_code_pgd(X, [W], penalties, H0=H0, tol=0, max_iter=3000, accelerated=True)
    admm = robust_code_admm(X, [W], penalties, H0=H0, tol=0, max_iter=3000)
    assert np.all((plain.losses - best) / best < 1e-4)
    for out in (fista, admm):
        np.testing.assert_allclose(out.losses, best, rtol=1e-9)
    # S3: KKT at the tight solutions
    for out in (fista, admm):
        H, R = out.codes, out.outliers
        np.testing.assert_allclose(R, prox_l1_box(X - H @ W.T, penalties.outlier_alpha, 1.0),
                                   atol=1e-8)
        g = (H @ W.T + R - X) @ W
        assert np.abs(g[H > 1e-10]).max(initial=0) <= 1e-6
        assert g[H <= 1e-10].min(initial=0) >= -1e-6


def test_paper_stopping_rule_is_loose_on_purpose():
    """After 50 PGD iterations the gap is large: expected, not to be 'fixed' (spec S2)."""
    # spec item(s): spec 000 S2
    rng, W, X = _problem(seed=7, b=3, F=120, K=10)
    penalties = RobustPenalties(outlier_alpha=1 / np.sqrt(120), outlier_bound=1.0)
    best = np.array([_reduced_reference(x, W, penalties)[1] for x in X])
    loose = robust_code_pgd(X, [W], penalties, H0=rng.random((3, 10)))
    assert loose.n_iter <= 50 and np.max((loose.losses - best) / best) > 1e-3


def test_extreme_penalties_give_the_limiting_solutions():
    # spec item(s): spec 000 S5
    rng, W, X = _problem(seed=8)
    # a huge lam: no outliers, and the codes are the nonnegative least-squares solution
    out = robust_code_admm(X, [W], RobustPenalties(outlier_alpha=1e6, outlier_bound=1.0), tol=0,
                           max_iter=3000)
    assert np.all(out.outliers == 0)
    for x, h in zip(X, out.codes):
        np.testing.assert_allclose(h, scipy.optimize.nnls(W, x)[0], atol=1e-7)
    # M -> 0 forbids outliers; nonnegative outliers stay nonnegative; lam = inf is exact
    tiny = robust_code_pgd(X, [W], RobustPenalties(outlier_alpha=0.01, outlier_bound=1e-12), tol=0,
                           max_iter=50)
    assert np.abs(tiny.outliers).max() <= 1e-12
    for solver in ("pgd", "admm"):
        out = robust_code(X, [W], RobustPenalties(outlier_alpha=0.01, nonnegative_outliers=True),
                          solver=solver)
        assert out.outliers.min() >= 0 and out.outliers.max() > 0
        no_outliers = RobustPenalties(outlier_alpha=np.inf)
        assert np.all(robust_code(X, [W], no_outliers, solver=solver).outliers
                      == 0)


REGULARISED = [
    dict(ridge=0.3, outlier_l2=0.2),  # eq. (39)
    dict(alpha=0.05),
    dict(group_alpha=0.05, group_size=3),
    dict(group_alpha=0.03, group_size=2, alpha=0.02),  # sparse group lasso
    dict(nonnegative_outliers=True),
    dict(outlier_bound=None),
]


@pytest.mark.parametrize("extra", REGULARISED)
def test_regularised_variants_pgd_and_admm_agree(extra):
    # spec item(s): spec 000 S6
    _, W, X = _problem(seed=9)
    penalties = RobustPenalties(**{"outlier_alpha": 0.08, "outlier_bound": 1.0, **extra})
    H0 = np.random.default_rng(2).random((4, K))
    fista = robust_code_pgd(X, [W], penalties, H0=H0, tol=0, max_iter=4000, accelerated=True)
    admm = robust_code_admm(X, [W], penalties, H0=H0, tol=0, max_iter=4000)
    np.testing.assert_allclose(admm.losses, fista.losses, rtol=1e-7)
    assert admm.codes.min() >= 0 and fista.codes.min() >= 0
    np.testing.assert_allclose(robust_losses(X, [W], admm.codes, admm.outliers, penalties),
                               admm.losses, rtol=1e-12)
    H, R = H0, np.zeros_like(X)
    previous = robust_losses(X, [W], H, R, penalties)
    for _ in range(25):  # S1-type monotonicity of plain PGD
        out = robust_code_pgd(X, [W], penalties, H0=H, E0=R, tol=0, max_iter=1)
        H, R = out.codes, out.outliers
        assert np.all(out.losses <= previous + 1e-12 * np.abs(previous))
        previous = out.losses


def test_group_penalty_of_consecutive_groups():
    H = np.array([[3.0, 4.0, 1.0]])
    value = code_penalty(H, RobustPenalties(outlier_alpha=1.0, group_alpha=2.0, group_size=2))
    np.testing.assert_allclose(value, [2.0 * (np.sqrt(2) * 5.0 + 1.0)])


# -- S4: the W-step --------------------------------------------------------------------------------


def test_dictionary_step_descends_stays_feasible_and_solvers_agree(rng):
    # spec item(s): spec 000 S4
    A, B, c = _statistics(rng)
    assert np.linalg.eigvalsh(A).min() > 0
    W = proj_C(rng.random((F, K)))
    previous = ftilde(W, A, B, c)
    for kappa in (0.7, 1.0):
        V = W
        for _ in range(30):  # a PGD iteration depends on W only: chaining is exact
            V, _ = dictionary_pgd(V, A, B, project=_ball, constant=c, kappa=kappa, tol=0,
                                  max_iter=1)
            assert V.min() >= 0 and np.linalg.norm(V, axis=0).max() <= 1 + 1e-12
            assert ftilde(V, A, B, c) <= previous + 1e-12 * abs(previous)
            previous = ftilde(V, A, B, c)
        previous = ftilde(W, A, B, c)
    tight_pgd, _ = dictionary_pgd(W, A, B, project=_ball, constant=c, tol=0, max_iter=20000)
    tight_admm, _ = dictionary_admm(W, A, B, project=_ball, constant=c, tol=0, max_iter=5000)
    eta = 0.7 / np.linalg.norm(A)
    assert np.linalg.norm(tight_pgd - proj_C(tight_pgd - eta * (tight_pgd @ A - B))) < 1e-8
    np.testing.assert_allclose(ftilde(tight_admm, A, B, c), ftilde(tight_pgd, A, B, c),
                               rtol=1e-8)
    np.testing.assert_allclose(tight_admm, tight_pgd, atol=1e-5)


@pytest.mark.parametrize("solver", ["pgd", "admm"])
def test_zero_statistics_leave_the_dictionary_unchanged(rng, solver):
    # spec item(s): spec 000 S4
    W = proj_C(rng.random((F, K)))
    new, _ = surrogate_solver_step([W], np.zeros((K, K)), np.zeros((F, K)), 0.0, solver=solver,
                                   project=_ball)
    np.testing.assert_allclose(new[0], W)


def test_penalised_dictionary_steps_agree(rng):
    A, B, c = _statistics(rng)
    W = proj_C(rng.random((F, K)))
    options = dict(project=_ball, l1=0.01, l2=0.2, constant=c, tol=0)
    pgd, _ = dictionary_pgd(W, A, B, max_iter=20000, **options)
    admm, _ = dictionary_admm(W, A, B, max_iter=5000, **options)
    np.testing.assert_allclose(admm, pgd, atol=1e-6)


def test_penalised_column_steps_are_exact_minimisers(rng):
    """column_descent with l1/l2: each column move is the exact (projected) minimiser."""
    F, K = 12, 4
    A, B, _ = _statistics(rng, F=F, K=K)
    U = proj_C(rng.random((F, K)))
    l1, l2 = 0.02, 0.1
    for bound in (None, 1.0):
        new = column_descent(U, A, B, nonnegative=True, column_bound=bound, l1=l1, l2=l2)
        V = U.copy()
        for r in range(K):  # reproduce the Gauss-Seidel sweep with a generic solver per column
            rest = B[:, r] - V @ A[:, r] + A[r, r] * V[:, r]

            def objective(u, rest=rest, r=r):
                return (A[r, r] + l2) * u @ u - 2 * u @ rest + 2 * l1 * u.sum()
            cons = [] if bound is None else [{"type": "ineq", "fun": lambda u: 1 - u @ u}]
            V[:, r] = scipy.optimize.minimize(objective, V[:, r], method="SLSQP",
                                              bounds=[(0, None)] * F, constraints=cons,
                                              options={"ftol": 1e-15, "maxiter": 500}).x
        np.testing.assert_allclose(new, V, atol=2e-6)
    # without penalties the step is the engine's original one, exactly
    plain = column_descent(U, A, B, nonnegative=True, column_bound=1.0)
    zero = column_descent(U, A, B, nonnegative=True, column_bound=1.0, l1=0.0, l2=0.0)
    np.testing.assert_array_equal(plain, zero)


# -- tensors and backends -------------------------------------------------------------------------


@pytest.mark.parametrize("solver", ["pgd", "admm"])
def test_tensor_samples_code_like_the_matrix_of_atoms(rng, solver):
    """A CP dictionary codes exactly like its (never formed) Khatri-Rao matrix."""
    loadings = [proj_C(rng.random((6, 4))), proj_C(rng.random((5, 4)))]
    X = np.clip(rng.random((7, 6, 5)) * 0.3 + (rng.random((7, 6, 5)) < 0.1), 0, 1)
    penalties = RobustPenalties(outlier_alpha=0.1, outlier_bound=1.0, alpha=0.01)
    H0 = rng.random((7, 4))
    tensor = robust_code(X, loadings, penalties, solver=solver, H0=H0)
    matrix = robust_code(X.reshape(7, 30), [khatri_rao(loadings)], penalties, solver=solver,
                         H0=H0)
    np.testing.assert_allclose(tensor.codes, matrix.codes, atol=1e-12)
    np.testing.assert_allclose(tensor.outliers.reshape(7, 30), matrix.outliers, atol=1e-12)
    assert tensor.n_iter == matrix.n_iter


@pytest.mark.parametrize("solver", ["pgd", "admm"])
def test_solvers_backend_parity(backend, solver):
    _, W, X = _problem(seed=11)
    H0 = np.random.default_rng(0).random((4, K))
    penalties = RobustPenalties(outlier_alpha=0.05, outlier_bound=1.0, ridge=0.01)
    with using("numpy"):
        reference = robust_code(X, [W], penalties, solver=solver, H0=H0, tol=1e-6, max_iter=200)
        expected, _ = surrogate_solver_step([W], np.eye(K), W, 1.0, solver=solver,
                                            project=_ball)
    other = robust_code(tl.tensor(X), [tl.tensor(W)], penalties, solver=solver,
                        H0=tl.tensor(H0), tol=1e-6, max_iter=200)
    np.testing.assert_allclose(tl.to_numpy(other.codes), reference.codes, atol=1e-10)
    np.testing.assert_allclose(tl.to_numpy(other.outliers), reference.outliers, atol=1e-10)
    new, _ = surrogate_solver_step([tl.tensor(W)], tl.tensor(np.eye(K)), tl.tensor(W), 1.0,
                                   solver=solver, project=_ball)
    np.testing.assert_allclose(tl.to_numpy(new[0]), expected[0], atol=1e-12)


def test_bad_solver_name():
    _, W, X = _problem()
    with pytest.raises(ValueError, match="solver"):
        robust_code(X, [W], RobustPenalties(outlier_alpha=0.1), solver="sgd")
    with pytest.raises(ValueError, match="solver"):
        surrogate_solver_step([W], np.eye(K), W, 0.0, solver="bcd", project=_ball)
    with pytest.raises(ValueError, match="gamma"):
        project_elastic_net_columns(np.ones((3, 2)), 0.0, 0.0)


# -- the code-space ADMM of the NMF learners ------------------------------------------------------


@pytest.mark.parametrize("l1, l2", [(0.0, 0.0), (0.05, 0.1)])
def test_code_space_admm_solves_the_nonnegative_elastic_net(backend, l1, l2):
    """Tight residuals give the exact minimiser (KKT of a projected-gradient reference), and a
    sample stops on its own: the rows that stop early are the ones coded alone."""
    rng = np.random.default_rng(3)
    W = rng.random((30, 6)) ** 2
    X = rng.random((40, 30))
    X[::4] *= 50  # samples that stop at other iterations
    G, P = W.T @ W, X @ W
    H, n_iter = nonnegative_code_admm(tl.tensor(G), tl.tensor(P), l1=l1, l2=l2,
                                      residual_tol=1e-11, max_iter=5000)
    H = tl.to_numpy(H)
    assert n_iter < 5000 and H.min() >= 0
    step = 1.0 / (np.linalg.eigvalsh(G)[-1] + l2)
    reference = H.copy()
    for _ in range(3000):  # the exact solution is a fixed point of the prox-gradient map
        reference = np.maximum(reference - step * (reference @ G - P + l1 + l2 * reference), 0)
    np.testing.assert_allclose(H, reference, atol=1e-7 * np.abs(reference).max())
    loose, _ = nonnegative_code_admm(tl.tensor(G), tl.tensor(P), l1=l1, l2=l2, residual_tol=1e-2)
    for rows in (slice(0, 1), slice(5, 23)):
        alone, _ = nonnegative_code_admm(tl.tensor(G), tl.tensor(P[rows]), l1=l1, l2=l2,
                                         residual_tol=1e-2)
        np.testing.assert_allclose(tl.to_numpy(alone), tl.to_numpy(loose)[rows], atol=1e-12)


def test_code_space_admm_gives_the_same_codes_whatever_the_working_set(backend):
    """Stopped samples leave the working set at once, and a sample stops at the first test it
    passes: its code and iterations are those it gets coded alone, whoever its neighbours."""
    rng = np.random.default_rng(8)
    W = rng.random((30, 6)) ** 2
    X = rng.random((60, 30)) * rng.choice([1.0, 30.0], size=(60, 1))
    G, P = tl.tensor(W.T @ W), tl.tensor(X @ W)
    codes, n_iter = nonnegative_code_admm(G, P, residual_tol=1e-4, max_iter=300)
    alone = [nonnegative_code_admm(G, P[j:j + 1], residual_tol=1e-4, max_iter=300)
             for j in range(60)]
    np.testing.assert_allclose(tl.to_numpy(codes),
                               np.concatenate([tl.to_numpy(h) for h, _ in alone]), atol=1e-12)
    iterations = [k for _, k in alone]
    assert n_iter == max(iterations) < 300 and min(iterations) < n_iter  # several stops


@pytest.mark.parametrize("dead", ["zero", "tiny", "all"])
@pytest.mark.parametrize("l1, l2", [(0.5, 0.0), (0.0, 0.0), (0.2, 0.1)])
def test_code_space_admm_gives_dead_atoms_no_code(backend, dead, l1, l2):
    """An atom of zero curvature (a zero column, or below 1e-12 of the largest, as the lasso
    coder counts them) has code 0, the others their exact codes: the least-squares start
    of a dead atom, ``-l1`` over a rounding-level shift, once ended as a code of 1e8."""
    rng = np.random.default_rng(5)
    W = rng.random((30, 3))
    W[:, 2] = {"zero": 0.0, "tiny": 1e-7, "all": 0.0}[dead] * rng.random(30)
    if dead == "all":
        W[:] = 0.0
    X = rng.random((8, 30))
    G, P = W.T @ W, X @ W
    H, _ = nonnegative_code_admm(tl.tensor(G), tl.tensor(P), l1=l1, l2=l2, residual_tol=1e-10,
                                 max_iter=5000)
    with using("numpy"):
        exact, _ = sparse_code(G, P, alpha=2 * l1, ridge=l2, tol=1e-12, max_iter=1000)
    np.testing.assert_allclose(tl.to_numpy(H), exact, atol=1e-8)
    assert np.all(tl.to_numpy(H)[:, 2] == 0)


@pytest.mark.parametrize("options, error, match", [
    (dict(G=np.ones((2, 3))), ValueError, "G must be a square"),
    (dict(P=np.ones((4, 3))), ValueError, "P must have shape"),
    (dict(H0=np.ones((3, 2))), ValueError, "H0 must have the shape of P"),
    (dict(l1=-0.1), ValueError, "l1"),
    (dict(l2=float("nan")), TypeError, "l2"),
    (dict(rho=0.0), ValueError, "rho"),
    (dict(residual_tol=-1e-3), ValueError, "residual_tol"),
    (dict(max_iter=0), ValueError, "max_iter"),
    (dict(relaxation=2.0), ValueError, "relaxation"),
    (dict(relaxation=0.0), ValueError, "relaxation"),
])
def test_nonnegative_code_admm_rejects_bad_input(options, error, match):
    W = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    arguments = {"G": W.T @ W, "P": np.ones((4, 3)) @ W, **options}
    G, P = arguments.pop("G"), arguments.pop("P")
    with pytest.raises(error, match=match):
        nonnegative_code_admm(G, P, **arguments)
