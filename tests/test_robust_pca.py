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
    (dict(basis_sweeps=0), "basis_sweeps"),
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
