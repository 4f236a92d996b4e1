"""Figures of learned dictionaries: atoms as images, labelled factors, convergence curves.

Every function builds a :class:`matplotlib.figure.Figure` directly, without ``pyplot``: nothing
depends on (or changes) the interactive backend, so the functions work on headless machines,
in threads and in notebooks (a returned Figure displays itself). Pass ``path=`` to also write
the figure to a file; the figure is returned either way, so its axes can be inspected or
restyled.

* :func:`plot_atoms` - a grid of atoms (2-D images, RGB images or 1-D curves), e.g. from
  :func:`cp_atoms` (loadings to atoms) or :func:`factors_atoms` (a factors Dataset to atoms);
* :func:`plot_atom_rows` - several dictionaries side by side, one row each (e.g. reshapings);
* :func:`plot_factors` - a labelled factors Dataset: lines against 1-D coordinates, bars over
  categories, maps with colour bars for 2-D modes, images for RGB modes, codes against the
  sample coordinate;
* :func:`plot_convergence` - the loss per step from a list of callback ``info`` dicts.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "cp_atoms",
    "factors_atoms",
    "plot_atom_rows",
    "plot_atoms",
    "plot_convergence",
    "plot_factors",
    "save_figure",
]

_COMPONENT = "component"
_LOADINGS = "_loadings"
_CHANNELS = (3, 4)  # a trailing dim of this size is drawn as RGB(A)


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def save_figure(fig: Any, path: str | os.PathLike, dpi: int = 100) -> Path:
    """Write ``fig`` to ``path`` (format from the suffix) and return the path.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    path : str or path-like
        Target file; its folder is created if needed.
    dpi : int, default 100

    Returns
    -------
    pathlib.Path
        The path written.

    Examples
    --------
    >>> import tempfile
    >>> fig = plot_convergence([{"step": 1, "batch_loss": 2.0}, {"step": 2, "batch_loss": 1.0}])
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     save_figure(fig, f"{folder}/loss.png").stat().st_size > 0
    True
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    return path


def _finish(fig: Any, path: str | os.PathLike | None) -> Any:
    if path is not None:
        save_figure(fig, path)
    return fig


# --------------------------------------------------------------------------------------------
# atoms


def cp_atoms(loadings: Sequence[Any], shape: Sequence[int] | None = None) -> np.ndarray:
    """The rank-one atoms of CP loadings (outer products of their columns), shape ``(R, ...)``.

    Atom ``r`` is ``U^(1)[:, r] o U^(2)[:, r] o ... o U^(n)[:, r]``.

    Parameters
    ----------
    loadings : sequence of arrays of shape (I_k, R)
        Numpy arrays or backend tensors (e.g. ``learner.loadings_``).
    shape : sequence of int, optional
        Reshape each atom (C order) to this shape, e.g. ``(20, 20, 3)`` for atoms learned on
        patches reshaped to ``(400, 3)``. Default: ``(I_1, ..., I_n)``.

    Returns
    -------
    numpy.ndarray
        ``(R, *shape)``.

    Examples
    --------
    >>> import numpy as np
    >>> U = [np.ones((400, 5)), np.ones((3, 5))]
    >>> cp_atoms(U, shape=(20, 20, 3)).shape
    (5, 20, 20, 3)
    """
    from .core.backend import to_numpy

    mats = [np.asarray(to_numpy(U), dtype=float) for U in loadings]
    rank = mats[0].shape[1]
    atoms = np.ones((rank,))
    for U in mats:  # one mode at a time: atoms (R, I_1..I_k) * U^(k+1) -> (R, I_1..I_k+1)
        atoms = atoms[..., None] * U.T.reshape((rank,) + (1,) * (atoms.ndim - 1) + (-1,))
    if shape is not None:
        atoms = atoms.reshape((rank, *shape))
    return atoms


def factors_atoms(ds: Any) -> Any:
    """The atoms of a factors Dataset as one labelled array over ``component`` and all dims.

    The product of all ``<mode>_loadings`` variables: by broadcasting, atom ``r`` is the outer
    product of the modes' loading columns, on the original dims and coordinates.

    Parameters
    ----------
    ds : xarray.Dataset
        A factors Dataset (``learner.factors_``).

    Returns
    -------
    xarray.DataArray
        Dims ``("component", *feature dims)``.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> ds = xr.Dataset({"y_x_loadings": (("y", "x", "component"), np.ones((4, 5, 2))),
    ...                  "channel_loadings": (("channel", "component"), np.ones((3, 2)))})
    >>> factors_atoms(ds).dims
    ('component', 'y', 'x', 'channel')
    """
    names = _loading_names(ds)
    atoms = ds[names[0]]
    for name in names[1:]:
        atoms = atoms * ds[name]
    return atoms.transpose(_COMPONENT, ...).rename(None)


def _loading_names(ds: Any) -> list[str]:
    names = [str(n) for n in ds.data_vars if str(n).endswith(_LOADINGS)]
    if not names:
        raise ValueError(f"no '<mode>_loadings' variables in the Dataset; it has "
                         f"{[str(n) for n in ds.data_vars]}")
    return names


def _display(atom: np.ndarray, normalize: str | None, vmax: float) -> np.ndarray:
    """Scale an atom for display: nonnegative atoms by their max, signed ones to [0, 1]."""
    atom = np.asarray(atom, dtype=float)
    if normalize is None:
        return atom
    low = min(float(atom.min()), 0.0)
    high = float(np.abs(atom).max()) if normalize == "atom" else vmax
    if high <= 0:
        return np.zeros_like(atom)
    if low < 0:  # signed: centre zero at 0.5
        return np.clip(0.5 + 0.5 * atom / high, 0.0, 1.0)
    return np.clip(atom / high, 0.0, 1.0)


def _atoms_cmap(cmap: str | None, atoms: Sequence[np.ndarray], normalize: str | None) -> str:
    """The colour map asked for, or a diverging one (zero in the middle, where
    :func:`_display` puts it) when some atom is signed, else a sequential one."""
    if cmap is not None:
        return cmap
    signed = normalize is not None and any(np.size(a) and np.nanmin(a) < 0 for a in atoms)
    return "RdBu_r" if signed else "viridis"


def _is_rgb(atom: np.ndarray) -> bool:
    return atom.ndim == 3 and atom.shape[-1] in _CHANNELS


def _draw_atom(ax: Any, atom: np.ndarray, cmap: str) -> None:
    if atom.ndim == 1:
        ax.plot(atom)
        ax.set_yticks([])
        return
    if _is_rgb(atom):
        ax.imshow(atom, interpolation="nearest")
    else:
        ax.imshow(atom.reshape(atom.shape[0], -1), cmap=cmap, interpolation="nearest",
                  vmin=0.0, vmax=1.0)
    ax.set_xticks([])
    ax.set_yticks([])


def _atom_colorbar(fig: Any, axes: Any, atoms: list[np.ndarray], normalize: str | None,
                   cmap: str) -> None:
    """One colour bar for the single-channel images of a grid (none for RGB or curves).

    The images show :func:`_display` values in [0, 1]; the bar is labelled in the units of the
    atoms: fractions of each atom's (or all atoms') largest magnitude, signed when an atom is.
    """
    images = [a for a in atoms if a.ndim >= 2 and not _is_rgb(a)]
    if not images:
        return
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    signed = normalize is not None and any(float(a.min()) < 0 for a in images)
    norm = Normalize(-1.0, 1.0) if signed else Normalize(0.0, 1.0)
    label = {"atom": "value / largest |value| of the atom",
             "global": "value / largest |value| of all atoms"}.get(normalize, "value")
    fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=axes, shrink=0.8, aspect=25,
                 label=label)


def plot_atoms(atoms: Any, *, ncols: int | None = None, titles: Sequence[str] | None = None,
               normalize: str | None = "atom", cmap: str | None = None,
               title: str | None = None, path: str | os.PathLike | None = None) -> Any:
    """A grid of atoms: images ``(R, H, W)``, RGB images ``(R, H, W, 3)`` or curves ``(R, n)``.

    Parameters
    ----------
    atoms : array or xarray.DataArray
        ``(R, ...)``; e.g. :func:`cp_atoms` of the loadings, or :func:`factors_atoms`.
        Atoms with more than two dims (and not RGB) are drawn as their first dim against the
        rest flattened.
    ncols : int, optional
        Columns of the grid (default: about square).
    titles : sequence of str, optional
        One per atom (default: ``"atom r"``).
    normalize : {"atom", "global", None}, default "atom"
        Scale each atom by its own maximum, all by the global maximum, or not at all. Signed
        atoms are mapped so that 0 is mid-range.
    cmap : str, optional
        Colour map of single-channel images (default: ``"RdBu_r"``, centred on zero, when an
        atom has negative values, else ``"viridis"``).
    title : str, optional
        Figure title.
    path : str or path-like, optional
        Also write the figure there.

    Returns
    -------
    matplotlib.figure.Figure
        The figure (not registered with pyplot; it displays itself in a notebook).

    Examples
    --------
    >>> import numpy as np
    >>> fig = plot_atoms(np.random.default_rng(0).random((6, 8, 8, 3)), ncols=3)
    >>> len(fig.axes)
    6
    """
    atoms = np.asarray(getattr(atoms, "values", atoms), dtype=float)
    if atoms.ndim < 2:
        raise ValueError(f"atoms must have shape (R, ...) with at least one feature dim, got "
                         f"{atoms.shape}")
    if normalize not in ("atom", "global", None):
        raise ValueError(f"normalize must be 'atom', 'global' or None, got {normalize!r}")
    rank = atoms.shape[0]
    ncols = ncols or math.ceil(math.sqrt(rank))
    nrows = math.ceil(rank / ncols)
    fig = _figure(1.6 * ncols, 1.6 * nrows + (0.4 if title else 0.0))
    axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False)).ravel()
    vmax = float(np.abs(atoms).max()) if atoms.size else 1.0
    cmap = _atoms_cmap(cmap, [atoms], normalize)
    for r, ax in enumerate(axes):
        if r >= rank:
            ax.set_axis_off()
            continue
        _draw_atom(ax, _display(atoms[r], normalize, vmax), cmap)
        ax.set_title(titles[r] if titles else f"atom {r}", fontsize=8)
    _atom_colorbar(fig, axes, list(atoms), normalize, cmap)
    if title:
        fig.suptitle(title)
    return _finish(fig, path)


def plot_atom_rows(rows: Mapping[str, Any], *, extra: Mapping[str, Any] | None = None,
                   max_atoms: int = 10, normalize: str | None = "atom", cmap: str | None = None,
                   title: str | None = None, path: str | os.PathLike | None = None) -> Any:
    """Several dictionaries, one row each: e.g. the same data learned with different reshapings.

    Parameters
    ----------
    rows : mapping of str to array
        Row label to atoms ``(R, ...)`` (all rows drawn the same way as :func:`plot_atoms`).
    extra : mapping of str to array, optional
        Row label to one image drawn first in its row (e.g. the reconstruction).
    max_atoms : int, default 10
        Atoms shown per row (the first ones).
    normalize, cmap, title, path
        As in :func:`plot_atoms`.

    Returns
    -------
    matplotlib.figure.Figure
        A row of panels per dictionary (not registered with pyplot, as in :func:`plot_atoms`).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> fig = plot_atom_rows({"a": rng.random((4, 5, 5)), "b": rng.random((3, 5, 5))})
    >>> len(fig.axes), fig.axes[0].get_ylabel()  # 2 rows of 4 panels, and a colour bar
    (9, 'a')
    """
    extra = dict(extra or {})
    ncols = max(min(np.shape(a)[0], max_atoms) for a in rows.values()) + (1 if extra else 0)
    fig = _figure(1.5 * ncols + 0.8, 1.6 * len(rows) + (0.4 if title else 0.0))
    axes = fig.subplots(len(rows), ncols, squeeze=False)
    cmap = _atoms_cmap(cmap, [np.asarray(getattr(a, "values", a))[:max_atoms]
                              for a in rows.values()], normalize)
    drawn = []
    for i, (label, atoms) in enumerate(rows.items()):
        atoms = np.asarray(getattr(atoms, "values", atoms), dtype=float)
        drawn += list(atoms[:max_atoms])
        vmax = float(np.abs(atoms).max()) if atoms.size else 1.0
        panels = ([("reconstruction", extra[label])] if label in extra else
                  [("", None)] if extra else [])
        panels += [(f"atom {r}", atoms[r]) for r in range(min(atoms.shape[0], max_atoms))]
        for j, ax in enumerate(axes[i]):
            if j >= len(panels) or panels[j][1] is None:
                ax.set_axis_off()
                continue
            name, image = panels[j]
            shown = np.clip(image, 0, 1) if name == "reconstruction" else _display(
                image, normalize, vmax)
            _draw_atom(ax, shown, cmap)
            ax.set_title(name, fontsize=8)
        axes[i][0].set_ylabel(label)
    _atom_colorbar(fig, axes, drawn, normalize, cmap)
    if title:
        fig.suptitle(title)
    return _finish(fig, path)


# --------------------------------------------------------------------------------------------
# labelled factors

#: Maps and images per row of a panel; more components wrap onto further rows.
_MAX_COLUMNS = 6

#: Two 1-D modes with these dims are the axes of pictures: their atoms are drawn as images
#: (first dim downwards, as pixels are stored), not as two bar charts.
_IMAGE_AXES = (("y", "x"), ("row", "column"), ("row", "col"), ("height", "width"), ("h", "w"))

#: A 1-D mode with one of these names and 3 (or 4) entries gives such images their colours.
_CHANNEL_DIMS = ("channel", "channels", "band", "bands", "colour", "color", "rgb", "c")

_SEQUENTIAL, _DIVERGING = "viridis", "RdBu_r"


def plot_factors(ds: Any, *, components: Sequence[int] | None = None, max_components: int = 12,
                 title: str | None = None, path: str | os.PathLike | None = None) -> Any:
    """Plot a labelled factors Dataset against its coordinates.

    One panel per mode (and one for ``codes`` if present), titled with the mode's dims:

    * a 1-D mode: one line per component against the mode's coordinate (numbers, datetimes),
      or grouped bars (points when there are many) over categories (labels, or at most 12
      integers: variables, months, channels);
    * a 2-D mode (e.g. stacked ``("lat", "lon")``): one map per component on the coordinates,
      or one image per component when the dims are picture axes (``("y", "x")``,
      ``("row", "col")``, ``("height", "width")``), each with its labelled colour bar;
    * a mode whose last dim has 3 (or 4) entries after two others: one RGB image per component;
    * two separate 1-D modes that are picture axes (``modes=["y", "x", "channel"]``): their
      atoms (outer products, with the colour channels when there is a 3- or 4-entry
      ``channel`` mode) as one image per component;
    * other modes: the first dim against the rest, flattened;
    * ``codes`` over ``(sample_dim, component)``: one line per component against the samples.

    Signed values are drawn with a diverging colour map centred on zero (``RdBu_r``),
    nonnegative ones with a sequential one (``viridis``) from zero.

    Parameters
    ----------
    ds : xarray.Dataset
        ``learner.factors_`` (possibly with ``codes``), or a factors file opened with xarray.
    components : sequence of int, optional
        Components to show (default: the first ``max_components``).
    max_components : int, default 12
        Components shown when ``components`` is not given. When fewer than all are shown, the
        figure's title says so ("showing 12 of 16 components").
    title : str, optional
        Figure title (a note on components left out goes under it).
    path
        As in :func:`plot_atoms`.

    Returns
    -------
    matplotlib.figure.Figure
        A panel per mode (not registered with pyplot, as in :func:`plot_atoms`).

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> ds = xr.Dataset(
    ...     {"lat_lon_loadings": (("lat", "lon", "component"), np.ones((3, 4, 2))),
    ...      "variable_loadings": (("variable", "component"), np.ones((2, 2)))},
    ...     coords={"lat": [-10.0, 0.0, 10.0], "lon": [0.0, 90.0, 180.0, 270.0],
    ...             "variable": ["t2m", "tp"], "component": [0, 1]})
    >>> fig = plot_factors(ds, max_components=1)
    >>> fig.get_suptitle()
    'showing 1 of 2 components (max_components=1)'
    >>> [ax.get_xlabel() for ax in fig.axes if ax.get_xlabel()]
    ['lon', 'variable']
    """
    panels = _panels(ds)
    n_total = ds.sizes[_COMPONENT]
    chosen = _chosen_components(components, max_components, n_total)
    ncols = min(len(chosen), _MAX_COLUMNS)
    rows = [1 if kind == "lines" else math.ceil(len(chosen) / ncols) for _, _, kind in panels]
    fig = _figure(max(6.5, 2.4 * ncols), sum(2.3 * r + 0.4 for r in rows) + 0.4)
    subfigs = np.atleast_1d(fig.subfigures(len(panels), 1, height_ratios=rows))
    for sub, (heading, var, kind) in zip(subfigs, panels):
        var = var.isel({_COMPONENT: chosen})
        quantity = "code" if heading.startswith("codes") else \
            "atom value" if heading.startswith("atoms") else "loading"
        if kind == "lines":
            _plot_lines(sub, var, quantity)
        else:
            _plot_maps(sub, var, quantity, kind, ncols)
        sub.suptitle(heading, fontsize=9)
    note = "" if len(chosen) == n_total else \
        f"showing {len(chosen)} of {n_total} components" + \
        (f" (max_components={max_components})" if components is None else "")
    if title or note:
        fig.suptitle("\n".join(t for t in (title, note) if t))
    return _finish(fig, path)


def _chosen_components(components: Sequence[int] | None, max_components: int,
                       n_total: int) -> list[int]:
    if components is not None:
        chosen = [int(c) for c in components]
        if not chosen:  # nothing to draw (it divided by zero laying out the grid)
            raise ValueError("components must list at least one component, got none")
        bad = [c for c in chosen if not 0 <= c < n_total]
        if bad:
            raise ValueError(f"components {bad} out of range: the Dataset has {n_total}")
        return chosen
    if not isinstance(max_components, (int, np.integer)) or max_components < 1:
        raise ValueError(f"max_components must be an integer >= 1, got {max_components!r}")
    return list(range(min(n_total, int(max_components))))


def _feature_dims(var: Any) -> list[str]:
    return [str(d) for d in var.dims if d != _COMPONENT]


def _panels(ds: Any) -> list[tuple[str, Any, str]]:
    """``(heading, variable, kind)`` per panel: one per mode, the modes of a picture's axes
    (and its colour channels) together as their atoms, the codes last."""
    names = _loading_names(ds)
    picture = _picture_modes(ds, names)
    picture = picture if len(picture) > 1 else []  # a lone ("y", "x") mode: a map as it is
    panels = []
    if picture:
        atoms = factors_atoms(ds[picture])
        panels.append((f"atoms over {_dims_text(_feature_dims(atoms))} (products of their "
                       f"loadings)", atoms, _panel_kind(atoms)))
    panels += [(_heading(ds[n], "loadings"), ds[n], _panel_kind(ds[n]))
               for n in names if n not in picture]
    if "codes" in ds.data_vars:
        panels.append((_heading(ds["codes"], "codes"), ds["codes"], "lines"))
    return panels


def _picture_modes(ds: Any, names: list[str]) -> list[str]:
    """The loadings of a picture's axes: two 1-D modes (``"y"``, ``"x"``) or one 2-D mode
    (``("y", "x")``), and a colour-channel mode when there is one; else none."""
    single = {_feature_dims(ds[n])[0]: n for n in names if len(_feature_dims(ds[n])) == 1}
    picture = next(([single[a], single[b]] for a, b in _IMAGE_AXES
                    if a in single and b in single), None)
    picture = picture or [n for n in names if tuple(_feature_dims(ds[n])) in _IMAGE_AXES][:1]
    channel = [single[c] for c in _CHANNEL_DIMS if c in single and ds.sizes[c] in _CHANNELS]
    return picture + channel[:1] if picture else []


def _dims_text(dims: Sequence[str]) -> str:
    return dims[0] if len(dims) == 1 else ", ".join(dims[:-1]) + " and " + dims[-1]


def _heading(var: Any, what: str) -> str:
    """E.g. "loadings over lat and lon", or the variable's ``long_name`` when it has one."""
    name = var.attrs.get("long_name")
    return f"{what}: {name}" if name else f"{what} over {_dims_text(_feature_dims(var))}"


def _panel_kind(var: Any) -> str:
    dims = _feature_dims(var)
    if len(dims) == 1:
        return "lines"
    if len(dims) == 3 and var.sizes[dims[-1]] in _CHANNELS:
        return "rgb"
    return "map"


def _axis_label(var: Any, dim: str) -> str:
    units = var[dim].attrs.get("units") if dim in var.coords else None
    return f"{dim} [{units}]" if units else dim


#: A categorical profile is drawn as grouped bars up to this many bars, as points beyond.
_MAX_BARS = 64


def _model_dates(x: np.ndarray) -> tuple[np.ndarray, str | None]:
    """Dates of a climate model's calendar (cftime objects: noleap, 360_day, ...) as a
    continuous axis: numpy dates where every date exists in the standard calendar, else
    days since the first (and that first date, for the label); other values as they are."""
    if x.dtype.kind != "O" or not len(x) or \
            not type(x[0]).__module__.startswith("cftime"):
        return x, None
    try:
        return np.array([np.datetime64(d.isoformat()) for d in x]), None
    except ValueError:  # e.g. February 30 of a 360-day calendar
        import cftime

        units = f"days since {x[0].isoformat()}"
        return np.asarray(cftime.date2num(list(x), units, calendar=x[0].calendar)), \
            x[0].isoformat()


def _is_categorical(x: np.ndarray) -> bool:
    """Labels (strings, booleans), or a few integers (months, hours of a day, channels)."""
    return x.dtype.kind in "OUSb" or (x.dtype.kind in "iu" and len(x) <= 12)


def _plot_lines(sub: Any, var: Any, quantity: str) -> None:
    """A 1-D mode: grouped bars (or points) over categories, lines over a continuous axis."""
    (dim,) = _feature_dims(var)
    ax = sub.subplots()
    x = var[dim].values if dim in var.coords else np.arange(var.sizes[dim])
    x, since = _model_dates(x)
    components = var[_COMPONENT].values
    profiles = [var.sel({_COMPONENT: r}).transpose(dim).values for r in components]
    if _is_categorical(x):
        _draw_categories(ax, x, components, profiles)
    else:
        for r, y in zip(components, profiles):
            ax.plot(x, y, marker="o" if len(x) < 30 else None, markersize=3,
                    label=f"component {r}")
        if x.dtype.kind == "M":  # dates: short labels that do not overlap
            import matplotlib.dates as mdates

            locator = mdates.AutoDateLocator()
            ax.xaxis.set_major_locator(locator)
            ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    ax.set_xlabel(_axis_label(var, dim) + (f" (days since {since})" if since else ""))
    ax.set_ylabel(quantity)
    # beside the axes, never on the data; two columns when a long list would overflow
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False,
              ncols=1 if len(components) <= 6 else 2)


def _draw_categories(ax: Any, x: np.ndarray, components: np.ndarray,
                     profiles: list[np.ndarray]) -> None:
    """Grouped bars, or points when there would be too many bars; no line between categories:
    they have no order in between."""
    positions = np.arange(len(x))
    if len(x) * len(components) <= _MAX_BARS:
        width = 0.8 / len(components)
        for k, (r, y) in enumerate(zip(components, profiles)):
            ax.bar(positions - 0.4 + width * (k + 0.5), y, width, label=f"component {r}")
        ax.axhline(0.0, color="0.3", linewidth=0.6)
    else:
        for r, y in zip(components, profiles):
            ax.plot(positions, y, linestyle="none", marker="o", markersize=4,
                    label=f"component {r}")
    ax.set_xticks(positions, [str(v) for v in x], rotation=45 if len(x) > 6 else 0)


def _plot_maps(sub: Any, var: Any, quantity: str, kind: str, ncols: int) -> None:
    """One map (or image) per component, ``ncols`` a row, each with its labelled colour bar."""
    dims = _feature_dims(var)
    n = var.sizes[_COMPONENT]
    axes = np.atleast_1d(sub.subplots(math.ceil(n / ncols), ncols, squeeze=False))
    values = var.transpose(_COMPONENT, *dims).values
    cmap = _DIVERGING if np.nanmin(values) < 0 else _SEQUENTIAL  # one kind for the whole row
    for k, ax in enumerate(axes.ravel()):
        if k >= n:
            ax.set_axis_off()
            continue
        atom = values[k]
        vmax = float(np.nanmax(np.abs(atom))) or 1.0  # each map on its own scale: shapes matter
        if kind == "rgb":  # an RGB image: its colours are the loadings, no colour bar
            ax.imshow(_display(atom, "atom", vmax), interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
        else:
            mappable = _draw_map(ax, var, dims, atom.reshape(atom.shape[0], -1), vmax, cmap)
            bar = sub.colorbar(mappable, ax=ax, shrink=0.9, aspect=15, pad=0.02)
            bar.ax.tick_params(labelsize=7)
            bar.set_label(quantity, fontsize=7)
        ax.set_title(f"component {var[_COMPONENT].values[k]}", fontsize=8)
    if kind != "rgb":
        for ax in axes[:, 0]:
            ax.set_ylabel(_map_axis_label(var, dims, 0), fontsize=8)


def _map_axis_label(var: Any, dims: list[str], axis: int) -> str:
    """The dim drawn along ``axis`` (0: vertical), with its units, or its positions."""
    if _on_coordinates(var, dims):
        return _axis_label(var, dims[axis])
    if axis == 1 and len(dims) > 2:
        return " x ".join(dims[1:])
    return dims[axis] if _is_picture(dims) else f"{dims[axis]} (position)"


def _draw_map(ax: Any, var: Any, dims: list[str], image: np.ndarray, vmax: float,
              cmap: str) -> Any:
    """A map on the coordinates when the mode is 2-D and they are distinct numbers (in any
    order: latitudes often run north to south), else an image by position (pictures with
    their first dim downwards).

    Returns the mappable (for its colour bar).
    """
    vmin = -vmax if cmap == _DIVERGING else 0.0  # diverging: zero in the middle
    ax.set_xlabel(_map_axis_label(var, dims, 1), fontsize=8)
    if _on_coordinates(var, dims):
        y, x = (var[d].values for d in dims)
        rows, columns = np.argsort(y), np.argsort(x)
        return ax.pcolormesh(x[columns], y[rows], image[np.ix_(rows, columns)],
                             shading="auto", vmin=vmin, vmax=vmax, cmap=cmap)
    return ax.imshow(image, aspect="equal" if _is_picture(dims) else "auto", vmin=vmin,
                     vmax=vmax, cmap=cmap, interpolation="nearest")


def _is_picture(dims: Sequence[str]) -> bool:
    return tuple(dims[:2]) in _IMAGE_AXES


def _on_coordinates(var: Any, dims: list[str]) -> bool:
    """Whether a 2-D mode's maps can be drawn on its coordinates (distinct numbers; a
    picture's pixels are drawn as an image, whatever their coordinates)."""
    if len(dims) != 2 or _is_picture(dims):
        return False
    for d in dims:
        values = var[d].values if d in var.coords else None
        if values is None or values.dtype.kind not in "iuf" or \
                len(np.unique(values)) != len(values):
            return False
    return True


# --------------------------------------------------------------------------------------------
# convergence


def plot_convergence(history: Any, *, keys: Sequence[str] | None = None, x: str = "step",
                     logy: bool | None = None, smooth: int | None = None,
                     title: str | None = None, path: str | os.PathLike | None = None) -> Any:
    """Curves of a run's per-step numbers, e.g. the batch loss.

    Parameters
    ----------
    history : list of dict, dict of sequences, or pandas.DataFrame
        E.g. the ``info`` dicts a learner passes to its ``callback`` (``{"step": ...,
        "batch_loss": ...}``), collected in a list.
    keys : sequence of str, optional
        What to plot (default: ``batch_loss`` if present, else every numeric key but ``x``).
    x : str, default "step"
        The key on the x axis (default: the position when absent).
    logy : bool, optional
        Log scale on y (default: when every value is positive).
    smooth : int, optional
        Also draw a running mean over this many steps (default: about 1/20 of the run, when
        the run has at least 40 steps).
    title, path
        As in :func:`plot_atoms`.

    Returns
    -------
    matplotlib.figure.Figure
        The curves on one axis (not registered with pyplot, as in :func:`plot_atoms`).

    Examples
    --------
    >>> history = [{"step": t, "batch_loss": 1.0 / t} for t in range(1, 11)]
    >>> fig = plot_convergence(history)
    >>> fig.axes[0].get_xlabel(), fig.axes[0].get_ylabel()
    ('step', 'batch_loss')
    """
    columns = _columns(history)
    if not columns:
        raise ValueError("history is empty: nothing to plot")
    steps = np.asarray(columns.get(x, np.arange(1, len(next(iter(columns.values()))) + 1)))
    keys = list(keys) if keys is not None else (["batch_loss"] if "batch_loss" in columns else [
        k for k, v in columns.items() if k != x and np.asarray(v).dtype.kind in "iuf"])
    missing = [k for k in keys if k not in columns]
    if missing or not keys:
        raise ValueError(f"history has no values for {missing or 'any numeric key'}; it has "
                         f"{sorted(columns)}")
    fig = _figure(6.0, 3.6)
    ax = fig.subplots()
    for key in keys:
        values = np.asarray(columns[key], dtype=float)
        window = smooth if smooth is not None else (len(values) // 20 if len(values) >= 40
                                                    else 0)
        window = min(window, len(values))  # a window longer than the run: the run's mean
        ax.plot(steps, values, alpha=0.4 if window > 1 else 1.0, label=key)
        if window > 1:
            kernel = np.ones(window) / window
            ax.plot(steps[window - 1:], np.convolve(values, kernel, mode="valid"),
                    label=f"{key} (mean of {window})")
    finite = np.concatenate([np.asarray(columns[k], dtype=float) for k in keys])
    if logy if logy is not None else bool(np.all(finite[np.isfinite(finite)] > 0)):
        ax.set_yscale("log")
    ax.set_xlabel(x if x in columns else "step")
    ax.set_ylabel(keys[0] if len(keys) == 1 else "value")
    if len(keys) > 1 or (smooth or len(steps) >= 40):  # beside the axes, never on the data
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    if title:
        ax.set_title(title)
    return _finish(fig, path)


def _columns(history: Any) -> dict[str, Any]:
    """``{key: values}`` from a list of dicts, a dict of sequences or a DataFrame."""
    if hasattr(history, "to_dict") and hasattr(history, "columns"):  # pandas.DataFrame
        return {str(k): np.asarray(history[k]) for k in history.columns}
    if isinstance(history, Mapping):
        return {str(k): np.asarray(v) for k, v in history.items()}
    rows = list(history)
    keys = [k for k in rows[0] if all(k in row for row in rows)] if rows else []
    # keep only the numeric entries (info dicts may hold None, e.g. an unused radius)
    return {str(k): np.asarray([row[k] for row in rows]) for k in keys
            if all(isinstance(row[k], (int, float, np.number)) and not isinstance(row[k], bool)
                   for row in rows)}
