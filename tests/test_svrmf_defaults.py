"""VarianceReducedMF with its defaults: scale-free (issue #15), good on the paper's ORPCA
recipe (old checkpoints resuming in raw units: ``test_svrmf_checkpoints.py``)."""

import importlib.util

import numpy as np
import pytest
import tensorly as tl

from tensorstream import VarianceReducedMF
from tensorstream.core.backend import to_numpy
from tensorstream.datasets.svrmf import svrmf_synthetic
from tensorstream.metrics import expressed_variance

BACKENDS = ["numpy", pytest.param("pytorch", marks=pytest.mark.skipif(
    not importlib.util.find_spec("torch"), reason="needs torch"))]


def _fit_parts(formulation, X, backend):
    tensor = tl.tensor(X) if backend == "numpy" else __import__("torch").tensor(X)
    with tl.backend_context(backend):
        model = VarianceReducedMF(3, formulation=formulation, n_epochs=2, random_state=0,
                                  method_params={"auto_samples": 50}).fit(tensor)
        low_rank = to_numpy(model.inverse_transform(model.transform(tensor)))
        return low_rank, to_numpy(model.outliers(tensor)), model.objective(tensor), model


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("formulation", ["orpca", "odl"])
def test_fitting_c_x_gives_c_times_the_reconstruction(backend, formulation):
    X = svrmf_synthetic(12, 80, 2, magnitude=50.0, random_state=0).X
    reference = _fit_parts(formulation, X, backend)
    for c in (1e-8, 1e8):
        low_rank, outliers, f, model = _fit_parts(formulation, c * X, backend)
        np.testing.assert_allclose(low_rank / c, reference[0], rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(outliers / c, reference[1], rtol=1e-6, atol=1e-9)
        assert f / c ** 2 == pytest.approx(reference[2], rel=1e-6)
        assert model.scale_ / c == pytest.approx(reference[3].scale_, rel=1e-12)
    if formulation == "orpca":
        assert np.abs(reference[1]).max() > 0  # the outliers are found


def test_the_scale_ignores_the_outliers_and_is_counted_as_a_pass():
    data = svrmf_synthetic(20, 60, 2, random_state=0)
    model = VarianceReducedMF(2, formulation="orpca", n_epochs=1, random_state=0).fit(data.X)
    medians = np.median(np.abs(data.X), axis=1)
    assert model.scale_ == pytest.approx(medians.mean(), rel=1e-12)
    assert model.scale_ < 10  # the outliers reach 1000
    declared = VarianceReducedMF(2, n_epochs=1, data_scale=2.0, method_params={"step_size": 1.0},
                                 random_state=0).fit(data.X)
    assert declared.scale_ == 2.0
    assert model.history_[0]["passes_read"] > declared.history_[0]["passes_read"] + 0.99
    with pytest.raises(ValueError, match="data_scale"):
        VarianceReducedMF(2, data_scale=-1.0).fit(data.X)


def test_orpca_defaults_recover_the_papers_subspace():
    """The paper's ORPCA recipe at n = 1000 (d = 100, rank 5, 10% outliers of +-1000), every
    default: measured EV 0.999 (0.078 before the data scale, step and start adapted)."""
    data = svrmf_synthetic(100, 1000, 5, random_state=0)
    model = VarianceReducedMF(5, formulation="orpca", random_state=0).fit(data.X)
    assert expressed_variance(data.W_true, model.loadings_[0]) >= 0.95


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_orpca_defaults_recover_the_papers_subspace_at_the_papers_size(seed):
    """n = 5000: measured EV 1.000 / 0.9996 (seeds 0, 1)."""
    data = svrmf_synthetic(100, 5000, 5, random_state=seed)
    model = VarianceReducedMF(5, formulation="orpca", random_state=0).fit(data.X)
    assert expressed_variance(data.W_true, model.loadings_[0]) >= 0.9
