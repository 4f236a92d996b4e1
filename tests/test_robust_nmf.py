"""RobustOnlineNMF (ONMFO) and RobustNMF (BPGD / BADMM): spec 000, sections 5.1 (U4), 5.3
(E1-E10), 5.4 (B1-B3), 5.5 and the "easy to get wrong" items of section 6."""

import importlib.util

import numpy as np
import pytest
import tensorly as tl
from test_robust_coding import ftilde, hr_admm, hr_pgd, proj_C, w_admm, w_pgd

from tensorstream import load
from tensorstream.coders.robust import RobustPenalties, robust_losses
from tensorstream.core.backend import using
from tensorstream.core.constraints import elastic_net_norm
from tensorstream.datasets.outliers import (
    averaged_regret,
    contaminate,
    moving_patch_video,
    normalize_unit_max,
    psnr,
    replicate,
    support_scores,
    synthetic_outlier_data,
)
from tensorstream.learners import robust_nmf, robust_nmf_batch
from tensorstream.learners.nmf import OnlineNMF
from tensorstream.learners.robust_pca import RobustPCA
from tensorstream.steps.surrogate import surrogate_value


def _in_paper_units(cls):
    """``cls`` with the paper's lam, box, raw units, weights and coding cap (``paper_params``)
    unless a test says otherwise: these tests reproduce spec 000, whose numbers are measured
    at those settings (the batch sizes and passes stay as each test gives them)."""
    keys = ("outlier_alpha", "outlier_alpha_scale", "outlier_bound", "data_scale", "weights",
            "code_max_iter")
    paper = {k: cls.paper_params[k] for k in keys if k in cls.paper_params}

    def make(*args, **kwargs):
        return cls(*args, **{**paper, **kwargs})
    return make


RobustNMF = _in_paper_units(robust_nmf_batch.RobustNMF)
RobustOnlineNMF = _in_paper_units(robust_nmf.RobustOnlineNMF)

# -- the canonical test recipe (CT) and its runs --------------------------------------------------


def _stream(model, X, batch_size=5, record=()):
    """Feed ``X`` in order; returns the online codes/outliers and what ``record`` asks for."""
    codes, outliers, surrogates, increments = [], [], [], []
    for start in range(0, len(X), batch_size):
        old = model.loadings_[0].copy() if "increments" in record and model._fitted else None
        model.partial_fit(X[start:start + batch_size])
        H, R = model.last_decomposition_
        codes.append(H)
        outliers.append(R)
        if "surrogate" in record:
            surrogates.append(model.surrogate_value())
        if old is not None:
            increments.append(np.linalg.norm(model.loadings_[0] - old))
    return np.concatenate(codes), np.concatenate(outliers), surrogates, increments


# the tests of the online run on the canonical recipe share one xdist worker (and its fixtures)
CANONICAL_RUN = pytest.mark.xdist_group("robust-canonical-run")


@pytest.fixture(scope="module")
def ct_data():
    return synthetic_outlier_data(random_state=1)  # F=400, K=49, N=5000, (0.7, 0.1), no noise


@pytest.fixture(scope="module")
def oadmm_run(ct_data):
    model = RobustOnlineNMF(49, solver="admm", random_state=2)
    H, R, surrogates, increments = _stream(model, ct_data.X, record=("surrogate", "increments"))
    return model, H, R, surrogates, increments


@pytest.fixture(scope="module")
def proxy_run(ct_data):
    """The spec's proxy: the same code without outliers (lam = inf)."""
    model = RobustOnlineNMF(49, solver="admm", outlier_alpha=np.inf, random_state=2)
    H, _, _, _ = _stream(model, ct_data.X)
    return model, H


@CANONICAL_RUN
def test_oadmm_quality_on_the_canonical_recipe(ct_data, oadmm_run):
    # spec item(s): spec 000 E1
    model, H, R, _, _ = oadmm_run
    W = model.loadings_[0]
    assert averaged_regret(ct_data.X_clean, H @ W.T) <= 0.10  # measured 0.051
    assert psnr(ct_data.X_clean, H @ W.T) >= 33  # PSNR (48), measured 35.9
    assert support_scores(ct_data.outliers, R)["f1"] >= 0.80  # measured 0.90
    assert np.linalg.norm(R - ct_data.outliers) / np.linalg.norm(ct_data.outliers) <= 0.25
    # re-encoded with the final dictionary, tight coding (on a subset: an evaluation)
    model.set_params(code_tol=1e-6, code_max_iter=500)
    assert psnr(ct_data.X_clean[:500], model.reconstruct(ct_data.X[:500])) >= 34
    model.set_params(code_tol=1e-3, code_max_iter=50)
    W_feasible = model.loadings_[0]
    assert W_feasible.min() >= 0 and np.linalg.norm(W_feasible, axis=0).max() <= 1 + 1e-12


@CANONICAL_RUN
def test_robustness_beats_the_proxy_and_online_nmf(ct_data, oadmm_run, proxy_run):
    # spec item(s): spec 000 E2
    model, H, _, _, _ = oadmm_run
    proxy, H_proxy = proxy_run
    robust_psnr = psnr(ct_data.X_clean, H @ model.loadings_[0].T)
    proxy_psnr = psnr(ct_data.X_clean, H_proxy @ proxy.loadings_[0].T)
    assert robust_psnr >= proxy_psnr + 5  # measured 35.9 vs 27.6
    assert averaged_regret(ct_data.X_clean, H_proxy @ proxy.loadings_[0].T) >= \
        5 * averaged_regret(ct_data.X_clean, H @ model.loadings_[0].T)
    # OnlineNMF (the library's ONMF) on the same stream, re-encoded PSNR on a subset
    onmf = OnlineNMF(49, batch_size=5, column_bound=1.0, random_state=2)
    for start in range(0, len(ct_data.X), 5):
        onmf.partial_fit(ct_data.X[start:start + 5])
    model.set_params(code_tol=1e-6, code_max_iter=500)
    robust = psnr(ct_data.X_clean[:500], model.reconstruct(ct_data.X[:500]))
    model.set_params(code_tol=1e-3, code_max_iter=50)
    assert robust >= psnr(ct_data.X_clean[:500], onmf.reconstruct(ct_data.X[:500])) + 5


@CANONICAL_RUN
def test_surrogate_converges_without_monotonicity_claims(oadmm_run):
    # spec item(s): spec 000 E3
    surrogates = oadmm_run[3]
    n = len(surrogates)
    assert surrogates[-1] <= surrogates[int(0.05 * n) - 1]
    assert abs(surrogates[-1] - surrogates[int(0.8 * n) - 1]) / surrogates[-1] <= 0.02
    np.testing.assert_allclose(surrogates[-1], 0.5089, rtol=0.02)  # the spec's measurement


@CANONICAL_RUN
def test_dictionary_increments_decay_like_one_over_t(oadmm_run):
    # spec item(s): spec 000 E4
    increments = np.array(oadmm_run[4])  # d_s for s = 2, 3, ...
    s = np.arange(2, len(increments) + 2)
    scaled = s * increments
    windows = [scaled[(s >= a) & (s < b)].mean() for a, b in ((100, 300), (300, 600),
                                                               (600, 1001))]
    assert max(windows) <= 10 and max(windows) <= 2 * min(windows)


def test_paper_mode_opgd_is_no_worse_than_its_outlier_free_proxy(ct_data):
    """Paper-faithful OPGD (loose inner solves) is weak, but no worse than the same solver
    without the outlier model (on all 5000 samples 25.9 vs 26.5 dB, the spec's 25.8 vs 25.7; on
    the first 2000, which this test streams, 25.9 vs 26.2)."""
    # spec item(s): spec 000 E7
    X, X_clean = ct_data.X[:2000], ct_data.X_clean[:2000]
    model = RobustOnlineNMF(49, solver="pgd", random_state=2)
    H, R, _, _ = _stream(model, X)
    W = model.loadings_[0]
    assert W.min() >= 0 and np.linalg.norm(W, axis=0).max() <= 1 + 1e-12
    proxy = RobustOnlineNMF(49, solver="pgd", outlier_alpha=np.inf, random_state=2)
    H_proxy, _, _, _ = _stream(proxy, X)
    assert psnr(X_clean, H @ W.T) >= psnr(X_clean, H_proxy @ proxy.loadings_[0].T) - 1


# -- the data (spec 000, section 4.2 and items 3, 4, 14, 15 of section 6) -------------------------


def _reference_generator(F, K, N, nu, nut, noise, seed):
    """The spec's Appendix A generator (columns are samples)."""
    rng = np.random.default_rng(seed)
    sig = 1 / np.sqrt(K)
    Vo = np.clip(np.abs(rng.normal(0, sig, (F, K))) @ np.abs(rng.normal(0, sig, (K, N))), 0, 1)
    Ro = np.zeros((F, N))
    m = int(np.floor(nut * F))
    for i in rng.choice(N, int(np.floor(nu * N)), replace=False):
        Ro[rng.choice(F, m, replace=False), i] = rng.uniform(-1, 1, m)
    V = np.clip(Vo + Ro + noise * rng.standard_normal((F, N)), 0, 1)
    return V, Vo, Ro


@pytest.mark.parametrize("noise", [0.0, 0.01])
def test_synthetic_data_is_the_papers_recipe(noise):
    data = synthetic_outlier_data(n_features=50, n_components=7, n_samples=300, nu=0.8,
                                  nu_tilde=0.2, noise_std=noise, random_state=4)
    V, Vo, Ro = _reference_generator(50, 7, 300, 0.8, 0.2, noise, 4)
    np.testing.assert_array_equal(data.X, V.T)
    np.testing.assert_array_equal(data.X_clean, Vo.T)
    np.testing.assert_array_equal(data.planted, Ro.T)


def test_half_normal_is_read_as_a_standard_deviation(ct_data):
    """Read as a variance, every clean entry would exceed 1 (V = 1 after clipping)."""
    clean = ct_data.X_clean
    assert 0.55 < clean.mean() < 0.7 and np.mean(clean >= 1) < 0.01  # spec: 0.63, 0.3 %
    contaminated = np.abs(ct_data.planted).sum(axis=1) > 0
    assert contaminated.sum() == 3500 and np.all((ct_data.planted[contaminated] != 0).sum(1) == 40)
    # the outliers in effect are X - X_clean, which clipping made differ from the planted ones
    assert np.any(ct_data.outliers != ct_data.planted)
    np.testing.assert_array_equal(ct_data.X, np.clip(ct_data.X_clean + ct_data.planted, 0, 1))


def test_measures_and_data_helpers():
    clean = np.full((4, 5), 0.5)
    np.testing.assert_allclose(psnr(clean, clean + 0.1), 20.0)
    assert psnr(clean, clean) == np.inf
    np.testing.assert_allclose(averaged_regret(clean, clean + 0.1), 0.5 * 5 * 0.01)
    scores = support_scores(np.eye(3), np.eye(3) * 0.5 + 0.01, threshold=0.1)
    assert scores == {"precision": 1.0, "recall": 1.0, "f1": 1.0}
    assert support_scores(np.zeros(3), np.zeros(3))["f1"] == 1.0
    with pytest.raises(ValueError, match="same shape"):
        psnr(clean, clean[:2])
    with pytest.raises(ValueError, match="normalise"):
        contaminate(clean * 3)
    with pytest.raises(ValueError, match="nu must"):
        synthetic_outlier_data(nu=1.5)
    frames, backgrounds, masks = moving_patch_video(n_frames=30, patch_size=6, random_state=1)
    assert frames.max() == 1.0 and np.all(frames.reshape(30, -1).max(axis=1) == 1.0)
    np.testing.assert_array_equal(frames[~masks], backgrounds[~masks])
    assert np.all(masks.reshape(30, -1).sum(axis=1) == 36)
    assert len({tuple(np.argwhere(m)[0]) for m in masks}) > 10  # the square moves


def test_initial_dictionary_is_in_C():
    for constraint in ("l2ball", "simplex"):
        W = RobustOnlineNMF(5, constraint=constraint, random_state=0)._initial_state(
            np.ones((2, 30)))["state_"].loadings[0]
        assert _feasible(W, {"constraint": constraint})
    W = RobustOnlineNMF(5, random_state=0)._initial_state(np.ones((2, 30)))["state_"].loadings[0]
    rng = np.random.default_rng(0)
    np.testing.assert_allclose(W, proj_C(rng.random((30, 5))))  # P_C(U[0, 1)), spec 6.5


# -- the spec's prototype as an oracle, iterate by iterate ---------------------------------------


def _onmfo_reference(X, K, W0, solver, lam, tau):
    """The spec's Appendix A loop (samples first here), with this library's code start."""
    W = W0.copy()
    A, B, c, n = np.zeros((K, K)), np.zeros((X.shape[1], K)), 0.0, 0
    history = []
    for start in range(0, len(X), tau):
        V = X[start:start + tau].T
        H0 = np.full((K, V.shape[1]), 0.5)  # the coders start every code at 1/2
        H, R = np.zeros((K, 0)), np.zeros((V.shape[0], 0))
        for j in range(V.shape[1]):  # sample by sample: the library's per-sample stopping rule
            solve = hr_pgd if solver == "pgd" else hr_admm
            h, r = solve(V[:, [j]], W, H0[:, [j]], np.zeros((V.shape[0], 1)), lam, 1.0)
            H, R = np.hstack([H, h]), np.hstack([R, r])
        b = V.shape[1]
        A = (n * A + H @ H.T) / (n + b)
        B = (n * B + (V - R) @ H.T) / (n + b)
        E = V - R
        c = (n * c + 0.5 * np.sum(E * E) + lam * np.abs(R).sum()) / (n + b)
        n += b
        W = w_pgd(W, A, B, c) if solver == "pgd" else w_admm(W, A, B, c)
        history.append(W.copy())
    return history, (A, B, c)


@pytest.mark.parametrize("solver", ["pgd", "admm"])
def test_learner_equals_the_reference_loop(solver):
    data = synthetic_outlier_data(n_features=50, n_components=6, n_samples=150, random_state=3)
    W0 = proj_C(np.random.default_rng(4).random((50, 6)))
    lam = 1 / np.sqrt(50)
    history, (A, B, c) = _onmfo_reference(data.X, 6, W0, solver, lam, tau=5)
    model = RobustOnlineNMF(6, solver=solver, init=[W0])
    for step, start in enumerate(range(0, 150, 5)):
        model.partial_fit(data.X[start:start + 5])
        np.testing.assert_allclose(model.loadings_[0], history[step], atol=1e-11)
    np.testing.assert_allclose(model.statistics_["A"], A, atol=1e-12)
    np.testing.assert_allclose(model.statistics_["B"], B, atol=1e-12)
    np.testing.assert_allclose(model.statistics_["c"], 2 * c, rtol=1e-12)  # engine scale
    np.testing.assert_allclose(model.surrogate_value(), ftilde(model.loadings_[0], A, B, c),
                               rtol=1e-12)


# -- U4: sufficient statistics ------------------------------------------------------------------


@pytest.mark.parametrize("tau", [1, 7])
def test_statistics_reproduce_the_past_losses(tau):
    # spec item(s): spec 000 U4
    data = synthetic_outlier_data(n_features=30, n_components=4, n_samples=63, random_state=5)
    model = RobustOnlineNMF(4, batch_size=tau, ridge=0.01, outlier_l2=0.02, random_state=0)
    H, R, _, _ = _stream(model, data.X, batch_size=tau)
    stats = model.statistics_
    np.testing.assert_allclose(stats["A"], H.T @ H / 63, rtol=1e-10)
    np.testing.assert_allclose(stats["B"], (data.X - R).T @ H / 63, rtol=1e-10)
    penalties = model._algorithm().penalties(30)
    rng = np.random.default_rng(1)
    for _ in range(3):
        W = proj_C(rng.random((30, 4)))
        direct = np.mean(robust_losses(data.X, [W], H, R, penalties))
        np.testing.assert_allclose(0.5 * surrogate_value(stats["A"], stats["B"], stats["c"],
                                                         [W]), direct, rtol=1e-10)


# -- invariants at every step ---------------------------------------------------------------------


CONSTRAINTS = [
    dict(constraint="l2ball"),
    dict(constraint="nonneg"),
    dict(constraint="simplex"),
    dict(constraint="elasticnet", gamma1=0.3, gamma2=1.0),
    dict(dict_l1=0.001, dict_l2=0.01),
]


def _feasible(W, params):
    if W.min() < 0:
        return False
    kind = params.get("constraint", "l2ball")
    if kind == "l2ball":
        return np.linalg.norm(W, axis=0).max() <= 1 + 1e-12
    if kind == "simplex":
        return np.allclose(W.sum(axis=0), 1, atol=1e-12)
    if kind == "elasticnet":
        return elastic_net_norm(W, params["gamma1"], params["gamma2"]).max() <= 1 + 1e-12
    return True


@pytest.mark.parametrize("params", CONSTRAINTS)
@pytest.mark.parametrize("solver", ["pgd", "admm"])
def test_constraints_and_surrogate_decrease_at_every_step(params, solver):
    data = synthetic_outlier_data(n_features=40, n_components=5, n_samples=100, random_state=6)
    model = RobustOnlineNMF(5, solver=solver, random_state=0, **params)
    model.partial_fit(data.X[:5])
    previous = model.surrogate_value()
    for start in range(5, 100, 5):
        old = model.loadings_[0].copy()
        model.partial_fit(data.X[start:start + 5])
        W, info = model.loadings_[0], model._last_info
        assert _feasible(W, params)
        stats = model.statistics_
        penalty = params.get("dict_l1", 0) * old.sum() + 0.5 * params.get("dict_l2", 0) * \
            np.sum(old**2)  # added once, outside the average
        at_old = 0.5 * surrogate_value(stats["A"], stats["B"], stats["c"], [old]) + penalty
        # the surrogate recursion at the old dictionary: (1 - w) f_{t-1} + w (batch loss)
        np.testing.assert_allclose(at_old - penalty, (1 - info["weight"]) * (previous - penalty)
                                   + info["weight"] * info["batch_loss"], rtol=1e-10)
        if solver == "pgd":  # projected gradient with step <= 1/L is monotone (S4)
            assert model.surrogate_value() <= at_old + 1e-12 * abs(at_old)
        previous = model.surrogate_value()


def test_outlier_extensions_hold_after_every_step():
    data = synthetic_outlier_data(n_features=40, n_components=5, n_samples=60, random_state=7)
    model = RobustOnlineNMF(5, nonnegative_outliers=True, outlier_bound=0.5, random_state=0)
    for start in range(0, 60, 6):
        model.partial_fit(data.X[start:start + 6])
        _, R = model.last_decomposition_
        assert R.min() >= 0 and R.max() <= 0.5
    model = RobustOnlineNMF(5, outlier_bound=None, solver="pgd",
                            solver_params={"accelerated": True}, group_alpha=0.01,
                            group_size=2, alpha=0.001, random_state=0).fit(data.X)
    assert np.all(np.isfinite(model.loadings_[0]))


# -- E8: determinism and backends -----------------------------------------------------------------


def test_same_seeds_are_bit_identical():
    # spec item(s): spec 000 E8
    data = synthetic_outlier_data(n_features=40, n_components=5, n_samples=100, random_state=8)
    first = RobustOnlineNMF(5, batch_size=10, max_iter=2, random_state=3).fit(data.X)
    second = RobustOnlineNMF(5, batch_size=10, max_iter=2, random_state=3).fit(data.X)
    np.testing.assert_array_equal(first.loadings_[0], second.loadings_[0])
    np.testing.assert_array_equal(first.transform(data.X), first.transform(data.X))


@pytest.mark.parametrize("solver", ["pgd", "admm"])
def test_backend_parity_after_50_steps(backend, solver):
    # spec item(s): spec 000 E8
    data = synthetic_outlier_data(n_features=40, n_components=5, n_samples=250, random_state=9)
    with using("numpy"):
        reference = RobustOnlineNMF(5, solver=solver, random_state=0)
        for start in range(0, 250, 5):
            reference.partial_fit(data.X[start:start + 5])
    other = RobustOnlineNMF(5, solver=solver, random_state=0)
    for start in range(0, 250, 5):
        other.partial_fit(tl.tensor(data.X[start:start + 5]))
    assert other.backend_ == backend and other.n_steps_ == 50
    np.testing.assert_allclose(tl.to_numpy(other.loadings_[0]), reference.loadings_[0],
                               atol=1e-8)


@pytest.mark.parametrize("solver", ["pgd", "admm"])
def test_checkpoint_resume_equals_uninterrupted_run(backend, tmp_path, solver):
    data = synthetic_outlier_data(n_features=30, n_components=4, n_samples=100, random_state=10)
    batches = [tl.tensor(data.X[start:start + 5]) for start in range(0, 100, 5)]
    params = dict(solver=solver, outlier_alpha_scale=2.0, outlier_bound=None, ridge=0.001,
                  random_state=0)
    straight = RobustOnlineNMF(4, **params)
    for batch in batches:
        straight.partial_fit(batch)
    interrupted = RobustOnlineNMF(4, **params)
    for batch in batches[:8]:
        interrupted.partial_fit(batch)
    resumed = load(interrupted.save(tmp_path / "robust.npz"))
    assert type(resumed) is robust_nmf.RobustOnlineNMF and resumed.backend_ == backend
    for batch in batches[8:]:
        resumed.partial_fit(batch)
    np.testing.assert_array_equal(tl.to_numpy(resumed.loadings_[0]),
                                  tl.to_numpy(straight.loadings_[0]))
    assert resumed.statistics_["c"] == straight.statistics_["c"]


# -- tensors --------------------------------------------------------------------------------------


def test_tensor_samples_through_the_engine():
    rng = np.random.default_rng(11)
    factors = [rng.random((8, 3)), rng.random((6, 3))]
    clean = np.einsum("sr,ir,jr->sij", rng.random((200, 3)), *factors)
    clean /= clean.max()
    X = np.clip(clean + (rng.random(clean.shape) < 0.05) * rng.uniform(-1, 1, clean.shape), 0, 1)
    model = RobustOnlineNMF(3, batch_size=10, max_iter=3, outlier_alpha_scale=2.0,
                            random_state=0).fit(X)
    assert [U.shape for U in model.loadings_] == [(8, 3), (6, 3)]
    assert all(U.min() >= 0 and np.linalg.norm(U, axis=0).max() <= 1 + 1e-12
               for U in model.loadings_)
    codes, outliers = model.decompose(X[:20])
    assert codes.shape == (20, 3) and outliers.shape == (20, 8, 6)
    background = model.reconstruct(X[:20])
    assert np.linalg.norm(background - clean[:20]) < np.linalg.norm(X[:20] - clean[:20])
    with pytest.raises(AttributeError, match="loadings_"):
        model.components_  # noqa: B018


# -- section 5.5: properties and edges ------------------------------------------------------------


@pytest.mark.parametrize("solver", ["pgd", "admm"])
def test_zero_codes_leave_the_dictionary(solver):
    """All-zero codes make A = 0: the W-step must neither crash nor move (spec 2.4, 6.8)."""
    W0 = proj_C(np.random.default_rng(0).random((10, 3)))
    model = RobustOnlineNMF(3, solver=solver, code_init="zero", init=[W0])
    model.partial_fit(np.zeros((4, 10)))
    assert np.all(model.statistics_["A"] == 0) and model.statistics_["c"] == 0
    np.testing.assert_array_equal(model.loadings_[0], W0)
    np.testing.assert_array_equal(model.transform(np.zeros((2, 10))), 0)


def test_more_atoms_than_features_partial_batches_and_no_box():
    data = synthetic_outlier_data(n_features=6, n_components=3, n_samples=23, random_state=12)
    model = RobustOnlineNMF(9, outlier_bound=None, batch_size=5, max_iter=1,
                            random_state=0).fit(data.X)
    assert model.n_steps_ == 5 and model.n_samples_seen_ == 23
    assert model.components_.shape == (9, 6) and np.all(np.isfinite(model.components_))


def test_no_outliers_matches_the_proxy():
    data = synthetic_outlier_data(n_samples=2000, nu=0.0, random_state=13)
    results = []
    for lam in (None, np.inf):
        # the paper's box on the outliers (the comparison as the spec makes it); none without
        # outliers (a box set by hand there is refused: it has nothing to bound)
        model = RobustOnlineNMF(49, outlier_alpha=lam, outlier_bound=1.0 if lam is None else None,
                                random_state=2)
        H, _, _, _ = _stream(model, data.X)
        results.append(psnr(data.X_clean, H @ model.loadings_[0].T))
    assert abs(results[0] - results[1]) <= 1.0


def test_digits_smoke():
    from sklearn.datasets import load_digits

    clean = normalize_unit_max(load_digits().data[:300])
    data = contaminate(clean, 0.7, 0.1, random_state=0)
    stream, source = replicate(data.X, 2, random_state=0)
    model = RobustOnlineNMF(16, outlier_alpha=1 / 8, batch_size=10, random_state=0).fit(stream)
    W = model.loadings_[0]
    assert W.shape == (64, 16) and W.min() >= 0 and np.linalg.norm(W, axis=0).max() <= 1 + 1e-12
    assert np.all(np.isfinite(model.transform(clean)))
    np.testing.assert_array_equal(stream, data.X[source])


def test_video_frames_separate_background_and_foreground():
    frames, backgrounds, masks = moving_patch_video(n_frames=60, random_state=0)
    X = frames.reshape(60, -1)
    stream, source = replicate(X, 5, random_state=0)
    model = RobustOnlineNMF(3, outlier_alpha_scale=3.0, random_state=0).fit(stream)
    model.set_params(code_tol=1e-5, code_max_iter=300)
    codes, foreground = model.decompose(X)
    background = codes @ model.components_
    assert psnr(backgrounds.reshape(60, -1), background) >= 28
    assert support_scores(masks.reshape(60, -1), foreground, threshold=0.05)["f1"] >= 0.7


# -- B1-B2: batch counterparts --------------------------------------------------------------------


def test_bpgd_never_increases_the_objective():
    # spec item(s): spec 000 B1
    data = synthetic_outlier_data(n_features=60, n_components=6, n_samples=300, random_state=14)
    model = RobustNMF(6, solver="pgd", max_iter=150, random_state=0).fit(data.X)
    objectives = np.array([info["objective"] for info in model.history_])
    assert np.all(np.diff(objectives) <= 1e-12 * objectives[:-1])
    assert objectives[-1] < 0.5 * objectives[0]
    W = model.components_.T
    assert W.min() >= 0 and np.linalg.norm(W, axis=0).max() <= 1 + 1e-12
    assert model.codes_.min() >= 0 and np.abs(model.outliers_).max() <= 1


def test_badmm_residuals_vanish_and_the_result_is_feasible():
    # spec item(s): spec 000 B2
    data = synthetic_outlier_data(n_features=100, n_components=10, n_samples=500, random_state=1)
    model = RobustNMF(10, solver="admm", max_iter=1500, tol=0.0, random_state=2).fit(data.X)
    last = model.history_[-1]
    assert max(last["residual_H"], last["residual_E"], last["residual_W"]) < 1e-3
    W = model.components_.T
    assert W.min() >= 0 and np.linalg.norm(W, axis=0).max() <= 1 + 1e-12
    assert model.codes_.min() >= 0 and np.abs(model.outliers_).max() <= 1
    objectives = [info["objective"] for info in model.history_]
    assert np.any(np.diff(objectives) > 0)  # BADMM is not monotone (spec 5.4)
    np.testing.assert_allclose(
        last["objective"],
        np.mean(robust_losses(data.X, [W], model.codes_, model.outliers_,
                              RobustPenalties(outlier_alpha=0.1, outlier_bound=1.0))), rtol=1e-12)


def test_batch_estimator_api_and_shared_initialisation():
    data = synthetic_outlier_data(n_features=30, n_components=4, n_samples=80, random_state=15)
    online = RobustOnlineNMF(4, random_state=3)
    online.partial_fit(data.X[:5])
    W0 = RobustOnlineNMF(4, random_state=3)._initial_state(data.X[:5])["state_"].loadings[0]
    batch = RobustNMF(4, init=[W0], max_iter=3, random_state=3)
    codes = batch.fit_transform(data.X)
    assert codes.shape == (80, 4) and batch.n_iter_ == 3
    assert batch.transform(data.X[:7]).shape == (7, 4)
    assert batch.outliers(data.X[:7]).shape == (7, 30)
    np.testing.assert_allclose(batch.inverse_transform(codes), codes @ batch.components_)
    stopped = RobustNMF(4, max_iter=100, callback=lambda m, info: info["iteration"] == 4,
                        random_state=0).fit(data.X)
    assert stopped.n_iter_ == 4
    assert RobustNMF(4, max_iter=500, max_time=1e-9, random_state=0).fit(data.X).n_iter_ == 1


def test_batch_learners_checkpoint_in_the_common_format(tmp_path):
    data = synthetic_outlier_data(n_features=20, n_components=3, n_samples=40, random_state=0)
    batch = RobustNMF(3, max_iter=3, random_state=0, callback=lambda m, info: False)
    with pytest.raises(ValueError, match="only a fitted RobustNMF"):
        batch.save(tmp_path / "unfitted.npz")
    batch.fit(data.X)
    loaded = load(batch.save(tmp_path / "rnmf.npz"))
    assert type(loaded) is robust_nmf_batch.RobustNMF and loaded.get_params()["max_iter"] == 3
    assert loaded.n_iter_ == batch.n_iter_ and loaded.history_ == batch.history_
    np.testing.assert_array_equal(loaded.components_, batch.components_)
    np.testing.assert_array_equal(loaded.transform(data.X[:5]), batch.transform(data.X[:5]))
    pcp = RobustPCA(3).fit(data.X)
    again = load(pcp.save(tmp_path / "pcp.npz"))
    for name in ("low_rank_", "sparse_", "singular_values_", "components_"):
        np.testing.assert_array_equal(getattr(again, name), getattr(pcp, name))
    np.testing.assert_array_equal(again.loadings_[0], pcp.loadings_[0])
    assert again.n_iter_ == pcp.n_iter_


# -- bad input ------------------------------------------------------------------------------------


def _snapshot(model):
    stats = model.statistics_
    return (model.loadings_[0].copy(), stats["A"].copy(), stats["B"].copy(), stats["c"],
            model.n_steps_, model._rng.bit_generator.state)


@pytest.fixture
def fitted():
    data = synthetic_outlier_data(n_features=20, n_components=3, n_samples=20, random_state=16)
    return RobustOnlineNMF(3, random_state=0).fit(data.X)


@pytest.mark.parametrize("batch, error, message", [
    (-np.ones((3, 20)), ValueError, "negative entries"),
    (np.full((3, 20), np.inf), ValueError, "NaN or infinite"),
    (np.ones((3, 21)), ValueError, "features, but RobustOnlineNMF is expecting"),
    (np.ones((0, 20)), ValueError, "empty batch"),
])
def test_bad_batches_leave_the_state(fitted, batch, error, message):
    before = _snapshot(fitted)
    with pytest.raises(error, match=message):
        fitted.partial_fit(batch)
    after = _snapshot(fitted)
    for a, b in zip(before[:3], after[:3]):
        np.testing.assert_array_equal(a, b)
    assert before[3:] == after[3:]


def test_bad_masks_are_refused(fitted):
    """Masks are taken (tests/test_robust_nmf_missing.py); a bad one leaves the state."""
    before = _snapshot(fitted)
    with pytest.raises(TypeError, match="boolean"):
        fitted.partial_fit(np.ones((3, 20)), mask=np.ones((3, 20)))
    assert _snapshot(fitted)[3:] == before[3:]


@pytest.mark.parametrize("params, error, message", [
    (dict(outlier_alpha=0.0), ValueError, "outlier_alpha must be > 0"),
    (dict(outlier_alpha=-1.0), ValueError, "outlier_alpha must be > 0"),
    (dict(outlier_alpha="big"), ValueError, "outlier_alpha"),  # "auto" is the one string
    (dict(outlier_alpha_scale=0.0), ValueError, "outlier_alpha_scale"),
    (dict(outlier_bound=0.0), ValueError, "outlier_bound must be > 0"),
    (dict(outlier_bound=-2.0), ValueError, "outlier_bound must be > 0"),
    (dict(solver="sgd"), ValueError, "solver"),
    (dict(solver="pgd", solver_params={"kappa": 0.0}), ValueError, "kappa"),
    (dict(solver="pgd", solver_params={"kappa": 1.5}), ValueError, "kappa"),
    (dict(solver_params={"rho": 0.0}), ValueError, "rho"),
    (dict(solver_params=[("rho", 2.0)]), TypeError, "solver_params"),
    (dict(constraint="box"), ValueError, "constraint"),
    (dict(constraint="elasticnet", gamma1=0.0, gamma2=0.0), ValueError, "gamma"),
    (dict(code_max_iter=0), ValueError, "code_max_iter"),
    (dict(alpha=-1.0), ValueError, "alpha must"),
    (dict(code_init="random"), ValueError, "code_init"),
    (dict(outlier_init="ones"), ValueError, "outlier_init"),
    (dict(group_size=0), ValueError, "group_size"),
    (dict(solver="pgd", solver_params={"accelerated": "yes"}), TypeError, "accelerated"),
    (dict(init="nndsvda"), ValueError, "init"),
    (dict(init=np.ones((2, 20))), ValueError, "init must have shape"),
    (dict(weights="fast"), ValueError, "weights"),
])
def test_bad_parameters_raise_before_learning(params, error, message):
    model = RobustOnlineNMF(**{"n_components": 3, **params})
    with pytest.raises(error, match=message):
        model.partial_fit(np.ones((3, 20)))
    assert not hasattr(model, "loadings_")


def test_bad_parameter_on_a_fitted_learner_keeps_state(fitted):
    before = _snapshot(fitted)
    fitted.set_params(outlier_bound=0.0)
    with pytest.raises(ValueError, match="outlier_bound must be > 0"):
        fitted.partial_fit(np.ones((3, 20)))
    assert _snapshot(fitted)[3:] == before[3:]


@pytest.mark.parametrize("params, message", [
    (dict(outlier_alpha=0.0), "outlier_alpha"), (dict(outlier_bound=0.0), "outlier_bound must be"),
    (dict(solver="bcd"), "solver"),
    (dict(max_time=0.0), "max_time"), (dict(init="nndsvda"), "init"),
])
def test_batch_bad_input(params, message):
    with pytest.raises(ValueError, match=message):
        RobustNMF(**{"n_components": 3, **params}).fit(np.ones((5, 8)))
    with pytest.raises(ValueError, match="negative"):
        RobustNMF(3).fit(-np.ones((5, 8)))
    with pytest.raises(ValueError, match=r"\(n_samples, n_features\)"):
        RobustNMF(3).fit(np.ones((5, 2, 4)))
    with pytest.raises(ValueError, match="not fitted"):
        RobustNMF(3).transform(np.ones((5, 8)))


def test_batch_overflow_is_refused_and_the_fit_kept():
    """Finite data whose squares overflow (raw units, ``data_scale=1.0``) make the factors
    NaN: ``fit`` says so (refused up front, before any iteration), naming ``X``, and a fitted
    learner keeps its previous fit."""
    X = np.random.default_rng(0).random((20, 6))
    model = RobustNMF(2, max_iter=5, data_scale=1.0, random_state=0).fit(X)
    components = np.array(model.components_)
    with pytest.raises(ValueError, match="X: the values are too large"):
        model.fit(1e160 * X)
    assert np.array_equal(model.components_, components)


def test_estimator_contract():
    from sklearn.base import clone

    model = RobustOnlineNMF(4, outlier_alpha=0.1, solver="pgd", constraint="simplex")
    assert clone(model).get_params() == model.get_params()
    assert "solver='pgd'" in repr(model)
    batch = RobustNMF(4, solver="pgd")
    assert clone(batch).get_params() == batch.get_params()


# -- slow: the spec's statistical reproductions (run with -m slow) --------------------------------


@pytest.mark.slow
def test_surrogate_is_insensitive_to_the_batch_size(ct_data):
    # spec item(s): spec 000 E5
    finals = []
    for tau in (5, 10, 20, 40):
        model = RobustOnlineNMF(49, batch_size=tau, random_state=2)
        _stream(model, ct_data.X, batch_size=tau)
        finals.append(model.surrogate_value())
    assert max(finals) <= 1.10 * min(finals)  # measured 0.509 / 0.516 / 0.527 / 0.538


@pytest.mark.slow
def test_more_atoms_fit_better(ct_data):
    # spec item(s): spec 000 E6
    finals = []
    for K in (25, 49, 100):
        model = RobustOnlineNMF(K, random_state=2)
        _stream(model, ct_data.X)
        finals.append(model.surrogate_value())
    assert finals[2] < finals[1] < finals[0]  # measured 0.474 < 0.509 < 0.654


@pytest.mark.slow
def test_opgd_with_tight_inner_solves_recovers_the_clean_data(ct_data):
    # spec item(s): spec 000 E7
    model = RobustOnlineNMF(49, solver="pgd", code_tol=1e-6, code_max_iter=500, random_state=2)
    H, _, _, _ = _stream(model, ct_data.X)
    assert psnr(ct_data.X_clean, H @ model.loadings_[0].T) >= 32  # measured 33.4


@pytest.mark.slow
def test_robustness_holds_under_heavier_outliers():
    # spec item(s): spec 000 E2
    for (nu, nu_tilde), floor in (((0.8, 0.2), 30), ((0.9, 0.3), 28)):
        data = synthetic_outlier_data(nu=nu, nu_tilde=nu_tilde, random_state=1)
        robust = RobustOnlineNMF(49, random_state=2)
        proxy = RobustOnlineNMF(49, outlier_alpha=np.inf, random_state=2)
        H, R, _, _ = _stream(robust, data.X)
        H_proxy, _, _, _ = _stream(proxy, data.X)
        gain = psnr(data.X_clean, H @ robust.loadings_[0].T) - psnr(
            data.X_clean, H_proxy @ proxy.loadings_[0].T)
        assert psnr(data.X_clean, H @ robust.loadings_[0].T) >= floor and gain >= 5
        assert support_scores(data.outliers, R)["f1"] >= 0.8


@pytest.mark.slow
def test_recovery_survives_additive_noise():
    # spec item(s): spec 000 E9
    data = synthetic_outlier_data(noise_std=0.01, random_state=1)
    model = RobustOnlineNMF(49, random_state=2)
    H, R, _, _ = _stream(model, data.X)
    assert psnr(data.X_clean, H @ model.loadings_[0].T) >= 33  # measured 35.7
    assert support_scores(data.planted, R)["f1"] >= 0.8  # measured 0.86


@pytest.mark.slow
def test_admm_rho_barely_matters_with_tight_inner_solves(ct_data):
    """On the canonical N = 5000 (the spec measured N = 20000, 14 minutes here): surrogate
    0.510 at rho = 1 and 0.526 at rho = 10 (ratio 1.031; 1.035 at N = 3000)."""
    # spec item(s): spec 000 E10
    finals = {}
    for rho in (1.0, 10.0):
        model = RobustOnlineNMF(49, solver_params={"rho": rho}, code_tol=1e-6,
                                code_max_iter=1000, random_state=2)
        _stream(model, ct_data.X)
        finals[rho] = model.surrogate_value()
    assert finals[10.0] <= 1.05 * finals[1.0]


@pytest.mark.slow
def test_online_reaches_the_target_with_less_work_than_batch(ct_data):
    """The paper's B3 (online reaches the batch objective sooner) counted in samples coded,
    not seconds: a timed assertion fails on a loaded machine. One online step codes its 5
    samples, one BADMM iteration all N; the time per coded sample is of the same order for both
    (``benchmarks/bench_nmf.py`` part 2 has the wall-clock comparison)."""
    # spec item(s): spec 000 B3
    model = RobustOnlineNMF(49, random_state=2)
    online_samples = None
    for begin in range(0, len(ct_data.X), 5):
        model.partial_fit(ct_data.X[begin:begin + 5])
        if model.n_steps_ % 20 == 0 and model.surrogate_value() <= 0.55:
            online_samples = model.n_samples_seen_
            break
    batch = RobustNMF(49, solver="admm", max_iter=400, random_state=2).fit(ct_data.X)
    reached = [info["iteration"] for info in batch.history_ if info["objective"] <= 0.55]
    batch_samples = reached[0] * len(ct_data.X) if reached else float("inf")
    assert online_samples is not None and batch_samples >= 3 * online_samples


@pytest.mark.slow
@pytest.mark.skipif(not importlib.util.find_spec("skimage"), reason="needs scikit-image")
def test_camera_video_acceptance():
    """Spec 5.7: OADMM, lam = 3/sqrt(F), K = 5: background PSNR >= 31 dB, foreground F1 >= 0.7."""
    from skimage.data import camera
    from skimage.transform import resize

    frames, backgrounds, masks = moving_patch_video(resize(camera() / 255.0, (48, 64)),
                                                    n_frames=200, random_state=0)
    X = frames.reshape(200, -1)
    stream, source = replicate(X, 10, random_state=0)
    model = RobustOnlineNMF(5, outlier_alpha_scale=3.0, random_state=0)
    H, R, _, _ = _stream(model, stream)
    background = H @ model.components_
    assert psnr(backgrounds.reshape(200, -1)[source], background) >= 31
    assert support_scores(masks.reshape(200, -1)[source], R, threshold=0.05)["f1"] >= 0.7


def test_a_reinitialised_atom_lands_in_the_chosen_constraint_set():
    """A dead atom re-initialised from the data is projected on the learner's set (C3 here:
    ``gamma1 ||w||_1 <= 1``), not on the unit ball alone (it reached 1.25 at the step it was
    re-initialised)."""
    import warnings

    from tensorstream.engine.loop import LearningWarning

    rng = np.random.default_rng(0)
    X = np.zeros((2000, 12))
    X[:, :6] = rng.random((2000, 2)) @ rng.random((2, 6))
    init = np.zeros((3, 12))
    init[0, :6], init[1, :6], init[2, 6:] = rng.random(6), rng.random(6), 1.0
    model = RobustOnlineNMF(3, constraint="elasticnet", gamma1=1.0, gamma2=0.0, init=init,
                            solver="pgd", code_init="zero", batch_size=100, random_state=0)
    reinitialised = False
    for i in range(20):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.partial_fit(X[100 * i:100 * (i + 1)])
        reinitialised |= any(issubclass(w.category, LearningWarning) and
                             "re-initialised" in str(w.message) for w in caught)
        assert np.all(model.components_ >= 0)
        assert model.components_.sum(axis=1).max() <= 1.0 + 1e-12
    assert reinitialised


def test_badmm_does_not_stop_on_a_turning_point_of_its_objective():
    """With tol > 0 (the default since BPGD became the default solver), BADMM stopped where its
    oscillating objective turned (relative change below tol), its W and Psi still ~90% apart:
    it stops only once its primal residuals are below tol too."""
    from sklearn.datasets import load_digits

    X = load_digits().data[:1000] / 16.0
    model = RobustNMF(10, solver="admm", max_iter=300, random_state=0).fit(X)
    last = model.history_[-1]
    residual = max(last["residual_H"], last["residual_E"], last["residual_W"])
    assert model.n_iter_ == 300 or residual < model.tol
