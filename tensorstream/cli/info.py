"""``tensorstream info``: describe a factors file, a checkpoint, a data file or a Dask
cluster."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .errors import CLIError


def run_info(args: argparse.Namespace) -> int:
    """``tensorstream info FILE`` (:func:`describe`) or ``tensorstream info --scheduler
    ADDRESS`` (:func:`describe_cluster`): print the lines; return the exit status 0."""
    scheduler = getattr(args, "scheduler", None)
    devices = getattr(args, "devices", False)
    if (args.file is not None) + (scheduler is not None) + bool(devices) != 1:
        raise CLIError("info: give a FILE or --scheduler ADDRESS, or --devices (one of them)")
    if devices:
        print("\n".join(describe_devices()))
    elif scheduler is not None:
        print("\n".join(describe_cluster(scheduler, getattr(args, "timeout", None))))
    else:
        print("\n".join(describe(args.file)))
    return 0


def describe_devices() -> list[str]:
    """Lines naming the devices PyTorch sees (``fit --device`` takes them); torch is imported
    only here, and only when it is installed."""
    from ..core.device import torch_devices

    devices = torch_devices()
    if devices is None:
        return ["PyTorch is not installed: tensorstream computes with numpy on the CPU "
                "(pip install torch for --device)"]
    return ["devices PyTorch sees (fit --device DEVICE):"] + [f"  {d}" for d in devices]


def describe_cluster(address: str, timeout: float | None = None) -> list[str]:
    """Lines describing the Dask cluster at ``address``: its workers, their threads and
    memory, and the version of this package on each (or the module a worker cannot import).

    Parameters
    ----------
    address : str
        The scheduler's address (``tcp://host:8786``).
    timeout : float, optional
        Seconds to wait for the scheduler (default
        :data:`~tensorstream.engine.distributed.CONNECT_TIMEOUT`).

    Raises
    ------
    CLIError
        The scheduler cannot be reached within ``timeout``.
    """
    from .._version import __version__
    from ..engine.distributed import connect, workers_report

    try:
        client, _ = connect(address, timeout=timeout)
    except (ValueError, TypeError, ImportError) as error:
        raise CLIError(str(error).replace("client:", "--scheduler:")) from None
    try:
        report = workers_report(client)
    finally:
        client.close()
    threads = sum(w["threads"] for w in report.values())
    memory = sum(w["memory"] for w in report.values())
    lines = [f"{address}: Dask scheduler, {len(report)} worker(s), {threads} thread(s), "
             f"{_gib(memory)} memory; this driver runs tensorstream {__version__}"]
    for worker_address, worker in report.items():
        if "missing" in worker:
            package = (f"cannot import {worker['missing']!r} ({worker['error']}): install "
                       f"tensorstream there")
        elif "unreachable" in worker:
            package = f"did not answer ({worker['unreachable']})"
        else:
            package = f"tensorstream {worker['version']} (Python {worker['python']})"
            if worker["version"] != __version__:
                package += f", not the driver's {__version__}"
        lines.append(f"  {worker_address} (name {worker['name']}): {worker['threads']} "
                     f"thread(s), {_gib(worker['memory'])}, {package}")
    if not report:
        lines.append("  no workers yet: start some (dask worker ADDRESS)")
    return lines


def _gib(size: int) -> str:
    return f"{size / 2**30:.1f} GiB" if size else "unlimited"


def describe(path: str | os.PathLike) -> list[str]:
    """Lines describing a factors file, a checkpoint or a data file (``tensorstream info``).

    Parameters
    ----------
    path : str or path-like
        A ``.nc`` factors file written by ``tensorstream fit``, a ``.npz`` checkpoint, or a
        netCDF/zarr/``.npy`` data file.

    Returns
    -------
    list of str

    Raises
    ------
    FileNotFoundError, ValueError
        No such file, or a file none of these readers understands.

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     np.save(f"{folder}/x.npy", np.ones((10, 4, 3)))
    ...     print("\\n".join(describe(f"{folder}/x.npy")[1:]))
      data: 10 samples along 'sample', dims sample: 10, axis1: 4, axis2: 3 (float64)
      fit it with: --modes "axis1;axis2" (every axis its own mode) or stack axes with ','
    """
    import zipfile

    from ..io import data_format

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(2, "No such file or directory", str(path))
    if path.suffix == ".npz" or (path.is_file() and zipfile.is_zipfile(path)):
        return _describe_checkpoint(path)
    if data_format(path) == "npy":
        return _describe_npy(path)
    return _describe_dataset(path)


def _describe_checkpoint(path: Path) -> list[str]:
    from ..io import read_checkpoint

    meta, arrays = read_checkpoint(path)
    params = meta.get("params", {})
    shapes = [tuple(arrays[f"loading_{k}"].shape) for k in range(meta.get("n_loadings", 0))]
    lines = [f"{path}: tensorstream checkpoint (format version {meta['version']})",
             f"  learner: {meta.get('class')}, {params.get('n_components')} components, "
             f"step {meta.get('n_steps')}, {meta.get('n_samples_seen')} samples seen",
             f"  backend: {meta.get('backend')} ({meta.get('dtype')}, {meta.get('device')})",
             f"  loadings: {', '.join(str(s) for s in shapes)}"]
    layout = meta.get("layout")
    if layout:
        try:
            sizes = layout["sizes"]
            modes = "; ".join(f"{m['name']} (" + ", ".join(f"{d}: {sizes[d]}" for d in m["dims"])
                              + ")" for m in layout["modes"])
            lines.append(f"  labelled: samples along {layout['sample_dim']!r}; modes {modes}")
        except (KeyError, TypeError, AttributeError, IndexError) as error:  # as loading says
            raise ValueError(f"cannot read checkpoint {str(path)!r}: the mode layout is "
                             f"incomplete or inconsistent ({error!r})") from None
    else:
        lines.append("  unlabelled (fitted on plain arrays)")
    shown = {k: v for k, v in params.items() if k != "n_components"}
    lines.append(f"  parameters: {_short(shown)}")
    return lines


def _describe_npy(path: Path) -> list[str]:
    from ..io import open_dataarray

    da = open_dataarray(path)
    dims = ", ".join(f"{d}: {n}" for d, n in da.sizes.items())
    axes = [d for d in da.dims if d != "sample"]
    return [f"{path}: .npy array",
            f"  data: {da.sizes['sample']} samples along 'sample', dims {dims} ({da.dtype})",
            f"  fit it with: --modes \"{';'.join(axes)}\" (every axis its own mode) or stack "
            f"axes with ','"]


def _describe_dataset(path: Path) -> list[str]:
    import xarray as xr

    from ..io.files import _zarr_consolidated, data_format

    engine = "zarr" if data_format(path) == "zarr" else None
    options = {"consolidated": _zarr_consolidated(path)} if engine else {}
    try:
        ds = xr.open_dataset(path, engine=engine, chunks=None, cache=False, **options)
    except (OSError, ValueError, TypeError, RuntimeError, KeyError) as error:
        raise CLIError(f"cannot read {str(path)!r}: not a factors, checkpoint or data file "
                       f"({' '.join(str(error).split())})") from None
    with ds:
        loadings = [str(n) for n in ds.data_vars if str(n).endswith("_loadings")]
        if loadings and "component" in ds.dims:
            return _describe_factors(path, ds, loadings)
        lines = [f"{path}: data file ({'zarr' if engine else 'netCDF'}), "
                 f"{len(ds.data_vars)} variable(s)"]
        for name, var in ds.data_vars.items():
            dims = ", ".join(f"{d}: {n}" for d, n in var.sizes.items())
            lines.append(f"  {name}: ({dims}) {var.dtype}")
        for dim in ds.dims:
            if dim in ds.coords:
                lines.append(f"  coordinate {dim}: {_range(ds[dim].values)}")
        return lines


def _describe_factors(path: Path, ds: Any, loadings: Sequence[str]) -> list[str]:
    attrs = ds.attrs
    lines = [f"{path}: tensorstream factors, {ds.sizes['component']} components"]
    if "learner" in attrs:
        lines.append(f"  model: {attrs.get('model')} ({attrs.get('learner')}), "
                     f"{attrs.get('n_steps')} steps, {attrs.get('n_samples_seen')} samples seen")
        lines.append(f"  learned from: {attrs.get('variable')!r} in {attrs.get('source')}, "
                     f"samples along {attrs.get('sample_dim')!r}, modes "
                     f"\"{attrs.get('modes')}\"")
    for name in [*loadings, *(["codes"] if "codes" in ds.data_vars else [])]:
        var = ds[name]
        dims = ", ".join(f"{d}: {n}" for d, n in var.sizes.items())
        coords = "; ".join(f"{d} {_range(ds[d].values)}" for d in var.dims
                           if d != "component" and d in ds.coords)
        lines.append(f"  {name}: ({dims})" + (f"  {coords}" if coords else ""))
    if "params" in attrs:
        try:
            lines.append(f"  parameters: {_short(json.loads(attrs['params']))}")
        except (TypeError, ValueError):
            pass
    return lines


def _range(values: np.ndarray) -> str:
    """A short description of coordinate values."""
    values = np.asarray(values)
    if values.size == 0:
        return "(empty)"
    if values.dtype.kind == "M":  # datetimes without the nanosecond digits
        import pandas as pd

        first, last = (pd.Timestamp(values[k]) for k in (0, -1))
        return f"{first} .. {last} ({values.size} values)"
    if values.dtype.kind in "OUS" or values.size <= 4:
        shown = ", ".join(str(v) for v in values[:6])
        return shown + (", ..." if values.size > 6 else "")
    return f"{values[0]} .. {values[-1]} ({values.size} values)"


def _short(params: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in params.items() if v is not None) or "-"

