"""Outliers as a first-class output (issue #31 item 3): every robust learner's ``outliers(X)``
and ``denoise(X)`` (the flagged entries replaced by the low-rank part), on both backends,
labelled for DataArrays, with masks, and bad input refused with the state untouched."""

import importlib.util
import pickle

import numpy as np
import pytest
import tensorly as tl
import xarray as xr

from tensorstream.core.backend import to_numpy
from tensorstream.learners.maxnorm import OnlineMaxNormMD
from tensorstream.learners.robust_nmf import RobustOnlineNMF
from tensorstream.learners.robust_nmf_batch import RobustNMF
from tensorstream.learners.robust_pca import OnlineRobustPCA

BACKENDS = ["numpy", pytest.param("pytorch", marks=pytest.mark.skipif(
    not importlib.util.find_spec("torch"), reason="needs torch"))]
LEARNERS = [RobustOnlineNMF, RobustNMF, OnlineRobustPCA, OnlineMaxNormMD]
#: learners whose ``denoise`` and ``outliers`` take a ``mask`` and DataArrays
ONLINE = [RobustOnlineNMF, OnlineRobustPCA, OnlineMaxNormMD]


def _data(seed=0):
    """Low-rank nonnegative samples with 5% of their entries, at random, made bright (the
    planted outliers, returned as a boolean array)."""
    rng = np.random.default_rng(seed)
    clean = rng.random((60, 3)) @ rng.random((3, 20)) / 3
    X = clean.copy()
    planted = rng.random(X.shape) < 0.05
    X[planted] = 1.5
    return clean, X, planted


def _low_rank(model, X):
    return to_numpy(model.inverse_transform(model.transform(X)))


def _tensor(X, backend):
    return tl.tensor(X) if backend == "numpy" else __import__("torch").tensor(X)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cls", LEARNERS)
def test_denoise_replaces_the_flagged_entries_by_the_low_rank_part(cls, backend):
    """``denoise`` keeps an entry exactly where ``outliers`` is 0 and gives the low-rank part
    where it is not; it removes the planted outliers (closer to the clean data than ``X``)."""
    clean, X, planted = _data()
    with tl.backend_context(backend):
        data = _tensor(X, backend)
        model = cls(3, random_state=0).fit(data)
        denoised, outliers = to_numpy(model.denoise(data)), to_numpy(model.outliers(data))
        low_rank = _low_rank(model, data)
    flagged = outliers != 0
    assert flagged[planted].mean() > 0.8  # the planted outliers are found
    np.testing.assert_array_equal(denoised[~flagged], X[~flagged])
    np.testing.assert_allclose(denoised[flagged], low_rank[flagged], rtol=1e-6, atol=1e-8)
    assert np.linalg.norm(denoised - clean) < 0.5 * np.linalg.norm(X - clean)


@pytest.mark.parametrize("backend", BACKENDS)
def test_denoise_agrees_across_backends(backend):
    """The same fit on numpy and torch gives the same denoised samples."""
    _, X, _ = _data()
    results = {}
    for name in ("numpy", backend):
        with tl.backend_context(name):
            model = RobustOnlineNMF(3, random_state=0).fit(_tensor(X, name))
            results[name] = to_numpy(model.denoise(_tensor(X, name)))
    np.testing.assert_allclose(results[backend], results["numpy"], rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("cls", ONLINE)
def test_denoise_fills_missing_entries_with_the_low_rank_part(cls):
    """A masked entry is unknown: ``denoise`` gives the model's value there, whatever ``X``
    holds, and its outlier is 0."""
    _, X, _ = _data()
    model = cls(3, random_state=0).fit(X)
    mask = np.ones(X.shape, dtype=bool)
    mask[1, 2] = mask[7, 11] = False
    garbage = X.copy()
    garbage[1, 2] = garbage[7, 11] = 1e3
    denoised = to_numpy(model.denoise(garbage, mask=mask))
    codes = model.transform(garbage, mask=mask)
    low_rank = to_numpy(model.inverse_transform(codes))
    assert denoised[1, 2] == pytest.approx(low_rank[1, 2], rel=1e-9)
    assert denoised[7, 11] == pytest.approx(low_rank[7, 11], rel=1e-9)
    assert to_numpy(model.outliers(garbage, mask=mask))[1, 2] == 0


@pytest.mark.parametrize("cls", ONLINE)
def test_outputs_of_labelled_data_are_labelled(cls):
    """A DataArray gets its outliers and denoised samples back with its dims and coords."""
    _, X, _ = _data()
    da = xr.DataArray(X, dims=("time", "pixel"),
                      coords={"time": np.arange(60) * 10, "pixel": [f"p{i}" for i in range(20)]})
    model = cls(3, random_state=0).fit(da, sample_dim="time")
    plain = cls(3, random_state=0).fit(X)
    for method in ("outliers", "denoise"):
        labelled = getattr(model, method)(da.isel(time=slice(0, 8)))
        assert isinstance(labelled, xr.DataArray)
        assert labelled.dims == ("time", "pixel")
        np.testing.assert_array_equal(labelled["time"], da["time"][:8])
        np.testing.assert_array_equal(labelled["pixel"], da["pixel"])
        np.testing.assert_allclose(labelled.values, to_numpy(getattr(plain, method)(X[:8])),
                                   rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("cls", LEARNERS)
@pytest.mark.parametrize("bad, error, message", [
    (np.ones((4, 7)), ValueError, "feature"),
    (np.full((4, 20), np.nan), ValueError, "NaN"),
])
def test_denoise_refuses_bad_input_and_keeps_the_state(cls, bad, error, message):
    _, X, _ = _data()
    model = cls(3, random_state=0).fit(X)
    before = pickle.dumps(model)
    with pytest.raises(error, match=message):
        model.denoise(bad)
    assert pickle.dumps(model) == before


@pytest.mark.parametrize("cls", LEARNERS)
def test_denoise_needs_a_fitted_learner(cls):
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        cls(3).denoise(np.ones((2, 20)))


@pytest.mark.parametrize("cls", [RobustOnlineNMF, OnlineRobustPCA, OnlineMaxNormMD])
def test_outputs_of_a_regrouped_fit_come_back_in_the_given_axes(cls):
    """A fit on (n, 4, 5) samples regrouped by ``modes=[(0, 1)]`` learns 20-vectors; every
    output of a sample's shape comes back (n, 4, 5), as inverse_transform does (they came
    back (n, 20))."""
    X = np.abs(np.random.default_rng(0).random((40, 4, 5)))
    model = cls(3, random_state=0).fit(X, modes=[(0, 1)])
    flat = cls(3, random_state=0).fit(X.reshape(40, 20))
    assert model.inverse_transform(model.transform(X)).shape == X.shape
    for method in ("denoise", "outliers", "impute"):
        if hasattr(model, method):
            result = np.asarray(getattr(model, method)(X))
            assert result.shape == X.shape, method
            np.testing.assert_allclose(result.reshape(40, 20),
                                       np.asarray(getattr(flat, method)(X.reshape(40, 20))),
                                       atol=1e-10, err_msg=method)
