"""Labelled input: DataArrays in, labelled factors and codes out (learners' side of labels)."""

import numpy as np
import pytest
import xarray as xr

from tensorstream import OnlineCPDL


def _planted(rng, n_time=120):
    """time x lat x lon x variable data from a planted model with joint (lat, lon) maps."""
    maps = rng.random((4, 5, 2))  # lat x lon x component: free spatial maps
    profiles = rng.random((3, 2))  # variable x component
    codes = rng.random((n_time, 2))
    data = np.einsum("tr,abr,vr->tabv", codes, maps, profiles)
    coords = {"time": np.arange(n_time), "lat": [-10.0, 0.0, 10.0, 20.0],
              "lon": [0.0, 90.0, 180.0, 270.0, 300.0], "variable": ["t2m", "u10", "v10"]}
    da = xr.DataArray(data, dims=("time", "lat", "lon", "variable"), coords=coords, name="obs")
    return da.transpose("lat", "time", "variable", "lon"), maps, profiles  # dims out of order


def test_fit_dataarray_gives_labelled_factors_and_codes():
    da, maps, _ = _planted(np.random.default_rng(0))
    model = OnlineCPDL(2, batch_size=20, max_iter=30, random_state=0)
    model.fit(da, sample_dim="time", modes=[("lat", "lon"), "variable"])
    factors = model.factors_
    assert set(factors.data_vars) >= {"lat_lon_loadings", "variable_loadings"}
    assert factors["lat_lon_loadings"].dims == ("lat", "lon", "component")
    np.testing.assert_array_equal(factors["variable"], ["t2m", "u10", "v10"])
    # each planted (joint) map is found, labelled right: compare at the labels
    learned = factors["lat_lon_loadings"].transpose("lat", "lon", "component").values
    learned = learned.reshape(20, 2) / np.linalg.norm(learned.reshape(20, 2), axis=0)
    truth = maps.reshape(20, 2) / np.linalg.norm(maps.reshape(20, 2), axis=0)
    assert np.abs(truth.T @ learned).max(axis=1).min() > 0.99
    codes = model.transform(da.isel(time=slice(0, 7)))
    assert codes.dims == ("time", "component")
    np.testing.assert_array_equal(codes["time"], np.arange(7))
    approx = model.inverse_transform(codes)
    assert set(approx.dims) == set(da.dims)
    original = da.isel(time=slice(0, 7)).transpose(*approx.dims)
    assert float(np.abs(approx - original).max() / np.abs(original).max()) < 0.05


def test_labelled_and_plain_learning_agree():
    da, _, _ = _planted(np.random.default_rng(1), n_time=30)
    plain = da.transpose("time", "lat", "lon", "variable").values.reshape(30, 20, 3)
    labelled = OnlineCPDL(2, random_state=0)
    unlabelled = OnlineCPDL(2, random_state=0)
    for start in range(0, 30, 10):
        labelled.partial_fit(da.isel(time=slice(start, start + 10)), sample_dim="time",
                             modes=[("lat", "lon"), "variable"])
        unlabelled.partial_fit(plain[start:start + 10])
    for a, b in zip(labelled.loadings_, unlabelled.loadings_):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_dask_backed_input_matches_in_memory():
    pytest.importorskip("dask")
    da, _, _ = _planted(np.random.default_rng(2), n_time=60)
    lazy = da.chunk({"time": 15})
    kwargs = dict(sample_dim="time", modes=[("lat", "lon"), "variable"])
    eager_model = OnlineCPDL(2, batch_size=10, max_iter=2, random_state=0).fit(da, **kwargs)
    lazy_model = OnlineCPDL(2, batch_size=10, max_iter=2, random_state=0).fit(lazy, **kwargs)
    for a, b in zip(eager_model.loadings_, lazy_model.loadings_):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_plain_fit_still_has_a_factors_dataset():
    X = np.random.default_rng(0).random((20, 4, 3))
    factors = OnlineCPDL(2, random_state=0).fit(X).factors_
    assert factors["mode_0_loadings"].shape == (4, 2)


def test_labelled_input_errors_are_clear():
    da, _, _ = _planted(np.random.default_rng(3), n_time=10)
    with pytest.raises(ValueError, match="sample_dim is required"):
        OnlineCPDL(2).fit(da)
    with pytest.raises(ValueError, match="nope"):
        OnlineCPDL(2).fit(da, sample_dim="nope")
    with pytest.raises(TypeError, match="DataArray input only"):
        OnlineCPDL(2).partial_fit(np.ones((3, 4)), sample_dim="time")
    model = OnlineCPDL(2).partial_fit(da, sample_dim="time", modes=[("lat", "lon"), "variable"])
    with pytest.raises(TypeError, match="fitted on labelled data"):
        model.partial_fit(np.ones((3, 20, 3)))
    steps = model.n_steps_
    with pytest.raises(ValueError):
        model.partial_fit(da.rename(lat="latitude"))
    assert model.n_steps_ == steps


def _labelled_fit():
    da = xr.DataArray(np.random.default_rng(0).random((40, 3, 4, 2)),
                      dims=("time", "lat", "lon", "variable"))
    model = OnlineCPDL(3, batch_size=8, random_state=0).fit(
        da, sample_dim="time", modes=[("lat", "lon"), "variable"])
    return da, model


def test_inverse_transform_matches_labelled_codes_by_component_label():
    """Labelled codes are read by their ``component`` labels, not by position (reordered
    components gave another reconstruction); renamed or relabelled components are refused."""
    da, model = _labelled_fit()
    codes = model.transform(da)
    expected = model.inverse_transform(codes)
    for same in (codes.isel(component=[2, 0, 1]), codes.transpose()):
        xr.testing.assert_allclose(model.inverse_transform(same), expected)
    with pytest.raises(ValueError, match="dims"):
        model.inverse_transform(codes.rename(component="atom"))
    with pytest.raises(ValueError, match="labels must be 0..2"):
        model.inverse_transform(codes.assign_coords(component=[0, 1, 5]))


def test_a_labelled_mask_is_matched_to_the_data_by_sample_labels():
    """A mask whose samples come in another order is realigned by the sample labels in
    ``partial_fit``, ``fit`` and ``transform`` (it was applied by position), and a mask of
    other samples is refused by name."""
    rng = np.random.default_rng(0)
    da = xr.DataArray(rng.random((20, 3, 4)), dims=("time", "x", "y"),
                      coords={"time": np.arange(20), "x": [3, 1, 2]})
    mask = xr.DataArray(rng.random((20, 3, 4)) > 0.3, dims=da.dims, coords=da.coords)
    reversed_mask = mask.isel(time=slice(None, None, -1))

    def step(m):
        return OnlineCPDL(2, batch_size=20, random_state=0).partial_fit(
            da, mask=m, sample_dim="time").loadings_

    def fitted(m):
        return OnlineCPDL(2, batch_size=5, max_iter=2, random_state=0).fit(
            da, mask=m, sample_dim="time")

    for a, b in zip(step(mask), step(reversed_mask)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    model = fitted(mask)
    for a, b in zip(model.loadings_, fitted(reversed_mask).loadings_):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    xr.testing.assert_allclose(model.transform(da, mask=mask),
                               model.transform(da, mask=reversed_mask))
    with pytest.raises(ValueError, match="mask: its 'time' labels differ"):
        step(mask.assign_coords(time=np.arange(20) + 100))


def test_a_plain_mask_of_labelled_data_is_read_in_the_datas_dims():
    """A plain boolean array of X's shape masks a labelled X as a DataArray over X's dims
    would (fit crashed in its batch slicer; partial_fit wanted the internal stacked layout);
    another shape is refused naming the shape expected."""
    rng = np.random.default_rng(0)
    da = xr.DataArray(rng.random((40, 3, 4, 2)), dims=("time", "lat", "lon", "variable"))
    M = rng.random(da.shape) > 0.3
    labelled = xr.DataArray(M, dims=da.dims)
    kw = {"sample_dim": "time", "modes": [("lat", "lon"), "variable"]}

    def fitted(mask):
        return OnlineCPDL(3, batch_size=10, max_iter=1, random_state=0).fit(da, mask=mask, **kw)

    def stepped(mask):
        return OnlineCPDL(3, random_state=0).partial_fit(da, mask=mask, **kw)

    for learn in (fitted, stepped):
        for a, b in zip(learn(M).loadings_, learn(labelled).loadings_):
            np.testing.assert_array_equal(a, b)
    model = fitted(labelled)
    xr.testing.assert_equal(model.transform(da, mask=M), model.transform(da, mask=labelled))
    with pytest.raises(ValueError, match=r"mask must be a DataArray, or an array of X's shape "
                                         r"\(40, 3, 4, 2\)"):
        stepped(M.reshape(40, 12, 2))


def test_a_plain_sparse_or_dask_mask_of_labelled_data():
    """A sparse mask was read by xarray as a 0-d object; a dask one was computed whole."""
    import scipy.sparse as sp

    da_ = pytest.importorskip("dask.array")
    rng = np.random.default_rng(0)
    X = xr.DataArray(rng.random((40, 6)) + 0.1, dims=("time", "space"))
    mask = rng.random(X.shape) > 0.3
    expected = OnlineCPDL(2, random_state=0).partial_fit(X, mask=mask, sample_dim="time")
    sparse = OnlineCPDL(2, random_state=0).partial_fit(X, mask=sp.csr_matrix(mask),
                                                       sample_dim="time")
    np.testing.assert_array_equal(sparse.loadings_[0], expected.loadings_[0])
    from tensorstream.learners._labelled import _labelled_like

    lazy = _labelled_like(da_.from_array(mask, chunks=(10, 6)), X)
    assert type(lazy.data).__module__.startswith("dask")
