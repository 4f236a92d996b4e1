"""The DataArray accessor: the same results as the functions and learners it wraps."""

import numpy as np
import pytest
import xarray as xr

import tensorstream.accessor  # noqa: F401  (registers da.tensorstream)
from tensorstream import OnlineCPDL
from tensorstream.labels import ModeLayout, stack_modes, to_samples, unfold

MODES = [("lat", "lon"), "variable"]


@pytest.fixture
def da():
    data = np.random.default_rng(0).random((40, 3, 4, 2))
    return xr.DataArray(data, dims=("time", "lat", "lon", "variable"),
                        coords={"lat": [10.0, 20.0, 30.0], "variable": ["t2m", "tp"]})


def test_fit_equals_the_learner(da):
    params = dict(alpha=0.05, batch_size=8, max_iter=2, random_state=0)
    by_accessor = da.tensorstream.fit(2, sample_dim="time", modes=MODES, **params)
    direct = OnlineCPDL(2, **params).fit(da, sample_dim="time", modes=MODES)
    assert isinstance(by_accessor, OnlineCPDL)
    assert by_accessor.factors_.identical(direct.factors_)
    assert by_accessor.n_steps_ == direct.n_steps_ == 10


def test_fit_by_model_name_class_and_step_limit(da):
    by_name = da.tensorstream.fit(2, "time", MODES, model="ocpdl", n_steps=3, random_state=0)
    by_class = da.tensorstream.fit(2, "time", MODES, model=OnlineCPDL, n_steps=3,
                                   random_state=0)
    assert by_name.n_steps_ == by_class.n_steps_ == 3
    assert by_name.factors_.identical(by_class.factors_)
    with pytest.raises(ValueError, match="unknown model"):
        da.tensorstream.fit(2, "time", model="pca")
    with pytest.raises(TypeError, match="model must be"):
        da.tensorstream.fit(2, "time", model=3)
    with pytest.raises(ValueError, match="unknown dim"):
        da.tensorstream.fit(2, "time", modes=["latitude"])


def test_reshapes_equal_the_label_functions(da):
    layout = ModeLayout.from_dataarray(da, "time", MODES)
    assert da.tensorstream.layout("time", MODES).shape == layout.shape
    np.testing.assert_array_equal(da.tensorstream.samples("time", MODES),
                                  to_samples(da, layout))
    assert da.tensorstream.stack_modes(MODES, "time").identical(stack_modes(da, MODES, "time"))
    assert da.tensorstream.unfold(("lat", "lon")).identical(unfold(da, ("lat", "lon")))
    named = da.tensorstream.unfold("variable", column_name="rest")
    assert named.dims == ("variable", "rest")


def test_the_accessor_is_on_every_dataarray():
    assert hasattr(xr.DataArray(np.zeros((2, 2))), "tensorstream")


@pytest.mark.parametrize("model", ["vr-mf", "robust-nmf-batch", "robust-pca-batch"])
def test_the_accessor_fits_the_matrix_learners_of_the_registry(model):
    """They take no sample_dim: the accessor put samples first for them (a TypeError before)."""
    da = xr.DataArray(np.random.default_rng(0).random((24, 40)), dims=("x", "time"))
    learner = da.tensorstream.fit(2, "time", model=model)
    assert learner.components_.shape == (2, 24)
    with pytest.raises(ValueError, match="modes does not apply"):
        da.tensorstream.fit(2, "time", modes=["x"], model=model)
    with pytest.raises(ValueError, match="factorizes matrices: give a 2-D DataArray"):
        da.expand_dims(z=2).tensorstream.fit(2, "time", model=model)
