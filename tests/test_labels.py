"""Labelled modes (tensorstream.labels): layouts, labelled reshapes, labelled factors."""

import dataclasses
import math
import pickle

import dask
import dask.array as dsa
import numpy as np
import pandas as pd
import pytest
import tensorly as tl
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorstream.core.backend import using
from tensorstream.labels import (
    COMPONENT_DIM,
    ModeLayout,
    codes_to_dataarray,
    dataset_to_loadings,
    factors_to_dataset,
    fold,
    from_samples,
    parse_modes,
    stack_modes,
    to_samples,
    unfold,
    unstack_modes,
)

HYPOTHESIS = settings(max_examples=60, deadline=None)


# --------------------------------------------------------------------------------------------
# fixtures and strategies


def climate(n_time=5, dask_chunks=None):
    """A small climate-like array with unsorted coords, a non-dim coord and attrs."""
    rng = np.random.default_rng(0)
    da = xr.DataArray(
        rng.random((n_time, 3, 4, 2)),
        dims=("time", "lat", "lon", "variable"),
        coords={
            "time": pd.date_range("2000-01-01", periods=n_time),
            "lat": [40.0, -10.0, 25.0],
            "lon": [100.0, 5.0, -30.0, 60.0],
            "variable": ["t2m", "tp"],
            "lat_name": ("lat", ["north", "south", "middle"]),
            "season": ("time", np.arange(n_time) % 4),
        },
        name="obs",
        attrs={"source": "test", "scale": [1, 2]},
    )
    return da.chunk(dask_chunks) if dask_chunks else da


def _forbid_compute(*args, **kwargs):
    raise AssertionError("the dask graph was computed")


@st.composite
def labelled_arrays(draw):
    """Arrays of 1-4 dims in random order, each dim with no coord, ints, strings or a MultiIndex."""
    n_dims = draw(st.integers(1, 4))
    dims = draw(st.permutations(["a", "b", "c", "d", "e"]))[:n_dims]
    sizes = draw(st.lists(st.integers(1, 3), min_size=n_dims, max_size=n_dims))
    dtype = draw(st.sampled_from(["float64", "float32", "int16", "bool"]))
    data = (np.arange(math.prod(sizes)).reshape(sizes) % 7).astype(dtype)
    da = xr.DataArray(data, dims=dims, name=draw(st.sampled_from([None, "v"])),
                      attrs=draw(st.sampled_from([{}, {"units": "K", "n": 3}])))
    for dim, size in zip(dims, sizes, strict=True):
        da = da.assign_coords(draw(_dim_coords(dim, size)))
        if draw(st.booleans()):  # a non-dimension coord along the dim
            da = da.assign_coords({f"{dim}_lab": (dim, np.arange(size) * 10)})
    if n_dims >= 2 and draw(st.booleans()):  # a 2-D non-dimension coord across two dims
        pair = draw(st.permutations(dims))[:2]
        shape = [da.sizes[d] for d in pair]
        da = da.assign_coords(area=(pair, np.arange(math.prod(shape)).reshape(shape) * 1.5))
    return da


@st.composite
def _dim_coords(draw, dim, size):
    kind = draw(st.sampled_from(["none", "int", "str", "multi"]))
    ints = st.lists(st.integers(-99, 99), min_size=size, max_size=size, unique=True)
    if kind == "none":
        return {}
    if kind == "int":
        return {dim: draw(ints)}
    if kind == "str":
        return {dim: [f"s{i}" for i in draw(ints)]}
    names = draw(st.permutations([f"{dim}_x", f"{dim}_y"]))  # level order is part of the test
    midx = pd.MultiIndex.from_arrays([draw(ints), np.arange(size) % 2], names=names)
    return xr.Coordinates.from_pandas_multiindex(midx, dim)


@st.composite
def mode_specs(draw, dims):
    """A sample dim (or None) and a random partition of the other dims into ordered modes."""
    sample = draw(st.sampled_from([None, *dims])) if len(dims) > 1 else None
    order = draw(st.permutations([d for d in dims if d != sample]))
    cuts = sorted(draw(st.sets(st.integers(1, len(order) - 1)))) if len(order) > 1 else []
    groups = [tuple(order[i:j]) for i, j in zip([0, *cuts], [*cuts, len(order)], strict=True)]
    modes = [g[0] if len(g) == 1 and draw(st.booleans()) else g for g in groups]
    return sample, modes


def _manual_samples(da, sample, modes):
    """Reference: numpy transpose to [sample, *mode dims] and C-order reshape."""
    groups = [(m,) if isinstance(m, str) else m for m in modes]
    order = ([sample] if sample else []) + [d for g in groups for d in g]
    data = np.transpose(da.values, [da.dims.index(d) for d in order])
    lead = (da.sizes[sample],) if sample else ()
    return data.reshape(lead + tuple(math.prod(da.sizes[d] for d in g) for g in groups))


# --------------------------------------------------------------------------------------------
# round trips


@HYPOTHESIS
@given(data=st.data())
def test_stack_unstack_round_trip(data):
    da = data.draw(labelled_arrays())
    sample, modes = data.draw(mode_specs(da.dims))
    layout = ModeLayout.from_dataarray(da, sample, modes)
    stacked = stack_modes(da, modes, sample)
    assert stacked.dims == (*([sample] if sample else []), *layout.mode_names)
    np.testing.assert_array_equal(stacked.values, _manual_samples(da, sample, modes))
    xr.testing.assert_identical(unstack_modes(stacked, layout), da)
    # labelled rows in another order are put back by their labels (stacked modes always have
    # labels: a dim without coords contributes its positions as a MultiIndex level)
    for name in set(layout.mode_names) & set(stacked.xindexes):
        shuffled = stacked.isel({name: np.arange(stacked.sizes[name])[::-1]})
        xr.testing.assert_identical(unstack_modes(shuffled, layout), da)


@HYPOTHESIS
@given(data=st.data())
def test_to_samples_is_transpose_reshape_and_from_samples_inverts_it(data):
    da = data.draw(labelled_arrays().filter(lambda a: a.ndim >= 2))
    sample, modes = data.draw(mode_specs(da.dims).filter(lambda s: s[0] is not None))
    layout = ModeLayout.from_dataarray(da, sample, modes)
    X = to_samples(da, layout)
    assert isinstance(X, np.ndarray) and X.dtype == da.dtype
    np.testing.assert_array_equal(X, _manual_samples(da, sample, modes))
    xr.testing.assert_identical(from_samples(X, layout), da)


@HYPOTHESIS
@given(data=st.data())
def test_unfold_matches_tensorly_and_folds_back(data):
    da = data.draw(labelled_arrays().filter(lambda a: a.ndim >= 2))
    rows = tuple(data.draw(st.permutations(da.dims)))[: data.draw(st.integers(1, da.ndim - 1))]
    mode = rows[0] if len(rows) == 1 else rows
    unfolded = unfold(da, mode)
    others = [d for d in da.dims if d not in rows]
    assert unfolded.shape == (
        math.prod(da.sizes[d] for d in rows), math.prod(da.sizes[d] for d in others)
    )
    moved = np.transpose(da.values, [da.dims.index(d) for d in rows + tuple(others)])
    expected = tl.unfold(moved.reshape(unfolded.shape[0], *moved.shape[len(rows):]), 0)
    np.testing.assert_array_equal(unfolded.values, expected)
    xr.testing.assert_identical(fold(unfolded, mode, like=da), da)
    xr.testing.assert_identical(fold(unfolded.T, mode, like=da), da)  # names, not positions


def test_unfold_single_dim_is_tensorly_unfold():
    da = xr.DataArray(np.arange(60.0).reshape(3, 4, 5), dims=("a", "b", "c"))
    for axis, dim in enumerate(da.dims):
        np.testing.assert_array_equal(unfold(da, dim).values, tl.unfold(da.values, axis))
    named = unfold(da, ("c", "a"), row_name="rows", column_name="cols")
    assert named.dims == ("rows", "b")  # a single column dim keeps its name
    xr.testing.assert_identical(fold(named, ("c", "a"), da, row_name="rows"), da)


def test_stacking_follows_xarray_stack_and_xarray_can_unstack_it():
    da = climate().drop_vars("lat_name")
    ours = stack_modes(da, [("lat", "lon"), "variable"], "time")
    theirs = da.stack(lat_lon=("lat", "lon")).transpose("time", "lat_lon", "variable")
    xr.testing.assert_identical(ours, theirs)
    # levels keep the order of appearance: xarray's unstack gives the unsorted coords back
    xr.testing.assert_identical(ours.unstack("lat_lon").transpose(*da.dims), da)


def test_multiindex_dim_keeps_level_order_alone_and_inside_a_group():
    midx = pd.MultiIndex.from_arrays([["y", "x", "y"], [2, 1, 1]], names=["site", "depth"])
    da = xr.DataArray(np.arange(24.0).reshape(2, 3, 4), dims=("t", "station", "h"),
                      coords={"h": [3, 1, 2, 0]})
    da = da.assign_coords(xr.Coordinates.from_pandas_multiindex(midx, "station"))
    for modes in (["station", "h"], [("h", "station")], [("station", "h")]):
        layout = ModeLayout.from_dataarray(da, "t", modes)
        back = unstack_modes(stack_modes(da, modes, "t"), layout)
        xr.testing.assert_identical(back, da)
        assert back.indexes["station"].names == ["site", "depth"]
        ds = factors_to_dataset([np.ones((m.size, 2)) for m in layout.modes], layout)
        assert ds.indexes["station"].names == ["site", "depth"]
    stacked = stack_modes(da, [("h", "station")], "t")
    assert stacked.indexes["h_station"].names == ["h", "site", "depth"]
    assert stacked.sel(h=1, site="x", depth=1).values.tolist() == [5.0, 17.0]


def test_duplicate_and_unsorted_coords_round_trip():
    da = xr.DataArray(np.arange(12.0).reshape(3, 4), dims=("a", "b"),
                      coords={"a": [2, 2, 1], "b": ["q", "p", "q", "r"]})
    layout = ModeLayout.from_dataarray(da, None, [("b", "a")])
    xr.testing.assert_identical(unstack_modes(stack_modes(da, [("b", "a")]), layout), da)
    xr.testing.assert_identical(fold(unfold(da, "b"), "b", da), da)


def test_unstack_a_subset_of_samples_and_a_computed_array():
    da = climate()
    modes = [("lat", "lon"), "variable"]
    layout = ModeLayout.from_dataarray(da, "time", modes)
    stacked = stack_modes(da, modes, "time")
    picked = [4, 0, 2]
    xr.testing.assert_identical(
        unstack_modes(stacked.isel(time=picked), layout), da.isel(time=picked)
    )
    doubled = (2 * stacked).rename("twice")
    xr.testing.assert_identical(unstack_modes(doubled, layout), (2 * da).rename("twice"))


def test_mixed_sample_feature_coords_round_trip():
    da = climate().assign_coords(valid=(("lon", "time"), np.arange(20).reshape(4, 5)))
    modes = [("variable", "lon"), "lat"]
    layout = ModeLayout.from_dataarray(da, "time", modes)
    stacked = stack_modes(da, modes, "time")
    assert stacked["valid"].dims == ("time", "variable_lon")  # broadcast as xarray.stack does
    xr.testing.assert_identical(unstack_modes(stacked, layout), da)
    xr.testing.assert_identical(from_samples(to_samples(da, layout), layout), da)


# --------------------------------------------------------------------------------------------
# the layout


def test_layout_describes_the_modes():
    da = climate()
    modes = {"space": ("lon", "lat"), "variable": "variable"}
    layout = ModeLayout.from_dataarray(da, "time", modes)
    assert layout.mode_names == ("space", "variable")
    assert layout.shape == (12, 2)
    assert layout.feature_dims == ("lon", "lat", "variable")
    assert layout.sizes == {"lon": 4, "lat": 3, "variable": 2}
    assert layout.n_samples == 5 and layout.dims == da.dims
    assert layout.factor_names == ("space_loadings", "variable_loadings")
    assert layout.mode("space").dims == ("lon", "lat") and layout.mode("space").stacked
    assert repr(layout) == (
        "ModeLayout(sample_dim=time: 5, modes=[space (lon: 4, lat: 3); variable: 2])"
    )
    with pytest.raises(KeyError, match="the modes are"):
        layout.mode("lat")
    default = ModeLayout.from_dataarray(da, "lon")
    assert default.mode_names == ("time", "lat", "variable")  # the array's order


def test_layout_is_immutable_picklable_and_owns_its_coords():
    da = climate()
    layout = ModeLayout.from_dataarray(da, "time", [("lat", "lon"), "variable"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        layout.sample_dim = "lat"
    da.coords["lat_name"].values[0] = "changed"  # an in-place edit of the source ...
    da.attrs["source"] = "changed"
    assert layout.feature_coords["lat_name"].values[0] == "north"  # ... leaves the layout alone
    assert layout.attrs["source"] == "test"
    restored = pickle.loads(pickle.dumps(layout))
    xr.testing.assert_identical(
        from_samples(to_samples(climate(), layout), restored), climate()
    )


def test_with_samples_labels_a_new_batch():
    da = climate(n_time=8)
    first = da.isel(time=slice(0, 5))
    layout = ModeLayout.from_dataarray(first, "time", [("lat", "lon"), "variable"])
    batch = da.isel(time=[7, 5])
    new = layout.with_samples(batch)
    assert new.n_samples == 2 and new.modes == layout.modes
    xr.testing.assert_identical(from_samples(to_samples(batch, layout), new), batch)
    codes = codes_to_dataarray(np.ones((2, 3)), new)
    xr.testing.assert_identical(codes["time"], batch["time"])
    assert list(codes.coords) == ["time", "season", COMPONENT_DIM]
    with pytest.raises(ValueError, match="layout.with_samples"):
        from_samples(to_samples(batch, layout), layout)
    with pytest.raises(ValueError, match="sample_dim 'time' is not a dim"):
        layout.with_samples(batch.isel(time=0))


# --------------------------------------------------------------------------------------------
# to_samples: batches, labels, dask


def test_to_samples_takes_a_batch_of_positions():
    da = climate()
    layout = ModeLayout.from_dataarray(da, "time", [("lat", "lon"), "variable"])
    X = to_samples(da, layout)
    np.testing.assert_array_equal(to_samples(da, layout, indices=[3, 1]), X[[3, 1]])
    np.testing.assert_array_equal(to_samples(da, layout, indices=slice(1, 4)), X[1:4])
    np.testing.assert_array_equal(to_samples(da, layout, indices=2), X[2:3])
    np.testing.assert_array_equal(to_samples(da.isel(time=[0]), layout), X[:1])  # any n


def test_to_samples_is_a_view_when_the_memory_layout_allows():
    da = climate()
    layout = ModeLayout.from_dataarray(da, "time", [("lat", "lon"), "variable"])
    assert np.shares_memory(to_samples(da, layout), da.values)


def test_to_samples_aligns_permuted_labels_and_rejects_others():
    da = climate()
    layout = ModeLayout.from_dataarray(da, "time", [("lat", "lon"), "variable"])
    shuffled = da.sortby("lat").transpose("variable", "lon", "time", "lat")
    np.testing.assert_array_equal(to_samples(shuffled, layout), to_samples(da, layout))
    moved = da.assign_coords(lat=[41.0, -10.0, 25.0])
    with pytest.raises(ValueError, match="labels along 'lat' differ"):
        to_samples(moved, layout)
    with pytest.raises(ValueError, match=r"sizes \{'lon': 2\} differ"):
        to_samples(da.isel(lon=[0, 1]), layout)
    with pytest.raises(ValueError, match="expected dims"):
        to_samples(da.isel(variable=0), layout)
    with pytest.raises(TypeError, match="numeric"):
        to_samples(da.astype(str), layout)
    no_sample = ModeLayout.from_dataarray(da.isel(time=0), None, None)
    with pytest.raises(ValueError, match="layout has no sample_dim"):
        to_samples(da.isel(time=0), no_sample)
    with pytest.raises(TypeError, match="expected a ModeLayout"):
        to_samples(da, {"time": 5})


def test_dask_input_stays_lazy_and_gives_the_same_values():
    da = climate(n_time=6)
    lazy = climate(n_time=6, dask_chunks={"time": 2, "lat": 2})
    modes = [("lat", "lon"), "variable"]
    layout = ModeLayout.from_dataarray(lazy, "time", modes)
    with dask.config.set(scheduler=_forbid_compute):
        X = to_samples(lazy, layout, indices=[5, 0, 3])
        stacked = stack_modes(lazy, modes, "time")
        back = unstack_modes(stacked, layout)
        rebuilt = from_samples(to_samples(lazy, layout), layout)
        sorted_batch = to_samples(lazy.sortby("lat"), layout)
    for result in (X, stacked.data, back.data, rebuilt.data, sorted_batch):
        assert isinstance(result, dsa.Array)
    np.testing.assert_array_equal(X.compute(), to_samples(da, layout, indices=[5, 0, 3]))
    np.testing.assert_array_equal(sorted_batch.compute(), to_samples(da, layout))
    xr.testing.assert_identical(back.compute(), da)
    xr.testing.assert_identical(rebuilt.compute(), da)


def test_netcdf_opened_with_chunks_is_read_batch_by_batch(tmp_path):
    da = climate(n_time=6)
    da.to_netcdf(tmp_path / "obs.nc")
    layout = ModeLayout.from_dataarray(da, "time", [("lat", "lon"), "variable"])
    with xr.open_dataarray(tmp_path / "obs.nc", chunks={"time": 2}) as opened:
        with dask.config.set(scheduler=_forbid_compute):
            X = to_samples(opened, layout, indices=[4, 1])
        assert isinstance(X, dsa.Array)
        np.testing.assert_array_equal(X.compute(), to_samples(da, layout, indices=[4, 1]))


def test_from_samples_accepts_torch_and_checks_the_shape():
    torch = pytest.importorskip("torch")
    da = climate()
    layout = ModeLayout.from_dataarray(da, "time", [("lat", "lon"), "variable"])
    X = torch.as_tensor(to_samples(da, layout))
    xr.testing.assert_identical(from_samples(X, layout), da)
    with pytest.raises(ValueError, match=r"expected shape \(5, 12, 2\)"):
        from_samples(X[:, :6], layout)


# --------------------------------------------------------------------------------------------
# labelled factors


def _space_value(lat, lon, r):
    """Planted loading value at labels (lat, lon): distinct integers, so any mix-up shows."""
    return (r + 1) * 100_000 + (lat + 50) * 100 + (lon + 50)


VAR_VALUES = {"t2m": [1.0, 2.0], "tp": [3.0, 1.0]}


def planted_model():
    """A labelled rank-2 CP model built from labels alone (no reshape), dims scrambled."""
    rng = np.random.default_rng(1)
    lat = np.array([40.0, -10.0, 25.0])
    lon = np.array([100.0, 5.0, -30.0, 60.0])
    time = pd.date_range("2021-03-01", periods=6)
    comp = np.arange(2)
    space = xr.DataArray(
        _space_value(lat[:, None, None], lon[None, :, None], comp),
        dims=("lat", "lon", COMPONENT_DIM), coords={"lat": lat, "lon": lon},
    )
    var = xr.DataArray(list(VAR_VALUES.values()), dims=("variable", COMPONENT_DIM),
                       coords={"variable": list(VAR_VALUES)})
    codes = xr.DataArray(rng.integers(0, 5, (6, 2)).astype(float),
                         dims=("time", COMPONENT_DIM), coords={"time": time, COMPONENT_DIM: comp})
    da = xr.dot(codes, space, var, dim=COMPONENT_DIM)
    da = da.transpose("lon", "time", "variable", "lat").rename("obs")
    return da.assign_attrs(units="K"), codes


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_planted_labelled_cp_model_lines_up_with_its_labels(kind):
    da, codes = planted_model()
    layout = ModeLayout.from_dataarray(da, "time", [("lat", "lon"), "variable"])
    lat, lon = da["lat"].values, da["lon"].values
    # the true loadings in the library's positional convention: row i_lat * n_lon + i_lon
    U_space = _space_value(lat[:, None, None], lon[None, :, None], np.arange(2)).reshape(12, 2)
    U_var = np.array(list(VAR_VALUES.values()))
    H = codes.values
    # the batch the learners see is exactly the CP model of these positional loadings
    np.testing.assert_array_equal(
        to_samples(da, layout), np.einsum("nr,ir,jr->nij", H, U_space, U_var)
    )
    if kind == "torch":
        torch = pytest.importorskip("torch")
        U_space, U_var, H = (torch.as_tensor(a) for a in (U_space, U_var, H))
    ds = factors_to_dataset([U_space, U_var], layout, codes=H, weights=np.ones(2))
    for la in lat:
        for lo in lon:
            for r in range(2):
                got = ds["lat_lon_loadings"].sel(lat=la, lon=lo, component=r)
                assert got.item() == _space_value(la, lo, r)
    assert ds["variable_loadings"].sel(variable="tp", component=0).item() == 3.0
    xr.testing.assert_identical(ds["codes"].sel(time="2021-03-04"), codes.sel(time="2021-03-04")
                                .rename("codes"))
    # reconstructing from the labelled factors gives the data back, exactly
    rebuilt = xr.dot(ds["weights"], ds["codes"], ds["lat_lon_loadings"], ds["variable_loadings"],
                     dim=COMPONENT_DIM)
    xr.testing.assert_equal(rebuilt.transpose(*da.dims), da)


def test_a_real_factorization_lines_up_with_the_planted_labels():
    labels, _ = planted_model()
    truth = _space_value(labels["lat"], labels["lon"], 0)  # rank 1 over (lat, lon), by label
    codes = xr.DataArray(np.arange(1.0, 7.0), dims="time", coords={"time": labels["time"]})
    da = (codes * truth).expand_dims(variable=["t2m"]).transpose("lon", "time", "variable", "lat")
    layout = ModeLayout.from_dataarray(da, "time", [("lat", "lon"), "variable"])
    with using("numpy"):
        cp = tl.decomposition.parafac(to_samples(da, layout), 1, init="svd", tol=1e-12)
    ds = factors_to_dataset(cp.factors[1:], layout, codes=cp.factors[0], weights=cp.weights)
    ratio = ds["lat_lon_loadings"].isel(component=0) / truth  # aligned by label by xarray
    np.testing.assert_allclose(ratio.values, ratio.values.flat[0], rtol=1e-8)
    ratio = ds["codes"].isel(component=0) / codes
    np.testing.assert_allclose(ratio.values, ratio.values[0], rtol=1e-8)


@pytest.mark.parametrize(
    ("modes", "ranks"),
    [
        (["city", "hour", "measurement"], {"city": 1, "hour": 1, "measurement": 1}),
        (["city", ("hour", "measurement")], {"city": 1, ("hour", "measurement"): 1, "hour": 4}),
        ([("city", "hour"), "measurement"], {("city", "hour"): 1, "measurement": 1, "city": 24}),
    ],
    ids=["a-no-reshape", "b-hour-measurement", "c-city-hour"],
)
def test_reshaped_atoms_have_the_expected_unfolding_ranks(modes, ranks):
    # spec item(s): spec 004 C4
    rng = np.random.default_rng(4)
    meas = ["temp", "humidity", "wind", "pressure"]
    da = xr.DataArray(
        np.zeros((3, 36, 24, 4)), dims=("window", "city", "hour", "measurement"),
        coords={"city": [f"city{i:02d}" for i in range(36)], "hour": np.arange(24),
                "measurement": meas},
    )
    layout = ModeLayout.from_dataarray(da, "window", modes)
    loadings = [rng.random((m.size, 1)) for m in layout.modes]  # R = 1, generic values
    ds = factors_to_dataset(loadings, layout)
    atom = math.prod(ds[v].isel(component=0) for v in layout.factor_names)
    assert dict(atom.sizes) == {d: da.sizes[d] for d in atom.dims} and atom.ndim == 3
    for rows, rank in ranks.items():
        assert np.linalg.matrix_rank(unfold(atom, rows).values) == rank
    if ("hour", "measurement") in modes:  # the 24 x 4 block is the loading column, unstacked
        block = ds["hour_measurement_loadings"].isel(component=0)
        assert block.dims == ("hour", "measurement") and block.shape == (24, 4)
        np.testing.assert_array_equal(block.values, loadings[1][:, 0].reshape(24, 4))
        assert block.sel(hour=7, measurement="wind").item() == loadings[1][7 * 4 + 2, 0]


def test_factors_dataset_layout_and_round_trip(tmp_path):
    da = climate().assign_coords(area=(("variable", "lat"), np.arange(6.0).reshape(2, 3)))
    layout = ModeLayout.from_dataarray(da, "time", {"space": ("lat", "lon"),
                                                    "variable": "variable"})
    rng = np.random.default_rng(2)
    loadings = [rng.random((12, 3)), rng.random((2, 3))]
    ds = factors_to_dataset(loadings, layout, codes=rng.random((5, 3)), weights=np.arange(3.0))
    assert set(ds.data_vars) == {"space_loadings", "variable_loadings", "codes", "weights"}
    assert ds["space_loadings"].dims == ("lat", "lon", COMPONENT_DIM)
    assert ds["codes"].dims == ("time", COMPONENT_DIM)
    np.testing.assert_array_equal(ds[COMPONENT_DIM].values, [0, 1, 2])
    xr.testing.assert_identical(ds["lat_name"], da["lat_name"])
    xr.testing.assert_identical(ds["area"], da["area"])  # spans two modes: kept on the Dataset
    xr.testing.assert_identical(ds["season"], da["season"])
    for got, want in zip(dataset_to_loadings(ds, layout), loadings, strict=True):
        np.testing.assert_array_equal(got, want)
    # sorted, transposed, written and read back: the same matrices, in the layout's order
    path = tmp_path / "factors.nc"
    ds.sortby("lon").transpose(COMPONENT_DIM, ...).to_netcdf(path)
    with xr.open_dataset(path) as reopened:
        for got, want in zip(dataset_to_loadings(reopened, layout), loadings, strict=True):
            np.testing.assert_array_equal(got, want)


def test_codes_to_dataarray_keeps_sample_coords_only():
    da = climate().assign_coords(valid=(("time", "lat"), np.zeros((5, 3))))
    layout = ModeLayout.from_dataarray(da, "time", [("lat", "lon"), "variable"])
    codes = codes_to_dataarray(np.arange(10.0).reshape(5, 2), layout)
    assert codes.name == "codes" and codes.dims == ("time", COMPONENT_DIM)
    assert set(codes.coords) == {"time", "season", COMPONENT_DIM}
    with pytest.raises(ValueError, match=r"expected shape \(5, n_components\)"):
        codes_to_dataarray(np.ones((4, 2)), layout)


def test_factor_errors_name_the_problem():
    da = climate()
    layout = ModeLayout.from_dataarray(da, "time", [("lat", "lon"), "variable"])
    good = [np.ones((12, 2)), np.ones((2, 2))]
    with pytest.raises(ValueError, match=r"expected 2 matrices .* got 1"):
        factors_to_dataset(good[:1], layout)
    with pytest.raises(ValueError, match=r"mode 'variable' needs shape \(2, 2\), got \(2, 3\)"):
        factors_to_dataset([good[0], np.ones((2, 3))], layout)
    with pytest.raises(ValueError, match=r"mode 'lat_lon' needs shape \(12, 2\)"):
        factors_to_dataset([np.ones((11, 2)), good[1]], layout)
    with pytest.raises(ValueError, match=r"weights: expected shape \(2,\)"):
        factors_to_dataset(good, layout, weights=np.ones(3))
    ds = factors_to_dataset(good, layout)
    with pytest.raises(ValueError, match="no variable 'variable_loadings'"):
        dataset_to_loadings(ds.drop_vars("variable_loadings"), layout)
    with pytest.raises(ValueError, match="expected dims"):
        dataset_to_loadings(ds.isel(component=0), layout)
    with pytest.raises(ValueError, match="labels along 'lon' differ"):
        dataset_to_loadings(ds.assign_coords(lon=[1.0, 2.0, 3.0, 4.0]), layout)
    with pytest.raises(TypeError, match="expected an xarray.Dataset"):
        dataset_to_loadings(ds["variable_loadings"], layout)
    clash = ModeLayout.from_dataarray(da.rename(variable="component"), "time",
                                      [("lat", "lon"), "component"])
    with pytest.raises(ValueError, match=r"names \['component'\] are reserved"):
        factors_to_dataset(good, clash)
    coord_clash = ModeLayout.from_dataarray(da.rename(lat_name="weights"), "time")
    with pytest.raises(ValueError, match=r"names \['weights'\] are reserved"):
        coord_clash.check_factor_names()


# --------------------------------------------------------------------------------------------
# validation


@pytest.mark.parametrize(
    ("sample_dim", "modes", "error", "message"),
    [
        ("level", None, ValueError,
         r"sample_dim 'level' is not a dim of the array; available dims: "
         r"\['time', 'lat', 'lon', 'variable'\]"),
        ("time", [("lat", "lon"), "level"], ValueError,
         r"unknown dim 'level'; the array has dims \['time', 'lat', 'lon', 'variable'\]"),
        ("time", [("lat", "lon"), ("lon", "variable")], ValueError,
         r"dim 'lon' is listed twice \(in \('lat', 'lon'\) and in \('lon', 'variable'\)\)"),
        ("time", [("lat", "lat"), "lon", "variable"], ValueError, "'lat' is listed twice"),
        ("time", [("lat", "lon"), "variable", "time"], ValueError, "'time' is the sample_dim"),
        ("time", [("lat", "lon")], ValueError,
         r"dims \['variable'\] are neither the sample_dim nor in any mode"),
        (None, [("lat", "lon"), "variable"], ValueError, r"dims \['time'\] are neither"),
        ("time", [], ValueError, "modes is empty"),
        ("time", {}, ValueError, "modes is empty"),
        ("time", [(), "lat", "lon", "variable"], ValueError, "at least one dim"),
        # text is the command line's syntax: 'lat' is one mode, and the other dims are left
        ("time", "lat", ValueError, r"dims \['lon', 'variable'\] are neither"),
        ("time", 3, TypeError, "expected a list or dict of modes, got int"),
        ("time", [("lat", 1), "lon", "variable"], TypeError, "dim name or a tuple of dim names"),
        ("time", {1: ("lat", "lon"), "variable": "variable"}, TypeError,
         "mode names must be strings"),
        ("time", {"v": "variable", "space": ("lat", "lon")}, ValueError,
         "single-dim mode 'v' must be named after its dim 'variable'"),
        ("time", {"lat_name": ("lat", "lon"), "variable": "variable"}, ValueError,
         "name 'lat_name' of the stacked mode .* is already a dim or coordinate"),
        ("time", {"season": ("lat", "lon"), "variable": "variable"}, ValueError,
         "already a dim or coordinate"),
    ],
)
def test_mode_specification_errors(sample_dim, modes, error, message):
    with pytest.raises(error, match=message):
        ModeLayout.from_dataarray(climate(), sample_dim, modes)
    with pytest.raises(error, match=message):
        stack_modes(climate(), modes, sample_dim)


def test_other_input_errors():
    da = climate()
    with pytest.raises(TypeError, match=r"numeric \(bool, int or float\), got dtype <U"):
        ModeLayout.from_dataarray(da.astype(str), "time")
    with pytest.raises(TypeError, match="got a Dataset; pick one variable, e.g. ds\\['obs'\\]"):
        ModeLayout.from_dataarray(da.to_dataset(), "time")
    with pytest.raises(TypeError, match="expected an xarray.DataArray, got ndarray"):
        stack_modes(da.values, None)
    with pytest.raises(ValueError, match="no dims besides sample_dim 'time'"):
        ModeLayout.from_dataarray(da.isel(lat=0, lon=0, variable=0, drop=True), "time")
    same_name = xr.DataArray(np.zeros((2, 2, 2, 2)), dims=("a", "b_c", "a_b", "c"))
    with pytest.raises(ValueError, match="two modes are named 'a_b_c'"):
        ModeLayout.from_dataarray(same_name, None, [("a", "b_c"), ("a_b", "c")])
    with pytest.raises(ValueError, match="covers every dim of the array"):
        unfold(da, da.dims)
    layout = ModeLayout.from_dataarray(da, "time", [("lat", "lon"), "variable"])
    stacked = stack_modes(da, [("lat", "lon"), "variable"], "time")
    with pytest.raises(ValueError, match="expected dims"):
        unstack_modes(stacked.rename(lat_lon="space"), layout)
    with pytest.raises(ValueError, match="mode 'lat_lon' has length 6, the layout says 12"):
        unstack_modes(stacked.isel(lat_lon=slice(0, 6)), layout)
    relabelled = stacked.assign_coords(variable=["a", "b"])
    with pytest.raises(ValueError, match="labels along 'variable' differ"):
        unstack_modes(relabelled, layout)


def test_parse_modes():
    assert parse_modes("lat,lon;variable") == [("lat", "lon"), "variable"]
    assert parse_modes(" lat , lon ") == [("lat", "lon")]
    assert parse_modes("space=lat,lon;variable") == {"space": ("lat", "lon"),
                                                     "variable": "variable"}
    assert parse_modes("variable;x=lat,lon") == {"variable": "variable", "x": ("lat", "lon")}
    da = climate()
    layout = ModeLayout.from_dataarray(da, "time", parse_modes("space=lat,lon;variable"))
    assert layout.mode_names == ("space", "variable")
    for bad in ("lat,,lon", "lat;", " =lat"):
        with pytest.raises(ValueError, match="cannot parse"):
            parse_modes(bad)


@pytest.mark.parametrize("text", ["s=lat,lon;s=lat,lon;variable",
                                  "lat_lon=lat,lon;lat_lon=variable", "lat_lon=variable;lat,lon"])
def test_parse_modes_refuses_two_modes_of_one_name(text):
    """Two modes of the same name (given, or the default ``a_b`` of stacked dims) are refused
    (the dict kept the last one and dropped the others silently)."""
    with pytest.raises(ValueError, match="two modes are named"):
        parse_modes(text)


def test_aligned_samples_refuses_a_mask_without_the_sample_dim_or_its_labels():
    from tensorstream.labels import aligned_samples

    da = xr.DataArray(np.zeros((3, 2)), dims=("t", "x"), coords={"t": [1, 2, 3]})
    with pytest.raises(ValueError, match="mask must have the sample dim 't'"):
        aligned_samples(xr.DataArray(np.ones((3, 2)) > 0, dims=("s", "x")), da, "t")
    for labels in ([1, 2, 4], [1, 1, 2], [1, 2]):
        other = xr.DataArray(np.ones((len(labels), 2)) > 0, dims=("t", "x"),
                             coords={"t": labels})
        with pytest.raises(ValueError, match="labels differ"):
            aligned_samples(other, da, "t")
    unlabelled = xr.DataArray(np.ones((3, 2)) > 0, dims=("t", "x"))
    assert aligned_samples(unlabelled, da, "t") is unlabelled  # positions are all there is
