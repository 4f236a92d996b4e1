"""The checkpoint format: a learner's state on disk, and back.

A checkpoint is an ``.npz`` file holding the learner's arrays (loadings, statistics) and one JSON
document with its class, hyper-parameters, step count, backend/dtype and random-generator state.
It is written to a temporary file in the same folder and moved into place with ``os.replace``,
so a crash mid-write never leaves a broken checkpoint where a good one was. No pickle is involved:
loading a checkpoint never runs code from the file.

A learner fitted on labelled data (``layout_``) also stores its mode layout: the dims, the modes
and the feature coordinates (datetimes, strings, MultiIndexes, non-dimension and scalar coords),
as plain arrays plus a JSON description, so a resumed learner still produces labelled factors.

This module knows the format, not the learners: each learner says what it stores
(``_checkpoint_contents``) and how it is rebuilt (``_from_checkpoint``);
:func:`tensorstream.io.load_checkpoint` finds the class in the registry.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import tokenize
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from .. import schedules
from ..core.atomic import atomic_file, deferred_interrupt
from ..core.backend import to_numpy
from .state import Health

FORMAT = "tensorstream-checkpoint"
# The format's version: a file of any other is refused (no release wrote an earlier one, so none
# is upgraded). 6: the online learners keep the passes of their last fit (``n_iter``).
VERSION = 6
_SCHEDULES = {cls.__name__: cls for cls in (schedules.Balanced, schedules.Power,
                                             schedules.PowerLog, schedules.Forgetting,
                                             schedules.ProportionalRadius,
                                             schedules.ReferenceRadius)}


def encode_param(name: str, value: Any) -> Any:
    if dataclasses.is_dataclass(value) and type(value).__name__ in _SCHEDULES:
        fields = {f.name: encode_param(name, getattr(value, f.name))
                  for f in dataclasses.fields(value)}
        return {"__schedule__": type(value).__name__, **fields}
    if isinstance(value, (list, tuple)) and name == "init":
        return "random"  # the initial loadings are superseded by the saved ones
    if isinstance(value, (np.random.Generator, np.random.RandomState)) and \
            name == "random_state":
        return None  # a learner that keeps a generator saves its state apart ("rng")
    if isinstance(value, (list, tuple)):  # e.g. index groups (an array stays refused: it is
        return _nested_list(name, value)  # data, such as an initial dictionary)
    if isinstance(value, dict):  # a mapping (loss_params, formulation_params) comes back as one
        if not all(isinstance(key, str) for key in value):
            raise TypeError(f"cannot checkpoint parameter {name}={value!r}: only string keys "
                            f"can be saved in it")
        return {"__mapping__": {key: encode_param(name, item) for key, item in value.items()}}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if name == "device" and type(value).__module__.startswith("torch"):
        return str(value)  # a torch.device, by its name ("cuda:1")
    raise TypeError(f"cannot checkpoint parameter {name}={value!r}: only numbers, strings and "
                    f"tensorstream.schedules objects can be saved")


def _nested_list(name: str, value: Any) -> list:
    """A (nested) sequence of numbers and strings as JSON lists."""
    items = value.tolist() if isinstance(value, np.ndarray) else value
    if not isinstance(items, (list, tuple)):
        return encode_param(name, items)
    return [_nested_list(name, v) if isinstance(v, (list, tuple, np.ndarray)) else
            encode_param(name, v.item() if isinstance(v, np.generic) else v) for v in items]


def encode_params(params: dict, array_names: tuple = ()) -> tuple[dict, dict]:
    """A learner's parameters as JSON values, and the members of those given as arrays.

    Every parameter but ``callback`` (a live object) goes through :func:`encode_param`, except
    the ones named in ``array_names`` when they hold an array (a graph Laplacian, an initial
    dictionary): those are stored as the float64 member ``param_<name>``, marked
    ``{"__array__": name}`` in the JSON, and a list of arrays (``init=[W]``) as the members
    ``param_<name>_<k>``, marked ``{"__array__": name, "items": n}``. :func:`decode_params`
    undoes both.
    """
    encoded, arrays = {}, {}
    for name, value in params.items():
        if name == "callback":
            continue
        if name in array_names and isinstance(value, (list, tuple)):
            for k, item in enumerate(value):
                arrays[f"param_{name}_{k}"] = np.asarray(to_numpy(item), dtype=float)
            encoded[name] = {"__array__": name, "items": len(value)}
        elif name in array_names and isinstance(value, dict):  # arrays in a mapping
            items, members = encode_params({f"{name}_{key}": item for key, item in
                                            value.items()}, tuple(f"{name}_{key}" for key in
                                                                  value if _is_array(value[key])))
            arrays.update(members)
            encoded[name] = {"__mapping__": {key: items[f"{name}_{key}"] for key in value}}
        elif name in array_names and value is not None and not isinstance(value, str):
            arrays[f"param_{name}"] = np.asarray(to_numpy(value), dtype=float)
            encoded[name] = {"__array__": name}
        else:
            encoded[name] = encode_param(name, value)
    return encoded, arrays


def _is_array(value: Any) -> bool:
    """An array or tensor (a mapping's item stored as a member), not a number or a list."""
    return hasattr(value, "shape") and hasattr(value, "dtype") and np.ndim(to_numpy(value)) > 0


def decode_params(params: dict, arrays: dict) -> dict:
    """The parameters :func:`encode_params` stored (arrays from their ``param_`` members, in a
    mapping too)."""
    decoded = {}
    for name, value in params.items():
        if isinstance(value, dict) and "__array__" in value:
            decoded[name] = _decode_array_param(name, value, arrays)
        elif isinstance(value, dict) and set(value) == {"__mapping__"} and \
                isinstance(value["__mapping__"], dict):
            items = {f"{name}_{key}": item for key, item in value["__mapping__"].items()}
            decoded[name] = {key: item for key, item in zip(
                value["__mapping__"], decode_params(items, arrays).values())}
        else:
            decoded[name] = decode_param(value)
    return decoded


def _decode_array_param(name: str, value: dict, arrays: dict) -> Any:
    if "items" in value:  # a list of arrays
        return [arrays[f"param_{name}_{k}"] for k in range(int(value["items"]))]
    return arrays[f"param_{name}"]


def decode_param(value: Any) -> Any:
    if isinstance(value, dict) and value.get("__schedule__") in _SCHEDULES:
        fields = {k: decode_param(v) for k, v in value.items() if k != "__schedule__"}
        return _SCHEDULES[value["__schedule__"]](**fields)
    if isinstance(value, dict) and set(value) == {"__mapping__"}:
        return {key: decode_param(item) for key, item in value["__mapping__"].items()}
    return value


def write_checkpoint(path: str | os.PathLike, learner_class: str, meta: dict,
                     arrays: dict) -> Path:
    """Write a learner's metadata (JSON) and arrays to ``path`` (``.npz``), atomically.

    ``meta`` is what the learner's ``_checkpoint_contents`` gives; the format, its version and
    the class name are added here. Returns the path written (``.npz`` appended if missing).
    """
    meta = {"format": FORMAT, "version": VERSION, "class": learner_class, **meta}
    path = Path(path)
    if path.suffix != ".npz":
        path = path.with_suffix(path.suffix + ".npz")
    with atomic_file(path) as handle:
        try:
            _write_npz(handle, {"__meta__": np.array(json.dumps(meta)), **arrays})
        except Exception as error:
            # should an interrupt still leave the ZIP file refusing to close ("an open writing
            # handle"), that ValueError would hide the interrupt, which is what happened
            interrupt = _interrupt_behind(error)
            if interrupt is None:
                raise
            raise interrupt from None
    return path


def _write_npz(handle: Any, arrays: dict) -> None:
    """Write ``arrays`` to ``handle`` as ``np.savez`` does (an uncompressed ZIP of ``.npy``
    members, zip64), so that ``np.load`` reads it; no array is pickled.

    Written here rather than by ``np.savez`` for one reason: ``ZipFile.open(name, "w")`` marks
    the archive as being written before it returns the member's handle, and a Ctrl-C between
    the two left numpy's archive unclosable (no handle to close it by): it raised "Can't close
    the ZIP file while there is an open writing handle" again when garbage-collected at exit.
    Here a Ctrl-C waits for the (short) opening; the member is registered to be closed before
    it is raised, so the archive always closes. Writing the bytes stays interruptible.
    """
    with zipfile.ZipFile(handle, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, value in arrays.items():
            with contextlib.ExitStack() as member:
                with deferred_interrupt():
                    out = member.enter_context(archive.open(f"{name}.npy", "w",
                                                            force_zip64=True))
                np.lib.format.write_array(out, np.asanyarray(value), allow_pickle=False)


def _interrupt_behind(error: Exception) -> BaseException | None:
    """The KeyboardInterrupt (or other non-``Exception``) that ``error`` was raised while
    handling, if any."""
    cause = error.__context__
    while cause is not None and isinstance(cause, Exception):
        cause = cause.__context__
    return cause


def read_checkpoint(path: str | os.PathLike) -> tuple[dict, dict]:
    """The JSON metadata and the arrays of a checkpoint, without building the learner.

    Used by ``tensorstream info``; works even when the learner's class is not installed.

    Parameters
    ----------
    path : str or path-like
        A file written by a learner's ``save``.

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
    path = checkpoint_path(path)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {str(path)!r}")
    if not path.is_file():  # a FIFO or a device would block or stream forever
        raise ValueError(f"cannot read checkpoint {str(path)!r}: not a regular file")
    try:
        _check_members(path)
        with np.load(path, allow_pickle=False) as archive:
            meta = json.loads(str(archive["__meta__"]))
            if not isinstance(meta, dict) or meta.get("format") != FORMAT:
                raise ValueError("not a tensorstream checkpoint")
            arrays = {k: archive[k] for k in archive.files if k != "__meta__"}
    except FileNotFoundError:
        raise
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, json.JSONDecodeError,
            EOFError, RuntimeError, NotImplementedError, SyntaxError,
            tokenize.TokenError) as error:  # zipfile's flags, numpy's header parser
        raise ValueError(f"cannot read checkpoint {str(path)!r}: the file is corrupt or not a "
                         f"tensorstream checkpoint ({error})") from None
    _check_version(meta.get("version"), path)
    try:
        check_contents(meta, arrays)
    except ValueError as error:
        raise ValueError(f"cannot read checkpoint {str(path)!r}: {error}") from None
    return meta, arrays


def _check_version(version: Any, path: Path) -> None:
    """Refuse a format version other than :data:`VERSION`, saying what to do: a newer
    tensorstream for a newer file, a new fit for an older one."""
    if isinstance(version, int) and not isinstance(version, bool) and version == VERSION:
        return
    newer = isinstance(version, int) and not isinstance(version, bool) and version > VERSION
    how = "upgrade tensorstream" if newer else "fit anew (no release wrote that version)"
    raise ValueError(f"cannot read checkpoint {str(path)!r}: format version {version!r} is "
                     f"not supported by this tensorstream, which reads version {VERSION}; "
                     f"{how}")


def checkpoint_path(path: str | os.PathLike) -> Path:
    """The file ``save(path)`` wrote: ``path`` itself, or ``path`` with ``.npz`` appended
    (``save("run")`` writes ``run.npz``, so ``load("run")`` reads it)."""
    path = Path(path)
    if not path.exists() and path.suffix != ".npz":
        written = path.with_suffix(path.suffix + ".npz")
        if written.exists():
            return written
    return path


_FLOAT_DTYPES = ("float32", "float64")
_COUNTS = ("n_steps", "n_samples_seen", "n_loadings", "n_iter")


def check_contents(meta: dict, arrays: dict) -> None:
    """Refuse metadata and members that tensorstream never writes, before any learner is
    built: a ``ValueError`` naming the field.

    What holds for every learner is checked here (types of the common fields, counts, the
    random state, member dtypes, finiteness); each learner then checks its own shapes and
    parameters, as its constructor and ``partial_fit`` would.
    """
    if not isinstance(meta.get("class"), str):
        raise ValueError(f"class must be a string, got {meta.get('class')!r}")
    if not isinstance(meta.get("params"), dict):
        raise ValueError(f"params must be a mapping, got {type(meta.get('params')).__name__}")
    if meta.get("backend") not in ("numpy", "pytorch"):
        raise ValueError(f"backend must be 'numpy' or 'pytorch', got {meta.get('backend')!r}")
    dtype = str(meta.get("dtype")).replace("torch.", "")
    if dtype not in _FLOAT_DTYPES:
        raise ValueError(f"dtype must be float32 or float64, got {meta.get('dtype')!r}")
    if not isinstance(meta.get("device", "cpu"), str):
        raise ValueError(f"device must be a string, got {meta.get('device')!r}")
    for name in _COUNTS:
        value = meta.get(name, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
    for name in ("scale", "c"):
        value = meta.get(name, 1.0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not np.isfinite(value) or (name == "scale" and value <= 0):
            raise ValueError(f"{name} must be a finite number{' > 0' if name == 'scale' else ''}"
                             f", got {value!r}")
    if "rng" in meta:
        _check_random_state(meta["rng"])
    for key, value in arrays.items():
        _check_member(key, value, dtype)


def _check_random_state(state: Any) -> None:
    try:
        np.random.default_rng().bit_generator.state = state
    except (TypeError, ValueError, KeyError) as error:
        raise ValueError(f"rng is not the state of a numpy random generator ({error})") from None


def _check_member(key: str, value: np.ndarray, dtype: str) -> None:
    """A state member: a finite float array of at least one dimension, in the checkpoint's
    dtype (parameters given as arrays are stored in float64); layout coordinates are checked
    when the layout is rebuilt."""
    if key.startswith("layout_"):
        return
    if value.dtype.kind != "f" or value.ndim == 0:
        raise ValueError(f"member {key!r} must be a float array, got dtype {value.dtype} and "
                         f"shape {value.shape}")
    if not key.startswith("param_") and value.dtype != np.dtype(dtype):
        raise ValueError(f"member {key!r} has dtype {value.dtype} but the checkpoint's dtype "
                         f"is {dtype}")
    if not np.all(np.isfinite(value)):
        raise ValueError(f"member {key!r} holds NaN or infinite values")


#: fitted arrays of the batch learners whose second axis runs over the features
_FEATURE_AXIS_ARRAYS = ("components_", "low_rank_", "sparse_", "outliers_")


def check_fitted_values(learner: Any, fitted: dict) -> None:
    """What a batch learner's ``fit`` never leaves behind, refused with a ``ValueError``
    naming the field: invalid parameters, counts that are not integers >= 0, histories that
    are not lists, arrays whose shapes disagree with ``n_features_in_`` or ``n_components``,
    negative factors of a nonnegative model."""
    try:
        learner._check_params()
    except (TypeError, ValueError) as error:
        raise ValueError(f"invalid parameters ({error})") from None
    for name, value in fitted.items():
        if name.startswith("n_") and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 0):
            raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
        if name == "history_" and not isinstance(value, list):
            raise ValueError(f"history_ must be a list, got {type(value).__name__}")
        if name == "scale_" and (isinstance(value, bool) or not isinstance(value, (int, float))
                                 or not 0 < value < float("inf")):
            raise ValueError(f"scale_ must be a positive finite number, got {value!r}")
    n_features = fitted.get("n_features_in_")
    for name in _FEATURE_AXIS_ARRAYS:
        if name in fitted and (len(fitted[name].shape) != 2 or (
                n_features is not None and fitted[name].shape[1] != n_features)):
            raise ValueError(f"{name} has shape {tuple(fitted[name].shape)}, not "
                             f"(..., n_features_in_={n_features})")
    n_components = getattr(learner, "n_components", None)
    if "components_" in fitted and isinstance(n_components, int) and \
            fitted["components_"].shape[0] != n_components:
        raise ValueError(f"components_ has {fitted['components_'].shape[0]} rows but "
                         f"n_components={n_components}")
    if getattr(learner, "_positive_data", False):
        for name in ("components_", "codes_"):
            if name in fitted and float(np.min(to_numpy(fitted[name]))) < 0:
                raise ValueError(f"{name} has negative entries, but the model is nonnegative")


def _check_members(path: Path) -> None:
    """Refuse archives that would expand beyond their size on disk (zip bombs).

    ``write_checkpoint`` stores members uncompressed, so an honest checkpoint's members add up to
    at most its own size; a member that claims more (a compressed one, or a lying header) means
    the file was not written by tensorstream, and nothing is decompressed.
    """
    with zipfile.ZipFile(path) as archive:
        infos = archive.infolist()
        if not any(info.filename == "__meta__.npy" for info in infos):
            raise ValueError("no metadata member")
        for info in infos:
            if info.compress_type != zipfile.ZIP_STORED or info.file_size != info.compress_size:
                raise ValueError(f"member {info.filename!r} is compressed ({info.compress_size} "
                                 f"bytes expanding to {info.file_size}); tensorstream writes "
                                 f"members uncompressed")
        if sum(info.file_size for info in infos) > path.stat().st_size:
            raise ValueError("the members are larger than the file")


def tensor_context(backend: str, dtype: str, device: str) -> dict:
    """The tensor context (dtype, device) of a checkpoint's arrays on ``backend``."""
    if backend == "pytorch":
        import torch

        return {"dtype": getattr(torch, dtype.replace("torch.", "")),
                "device": torch.device(device)}
    return {"dtype": np.dtype(dtype)}


# -- the mode layout of labelled fits, without pickle -------------------------------------------


def encode_layout(layout: Any) -> tuple[dict, dict]:
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
                          "attrs": json_safe(dict(var.attrs)), "array": key})
    name = layout.name if layout.name is None or isinstance(layout.name, (str, int)) else str(
        layout.name)
    meta = {"dims": list(layout.dims), "sample_dim": layout.sample_dim,
            "modes": [{"name": m.name, "dims": list(m.dims)} for m in layout.modes],
            "sizes": dict(layout.sizes), "name": name, "attrs": json_safe(layout.attrs),
            "coords": described, "multiindex": multi, "indexed": indexed}
    return meta, arrays


def decode_layout(meta: dict, arrays: dict) -> Any:
    """Rebuild the layout from :func:`encode_layout`'s output (via a zero-sample template)."""
    import xarray as xr

    from ..labels import ModeLayout

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


def json_safe(value: Any) -> Any:
    """Attributes as JSON: numpy numbers and arrays become Python ones, other objects text."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


# -- the health counters of an online state -------------------------------------------------


def decode_health(meta: Any, n_components: int) -> Health | None:
    """The counters :func:`encode_health` stored (None: a state that keeps none)."""
    if meta is None:
        return None
    health = Health(idle_steps=_counts(meta["idle_steps"], "health.idle_steps"),
                    idle_samples=_counts(meta["idle_samples"], "health.idle_samples"),
                    bound_steps=_counts([meta["bound_steps"]], "health.bound_steps")[0],
                    block=(_finite(meta["block"][0], "health.block"),
                           *_counts(meta["block"][1:3], "health.block")),
                    block_means=tuple(_finite(v, "health.block_means")
                                      for v in meta["block_means"]),
                    futile_reinits=_counts(meta["futile_reinits"], "health.futile_reinits"))
    for name in ("idle_steps", "idle_samples", "futile_reinits"):
        held = len(getattr(health, name))
        if held != n_components:
            raise ValueError(f"health.{name} holds {held} atoms, not {n_components}")
    return health


def _counts(values: Any, name: str) -> tuple:
    """Counters read back: integers >= 0 (a tampered file is refused, not rounded)."""
    if not isinstance(values, (list, tuple)) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
        raise ValueError(f"{name} must hold integers >= 0, got {values!r}")
    return tuple(int(v) for v in values)


def _finite(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value):
        raise ValueError(f"{name} must hold finite numbers, got {value!r}")
    return float(value)


def encode_health(health: Health | None) -> dict | None:
    """The counters of an :class:`~.state.OnlineState` as JSON."""
    return None if health is None else dataclasses.asdict(health)
