"""``modes`` on every input (issue #32): arrays, tensors, dask arrays and streams take axis
groups, DataArrays dim names, both the command line's text; a ``modes`` that cannot apply is an
error, never ignored."""

import importlib.util

import numpy as np
import pytest
import xarray as xr
from state_helpers import LEARNERS, entry_of, make

import tensorstream as ts
from tensorstream.modes import ArrayLayout, as_modes, unstack_loadings

ONLINE = [name for name in LEARNERS if entry_of(name).kind == "online"]
OTHERS = [name for name in LEARNERS if entry_of(name).kind != "online"]
HAS_TORCH = importlib.util.find_spec("torch") is not None
INPUTS = ["numpy", "dask", "stream", "dataarray"] + (["torch"] if HAS_TORCH else [])


def patches(n=40, seed=0):
    """Positive samples of shape (4, 3, 2): y, x, channel."""
    return np.random.default_rng(seed).random((n, 4, 3, 2)) + 0.1


def grouping_for(name):
    """A grouping every learner can take: the matrix learners learn one feature mode."""
    return [(0, 1, 2)] if entry_of(name).matrix else [(0, 1), 2]


def dims_for(name):
    return [("y", "x", "channel")] if entry_of(name).matrix else [("y", "x"), "channel"]


def as_input(X, kind, groups=None):
    if kind == "torch":
        import torch

        return torch.tensor(X)
    if kind == "dask":
        import dask.array as da

        return da.from_array(X, chunks=(10, 4, 3, 2))
    if kind == "stream":
        return [X[i:i + 10] for i in range(0, len(X), 10)]
    if kind == "dataarray":
        return xr.DataArray(X, dims=("patch", "y", "x", "channel"))
    return X


def regrouped(X, groups):
    """What ``modes`` must amount to: the axes of each group next to each other, flattened."""
    groups = [g if isinstance(g, tuple) else (g,) for g in groups]
    order = [0] + [1 + a for g in groups for a in g]
    sizes = [int(np.prod([X.shape[1 + a] for a in g])) for g in groups]
    return X.transpose(order).reshape(len(X), *sizes)


def test_numpy_modes_are_not_silently_ignored():
    """The issue's reproducer: on main the loadings had shapes (8, 4), (8, 4), (3, 4)."""
    X = np.random.default_rng(0).random((300, 8, 8, 3))
    model = ts.OnlineCPDL(4, random_state=0, max_iter=1).fit(X, modes=[(0, 1), 2])
    assert [tuple(U.shape) for U in model.loadings_] == [(64, 4), (3, 4)]
    assert [U.shape for U in unstack_loadings(model.loadings_, model.array_layout_)] == [
        (8, 8, 4), (3, 4)]


@pytest.mark.parametrize("kind", INPUTS)
@pytest.mark.parametrize("name", ONLINE)
def test_every_learner_takes_modes_on_every_input(name, kind):
    """The fit with ``modes`` is the fit on the regrouped array, bit for bit."""
    X = patches()
    groups = grouping_for(name)
    if kind == "dataarray":
        fitted = make(name).fit(as_input(X, kind), sample_dim="patch", modes=dims_for(name))
    else:
        fitted = make(name).fit(as_input(X, kind), modes=groups)
    reference = make(name).fit(regrouped(X, groups) if kind != "stream" else
                               [regrouped(b, groups) for b in as_input(X, kind)])
    expected = [(12, 2), (2, 2)] if len(groups) == 2 else [(24, 2)]
    assert [tuple(U.shape) for U in fitted.loadings_] == expected
    for U, V in zip(fitted.loadings_, reference.loadings_):
        np.testing.assert_allclose(ts.core.backend.to_numpy(U), ts.core.backend.to_numpy(V),
                                   rtol=1e-10, atol=1e-12)
    if kind != "dataarray":  # new data is regrouped as the fit was, and given back alike
        new = as_input(X[:5], "torch" if kind == "torch" else "numpy")
        assert tuple(fitted.transform(new).shape) == (5, 2)
        assert tuple(fitted.reconstruct(new).shape) == (5, 4, 3, 2)


@pytest.mark.parametrize("name", [n for n in ONLINE if entry_of(n).matrix])
def test_matrix_learners_refuse_several_modes(name):
    model = make(name)
    with pytest.raises(ValueError, match=f"{type(model).__name__} factorizes matrices"):
        model.fit(patches(), modes=[(0, 1), 2])
    assert "state_" not in model.__dict__


@pytest.mark.parametrize("name", OTHERS)
def test_learners_without_modes_refuse_them(name):
    """The batch and finite learners take whole matrices: ``modes`` is refused by name."""
    with pytest.raises(TypeError, match="modes"):
        make(name).fit(patches().reshape(40, -1), modes=[0])


@pytest.mark.parametrize("modes, error, message", [
    ([(0, 1), 3], ValueError, r"unknown axis 3; a sample has 3 axes"),
    ([(0, 1), 1, 2], ValueError, r"axis 1 is listed twice"),
    ([(0, 1)], ValueError, r"axes \[2\] of the sample .* are in no group"),
    ([(0, -3), 2], ValueError, r"axis 0 is listed twice"),
    ([(0, 1), ()], ValueError, "at least one axis"),
    ([], ValueError, "modes is empty"),
    ([("y", "x"), "channel"], TypeError, "axes are integers for array input"),
    ("y,x;channel", TypeError, r"'y' in 'y,x;channel' is a dim name"),
    ("0,1;;2", ValueError, "cannot parse"),
    (3, TypeError, "expected a list of axis groups"),
])
def test_bad_modes_are_named(modes, error, message):
    model = ts.OnlineCPDL(2, random_state=0)
    with pytest.raises(error, match=message):
        model.fit(patches(), modes=modes)
    assert model.__dict__.keys().isdisjoint({"state_", "array_layout_", "_rng"})


def test_text_and_negative_axes_are_the_same_grouping():
    assert as_modes("0,1;-1", 3) == as_modes([(0, 1), 2], 3) == [(0, 1), (2,)]
    assert ArrayLayout.from_modes("0,1;2", (4, 3, 2)).text == "0,1;2"


def test_axis_order_within_a_group_is_kept():
    layout = ArrayLayout.from_modes([(1, 0), 2], (4, 3, 2))
    X = patches(5)
    np.testing.assert_array_equal(layout.apply(X), X.transpose(0, 2, 1, 3).reshape(5, 12, 2))
    np.testing.assert_array_equal(layout.restore(layout.apply(X)), X)


def test_other_modes_later_are_refused_and_the_state_kept():
    X = patches()
    model = ts.OnlineCPDL(2, random_state=0).partial_fit(X[:10], modes=[(0, 1), 2])
    before = [np.array(U) for U in model.loadings_]
    with pytest.raises(ValueError, match=r"modes '0;1,2' .* differ from the fitted '0,1;2'"):
        model.partial_fit(X[10:20], modes=[0, (1, 2)])
    with pytest.raises(ValueError, match="samples of shape"):
        model.partial_fit(X[10:20, :2])
    with pytest.raises(TypeError, match="grouped by modes '0,1;2'"):
        model.transform(as_input(X[:5], "dataarray"))
    for U, V in zip(before, model.loadings_):
        np.testing.assert_array_equal(U, V)
    model.partial_fit(X[10:20])  # later batches are regrouped as the first
    assert model.n_steps_ == 2


def test_sample_dim_on_an_array_is_refused():
    with pytest.raises(TypeError, match="sample_dim applies to xarray.DataArray input only"):
        ts.OnlineCPDL(2).fit(patches(), sample_dim="patch")


def test_masks_are_regrouped_with_the_data():
    X = patches()
    mask = np.random.default_rng(1).random(X.shape) > 0.2
    groups = [(0, 1), 2]
    fitted = ts.OnlineCPDL(2, random_state=0, max_iter=1).fit(X, mask=mask, modes=groups)
    reference = ts.OnlineCPDL(2, random_state=0, max_iter=1).fit(
        regrouped(X, groups), mask=regrouped(mask, groups))
    for U, V in zip(fitted.loadings_, reference.loadings_):
        np.testing.assert_array_equal(U, V)
    assert fitted.reconstruct(X[:3], mask=mask[:3]).shape == (3, 4, 3, 2)


def test_the_grouping_is_checkpointed(tmp_path):
    X = patches()
    model = ts.OnlineCPDL(2, random_state=0, max_iter=1).fit(X, modes="0,1;2")
    path = model.save(tmp_path / "grouped.npz")
    loaded = ts.load(path)
    assert loaded.array_layout_ == model.array_layout_
    np.testing.assert_array_equal(loaded.transform(X[:5]), model.transform(X[:5]))


def test_dataarrays_take_the_command_line_text():
    X = as_input(patches(), "dataarray")
    text = ts.OnlineCPDL(2, random_state=0, max_iter=1).fit(X, sample_dim="patch",
                                                            modes="y,x;channel")
    listed = ts.OnlineCPDL(2, random_state=0, max_iter=1).fit(X, sample_dim="patch",
                                                              modes=[("y", "x"), "channel"])
    assert text.layout_.mode_names == listed.layout_.mode_names == ("y_x", "channel")
    np.testing.assert_array_equal(text.loadings_[0], listed.loadings_[0])
    with pytest.raises(ValueError, match="unknown dim 'z'"):
        ts.OnlineCPDL(2).fit(X, sample_dim="patch", modes="y,z;channel")


def test_unstack_loadings_needs_one_loading_per_mode():
    layout = ArrayLayout.from_modes([(0, 1), 2], (4, 3, 2))
    with pytest.raises(ValueError, match="1 loadings for the 2 modes"):
        unstack_loadings([np.zeros((12, 2))], layout)
