"""The spectrum of the basis that OR-PCA's and OMRMD's coder shares between calls (issue #31).

A step codes a batch twice against one basis (the rough code of ``outlier_alpha="auto"``'s
thresholds, then the codes), and an output codes its chunks against one basis: both compute
``eigh(L^T L)`` once and pass it on. These tests check that a passed spectrum gives exactly the
codes of a fresh one, that one of another basis or mask is refused, and that outputs follow the
basis wherever it changes (``partial_fit``, ``set_params`` then a fit, a checkpoint's load).
"""

import numpy as np
import pytest

from tensorstream import load
from tensorstream.coders.maxnorm import Spectrum, robust_code, robust_low_rank
from tensorstream.learners.maxnorm import OnlineMaxNormMD
from tensorstream.learners.robust_pca import OnlineRobustPCA


def _corrupted(n=60, p=30, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3)) @ rng.standard_normal((3, p))
    X[rng.random(X.shape) < 0.05] += 8.0
    return X


def _fresh_outputs(model, X):
    """What the outputs must be: the coder on the model's current basis, nothing passed."""
    algorithm, L, scale = model._algorithm(), model.loadings_[0], model.scale_
    coded = algorithm.robust_codes(X, L, scale)
    # the background's refit written out with the full coder: an exact r-step on the entries
    # the codes do not flag
    norm_alpha, outlier_alpha = algorithm.alphas(X.shape[1])
    options = {**algorithm.coder_options(norm_alpha), "noise": "none"}
    refit = robust_code(X / scale, L / scale, outlier_alpha,
                        mask=(coded.outliers == 0) * 1.0, **options)
    return coded.outliers, refit.low_rank * scale


def _check_outputs_follow_basis(model, X):
    # to rounding: outputs code in chunks, whose products may round differently
    outliers, background = _fresh_outputs(model, X)
    np.testing.assert_allclose(model.outliers(X), outliers, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(model.background(X), background, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("ball", [False, True])
def test_passed_spectrum_gives_the_same_codes(ball):
    X = _corrupted()
    L = np.random.default_rng(1).standard_normal((30, 3))
    spectrum = Spectrum.of(L)
    fresh = robust_code(X, L, 0.5, ball=ball)
    passed = robust_code(X, L, 0.5, ball=ball, spectrum=spectrum)
    for name in ("codes", "outliers", "low_rank", "losses"):
        np.testing.assert_array_equal(getattr(passed, name), getattr(fresh, name))
    np.testing.assert_array_equal(
        robust_low_rank(X, L, 0.5, ball=ball, max_iter=2, spectrum=spectrum),
        robust_code(X, L, 0.5, ball=ball, max_iter=2).low_rank)


def test_spectrum_of_another_basis_or_mask_is_refused():
    X = _corrupted()
    rng = np.random.default_rng(2)
    L = rng.standard_normal((30, 3))
    mask = (rng.random(X.shape) < 0.9).astype(float)
    with pytest.raises(ValueError, match="this very basis"):
        robust_code(X, L, 0.5, spectrum=Spectrum.of(L.copy()))  # equal values, not L itself
    with pytest.raises(ValueError, match="this very basis"):
        robust_code(X, L, 0.5, mask=mask, spectrum=Spectrum.of(L))  # shared, not the mask's
    with pytest.raises(ValueError, match="this very basis"):
        robust_code(X, L, 0.5, spectrum=Spectrum.of(L, mask))  # the mask's, none given
    masked = robust_code(X, L, 0.5, mask=mask, spectrum=Spectrum.of(L, mask))
    np.testing.assert_array_equal(masked.low_rank, robust_code(X, L, 0.5, mask=mask).low_rank)


@pytest.mark.parametrize("cls", [OnlineRobustPCA, OnlineMaxNormMD])
def test_outputs_follow_the_basis_after_partial_fit(cls):
    X = _corrupted()
    model = cls(3, random_state=0).fit(X[:30])
    before = model.background(X)
    model.partial_fit(X[30:])
    _check_outputs_follow_basis(model, X)
    assert not np.allclose(model.background(X), before)  # the basis did move


def test_outputs_follow_the_basis_after_set_params_and_refit():
    X = _corrupted()
    model = OnlineRobustPCA(3, random_state=0).fit(X)
    before = model.background(X)
    model.set_params(outlier_alpha=0.2).fit(X)
    _check_outputs_follow_basis(model, X)
    assert not np.allclose(model.background(X), before)


def test_outputs_follow_the_basis_of_a_loaded_checkpoint(tmp_path):
    X = _corrupted()
    saved = OnlineRobustPCA(3, random_state=0).fit(X[:30])
    path = saved.save(tmp_path / "orpca")
    other = OnlineRobustPCA(3, random_state=0).fit(X)  # another basis, outputs computed
    other.background(X)
    loaded = load(path)
    _check_outputs_follow_basis(loaded, X)
    np.testing.assert_array_equal(loaded.background(X), saved.background(X))
    assert not np.allclose(loaded.background(X), other.background(X))


@pytest.mark.parametrize("backend", ["numpy", "pytorch"])
def test_row_medians_over_observed_entries(backend):
    """Each row's median over its observed entries, picked from the sorted batch: odd and
    even counts, a full row, a row with one entry and a row without any (inf)."""
    import tensorly as tl

    from tensorstream.algorithms.robust_matrix import row_medians
    from tensorstream.core.backend import to_numpy, using

    rng = np.random.default_rng(3)
    values = rng.standard_normal((5, 9))
    mask = (rng.random(values.shape) < 0.6).astype(float)
    mask[1] = 1.0  # all 9 observed (odd)
    mask[2] = 0.0  # none
    mask[3] = 0.0
    mask[3, 4] = 1.0  # one
    mask[4, :] = 0.0
    mask[4, [0, 2, 5, 8]] = 1.0  # four (even)
    expected = [np.median(row[keep > 0]) if keep.any() else np.inf
                for row, keep in zip(values, mask)]
    with using(backend):
        got = to_numpy(row_medians(tl.tensor(values), tl.tensor(mask)))
    np.testing.assert_array_equal(got, expected)


def test_robust_low_rank_refuses_an_unknown_noise_by_name():
    X = _corrupted()
    with pytest.raises(ValueError, match="noise must be one of"):
        robust_low_rank(X, np.ones((30, 3)), 0.5, noise="gaussian")
