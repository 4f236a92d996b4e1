"""Learned factors and codes in and out of labelled modes: :func:`factors_to_dataset` /
:func:`dataset_to_loadings`, :func:`codes_to_dataarray` / :func:`codes_from_dataarray`,
:func:`aligned_samples`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from ..core.backend import to_numpy
from .layout import (
    ModeLayout,
    _check_loadings,
    _require_sample_dim,
)
from .specs import (
    COMPONENT_DIM,
    Mode,
    _dim_index,
    _match_labels,
    _subset_coords,
)

# --------------------------------------------------------------------------------------------
# factors in and out


def factors_to_dataset(
    loadings: Sequence[Any],
    layout: ModeLayout,
    codes: Any = None,
    weights: Any = None,
) -> xr.Dataset:
    """Labelled CP factors: one variable per mode, stacked modes unstacked again.

    Parameters
    ----------
    loadings : sequence of arrays
        One ``(I_k, R)`` loading matrix per mode, numpy arrays or backend tensors (torch on any
        device).
    layout : ModeLayout
        Layout of the data the loadings were learned from.
    codes : array, optional
        Codes ``(n_samples, R)`` of the layout's samples; stored as ``"codes"`` over
        ``(sample_dim, component)`` with the sample coords.
    weights : array, optional
        Component weights ``(R,)``; stored as ``"weights"`` over ``component``.

    Returns
    -------
    xarray.Dataset
        One variable ``"<mode>_loadings"`` per mode (see :attr:`ModeLayout.factor_names`;
        ``<mode>`` is the dim of a single-dim mode, and for a stacked mode its dims joined with
        ``"_"`` or the name given in ``modes``) over ``(*mode.dims, component)``, with the
        original coordinates of those dims; ``component`` has coords ``0..R-1``. Feature
        coordinates spanning several modes are kept as Dataset coordinates.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> da = xr.DataArray(np.zeros((5, 3, 4, 2)), dims=("time", "lat", "lon", "variable"),
    ...                   coords={"lat": [10, 20, 30], "variable": ["t2m", "tp"]})
    >>> layout = ModeLayout.from_dataarray(da, "time", [("lat", "lon"), "variable"])
    >>> ds = factors_to_dataset([np.ones((12, 2)), np.ones((2, 2))], layout)
    >>> ds["lat_lon_loadings"].dims, ds["variable_loadings"].dims
    (('lat', 'lon', 'component'), ('variable', 'component'))
    """
    layout.check_factor_names()
    mats = [to_numpy(U) for U in loadings]
    rank = _check_loadings(mats, layout)
    data_vars = {
        var: ((*m.dims, COMPONENT_DIM), U.reshape(*m.shape, rank))
        for var, m, U in zip(layout.factor_names, layout.modes, mats, strict=True)
    }
    ds = xr.Dataset(data_vars, coords=layout.feature_coords)
    ds = ds.assign_coords({COMPONENT_DIM: np.arange(rank)})
    if weights is not None:
        w = to_numpy(weights)
        if w.shape != (rank,):
            raise ValueError(f"weights: expected shape ({rank},), got {w.shape}")
        ds["weights"] = ((COMPONENT_DIM,), w)
    if codes is not None:
        ds["codes"] = codes_to_dataarray(codes, layout)
    return ds


def codes_to_dataarray(codes: Any, layout: ModeLayout) -> xr.DataArray:
    """Label codes ``(n_samples, R)`` over ``(sample_dim, component)``.

    Parameters
    ----------
    codes : array
        Numpy array or backend tensor with ``layout.n_samples`` rows (for a new batch use
        ``layout.with_samples(new_da)``).
    layout : ModeLayout
        Layout with a sample dim.

    Returns
    -------
    xarray.DataArray
        Named ``"codes"``, with the coords that lie along the sample dim alone.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> da = xr.DataArray(np.zeros((3, 4)), dims=("time", "x"), coords={"time": [1, 2, 3]})
    >>> layout = ModeLayout.from_dataarray(da, "time")
    >>> codes_to_dataarray(np.ones((3, 2)), layout).dims
    ('time', 'component')
    """
    _require_sample_dim(layout)
    H = to_numpy(codes)
    if H.ndim != 2 or H.shape[0] != layout.n_samples:
        raise ValueError(
            f"codes: expected shape ({layout.n_samples}, n_components), got {H.shape}; "
            "for another set of samples use layout.with_samples(da)"
        )
    own = [n for n, c in layout.sample_coords.items() if c.dims == (layout.sample_dim,)]
    out = xr.DataArray(
        H,
        dims=(layout.sample_dim, COMPONENT_DIM),
        coords=_subset_coords(layout.sample_coords, own),
        name="codes",
    )
    return out.assign_coords({COMPONENT_DIM: np.arange(H.shape[1])})


def aligned_samples(other: xr.DataArray, da: xr.DataArray, sample_dim: str,
                    name: str = "mask") -> xr.DataArray:
    """``other`` (a labelled mask of ``da``) with its samples in ``da``'s order, matched by
    the labels of ``sample_dim`` where both carry them (by position otherwise, as for its
    features, which :func:`to_samples` matches by name and label).

    Raises ``ValueError`` naming ``name`` when the labels differ (other samples, or repeated
    labels that cannot be matched).

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> da = xr.DataArray(np.zeros((3, 2)), dims=("t", "x"), coords={"t": [1, 2, 3]})
    >>> mask = xr.DataArray(np.eye(3, 2) > 0, dims=("t", "x"), coords={"t": [3, 2, 1]})
    >>> aligned_samples(mask, da, "t")["t"].values.tolist()
    [1, 2, 3]
    """
    if sample_dim not in other.dims:
        raise ValueError(f"{name} must have the sample dim {sample_dim!r}, got {other.dims}")
    if sample_dim not in other.coords or sample_dim not in da.coords:
        return other
    ours, theirs = da[sample_dim].values, other[sample_dim].values
    if len(ours) == len(theirs) and np.array_equal(ours, theirs):
        return other
    index = pd.Index(theirs)
    positions = index.get_indexer(ours) if index.is_unique else None
    if positions is None or len(ours) != len(theirs) or (positions < 0).any():
        raise ValueError(f"{name}: its {sample_dim!r} labels differ from the data's (it must "
                         f"mark the same samples)")
    return other.isel({sample_dim: positions})


def codes_from_dataarray(codes: xr.DataArray, layout: ModeLayout, n_components: int) -> Any:
    """The ``(n_samples, R)`` data of labelled codes (the inverse of
    :func:`codes_to_dataarray`), its dims and components matched by name and label.

    Raises ``ValueError`` (naming ``codes``) when the dims are not ``(sample_dim, component)``
    in some order, or the ``component`` labels are not ``0..R-1`` in some order.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> da = xr.DataArray(np.zeros((3, 4)), dims=("time", "x"))
    >>> layout = ModeLayout.from_dataarray(da, "time")
    >>> codes = codes_to_dataarray(np.array([[1.0, 2.0]] * 3), layout)
    >>> codes_from_dataarray(codes.isel(component=[1, 0]), layout, 2)[0]
    array([1., 2.])
    """
    if set(codes.dims) != {layout.sample_dim, COMPONENT_DIM}:
        raise ValueError(f"codes must have the dims ({layout.sample_dim!r}, "
                         f"{COMPONENT_DIM!r}), got {codes.dims}")
    if COMPONENT_DIM in codes.coords:  # as transform labels them: matched by label
        labels = np.asarray(codes[COMPONENT_DIM].values)
        if labels.dtype.kind not in "iu" or sorted(labels.tolist()) != list(range(n_components)):
            raise ValueError(f"codes: the {COMPONENT_DIM!r} labels must be 0..{n_components - 1} "
                             f"(in any order), got {labels.tolist()}")
        codes = codes.isel({COMPONENT_DIM: np.argsort(labels, kind="stable")})
    return codes.transpose(layout.sample_dim, COMPONENT_DIM).data


def dataset_to_loadings(ds: xr.Dataset, layout: ModeLayout) -> list[np.ndarray]:
    """The ``(I_k, R)`` loading matrices stored in a factors Dataset (checkpoints, inits).

    Labels are matched by value: a Dataset sorted or transposed differently from the layout
    gives the loadings in the layout's order.

    Parameters
    ----------
    ds : xarray.Dataset
        As written by :func:`factors_to_dataset` (possibly saved and reopened).
    layout : ModeLayout
        Layout of the data the loadings are for.

    Returns
    -------
    list of numpy.ndarray
        One ``(I_k, R)`` matrix per mode, rows in the layout's C order.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> da = xr.DataArray(np.zeros((5, 3, 4)), dims=("time", "lat", "lon"))
    >>> layout = ModeLayout.from_dataarray(da, "time", [("lat", "lon")])
    >>> U = np.arange(24.0).reshape(12, 2)
    >>> np.array_equal(dataset_to_loadings(factors_to_dataset([U], layout), layout)[0], U)
    True
    """
    if not isinstance(ds, xr.Dataset):
        raise TypeError(f"ds: expected an xarray.Dataset, got {type(ds).__name__}")
    # one Dataset has one component dim, so every matrix has the same number of columns
    return [
        _loading_from_dataset(ds, var, m, layout)
        for var, m in zip(layout.factor_names, layout.modes, strict=True)
    ]



def _loading_from_dataset(
    ds: xr.Dataset, name: str, mode: Mode, layout: ModeLayout
) -> np.ndarray:
    """The ``(I_k, R)`` matrix of one mode, stored as variable ``name``, from a Dataset."""
    if name not in ds.data_vars:
        raise ValueError(
            f"ds: no variable {name!r} for the mode {mode.dims}; it has {list(ds.data_vars)}"
        )
    var = ds[name]
    expected = {*mode.dims, COMPONENT_DIM}
    if set(var.dims) != expected:
        raise ValueError(f"ds[{name!r}]: expected dims {sorted(expected)}, got {list(var.dims)}")
    sizes = layout.sizes
    wrong = {d: var.sizes[d] for d in mode.dims if var.sizes[d] != sizes[d]}
    if wrong:
        raise ValueError(f"ds[{name!r}]: sizes {wrong} differ from the layout's")
    for d in mode.dims:
        var = _match_labels(var, d, _dim_index(layout.feature_coords, d), f"ds[{name!r}]")
    values = var.transpose(*mode.dims, COMPONENT_DIM).values
    return values.reshape(mode.size, var.sizes[COMPONENT_DIM])
