"""Checkpoints: save a learner mid-stream and resume it exactly.

A checkpoint is an ``.npz`` file holding the learner's arrays (loadings, statistics) and one JSON
document with its class, hyper-parameters, step count, backend/dtype and random-generator state.
It is written to a temporary file in the same folder and moved into place with ``os.replace``,
so a crash mid-write never leaves a broken checkpoint where a good one was. No pickle is involved:
loading a checkpoint never runs code from the file.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from . import schedules
from ._backend import as_tensor, to_numpy

FORMAT = "tensorstream-checkpoint"
VERSION = 1
_SCHEDULES = {cls.__name__: cls for cls in (schedules.Balanced, schedules.Power,
                                             schedules.PowerLog, schedules.Forgetting,
                                             schedules.ProportionalRadius,
                                             schedules.ReferenceRadius)}


def _learner_classes() -> dict:
    from .learners.ocpdl import OnlineCPDL

    return {"OnlineCPDL": OnlineCPDL}


def _encode_param(name: str, value: Any) -> Any:
    if dataclasses.is_dataclass(value) and type(value).__name__ in _SCHEDULES:
        fields = {f.name: _encode_param(name, getattr(value, f.name))
                  for f in dataclasses.fields(value)}
        return {"__schedule__": type(value).__name__, **fields}
    if isinstance(value, (list, tuple)) and name == "init":
        return "random"  # the initial loadings are superseded by the saved ones
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
    """
    if "loadings_" not in learner.__dict__:
        raise ValueError("only a fitted learner can be checkpointed; call partial_fit first")
    params = {k: _encode_param(k, v) for k, v in learner.get_params().items()
              if k != "callback"}
    stats = learner.statistics_
    meta = {"format": FORMAT, "version": VERSION, "class": type(learner).__name__,
            "params": params, "n_steps": learner.n_steps_,
            "n_samples_seen": learner.n_samples_seen_, "c": stats["c"],
            "backend": learner.backend_, "dtype": str(learner._context["dtype"]),
            "device": str(learner._context.get("device", "cpu")),
            "rng": learner._rng.bit_generator.state,
            "n_loadings": len(learner.loadings_)}
    arrays = {f"loading_{k}": to_numpy(U) for k, U in enumerate(learner.loadings_)}
    arrays.update(A=to_numpy(stats["A"]), B=to_numpy(stats["B"]))
    path = Path(path)
    if path.suffix != ".npz":
        path = path.with_suffix(path.suffix + ".npz")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            np.savez(handle, __meta__=np.array(json.dumps(meta)), **arrays)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load_checkpoint(path: str | os.PathLike, **overrides: Any) -> Any:
    """Recreate the learner saved at ``path``; ``overrides`` set parameters (e.g. ``callback``).

    Raises ``ValueError`` naming the file when it is not a readable tensorstream checkpoint.
    """
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as archive:
            meta = json.loads(str(archive["__meta__"]))
            if meta.get("format") != FORMAT:
                raise ValueError("not a tensorstream checkpoint")
            arrays = {k: archive[k] for k in archive.files if k != "__meta__"}
    except FileNotFoundError:
        raise
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, json.JSONDecodeError,
            EOFError) as error:
        raise ValueError(f"cannot read checkpoint {str(path)!r}: the file is corrupt or not a "
                         f"tensorstream checkpoint ({error})") from None
    return _restore(meta, arrays, path, overrides)


def _restore(meta: dict, arrays: dict, path: Path, overrides: dict) -> Any:
    try:
        cls = _learner_classes()[meta["class"]]
        params = {k: _decode_param(v) for k, v in meta["params"].items()}
        learner = cls(**{**params, **overrides})
        backend = meta["backend"]
        context = _context(backend, meta["dtype"], meta["device"])
        loadings = [as_tensor(arrays[f"loading_{k}"], backend, **context)
                    for k in range(meta["n_loadings"])]
        statistics = {"A": as_tensor(arrays["A"], backend, **context),
                      "B": as_tensor(arrays["B"], backend, **context), "c": float(meta["c"])}
        rng = np.random.default_rng()
        rng.bit_generator.state = meta["rng"]
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"cannot read checkpoint {str(path)!r}: incomplete or inconsistent "
                         f"contents ({error!r})") from None
    R = statistics["A"].shape[-1]  # A is (R, R), or (I_1..I_n, R, R) after missing data
    sample_shape = tuple(U.shape[0] for U in loadings)
    if tuple(statistics["B"].shape) != (*sample_shape, R) or any(
            U.shape[1] != R for U in loadings) or tuple(statistics["A"].shape) not in (
            (R, R), (*sample_shape, R, R)):
        raise ValueError(f"cannot read checkpoint {str(path)!r}: array shapes are inconsistent")
    learner.__dict__.update(
        loadings_=loadings, statistics_=statistics, n_steps_=int(meta["n_steps"]),
        n_samples_seen_=int(meta["n_samples_seen"]), backend_=backend,
        sample_shape_=sample_shape, _context=context, _rng=rng)
    return learner


def _context(backend: str, dtype: str, device: str) -> dict:
    if backend == "pytorch":
        import torch

        return {"dtype": getattr(torch, dtype.replace("torch.", "")),
                "device": torch.device(device)}
    return {"dtype": np.dtype(dtype)}
