"""Labelled modes: xarray DataArrays in, CP-shaped arrays for the learners, labelled factors out.

A learner sees a batch as a plain array of shape ``(n_samples, I_1, ..., I_n)``. A user has an
:class:`xarray.DataArray` with named dims and coordinates. This module is the boundary between
the two, and the only place where names are turned into positions and back:

* a *mode specification* ``modes=[("lat", "lon"), "variable"]`` says which dims form each CP
  mode; a tuple **stacks** its dims into one mode (C order over the listed dims, as
  :meth:`xarray.DataArray.stack` and :func:`numpy.reshape` do), so that the joint features of
  those dims are learned (the paper's "reshaping");
* :class:`ModeLayout` records, once, everything needed to go back: the sample dim and its
  coords, each mode's dims, sizes and coords (MultiIndexes and non-dimension coords included),
  and the array's name and attrs;
* :func:`to_samples` / :func:`from_samples` convert data, :func:`factors_to_dataset` /
  :func:`dataset_to_loadings` convert learned loadings, :func:`codes_to_dataarray` converts codes;
* :func:`stack_modes` / :func:`unstack_modes` and :func:`unfold` / :func:`fold` are the labelled
  reshapes, and round-trip exactly.

Labels are matched by value, not by position: a batch whose coordinates along a feature dim
are a permutation of the layout's is reordered to the layout's order; other labels are an error.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from .core.backend import backend_of, to_numpy

__all__ = [
    "COMPONENT_DIM",
    "Mode",
    "ModeLayout",
    "aligned_samples",
    "check_unique_labels",
    "codes_from_dataarray",
    "codes_to_dataarray",
    "dataset_to_loadings",
    "factors_to_dataset",
    "fold",
    "format_modes",
    "from_samples",
    "parse_modes",
    "stack_modes",
    "to_samples",
    "unfold",
    "unstack_modes",
]

#: Name of the dim that indexes the R components in factors and codes.
COMPONENT_DIM = "component"
_RESERVED_NAMES = (COMPONENT_DIM, "codes", "weights")
_LOADINGS_SUFFIX = "_loadings"
_NUMERIC_KINDS = "biuf"  # bool, signed/unsigned int, float: what a learner can turn into floats

ModeEntry = str | Sequence[str]
ModeSpec = Sequence[ModeEntry] | Mapping[str, ModeEntry] | None


# --------------------------------------------------------------------------------------------
# the layout


@dataclasses.dataclass(frozen=True)
class Mode:
    """One CP mode: a dim, or several dims stacked in C order.

    Parameters
    ----------
    name : str
        The mode's name: the dim itself for a single-dim mode, the stacked dim's name otherwise.
    dims : tuple of str
        The dims of the original array that form the mode, in stacking order.
    shape : tuple of int
        Their sizes.
    """

    name: str
    dims: tuple[str, ...]
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        """Length ``I_k`` of the mode: the product of its dims' sizes."""
        return math.prod(self.shape)

    @property
    def stacked(self) -> bool:
        """True when the mode stacks two or more dims."""
        return len(self.dims) > 1


@dataclasses.dataclass(frozen=True, eq=False)
class ModeLayout:
    """How a labelled array maps onto a batch of CP-shaped samples, and back.

    Build it with :meth:`from_dataarray`. The layout is immutable: it holds its own copies of the
    feature coordinates and attrs, so later edits to the source array do not change it.

    Parameters
    ----------
    dims : tuple of str
        The dims of the source array, in its order.
    sample_dim : str or None
        The sample dim (``None``: the array is one tensor, only reshaping is possible).
    modes : tuple of Mode
        The CP modes, in order.
    n_samples : int or None
        Length of the sample dim.
    feature_coords : xarray.Coordinates
        Coordinates that do not involve the sample dim (index, MultiIndex, non-dimension and
        scalar coords).
    sample_coords : xarray.Coordinates
        Coordinates that involve the sample dim (possibly together with feature dims).
    name : hashable or None
        Name of the source array.
    attrs : dict
        Attributes of the source array.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> da = xr.DataArray(np.zeros((5, 3, 4, 2)), dims=("time", "lat", "lon", "variable"))
    >>> layout = ModeLayout.from_dataarray(da, "time", [("lat", "lon"), "variable"])
    >>> layout.mode_names, layout.shape
    (('lat_lon', 'variable'), (12, 2))
    """

    dims: tuple[str, ...]
    sample_dim: str | None
    modes: tuple[Mode, ...]
    n_samples: int | None
    feature_coords: xr.Coordinates
    sample_coords: xr.Coordinates
    name: Hashable | None
    attrs: dict

    @classmethod
    def from_dataarray(
        cls, da: xr.DataArray, sample_dim: str | None = None, modes: ModeSpec = None
    ) -> ModeLayout:
        """Validate a mode specification against ``da`` and record its layout.

        Parameters
        ----------
        da : xarray.DataArray
            Numeric (bool, int or float) labelled data.
        sample_dim : str, optional
            The dim along which samples lie; ``None`` when ``da`` is a single tensor.
        modes : sequence or mapping, optional
            One entry per CP mode: a dim name, or a tuple of dim names stacked into one mode.
            A mapping ``{name: dims}`` names stacked modes (default: the dims joined with
            ``"_"``). ``None``: every dim but ``sample_dim`` is its own mode, in ``da``'s order.
            Every dim but ``sample_dim`` must appear exactly once.

        Returns
        -------
        ModeLayout

        Raises
        ------
        TypeError
            ``da`` is not a DataArray, its data are not numeric, or ``modes`` is malformed.
        ValueError
            Unknown, repeated, missing or misplaced dims, or a clashing mode name.

        Examples
        --------
        >>> import numpy as np, xarray as xr
        >>> da = xr.DataArray(np.zeros((5, 3, 4)), dims=("time", "lat", "lon"))
        >>> ModeLayout.from_dataarray(da, "time", {"space": ("lat", "lon")}).mode_names
        ('space',)
        """
        _check_dataarray(da, "da")
        dims = tuple(da.dims)
        if sample_dim is not None and sample_dim not in dims:
            raise ValueError(
                f"sample_dim {sample_dim!r} is not a dim of the array; available dims: {list(dims)}"
            )
        entries = _normalize_modes(modes, dims, sample_dim)
        layout_modes = tuple(
            Mode(name, group, tuple(da.sizes[d] for d in group)) for name, group in entries
        )
        _check_mode_names(layout_modes, da)
        sample_names = [n for n, c in da.coords.items() if sample_dim in c.dims]
        feature_names = [n for n in da.coords if n not in sample_names]
        return cls(
            dims=dims,
            sample_dim=sample_dim,
            modes=layout_modes,
            n_samples=None if sample_dim is None else da.sizes[sample_dim],
            # deep copy: the geometry must not change if the caller edits its coords in place
            feature_coords=_subset_coords(da.coords, feature_names, deep=True),
            sample_coords=_subset_coords(da.coords, sample_names),
            name=da.name,
            attrs=copy.deepcopy(dict(da.attrs)),
        )

    @property
    def mode_names(self) -> tuple[str, ...]:
        """Names of the modes, in order."""
        return tuple(m.name for m in self.modes)

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape ``(I_1, ..., I_n)`` of one sample."""
        return tuple(m.size for m in self.modes)

    @property
    def feature_dims(self) -> tuple[str, ...]:
        """All dims but the sample dim, in mode order (stacked dims in stacking order)."""
        return tuple(d for m in self.modes for d in m.dims)

    @property
    def sizes(self) -> dict[str, int]:
        """Sizes of the feature dims."""
        return {d: n for m in self.modes for d, n in zip(m.dims, m.shape, strict=True)}

    def mode(self, name: str) -> Mode:
        """The mode called ``name`` (a ``KeyError`` names the modes there are)."""
        for m in self.modes:
            if m.name == name:
                return m
        raise KeyError(f"no mode {name!r}; the modes are {list(self.mode_names)}")

    def with_samples(self, da: xr.DataArray) -> ModeLayout:
        """The same feature layout with the sample dim's length and coords taken from ``da``.

        Use it to label codes or reconstructions of a new batch (e.g. in ``transform``).

        Parameters
        ----------
        da : xarray.DataArray
            Any array with the sample dim: the new batch itself, or codes over
            ``(sample_dim, component)``. Only its sample dim and the coords on it are read.

        Returns
        -------
        ModeLayout

        Examples
        --------
        >>> import numpy as np, xarray as xr
        >>> da = xr.DataArray(np.zeros((5, 3)), dims=("time", "x"))
        >>> layout = ModeLayout.from_dataarray(da, "time")
        >>> layout.with_samples(da.isel(time=slice(0, 2))).n_samples
        2
        """
        _require_sample_dim(self)
        _check_dataarray(da, "da", numeric=False)
        if self.sample_dim not in da.dims:
            raise ValueError(
                f"sample_dim {self.sample_dim!r} is not a dim of the array; "
                f"available dims: {list(da.dims)}"
            )
        allowed = set(self.dims)
        names = [
            n
            for n, c in da.coords.items()
            if self.sample_dim in c.dims and set(c.dims) <= allowed
        ]
        return dataclasses.replace(
            self,
            n_samples=da.sizes[self.sample_dim],
            sample_coords=_subset_coords(da.coords, names),
        )

    @property
    def factor_names(self) -> tuple[str, ...]:
        """Names of the loading variables in the factors Dataset: ``"<mode name>_loadings"``.

        A single-dim mode cannot lend its bare name to a variable, since the Dataset already
        has a coordinate of that name; the suffix keeps the rule the same for every mode.
        """
        return tuple(f"{m.name}{_LOADINGS_SUFFIX}" for m in self.modes)

    def check_factor_names(self) -> ModeLayout:
        """Check that the factors of this layout fit in one Dataset; return the layout.

        The factors Dataset uses the dim ``"component"``, the variables ``"codes"`` and
        ``"weights"`` and one ``"<mode>_loadings"`` variable per mode; an array whose dims or
        coordinates already use these names cannot be labelled. Learners call this before
        fitting, so that a clash is reported before the work, not after.

        Returns
        -------
        ModeLayout
            ``self``.

        Raises
        ------
        ValueError
            A dim or coordinate already carries one of these names.

        Examples
        --------
        >>> import numpy as np, xarray as xr
        >>> da = xr.DataArray(np.zeros((5, 3)), dims=("time", "component"))
        >>> ModeLayout.from_dataarray(da, "time").check_factor_names()  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: the names ['component'] are reserved for the factors Dataset ...
        """
        reserved = set(_RESERVED_NAMES) | set(self.factor_names)
        used = set(self.dims) | set(self.feature_coords) | set(self.sample_coords)
        clash = sorted(str(n) for n in used & reserved)
        if clash:
            raise ValueError(
                f"the names {clash} are reserved for the factors Dataset (dim "
                f"{COMPONENT_DIM!r}, variables 'codes', 'weights', "
                f"{list(self.factor_names)}); rename them in the array first "
                "(DataArray.rename)"
            )
        return self

    def __repr__(self) -> str:
        parts = []
        for m in self.modes:
            inner = ", ".join(f"{d}: {n}" for d, n in zip(m.dims, m.shape, strict=True))
            parts.append(f"{m.name} ({inner})" if m.stacked else inner)
        sample = "None" if self.sample_dim is None else f"{self.sample_dim}: {self.n_samples}"
        return f"ModeLayout(sample_dim={sample}, modes=[{'; '.join(parts)}])"


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


def parse_modes(text: str) -> list[ModeEntry] | dict[str, ModeEntry]:
    """Parse a mode specification written as text, e.g. on a command line.

    Modes are separated by ``;``, stacked dims by ``,``; ``name=dims`` names a mode.

    Parameters
    ----------
    text : str
        E.g. ``"lat,lon;variable"`` or ``"space=lat,lon;variable"``.

    Returns
    -------
    list or dict
        A list of entries, or a ``{name: dims}`` dict when any mode is named.

    Examples
    --------
    >>> parse_modes("lat,lon;variable")
    [('lat', 'lon'), 'variable']
    >>> parse_modes("space=lat,lon; variable")
    {'space': ('lat', 'lon'), 'variable': 'variable'}

    Raises ``ValueError`` for text it cannot parse and for two modes of the same name.
    """
    entries: list[tuple[str | None, ModeEntry]] = []
    for part in text.split(";"):
        name, _, dims_text = part.rpartition("=")
        dims = tuple(d.strip() for d in dims_text.split(","))
        if not all(dims) or (name and not name.strip()):
            raise ValueError(
                f"modes: cannot parse {text!r}; expected e.g. 'lat,lon;variable' "
                "(';' between modes, ',' between stacked dims, optional 'name=')"
            )
        entries.append((name.strip() or None, dims if len(dims) > 1 else dims[0]))
    if all(name is None for name, _ in entries):
        return [dims for _, dims in entries]
    names = [name or _default_name(_as_dims(dims)) for name, dims in entries]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:  # a dict would keep the last of them and drop the others silently
        raise ValueError(f"modes: two modes are named {repeated[0]!r} in {text!r}; give each "
                         f"mode its own name")
    return dict(zip(names, (dims for _, dims in entries)))


def format_modes(modes: Sequence[Mode]) -> str:
    """The text :func:`parse_modes` reads back as ``modes`` (a layout's): names are written
    where they differ from the default (the dim, or the stacked dims joined by ``_``).

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> da = xr.DataArray(np.zeros((2, 3, 4, 5)), dims=("time", "lat", "lon", "variable"))
    >>> layout = ModeLayout.from_dataarray(da, "time", {"space": ("lon", "lat"),
    ...                                                 "variable": "variable"})
    >>> format_modes(layout.modes)
    'space=lon,lat;variable'
    >>> parse_modes(format_modes(layout.modes))
    {'space': ('lon', 'lat'), 'variable': 'variable'}
    """
    return ";".join((f"{m.name}=" if m.name != _default_name(m.dims) else "") + ",".join(m.dims)
                    for m in modes)


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


# --------------------------------------------------------------------------------------------
# validation helpers


def _check_dataarray(da: Any, arg: str, numeric: bool = True) -> None:
    """TypeError unless ``da`` is a DataArray (with numeric data if asked)."""
    if isinstance(da, xr.Dataset):
        raise TypeError(
            f"{arg}: expected an xarray.DataArray, got a Dataset; pick one variable, "
            f"e.g. ds[{next(iter(da.data_vars), 'name')!r}]"
        )
    if not isinstance(da, xr.DataArray):
        raise TypeError(f"{arg}: expected an xarray.DataArray, got {type(da).__name__}")
    if numeric and np.dtype(da.dtype).kind not in _NUMERIC_KINDS:
        raise TypeError(
            f"{arg}: data must be numeric (bool, int or float), got dtype {da.dtype}"
        )


def _as_dims(entry: Any) -> tuple[str, ...]:
    """One mode entry as a tuple of dim names."""
    if isinstance(entry, str):
        return (entry,)
    if not isinstance(entry, Sequence) or not all(isinstance(d, str) for d in entry):
        raise TypeError(
            f"modes: each mode must be a dim name or a tuple of dim names, got {entry!r}"
        )
    if not entry:
        raise ValueError("modes: a mode must hold at least one dim, got an empty tuple")
    return tuple(entry)


def _default_name(dims: tuple[str, ...]) -> str:
    return "_".join(dims)


def _normalize_modes(
    modes: ModeSpec, dims: tuple[str, ...], sample_dim: str | None
) -> list[tuple[str, tuple[str, ...]]]:
    """Validate a mode specification; return ``(name, dims)`` per mode."""
    features = [d for d in dims if d != sample_dim]
    if modes is None:
        if not features:
            raise ValueError(f"the array has no dims besides sample_dim {sample_dim!r}")
        return [(d, (d,)) for d in features]
    if isinstance(modes, str):  # the command line's text, accepted in Python alike
        modes = parse_modes(modes)
    if isinstance(modes, Mapping):
        named = [(_check_mode_key(k), _as_dims(v)) for k, v in modes.items()]
    elif isinstance(modes, Sequence):
        named = [(None, _as_dims(v)) for v in modes]
    else:
        raise TypeError(f"modes: expected a list or dict of modes, got {type(modes).__name__}")
    if not named:
        raise ValueError("modes is empty: give at least one mode, or modes=None")
    _check_mode_dims([group for _, group in named], dims, sample_dim)
    return [(name or _default_name(group), group) for name, group in named]


def _check_mode_key(key: Any) -> str:
    if not isinstance(key, str):
        raise TypeError(f"modes: mode names must be strings, got {key!r}")
    return key


def _check_mode_dims(
    groups: list[tuple[str, ...]], dims: tuple[str, ...], sample_dim: str | None
) -> None:
    """Every dim but the sample dim exactly once, and nothing else."""
    seen: dict[str, tuple[str, ...]] = {}
    for group in groups:
        for d in group:
            if d not in dims:
                raise ValueError(f"modes: unknown dim {d!r}; the array has dims {list(dims)}")
            if d == sample_dim:
                raise ValueError(
                    f"modes: {d!r} is the sample_dim; list only the other dims in modes"
                )
            if d in seen:
                raise ValueError(
                    f"modes: dim {d!r} is listed twice (in {seen[d]} and in {group})"
                )
            seen[d] = group
    left = [d for d in dims if d != sample_dim and d not in seen]
    if left:
        raise ValueError(
            f"modes: dims {left} are neither the sample_dim nor in any mode; add them to a "
            "mode, or pass modes=None to make each dim its own mode"
        )


def _check_mode_names(modes: tuple[Mode, ...], da: xr.DataArray) -> None:
    """Mode names are unique, and a stacked mode's name is new to the array."""
    taken = set(da.dims) | set(da.coords)
    names = [m.name for m in modes]
    for m in modes:
        if not m.stacked and m.name != m.dims[0]:
            raise ValueError(
                f"modes: the single-dim mode {m.name!r} must be named after its dim "
                f"{m.dims[0]!r}"
            )
        if m.stacked and m.name in taken:
            raise ValueError(
                f"modes: the name {m.name!r} of the stacked mode {m.dims} is already a dim or "
                f"coordinate of the array; name it with a dict, e.g. modes={{'new': {m.dims}}}"
            )
        if names.count(m.name) > 1:
            raise ValueError(
                f"modes: two modes are named {m.name!r}; name them with a dict of modes"
            )


def check_unique_labels(da: xr.DataArray, dims: Sequence) -> None:
    """Refuse repeated labels along the feature ``dims`` of ``da`` for learning: later batches
    are matched to the first by label, and two columns labelled alike could be swapped without
    anyone noticing. (Stacking and unstacking themselves keep repeated labels as they are.)

    Raises
    ------
    ValueError
        A dim with repeated labels, named with them and the way out.
    """
    for dim in dims:
        if dim not in da.indexes:
            continue  # no labels: matched by position, as the dim's size is checked
        index = da.indexes[dim]
        if index.has_duplicates:
            repeated = sorted({repr(label) for label in index[index.duplicated()]})
            raise ValueError(
                f"dim {dim!r} has repeated labels {', '.join(repeated[:5])}: features are "
                f"matched by label, so each must be unique; relabel them (e.g. "
                f"da.assign_coords({{{dim!r}: range(da.sizes[{dim!r}])}})) or drop the "
                f"coordinate"
            )


def _require_sample_dim(layout: ModeLayout) -> None:
    if not isinstance(layout, ModeLayout):
        raise TypeError(f"layout: expected a ModeLayout, got {type(layout).__name__}")
    if layout.sample_dim is None:
        raise ValueError("layout has no sample_dim; build it with sample_dim='...'")


def _check_same_dims(da: xr.DataArray, layout: ModeLayout) -> None:
    """``da`` has the layout's dims, with the same feature sizes."""
    if set(da.dims) != set(layout.dims):
        raise ValueError(
            f"da: expected dims {list(layout.dims)} (any order), got {list(da.dims)}"
        )
    wrong = {d: da.sizes[d] for d, n in layout.sizes.items() if da.sizes[d] != n}
    if wrong:
        raise ValueError(f"da: sizes {wrong} differ from the layout's {layout.sizes}")


def _check_stacked_dims(stacked: xr.DataArray, layout: ModeLayout) -> None:
    """``stacked`` has one dim per mode (and the sample dim), with the modes' sizes."""
    expected = set(layout.mode_names) | ({layout.sample_dim} - {None})
    if set(stacked.dims) != expected:
        raise ValueError(
            f"stacked: expected dims {sorted(expected)} (any order), got {list(stacked.dims)}"
        )
    for m in layout.modes:
        if stacked.sizes[m.name] != m.size:
            raise ValueError(
                f"stacked: mode {m.name!r} has length {stacked.sizes[m.name]}, "
                f"the layout says {m.size} ({dict(zip(m.dims, m.shape, strict=True))})"
            )


def _check_loadings(mats: list[np.ndarray], layout: ModeLayout) -> int:
    """Shapes ``(I_k, R)`` with one R; return R."""
    if len(mats) != len(layout.modes):
        raise ValueError(
            f"loadings: expected {len(layout.modes)} matrices (one per mode "
            f"{list(layout.mode_names)}), got {len(mats)}"
        )
    rank = mats[0].shape[-1] if mats and mats[0].ndim == 2 else None
    for m, U in zip(layout.modes, mats, strict=True):
        if U.shape != (m.size, rank):
            raise ValueError(
                f"loadings: mode {m.name!r} needs shape ({m.size}, {rank}), got {U.shape}"
            )
    return rank


# --------------------------------------------------------------------------------------------
# coordinate and label helpers


def _subset_coords(
    coords: xr.Coordinates, names: Sequence[Hashable], deep: bool = False
) -> xr.Coordinates:
    """The coordinates ``names`` of ``coords``, with their indexes."""
    ds = coords.to_dataset()
    ds = ds.drop_vars([n for n in ds.variables if n not in set(names)])
    return ds.copy(deep=deep).coords


def _host_array(x: Any) -> Any:
    """Numpy (or dask, kept lazy) view of a tensor of any backend."""
    if type(x).__module__.startswith("dask"):
        return x
    if backend_of(x) != "numpy" or not hasattr(x, "reshape"):
        return to_numpy(x)
    return x


def _dim_index(coords: xr.Coordinates, dim: str) -> pd.Index | None:
    """The pandas index of ``dim`` in ``coords`` (a MultiIndex for a MultiIndex dim), if any."""
    return coords.xindexes[dim].to_pandas_index() if dim in coords.xindexes else None


def _stacked_index(layout: ModeLayout, mode: Mode) -> pd.Index | None:
    """Index of ``mode``'s dim in the stacked array (a MultiIndex for a stacked mode)."""
    if not mode.stacked:
        return _dim_index(layout.feature_coords, mode.dims[0])
    positions = np.unravel_index(np.arange(mode.size), mode.shape)  # C order
    levels, codes, names = [], [], []
    for dim, pos in zip(mode.dims, positions, strict=True):
        for level, code, name in _levels_of(layout, dim):
            levels.append(level)
            codes.append(code[pos])
            names.append(name)
    return pd.MultiIndex(levels=levels, codes=codes, names=names, verify_integrity=False)


def _levels_of(layout: ModeLayout, dim: str) -> list[tuple[pd.Index, np.ndarray, str]]:
    """MultiIndex levels ``(values, codes per position, name)`` contributed by one dim."""
    index = _dim_index(layout.feature_coords, dim)
    if index is None:  # no coordinate: label by position, as xarray.stack does
        size = layout.sizes[dim]
        return [(pd.RangeIndex(size), np.arange(size), dim)]
    if isinstance(index, pd.MultiIndex):
        return [
            (index.levels[i], np.asarray(index.codes[i]), name)
            for i, name in enumerate(index.names)
        ]
    # factorize keeps the order of appearance, so xarray's own unstack restores the order too
    codes, uniques = index.factorize()
    return [(uniques, codes, dim)]


def _match_labels(obj: Any, dim: str, expected: pd.Index | None, arg: str) -> Any:
    """Reorder ``obj`` along ``dim`` to the ``expected`` labels; error if they differ."""
    actual = _dim_index(obj.coords, dim)
    if expected is None or actual is None or actual.equals(expected):
        return obj  # labels agree, or one side is positional only
    if len(actual) == len(expected) and actual.is_unique:
        indexer = actual.get_indexer(expected)
        if (indexer >= 0).all():
            return obj.isel({dim: indexer})
    raise ValueError(
        f"{arg}: the labels along {dim!r} differ from the layout's: expected "
        f"{list(expected[:5])}{'...' if len(expected) > 5 else ''}, got "
        f"{list(actual[:5])}{'...' if len(actual) > 5 else ''}"
    )


def _match_feature_labels(da: xr.DataArray, layout: ModeLayout) -> xr.DataArray:
    for dim in layout.feature_dims:
        da = _match_labels(da, dim, _dim_index(layout.feature_coords, dim), "da")
    return da


def _match_mode_labels(stacked: xr.DataArray, layout: ModeLayout) -> xr.DataArray:
    for m in layout.modes:
        stacked = _match_labels(stacked, m.name, _stacked_index(layout, m), "stacked")
    return stacked


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
