"""The layout of labelled modes: :class:`ModeLayout`, which records once
everything needed to go from a DataArray to the learners' arrays and back."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Hashable

import numpy as np
import pandas as pd
import xarray as xr

from .specs import (
    _LOADINGS_SUFFIX,
    _RESERVED_NAMES,
    COMPONENT_DIM,
    Mode,
    ModeSpec,
    _check_dataarray,
    _check_mode_names,
    _dim_index,
    _match_labels,
    _normalize_modes,
    _subset_coords,
)

# --------------------------------------------------------------------------------------------
# the layout


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



def _match_feature_labels(da: xr.DataArray, layout: ModeLayout) -> xr.DataArray:
    for dim in layout.feature_dims:
        da = _match_labels(da, dim, _dim_index(layout.feature_coords, dim), "da")
    return da



def _match_mode_labels(stacked: xr.DataArray, layout: ModeLayout) -> xr.DataArray:
    for m in layout.modes:
        stacked = _match_labels(stacked, m.name, _stacked_index(layout, m), "stacked")
    return stacked
