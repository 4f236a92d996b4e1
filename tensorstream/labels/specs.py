"""The labels' checks and label helpers: mode specifications, dims and coordinates checked,
labels matched by value (used by :mod:`.layout`, :mod:`.reshape` and :mod:`.factors`)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from ..core.backend import backend_of, to_numpy

#: Name of the dim that indexes the R components in factors and codes.
COMPONENT_DIM = "component"
_RESERVED_NAMES = (COMPONENT_DIM, "codes", "weights")
_LOADINGS_SUFFIX = "_loadings"
_NUMERIC_KINDS = "biuf"  # bool, signed/unsigned int, float: what a learner can turn into floats

ModeEntry = str | Sequence[str]
ModeSpec = Sequence[ModeEntry] | Mapping[str, ModeEntry] | None


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
    >>> from tensorstream.labels import ModeLayout
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
