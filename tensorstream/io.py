"""Checkpoints: save a learner mid-stream and resume it exactly.

A checkpoint is an ``.npz`` file holding the learner's arrays (loadings, statistics) and one JSON
document with its class, hyper-parameters, step count, backend/dtype and random-generator state.
It is written to a temporary file in the same folder and moved into place with ``os.replace``,
so a crash mid-write never leaves a broken checkpoint where a good one was. No pickle is involved:
loading a checkpoint never runs code from the file.

A learner fitted on labelled data (``layout_``) also stores its mode layout: the dims, the modes
and the feature coordinates (datetimes, strings, MultiIndexes, non-dimension and scalar coords),
as plain arrays plus a JSON description, so a resumed learner still produces labelled factors.

The module also reads the data files of the ``tensorstream`` command (netCDF, zarr, ``.npy``;
lazily, batch by batch) and writes labelled factors to netCDF, atomically too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import secrets
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from . import schedules
from ._backend import as_tensor, to_numpy
from .engine import OnlineState
from .learners.registry import learner_class

FORMAT = "tensorstream-checkpoint"
# 2: optional mode layout of labelled fits; 3: the data scale apart from the statistic c, and no
# statistics for algorithms that keep none. Older files still load.
VERSION = 3
_SCHEDULES = {cls.__name__: cls for cls in (schedules.Balanced, schedules.Power,
                                             schedules.PowerLog, schedules.Forgetting,
                                             schedules.ProportionalRadius,
                                             schedules.ReferenceRadius)}


def _encode_param(name: str, value: Any) -> Any:
    if dataclasses.is_dataclass(value) and type(value).__name__ in _SCHEDULES:
        fields = {f.name: _encode_param(name, getattr(value, f.name))
                  for f in dataclasses.fields(value)}
        return {"__schedule__": type(value).__name__, **fields}
    if isinstance(value, (list, tuple)) and name == "init":
        return "random"  # the initial loadings are superseded by the saved ones
    if isinstance(value, dict) and name == "loss_params":
        return json.dumps(value)  # the learners accept the JSON string in its place
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"cannot checkpoint parameter {name}={value!r}: only numbers, strings and "
                    f"tensorstream.schedules objects can be saved")


def _decode_param(value: Any) -> Any:
    if isinstance(value, dict) and "__schedule__" in value:
        fields = {k: _decode_param(v) for k, v in value.items() if k != "__schedule__"}
        return _SCHEDULES[value["__schedule__"]](**fields)
    return value


def save_checkpoint(learner: Any, path: str | os.PathLike) -> Path:
    """Write ``learner``'s parameters and state to ``path`` (``.npz``), atomically.

    The ``callback`` parameter is not saved (it is a live object); pass it again when loading.
    A learner with its own state layout provides ``_checkpoint_contents()`` (JSON metadata,
    arrays) and a ``_from_checkpoint`` class method.
    """
    if hasattr(learner, "_checkpoint_contents"):
        own_meta, arrays = learner._checkpoint_contents()
        meta = {"format": FORMAT, "version": VERSION, "class": type(learner).__name__,
                **own_meta}
        return _write_npz(path, meta, arrays)
    if "state_" not in learner.__dict__:
        raise ValueError("only a fitted learner can be checkpointed; call partial_fit first")
    params = {k: _encode_param(k, v) for k, v in learner.get_params().items()
              if k != "callback"}
    state = learner.state_
    meta = {"format": FORMAT, "version": VERSION, "class": type(learner).__name__,
            "params": params, "n_steps": state.n_steps, "n_samples_seen": state.n_samples_seen,
            "scale": state.scale, "backend": learner.backend_,
            "dtype": str(learner._context["dtype"]),
            "device": str(learner._context.get("device", "cpu")),
            "rng": learner._rng.bit_generator.state, "n_loadings": len(state.loadings)}
    arrays = {f"loading_{k}": to_numpy(U) for k, U in enumerate(state.loadings)}
    if state.statistics is not None:
        meta["c"] = state.statistics["c"]
        arrays.update(A=to_numpy(state.statistics["A"]), B=to_numpy(state.statistics["B"]))
    layout = learner.__dict__.get("layout_")
    if layout is not None:
        meta["layout"], layout_arrays = _encode_layout(layout)
        arrays.update(layout_arrays)
    return _write_npz(path, meta, arrays)


def _write_npz(path: str | os.PathLike, meta: dict, arrays: dict) -> Path:
    path = Path(path)
    if path.suffix != ".npz":
        path = path.with_suffix(path.suffix + ".npz")
    with _atomic_file(path) as handle:
        np.savez(handle, __meta__=np.array(json.dumps(meta)), **arrays)
    return path


def load_checkpoint(path: str | os.PathLike, **overrides: Any) -> Any:
    """Recreate the learner saved at ``path``; ``overrides`` set parameters (e.g. ``callback``).

    Raises ``ValueError`` naming the file when it is not a readable tensorstream checkpoint.
    """
    path = Path(path)
    meta, arrays = read_checkpoint(path)
    return _restore(meta, arrays, path, overrides)


def read_checkpoint(path: str | os.PathLike) -> tuple[dict, dict]:
    """The JSON metadata and the arrays of a checkpoint, without building the learner.

    Used by ``tensorstream info``; works even when the learner's class is not installed.

    Parameters
    ----------
    path : str or path-like
        A file written by :func:`save_checkpoint`.

    Returns
    -------
    meta : dict
        Class, parameters, step count, backend, random state, layout description, ...
    arrays : dict of numpy.ndarray
        Loadings ``loading_k``, statistics ``A`` and ``B``, layout coordinates.

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        The file is not a readable tensorstream checkpoint (corrupt, foreign or too new).

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> from tensorstream import OnlineCPDL
    >>> model = OnlineCPDL(2, random_state=0).partial_fit(np.ones((4, 3, 2)))
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     meta, arrays = read_checkpoint(model.save(f"{folder}/run.npz"))
    >>> meta["class"], meta["n_steps"], arrays["loading_0"].shape
    ('OnlineCPDL', 1, (3, 2))
    """
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as archive:
            meta = json.loads(str(archive["__meta__"]))
            if not isinstance(meta, dict) or meta.get("format") != FORMAT:
                raise ValueError("not a tensorstream checkpoint")
            arrays = {k: archive[k] for k in archive.files if k != "__meta__"}
    except FileNotFoundError:
        raise
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, json.JSONDecodeError,
            EOFError) as error:
        raise ValueError(f"cannot read checkpoint {str(path)!r}: the file is corrupt or not a "
                         f"tensorstream checkpoint ({error})") from None
    version = meta.get("version")
    if not isinstance(version, int) or not 1 <= version <= VERSION:
        raise ValueError(f"cannot read checkpoint {str(path)!r}: format version {version!r} is "
                         f"not supported by this tensorstream (versions 1 to {VERSION}); "
                         f"upgrade tensorstream")
    return meta, arrays


def _restore(meta: dict, arrays: dict, path: Path, overrides: dict) -> Any:
    try:
        cls = learner_class(meta["class"])
        if hasattr(cls, "_from_checkpoint"):
            context = _context(meta["backend"], meta["dtype"], meta["device"])
            return cls._from_checkpoint(meta, arrays, context, overrides)
        params = {k: _decode_param(v) for k, v in meta["params"].items()}
        learner = cls(**{**params, **overrides})
        backend = meta["backend"]
        context = _context(backend, meta["dtype"], meta["device"])
        loadings = [as_tensor(arrays[f"loading_{k}"], backend, **context)
                    for k in range(meta["n_loadings"])]
        keeps_statistics = learner._algorithm().keeps_statistics
        statistics = {"A": as_tensor(arrays["A"], backend, **context),
                      "B": as_tensor(arrays["B"], backend, **context),
                      "c": float(meta["c"])} if keeps_statistics else None
        # before version 3 the data scale of the divergence algorithm was stored as c
        scale = float(meta["scale"] if "scale" in meta else
                      (1.0 if keeps_statistics else meta["c"]))
        rng = np.random.default_rng()
        rng.bit_generator.state = meta["rng"]
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"cannot read checkpoint {str(path)!r}: incomplete or inconsistent "
                         f"contents ({error!r})") from None
    sample_shape = tuple(U.shape[0] for U in loadings)
    _check_shapes(loadings, statistics, sample_shape, path)
    layout = _restore_layout(meta, arrays, path, sample_shape)
    learner.__dict__.update(
        state_=OnlineState(loadings=loadings, statistics=statistics, scale=scale,
                           n_steps=int(meta["n_steps"]),
                           n_samples_seen=int(meta["n_samples_seen"])),
        backend_=backend, sample_shape_=sample_shape, _context=context, _rng=rng)
    if layout is not None:
        learner.layout_ = layout
    return learner


def _check_shapes(loadings: list, statistics: dict | None, sample_shape: tuple,
                  path: Path) -> None:
    R = loadings[0].shape[1] if loadings else 0
    if not loadings or any(U.shape[1] != R for U in loadings):
        raise ValueError(f"cannot read checkpoint {str(path)!r}: array shapes are inconsistent")
    if statistics is None:
        return
    # A is (R, R), or (I_1..I_n, R, R) after missing data
    if tuple(statistics["B"].shape) != (*sample_shape, R) or tuple(
            statistics["A"].shape) not in ((R, R), (*sample_shape, R, R)):
        raise ValueError(f"cannot read checkpoint {str(path)!r}: array shapes are inconsistent")


def _restore_layout(meta: dict, arrays: dict, path: Path, sample_shape: tuple) -> Any:
    """The saved mode layout (None for a plain fit), checked against the loadings' shapes."""
    if meta.get("layout") is None:
        return None
    try:
        layout = _decode_layout(meta["layout"], arrays)
    except (KeyError, TypeError, ValueError, IndexError) as error:
        raise ValueError(f"cannot read checkpoint {str(path)!r}: the mode layout is incomplete "
                         f"or inconsistent ({error!r})") from None
    if tuple(layout.shape) != sample_shape:
        raise ValueError(f"cannot read checkpoint {str(path)!r}: the mode layout's shape "
                         f"{layout.shape} differs from the loadings' {sample_shape}")
    return layout


def _context(backend: str, dtype: str, device: str) -> dict:
    if backend == "pytorch":
        import torch

        return {"dtype": getattr(torch, dtype.replace("torch.", "")),
                "device": torch.device(device)}
    return {"dtype": np.dtype(dtype)}


# --------------------------------------------------------------------------------------------
# atomic writes


@contextlib.contextmanager
def _atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path next to ``path``; moved onto ``path`` only if the block succeeds.

    A crash (or a kill) before the move leaves whatever was at ``path`` untouched; the file is
    synced before the move, so the new content is complete when it appears under ``path``.
    """
    tmp = _new_temporary(path)
    try:
        yield Path(tmp)
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_folder(path.parent)


def _new_temporary(path: Path) -> Path:
    """An empty new file next to ``path``, created with the permissions the umask gives.

    (``tempfile.mkstemp`` would make it private, 0600, and the final file would keep that.)
    """
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue
        return tmp
    raise FileExistsError(f"cannot create a temporary file next to {str(path)!r}")


@contextlib.contextmanager
def _atomic_file(path: Path) -> Iterator[Any]:
    """A binary file handle whose content replaces ``path`` atomically on success."""
    with _atomic_path(path) as tmp, open(tmp, "wb") as handle:
        yield handle


def _fsync_folder(folder: Path) -> None:
    """Make the rename durable too (POSIX); a no-op where folders cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# --------------------------------------------------------------------------------------------
# the mode layout of labelled fits, without pickle


def _encode_layout(layout: Any) -> tuple[dict, dict]:
    """JSON description and plain arrays of a :class:`~tensorstream.labels.ModeLayout`.

    Only the feature side is kept (dims, modes, feature coordinates, name, attrs): the sample
    coordinates belong to the data, not to the model. MultiIndexes are stored as their level
    coordinates plus the level names, and rebuilt on loading.
    """
    import xarray as xr

    coords = layout.feature_coords.to_dataset()
    multi, indexed = {}, []
    for index, variables in coords.xindexes.group_by_index():
        if isinstance(index, xr.indexes.PandasMultiIndex):
            multi[str(index.dim)] = [str(n) for n in index.index.names]
        elif next(iter(variables)) != getattr(index, "dim", None):
            indexed.extend(str(n) for n in variables)  # an index on a non-dimension coord
    if multi:
        coords = coords.reset_index(list(multi))  # drops the tuples, keeps the levels
    described, arrays = [], {}
    for k, (name, var) in enumerate(coords.variables.items()):
        if not isinstance(name, str):
            raise TypeError(f"cannot checkpoint the layout: coordinate name {name!r} is not a "
                            f"string")
        key = f"layout_coord_{k}"
        arrays[key], kind = _encode_values(var.values, name)
        described.append({"name": name, "dims": [str(d) for d in var.dims], "kind": kind,
                          "attrs": _json_safe(dict(var.attrs)), "array": key})
    name = layout.name if layout.name is None or isinstance(layout.name, (str, int)) else str(
        layout.name)
    meta = {"dims": list(layout.dims), "sample_dim": layout.sample_dim,
            "modes": [{"name": m.name, "dims": list(m.dims)} for m in layout.modes],
            "sizes": dict(layout.sizes), "name": name, "attrs": _json_safe(layout.attrs),
            "coords": described, "multiindex": multi, "indexed": indexed}
    return meta, arrays


def _decode_layout(meta: dict, arrays: dict) -> Any:
    """Rebuild the layout from :func:`_encode_layout`'s output (via a zero-sample template)."""
    import xarray as xr

    from .labels import ModeLayout

    coords = {c["name"]: xr.Variable(tuple(c["dims"]), _decode_values(arrays[c["array"]],
                                                                       c["kind"]),
                                     attrs=c["attrs"])
              for c in meta["coords"]}
    dims, sample_dim, sizes = tuple(meta["dims"]), meta["sample_dim"], meta["sizes"]
    shape = tuple(0 if d == sample_dim else int(sizes[d]) for d in dims)
    template = xr.DataArray(np.zeros(shape), dims=dims, coords=coords, name=meta["name"],
                            attrs=meta["attrs"])
    if meta["multiindex"]:
        template = template.set_index(meta["multiindex"])
    for name in meta["indexed"]:
        template = template.set_xindex(name)
    modes = {m["name"]: tuple(m["dims"]) for m in meta["modes"]}
    return ModeLayout.from_dataarray(template, sample_dim, modes)


def _encode_values(values: np.ndarray, name: str) -> tuple[np.ndarray, str]:
    """Coordinate values as an array ``np.load`` reads without pickle, and how to undo it."""
    if values.dtype.kind in "biufcmMSU":
        return values, "array"
    if values.dtype.kind == "O" and all(isinstance(v, str) for v in values.ravel()):
        return values.astype(str), "str_object"
    raise TypeError(f"cannot checkpoint coordinate {name!r}: dtype {values.dtype} holding "
                    f"{type(values.ravel()[0]).__name__ if values.size else 'nothing'} values; "
                    f"only numbers, datetimes and strings can be stored")


def _decode_values(values: np.ndarray, kind: str) -> np.ndarray:
    if kind == "str_object":
        return values.astype(object)
    if kind != "array":
        raise ValueError(f"unknown coordinate encoding {kind!r}")
    return values


def _json_safe(value: Any) -> Any:
    """Attributes as JSON: numpy numbers and arrays become Python ones, other objects text."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


# --------------------------------------------------------------------------------------------
# data files in, labelled factors out

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
    if chunk_size is not None and (isinstance(chunk_size, bool) or int(chunk_size) < 1):
        raise ValueError(f"chunk_size must be an integer >= 1, got {chunk_size!r}")
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
    ds = xr.open_dataset(path, chunks={sample_dim: int(size)}, **options)
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
    with _atomic_path(path) as tmp:
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
    out = {}
    for key, value in attrs.items():
        if isinstance(value, (bool, np.bool_)) or value is None or isinstance(value, dict):
            value = json.dumps(_json_safe(value))
        elif isinstance(value, (list, tuple)) and not all(
                isinstance(v, (int, float, str)) and not isinstance(v, bool) for v in value):
            value = json.dumps(_json_safe(value))
        out[str(key)] = value
    return out
