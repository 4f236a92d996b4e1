"""OnlineNMF: the one-mode CP engine with scikit-learn's MiniBatchNMF conventions."""

import importlib.util
import warnings

import numpy as np
import pytest
import tensorly as tl

from tensorstream import OnlineCPDL, load
from tensorstream.algorithms.nmf import Discounted, nndsvda
from tensorstream.coders.lasso import sparse_code
from tensorstream.core.backend import using
from tensorstream.learners.nmf import OnlineNMF
from tensorstream.steps.surrogate import surrogate_value

sklearn = pytest.importorskip("sklearn")
from sklearn.decomposition import NMF, MiniBatchNMF  # noqa: E402


def _data(n=120, F=15, K=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n, K)) @ rng.random((K, F)) + 0.05 * rng.random((n, F))


def _objective_by_hand(X, codes, components, alpha_W, alpha_H, l1_ratio):
    """scikit-learn's documented MiniBatchNMF objective, divided by n_samples."""
    n, F = X.shape
    value = 0.5 * np.sum((X - codes @ components) ** 2)
    value += alpha_W * l1_ratio * F * codes.sum() + 0.5 * alpha_W * (1 - l1_ratio) * F * np.sum(
        codes**2)
    value += alpha_H * l1_ratio * n * components.sum() + 0.5 * alpha_H * (1 - l1_ratio) * n * \
        np.sum(components**2)
    return value / n


# -- one code base: the engine's iterates ---------------------------------------------------------


@pytest.mark.parametrize("l1_ratio", [1.0, 0.0, 0.4])
def test_online_nmf_is_online_cpdl_with_one_mode_iterate_by_iterate(l1_ratio):
    X = _data()
    F = X.shape[1]
    alpha_W = 0.002
    init = [np.random.default_rng(1).random((F, 3))]
    ours = OnlineNMF(3, alpha_W=alpha_W, alpha_H=0.0, l1_ratio=l1_ratio, init=init,
                     column_bound=1.0, coder="pivoting", code_tol=1e-5, code_max_iter=300)
    # scikit-learn's per-sample 1/2 ||x - Wh||^2 + alpha_W F (l1 |h| + (1 - l1)/2 |h|^2): the
    # convention of OnlineCPDL's alpha and ridge too
    engine = OnlineCPDL(3, alpha=alpha_W * F * l1_ratio, ridge=alpha_W * F * (1 - l1_ratio),
                        init=init, weights=0.5)  # OnlineNMF's default schedule (t^-0.5)
    for start in range(0, len(X), 10):
        ours.partial_fit(X[start:start + 10])
        engine.partial_fit(X[start:start + 10])
        np.testing.assert_array_equal(ours.loadings_[0], engine.loadings_[0])
        for key in ("A", "B"):
            np.testing.assert_array_equal(ours.statistics_[key], engine.statistics_[key])
    assert ours.statistics_["c"] == engine.statistics_["c"]
    np.testing.assert_allclose(ours.surrogate_value(), 0.5 * engine.surrogate_value())
    np.testing.assert_allclose(ours.score(X), 0.5 * engine.score(X))


def test_the_coders_differ_and_hals_is_refused_by_name():
    X = _data()
    runs = [OnlineNMF(3, coder=coder, batch_size=20, max_iter=2, random_state=0).fit(X)
            for coder in ("pivoting", "admm")]
    assert not np.array_equal(runs[0].loadings_[0], runs[1].loadings_[0])
    with pytest.raises(ValueError, match="coder"):
        OnlineNMF(3, coder="hals").fit(X)


def test_admm_coder_solves_the_same_problem_as_pivoting():
    X = _data()
    hals = OnlineNMF(3, alpha_W=0.001, l1_ratio=0.5, coder="pivoting", code_tol=1e-12,
                     code_max_iter=5000, random_state=0).fit(X)
    admm = OnlineNMF(3, alpha_W=0.001, l1_ratio=0.5, coder="admm", code_tol=0,
                     code_max_iter=5000, random_state=0)
    admm.__dict__.update({k: hals.__dict__[k] for k in hals.__dict__ if k.endswith("_")
                          or k in ("_context", "_rng")})
    np.testing.assert_allclose(admm.transform(X), hals.transform(X), atol=1e-7)
    np.testing.assert_allclose(admm.score(X), hals.score(X), rtol=1e-10)


# -- scikit-learn's conventions -------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("alpha_W, l1_ratio", [(0.0, 0.0), (0.003, 1.0), (0.002, 0.3)])
def test_transform_solves_scikit_learns_problem(alpha_W, l1_ratio):
    """Same components and alpha_W/l1_ratio: the codes of scikit-learn's NMF (cd) transform."""
    X = _data(F=20)
    model = OnlineNMF(4, alpha_W=alpha_W, l1_ratio=l1_ratio, batch_size=30, random_state=0,
                      code_tol=1e-12, code_max_iter=20000).fit(X)
    reference = NMF(4, solver="cd", alpha_W=alpha_W, l1_ratio=l1_ratio, tol=1e-12,
                    max_iter=20000, init="custom")
    reference.fit(X, W=np.full((len(X), 4), 0.1), H=np.asarray(model.components_))
    reference.components_ = components = np.asarray(model.components_)
    ours, theirs = model.transform(X[:20]), reference.transform(X[:20])
    # the learned components can be ill-conditioned: compare objectives tightly, codes loosely
    F = X.shape[1]

    def objective(codes):
        return 0.5 * np.sum((X[:20] - codes @ components) ** 2, axis=1) + alpha_W * F * (
            l1_ratio * codes.sum(axis=1) + 0.5 * (1 - l1_ratio) * np.sum(codes**2, axis=1))

    np.testing.assert_allclose(objective(ours), objective(theirs), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ours, theirs, atol=1e-4)


def test_objective_is_scikit_learns_divided_by_n_samples():
    X = _data()
    model = OnlineNMF(3, alpha_W=0.001, alpha_H=0.01, l1_ratio=0.3, random_state=0,
                      code_tol=1e-12, code_max_iter=5000).fit(X)
    codes = np.asarray(model.transform(X))
    expected = _objective_by_hand(X, codes, np.asarray(model.components_), 0.001, 0.01, 0.3)
    np.testing.assert_allclose(model.objective(X), expected, rtol=1e-10)
    assert model.get_params()["alpha_H"] == 0.01


def test_components_penalty_in_the_dictionary_step_is_exact():
    """With alpha_H the column steps minimise the penalised surrogate: many passes converge to
    its minimiser (KKT), each step lowers it."""
    X = _data(n=200)
    l1 = l2 = 0.05 * 0.5

    def penalised(stats, W):
        return 0.5 * surrogate_value(stats["A"], stats["B"], stats["c"], [W]) + \
            l1 * W.sum() + 0.5 * l2 * np.sum(W * W)

    model = OnlineNMF(3, alpha_H=0.05, l1_ratio=0.5, batch_size=20, column_bound=None,
                      random_state=0)
    model.partial_fit(X[:20])
    for start in range(20, 200, 20):
        old = model.loadings_[0].copy()
        model.partial_fit(X[start:start + 20])
        # forward monotonicity: with the new statistics the step lowers the penalised surrogate
        assert model.surrogate_value() <= penalised(model.statistics_, old) + 1e-12
        np.testing.assert_allclose(model.surrogate_value(),
                                   penalised(model.statistics_, model.loadings_[0]))
        assert np.asarray(model.components_).min() >= 0
    stats = model.statistics_
    converged = OnlineNMF(3, alpha_H=0.05, l1_ratio=0.5, dict_passes=3000, column_bound=None,
                          random_state=0)._algorithm().update({}, stats, model.loadings_, 1)
    W = converged[0]
    gradient = W @ stats["A"] - stats["B"] + l1 + l2 * W  # of the 1/2-scale surrogate
    assert np.abs(gradient[W > 1e-9]).max() < 1e-7
    assert gradient[W <= 1e-9].min() > -1e-7


def test_objective_comparable_to_scikit_learns_minibatch_nmf():
    """Same data, same init, same number of passes: a held-out objective no worse."""
    from sklearn.datasets import load_digits

    X = load_digits().data / 16.0
    train, test = X[:1400], X[1400:]
    rng = np.random.default_rng(0)
    components = np.abs(rng.standard_normal((10, 64))) * np.sqrt(train.mean() / 10)
    ours = OnlineNMF(10, batch_size=200, max_iter=20, forget_factor=0.7, init=components,
                     random_state=0).fit(train)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = MiniBatchNMF(10, batch_size=200, max_iter=20, forget_factor=0.7, init="custom",
                              random_state=0, tol=0, max_no_improvement=None)
        theirs.fit(train, W=np.full((len(train), 10), 0.1), H=components.copy())

    def held_out(C):
        G, P = C @ C.T, test @ C.T
        H, _ = sparse_code(G, P, max_iter=3000, tol=1e-10)
        return 0.5 * np.mean(np.sum((test - H @ C) ** 2, axis=1))

    ours_value, theirs_value = held_out(np.asarray(ours.components_)), \
        held_out(theirs.components_)
    assert ours_value <= 1.02 * theirs_value
    assert ours.n_steps_ == 20 * 7


# -- weights: forget_factor, 1/t, t^-beta ---------------------------------------------------------


def test_discounted_weights_are_normalised_discounted_sums():
    factor = 0.6
    values = [np.random.default_rng(t).random() for t in range(1, 12)]
    weights = Discounted(factor)
    mean, total, norm = 0.0, 0.0, 0.0
    for t, v in enumerate(values, 1):
        w = weights(t)
        mean = (1 - w) * mean + w * v
        total, norm = factor * total + v, factor * norm + 1
        np.testing.assert_allclose(mean, total / norm)
    assert Discounted(1.0)(4) == 0.25 and weights(1) == 1.0


def test_forget_factor_in_partial_fit_and_fit():
    X = _data()
    init = [np.random.default_rng(1).random((X.shape[1], 3))]
    by_factor = OnlineNMF(3, forget_factor=0.5, init=init)
    by_weights = OnlineNMF(3, weights=Discounted(0.5), init=init)
    for start in range(0, 120, 20):
        by_factor.partial_fit(X[start:start + 20])
        by_weights.partial_fit(X[start:start + 20])
    np.testing.assert_array_equal(by_factor.loadings_[0], by_weights.loadings_[0])
    assert by_factor.weights == 0.5  # the hyper-parameter is restored after each step
    # fit on an array discounts by forget_factor per pass: (0.5)^(batch/n) per batch
    fitted = OnlineNMF(3, forget_factor=0.5, batch_size=30, max_iter=2, init=init,
                       random_state=0).fit(X)
    reference = OnlineNMF(3, weights=Discounted(0.5 ** (30 / 120)), batch_size=30, max_iter=2,
                          init=init, random_state=0).fit(X)
    np.testing.assert_array_equal(fitted.loadings_[0], reference.loadings_[0])
    assert "_epoch_samples" not in fitted.__dict__


def test_power_weights_and_conflicts():
    X = _data()
    model = OnlineNMF(3, weights=0.75, batch_size=20, max_iter=1, random_state=0).fit(X)
    assert model.n_steps_ == 6
    with pytest.raises(ValueError, match="either forget_factor or weights"):
        OnlineNMF(3, weights=0.75, forget_factor=0.5).partial_fit(X)


# -- initialisation ------------------------------------------------------------------------------


def _nndsvda_reference(X, k):
    """NNDSVDa following scikit-learn's loop, with an exact SVD."""
    U, S, Vt = np.linalg.svd(X, full_matrices=False)
    H = np.zeros((k, X.shape[1]))
    H[0] = np.sqrt(S[0]) * np.abs(Vt[0])
    for j in range(1, k):
        x, y = U[:, j], Vt[j]
        xp, yp, xn, yn = np.maximum(x, 0), np.maximum(y, 0), -np.minimum(x, 0), -np.minimum(y, 0)
        mp, mn = np.linalg.norm(xp) * np.linalg.norm(yp), np.linalg.norm(xn) * np.linalg.norm(yn)
        v, sigma = (yp / np.linalg.norm(yp), mp) if mp > mn else (yn / np.linalg.norm(yn), mn)
        H[j] = np.sqrt(S[j] * sigma) * v
    H[H < 1e-6] = 0
    H[H == 0] = X.mean()
    return H


def test_nndsvda_initialisation(backend):
    X = _data(n=40, F=12)
    with using("numpy"):
        expected = _nndsvda_reference(X, 4)
    np.testing.assert_allclose(tl.to_numpy(nndsvda(tl.tensor(X), 4)).T, expected, atol=1e-10)
    model = OnlineNMF(4, init="nndsvda", random_state=0).partial_fit(X)
    assert model.n_steps_ == 1
    with pytest.raises(ValueError, match="nndsvda"):
        OnlineNMF(5, init="nndsvda").partial_fit(X[:3])


def test_random_and_array_initialisations():
    X = _data()
    model = OnlineNMF(3, random_state=0)
    state = model._initial_state(X[:10])
    W = state["state_"].loadings[0]
    assert W.shape == (15, 3) and W.min() >= 0
    np.testing.assert_allclose(np.median(W), np.sqrt(X[:10].mean() / 3) * 0.674, rtol=0.5)
    components = np.random.default_rng(2).random((3, 15))
    model = OnlineNMF(3, init=components, column_bound=None)
    np.testing.assert_array_equal(model._initial_state(X)["state_"].loadings[0], components.T)
    bounded = OnlineNMF(3, init=components)._initial_state(X)["state_"].loadings[0]  # projected
    np.testing.assert_allclose(bounded, components.T / np.linalg.norm(components, axis=1))
    with pytest.raises(ValueError, match=r"init must have shape \(n_components, n_features\)"):
        OnlineNMF(3, init=np.ones((2, 15))).partial_fit(X)
    with pytest.raises(ValueError, match="init has negative"):
        OnlineNMF(3, init=-components).partial_fit(X)


# -- the estimator --------------------------------------------------------------------------------


def test_scikit_learn_shapes_and_round_trips():
    X = _data(n=80, F=12)
    model = OnlineNMF(3, batch_size=16, max_iter=5, random_state=0)
    codes = model.fit_transform(X)
    assert model.components_.shape == (3, 12) and codes.shape == (80, 3)
    assert model.n_components_ == 3 and model.n_features_in_ == 12
    np.testing.assert_allclose(model.inverse_transform(codes), codes @ model.components_)
    assert model.objective(X) < 0.05 * 0.5 * np.mean(np.sum(X**2, axis=1))
    with pytest.raises(ValueError, match=r"shape \(n_samples, n_features\)"):
        OnlineNMF(3).partial_fit(X.reshape(80, 3, 4))


def test_estimator_contract():
    from sklearn.base import clone

    model = OnlineNMF(3, alpha_W=0.1, forget_factor=0.5, init="nndsvda")
    twin = clone(model)
    assert twin.get_params() == model.get_params()
    assert "alpha_W=0.1" in repr(model)


def test_missing_entries_use_the_masked_coder():
    X = _data()
    X[::7, 3] = np.nan
    model = OnlineNMF(3, missing="nan", batch_size=20, max_iter=2, random_state=0).fit(X)
    assert np.all(np.isfinite(model.components_))
    assert model.transform(X[:5]).shape == (5, 3)


@pytest.mark.skipif(not importlib.util.find_spec("torch"), reason="needs torch")
def test_backend_parity(backend):
    X = _data()
    with using("numpy"):
        reference = OnlineNMF(3, alpha_W=0.001, alpha_H=0.01, l1_ratio=0.5, batch_size=20,
                              max_iter=2, random_state=0, code_tol=1e-8).fit(X)
    other = OnlineNMF(3, alpha_W=0.001, alpha_H=0.01, l1_ratio=0.5, batch_size=20, max_iter=2,
                      random_state=0, code_tol=1e-8).fit(tl.tensor(X))
    assert other.backend_ == backend
    np.testing.assert_allclose(tl.to_numpy(other.components_), reference.components_,
                               rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("params", [dict(), dict(forget_factor=0.5, alpha_W=0.001,
                                                 alpha_H=0.01, l1_ratio=0.2),
                                    dict(init="nndsvda", weights=0.7)])
def test_checkpoint_resume_equals_uninterrupted_run(backend, tmp_path, params):
    X = _data()
    batches = [tl.tensor(X[start:start + 12]) for start in range(0, 120, 12)]
    straight = OnlineNMF(3, random_state=0, **params)
    for batch in batches:
        straight.partial_fit(batch)
    interrupted = OnlineNMF(3, random_state=0, **params)
    for batch in batches[:4]:
        interrupted.partial_fit(batch)
    resumed = load(interrupted.save(tmp_path / "nmf.npz"))
    assert type(resumed) is OnlineNMF and resumed.get_params() == interrupted.get_params()
    for batch in batches[4:]:
        resumed.partial_fit(batch)
    np.testing.assert_array_equal(tl.to_numpy(resumed.components_),
                                  tl.to_numpy(straight.components_))


def test_array_init_is_not_checkpointed_but_the_list_form_is(tmp_path):
    X = _data()
    components = np.random.default_rng(2).random((3, 15))
    with pytest.raises(TypeError, match="init"):
        OnlineNMF(3, init=components).partial_fit(X).save(tmp_path / "a.npz")
    model = OnlineNMF(3, init=[components.T]).partial_fit(X)
    assert load(model.save(tmp_path / "b.npz")).n_steps_ == 1


def _snapshot(model):
    stats = model.statistics_
    return (model.loadings_[0].copy(), stats["A"].copy(), stats["B"].copy(), stats["c"],
            model.n_steps_, model._rng.bit_generator.state, model.weights)


@pytest.mark.parametrize("batch, error, message", [
    (-np.ones((4, 15)), ValueError, "negative entries"),
    (np.full((4, 15), np.nan), ValueError, "NaN or infinite"),
    (np.ones((4, 16)), ValueError, "features, but OnlineNMF is expecting"),
    (np.ones((4, 3, 5)), ValueError, "samples of shape"),
    (None, TypeError, "got None"),
])
def test_bad_batches_leave_the_state(batch, error, message):
    model = OnlineNMF(3, random_state=0, forget_factor=0.5).partial_fit(_data()[:20])
    before = _snapshot(model)
    with pytest.raises(error, match=message):
        model.partial_fit(batch)
    after = _snapshot(model)
    for a, b in zip(before[:3], after[:3]):
        np.testing.assert_array_equal(a, b)
    assert before[3:] == after[3:]


@pytest.mark.parametrize("params, error, message", [
    (dict(alpha_W=-1.0), ValueError, "alpha_W must be >= 0"),
    (dict(alpha_H=-0.1), ValueError, "alpha_H must be >= 0"),
    (dict(alpha_H="different"), ValueError, "alpha_H must be >= 0 or one of .same."),
    (dict(l1_ratio=1.5), ValueError, "l1_ratio"),
    (dict(forget_factor=0.0), ValueError, "forget_factor"),
    (dict(forget_factor=1.5), ValueError, "forget_factor"),
    (dict(init="svd"), ValueError, "init must be"),
    (dict(coder="cd"), ValueError, "coder"),
    (dict(n_threads=0), ValueError, "n_threads"),
    (dict(n_components=0), ValueError, "n_components"),
    (dict(column_bound=0.0), ValueError, "column_bound"),
])
def test_bad_parameters_raise_before_learning(params, error, message):
    model = OnlineNMF(**{"n_components": 3, **params})
    with pytest.raises(error, match=message):
        model.partial_fit(_data()[:10])
    assert not hasattr(model, "loadings_")


def test_objective_with_penalties_on_torch_equals_numpy():
    """``objective`` adds the components' penalty on the learner's backend (on torch it
    raised TypeError: sum() got an unexpected keyword argument 'axis')."""
    torch = pytest.importorskip("torch")
    X = np.random.default_rng(0).random((20, 5))
    on_numpy = OnlineNMF(2, alpha_W=0.1, random_state=0).partial_fit(X)
    on_torch = OnlineNMF(2, alpha_W=0.1, random_state=0).partial_fit(torch.tensor(X))
    assert on_torch.objective(torch.tensor(X)) == pytest.approx(on_numpy.objective(X),
                                                                 rel=1e-12)


def test_the_components_penalty_with_missing_entries_is_refused_by_name():
    """``alpha_H`` (``"same"`` copies ``alpha_W``) with missing entries is refused naming it,
    before any step with ``missing="nan"`` and at the step with a mask (it failed mid-fit with
    the engine's "loading penalties l1, l2" message); ``alpha_H=0`` learns."""
    X = np.random.default_rng(0).random((60, 10))
    X[0, 0] = np.nan
    with pytest.raises(ValueError, match="alpha_H"):
        OnlineNMF(3, missing="nan", alpha_W=0.01).fit(X)
    model = OnlineNMF(3, alpha_W=0.01)
    with pytest.raises(ValueError, match="alpha_H"):
        model.partial_fit(np.nan_to_num(X), mask=~np.isnan(X))
    assert "state_" not in model.__dict__
    OnlineNMF(3, missing="nan", alpha_W=0.01, alpha_H=0.0).fit(X)


@pytest.mark.parametrize("coder", ["admm", "pivoting"])
def test_code_tol_and_code_max_iter_reach_either_coder(monkeypatch, coder):
    """``code_tol`` and ``code_max_iter`` mean the same for both coders (the tolerance and the
    iteration cap of the one that runs); ``code_tol=None`` is that coder's own tolerance."""
    import tensorstream.algorithms.nmf as nmf_algorithm

    seen = []
    pivoting, admm = nmf_algorithm.sparse_code, nmf_algorithm.nonnegative_code_admm
    monkeypatch.setattr(nmf_algorithm, "sparse_code", lambda *a, **k: seen.append(
        ("pivoting", k["tol"], k["max_iter"])) or pivoting(*a, **k))
    monkeypatch.setattr(nmf_algorithm, "nonnegative_code_admm", lambda *a, **k: seen.append(
        ("admm", k["residual_tol"], k["max_iter"])) or admm(*a, **k))
    X = np.random.default_rng(0).random((20, 8))
    default = {"admm": nmf_algorithm.ADMM_TOL, "pivoting": nmf_algorithm._PIVOTING_TOL}[coder]
    for tol, cap in ((None, 100), (1e-7, 7)):
        seen.clear()
        OnlineNMF(2, coder=coder, code_tol=tol, code_max_iter=cap, batch_size=20,
                  random_state=0).fit(X, n_steps=1)
        assert seen == [(coder, default if tol is None else tol, cap)]
