"""OnlineCPDL(loss=...): online nonnegative CP under KL/beta through the OL algorithm."""


import numpy as np
import pytest
import tensorly as tl
import xarray as xr
from scipy.optimize import linear_sum_assignment
from sklearn.base import clone

import tensorstream
from tensorstream import OnlineCPDL, OnlineNMF
from tensorstream.algorithms.divergence_cp import DivergenceCP
from tensorstream.algorithms.surrogate_cp import SurrogateCP
from tensorstream.learners.divergence_nmf import OnlineDivergenceNMF


def planted_counts(n, shape=(12, 10), K=3, scale=20.0, seed=0):
    """Poisson counts of a CP model whose atoms each load on their own block of every mode."""
    rng = np.random.default_rng(seed)
    loadings = []
    for size in shape:
        U = 0.1 * rng.random((size, K))
        for r, rows in enumerate(np.array_split(rng.permutation(size), K)):
            U[rows, r] += rng.uniform(0.5, 1.5, len(rows))
        loadings.append(U)
    H = rng.gamma(1.0, 1.0, (n, K))
    mean = np.einsum("nr,ir,jr->nij", H, *loadings)
    return rng.poisson(mean * scale / mean.mean()).astype(float), loadings


def matched_cosine(learned, truth):
    A = learned / np.linalg.norm(learned, axis=0)
    B = truth / np.linalg.norm(truth, axis=0)
    similarity = A.T @ B
    rows, cols = linear_sum_assignment(-similarity)
    return similarity[rows, cols].mean()


# steps for CP: the paper's a = b = 2e4 saturates loadings at the box (see docs/losses.md)
CP_STEPS = {"step_a": 500.0, "step_b": 2e4}


@pytest.mark.parametrize("seed", [0, 3])
def test_kl_cp_recovers_planted_loadings(seed):
    X, truth = planted_counts(1000, seed=seed)
    model = OnlineCPDL(3, loss="kl", batch_size=10, max_iter=5, code_max_iter=30,
                       random_state=0, **CP_STEPS).fit(X)
    cosines = [matched_cosine(tl.to_numpy(U), T) for U, T in zip(model.loadings_, truth)]
    assert min(cosines) >= 0.9  # measured: >= 0.99 on both seeds


def test_equals_divergence_nmf_exactly():
    X, _ = planted_counts(60, seed=1)
    params = dict(loss="kl", batch_size=10, max_iter=2, code_max_iter=20, code_tol=1e-4,
                  random_state=3, **CP_STEPS)
    cp = OnlineCPDL(3, **params).fit(X)
    nmf = OnlineDivergenceNMF(3, **params).fit(X)  # transform_tol: both the same default
    for U, V in zip(cp.loadings_, nmf.loadings_):
        np.testing.assert_array_equal(U, V)
    np.testing.assert_array_equal(cp.transform(X[:5]), nmf.transform(X[:5]))
    assert cp.score(X[:5]) == nmf.score(X[:5])
    assert cp.scale_ == nmf.scale_ and cp.statistics_ is None
    assert cp.n_steps_ == nmf.n_steps_ == 12


def test_transform_solves_to_transform_tol_as_divergence_nmf_does():
    """``transform`` and ``score`` code to ``transform_tol`` (1e-8), not to the training
    step's ``code_tol``: the codes are the result there."""
    X, _ = planted_counts(60, seed=1)
    params = dict(loss="kl", batch_size=10, max_iter=2, random_state=3, **CP_STEPS)
    cp = OnlineCPDL(3, **params).fit(X)
    exact = OnlineCPDL(3, **params, transform_tol=0.0, transform_max_iter=20000).fit(X)
    rough = OnlineCPDL(3, **params, transform_tol=1e-2).fit(X)
    truth = np.asarray(exact.transform(X[:20]))
    error = {name: np.abs(np.asarray(m.transform(X[:20])) - truth).sum() / truth.sum()
             for name, m in (("default", cp), ("rough", rough))}
    assert error["default"] < 2e-2 * error["rough"], error  # measured: 0.0015 and 0.30
    assert cp.score(X[:20]) >= rough.score(X[:20]) - 1e-12  # score = -KL at its codes
    with pytest.raises(ValueError, match="transform_tol"):
        OnlineCPDL(3, transform_tol=1e-4).fit(X)  # a divergence-only parameter
    with pytest.raises(ValueError, match="transform_tol"):
        cp.set_params(transform_tol=-1.0).transform(X[:2])


def test_beta_and_huber_losses_run():
    X, _ = planted_counts(40, seed=2)
    for loss, params in ((1.5, None), ("is", None), ("huber", {"threshold": 1.0})):
        model = OnlineCPDL(2, loss=loss, loss_params=params, batch_size=10, max_iter=1,
                           code_max_iter=10, random_state=0).fit(X)
        assert np.isfinite(model.score(X[:4]))
        assert all(tl.to_numpy(U).min() >= 0 and tl.to_numpy(U).max() <= 1
                   for U in model.loadings_)


def test_checkpoint_resume(tmp_path):
    X, _ = planted_counts(60, seed=4)
    batches = [X[i:i + 10] for i in range(0, 60, 10)]
    straight = OnlineCPDL(3, loss="kl", loss_params={"eps": 1e-10}, random_state=0, **CP_STEPS)
    for batch in batches:
        straight.partial_fit(batch)
    first = OnlineCPDL(3, loss="kl", loss_params={"eps": 1e-10}, random_state=0, **CP_STEPS)
    for batch in batches[:3]:
        first.partial_fit(batch)
    resumed = tensorstream.load(first.save(tmp_path / "kl_cp.npz"))
    assert type(resumed) is OnlineCPDL and resumed.loss == "kl"
    assert resumed.loss_ == first.loss_ and first.loss_params == {"eps": 1e-10}
    for batch in batches[3:]:
        resumed.partial_fit(batch)
    for U, V in zip(straight.loadings_, resumed.loadings_):
        np.testing.assert_array_equal(U, V)


def test_clone_params_and_switching():
    model = OnlineCPDL(2, loss="kl", step_a=100.0)
    twin = clone(model)
    assert twin.get_params() == model.get_params() and twin.loss == "kl"
    assert "loss='kl'" in repr(model) and "step_a=100.0" in repr(model)
    assert isinstance(model._algorithm(), DivergenceCP)
    squared = OnlineCPDL(2)
    assert isinstance(squared._algorithm(), SurrogateCP)
    assert repr(squared) == "OnlineCPDL(n_components=2)"
    for spelling in ("squared", "l2", "frobenius", 2.0):
        assert isinstance(OnlineCPDL(2, loss=spelling)._algorithm(), SurrogateCP)
    squared.set_params(loss="kl")
    assert isinstance(squared._algorithm(), DivergenceCP)
    assert not isinstance(OnlineNMF(2)._algorithm(), DivergenceCP)


def test_squared_loss_is_the_surrogate_engine():
    X = np.random.default_rng(0).random((40, 5, 4))
    default = OnlineCPDL(2, batch_size=10, max_iter=1, random_state=0).fit(X)
    named = OnlineCPDL(2, loss="squared", batch_size=10, max_iter=1, random_state=0).fit(X)
    for U, V in zip(default.loadings_, named.loadings_):
        np.testing.assert_array_equal(U, V)
    assert "weight" in default._last_info and np.isfinite(default.surrogate_value())
    kl = OnlineCPDL(2, loss="kl", batch_size=10, max_iter=1, random_state=0).fit(X)
    assert "step_size" in kl._last_info
    with pytest.raises(NotImplementedError):
        kl.surrogate_value()


def test_fit_on_streams_and_dataarrays():
    X, _ = planted_counts(40, seed=5)
    ref = OnlineCPDL(2, loss="kl", random_state=0, code_max_iter=10)
    for start in range(0, 40, 10):
        ref.partial_fit(X[start:start + 10])
    streamed = OnlineCPDL(2, loss="kl", random_state=0, code_max_iter=10).fit(
        X[i:i + 10] for i in range(0, 40, 10))
    for U, V in zip(ref.loadings_, streamed.loadings_):
        np.testing.assert_array_equal(U, V)
    da = xr.DataArray(X, dims=("time", "row", "col"),
                      coords={"row": np.arange(12) * 10, "col": list("abcdefghij")})
    labelled = OnlineCPDL(2, loss="kl", random_state=0, code_max_iter=10, batch_size=10).fit(
        da, sample_dim="time")
    codes = labelled.transform(da.isel(time=slice(0, 3)))
    assert codes.dims == ("time", "component") and codes.shape == (3, 2)
    assert set(labelled.factors_.data_vars) == {"row_loadings", "col_loadings"}


def test_backends_agree(backend):
    X, _ = planted_counts(40, seed=6)
    ref = OnlineCPDL(2, loss="kl", backend="numpy", batch_size=10, max_iter=1,
                     code_max_iter=20, random_state=0).fit(X)
    other = OnlineCPDL(2, loss="kl", backend=backend, batch_size=10, max_iter=1,
                       code_max_iter=20, random_state=0).fit(X)
    for U, V in zip(ref.loadings_, other.loadings_):
        np.testing.assert_allclose(tl.to_numpy(V), U, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(tl.to_numpy(other.transform(X[:4])), ref.transform(X[:4]),
                               rtol=1e-8, atol=1e-10)
    assert other.score(X[:4]) == pytest.approx(ref.score(X[:4]), rel=1e-8)


@pytest.mark.parametrize("params, message", [
    ({"loss": "kl", "alpha": 0.1}, "alpha=0.1 applies to the squared loss only"),
    ({"loss": "kl", "weights": 0.7}, "weights"),
    ({"loss": "kl", "search_radius": 0.1}, "search_radius"),
    ({"loss": "kl", "nonnegative": False}, "nonnegative"),
    ({"loss": "kl", "column_bound": None}, "column_bound"),
    ({"loss": "is", "missing": "nan"}, "missing"),
    ({"loss": 1.5, "dict_passes": 2}, "dict_passes"),
    ({"step_a": 10.0}, "step_a=10.0 applies to divergence losses only"),
    ({"loss": "squared", "loss_params": {"eps": 1.0}}, "loss_params"),
    ({"normalize": False}, "normalize"),
    ({"code_step": "armijo"}, "code_step"),
    ({"loss": "nope"}, "one of"),
    ({"loss": "beta"}, "needs the parameter"),
    ({"loss": "kl", "grad_reduction": "max"}, "grad_reduction"),
])
def test_bad_combinations_raise_and_keep_state(params, message):
    X, _ = planted_counts(20, seed=7)
    base = params["loss"] if params.get("loss") in ("kl", "is", 1.5) else "squared"
    fitted = OnlineCPDL(2, loss=base, random_state=0, code_max_iter=5).partial_fit(X[:10])
    before = [tl.to_numpy(U).copy() for U in fitted.loadings_]
    fitted.set_params(**params)
    with pytest.raises(ValueError, match=message):
        fitted.partial_fit(X[10:])
    assert fitted.n_steps_ == 1
    for U, V in zip(before, fitted.loadings_):
        np.testing.assert_array_equal(U, tl.to_numpy(V))
    with pytest.raises(ValueError, match=message):
        OnlineCPDL(2, **params).fit(X)


def test_bad_data_for_the_loss_keeps_state():
    X, _ = planted_counts(20, seed=8)
    model = OnlineCPDL(2, loss="kl", random_state=0, code_max_iter=5).partial_fit(X[:10])
    before = [tl.to_numpy(U).copy() for U in model.loadings_]
    bad = X[10:].copy()
    bad[0, 0, 0] = -1.0
    with pytest.raises(ValueError, match="negative"):
        model.partial_fit(bad)
    with pytest.raises(ValueError, match="mask"):
        model.partial_fit(X[10:], mask=np.ones(X[10:].shape, dtype=bool))
    with pytest.raises(ValueError, match="shape"):
        model.partial_fit(X[10:, :5])
    assert model.n_steps_ == 1
    for U, V in zip(before, model.loadings_):
        np.testing.assert_array_equal(U, V)
    # Huber accepts negative data (codes and loadings stay nonnegative)
    huber = OnlineCPDL(2, loss="huber", loss_params={"threshold": 1.0}, random_state=0,
                       code_max_iter=5).partial_fit(X[:10] - 1.0)
    assert huber.n_steps_ == 1
