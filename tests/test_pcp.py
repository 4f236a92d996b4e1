"""Batch PCP's numerics (``tensorstream.algorithms.pcp``): the cheaper pieces equal what they
replace."""

from __future__ import annotations

import numpy as np
import pytest
import tensorly as tl
from hypothesis import given
from hypothesis import strategies as st

from tensorstream.algorithms.pcp import spectral_norm


def _low_rank(n, p, rank, seed, scale=1.0):
    """An ``n x p`` matrix of rank ``rank`` (0: the zero matrix), entries of size ``scale``."""
    rng = np.random.default_rng(seed)
    return scale * rng.standard_normal((n, rank)) @ rng.standard_normal((rank, p))


@given(n=st.integers(1, 40), p=st.integers(1, 40), rank=st.integers(0, 40),
       seed=st.integers(0, 2**16), exponent=st.integers(-100, 100))
def test_spectral_norm_equals_the_svds_largest_singular_value(n, p, rank, seed, exponent):
    """Tall, wide, square, rank-deficient (down to zero) and far from unit scale: the top
    eigenvalue of the short side's Gram matrix gives ``s_1`` to 1e-10."""
    M = _low_rank(n, p, min(rank, n, p), seed, scale=2.0 ** exponent)
    expected = np.linalg.svd(M, compute_uv=False)[0]
    assert spectral_norm(tl.tensor(M)) == pytest.approx(expected, rel=1e-10, abs=0)


@pytest.mark.parametrize("shape, rank", [((30, 7), 7), ((7, 30), 3), ((20, 20), 1), ((5, 9), 0)])
def test_spectral_norm_on_every_backend(backend, shape, rank):
    M = _low_rank(*shape, rank, seed=1)
    expected = np.linalg.svd(M, compute_uv=False)[0]
    assert spectral_norm(tl.tensor(M)) == pytest.approx(expected, rel=1e-10, abs=0)


# -- the default growth of mu against the reference code's ---------------------------------------

def _decaying(n, p, decay, seed=0):
    """``(clean, corrupted)``: singular values ``10 decay^k`` (a spectrum like real images',
    no clear rank) and +-1 on 5% of the entries."""
    rng = np.random.default_rng(seed)
    U = np.linalg.qr(rng.standard_normal((n, p)))[0]
    V = np.linalg.qr(rng.standard_normal((p, p)))[0]
    X = (U * (10 * decay ** np.arange(p))) @ V.T
    hit = rng.random(X.shape) < 0.05
    Z = X.copy()
    Z[hit] += rng.choice([-1.0, 1.0], int(hit.sum()))
    return X, Z


def _error(model, X):
    return np.linalg.norm(model.low_rank_ - X) / np.linalg.norm(X)


def test_paper_params_are_the_reference_codes_schedule():
    from tensorstream.learners.robust_pca import RobustPCA

    assert RobustPCA.paper_params == {"change_tol": 1e-5, "rho": 1.7}
    X, Z = _decaying(100, 20, 0.8)
    paper = RobustPCA(**RobustPCA.paper_params).fit(Z)
    default = RobustPCA().fit(Z)
    # the reference's schedule is a different run (a stricter settling test, mu grown by 1.7):
    # more iterations, the same split to the stopping rule's accuracy
    assert paper.n_iter_ > default.n_iter_
    np.testing.assert_allclose(paper.low_rank_, default.low_rank_, atol=1e-3 * np.abs(Z).max())


def test_default_schedule_is_faster_on_a_decaying_spectrum_at_the_same_split():
    """Real images have no clear rank: the growth of ``mu`` waits for the change criterion,
    and the default's looser one halves the iterations; the split stays the reference's to
    1e-3 (recovery equal to 1e-4), with the same residual ``tol``."""
    from tensorstream.learners.robust_pca import RobustPCA

    X, Z = _decaying(400, 40, 0.8)
    paper = RobustPCA(**RobustPCA.paper_params).fit(Z)
    default = RobustPCA().fit(Z)
    assert default.n_iter_ < 0.6 * paper.n_iter_
    scale = np.linalg.norm(paper.low_rank_)
    assert np.linalg.norm(default.low_rank_ - paper.low_rank_) / scale < 1e-3
    assert abs(_error(default, X) - _error(paper, X)) < 1e-4
    for model in (default, paper):
        residual = Z - model.low_rank_ - model.sparse_
        assert np.linalg.norm(residual) / np.linalg.norm(Z) < 1e-7


@pytest.mark.parametrize("seed", [0, 1, 3, 4])
def test_default_schedule_recovers_planted_low_rank_at_least_as_well(seed):
    """Exactly low-rank data (the max-norm paper's recipe): ``mu`` grows nearly every
    iteration under either rule, and the default's slower growth (1.3, not 1.7) lands
    closer to the planted matrix, in at most twice the iterations."""
    from tensorstream.datasets.maxnorm import corrupted_low_rank
    from tensorstream.learners.robust_pca import RobustPCA

    data = corrupted_low_rank(50, 3, 400, 0.1, random_state=seed)
    paper = RobustPCA(3, **RobustPCA.paper_params).fit(data.Z)
    default = RobustPCA(3).fit(data.Z)
    assert _error(default, data.X) < _error(paper, data.X)
    assert default.n_iter_ <= 2 * paper.n_iter_


def test_float32_data_converge_to_the_float64_split(backend):
    """float32 rounding alone keeps the residual about the default ``tol`` of 1e-7: the
    tolerance is floored at 10 epsilons of the dtype, so the fit stops (it ran to
    ``max_iter`` on the SVD path, 17x the time) at the float64 split to float32 accuracy."""
    from tensorstream.learners.robust_pca import RobustPCA

    _, Z = _decaying(200, 30, 0.8)
    double = RobustPCA().fit(Z)
    single = RobustPCA(backend=backend).fit(tl.tensor(Z.astype(np.float32)))
    low_rank = tl.to_numpy(single.low_rank_)
    assert low_rank.dtype == np.float32
    assert single.n_iter_ < 1.5 * double.n_iter_ < 1000
    scale = np.linalg.norm(double.low_rank_)
    assert np.linalg.norm(low_rank - double.low_rank_) / scale < 1e-4
    residual = Z - low_rank - tl.to_numpy(single.sparse_)
    assert np.linalg.norm(residual) / np.linalg.norm(Z) < 2e-6


def test_spectral_norm_of_a_non_matrix_is_refused_by_name():
    for bad in (np.ones(3), np.ones((2, 2, 2))):
        with pytest.raises(ValueError, match="M must be a matrix"):
            spectral_norm(bad)
