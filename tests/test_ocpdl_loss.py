"""Online nonnegative CP of tensor samples under KL/beta: OnlineDivergenceNMF's OL algorithm.

``OnlineCPDL`` is the squared loss's learner only (no ``loss`` parameter, so that each of its
parameters means something for every value of the others); the divergences' CP dictionaries
are :class:`OnlineDivergenceNMF`'s, which takes tensor samples as it takes matrices.
"""


import numpy as np
import pytest
import tensorly as tl
import xarray as xr
from scipy.optimize import linear_sum_assignment
from sklearn.base import clone

import tensorstream
from tensorstream import OnlineCPDL
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
    model = OnlineDivergenceNMF(3, loss="kl", batch_size=10, max_iter=5, code_max_iter=30,
                       random_state=0, **CP_STEPS).fit(X)
    cosines = [matched_cosine(tl.to_numpy(U), T) for U, T in zip(model.loadings_, truth)]
    assert min(cosines) >= 0.9  # measured: >= 0.99 on both seeds


def test_transform_solves_to_transform_tol():
    """``transform`` and ``score`` code to ``transform_tol`` (1e-8), not to the training
    step's ``code_tol``: the codes are the result there."""
    X, _ = planted_counts(60, seed=1)
    params = dict(loss="kl", batch_size=10, max_iter=2, random_state=3, **CP_STEPS)
    cp = OnlineDivergenceNMF(3, **params).fit(X)
    exact = OnlineDivergenceNMF(3, **params, transform_tol=0.0, transform_max_iter=20000).fit(X)
    rough = OnlineDivergenceNMF(3, **params, transform_tol=1e-2).fit(X)
    truth = np.asarray(exact.transform(X[:20]))
    error = {name: np.abs(np.asarray(m.transform(X[:20])) - truth).sum() / truth.sum()
             for name, m in (("default", cp), ("rough", rough))}
    assert error["default"] < 2e-2 * error["rough"], error  # measured: 0.0015 and 0.30
    assert cp.score(X[:20]) >= rough.score(X[:20]) - 1e-12  # score = -KL at its codes
    with pytest.raises(ValueError, match="transform_tol"):
        cp.set_params(transform_tol=-1.0).transform(X[:2])


def test_beta_and_huber_losses_run():
    X, _ = planted_counts(40, seed=2)
    for loss, params in ((1.5, None), ("is", None), ("huber", {"threshold": 1.0})):
        model = OnlineDivergenceNMF(2, loss=loss, loss_params=params, batch_size=10, max_iter=1,
                           code_max_iter=10, random_state=0).fit(X)
        assert np.isfinite(model.score(X[:4]))
        assert all(tl.to_numpy(U).min() >= 0 and tl.to_numpy(U).max() <= 1
                   for U in model.loadings_)


def test_checkpoint_resume(tmp_path):
    X, _ = planted_counts(60, seed=4)
    batches = [X[i:i + 10] for i in range(0, 60, 10)]
    kl = dict(loss="kl", loss_params={"eps": 1e-10}, random_state=0, **CP_STEPS)
    straight = OnlineDivergenceNMF(3, **kl)
    for batch in batches:
        straight.partial_fit(batch)
    first = OnlineDivergenceNMF(3, **kl)
    for batch in batches[:3]:
        first.partial_fit(batch)
    resumed = tensorstream.load(first.save(tmp_path / "kl_cp.npz"))
    assert type(resumed) is OnlineDivergenceNMF and resumed.loss == "kl"
    assert resumed.loss_ == first.loss_ and first.loss_params == {"eps": 1e-10}
    for batch in batches[3:]:
        resumed.partial_fit(batch)
    for U, V in zip(straight.loadings_, resumed.loadings_):
        np.testing.assert_array_equal(U, V)


def test_clone_and_the_two_learners():
    model = OnlineDivergenceNMF(2, loss="is", step_a=100.0)
    twin = clone(model)
    assert twin.get_params() == model.get_params() and twin.loss == "is"
    assert "loss='is'" in repr(model) and "step_a=100.0" in repr(model)
    assert isinstance(model._algorithm(), DivergenceCP)
    squared = OnlineCPDL(2)
    assert isinstance(squared._algorithm(), SurrogateCP)
    assert repr(squared) == "OnlineCPDL(n_components=2)"
    with pytest.raises(TypeError, match="loss"):  # the divergences are OnlineDivergenceNMF's
        OnlineCPDL(2, loss="kl")
    X = np.random.default_rng(0).random((40, 5, 4))
    fitted = OnlineCPDL(2, batch_size=10, max_iter=1, random_state=0).fit(X)
    assert "weight" in fitted._last_info and np.isfinite(fitted.surrogate_value())
    kl = OnlineDivergenceNMF(2, batch_size=10, max_iter=1, random_state=0).fit(X)
    assert "step_size" in kl._last_info


def test_fit_on_streams_and_dataarrays():
    X, _ = planted_counts(40, seed=5)
    ref = OnlineDivergenceNMF(2, loss="kl", random_state=0, code_max_iter=10)
    for start in range(0, 40, 10):
        ref.partial_fit(X[start:start + 10])
    streamed = OnlineDivergenceNMF(2, loss="kl", random_state=0, code_max_iter=10).fit(
        X[i:i + 10] for i in range(0, 40, 10))
    for U, V in zip(ref.loadings_, streamed.loadings_):
        np.testing.assert_array_equal(U, V)
    da = xr.DataArray(X, dims=("time", "row", "col"),
                      coords={"row": np.arange(12) * 10, "col": list("abcdefghij")})
    labelled = OnlineDivergenceNMF(2, loss="kl", random_state=0, code_max_iter=10,
                                   batch_size=10).fit(da, sample_dim="time")
    codes = labelled.transform(da.isel(time=slice(0, 3)))
    assert codes.dims == ("time", "component") and codes.shape == (3, 2)
    assert set(labelled.factors_.data_vars) == {"row_loadings", "col_loadings"}


def test_backends_agree(backend):
    X, _ = planted_counts(40, seed=6)
    ref = OnlineDivergenceNMF(2, loss="kl", backend="numpy", batch_size=10, max_iter=1,
                     code_max_iter=20, random_state=0).fit(X)
    other = OnlineDivergenceNMF(2, loss="kl", backend=backend, batch_size=10, max_iter=1,
                       code_max_iter=20, random_state=0).fit(X)
    for U, V in zip(ref.loadings_, other.loadings_):
        np.testing.assert_allclose(tl.to_numpy(V), U, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(tl.to_numpy(other.transform(X[:4])), ref.transform(X[:4]),
                               rtol=1e-8, atol=1e-10)
    assert other.score(X[:4]) == pytest.approx(ref.score(X[:4]), rel=1e-8)


@pytest.mark.parametrize("params, message", [
    ({"code_step": "armijo", "loss": "is", "step_a": -1.0}, "step_a"),
    ({"loss": "nope"}, "one of"),
    ({"loss": "beta"}, "needs the parameter"),
    ({"loss": "kl", "grad_reduction": "max"}, "grad_reduction"),
    ({"loss": "kl", "dict_step": "sgd", "dict_rounds": 3}, "dict_rounds"),
])
def test_bad_combinations_raise_and_keep_state(params, message):
    X, _ = planted_counts(20, seed=7)
    fitted = OnlineDivergenceNMF(2, random_state=0, code_max_iter=5).partial_fit(X[:10])
    before = [tl.to_numpy(U).copy() for U in fitted.loadings_]
    fitted.set_params(**params)
    with pytest.raises(ValueError, match=message):
        fitted.partial_fit(X[10:])
    assert fitted.n_steps_ == 1
    for U, V in zip(before, fitted.loadings_):
        np.testing.assert_array_equal(U, tl.to_numpy(V))
    with pytest.raises(ValueError, match=message):
        OnlineDivergenceNMF(2, **params).fit(X)


def test_bad_data_for_the_loss_keeps_state():
    X, _ = planted_counts(20, seed=8)
    model = OnlineDivergenceNMF(2, loss="kl", random_state=0, code_max_iter=5).partial_fit(X[:10])
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
    huber = OnlineDivergenceNMF(2, loss="huber", loss_params={"threshold": 1.0}, random_state=0,
                       code_max_iter=5).partial_fit(X[:10] - 1.0)
    assert huber.n_steps_ == 1
