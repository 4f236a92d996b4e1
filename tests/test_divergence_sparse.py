"""Sparse input for the divergence learners: KL on the support only, equal to dense input."""

import tracemalloc

import numpy as np
import pytest
import scipy.sparse
import sparse

from tensorstream.coders.divergence import (
    SparseKL,
    code_divergence_matrix,
    code_divergence_sparse,
    supports_sparse,
)
from tensorstream.core.validation import check_sparse_batch, is_sparse
from tensorstream.learners.divergence_nmf import OnlineDivergenceNMF
from tensorstream.losses import get_loss

TOL = dict(rtol=1e-10, atol=1e-12)


def sparse_counts(n=60, F=30, K=3, density=0.15, seed=0):
    """Poisson counts of a low-rank model, thinned to about ``density`` nonzeros."""
    rng = np.random.default_rng(seed)
    W, H = rng.random((F, K)), rng.gamma(1.0, 1.0, (n, K))
    mean = H @ W.T
    keep = rng.random((n, F)) < density
    return np.where(keep, rng.poisson(5 * mean / mean.mean()), 0).astype(float)


CONTAINERS = {
    "csr": scipy.sparse.csr_matrix, "csc": scipy.sparse.csc_matrix,
    "coo": scipy.sparse.coo_matrix, "csr_array": scipy.sparse.csr_array,
    "pydata": sparse.COO.from_numpy,
}


def test_sparse_kl_algebra_matches_dense():
    V = sparse_counts(8, 12)
    rng = np.random.default_rng(1)
    W, H = rng.random((12, 3)), rng.random((8, 3)) + 0.1
    kl, loss = SparseKL(scipy.sparse.csr_matrix(V), W), get_loss("kl")
    Y = kl.model(H)
    dense_model = H @ W.T
    np.testing.assert_allclose(Y, dense_model[V > 0], **TOL)
    np.testing.assert_allclose(kl.per_sample(H, Y), loss.per_sample(V, dense_model), **TOL)
    G = loss.gradient(V, dense_model)
    np.testing.assert_allclose(kl.code_gradient(Y), G @ W, **TOL)
    np.testing.assert_allclose(kl.dictionary_gradient(H, Y), G.T @ H, **TOL)
    assert supports_sparse("kl") and supports_sparse(1.0) and not supports_sparse("is")


@pytest.mark.parametrize("options", [{}, {"ridge": 0.5}, {"step": "armijo", "tol": 1e-8}])
def test_sparse_codes_match_dense(options):
    V = sparse_counts(40, 25)
    W = np.random.default_rng(2).random((25, 4))
    H_dense, info_dense = code_divergence_matrix(V, W, "kl", max_iter=60, **options)
    H_sparse, info_sparse = code_divergence_sparse(scipy.sparse.csr_matrix(V), W, "kl",
                                                   max_iter=60, **options)
    np.testing.assert_allclose(H_sparse, H_dense, **TOL)
    np.testing.assert_allclose(info_sparse["objective"], info_dense["objective"], **TOL)
    np.testing.assert_array_equal(info_sparse["iterations"], info_dense["iterations"])


def test_sparse_coder_rejects_what_it_cannot_do():
    V, W = scipy.sparse.csr_matrix(sparse_counts(4, 5)), np.ones((5, 2))
    with pytest.raises(ValueError, match="support-only"):
        code_divergence_sparse(V, W, "is")
    with pytest.raises(ValueError, match="lower"):
        code_divergence_sparse(V, W, lower=None)
    with pytest.raises(ValueError, match="nonnegative"):
        code_divergence_sparse(V, -W)
    with pytest.raises(ValueError, match="shape"):
        code_divergence_sparse(V, np.ones((4, 2)))
    # the step is resolved once, by solve_sparse_kl: its errors still reach this caller
    with pytest.raises(ValueError, match="step must be"):
        code_divergence_sparse(V, W, step="newton")
    with pytest.raises(ValueError, match="lipschitz"):
        code_divergence_sparse(V, W, step="constant", gram=W.T @ W)


@pytest.mark.parametrize("container", list(CONTAINERS))
def test_learner_sparse_equals_dense(container):
    X = sparse_counts(60, 30)
    S = CONTAINERS[container](X)
    dense = OnlineDivergenceNMF(3, random_state=0, code_max_iter=30)
    model = OnlineDivergenceNMF(3, random_state=0, code_max_iter=30)
    for start in range(0, 60, 15):
        dense.partial_fit(X[start:start + 15])
        model.partial_fit(scipy.sparse.csr_matrix(S)[start:start + 15]
                          if container != "pydata" else S[start:start + 15])
    np.testing.assert_allclose(model.components_, dense.components_, **TOL)
    np.testing.assert_allclose(model.transform(S), dense.transform(X), **TOL)
    assert model.score(S) == pytest.approx(dense.score(X), rel=1e-10)
    weights = np.arange(60.0)
    assert model.score(S, sample_weight=weights) == pytest.approx(
        dense.score(X, sample_weight=weights), rel=1e-10)


def test_fit_on_sparse_matches_dense():
    X = sparse_counts(50, 20, seed=3)
    # small steps: with the paper's a = b = 2e4 this small problem saturates loadings at the
    # box and rounding-level differences can flip a clip (chaotic, not a sparse-path error)
    params = dict(loss="kl", batch_size=10, max_iter=2, random_state=0, code_max_iter=20,
                  step_a=500.0)
    dense = OnlineDivergenceNMF(2, **params).fit(X)
    for container in (scipy.sparse.coo_matrix(X), sparse.COO.from_numpy(X)):
        model = OnlineDivergenceNMF(2, **params).fit(container)
        np.testing.assert_allclose(model.loadings_[0], dense.loadings_[0], **TOL)
        np.testing.assert_allclose(model.fit_transform(container), dense.fit_transform(X),
                                   **TOL)


def test_kl_sparse_path_never_forms_a_dense_batch(monkeypatch):
    rng = np.random.default_rng(0)
    b, F, nnz = 2000, 50000, 100_000
    # positions drawn with replacement (duplicates are summed): scipy.sparse.random samples
    # without replacement from all b * F positions, which alone took 7.6 s
    X = scipy.sparse.csr_matrix((rng.poisson(3.0, nnz) + 1.0,
                                 (rng.integers(0, b, nnz), rng.integers(0, F, nnz))),
                                shape=(b, F))

    def refuse(self, *args, **kwargs):
        raise AssertionError("a sparse batch was densified")

    for cls in (scipy.sparse.csr_matrix, scipy.sparse.csc_matrix, scipy.sparse.coo_matrix):
        monkeypatch.setattr(cls, "toarray", refuse)
        monkeypatch.setattr(cls, "todense", refuse)
    model = OnlineDivergenceNMF(5, random_state=0, code_max_iter=5)
    tracemalloc.start()
    try:
        model.partial_fit(X)
        codes = model.transform(X)
        score = model.score(X)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    dense_bytes = b * F * 8  # 800 MB
    assert peak < dense_bytes / 20  # measured: about 20 MB
    assert codes.shape == (b, 5) and np.isfinite(score)


def test_other_losses_densify_each_batch_exactly():
    X = sparse_counts(30, 12, seed=4) + 0.5 * (sparse_counts(30, 12, seed=4) > 0)
    for loss in ("is", 1.5):
        dense = OnlineDivergenceNMF(2, loss=loss, random_state=0, code_max_iter=10)
        model = OnlineDivergenceNMF(2, loss=loss, random_state=0, code_max_iter=10)
        for start in range(0, 30, 10):
            dense.partial_fit(X[start:start + 10])
            model.partial_fit(scipy.sparse.csr_matrix(X[start:start + 10]))
        np.testing.assert_array_equal(model.components_, dense.components_)


def test_tensor_samples_densify():
    X = sparse_counts(30, 12, seed=5).reshape(30, 4, 3)
    dense = OnlineDivergenceNMF(2, random_state=0, code_max_iter=10, batch_size=10).fit(X)
    model = OnlineDivergenceNMF(2, random_state=0, code_max_iter=10, batch_size=10).fit(
        sparse.COO.from_numpy(X))
    for U, V in zip(model.loadings_, dense.loadings_):
        np.testing.assert_array_equal(U, V)


def test_duplicates_are_summed_and_input_untouched():
    X = sparse_counts(20, 10, seed=6)
    rows, cols = np.nonzero(X)
    half = X[rows, cols] / 2
    duplicated = scipy.sparse.coo_matrix((np.concatenate([half, half]),
                                          (np.tile(rows, 2), np.tile(cols, 2))), shape=X.shape)
    data_before = duplicated.data.copy()
    checked = check_sparse_batch(duplicated)
    assert checked.format == "csr" and checked.nnz == len(rows)
    np.testing.assert_array_equal(duplicated.data, data_before)
    a = OnlineDivergenceNMF(2, random_state=0, code_max_iter=10).partial_fit(duplicated)
    b = OnlineDivergenceNMF(2, random_state=0, code_max_iter=10).partial_fit(X)
    np.testing.assert_allclose(a.components_, b.components_, **TOL)
    assert is_sparse(duplicated) and is_sparse(sparse.COO.from_numpy(X)) and not is_sparse(X)


def _bad_batches(X):
    negative = scipy.sparse.csr_matrix(X)
    negative.data[0] = -1.0
    nan = scipy.sparse.csr_matrix(X)
    nan.data[1] = np.nan
    inf = sparse.COO.from_numpy(X)
    inf.data[0] = np.inf
    return [
        (negative, ValueError, "negative"),
        (nan, ValueError, "NaN"),
        (inf, ValueError, "NaN or infinite"),
        (scipy.sparse.csr_matrix(X[:, :5]), ValueError, "features, but OnlineDivergenceNMF"),
        (scipy.sparse.csr_matrix((0, X.shape[1])), ValueError, "empty"),
        (scipy.sparse.csr_matrix(X.astype(complex)), TypeError, "real"),
    ]


def test_bad_sparse_input_raises_and_keeps_state():
    X = sparse_counts(20, 10, seed=7)
    fresh = OnlineDivergenceNMF(2, random_state=0)
    with pytest.raises(ValueError, match="negative"):
        fresh.partial_fit(_bad_batches(X)[0][0])
    assert "loadings_" not in fresh.__dict__
    model = OnlineDivergenceNMF(2, random_state=0, code_max_iter=10).partial_fit(X[:10])
    before = np.array(model.components_)
    for batch, error, message in _bad_batches(X[10:]):
        with pytest.raises(error, match=message):
            model.partial_fit(batch)
        with pytest.raises(error, match=message):
            model.transform(batch)
    with pytest.raises(ValueError, match="mask"):
        model.partial_fit(scipy.sparse.csr_matrix(X[10:]), mask=np.ones((10, 10), dtype=bool))
    assert model.n_steps_ == 1
    np.testing.assert_array_equal(model.components_, before)


def test_pytorch_backend_refuses_sparse_input():
    pytest.importorskip("torch")
    X = sparse_counts(20, 10, seed=8)
    model = OnlineDivergenceNMF(2, backend="pytorch", random_state=0)
    with pytest.raises(TypeError, match="numpy backend"):
        model.partial_fit(scipy.sparse.csr_matrix(X))
    assert "loadings_" not in model.__dict__
    model.partial_fit(X)
    with pytest.raises(TypeError, match="numpy backend"):
        model.transform(sparse.COO.from_numpy(X))
    assert tuple(model.transform(X[:2]).shape) == (2, 2)


def test_mu_codes_equal_whether_or_not_converged_samples_leave_the_working_set(monkeypatch):
    """Dropping converged samples mid-solve only saves work: codes, per-sample iteration
    counts, flags and objectives are those of the loop that keeps every sample."""
    import tensorstream.coders.divergence.solver as divergence

    X = scipy.sparse.csr_matrix(sparse_counts(n=400, F=40, K=4, density=0.3, seed=5))
    W = np.random.default_rng(5).random((40, 4))
    options = dict(tol=1e-9, max_iter=400)
    monkeypatch.setattr(divergence, "_MIN_DROP", 8)
    dropped, info = code_divergence_sparse(X, W, "kl", **options)
    assert len(np.unique(info["iterations"])) > 10  # samples stop at many iterations
    monkeypatch.setattr(divergence, "_MIN_DROP", 10**9)
    kept, reference = code_divergence_sparse(X, W, "kl", **options)
    np.testing.assert_array_equal(dropped, kept)
    np.testing.assert_array_equal(info["iterations"], reference["iterations"])
    np.testing.assert_array_equal(info["converged"], reference["converged"])
    np.testing.assert_allclose(info["objective"], reference["objective"], rtol=1e-14)
    # the models of the samples that left are kept: the whole batch's model, not rebuilt
    np.testing.assert_allclose(info["model"], reference["model"], rtol=1e-14)
    np.testing.assert_allclose(info["model"], SparseKL(X, W).model(dropped), rtol=1e-14)
