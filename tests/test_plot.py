"""Plots: files are written, panels and axis labels follow the data, pyplot is never touched."""

import sys

import numpy as np
import pytest
import xarray as xr

pytest.importorskip("matplotlib")

from tensorstream import OnlineCPDL  # noqa: E402
from tensorstream.plot import (  # noqa: E402
    cp_atoms,
    factors_atoms,
    plot_atom_rows,
    plot_atoms,
    plot_convergence,
    plot_factors,
)


@pytest.fixture(scope="module")
def factors():
    """A fitted labelled model's factors, with codes over datetimes."""
    from tensorstream.cli.demo import climate_like_dataarray

    da, _ = climate_like_dataarray(n_days=2)
    model = OnlineCPDL(3, batch_size=16, max_iter=1, random_state=0)
    model.fit(da, sample_dim="time", modes=[("lat", "lon"), "variable"])
    ds = model.factors_
    ds["codes"] = model.transform(da)
    return ds


def test_cp_atoms_are_outer_products_reshaped():
    rng = np.random.default_rng(0)
    U = [rng.random((4, 3)), rng.random((5, 3)), rng.random((2, 3))]
    expected = np.einsum("ir,jr,kr->rijk", *U)
    np.testing.assert_allclose(cp_atoms(U), expected)
    np.testing.assert_allclose(cp_atoms([U[0], rng.random((10, 3))], shape=(4, 5, 2)).shape,
                               (3, 4, 5, 2))


def test_factors_atoms_match_the_loadings_whatever_the_stacking():
    da = xr.DataArray(np.random.default_rng(1).random((30, 4, 5, 3)),
                      dims=("patch", "y", "x", "channel"))
    model = OnlineCPDL(2, max_iter=1, random_state=0)
    model.fit(da, sample_dim="patch", modes=[("y", "x"), "channel"])
    atoms = factors_atoms(model.factors_).transpose("component", "y", "x", "channel")
    np.testing.assert_allclose(atoms.values, cp_atoms(model.loadings_, shape=(4, 5, 3)))


def test_plot_atoms_grid_rgb_gray_and_curves(tmp_path):
    rng = np.random.default_rng(2)
    fig = plot_atoms(rng.random((5, 8, 8, 3)), ncols=3, title="rgb", path=tmp_path / "rgb.png")
    assert len(fig.axes) == 6 and not fig.axes[5].axison  # one empty slot, hidden
    assert fig.axes[0].get_title() == "atom 0"
    assert fig.axes[0].get_images()[0].get_array().shape == (8, 8, 3)
    assert (tmp_path / "rgb.png").stat().st_size > 2_000
    gray = plot_atoms(rng.standard_normal((4, 6, 7)), titles=list("abcd"))
    image = gray.axes[1].get_images()[0].get_array()
    assert gray.axes[1].get_title() == "b" and 0.0 <= image.min() and image.max() <= 1.0
    curves = plot_atoms(rng.random((3, 20)))
    assert len(curves.axes[0].get_lines()) == 1
    with pytest.raises(ValueError, match="normalize"):
        plot_atoms(rng.random((3, 4, 4)), normalize="loud")


def test_plot_atom_rows_puts_each_dictionary_on_a_row(tmp_path):
    rng = np.random.default_rng(3)
    rows = {"(b)": rng.random((6, 5, 5, 3)), "(d)": rng.random((4, 5, 5, 3))}
    fig = plot_atom_rows(rows, extra={"(b)": rng.random((10, 10, 3))}, max_atoms=5,
                         path=tmp_path / "rows.png")
    assert len(fig.axes) == 2 * 6
    assert [fig.axes[k].get_ylabel() for k in (0, 6)] == ["(b)", "(d)"]
    assert fig.axes[0].get_title() == "reconstruction" and not fig.axes[6].axison
    assert (tmp_path / "rows.png").stat().st_size > 5_000


def test_plot_factors_maps_lines_and_codes_on_their_coordinates(factors, tmp_path):
    fig = plot_factors(factors, title="climate", path=tmp_path / "factors.png")
    labels = [(ax.get_xlabel(), ax.get_ylabel()) for ax in fig.axes]
    # three maps on (lat, lon) with units, one line panel per 1-D mode, codes against time:
    # the dims and their units label the axes, the quantity the values, never a variable name
    assert labels[0] == ("lon [degrees_east]", "lat [degrees_north]")
    assert sum(1 for x, _ in labels if x == "lon [degrees_east]") == 3
    assert ("variable", "loading") in labels
    assert ("time", "code") in labels
    assert [sub._suptitle.get_text() for sub in fig.subfigs] == [
        "loadings over lat and lon", "loadings over variable", "codes over time"]
    assert not any("_loadings" in text for pair in labels for text in pair)
    # a categorical profile: grouped bars (one group of bars per component), not lines
    bars = next(ax for ax in fig.axes if ax.get_xlabel() == "variable")
    assert len(bars.containers) == 3 and all(len(c) == 4 for c in bars.containers)
    assert [t.get_text() for t in bars.get_xticklabels()] == ["t2m", "rh", "wind", "precip"]
    # every map has its colour bar, each labelled; the legends are outside the axes
    bars = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert len(bars) == 3 and {bar.get_ylabel() for bar in bars} == {"loading"}
    assert fig.get_suptitle() == "climate"  # all components shown: no note
    for ax in fig.axes:
        if ax.get_legend() is not None:
            assert ax.get_legend().get_bbox_to_anchor().x0 >= ax.get_window_extent().x1 - 1
    assert (tmp_path / "factors.png").stat().st_size > 20_000


def test_plot_factors_rgb_modes_and_component_choice():
    ds = xr.Dataset({"y_x_channel_loadings": (("y", "x", "channel", "component"),
                                              np.random.default_rng(4).random((5, 5, 3, 4)))},
                    coords={"component": np.arange(4)})
    fig = plot_factors(ds, components=[1, 3])
    images = [ax.get_images()[0].get_array() for ax in fig.axes if ax.get_images()]
    assert len(images) == 2 and images[0].shape == (5, 5, 3)
    assert [ax.get_title() for ax in fig.axes] == ["component 1", "component 3"]
    with pytest.raises(ValueError, match="out of range"):
        plot_factors(ds, components=[7])
    with pytest.raises(ValueError, match="at least one component"):
        plot_factors(ds, components=[])
    with pytest.raises(ValueError, match="no '<mode>_loadings' variables"):
        plot_factors(xr.Dataset({"x": ("a", [1.0])}))


def test_plot_convergence_from_callback_infos(tmp_path):
    history = []
    X = np.random.default_rng(5).random((200, 6, 5))
    model = OnlineCPDL(2, batch_size=4, max_iter=1, random_state=0,
                       callback=lambda learner, info: history.append(info))
    model.fit(X)
    fig = plot_convergence(history, path=tmp_path / "loss.png")
    ax = fig.axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_yscale()) == ("step", "batch_loss", "log")
    assert len(ax.get_lines()) == 2  # raw and running mean (50 steps)
    assert len(ax.get_lines()[0].get_xdata()) == 50
    assert (tmp_path / "loss.png").stat().st_size > 5_000
    both = plot_convergence({"a": [3.0, -1.0], "b": [1.0, 2.0]})
    assert both.axes[0].get_yscale() == "linear" and both.axes[0].get_xlabel() == "step"
    with pytest.raises(ValueError, match="empty"):
        plot_convergence([])
    with pytest.raises(ValueError, match="no values for"):
        plot_convergence(history, keys=["objective"])


def test_no_pyplot_state_is_created(factors):
    plot_factors(factors)
    plot_atoms(np.ones((2, 3, 3)))
    if "matplotlib.pyplot" in sys.modules:
        assert sys.modules["matplotlib.pyplot"].get_fignums() == []


def test_a_smoothing_window_longer_than_the_run_plots_its_mean():
    """``smooth`` longer than the run (it raised "x and y must have same first dimension")."""
    from tensorstream.plot import plot_convergence

    fig = plot_convergence([{"step": i, "batch_loss": 1 / i} for i in range(1, 6)], smooth=10)
    assert len(fig.axes[0].lines) == 2 and len(fig.axes[0].lines[1].get_xdata()) == 1


# -- found by review (2026-11-26) -----------------------------------------------------------------


def test_maps_on_descending_or_unsorted_coordinates_are_drawn_on_them():
    """Latitudes running north to south (ERA5's order) were drawn by position under the
    coordinates' labels; now any order of distinct numbers is drawn on the coordinates."""
    lat = np.arange(60.0, -61.0, -15.0)
    lon = np.arange(0.0, 360.0, 22.5)
    peak = np.exp(-((lat[:, None] - 45) ** 2 / 200 + (lon[None, :] - 90) ** 2 / 2000))
    ds = xr.Dataset({"lat_lon_loadings": (("lat", "lon", "component"), peak[..., None])},
                    coords={"lat": ("lat", lat, {"units": "degrees_north"}),
                            "lon": ("lon", lon, {"units": "degrees_east"}), "component": [0]})
    for data in (ds, ds.isel(lat=slice(None, None, -1)), ds.isel(lon=[3, 0, 9, 1, 2, 4, 5, 6,
                                                                       7, 8, 10, 11, 12, 13,
                                                                       14, 15])):
        ax = plot_factors(data).axes[0]
        assert ax.get_ylim() == (-67.5, 67.5) and ax.get_xlim() == (-11.25, 348.75)
        mesh = ax.collections[0]
        # the brightest cell sits at the peak's coordinates (45 N, 90 E)
        cells = np.asarray(mesh.get_array()).reshape(len(lat), len(lon))
        row, column = np.unravel_index(np.argmax(cells), cells.shape)
        assert np.sort(lat)[row] == 45.0 and np.sort(lon)[column] == 90.0
    repeated = ds.assign_coords(lon=np.r_[lon[:-1], lon[0]])
    ax = plot_factors(repeated).axes[0]
    assert ax.get_xlabel() == "lon (position)" and ax.get_ylabel() == "lat (position)"


@pytest.mark.parametrize("calendar", ["noleap", "360_day"])
def test_codes_over_a_model_calendar_are_lines(calendar):
    pytest.importorskip("cftime")
    t = xr.date_range("2000-01-01", periods=300, calendar=calendar, use_cftime=True)
    ds = xr.Dataset({"x_loadings": (("x", "component"), np.ones((3, 2))),
                     "codes": (("time", "component"),
                               np.random.default_rng(0).random((300, 2)))},
                    coords={"time": t})
    ax = plot_factors(ds).axes[-1]
    assert {line.get_linestyle() for line in ax.get_lines()} == {"-"}
    assert len(ax.get_xticklabels()) < 20


# -- issue 34: figures that hide nothing ----------------------------------------------------------


def _dataset(n_components, signed=False, seed=0):
    rng = np.random.default_rng(seed)
    maps = rng.standard_normal((3, 4, n_components))
    return xr.Dataset(
        {"lat_lon_loadings": (("lat", "lon", "component"), maps if signed else np.abs(maps)),
         "variable_loadings": (("variable", "component"), rng.random((2, n_components)))},
        coords={"lat": [-10.0, 0.0, 10.0], "lon": [0.0, 90.0, 180.0, 270.0],
                "variable": ["t2m", "tp"], "component": np.arange(n_components)})


def _maps(fig):
    return [ax for ax in fig.axes if ax.collections or ax.get_images()
            if ax.get_label() != "<colorbar>"]


def test_fewer_components_than_fitted_are_announced_in_the_figure():
    ds = _dataset(16)
    fig = plot_factors(ds, title="run 3")
    assert fig.get_suptitle() == "run 3\nshowing 12 of 16 components (max_components=12)"
    assert len(_maps(fig)) == 12
    assert len(_maps(plot_factors(ds, max_components=20))) == 16
    assert "of 16" not in plot_factors(ds, max_components=16).get_suptitle()
    assert plot_factors(ds, components=[3, 5]).get_suptitle() == "showing 2 of 16 components"
    for bad in (0, -1, 2.5):
        with pytest.raises(ValueError, match="max_components must be an integer >= 1"):
            plot_factors(ds, max_components=bad)


@pytest.mark.parametrize("signed", [False, True])
def test_signed_maps_are_diverging_around_zero_nonnegative_ones_sequential(signed):
    fig = plot_factors(_dataset(3, signed=signed, seed=1))
    for ax in _maps(fig):
        mesh = ax.collections[0]
        low, high = mesh.get_clim()
        assert mesh.get_cmap().name == ("RdBu_r" if signed else "viridis")
        assert (low == -high) if signed else (low == 0.0 and high > 0)
    atoms = plot_atoms(np.random.default_rng(2).standard_normal((2, 4, 4)) * (
        1 if signed else 0) + (0 if signed else 1))
    assert atoms.axes[0].get_images()[0].get_cmap().name == ("RdBu_r" if signed else "viridis")


@pytest.mark.parametrize("modes, kind", [(["y", "x", "channel"], "rgb"),
                                         ([("y", "x"), "channel"], "rgb"),
                                         (["y", "x"], "gray"), ([("y", "x")], "gray")])
def test_picture_modes_are_drawn_as_images_not_bar_charts(modes, kind):
    """Patches learned with the picture's axes as separate modes (or one stacked mode) are
    drawn as the atoms' images, pixel rows downwards, never as a bar chart per axis."""
    rng = np.random.default_rng(3)
    shape = (60, 5, 6, 3) if kind == "rgb" else (60, 5, 6)
    dims = ("patch", "y", "x", "channel")[:len(shape)]
    da = xr.DataArray(rng.random(shape), dims=dims,
                      coords={"y": np.arange(5), "x": np.arange(6)})
    model = OnlineCPDL(2, max_iter=1, random_state=0).fit(da, sample_dim="patch",
                                                             modes=modes)
    fig = plot_factors(model.factors_)
    assert not any(ax.containers for ax in fig.axes)  # no bars
    images = [ax.get_images()[0] for ax in fig.axes if ax.get_images()]
    assert len(images) == 2 and not any(ax.collections for ax in fig.axes
                                        if ax.get_label() != "<colorbar>")  # no pcolormesh
    expected = cp_atoms(model.loadings_, shape=shape[1:])
    if kind == "rgb":
        assert images[0].get_array().shape == (5, 6, 3)
        assert fig.subfigs[0]._suptitle.get_text().startswith("atoms over y, x and channel")
    else:
        assert images[0].get_array().shape == (5, 6)
        np.testing.assert_allclose(images[1].get_array(), expected[1])
        assert images[0].origin == "upper" and fig.axes[0].get_ylabel() == "y"
        bars = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
        assert len(bars) == 2 and all(bar.get_ylabel() for bar in bars)
