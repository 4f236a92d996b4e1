"""OMRMD and OR-PCA with their defaults: scale-free (issue #15), the papers' settings one
argument away, and sensible results on faces."""

import importlib.util

import numpy as np
import pytest
import tensorly as tl

from tensorstream import load
from tensorstream.algorithms.robust_matrix import sample_scale_sums
from tensorstream.core.backend import to_numpy
from tensorstream.datasets.maxnorm import corrupted_low_rank
from tensorstream.learners.maxnorm import OnlineMaxNormMD
from tensorstream.learners.robust_pca import OnlineRobustPCA
from tensorstream.metrics import expressed_variance

BACKENDS = ["numpy", pytest.param("pytorch", marks=pytest.mark.skipif(
    not importlib.util.find_spec("torch"), reason="needs torch"))]
LEARNERS = [OnlineMaxNormMD, OnlineRobustPCA]


def _reconstruction(model, X):
    return to_numpy(model.inverse_transform(model.transform(X)))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cls", LEARNERS)
def test_fitting_c_x_gives_c_times_the_reconstruction(backend, cls):
    data = corrupted_low_rank(20, 3, 60, 0.1, magnitude=10.0, random_state=0)
    parts = {}
    for c in (1e-8, 1.0, 1e8):
        X = c * data.Z
        tensor = tl.tensor(X) if backend == "numpy" else __import__("torch").tensor(X)
        with tl.backend_context(backend):
            model = cls(3, random_state=0).fit(tensor)
            parts[c] = (_reconstruction(model, tensor) / c,
                        to_numpy(model.outliers(tensor)) / c, model.scale_ / c)
    assert np.abs(parts[1.0][1]).max() > 0  # the outliers are found
    for c in (1e-8, 1e8):
        np.testing.assert_allclose(parts[c][0], parts[1.0][0], rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(parts[c][1], parts[1.0][1], rtol=1e-6, atol=1e-9)
        assert parts[c][2] == pytest.approx(parts[1.0][2], rel=1e-12)


def test_the_scale_is_the_mean_of_the_samples_medians():
    """Robust to a gross corruption of fewer than half of a sample's entries, and a sum over
    samples (shards of a batch add up)."""
    X = np.array([[1.0, -2.0, 3.0, 1e9], [0.0, 0.0, 0.0, 4.0]])
    total, count = sample_scale_sums(X)
    assert (total, count) == (2.5 + 1.0, 2.0)  # medians 2.5; 0 -> the mean |x| = 1
    # the learners: medians of the nonzero entries (2.5 and 4), the size of what a sample
    # holds (a black border, digits' zeros: docs/maxnorm.md)
    assert sample_scale_sums(X, nonzero=True) == (2.5 + 4.0, 2.0)
    assert OnlineMaxNormMD(2, random_state=0).partial_fit(X).scale_ == pytest.approx(3.25)
    assert OnlineRobustPCA(2, random_state=0).partial_fit(X).scale_ == pytest.approx(3.25)


@pytest.mark.parametrize("backend", BACKENDS)
def test_omrmd_scale_of_sparse_masked_and_zero_data(backend):
    """Zeros and missing entries do not count; all-zero data have scale 1 (nothing to
    measure), on either backend."""
    X = np.array([[0.0, 0.0, 0.0, 2.0, 6.0], [0.0, 1.0, 0.0, 0.0, 0.0]])
    mask = np.array([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=bool)
    with tl.backend_context(backend):
        tensor = tl.tensor(X)
        assert OnlineMaxNormMD(2, random_state=0).partial_fit(tensor).scale_ == 2.5
        masked = OnlineMaxNormMD(2, random_state=0)
        assert masked.partial_fit(tensor, mask=tl.tensor(mask, dtype=None)).scale_ == 1.5
        assert OnlineMaxNormMD(2, random_state=0).partial_fit(0 * tensor).scale_ == 1.0


@pytest.mark.parametrize("cls", LEARNERS)
def test_paper_params_are_the_papers_settings(cls):
    model = cls(3, random_state=0, **cls.paper_params).fit(
        corrupted_low_rank(16, 3, 20, 0.1, random_state=0).Z)
    assert model.scale_ == 1.0 and model._algorithm().alphas(16) == (0.25, 0.25)
    assert model._algorithm().column_bound_of(16) == 1.0
    default = cls(3)
    assert (default.outlier_alpha, default.data_scale, default.column_bound) == ("auto",) * 3


def test_the_scale_is_kept_in_checkpoints(tmp_path):
    Z = corrupted_low_rank(16, 3, 40, 0.1, random_state=0).Z
    model = OnlineMaxNormMD(3, random_state=0).partial_fit(100 * Z[:10])
    resumed = load(model.save(tmp_path / "omrmd"))
    assert resumed.scale_ == model.scale_ == pytest.approx(sample_scale_sums(100 * Z[:10])[0]
                                                           / 10)
    for learner in (model, resumed):
        learner.partial_fit(Z[10:20])  # later batches keep the first batch's scale
    assert resumed.scale_ == model.scale_


def test_omrmd_beats_orpca_on_the_papers_recipe_with_defaults():
    """The spec's S4 setting scaled by 0.4 (p = 80, d = 24, n = 800, rho = 0.3), defaults:
    measured OMRMD 0.717 vs OR-PCA 0.522 (seed 0; the paper's settings: 0.8325 vs 0.7574)."""
    data = corrupted_low_rank(80, 24, 800, 0.3, random_state=0)
    evs = [expressed_variance(data.U, cls(24, random_state=0).fit(data.Z).loadings_[0])
           for cls in LEARNERS]
    assert evs[0] >= evs[1] + 0.05


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_omrmd_beats_orpca_on_the_papers_recipe_with_defaults_at_its_size(seed):
    data = corrupted_low_rank(200, 60, 2000, 0.3, random_state=seed)
    evs = [expressed_variance(data.U, cls(60, random_state=seed).fit(data.Z).loadings_[0])
           for cls in LEARNERS]
    assert evs[0] >= evs[1]


@pytest.mark.skipif(not importlib.util.find_spec("skimage"), reason="needs scikit-image")
def test_faces_with_outliers_with_defaults():
    """200 lfw faces, the robust NMF paper's outliers (0.7, 0.1), 25 components: measured
    noisy input 19.31 dB, OMRMD 21.29, OR-PCA 21.91 (the paper's settings: OMRMD 9.59,
    OR-PCA 20.20). A fraction of a second: batches of 10."""
    from skimage.data import lfw_subset

    from tensorstream.datasets.outliers import contaminate, psnr

    faces = np.asarray(lfw_subset(), dtype=float).reshape(200, -1)
    noisy = contaminate(faces, 0.7, 0.1, random_state=0).X
    omrmd, orpca = (psnr(faces, _reconstruction(cls(25, random_state=0).fit(noisy), noisy))
                    for cls in LEARNERS)
    assert omrmd >= psnr(faces, noisy) + 1.0 and omrmd >= orpca - 1.0


def test_nonzero_scale_sums_of_shards_add_up_to_the_batch():
    """All-zero samples count nowhere, so a cluster's shards give the batch's own scale
    (they counted as zero-scale samples: 2.0 for the batch, 0.667 from two shards)."""
    X = np.array([[0.0, 0, 0, 0], [0, 0, 0, 0], [2, 2, 0, 1]])
    whole = sample_scale_sums(X, nonzero=True)
    parts = [sample_scale_sums(X[:2], nonzero=True), sample_scale_sums(X[2:], nonzero=True)]
    assert whole == tuple(map(sum, zip(*parts))) == (2.0, 1.0)
