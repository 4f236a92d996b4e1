"""The max-norm paper's baselines (spec 002, section 2.9): OR-PCA and batch PCP by inexact ALM,
including S10 (``slow``)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorly as tl
from test_maxnorm import (
    FIGURE4,
    FIGURE4_GROUP,
    _final,
    oracle_run,
    paper_orpca,
    small_problem,
    stream,
)

from tensorstream.datasets.maxnorm import corrupted_low_rank
from tensorstream.learners.robust_pca import RobustPCA
from tensorstream.metrics import expressed_variance

# -- OR-PCA ---------------------------------------------------------------------------------------

def test_orpca_reproduces_the_reference_loop():
    """Ridge coding without an iteration cap, then one sweep on A + lambda1 I (sum form)."""
    data, L0 = small_problem(seed=2, p=30, d=4, n=50, rho=0.2)
    lam = 1 / np.sqrt(30)
    L, A, B, codes = oracle_run(data.Z, L0, lam, lam, orpca=True)
    model = stream(paper_orpca(4, init=[L0]), data.Z)
    np.testing.assert_allclose(model.loadings_[0], L, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(model.statistics_["A"] * 50, A, rtol=1e-9, atol=1e-11)
    assert np.linalg.norm(model.loadings_[0], axis=0).max() <= 1 + 1e-12


def test_orpca_coding_has_no_iteration_cap():
    data = corrupted_low_rank(50, 5, 30, 0.5, random_state=0)
    model = stream(paper_orpca(5, random_state=0), data.Z)
    out = model._algorithm().robust_codes(tl.tensor(data.Z), model.loadings_[0], model.scale_)
    assert out.n_iter.max() > 100


def test_orpca_recovers_a_low_rank_subspace(backend):
    data = corrupted_low_rank(40, 4, 400, 0.1, random_state=1)
    model = paper_orpca(4, random_state=0, batch_size=20, backend=backend).fit(data.Z)
    assert expressed_variance(data.U, model.loadings_[0]) > 0.97


def test_orpca_backend_parity(backend):
    data = corrupted_low_rank(20, 3, 100, 0.2, random_state=3)
    reference = stream(paper_orpca(3, random_state=0), data.Z).loadings_[0]
    model = stream(paper_orpca(3, random_state=0, backend=backend), data.Z)
    np.testing.assert_allclose(tl.to_numpy(model.loadings_[0]), reference, rtol=1e-8,
                               atol=1e-10)


@pytest.mark.parametrize("params, message", [
    (dict(norm_alpha=0.0), "norm_alpha must be > 0"),
    (dict(outlier_alpha=-1.0), "outlier_alpha"),
    (dict(dict_passes=0), "dict_passes"),
    (dict(column_bound=0.0), "column_bound"),
    (dict(code_max_iter=0), "code_max_iter"),
])
def test_orpca_bad_parameters(params, message):
    model = paper_orpca(2, **params)
    with pytest.raises(ValueError, match=message):
        model.partial_fit(np.ones((2, 5)))
    assert not hasattr(model, "loadings_")


# -- PCP by inexact ALM ---------------------------------------------------------------------------

def test_pcp_exact_recovery_on_a_small_problem():
    data = corrupted_low_rank(50, 3, 400, 0.1, random_state=0)
    pcp = RobustPCA(3).fit(data.Z)
    assert pcp.n_iter_ < 100
    assert expressed_variance(data.U, pcp.loadings_[0]) > 1 - 1e-8
    error = np.linalg.norm(pcp.low_rank_ - data.X) / np.linalg.norm(data.X)
    assert error < 0.02  # the nuclear norm shrinks the low-rank part a little
    assert np.linalg.norm(data.Z - pcp.low_rank_ - pcp.sparse_) / np.linalg.norm(data.Z) < 1e-7
    np.testing.assert_allclose(pcp.components_ @ pcp.components_.T, np.eye(3), atol=1e-10)
    assert pcp.components_.shape == (3, 50)


def test_pcp_defaults_follow_the_reference_code():
    data = corrupted_low_rank(20, 2, 80, 0.05, random_state=1)
    default = RobustPCA().fit(data.Z)
    explicit = RobustPCA(outlier_alpha=1 / np.sqrt(80)).fit(data.Z)  # 1/sqrt(max(n, p))
    np.testing.assert_array_equal(default.low_rank_, explicit.low_rank_)
    # without n_components: every direction with a nonzero singular value
    assert len(default.singular_values_) == default.components_.shape[0] >= 2
    np.testing.assert_array_equal(default.fit_transform(data.Z), default.low_rank_)
    other = RobustPCA(outlier_alpha=1 / np.sqrt(20)).fit(data.Z)
    assert not np.array_equal(other.low_rank_, default.low_rank_)


def test_pcp_backend_parity(backend):
    data = corrupted_low_rank(20, 2, 60, 0.1, random_state=2)
    reference = RobustPCA(2).fit(data.Z)
    pcp = RobustPCA(2, backend=backend).fit(data.Z)
    np.testing.assert_allclose(tl.to_numpy(pcp.low_rank_), reference.low_rank_, rtol=1e-7,
                               atol=1e-8)
    assert pcp.n_iter_ == reference.n_iter_


def _planted(n, p, rank, seed=0):
    """A rank-``rank`` matrix plus 5% sparse spikes and a little dense noise."""
    rng = np.random.default_rng(seed)
    M = rng.standard_normal((n, rank)) @ rng.standard_normal((rank, p))
    M[rng.random((n, p)) < 0.05] += 10 * rng.standard_normal()
    return M + 1e-3 * rng.standard_normal((n, p))


@pytest.mark.parametrize("shape", [(30, 80), (80, 30), (40, 40)])
def test_svt_from_the_gram_matrix_equals_the_svd_one(backend, shape):
    """Every singular value above the threshold is kept, however many: from one kept
    direction to all of them (the rank of the result grows with no prediction to outgrow)."""
    from tensorstream.algorithms.pcp import _svt_by_svd, singular_value_threshold

    M = tl.tensor(_planted(*shape, rank=5))
    s = np.linalg.svd(tl.to_numpy(M), compute_uv=False)
    for threshold in (0.9 * s[0], s[4] * 0.99, 0.5 * s[5], 0.5 * s[-1], 1e-5 * s[0]):
        gram = tl.to_numpy(singular_value_threshold(M, float(threshold)))
        svd = tl.to_numpy(_svt_by_svd(M, float(threshold)))
        assert np.linalg.matrix_rank(svd, tol=1e-9 * s[0]) == np.sum(s > threshold)
        np.testing.assert_allclose(gram, svd, rtol=0, atol=1e-11 * s[0])
    assert not np.any(tl.to_numpy(singular_value_threshold(M, 1.01 * float(s[0]))))


def test_svt_falls_back_to_the_svd_where_the_gram_matrix_loses_accuracy(backend, monkeypatch):
    from tensorstream.algorithms import pcp

    M = tl.tensor(_planted(20, 50, rank=3))
    s1 = float(np.linalg.norm(tl.to_numpy(M), 2))
    calls = []
    monkeypatch.setattr(pcp, "_svt_by_svd", lambda *args: calls.append(args) or args[0])
    pcp.singular_value_threshold(M, 1e-5 * s1)
    assert not calls
    pcp.singular_value_threshold(M, 1e-7 * s1)  # below 100 sqrt(eps) s_1 = 1.5e-6 s_1
    assert len(calls) == 1


def test_pcp_from_the_gram_matrix_solves_as_the_svd_one(backend, monkeypatch):
    """Planted low rank + sparse: the Gram path reaches the SVD path's solution to the
    solver's tolerance, in as many iterations."""
    from tensorstream.algorithms import pcp

    data = corrupted_low_rank(30, 3, 120, 0.1, random_state=4)
    Z = tl.tensor(data.Z)
    gram = RobustPCA(3, backend=backend).fit(Z)
    monkeypatch.setattr(pcp, "singular_value_threshold", pcp._svt_by_svd)
    svd = RobustPCA(3, backend=backend).fit(Z)
    low_gram, low_svd = tl.to_numpy(gram.low_rank_), tl.to_numpy(svd.low_rank_)
    scale = np.linalg.norm(data.Z)
    assert np.linalg.norm(low_gram - low_svd) / scale < 1e-7
    assert abs(gram.n_iter_ - svd.n_iter_) <= 1
    # the data carry dense noise: recovery to its level
    assert np.linalg.norm(low_gram - data.X) / np.linalg.norm(data.X) < 2e-2


def test_pcp_parameters_contract():
    from sklearn.base import clone

    pcp = RobustPCA(4, outlier_alpha=0.1)
    assert clone(pcp).get_params() == pcp.get_params()
    assert repr(pcp) == "RobustPCA(n_components=4, outlier_alpha=0.1)"


@pytest.mark.parametrize("X, params, error, message", [
    (np.ones((5, 4)), dict(outlier_alpha=0.0), ValueError, "outlier_alpha must be > 0"),
    (np.ones((5, 4)), dict(rho=0.5), ValueError, "rho"),
    (np.ones((5, 4)), dict(max_iter=0), ValueError, "max_iter"),
    (np.ones((5, 4)), dict(n_components=5), ValueError, "n_components"),
    (np.ones((5, 4, 2)), dict(), ValueError, "matrix"),
    (np.full((5, 4), np.nan), dict(), ValueError, "NaN"),
])
def test_pcp_bad_input(X, params, error, message):
    with pytest.raises(error, match=message):
        RobustPCA(**params).fit(X)


# -- S10 (slow): PCP on the Figure-4 setting -------------------------------------------------------

@pytest.mark.slow
@FIGURE4_GROUP
@pytest.mark.parametrize("rho, threshold", [(0.01, 0.999), (0.1, 0.999), (0.3, 0.97),
                                            (0.5, 0.88)])
def test_batch_pcp_beats_omrmd_and_orpca_on_the_figure_4_setting(rho, threshold):
    # spec item(s): spec 002 S10
    data = corrupted_low_rank(*FIGURE4, rho, random_state=0)
    pcp = expressed_variance(data.U, RobustPCA(80).fit(data.Z).loadings_[0])
    assert pcp >= threshold
    assert pcp >= _final("omrmd", *FIGURE4, rho, (0,))
    assert pcp >= _final("orpca", *FIGURE4, rho, (0,))


# -- found by review (2026-11-26) -----------------------------------------------------------------

from tensorstream.learners.maxnorm import OnlineMaxNormMD  # noqa: E402
from tensorstream.learners.robust_pca import OnlineRobustPCA  # noqa: E402

ROBUST_MATRIX = [OnlineMaxNormMD, OnlineRobustPCA]


@pytest.mark.parametrize("cls", ROBUST_MATRIX)
def test_outliers_and_impute_of_labelled_data_are_labelled_and_read_by_name(cls):
    """outliers() and impute() dropped the labels and read a transposed DataArray as its
    values, silently decoding features as samples."""
    xr = pytest.importorskip("xarray")
    d = corrupted_low_rank(20, 3, 100, 0.1, random_state=0)
    da = xr.DataArray(d.Z, dims=("time", "feat"),
                      coords={"time": np.arange(100), "feat": [f"f{i}" for i in range(20)]})
    model = cls(3, random_state=0).fit(da, sample_dim="time")
    batch = da[:20]  # square: a transposed batch has the same shape
    E = model.outliers(batch)
    assert isinstance(E, xr.DataArray) and E.dims == ("time", "feat")
    plain = cls(3, random_state=0).fit(d.Z)
    np.testing.assert_allclose(E.values, plain.outliers(d.Z[:20]), rtol=1e-9, atol=1e-12)
    xr.testing.assert_equal(model.outliers(batch.transpose("feat", "time")), E)
    mask = xr.DataArray(np.random.default_rng(0).random(batch.shape) > 0.3, dims=batch.dims)
    filled = model.impute(batch, mask=mask)
    assert filled.dims == ("time", "feat") and list(filled.feat.values) == list(da.feat.values)
    np.testing.assert_allclose(filled.values, plain.impute(d.Z[:20], mask=mask.values),
                               rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("cls", ROBUST_MATRIX)
def test_missing_entries_do_not_move_the_data_scale(cls):
    """The scale (each sample's median absolute entry) counted the zeros behind the mask:
    with 60% missing it halved, and so did the outlier threshold in data units."""
    d = corrupted_low_rank(50, 3, 200, 0.0, random_state=0)
    observed = np.random.default_rng(0).random(d.X.shape) > 0.6
    junk = np.where(observed, d.X, 1e6)
    expected = np.mean([np.median(np.abs(x[m])) for x, m in zip(d.X[:10], observed[:10])])
    model = cls(3, random_state=0).partial_fit(junk[:10], mask=observed[:10])
    assert model.scale_ == pytest.approx(expected, rel=1e-12)
    full = cls(3, random_state=0).partial_fit(d.X[:10])
    assert model.scale_ == pytest.approx(full.scale_, rel=0.2)


def test_robust_online_nmf_scale_and_random_start_ignore_missing_entries():
    from tensorstream import OnlineNMF, RobustOnlineNMF

    rng = np.random.default_rng(0)
    X = rng.random((30, 12))
    observed = rng.random(X.shape) > 0.5
    zeroed, junk = np.where(observed, X, 0.0), np.where(observed, X, 1e6)
    robust = RobustOnlineNMF(3, random_state=0).partial_fit(junk, mask=observed)
    # the mean of the observed entries, each row's winsorised at 5 times its observed median
    limits = [5 * np.median(row[seen]) for row, seen in zip(X, observed)]
    expected = np.mean(np.concatenate([np.minimum(row[seen], limit)
                                       for row, seen, limit in zip(X, observed, limits)]))
    assert robust.scale_ == pytest.approx(expected, rel=1e-12)
    first = OnlineNMF(3, init="random", random_state=0).partial_fit(zeroed, mask=observed)
    again = OnlineNMF(3, init="random", random_state=0).partial_fit(junk, mask=observed)
    np.testing.assert_array_equal(first.components_, again.components_)


@pytest.mark.parametrize("cls", ROBUST_MATRIX)
def test_code_tol_zero_without_an_iteration_cap_is_refused(cls):
    """It coded forever (a sample stops when its iterates move by less than code_tol)."""
    d = corrupted_low_rank(20, 3, 100, 0.1, random_state=0)
    with pytest.raises(ValueError, match="code_tol=0 with code_max_iter=None"):
        cls(3, code_tol=0.0, code_max_iter=None, random_state=0).partial_fit(d.Z[:10])
    cls(3, code_tol=0.0, code_max_iter=5, random_state=0).partial_fit(d.Z[:10])


@pytest.mark.parametrize("cls", ROBUST_MATRIX)
@pytest.mark.parametrize("c", [1.0, 1e-4])
def test_re_initialised_atoms_respect_the_column_bound_in_the_datas_units(cls, c):
    """All atoms dead (a zero init): the new columns had norm 1 in raw units, beyond the
    bound and not scaling with the data."""
    d = corrupted_low_rank(20, 3, 100, 0.1, random_state=0)
    model = cls(3, init=np.zeros((20, 3)), random_state=0).partial_fit(c * d.Z[:10])
    bound = model._algorithm().column_bound_of(20) * model.scale_
    norms = np.linalg.norm(model.loadings_[0], axis=0)
    assert np.all(norms <= bound * (1 + 1e-12)) and np.all(norms > 0)
    if c != 1.0:
        unit = cls(3, init=np.zeros((20, 3)), random_state=0).partial_fit(d.Z[:10])
        np.testing.assert_allclose(norms, c * np.linalg.norm(unit.loadings_[0], axis=0),
                                   rtol=1e-9)


def test_samples_with_fewer_observed_entries_than_atoms_get_finite_codes_without_ridge():
    """ridge=0: the masked Gram of such a sample is singular and the r-step was 0/0."""
    from tensorstream.coders.maxnorm import robust_code

    d = corrupted_low_rank(20, 3, 100, 0.1, random_state=0)
    rng = np.random.default_rng(0)
    for k in (1, 2):
        for _ in range(20):
            L = rng.standard_normal((20, 3))
            mask = np.zeros((1, 20))
            mask[0, rng.choice(20, k, replace=False)] = 1
            out = robust_code(d.Z[:1], L, 0.5, ridge=0.0, mask=mask)
            assert np.all(np.isfinite(out.codes)) and np.all(np.isfinite(out.low_rank))
    Z = d.Z.copy()
    Z[1, 1:] = np.nan
    OnlineMaxNormMD(3, ridge=0.0, missing="nan", batch_size=100, random_state=0).fit(Z)


def test_batch_robust_pca_rank_of_float32_data():
    """float32 data kept rounding noise (1e-8 of the top singular value) as components."""
    d = corrupted_low_rank(40, 3, 200, 0.1, random_state=0)
    for dtype in (np.float64, np.float32):
        pcp = RobustPCA().fit(d.Z.astype(dtype))
        assert len(pcp.singular_values_) == 3 and pcp.components_.shape == (3, 40)


def test_corruption_count_rounds_halves_up_as_the_authors_matlab():
    for p, n, rho in [(5, 1, 0.5), (10, 5, 0.05)]:
        data = corrupted_low_rank(p, 1, n, rho, random_state=0)
        assert int((data.E != 0).sum()) == 3
