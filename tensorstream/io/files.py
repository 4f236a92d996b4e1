"""Data files in, labelled factors out: what the ``tensorstream`` command reads and writes.

Reads netCDF, zarr and ``.npy`` files lazily, batch by batch; writes labelled factors to
netCDF, atomically.
"""

from __future__ import annotations

import json
import numbers
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..core.atomic import atomic_path

#: The sample dim of ``.npy`` input (samples lie on the first axis); the other axes are
#: ``axis1``, ``axis2``, ...
NPY_SAMPLE_DIM = "sample"
_CHUNK_BYTES = 1 << 20  # default dask chunk along the sample dim for contiguous files: ~1 MiB


def open_dataarray(path: str | os.PathLike, var: str | None = None, *,
                   sample_dim: str | None = None, chunk_size: int | None = None) -> Any:
    """Open one variable of a netCDF, zarr or ``.npy`` file lazily, for streaming.

    netCDF and zarr variables come back backed by dask, chunked along ``sample_dim`` only, so
    that a mini-batch reads only the chunks that hold its samples. A ``.npy`` file (samples on
    the first axis) comes back as a DataArray with dims ``("sample", "axis1", ...)``, also
    read chunk by chunk, never as a whole.

    Parameters
    ----------
    path : str or path-like
        ``*.nc`` (any netCDF/HDF5 file), a zarr store (folder or ``*.zarr``) or ``*.npy``.
    var : str, optional
        Variable to read from a netCDF/zarr file; may be left out when the file holds one.
    sample_dim : str, optional
        The dim along which samples lie (required for netCDF/zarr; ``"sample"`` for ``.npy``).
    chunk_size : int, optional
        Samples per dask chunk. Default: the file's own chunking along ``sample_dim``, or about
        1 MiB of samples for unchunked files.

    Returns
    -------
    xarray.DataArray
        Lazy (dask-backed) numeric data with ``sample_dim`` among its dims.

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        Unreadable file, unknown variable or dim (the message lists the available ones).
    TypeError
        Non-numeric data.

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     np.save(f"{folder}/x.npy", np.ones((10, 4, 3)))
    ...     da = open_dataarray(f"{folder}/x.npy", chunk_size=4)
    ...     print(da.dims, da.chunks)
    ('sample', 'axis1', 'axis2') ((4, 4, 2), (4,), (3,))
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such file or folder: {str(path)!r}")
    if chunk_size is not None and (isinstance(chunk_size, bool) or
                                   not isinstance(chunk_size, numbers.Integral) or
                                   chunk_size < 1):  # "3" was dask's bytes, 2.5 cut to 2
        raise ValueError(f"chunk_size must be an integer >= 1, got {chunk_size!r}")
    chunk_size = None if chunk_size is None else int(chunk_size)
    kind = data_format(path)
    if kind == "npy":
        if var is not None:
            raise ValueError(f"{str(path)!r} is a .npy file: it holds one array, --var/var "
                             f"does not apply")
        if sample_dim not in (None, NPY_SAMPLE_DIM):
            raise ValueError(f"in a .npy file samples lie on the first axis, named "
                             f"{NPY_SAMPLE_DIM!r}; got sample_dim {sample_dim!r}")
        return _open_npy(path, chunk_size)
    return _open_xarray(path, kind, var, sample_dim, chunk_size)


def data_format(path: str | os.PathLike) -> str:
    """``"npy"``, ``"zarr"`` or ``"netcdf"``, from the name (and, for folders, the content).

    Examples
    --------
    >>> data_format("obs.npy"), data_format("obs.zarr"), data_format("obs.nc")
    ('npy', 'zarr', 'netcdf')
    """
    path = Path(path)
    if path.suffix == ".npy":
        return "npy"
    if path.suffix == ".zarr" or path.is_dir():
        return "zarr"
    return "netcdf"


class _NpyRows:
    """Read-only array view of a C-order ``.npy`` file that reads only the rows asked for.

    Unlike a memory map, the rows read are not kept mapped, so memory stays flat however much
    of the file a stream has visited.
    """

    def __init__(self, path: Path):
        # a memory map only to read the header (shape, dtype, data offset); it is not kept
        mapped = np.load(path, mmap_mode="r", allow_pickle=False)
        shape, dtype, offset = mapped.shape, mapped.dtype, mapped.offset
        fortran = mapped.ndim > 1 and not mapped.flags.c_contiguous
        del mapped
        if fortran:
            raise ValueError("only C-order .npy files can be streamed; re-save it with "
                             "np.save(path, np.ascontiguousarray(x))")
        if len(shape) < 2:
            raise ValueError(f"the array has shape {shape}; expected (n_samples, I_1, ..., "
                             f"I_n) with samples on the first axis")
        self.path, self.shape, self.dtype, self.offset = path, tuple(shape), dtype, offset
        self.ndim = len(shape)
        self.row_bytes = dtype.itemsize * int(np.prod(shape[1:]))

    def __getitem__(self, key: tuple) -> np.ndarray:
        key = key if isinstance(key, tuple) else (key,)
        rows = key[0] if key else slice(None)
        start, stop, step = rows.indices(self.shape[0])  # dask asks for slices of chunks
        count = max(0, -(-(stop - start) // step)) if step > 0 else 0
        with open(self.path, "rb") as handle:
            handle.seek(self.offset + start * self.row_bytes)
            span = (count - 1) * step + 1 if count else 0
            data = np.fromfile(handle, dtype=self.dtype,
                               count=span * self.row_bytes // self.dtype.itemsize)
        data = data.reshape((span, *self.shape[1:]))[::step]
        return data[(slice(None), *key[1:])]


def _open_npy(path: Path, chunk_size: int | None) -> Any:
    import dask.array
    import xarray as xr

    try:
        rows = _NpyRows(path)
    except (OSError, ValueError) as error:
        raise ValueError(f"cannot read {str(path)!r} as a .npy file ({error})") from None
    if rows.dtype.kind not in "biuf":
        raise TypeError(f"{str(path)!r} holds non-numeric data (dtype {rows.dtype}); expected "
                        f"numbers")
    size = chunk_size or max(1, _CHUNK_BYTES // max(rows.row_bytes, 1))
    token = dask.base.tokenize(str(path.resolve()), path.stat().st_mtime_ns)
    data = dask.array.from_array(rows, chunks=(size, *rows.shape[1:]), asarray=False,
                                 fancy=False, name=f"npy-{token}")
    dims = (NPY_SAMPLE_DIM, *(f"axis{k}" for k in range(1, rows.ndim)))
    return xr.DataArray(data, dims=dims, name=path.stem)


def _open_xarray(path: Path, kind: str, var: str | None, sample_dim: str | None,
                 chunk_size: int | None) -> Any:
    import xarray as xr

    options = {"engine": "zarr", "consolidated": _zarr_consolidated(path)} if kind == "zarr" \
        else {}
    try:
        # a first, metadata-only look: which variable, which dim, how it is chunked on disk
        with xr.open_dataset(path, chunks=None, cache=False, **options) as ds:
            name = _pick_variable(ds, var, path)
            variable = ds[name]
            dims, dtype = tuple(variable.dims), variable.dtype
            on_disk = variable.encoding.get("preferred_chunks", {}).get(sample_dim)
            sample_bytes = dtype.itemsize * int(np.prod(
                [n for d, n in variable.sizes.items() if d != sample_dim]))
    except _ReportedError as error:
        raise ValueError(str(error)) from None
    except (OSError, ValueError, TypeError, RuntimeError, KeyError) as error:
        reason = str(error).split(". ")[0]  # xarray appends installation advice
        raise ValueError(f"cannot open {str(path)!r} as {kind}: {reason}") from None
    if sample_dim is None:
        raise ValueError(f"the sample dim is required (sample_dim, --sample-dim): variable "
                         f"{name!r} has dims {list(dims)}")
    if sample_dim not in dims:
        raise ValueError(f"sample_dim {sample_dim!r} is not a dim of variable {name!r}; "
                         f"available dims: {list(dims)}")
    if dtype.kind not in "biuf":
        raise TypeError(f"variable {name!r} holds non-numeric data (dtype {dtype}); expected "
                        f"numbers")
    size = chunk_size or on_disk or max(1, _CHUNK_BYTES // max(sample_bytes, 1))
    # whole samples per chunk (a batch reads every feature; the size above counts them so):
    # the file's own chunks of the other dims would split every batch into many small reads
    chunks = {dim: -1 for dim in dims if dim != sample_dim}
    ds = xr.open_dataset(path, chunks={**chunks, sample_dim: int(size)}, **options)
    return ds[name]


def _zarr_consolidated(path: Path) -> bool:
    """Whether a zarr store has consolidated metadata (asking avoids xarray's fallback warning)."""
    if (path / ".zmetadata").exists():  # zarr format 2
        return True
    try:
        meta = json.loads((path / "zarr.json").read_text())  # zarr format 3
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and meta.get("consolidated_metadata") is not None


class _ReportedError(ValueError):
    """An error whose message is already user-ready."""


def _pick_variable(ds: Any, var: str | None, path: Path) -> str:
    names = [str(n) for n in ds.data_vars]
    if var is None:
        if len(names) == 1:
            return names[0]
        raise _ReportedError(f"{str(path)!r} holds {len(names)} variables {names}; choose one "
                             f"(--var NAME)" if names else f"{str(path)!r} holds no variables")
    if var not in ds.data_vars:
        raise _ReportedError(f"no variable {var!r} in {str(path)!r}; available variables: "
                             f"{names}")
    return var


def write_factors(ds: Any, path: str | os.PathLike) -> Path:
    """Write a factors Dataset to netCDF, atomically (a failed write leaves ``path`` as it was).

    netCDF cannot store a pandas MultiIndex: such dims are written with their levels as plain
    coordinates (``ds.reset_index``; rebuild with ``ds.set_index(dim=[levels])`` after
    reading). Attributes netCDF cannot hold (None, booleans, dicts) are written as text.

    Parameters
    ----------
    ds : xarray.Dataset
        E.g. ``learner.factors_``.
    path : str or path-like
        Target ``.nc`` file; its folder must exist.

    Returns
    -------
    pathlib.Path

    Examples
    --------
    >>> import tempfile, numpy as np, xarray as xr
    >>> ds = xr.Dataset({"x_loadings": (("x", "component"), np.ones((3, 2)))},
    ...                 attrs={"fitted": True})
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     with xr.open_dataset(write_factors(ds, f"{folder}/f.nc")) as back:
    ...         print(back["x_loadings"].shape, back.attrs["fitted"])
    (3, 2) true
    """
    path = Path(path)
    ds = _netcdf_ready(ds)
    with atomic_path(path) as tmp:
        ds.to_netcdf(tmp)
    return path


def _netcdf_ready(ds: Any) -> Any:
    """A copy of ``ds`` that netCDF can hold: no MultiIndex, plain attributes."""
    import xarray as xr

    multi = [index.dim for index, _ in ds.xindexes.group_by_index()
             if isinstance(index, xr.indexes.PandasMultiIndex)]
    ds = ds.reset_index(multi) if multi else ds.copy()
    ds.attrs = _netcdf_attrs(ds.attrs)
    for name in ds.variables:
        ds[name].attrs = _netcdf_attrs(ds[name].attrs)
    return ds


def _netcdf_attrs(attrs: dict) -> dict:
    # here, not at the top: reading a data file (tensorstream info) needs no engine, TensorLy
    from ..engine.checkpoint import json_safe

    out = {}
    for key, value in attrs.items():
        if isinstance(value, (bool, np.bool_)) or value is None or isinstance(value, dict):
            value = json.dumps(json_safe(value))
        elif isinstance(value, (list, tuple)) and not all(
                isinstance(v, (int, float, str)) and not isinstance(v, bool) for v in value):
            value = json.dumps(json_safe(value))
        out[str(key)] = value
    return out
