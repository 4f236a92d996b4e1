"""Data in and out of labelled modes (:func:`to_samples`, :func:`from_samples`) and the
labelled reshapes (:func:`stack_modes` / :func:`unstack_modes`, :func:`unfold` / :func:`fold`,
:func:`parse_modes` / :func:`format_modes`), which round-trip exactly."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np
import xarray as xr

from .layout import (
    ModeLayout,
    _check_same_dims,
    _check_stacked_dims,
    _match_feature_labels,
    _match_mode_labels,
    _require_sample_dim,
    _stacked_index,
)
from .specs import (
    ModeEntry,
    ModeSpec,
    _as_dims,
    _check_dataarray,
    _default_name,
    _host_array,
    _subset_coords,
)

# --------------------------------------------------------------------------------------------
# data in and out


def to_samples(da: xr.DataArray, layout: ModeLayout, indices: Any = None) -> Any:
    """The data of ``da`` as a batch of CP-shaped samples ``(n_samples, I_1, ..., I_n)``.

    The array is transposed to ``[sample_dim, *mode dims]`` and reshaped in C order. Numpy data
    stay numpy (a view where the memory layout allows it), dask data stay lazy (a dask array;
    nothing is computed), lazily opened files read only the selected samples.

    Parameters
    ----------
    da : xarray.DataArray
        Data with the layout's dims (any number of samples). Coordinates along feature dims
        that are a permutation of the layout's are put back in the layout's order; different
        labels are an error.
    layout : ModeLayout
        Layout with a sample dim, from :meth:`ModeLayout.from_dataarray`.
    indices : slice or sequence of int, optional
        Positions along the sample dim to take (a mini-batch), applied before anything else so
        that only those samples are read.

    Returns
    -------
    array
        ``numpy.ndarray`` (or the array type ``da`` holds, e.g. ``dask.array.Array``).

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> da = xr.DataArray(np.arange(24.0).reshape(2, 3, 4), dims=("lat", "time", "lon"))
    >>> layout = ModeLayout.from_dataarray(da, "time", [("lat", "lon")])
    >>> to_samples(da, layout).shape
    (3, 8)
    >>> to_samples(da, layout, indices=[2, 0]).shape
    (2, 8)
    """
    _require_sample_dim(layout)
    _check_dataarray(da, "da")
    _check_same_dims(da, layout)
    if indices is not None:
        if np.ndim(indices) == 0 and not isinstance(indices, slice):
            indices = [indices]  # keep the sample dim for a single position
        da = da.isel({layout.sample_dim: indices})
    da = _match_feature_labels(da, layout)
    data = da.transpose(layout.sample_dim, *layout.feature_dims).data
    return data.reshape((da.sizes[layout.sample_dim],) + layout.shape)


def from_samples(X: Any, layout: ModeLayout) -> xr.DataArray:
    """Label a batch ``(n_samples, I_1, ..., I_n)``: the inverse of :func:`to_samples`.

    Parameters
    ----------
    X : array
        Numpy array, backend tensor (torch, any device; copied to the host) or dask array (kept
        lazy), with ``layout.n_samples`` samples. For a new batch use
        ``layout.with_samples(new_da)``.
    layout : ModeLayout
        Layout with a sample dim.

    Returns
    -------
    xarray.DataArray
        Dims, coords, name and attrs of the layout's source array.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> da = xr.DataArray(np.arange(24.0).reshape(2, 3, 4), dims=("lat", "time", "lon"))
    >>> layout = ModeLayout.from_dataarray(da, "time", [("lat", "lon")])
    >>> from_samples(to_samples(da, layout), layout).identical(da)
    True
    """
    _require_sample_dim(layout)
    X = _host_array(X)
    expected = (layout.n_samples,) + layout.shape
    if tuple(X.shape) != expected:
        raise ValueError(
            f"X: expected shape {expected} (n_samples, *mode sizes), got {tuple(X.shape)}; "
            "for another set of samples use layout.with_samples(da)"
        )
    data = X.reshape((layout.n_samples,) + tuple(layout.sizes.values()))
    out = xr.DataArray(
        data,
        dims=(layout.sample_dim, *layout.feature_dims),
        coords=layout.feature_coords,
        name=layout.name,
        attrs=copy.deepcopy(layout.attrs),
    )
    out = out.assign_coords(layout.sample_coords)
    # coords keep their own dim order: only the data is transposed back
    return out.transpose(*layout.dims, transpose_coords=False)


# --------------------------------------------------------------------------------------------
# labelled reshapes


def stack_modes(
    da: xr.DataArray, modes: ModeSpec = None, sample_dim: str | None = None
) -> xr.DataArray:
    """Stack ``da`` into one dim per CP mode: dims ``[sample_dim, mode_0, mode_1, ...]``.

    A stacked mode gets a pandas MultiIndex whose levels are its dims' coordinates (a dim with
    no coordinate contributes ``0..size-1``; a dim that already carries a MultiIndex contributes
    its levels), in C order over the listed dims. Non-dimension coords on stacked dims are
    broadcast over the group and stacked, as :meth:`xarray.DataArray.stack` does.

    Parameters
    ----------
    da : xarray.DataArray
        Numeric labelled data.
    modes : sequence or mapping, optional
        Mode specification, see :meth:`ModeLayout.from_dataarray`.
    sample_dim : str, optional
        Sample dim, put first and left unstacked.

    Returns
    -------
    xarray.DataArray
        Same name and attrs. Undo with ``unstack_modes(stacked, layout)``, where
        ``layout = ModeLayout.from_dataarray(da, sample_dim, modes)``.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> da = xr.DataArray(np.zeros((5, 3, 4, 2)), dims=("time", "lat", "lon", "variable"),
    ...                   coords={"lat": [10, 20, 30]})
    >>> stack_modes(da, [("lat", "lon"), "variable"], "time").sizes
    Frozen({'time': 5, 'lat_lon': 12, 'variable': 2})
    """
    layout = ModeLayout.from_dataarray(da, sample_dim, modes)
    return _stack(da, layout)


def unstack_modes(stacked: xr.DataArray, layout: ModeLayout) -> xr.DataArray:
    """Undo :func:`stack_modes`: the array with the layout's dims, order, coords and attrs.

    Feature coordinates come from the layout, so they round-trip exactly (order of values,
    MultiIndex levels, dims without coordinates, non-dimension coords). Sample coordinates,
    name and attrs come from ``stacked``, so a subset of samples, or a computed array with the
    same stacked dims (e.g. a reconstruction), unstacks too. Rows whose MultiIndex labels are
    a permutation of the layout's (e.g. after ``sortby``) are put back in order first.

    Parameters
    ----------
    stacked : xarray.DataArray
        Array with dims ``{sample_dim, *layout.mode_names}`` (any order).
    layout : ModeLayout
        The layout the array was stacked with.

    Returns
    -------
    xarray.DataArray

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> da = xr.DataArray(np.arange(24).reshape(2, 3, 4), dims=("t", "a", "b"),
    ...                   coords={"a": [30, 10, 20]}, name="x", attrs={"units": "m"})
    >>> layout = ModeLayout.from_dataarray(da, "t", [("b", "a")])
    >>> unstack_modes(stack_modes(da, [("b", "a")], "t"), layout).identical(da)
    True
    """
    _check_dataarray(stacked, "stacked", numeric=False)
    _check_stacked_dims(stacked, layout)
    stacked = _match_mode_labels(stacked, layout)
    var = _unstack_variable(stacked.variable, layout, layout.dims)
    out = xr.DataArray(
        var.data, dims=var.dims, coords=layout.feature_coords, attrs=var.attrs, name=stacked.name
    )
    return _carry_stacked_coords(out, stacked, layout)


def unfold(
    da: xr.DataArray,
    mode: ModeEntry,
    *,
    row_name: str | None = None,
    column_name: str | None = None,
) -> xr.DataArray:
    """Mode unfolding (matricization) of ``da`` as a 2-D labelled array.

    Rows are the dims of ``mode`` (stacked in the listed order when there are several); columns
    are all the other dims, stacked in C order in ``da``'s order, as in
    ``tensorly.unfold(tensor, mode)``.

    Parameters
    ----------
    da : xarray.DataArray
        Numeric labelled data with at least one dim outside ``mode``.
    mode : str or tuple of str
        Dim(s) forming the rows.
    row_name, column_name : str, optional
        Names of stacked row/column dims (default: their dims joined with ``"_"``). A single
        dim keeps its own name.

    Returns
    -------
    xarray.DataArray
        Dims ``(rows, columns)``. Fold back with ``fold(unfolded, mode, like=da)``.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> da = xr.DataArray(np.zeros((2, 3, 4)), dims=("a", "b", "c"))
    >>> unfold(da, "b").sizes
    Frozen({'b': 3, 'a_c': 8})
    >>> unfold(da, ("c", "a")).sizes
    Frozen({'c_a': 8, 'b': 3})
    """
    _check_dataarray(da, "da")
    modes = _unfolding_modes(tuple(da.dims), mode, row_name, column_name)
    return _stack(da, ModeLayout.from_dataarray(da, None, modes))


def fold(
    unfolded: xr.DataArray,
    mode: ModeEntry,
    like: xr.DataArray,
    *,
    row_name: str | None = None,
    column_name: str | None = None,
) -> xr.DataArray:
    """Refold an unfolding: the inverse of :func:`unfold`.

    Parameters
    ----------
    unfolded : xarray.DataArray
        2-D array as returned by ``unfold(like, mode, ...)`` (or computed from it).
    mode : str or tuple of str
        The ``mode`` given to :func:`unfold`.
    like : xarray.DataArray
        Template with the target dims, sizes and coords (its values are not read; a lazy array
        is fine).
    row_name, column_name : str, optional
        As given to :func:`unfold`.

    Returns
    -------
    xarray.DataArray
        Dims and coords of ``like``; values, name and attrs of ``unfolded``.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> da = xr.DataArray(np.arange(24).reshape(2, 3, 4), dims=("a", "b", "c"))
    >>> fold(unfold(da, "b"), "b", like=da).identical(da)
    True
    """
    _check_dataarray(like, "like")
    modes = _unfolding_modes(tuple(like.dims), mode, row_name, column_name)
    return unstack_modes(unfolded, ModeLayout.from_dataarray(like, None, modes))


# --------------------------------------------------------------------------------------------
# stacking machinery


def _stack_variable(var: xr.Variable, layout: ModeLayout) -> xr.Variable:
    """Stack a data or coordinate variable by modes, broadcasting over partly covered groups."""
    sizes = dict(layout.sizes)
    src: dict[str, int] = {}
    dims, shape = [], []
    if layout.sample_dim in var.dims:
        src[layout.sample_dim] = var.sizes[layout.sample_dim]
        dims.append(layout.sample_dim)
        shape.append(var.sizes[layout.sample_dim])
    for m in layout.modes:
        if any(d in var.dims for d in m.dims):
            src.update({d: sizes[d] for d in m.dims})
            dims.append(m.name)
            shape.append(m.size)
    expanded = var.set_dims(src)  # transposed to stacking order; broadcast where missing
    return xr.Variable(dims, expanded.data.reshape(shape), attrs=var.attrs)


def _unstack_variable(
    var: xr.Variable, layout: ModeLayout, keep_dims: Sequence[str] | None
) -> xr.Variable:
    """Split each mode dim of ``var`` into its dims; keep only ``keep_dims``, in that order."""
    modes = {m.name: m for m in layout.modes}
    dims: list[str] = []
    shape: list[int] = []
    for d in var.dims:
        m = modes.get(d)
        dims.extend(m.dims if m else (d,))
        shape.extend(m.shape if m else (var.sizes[d],))
    out = xr.Variable(dims, var.data.reshape(shape), attrs=var.attrs)
    if keep_dims is None:
        return out
    # dims the original variable did not have were broadcast copies: take one of them
    out = out.isel({d: 0 for d in dims if d not in keep_dims})
    return out.transpose(*[d for d in keep_dims if d in out.dims])


def _stack(da: xr.DataArray, layout: ModeLayout) -> xr.DataArray:
    """Stack ``da`` (whose layout is ``layout``): dims ``[sample_dim, *modes]``."""
    grouped = {d for m in layout.modes if m.stacked for d in m.dims}
    indexed = set(da.xindexes)
    plain = [n for n, c in da.coords.items() if not grouped & set(c.dims)]
    var = _stack_variable(da.variable, layout)
    out = xr.DataArray(
        var.data,
        dims=var.dims,
        coords=_subset_coords(da.coords, plain),
        attrs=var.attrs,
        name=da.name,
    )
    for m in layout.modes:
        if m.stacked:
            index = _stacked_index(layout, m)
            out = out.assign_coords(xr.Coordinates.from_pandas_multiindex(index, m.name))
    others = {
        n: _stack_variable(c.variable, layout)
        for n, c in da.coords.items()
        if n not in indexed and grouped & set(c.dims)
    }
    return out.assign_coords(others)


def _carry_stacked_coords(
    out: xr.DataArray, stacked: xr.DataArray, layout: ModeLayout
) -> xr.DataArray:
    """Add the coords of ``stacked`` that the layout does not define (sample coords, ...)."""
    mode_names = set(layout.mode_names)
    mode_indexed = {n for n in stacked.xindexes if mode_names & set(stacked.coords[n].dims)}
    skip = set(layout.feature_coords) | mode_indexed
    carried = [n for n in stacked.coords if n not in skip]
    flat = [n for n in carried if not mode_names & set(stacked.coords[n].dims)]
    out = out.assign_coords(_subset_coords(stacked.coords, flat))
    unstacked = {}
    for n in carried:
        if n in flat:
            continue
        # a coord known to the layout gets its original dims back; a new one keeps them all
        keep = layout.sample_coords[n].dims if n in layout.sample_coords else None
        unstacked[n] = _unstack_variable(stacked.coords[n].variable, layout, keep)
    return out.assign_coords(unstacked)


def _unfolding_modes(
    dims: tuple[str, ...], mode: ModeEntry, row_name: str | None, column_name: str | None
) -> dict[str, tuple[str, ...]]:
    """The two-mode specification ``{rows: mode dims, columns: other dims}``."""
    rows = _as_dims(mode)
    columns = tuple(d for d in dims if d not in rows)
    if not columns:
        raise ValueError(
            f"unfold: mode {rows} covers every dim of the array {list(dims)}; "
            "nothing is left for the columns"
        )
    return {_group_name(rows, row_name): rows, _group_name(columns, column_name): columns}


def _group_name(dims: tuple[str, ...], name: str | None) -> str:
    """Name of a stacked group (a single dim keeps its own name)."""
    if len(dims) == 1:
        return dims[0]
    return name or _default_name(dims)
